#!/usr/bin/env bash
# The GPU measurements behind BENCHMARKS.md, in stages that each fit one 10-minute device call:
#   bash benchmarks/h200_session.sh STAGE OUTDIR
# Stages: a (GPU tests with pinned configs; bf16 GEMM full benchmark on Llama-3.1 8B and 70B),
# b (fp8 GEMM each scaling, grouped GEMM, fp8 quantisation), spread (quick-harness run-to-run spread;
# benchmarks/harness_session.sh measures it with the back-to-back harness, and the A/A floor),
# training (custom ops, CUDA graphs and compile on the GPU; host cost per call; a training step),
# analyze (the machine's ceilings, then `git campaign analyze` with Nsight Compute on a bf16 GEMM
# and a blockwise fp8 GEMM campaign, in a scratch clone), vendor-table (our GEMMs against the vendor's
# best path, one run per op family, and the quantisers against a device copy).
set -uo pipefail
stage=$1
out=${2:-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
log() { echo "== $* ($(date -u +%FT%TZ))"; }
versions() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'
}
pinned() {
  # One config per kernel: GPU correctness tests without minutes of autotuning per new shape.
  env KERNELS_GEMM_CONFIG=BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3 \
    KERNELS_GROUPED_GEMM_CONFIG=BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3 \
    KERNELS_GROUPED_GEMM_DB_CONFIG=BLOCK_M=64,BLOCK_N=128,BLOCK_K=128,GROUP_M=8,num_warps=8,num_stages=3 \
    KERNELS_GEMM_FP8_CONFIG=BLOCK_M=128,BLOCK_N=128,BLOCK_K=128,GROUP_M=8,num_warps=8,num_stages=4 "$@"
}
full() {  # full() OP PRESET TIMEOUT
  log "full_bench $1 $2"
  timeout "$3" python3 benchmarks/full_bench.py --op "$1" --shapes "$2" --csv "$out/full-$1-${2%%:*}.csv" 2>&1 | tail -22
}
case $stage in
a)
  versions | tee "$out/versions.txt"
  log "GPU tests (pinned configs)"
  pinned timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels tests/test_quick_harness.py \
    2>&1 | tee "$out/gpu-tests.txt" | tail -15
  full gemm llama3.1-8b:mbs=1 170
  full gemm llama3.1-70b:mbs=1 170
  ;;
b)
  versions
  full gemm_fp8_tensorwise llama3.1-8b:mbs=1 100
  full gemm_fp8_rowwise llama3.1-8b:mbs=1 100
  full gemm_fp8_blockwise llama3.1-8b:mbs=1 100
  full grouped_gemm mixtral-8x7b:mbs=1 110
  full quantize_fp8_rowwise llama3.1-8b-quant:mbs=1 50
  full quantize_fp8_blockwise llama3.1-8b-quant:mbs=1 50
  ;;
spread)
  log "quick harness run-to-run spread: five processes of one commit, one pinned config"
  mkdir -p campaigns/spread
  python3 -c 'from gitcampaign.harness.build import frozen_harness; import sys; sys.stdout.buffer.write(frozen_harness("gemm", "triton"))' \
    > campaigns/spread/quick_test_bench.py
  cp gitcampaign/harness/ops/gemm.py campaigns/spread/op_spec.py
  python3 -c 'from gitcampaign.shapes import preset, dump_shapes; print(dump_shapes(preset("llama3.1-8b:mbs=1")[2:4]), end="")' > "$out/spread-shapes.yaml"
  for i in 1 2 3 4 5; do
    pinned timeout 100 python3 campaigns/spread/quick_test_bench.py --summary-csv "$out/spread$i.csv" --shapes-file "$out/spread-shapes.yaml" 2>&1 | tail -1
  done
  rm -rf campaigns/spread
  ;;
training)
  versions
  log "custom ops, CUDA graphs, compile (GPU tests)"
  timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_compile_and_graphs_gpu.py \
    tests/kernels/test_custom_ops.py -k "not inductor" 2>&1 | tail -4
  log "host cost per call"
  timeout "${HOST_COST_S:-300}" python3 benchmarks/host_cost.py --repeats 3 2>&1 | tee "$out/host_cost.txt" | tail -20
  [ "${PIPESTATUS[0]}" != 124 ] || echo "host cost: stopped at the stage's ${HOST_COST_S:-300} s (HOST_COST_S)"
  [ -n "${NO_STEP:-}" ] && exit 0
  log "training step"
  timeout "${STEP_S:-150}" python3 benchmarks/train_step.py --sizes "${STEP_SIZES:-llama3.1-8b}" --modes eager \
    --providers bf16,fp8-tensorwise 2>&1 | tee "$out/train_step.txt" | tail -20
  ;;
analyze)
  versions
  work=$(mktemp -d)/repo
  cp -r . "$work" && cd "$work" && git init -q -b main && git add -A && git commit -qm scratch
  git config user.name analyze && git config user.email analyze@gitcampaign.invalid
  printf -- "- {label: qkv, M: 8192, N: 6144, K: 4096}\n- {label: gate_up, M: 8192, N: 28672, K: 4096}\n" > shapes.yaml
  git add shapes.yaml && git commit -qm shapes
  for op in ${ANALYZE_OPS:-gemm gemm_fp8_blockwise}; do
    log "analyze $op"
    git checkout -q main
    python3 -m gitcampaign init "a-$op" --op "$op" --shapes shapes.yaml --metric step --target efficiency=0.9
    python3 -m gitcampaign -c "a-$op" prepare --no-hooks >/dev/null
    [ -s "$out/peaks.json" ] || timeout "${PEAKS_S:-90}" python3 -m gitcampaign -c "a-$op" calibrate --peaks --json > "$out/peaks.json"
    timeout "${ANALYZE_S:-150}" python3 -m gitcampaign -c "a-$op" analyze --ncu --json > "$out/analyze-$op.json"
    python3 -m gitcampaign -c "a-$op" show 1 2>&1 | tail -30 || true
  done
  ;;
vendor-table)
  versions | tee "$out/versions.txt"
  for op in ${VENDOR_OPS:-gemm fp8 grouped}; do
    log "best_vendor $op"
    timeout "${VENDOR_S:-200}" python3 benchmarks/best_vendor.py --op "$op" --json "$out/best_vendor_$op.json" \
      2>&1 | tee "$out/best_vendor_$op.txt" | tail -30
  done
  log "quantisers against a device copy"
  timeout 90 python3 benchmarks/dev/quant_dev.py >"$out/quant_dev.txt" 2>&1
  grep -E "of copy|device copy" "$out/quant_dev.txt"
  ;;
spec-bench)
  versions
  log "the RMSNorm example's kernel beside torch's rms_norm (one process)"
  timeout 100 python3 benchmarks/full_bench.py --op-spec examples/rmsnorm/rmsnorm_spec.py --root examples/rmsnorm \
    --shapes examples/rmsnorm/shapes-gpu.yaml --csv "$out/rmsnorm-full.csv" 2>&1 | tail -8
  ;;
*) echo "unknown stage $stage"; exit 3 ;;
esac
