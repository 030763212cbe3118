#!/usr/bin/env bash
# The CUDA example (examples/cuda_extension: an nvcc-built float32 GEMM, bound with
# torch.utils.cpp_extension) taken through a whole campaign on one GPU, in one device call of about
# six minutes on an H200:
#   bash benchmarks/cuda_example.sh OUTDIR
# A scratch git repository gets the example, then `git campaign` init -> prepare -> baseline ->
# three rounds -> report, measured through its op spec (sgemm_spec.py: the frozen harness with every
# run-time check, and the training probe), with build_command (nvcc via setup.py, in place),
# test_command (pytest, the K-tail and M = 1 cases) and acceptance_command (the whole suite):
#   round 2  32 x 32 shared-memory tiles                                   expected ACCEPT
#   round 3  a typo in the unrolled inner product: nvcc fails              expected REJECT build_failed
#   round 4  the K loop stops before the tail, committed with --no-verify  expected REJECT tests_failed
# OUTDIR gets: versions.txt, campaign.log (every command's output), REPORT.md, verdicts.yaml (every
# verdict note), git-log.txt (the lineage as plain `git log` shows it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-8}
export GITCAMPAIGN_PYTHON=$(command -v python3)  # what the installed hooks run
campaign() { python3 -m gitcampaign "$@"; }
log() { echo "== $* ($(date -u +%FT%TZ))"; }

python3 -c 'import git, click, yaml, tabulate, pytest, torch; assert torch.cuda.is_available()' || {
  echo "needs a CUDA build of torch and gitcampaign's dependencies (pip install -e '.[dev]')"
  exit 2
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  nvcc --version | tail -2
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$out/versions.txt"

work=$(mktemp -d)/sgemm
cp -r "$repo/examples/cuda_extension" "$work"
cd "$work"
git init -q -b main
git config user.name "cuda example"
git config user.email "cuda-example@gitcampaign.invalid"
git add .
git commit -q -m "A float32 CUDA GEMM extension, one thread per output"

# edit NAME: the round's one change to csrc/sgemm.cu
edit() {
  python3 - "$1" <<'EOF'
import sys
from pathlib import Path

source = Path("csrc/sgemm.cu")
text = source.read_text()
TILED = """namespace {

constexpr int kTile = 32;

__global__ void sgemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                             std::int64_t m, std::int64_t n, std::int64_t k) {
  // A 32 x 32 tile of A and of B in shared memory per step of K: each global load is reused 32 times.
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int ty = threadIdx.y, tx = threadIdx.x;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * kTile + ty;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kTile + tx;
  float acc = 0.0f;
  for (std::int64_t p0 = 0; p0 < k; p0 += kTile) {
    a_tile[ty][tx] = (row < m && p0 + tx < k) ? a[row * k + p0 + tx] : 0.0f;
    b_tile[ty][tx] = (p0 + ty < k && col < n) ? b[(p0 + ty) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kTile; ++q) acc += a_tile[ty][q] * b_tile[q][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

}  // namespace"""
edits = {
    "tiled": (text[text.index("namespace {") : text.index("}  // namespace") + len("}  // namespace")], TILED),
    "typo": ("acc += a_tile[ty][q] * b_tile[q][tx];", "acc += a_tile[ty][q] * b_tile[qq][tx];"),
    "no-tail": ("p0 < k; p0 += kTile", "p0 + kTile <= k; p0 += kTile"),
}
old, new = edits[sys.argv[1]]
assert text.count(old) == 1, f"csrc/sgemm.cu does not hold the text edit {sys.argv[1]} replaces"
source.write_text(text.replace(old, new))
EOF
}

# round HYPOTHESIS EDIT [--no-verify]: open the round, make the one change, commit, validate
round() {
  log "round: $1"
  campaign round -m "$1"
  edit "$2"
  git commit -q ${3:-} -am "$2: $1" -m "Hypothesis: $1" -m "Change: csrc/sgemm.cu ($2)"
  campaign validate || true
}

{
  log "init"
  campaign init sgemm --op-spec sgemm_spec.py --backend cuda --shapes shapes.yaml \
    --build-command "python setup.py -q build_ext --inplace" \
    --test-command "python -m pytest -q test_sgemm.py" \
    --acceptance-command "python -m pytest -q" \
    --gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" --pairs 3 --max-iterations 3
  log "prepare"
  campaign prepare
  log "baseline"
  campaign baseline
  round "32x32 shared-memory tiles reuse each global load 32 times" tiled
  # The pre-commit hook builds and would stop these two; an agent skipping it is what validate is for.
  round "unroll the inner product (with a typo)" typo --no-verify
  round "stop the K loop before the tail: no bounds checks in the loads" no-tail --no-verify
  log "report"
  campaign report
  log "lineage"
  campaign log
  cat campaigns/sgemm/REPORT.md
  log "done"
} 2>&1 | tee "$out/campaign.log"

cp campaigns/sgemm/REPORT.md "$out/REPORT.md"
git log --all --format=%H | while read -r commit; do
  git notes --ref refs/notes/campaign/verdict show "$commit" 2>/dev/null || true
done >"$out/verdicts.yaml"
git log campaign/sgemm/main >"$out/git-log.txt"
