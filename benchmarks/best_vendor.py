"""Our GEMMs against the vendor's best path, one op family a run, every shape in one process:

    python3 benchmarks/best_vendor.py --op gemm|fp8|grouped [--rounds 3] [--json OUT.json]
    python3 benchmarks/best_vendor.py --op gemm|fp8|grouped --smoke   # CPU, tiny: the script runs

Each shape's sides (ours and each vendor path) are timed in turn, in ABBA order round by round
(A B C, C B A, ...), each a `triton.testing.do_bench` median (L2 cleared before every call); a side's
figure is the median of its rounds. A speedup is the vendor's ms over ours (> 1: ours is faster). A
step is forward + `torch.autograd.grad` of both operands; backward = step - forward. Before timing,
each shape's outputs and gradients are checked against the first vendor's by SNR. The header has
NVML's SM clock at the start (idle, as a rule), the last line the clocks each side was timed at
(the harness's GpuMonitor, sampling while do_bench runs). A shape's line ends with the sides that
are host-bound: the host takes 0.9 of their figure or more to issue one call with the GPU idle, so
do_bench timed the host (on 12-06 the fp8 steps' o shape on some H100s), and the JSON has each
side's time to issue a call as NAME_host.

- `gemm`: bf16 `gemm` against `F.linear` (cuBLAS), Llama-3.1-8B qkv, o, gate_up, down at M = 8192.
- `fp8`: `gemm_fp8`'s whole op (quantisers and GEMMs) at each granularity, its step against cuBLAS
  bf16's step, and against the best vendor composition a training stack would use: torch's
  reference quantiser under torch.compile (Inductor) feeding `torch._scaled_mm` (fast accumulation),
  or cuBLAS block scaling for blockwise (benchmarks/vendor.py). For blockwise also each product
  kernel alone on pre-quantised operands against cuBLAS block scaling.
- `grouped`: `grouped_gemm`'s step on Mixtral-8x7B's experts (8, 8192 routed rows) under each
  routing, against `torch._grouped_mm` and against one dense `F.linear` of the same FLOPs.

The fp8 quantiser against a device copy is benchmarks/dev/quant_dev.py's (GPU time on a CUDA-graph
ring, and do_bench's); `bash benchmarks/h200_session.sh vendor-table OUT` runs all four. Needs a CUDA
GPU, except with `--smoke`: Triton's interpreter on the CPU, two tiny shapes, wall-clock times that mean nothing, float32 for the bf16 ops (the interpreter computes bf16
dots on raw bits), the compiled quantiser through aot_eager (no C++ toolchain), and an fp8
disagreement printed, not fatal (the interpreter rounds fp8 casts its own way).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT.parent), str(ROOT)]

SNR_FLOOR_DB = {"bf16": 40.0, "fp8": 20.0}  # ours against the vendor: bf16 rounding, fp8 formats
Call = Callable[[], object]


@dataclass(frozen=True)
class Setting:
    """Where a run measures: the GPU, or the CPU smoke."""

    smoke: bool = False

    @property
    def device(self) -> str:
        return "cpu" if self.smoke else "cuda"

    @property
    def wide(self) -> Any:
        """The dtype of the bf16 ops' operands (float32 in the interpreter)."""
        import torch

        return torch.float32 if self.smoke else torch.bfloat16

    @property
    def compile_backend(self) -> str:
        return "aot_eager" if self.smoke else "inductor"


RUN = Setting()
# A side whose host takes this share of its figure or more to issue one call is timed by the host.
HOST_BOUND = 0.9


def ms(call: Call) -> float:
    if RUN.smoke:
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3
    import triton

    from gitcampaign.harness.clock import median_sm_mhz

    with monitor().recording() as samples:
        result = float(triton.testing.do_bench(call, warmup=25, rep=100))
    clock = median_sm_mhz(samples)
    if clock is not None:
        SM_MHZ.append(clock)
    return result


SM_MHZ: list[float] = []  # the median SM clock while each side was timed


@functools.cache
def monitor() -> Any:
    """The harness's NVML sampler (SM clock, power, temperature); its handle is None without NVML."""
    import torch

    from gitcampaign.harness.clock import GpuMonitor

    return GpuMonitor(torch.device("cuda", torch.cuda.current_device()))


def clock_line() -> str:
    """The SM clocks the sides were timed at: the steady clock of the figures."""
    if not SM_MHZ:
        return f"SM clock while timing: not read ({monitor().unavailable or 'no samples'})"
    low, middle, high = min(SM_MHZ), statistics.median(SM_MHZ), max(SM_MHZ)
    return (
        f"SM clock while timing, the median of each of {len(SM_MHZ)} timed sides: {low:.0f}-{high:.0f} MHz,"
        f" median {middle:.0f} (NVML)"
    )


def host_ms(call: Call) -> float:
    """The host's milliseconds to issue one call, the GPU idle before it (the median of five)."""
    import torch

    def synchronize() -> None:
        if RUN.device == "cuda":
            torch.cuda.synchronize()

    issued = []
    for _ in range(5):
        synchronize()
        start = time.perf_counter()
        call()
        issued.append(time.perf_counter() - start)
    synchronize()
    return statistics.median(issued) * 1e3


def timed(sides: dict[str, Call], rounds: int) -> dict[str, float]:
    """Each side's median over `rounds` do_bench medians, the order reversed every round, and as
    NAME_host the host's time to issue one call (`host_ms`)."""
    names = list(sides)
    for name in names:
        sides[name]()  # autotuning and compilation, outside the timing
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            times[name].append(ms(sides[name]))
    return {
        **{name: statistics.median(values) for name, values in times.items()},
        **{f"{name}_host": host_ms(sides[name]) for name in names},
    }


def host_bound(row: dict[str, Any]) -> str:
    """The sides whose host takes HOST_BOUND or more of their figure to issue a call, with that
    time: do_bench's interval then holds the host's time, not the GPU's."""
    sides = [
        f"{key.removesuffix('_host')} {float(value):.3f}"
        for key, value in row.items()
        if key.endswith("_host") and float(value) >= HOST_BOUND * float(row[key.removesuffix("_host")])
    ]
    return f"  host-bound (ms to issue a call): {', '.join(sides)}" if sides else ""


def step(linear: Callable[..., Any], *args: Any) -> Call:
    """Forward and both gradients; the output gradient is drawn once, outside the timing."""
    import torch

    a, b = args[0], args[1]
    out = linear(*args)
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(linear(*args), (a, b), grad)


def snr(reference: Any, result: Any) -> float:
    from gitcampaign.harness.checks import snr_db

    return float(snr_db(reference, result))


def checked(label: str, ours: Callable[..., Any], vendor: Callable[..., Any], args: tuple, kind: str) -> None:
    """Stop the run where ours and the vendor compute different things: a speedup of a wrong result
    is no speedup."""
    import torch

    a, b = args[0], args[1]
    results = []
    for linear in (ours, vendor):
        out = linear(*args)
        torch.manual_seed(1)
        grad = torch.randn_like(out)
        results.append((out, *torch.autograd.grad(out, (a, b), grad)))
    values = [snr(ref, got) for ref, got in zip(results[1], results[0], strict=True)]
    cells = " ".join(f"{name} {value:.1f}" for name, value in zip(("out", "dA", "dB"), values, strict=True))
    print(f"  {label}: SNR dB against the vendor {cells}", flush=True)
    if min(values) < SNR_FLOOR_DB[kind]:
        if not (RUN.smoke and kind == "fp8"):
            sys.exit(f"{label}: ours and the vendor disagree (SNR under {SNR_FLOOR_DB[kind]} dB); no timing")
        print(f"  {label}: disagree (the interpreter's fp8 casts); timed all the same, as a smoke")


def llama_layers() -> list[tuple[str, int, int, int]]:
    from gitcampaign.shapes import preset

    if RUN.smoke:
        return [("qkv", 128, 256, 128), ("o", 128, 128, 128)]
    return [
        (shape.label.split("-")[2], shape.M, shape.N or 0, shape.K) for shape in preset("llama3.1-8b:mbs=1")
    ]


def mixtral_experts() -> list[tuple[str, int, int, int, int, str]]:
    """(label, routed rows, N, K, experts, routing) of Mixtral-8x7B's expert GEMMs."""
    from gitcampaign.shapes import preset

    if RUN.smoke:
        return [
            ("gate_up-uniform", 128, 128, 64, 4, "uniform"),
            ("down-hot_half", 128, 64, 128, 4, "hot_half"),
        ]
    return [
        (shape.label.removeprefix("mixtral-8x7b-").replace("-mbs1", ""), shape.M, shape.N or 0, shape.K)
        + (shape.B or 1, str(shape.dist))
        for shape in preset("mixtral-8x7b:mbs=1")
    ]


def operands(m: int, n: int, k: int, dtype: Any) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, device=RUN.device, dtype=dtype, requires_grad=True)
    b = (torch.randn(n, k, device=RUN.device, dtype=dtype) / math.sqrt(k)).requires_grad_()
    return a, b


def run_gemm(rounds: int) -> list[dict[str, Any]]:
    import torch.nn.functional as F

    from kernels.gemm import gemm

    rows = []
    for name, m, n, k in llama_layers():
        a, b = operands(m, n, k, RUN.wide)
        checked(name, gemm, F.linear, (a, b), "bf16")
        t = timed(
            {
                "ours_fwd": functools.partial(gemm, a, b),
                "cublas_fwd": functools.partial(F.linear, a, b),
                "ours_step": step(gemm, a, b),
                "cublas_step": step(F.linear, a, b),
            },
            rounds,
        )
        rows.append({"shape": name, "flops": 6 * m * n * k, **t})
    return rows


def run_fp8(rounds: int) -> list[dict[str, Any]]:
    import torch
    import torch.nn.functional as F
    import vendor

    from kernels import gemm_fp8 as fp8

    # One compiled quantiser per operand layout, kind and format: a few dozen here, not dynamo's 8.
    torch._dynamo.config.recompile_limit = 256
    rows = []
    for granularity in fp8.GRANULARITIES:
        print(f"-- {granularity}: vendor product {fp8.reference_kind(granularity)}", flush=True)

        def ours(a: Any, b: Any, g: str = granularity) -> Any:
            return fp8.gemm_fp8(a, b, g)

        def best(a: Any, b: Any, g: str = granularity) -> Any:
            return vendor.scaled_mm_linear(a, b, g, RUN.compile_backend)

        for name, m, n, k in llama_layers():
            a, b = operands(m, n, k, torch.bfloat16)
            checked(f"{granularity} {name}", ours, best, (a, b), "fp8")
            t = timed(
                {
                    "ours_step": step(ours, a, b),
                    "best_step": step(best, a, b),
                    "cublas_bf16_step": step(F.linear, a, b),
                },
                rounds,
            )
            row = {"granularity": granularity, "shape": name, "flops": 6 * m * n * k, **t}
            if granularity == "blockwise":
                row.update(product_kernels(a, b, rounds))
            rows.append(row)
    return rows


def product_kernels(a: Any, b: Any, rounds: int) -> dict[str, float]:
    """Blockwise: each GEMM kernel alone on pre-quantised operands (forward, dA, dB) against cuBLAS's
    block scaling, as the op quantises them."""
    import torch
    import vendor

    a_, b_ = a.detach(), b.detach()
    grad = torch.randn(a_.shape[0], b_.shape[0], device=a_.device, dtype=a_.dtype)
    products = vendor.Products(a_, b_, grad, "blockwise")
    row = {}
    for product in products.items:
        t = timed({"ours": products.ours(product), "cublas": products.vendor(product)}, rounds)
        row[f"kernel_{product}_ours"], row[f"kernel_{product}_cublas"] = t["ours"], t["cublas"]
    return row


def run_grouped(rounds: int) -> list[dict[str, Any]]:
    import torch
    import torch.nn.functional as F
    import vendor

    from gitcampaign.harness.routing import make_group_sizes
    from kernels.grouped_gemm import grouped_gemm

    rows = []
    for label, m, n, k, groups, routing in mixtral_experts():
        sizes = make_group_sizes(routing, m, groups, generator=torch.Generator().manual_seed(0)).to(
            RUN.device
        )
        a, w = operands(m, n, k, RUN.wide)
        b = (torch.randn(groups, n, k, device=RUN.device, dtype=RUN.wide) / math.sqrt(k)).requires_grad_()

        def ours(x: Any, y: Any, sizes: Any = sizes) -> Any:
            return grouped_gemm(x, y, sizes)

        def torch_grouped(x: Any, y: Any, sizes: Any = sizes) -> Any:
            return vendor.grouped_mm(x, y, sizes)

        checked(label, ours, torch_grouped, (a, b), "bf16")
        t = timed(
            {
                "ours_step": step(ours, a, b),
                "grouped_mm_step": step(torch_grouped, a, b),
                "dense_step": step(F.linear, a, w),
            },
            rounds,
        )
        rows.append({"shape": label, "flops": 6 * m * n * k, **t})
    return rows


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values))


def backward_speedup(row: dict[str, Any]) -> str:
    """cuBLAS's backward ms over ours, each a step less its forward; "unresolved" where a step
    reads no longer than its forward, so the difference is noise and no time of its own."""
    vendor = float(row["cublas_step"]) - float(row["cublas_fwd"])
    ours = float(row["ours_step"]) - float(row["ours_fwd"])
    return f"{vendor / ours:.3f}" if vendor > 0 and ours > 0 else "unresolved (a step <= its forward)"


def report(op: str, rows: list[dict[str, Any]]) -> None:
    """One line a shape: each side's ms, the speedups (vendor / ours), and geomeans at the end."""

    def speed(row: dict[str, Any], vendor: str, ours: str = "ours_step") -> float:
        return float(row[vendor]) / float(row[ours])

    columns = {
        "gemm": [("fwd", "cublas_fwd", "ours_fwd"), ("step", "cublas_step", "ours_step")],
        "fp8": [
            ("vs cuBLAS bf16", "cublas_bf16_step", "ours_step"),
            ("vs best fp8", "best_step", "ours_step"),
        ],
        "grouped": [
            ("vs dense", "dense_step", "ours_step"),
            ("vs _grouped_mm", "grouped_mm_step", "ours_step"),
        ],
    }[op]
    by_group: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(str(row.get("granularity", op)), []).append(row)
    for group, group_rows in by_group.items():
        print(f"\n{group}: ms, and speedup = vendor ms / ours (> 1: ours faster)")
        for row in group_rows:
            times = " ".join(
                f"{key} {value:.3f}" for key, value in row.items() if key.endswith(("_step", "_fwd"))
            )
            tflops = float(row["flops"]) / float(row["ours_step"]) / 1e9
            cells = "  ".join(f"{title} {speed(row, vendor, ours):.3f}" for title, vendor, ours in columns)
            if op == "gemm":
                cells += f"  bwd {backward_speedup(row)}"
            kernels = [
                key.split("_")[1] for key in row if key.startswith("kernel_") and key.endswith("_ours")
            ]
            for product in kernels:
                ours_ms, cublas_ms = (
                    float(row[f"kernel_{product}_ours"]),
                    float(row[f"kernel_{product}_cublas"]),
                )
                cells += f"  kernel {product} {ours_ms:.3f}/{cublas_ms:.3f}={cublas_ms / ours_ms:.3f}"
            print(f"  {row['shape']:<22} {times}  ours {tflops:.0f} TFLOP/s step  {cells}{host_bound(row)}")
        means = "  ".join(
            f"{title} {geomean([speed(row, vendor, ours) for row in group_rows]):.3f}"
            for title, vendor, ours in columns
        )
        print(f"  geomean: {means}")


def header(args: argparse.Namespace) -> None:
    """The machine, versions, SM clock, date and command, before any figure."""
    import torch
    import triton

    if RUN.smoke:
        where = "CPU (smoke: Triton interpreter, figures mean nothing)"
    else:
        # NVML's reading at the start, the GPU idle as a rule; the last line has the clocks under load.
        clock = f"; SM clock {monitor().sample()[0]:.0f} MHz at start" if monitor().handle is not None else ""
        where = f"{torch.cuda.get_device_name()}{clock}"
    print(
        f"best_vendor --op {args.op}: {where}; torch {torch.__version__}, triton {triton.__version__},"
        f" CUDA {torch.version.cuda}"
    )
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.rounds} rounds a shape, medians")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}", flush=True)


def main(argv: list[str] | None = None) -> int:
    global RUN
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", required=True, choices=("gemm", "fp8", "grouped"))
    parser.add_argument(
        "--rounds", type=int, default=3, help="ABBA rounds a shape; each side's median is kept"
    )
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, one round (a CI check)")
    args = parser.parse_args(argv)
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels define their kernels
        RUN, args.rounds = Setting(smoke=True), 1
    import torch

    if not args.smoke and not torch.cuda.is_available():
        sys.exit("best_vendor.py times on a CUDA GPU; none is visible here (--smoke runs on the CPU)")
    header(args)
    rows = {"gemm": run_gemm, "fp8": run_fp8, "grouped": run_grouped}[args.op](args.rounds)
    report(args.op, rows)
    if not args.smoke:
        print(clock_line())
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
