#!/usr/bin/env bash
# Wall time of one 4-shape validation on 1 GPU vs `--gpus 0,1`, and the decision on a planted gain.
#   bash benchmarks/multi_gpu_timing.sh OUTDIR        (on a machine with 2 GPUs of one model)
#   REPS (calls per shape per process), BASELINE_PAIRS and RUNS (see below) fit it to a time budget.
#
# A scratch campaign whose "kernel" is a cuBLAS GEMM plus a planted extra GEMM over 5% of the rows;
# the round removes it (about 5% less work). The same round commit is validated from copies of one repo:
# 1 GPU, 2 GPUs, 1 GPU, 2 GPUs (alternating, so drift hits both). Each harness process times
# REPS calls per shape; the 2-GPU gain over 1 GPU needs shape work to dominate process start-up.
set -euo pipefail
out=$(realpath -m "${1:-out}")
reps=${REPS:-3000}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
campaign() { python3 -m gitcampaign "$@"; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
proj=$scratch/proj

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "reps per shape per process: $reps"
} | tee "$out/versions.txt"

mkdir -p "$proj" && cd "$proj"
git init -q -b main
git config user.name bench && git config user.email bench@example.invalid
cat > kernel.py <<'EOF'
import torch
EXTRA = 0.05  # the planted slowdown: a second GEMM over this share of the rows


def gemm(a, b):
    out = a @ b.T
    if EXTRA:
        # Whole rows, so the extra GEMM runs as efficiently as the main one and costs about EXTRA
        # (a slice of K costs far more: 29% for 5% of K on the H200). alpha tiny, not 0: BLAS may
        # skip the product when alpha is 0; this adds nothing to bf16 `out`.
        m = max(1, int(a.shape[0] * EXTRA))
        out[:m].addmm_(a[:m], b.T, alpha=1e-30)
    return out
EOF
cat > bench.py <<EOF
import argparse, math, statistics, time
from pathlib import Path
import torch, yaml
import kernel
from gitcampaign.constants import GEMM_HEADER
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: only to dry-run this script


def per_call_ms(fn, calls):
    """Mean of calls back to back (the sustained state), by device events on the GPU."""
    if DEVICE == "cpu":
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) * 1e3 / calls
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


p = argparse.ArgumentParser()
p.add_argument("--summary-csv", required=True)
p.add_argument("--shapes-file", required=True)
args = p.parse_args()
lines = [GEMM_HEADER]
for s in yaml.safe_load(Path(args.shapes_file).read_text()):
    M, N, K = s["M"], s["N"], s["K"]
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    a = torch.randn(M, K, device=DEVICE, dtype=dtype)
    b = torch.randn(N, K, device=DEVICE, dtype=dtype)
    ref = a.double() @ b.double().T
    out = kernel.gemm(a, b).double()
    snr = 10 * math.log10(ref.pow(2).sum().item() / max((ref - out).pow(2).sum().item(), 1e-30))
    per_call_ms(lambda: kernel.gemm(a, b), 50)  # warm-up
    times = [per_call_ms(lambda: kernel.gemm(a, b), 100) for _ in range(max(1, $reps // 100))]
    ms = statistics.median(times)
    tflops = [2 * M * N * K / (t * 1e-3) / 1e12 for t in times]
    check = "PASS" if snr >= 40 else "FAIL"
    lines.append(f"{s['label']},1,{M},{N},{K},{check},{2*M*N*K/(ms*1e-3)/1e12:.6g},{statistics.pstdev(tflops):.6g},nan,nan,{ms:.6g},nan,{snr:.2f},nan,nan")
Path(args.summary_csv).write_text("\n".join(lines) + "\n")
EOF
scale=${SCALE:-1}  # 64 shrinks the shapes for a CPU dry run
python3 - "$scale" > shapes.yaml <<'EOF'
import sys
s = int(sys.argv[1])
for label, m, n, k in (("sq-8k", 8192, 8192, 8192), ("wide", 8192, 28672, 4096), ("deep", 8192, 4096, 14336), ("qkv", 8192, 6144, 4096)):
    print(f"- {{label: {label}, M: {m // s}, N: {n // s}, K: {k // s}}}")
EOF
echo 'import kernel, torch; a = torch.randn(64, 64); assert torch.allclose(kernel.gemm(a, a), a @ a.T)' > test_kernel.py
git add . && git commit -q -m "planted GEMM project"
campaign init mg --op planted_gemm --metric forward --shapes shapes.yaml --quick-command "python bench.py" \
  --test-command "python test_kernel.py" --probe-command "" --kernel-source kernel.py --pairs 3 >/dev/null
campaign prepare --no-hooks >/dev/null
campaign baseline --pairs "${BASELINE_PAIRS:-3}" | tail -3
campaign round -m "drop the planted extra GEMM" >/dev/null
sed -i 's/^EXTRA = 0.05/EXTRA = 0.0/' kernel.py
git commit -q -am "Hypothesis: the extra GEMM costs 5%
Change: EXTRA = 0"

run() {  # run NAME GPUS: validate all 4 shapes in a copy of the repo, print seconds and decision
  cp -a "$proj" "$scratch/$1"
  local start end
  start=$(date +%s.%N)
  (cd "$scratch/$1" && campaign validate --full --no-probe --gpus "$2" --json > "$out/$1.json")
  end=$(date +%s.%N)
  python3 - "$1" "$2" "$start" "$end" "$out/$1.json" <<'EOF' | tee -a "$out/multi_gpu.txt"
import json, sys
name, gpus, start, end, path = sys.argv[1:]
r = json.load(open(path))
print(f"{name}: --gpus {gpus}: {float(end) - float(start):.1f} s, {r['decision']}, ratio {r['ratio']:.4f}, CI {r['ci']}")
EOF
}
: > "$out/multi_gpu.txt"
# RUNS: NAME:GPUS in order (default alternates 1 and 2 GPUs, so drift hits both)
for spec in ${RUNS:-one-a:0 two-a:0,1 one-b:0 two-b:0,1}; do
  run "${spec%%:*}" "${spec#*:}"
done
python3 - "$out/multi_gpu.txt" <<'EOF' | tee -a "$out/multi_gpu.txt"
import re, sys
rows = [re.match(r"(\w+)-\w: --gpus \S+: ([\d.]+) s, (\w+)", line).groups() for line in open(sys.argv[1])]
one = [float(s) for n, s, _ in rows if n == "one"]
two = [float(s) for n, s, _ in rows if n == "two"]
decisions = {d for _, _, d in rows}
if one and two:  # RUNS may hold one kind only
    print(f"2-GPU / 1-GPU wall time: {sum(two) / sum(one):.3f} (target <= 0.6); decisions: {sorted(decisions)}")
EOF
