"""Quick harness of the C++ matmul: `python bench.py --summary-csv OUT.csv --shapes-file SHAPES.yaml`.

Writes the frozen GEMM CSV (forward only: backward columns NaN). Fresh random inputs for every
timed call, two warm-up calls, the median over repeats, the population stddev of the per-call
TFLOPS, SNR against a float64 reference. It names the compiled module it loaded on stderr, so the
run logs show which tree's build each process measured.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import matmulext
import torch
import yaml
from matmulext import _C, matmul

HEADER = (
    "label,B,M,N,K,Check,Forward TFLOPS,Forward TFLOPS_stddev,Backward TFLOPS,"
    "Backward TFLOPS_stddev,Forward Time (ms),Backward Time (ms),out_snr,da_snr,db_snr"
)
MIN_SNR_DB = 100.0  # float32 accumulation against float64: about 130 dB on these shapes
REPEATS = int(os.environ.get("BENCH_REPEATS", "9"))


def measure(shape: dict[str, int], generator: torch.Generator) -> str:
    m, n, k = shape["M"], shape["N"], shape["K"]
    try:
        a, b = torch.randn(m, k, generator=generator), torch.randn(k, n, generator=generator)
        ref = a.double() @ b.double()
        out = matmul(a, b).double()
        snr = 10 * math.log10(ref.pow(2).sum().item() / max((out - ref).pow(2).sum().item(), 1e-300))
        for _ in range(2):
            matmul(a, b)
        times = []
        for _ in range(REPEATS):
            a, b = torch.randn(m, k, generator=generator), torch.randn(k, n, generator=generator)
            start = time.perf_counter_ns()
            matmul(a, b)
            times.append((time.perf_counter_ns() - start) * 1e-6)
    except Exception as exc:  # the row is kept as ERROR, metrics NaN
        print(f"{shape['label']}: {exc!r}", file=sys.stderr)
        return f"{shape['label']},1,{m},{n},{k},ERROR" + ",nan" * 9
    tflops = [2 * m * n * k / (ms * 1e-3) / 1e12 for ms in times]
    check = "PASS" if snr >= MIN_SNR_DB else "FAIL"
    ms = statistics.median(times)
    return (
        f"{shape['label']},1,{m},{n},{k},{check},{2 * m * n * k / (ms * 1e-3) / 1e12:.6g},"
        f"{statistics.pstdev(tflops):.6g},nan,nan,{ms:.6g},nan,{snr:.2f},nan,nan"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--summary-csv", required=True)
    parser.add_argument("--shapes-file", required=True)
    args = parser.parse_args()
    print(f"bench: matmulext from {Path(matmulext.__file__).parent}, kernel {_C.__file__}", file=sys.stderr)
    torch.set_num_threads(1)
    shapes = yaml.safe_load(Path(args.shapes_file).read_text())
    generator = torch.Generator().manual_seed(0)
    rows = [measure(shape, generator) for shape in shapes]
    Path(args.summary_csv).write_text("\n".join([HEADER, *rows]) + "\n")
    return 0 if all(",PASS," in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
