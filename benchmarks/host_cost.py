"""Host cost per call: each public kernel function against the vendor path for the same call, at a
size where the GPU's share is negligible (256 x 256 x 256 by default), forward and forward+backward.

    python benchmarks/host_cost.py                      # every op on the GPU
    python benchmarks/host_cost.py --ops gemm,gemm_fp8-tensorwise --calls 5000
    KERNELS_FAST_LAUNCH=0 python benchmarks/host_cost.py  # Triton's own launch path, to compare
    python benchmarks/host_cost.py --smoke               # CPU, tiny, a few calls: the script runs

Two figures per provider, each the median over --repeats rounds of --calls calls:
- back to back: the calls issued one after another and one synchronize at the end, divided by the
  calls: the wall time a call costs as the host sees it when it runs ahead of nothing (at this size
  the GPU finishes each call before the host has issued the next, so this is the host's cost);
- synchronised: a synchronize after every call, so each call's launch latency and GPU time count
  too: what a step that waits on every result sees.
"ratio" is ours over the vendor's back-to-back figure; issue 38 asks for <= 1.5 on every row.

Forward calls take inputs that need no gradient; forward+backward calls take leaves that do, run
`out.backward(grad)` and drop the gradients before the next call, for both providers alike.
The vendor paths are in benchmarks/vendor.py (F.linear; the torch reference quantiser feeding
torch._scaled_mm; torch._grouped_mm; torch's reference quantiser for quantize_fp8).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
OPS = (
    "gemm",
    *(f"gemm_fp8-{g}" for g in GRANULARITIES),
    "grouped_gemm",
    *(f"quantize_fp8-{g}" for g in GRANULARITIES),
)
RATIO_LIMIT = 1.5


@dataclass
class Row:
    """One op and direction: per-call microseconds, back to back and synchronised, of each provider."""

    op: str
    direction: str
    ours: tuple[float, float] | str
    vendor: tuple[float, float] | str

    def cells(self) -> list[str]:
        def figures(value: tuple[float, float] | str) -> list[str]:
            return [f"{value[0]:.1f}", f"{value[1]:.1f}"] if isinstance(value, tuple) else [value, ""]

        ratio = ""
        if isinstance(self.ours, tuple) and isinstance(self.vendor, tuple):
            ratio = f"{self.ours[0] / self.vendor[0]:.2f}" + (
                " over" if self.ours[0] > RATIO_LIMIT * self.vendor[0] else ""
            )
        return [self.op, self.direction, *figures(self.ours), *figures(self.vendor), ratio]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", type=int, default=256, help="M = N = K (rows a group x groups for grouped_gemm)"
    )
    parser.add_argument("--calls", type=int, default=1000, help="calls a round")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the median is reported")
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {', '.join(OPS)}")
    parser.add_argument(
        "--smoke", action="store_true", help="CPU, size 32, 3 calls, 1 round: the script runs"
    )
    args = parser.parse_args(argv)
    unknown = set(args.ops.split(",")) - set(OPS)
    if unknown:
        parser.error(f"unknown ops {', '.join(sorted(unknown))}; choose from {', '.join(OPS)}")
    if args.smoke:
        args.size, args.calls, args.repeats = 32, 3, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels define their kernels
    sys.path.insert(0, str(REPO_ROOT))
    import torch

    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("host_cost: no CUDA device; run with --smoke for the CPU check", file=sys.stderr)
        return 2
    rows = []
    for op in args.ops.split(","):
        print(f"host_cost: measuring {op} ...", file=sys.stderr, flush=True)  # where a time limit stopped it
        measured = measure(op, args, device)
        for row in measured:  # kept if a later op is cut
            print("  done:", *row.cells(), file=sys.stderr, flush=True)
        rows += measured
    print_report(rows, args, device)
    return 0


def _timer(device: str) -> Callable[[Callable[[], object], int], tuple[float, float]]:
    import torch

    def synchronize() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def per_call(call: Callable[[], object], calls: int) -> tuple[float, float]:
        """(back to back, synchronised) microseconds a call, one round."""
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        synchronize()
        back_to_back = (time.perf_counter() - start) / calls
        start = time.perf_counter()
        for _ in range(calls):
            call()
            synchronize()
        synchronised = (time.perf_counter() - start) / calls
        return back_to_back * 1e6, synchronised * 1e6

    return per_call


def _median_of_rounds(
    call: Callable[[], object], args: argparse.Namespace, device: str
) -> tuple[float, float] | str:
    per_call = _timer(device)
    try:
        for _ in range(3):  # autotuning, compiling, resolving the launches
            call()
        rounds = [per_call(call, args.calls) for _ in range(args.repeats)]
    except Exception as exc:  # a vendor path this torch build lacks, reported in its cell
        return f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:60]}"
    return statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)


def _forward_backward(
    function: Callable[..., object], inputs: list[object], grad: object
) -> Callable[[], object]:
    import torch

    leaves = [
        t.detach().clone().requires_grad_(t.is_floating_point()) if isinstance(t, torch.Tensor) else t
        for t in inputs
    ]

    def step() -> None:
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                leaf.grad = None
        out = function(*leaves)
        assert isinstance(out, torch.Tensor)
        out.backward(grad)

    return step


def measure(op: str, args: argparse.Namespace, device: str) -> list[Row]:
    """The rows of one op: forward, and forward+backward where the op has a gradient."""
    import torch
    import torch.nn.functional as F
    import vendor

    from kernels.gemm import gemm
    from kernels.gemm_fp8 import gemm_fp8
    from kernels.grouped_gemm import grouped_gemm
    from kernels.quant import quantize_fp8, quantize_fp8_reference

    torch.manual_seed(0)
    size = args.size
    dtype = torch.float32 if args.smoke else torch.bfloat16  # the interpreter computes bf16 dots on raw bits
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    name, _, granularity = op.partition("-")
    ours: Callable[..., object]
    theirs: Callable[..., object]
    if name == "quantize_fp8":
        rows = [
            ("forward", lambda: quantize_fp8(a, granularity), lambda: quantize_fp8_reference(a, granularity))
        ]
        return [
            Row(op, d, _median_of_rounds(o, args, device), _median_of_rounds(v, args, device))
            for d, o, v in rows
        ]
    if name == "gemm":
        ours, theirs, inputs = gemm, F.linear, [a, b]
    elif name == "gemm_fp8":
        ours = lambda x, w: gemm_fp8(x, w, granularity)  # noqa: E731
        theirs = lambda x, w: vendor.scaled_mm_linear(x, w, granularity, None)  # noqa: E731
        inputs = [a, b]
    else:  # grouped_gemm: 4 groups of `size` rows, skewed, one empty
        sizes = torch.tensor([size * 2, size, 0, size], device=device)
        experts = torch.randn(4, size, size, dtype=dtype, device=device)
        ours, theirs = grouped_gemm, vendor.grouped_mm
        inputs = [torch.randn(size * 4, size, dtype=dtype, device=device), experts, sizes]
    out_shape = ours(*inputs).shape  # type: ignore[union-attr]
    grad = torch.randn(out_shape, device=device).to(torch.bfloat16 if name == "gemm_fp8" else dtype)
    return [
        Row(op, "forward", _median_of_rounds(lambda: ours(*inputs), args, device),
            _median_of_rounds(lambda: theirs(*inputs), args, device)),
        Row(op, "forward+backward", _median_of_rounds(_forward_backward(ours, inputs, grad), args, device),
            _median_of_rounds(_forward_backward(theirs, inputs, grad), args, device)),
    ]  # fmt: skip


def print_report(rows: list[Row], args: argparse.Namespace, device: str) -> None:
    import torch
    import triton

    from kernels import _common, gemm_fp8

    gpu = (
        torch.cuda.get_device_name()
        if device == "cuda"
        else "CPU (Triton interpreter: the figures mean nothing)"
    )
    launch = "resolved once a call kind (kernels._common.launch)" if _common.fast_launch else "Triton's own"
    print(f"host cost per call, us: {gpu}; torch {torch.__version__}, triton {triton.__version__}")
    print(
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; size {args.size}; {args.calls} calls x {args.repeats} rounds, median"
    )
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}; launch path: {launch}")
    if device == "cuda":
        print("fp8 vendor products: " + "; ".join(f"{g} {gemm_fp8.reference_kind(g)}" for g in GRANULARITIES))
    header = [
        "op",
        "direction",
        "ours b2b",
        "ours sync",
        "vendor b2b",
        "vendor sync",
        f"ratio (<= {RATIO_LIMIT})",
    ]
    table = [header, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print(
            "  ".join(
                cell.rjust(width) if i > 1 else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(line, widths, strict=True))
            )
        )


if __name__ == "__main__":
    raise SystemExit(main())
