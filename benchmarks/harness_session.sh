#!/usr/bin/env bash
# The GPU measurements behind BENCHMARKS.md's harness section, in one 10-minute device call:
#   bash benchmarks/harness_session.sh OUT [STAGE...]      (default: every stage, in this order)
# Stages: gemm (agreement, bf16 GEMM; stops the session when it produced no table), agreement (the
# other ops), spread (five harness processes of one commit, A/A noise floor), calibrate (the shipped
# `git campaign calibrate` on a scratch campaign), cachetest (the address-keyed-cache GPU test).
# HARNESS_GEMM(_S), HARNESS_OPS, HARNESS_AGREEMENT_S, HARNESS_SPREAD_SHAPES, HARNESS_SPREAD_S and HARNESS_CALIBRATE_S
# narrow a session to fit what device time is left; HARNESS_ROUNDS sets the cross-check's ABBA rounds
# per shape (default 4; a gemm shape takes about 25 s a round). Each stage has a time limit, so the
# session ends inside the call and its files come back; all stages at their defaults need two calls.
set -uo pipefail
out=$1
shift
stages=${*:-gemm agreement spread calibrate cachetest}
work=/tmp/harness
mkdir -p "$work" "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# The calibrate stage runs `git campaign calibrate` itself: pin the configs harness_check.py pins.
eval "$(python3 -c 'import shlex, sys; sys.path.insert(0, "benchmarks"); from harness_check import PINNED
print("\n".join(f"export {key}={shlex.quote(value)}" for key, value in PINNED.items()))')"
gpu() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv,noheader; }
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c 'import sys, torch, triton, pynvml; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "nvidia-ml-py", getattr(pynvml, "__version__", "?"))'
} 2>&1 | tee "$out/versions.txt"
for stage in $stages; do
  echo "== $stage $(date -u +%FT%TZ) GPU: $(gpu)"
  case $stage in
  gemm)
    limit=${HARNESS_GEMM_S:-240}
    timeout "$limit" python3 benchmarks/harness_check.py agreement "$work/gemm" --ops "${HARNESS_GEMM:-gemm:1}" \
      --rounds "${HARNESS_ROUNDS:-4}" --timeout $((limit - 5))
    grep -q "^| gemm" "$work/gemm/agreement.md" 2>/dev/null || { echo "no gemm table: stopping"; break; }
    ;;
  agreement)
    ops=${HARNESS_OPS:-gemm_fp8_rowwise:1,grouped_gemm:2,quantize_fp8_rowwise:2,quantize_fp8_blockwise:2,gemm_fp8_tensorwise:1,gemm_fp8_blockwise:1}
    timeout "${HARNESS_AGREEMENT_S:-290}" python3 benchmarks/harness_check.py agreement "$work/agreement" --timeout 150 \
      --rounds "${HARNESS_ROUNDS:-4}" --ops "$ops"
    ;;
  spread)
    timeout "${HARNESS_SPREAD_S:-100}" python3 benchmarks/harness_check.py spread "$work/spread" --processes 5 --shapes "${HARNESS_SPREAD_SHAPES:-2}" --timeout 30
    ;;
  calibrate)
    repo=$work/calibrate-repo
    mkdir -p "$repo" && cp -r kernels "$repo/" && cd "$repo" || break
    python3 -c 'from gitcampaign.shapes import preset, dump_shapes; print(dump_shapes(preset("llama3.1-8b:mbs=1")[2:3]), end="")' > shapes.yaml
    git init -q -b main && git add . && git -c user.name=harness -c user.email=harness@x.invalid commit -qm kernels
    git config user.name harness && git config user.email harness@x.invalid
    python3 -m gitcampaign.cli init harness --op gemm --metric step --shapes shapes.yaml --test-command true >/dev/null &&
      python3 -m gitcampaign.cli prepare --no-hooks >/dev/null &&
      timeout "${HARNESS_CALIBRATE_S:-200}" python3 -m gitcampaign.cli calibrate --rounds "${HARNESS_ROUNDS:-4}"
    echo "exit $?"
    git log -1 --format=%H campaign/harness/main | xargs git notes --ref refs/notes/campaign/environment show > "$work/environment-note.yaml"
    cd - >/dev/null
    ;;
  cachetest)
    timeout 40 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_quick_harness.py -k address_keyed
    ;;
  esac
done
echo "== end $(date -u +%FT%TZ) GPU: $(gpu)"
tar czf "$out/work.tgz" -C "$work" --exclude=calibrate-repo .
