#!/usr/bin/env bash
# The RMSNorm example (examples/rmsnorm: a Triton RMSNorm declared by its op spec) taken through a
# campaign on one GPU, then measured beside torch's rms_norm in one run:
#   bash benchmarks/rmsnorm_example.sh OUTDIR
# A scratch git repository gets the example, then `git campaign` init -> prepare -> baseline -> two
# rounds -> report, on shapes-gpu.yaml with Backward GB/s as the primary metric:
#   round 2  the backward walks 16 row tiles a program: its fp32 dweight partials shrink 16x
#   round 3  as many tiles a program as keep two programs an SM (at most 16), chosen from M
# then `benchmarks/full_bench.py --op-spec` on the final kernel: ours and torch's, GB/s, one process.
# OUTDIR gets: versions.txt, campaign.log, REPORT.md, verdicts.yaml, full.csv and full.txt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export GITCAMPAIGN_PYTHON=$(command -v python3)  # what the installed hooks run
campaign() { python3 -m gitcampaign "$@"; }
log() { echo "== $* ($(date -u +%FT%TZ))"; }

python3 -c 'import git, click, yaml, tabulate, torch; assert torch.cuda.is_available()' || {
  echo "needs a CUDA build of torch and gitcampaign's dependencies (pip install -e '.[dev]')"
  exit 2
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} | tee "$out/versions.txt"

work=$(mktemp -d)/rmsnorm
cp -r "$repo/examples/rmsnorm" "$work"
cd "$work"
git init -q -b main
git config user.name "rmsnorm example"
git config user.email "rmsnorm-example@gitcampaign.invalid"
git add .
git commit -q -m "A Triton RMSNorm and its op spec"

# round HYPOTHESIS OLD NEW: open the round, make the one change to rmsnorm.py, commit, validate
round() {
  log "round: $1"
  campaign round -m "$1"
  python3 - "$2" "$3" <<'PY'
import sys
from pathlib import Path

source = Path("rmsnorm.py")
text = source.read_text()
assert text.count(sys.argv[1]) == 1, f"rmsnorm.py does not hold {sys.argv[1]!r}"
source.write_text(text.replace(sys.argv[1], sys.argv[2]))
PY
  git commit -q -am "$1" -m "Hypothesis: $1" -m "Change: rmsnorm.py"
  campaign validate || true
}

{
  log "init"
  campaign init rms --op-spec rmsnorm_spec.py --shapes shapes-gpu.yaml --metric bwd-gbs \
    --gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" --pairs 2 --max-iterations 2
  log "prepare"
  campaign prepare
  log "baseline"
  campaign baseline
  round "16 row tiles a backward program: the fp32 dweight partials shrink 16x" \
    "BWD_TILES_PER_PROGRAM = 1 " "BWD_TILES_PER_PROGRAM = 16 "
  round "tiles a program chosen from M, two programs an SM: the partials shrink, every SM busy" \
    "    return BWD_TILES_PER_PROGRAM" \
    "    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == 'cuda' else 1
    return max(1, min(16, m // (2 * sms * ROWS_PER_PROGRAM)))"
  log "report"
  campaign report --force || true
  log "lineage"
  campaign log
  log "ours beside torch's rms_norm (the final kernel, one process)"
  git checkout -q campaign/rms/main
  python3 "$repo/benchmarks/full_bench.py" --op-spec rmsnorm_spec.py --root . --shapes shapes-gpu.yaml \
    --csv "$out/full.csv" | tee "$out/full.txt"
  log "done"
} 2>&1 | tee "$out/campaign.log"

cp campaigns/rms/REPORT.md "$out/REPORT.md" 2>/dev/null || true
git log --all --format=%H | while read -r commit; do
  git notes --ref refs/notes/campaign/verdict show "$commit" 2>/dev/null || true
done >"$out/verdicts.yaml"
