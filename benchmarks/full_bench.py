"""Full benchmark: every target shape, our Triton kernel beside the torch reference, in one run.

    python benchmarks/full_bench.py --op gemm --shapes llama3.1-8b --csv full.csv

Its roles (`benchmark_command`, docs/design.md): pick the campaign's representative shapes and do the
final acceptance. Its numbers come from `torch.utils.benchmark.Timer` and are never compared with the
quick harness's (different timing engine); the per-round gate is `quick_test_bench.py`.

Inputs, references and correctness metrics are the quick harness's own op adapters
(`gitcampaign.templates.quick_test_bench.OPS`), so both tools run the same op on the same kind of data.

Timing: `Timer.blocked_autorange` runs a statement in blocks and reports the median per-call time.
It cannot flush L2 between calls, so each provider rotates through several input sets whose total size
exceeds 256 MB (more than any current GPU's L2): a call never finds its operands left in L2 by the call
before. The backward cannot be timed alone without keeping a graph alive across calls, so the timed
"step" is forward + `torch.autograd.grad` on fresh leaves (no gradient accumulation), and
backward time = step time - forward time.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import os
import statistics
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
ROTATION_BYTES = 256 * 1024 * 1024
MAX_INPUT_SETS = 16
PROVIDERS = ("triton", "torch")

GEMM_COLUMNS = (
    "label,B,M,N,K,provider,Forward TFLOPS,Backward TFLOPS,Combined Step TFLOPS,"
    "Forward Time (ms),Backward Time (ms),Step Time (ms),out_snr,da_snr,db_snr"
)
QUANT_COLUMNS = "label,M,K,provider,Forward GB/s,Forward Time (ms),mismatch_frac"


@dataclass
class GemmResult:
    """One provider on one GEMM-class shape; field order is GEMM_COLUMNS."""

    label: str
    B: int
    M: int
    N: int
    K: int
    provider: str
    forward_tflops: float = math.nan
    backward_tflops: float = math.nan
    step_tflops: float = math.nan
    forward_ms: float = math.nan
    backward_ms: float = math.nan
    step_ms: float = math.nan
    out_snr: float = math.nan
    da_snr: float = math.nan
    db_snr: float = math.nan


@dataclass
class QuantResult:
    """One provider on one quantisation shape; field order is QUANT_COLUMNS."""

    label: str
    M: int
    K: int
    provider: str
    forward_gbs: float = math.nan
    forward_ms: float = math.nan
    mismatch_frac: float = math.nan


@dataclass
class Bench:
    """Settings shared by every shape and provider of one run."""

    device: Any
    dtype: Any
    cuda: bool
    min_run_time: float
    forward_only: bool
    seed: int


def median_ms(call: Callable[[], Any], min_run_time: float) -> float:
    """Median milliseconds per call from torch's Timer (it synchronises CUDA around each block)."""
    from torch.utils.benchmark import Timer

    call()  # compilation and autotuning, outside the measurement
    measurement = Timer(stmt="call()", globals={"call": call}).blocked_autorange(min_run_time=min_run_time)
    return float(measurement.median) * 1e3


def input_set_count(set_bytes: int, cuda: bool) -> int:
    """Enough input sets to overflow L2 between two uses of one set (two on the CPU: no L2 to beat)."""
    if not cuda:
        return 2
    return max(2, min(MAX_INPUT_SETS, math.ceil(ROTATION_BYTES / max(set_bytes, 1))))


def bench_gemm(qtb: Any, op: Any, kernels: Any, shape: Any, provider: str, bench: Bench) -> GemmResult:
    import torch

    generator = torch.Generator(device=bench.device).manual_seed(bench.seed)
    result = GemmResult(shape.label, shape.B or 1, shape.M, shape.N, shape.K, provider)

    def fresh() -> tuple[Any, Any]:
        return (
            op.inputs(shape, generator, bench.device, bench.dtype),
            op.grad_out(shape, generator, bench.device, bench.dtype),
        )

    first = fresh()
    set_bytes = sum(t.numel() * t.element_size() for t in (*first[0].tensors(), first[1]))
    sets = [first] + [fresh() for _ in range(input_set_count(set_bytes, bench.cuda) - 1)]
    ring = itertools.cycle(sets)

    def forward() -> Any:
        inputs, _ = next(ring)
        return op.provider(kernels, inputs)()

    def step() -> Any:
        inputs, grad_out = next(ring)
        out = op.provider(kernels, inputs)()
        return torch.autograd.grad(out, (inputs.a, inputs.b), grad_out)

    forward_flops, backward_flops = op.flops(shape)
    result.forward_ms = median_ms(forward, bench.min_run_time)
    result.forward_tflops = forward_flops / result.forward_ms / 1e9
    inputs, grad_out = fresh()
    out_ref, da_ref, db_ref = op.reference(inputs, grad_out)
    out = op.provider(kernels, inputs)()
    result.out_snr = qtb.snr_db(out_ref, out)
    if not bench.forward_only:
        result.step_ms = median_ms(step, bench.min_run_time)
        result.backward_ms = result.step_ms - result.forward_ms
        result.step_tflops = (forward_flops + backward_flops) / result.step_ms / 1e9
        result.backward_tflops = (
            backward_flops / result.backward_ms / 1e9 if result.backward_ms > 0 else math.nan
        )
        da, db = torch.autograd.grad(out, (inputs.a, inputs.b), grad_out)
        result.da_snr, result.db_snr = qtb.snr_db(da_ref, da), qtb.snr_db(db_ref, db)
    return result


def bench_quant(qtb: Any, op: Any, kernels: Any, shape: Any, provider: str, bench: Bench) -> QuantResult:
    import torch

    generator = torch.Generator(device=bench.device).manual_seed(bench.seed)
    result = QuantResult(shape.label, shape.M, shape.K, provider)
    first = op.inputs(shape, generator, bench.device, bench.dtype)
    set_bytes = first.x.numel() * first.x.element_size()
    count = input_set_count(set_bytes, bench.cuda)
    sets = [first] + [op.inputs(shape, generator, bench.device, bench.dtype) for _ in range(count - 1)]
    ring = itertools.cycle(sets)
    result.forward_ms = median_ms(lambda: op.provider(kernels, next(ring))(), bench.min_run_time)
    inputs = op.inputs(shape, generator, bench.device, bench.dtype)
    reference = op.reference(kernels, inputs)
    result.mismatch_frac = qtb.mismatch_fraction(op.provider(kernels, inputs)(), reference)
    work = op.bytes_moved(shape, bench.dtype.itemsize, reference[1].numel())
    result.forward_gbs = work / result.forward_ms / 1e6
    return result


def geomean(values: list[float]) -> float:
    usable = [value for value in values if value > 0 and math.isfinite(value)]
    return math.exp(statistics.fmean(math.log(value) for value in usable)) if usable else math.nan


def speedup_table(results: list[Any], quant: bool, forward_only: bool) -> str:
    """One line per shape: ours, torch, ours/torch for each figure, then the geometric mean."""
    from tabulate import tabulate

    metrics = (
        ["forward_gbs"]
        if quant
        else ["forward_tflops"] + ([] if forward_only else ["backward_tflops", "step_tflops"])
    )
    titles = {
        "forward_gbs": "fwd GB/s",
        "forward_tflops": "fwd TFLOPS",
        "backward_tflops": "bwd TFLOPS",
        "step_tflops": "step TFLOPS",
    }
    by_label: dict[str, dict[str, Any]] = {}
    for result in results:
        by_label.setdefault(result.label, {})[result.provider] = result
    headers = ["label"]
    for metric in metrics:
        headers += [f"{titles[metric]} triton", f"{titles[metric]} torch", "speedup"]
    accuracy = "mismatch_frac" if quant else "out_snr"
    headers.append(f"{accuracy} triton / torch")
    rows: list[list[object]] = []
    speedups: dict[str, list[float]] = {metric: [] for metric in metrics}
    for label, pair in by_label.items():
        ours, theirs = pair["triton"], pair["torch"]
        line: list[object] = [label]
        for metric in metrics:
            ratio = getattr(ours, metric) / getattr(theirs, metric)
            speedups[metric].append(ratio)
            line += [getattr(ours, metric), getattr(theirs, metric), ratio]
        line.append(f"{getattr(ours, accuracy):.4g} / {getattr(theirs, accuracy):.4g}")
        rows.append(line)
    footer: list[object] = ["geomean"]
    for metric in metrics:
        footer += ["", "", geomean(speedups[metric])]
    rows.append([*footer, ""])
    return tabulate(rows, headers=headers, floatfmt=".4g")


def parse_args(argv: list[str] | None, op_names: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Full benchmark: our Triton kernel beside the torch reference."
    )
    parser.add_argument("--op", required=True, choices=op_names)
    parser.add_argument(
        "--shapes", required=True, help="a preset name (see gitcampaign.shapes) or a YAML shape file"
    )
    parser.add_argument("--csv", type=Path, help="also write one row per shape and provider here")
    parser.add_argument("--forward-only", action="store_true", help="skip the backward")
    parser.add_argument(
        "--min-run-time", type=float, help="seconds per Timer measurement (default: GPU 1.0, CPU 0)"
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(REPO_ROOT))
    import torch

    cuda = torch.cuda.is_available()
    if not cuda:
        # Before any kernel module defines its @triton.jit functions.
        os.environ["TRITON_INTERPRET"] = "1"
    from gitcampaign.errors import CampaignError
    from gitcampaign.shapes import load_shapes
    from gitcampaign.templates import quick_test_bench as qtb

    args = parse_args(argv, list(qtb.OPS))
    op = qtb.OPS[args.op]
    try:
        shapes = load_shapes(args.shapes)
    except CampaignError as exc:
        print(f"full_bench: {exc}", file=sys.stderr)
        return 3
    if not cuda and set(op.cuda_only_backends) & set(PROVIDERS):
        print(
            f"full_bench: {args.op} with the {'/'.join(op.cuda_only_backends)} backend needs a CUDA GPU",
            file=sys.stderr,
        )
        return 2
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float16
    name = torch.cuda.get_device_name(device) if cuda else "CPU (Triton interpreter, fp16)"
    bench = Bench(
        device,
        dtype,
        cuda,
        args.min_run_time if args.min_run_time is not None else (1.0 if cuda else 0.0),
        args.forward_only,
        args.seed,
    )
    kernels = importlib.import_module(op.module)
    results: list[Any] = []
    failed = False
    for shape in shapes:
        for provider in PROVIDERS:
            # The kernels read their backend variable at call time, so one process can run both.
            os.environ[op.env_var] = provider
            runner = bench_quant if op.quant else bench_gemm
            try:
                results.append(runner(qtb, op, kernels, shape, provider, bench))
            except Exception:
                # Keep the other shapes: a row of NaN and the traceback, and exit 1 at the end.
                print(
                    f"full_bench: {shape.label} ({provider}) raised\n{traceback.format_exc()}",
                    file=sys.stderr,
                )
                failed = True
                empty: QuantResult | GemmResult = (
                    QuantResult(shape.label, shape.M, shape.K, provider)
                    if op.quant
                    else GemmResult(shape.label, shape.B or 1, shape.M, shape.N or 0, shape.K, provider)
                )
                results.append(empty)
    header = QUANT_COLUMNS if op.quant else GEMM_COLUMNS
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        args.csv.write_text(header + "\n" + "".join(qtb.csv_line(result) for result in results))
    import triton

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{args.op} on {name}; torch {torch.__version__}, triton {triton.__version__}; {stamp}")
    print(f"command: python benchmarks/full_bench.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(speedup_table(results, op.quant, args.forward_only))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
