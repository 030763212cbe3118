"""Full benchmark: every target shape, our Triton kernel beside the torch reference, in one run.

    python benchmarks/full_bench.py --op gemm --shapes llama3.1-8b --csv full.csv
    python benchmarks/full_bench.py --op-spec examples/rmsnorm/rmsnorm_spec.py --root examples/rmsnorm \
        --shapes examples/rmsnorm/shapes-gpu.yaml

Its roles (`benchmark_command`, docs/design.md): pick the campaign's representative shapes and do the
final acceptance. Its numbers come from `torch.utils.benchmark.Timer` and are never compared with the
quick harness's (different timing engine); each round is measured by `quick_test_bench.py`.

Inputs, references and correctness metrics are the op spec's, through the harness package
(`gitcampaign.harness`), so both tools run the same op on the same kind of data.

Timing: `Timer.blocked_autorange` runs a statement in blocks and reports the median per-call time.
It cannot flush L2 between calls, so each provider rotates through several input sets whose total size
exceeds 256 MB (more than any current GPU's L2): a call never finds its operands left in L2 by the call
before. The backward cannot be timed alone without keeping a graph alive across calls, so the timed
"step" is forward + `torch.autograd.grad` on fresh leaves (no gradient accumulation), and
backward time = step time - forward time.
"""

from __future__ import annotations

import argparse
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

from gitcampaign.harness.contract import UNITS

REPO_ROOT = Path(__file__).resolve().parents[1]
ROTATION_BYTES = 256 * 1024 * 1024
MAX_INPUT_SETS = 16
PROVIDERS = (
    "triton",
    "torch",
)  # ours, and the vendor's path (the kernel's torch backend, or the spec's vendor())


@dataclass
class Bench:
    """Settings shared by every shape and provider of one run."""

    device: Any
    dtype: Any
    cuda: bool
    min_run_time: float
    forward_only: bool
    seed: int


def columns(info: Any, forward_only: bool) -> list[str]:
    """label, the shape columns, provider, per-phase metric (and the step's), times, check columns."""
    phases = info.phases[:1] if forward_only else info.phases
    metrics = [f"{phase.capitalize()} {info.unit}" for phase in phases]
    times = [f"{phase.capitalize()} Time (ms)" for phase in phases]
    if len(phases) == 2:
        metrics.append(f"Combined Step {info.unit}")
        times.append("Step Time (ms)")
    return ["label", *info.columns, "provider", *metrics, *times, *(check.column for check in info.checks)]


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


def bench_shape(harness: Any, op: Any, shape: Any, bench: Bench) -> dict[str, float]:
    """One provider on one shape: its figures and check values by column."""
    import torch

    from gitcampaign.harness.inputs import Draw, normal

    info = op.info
    backward = info.backward and not bench.forward_only
    generator = torch.Generator(device=bench.device).manual_seed(bench.seed)
    draw = Draw(generator, bench.device, bench.dtype, backward)
    fields = dict(shape)

    def fresh() -> Any:
        return draw.inputs(op.spec_module, fields)

    first = fresh()
    set_bytes = sum(t.numel() * t.element_size() for t in first.tensors())
    sets = [first] + [fresh() for _ in range(input_set_count(set_bytes, bench.cuda) - 1)]
    ring = itertools.cycle(sets)
    # The output gradients the step feeds back, drawn per input set before any timing: a draw inside
    # the timed step would count the random generator's kernel as the op's backward.
    shaped = op.named(op.call(first)) if backward else {}
    wanted = [name for name, out in shaped.items() if out.requires_grad]
    steps = itertools.cycle(
        [(inputs, [normal(tuple(shaped[n].shape), generator, bench.device, shaped[n].dtype) for n in wanted])
         for inputs in sets]
    )  # fmt: skip

    def forward() -> Any:
        return op.call(next(ring))

    def step() -> Any:
        inputs, grads = next(steps)
        outputs = op.named(op.call(inputs))
        outs = [outputs[name] for name in wanted]
        return torch.autograd.grad(outs, list(inputs.differentiable().values()), grads)

    work = op.work(shape, bench.dtype)
    figures: dict[str, float] = {}
    unit = info.unit
    scale = UNITS[unit]
    figures["Forward Time (ms)"] = median_ms(forward, bench.min_run_time)
    figures[f"Forward {unit}"] = work["forward"] / (figures["Forward Time (ms)"] * 1e-3) / scale
    inputs = fresh()
    outputs = op.named(op.call(inputs))
    candidate = {name: out.detach() for name, out in outputs.items()}
    grad_outs = None
    if backward:
        step_ms = median_ms(step, bench.min_run_time)
        figures["Step Time (ms)"] = step_ms
        figures["Backward Time (ms)"] = step_ms - figures["Forward Time (ms)"]
        figures[f"Combined Step {unit}"] = (work["forward"] + work["backward"]) / (step_ms * 1e-3) / scale
        backward_ms = figures["Backward Time (ms)"]
        figures[f"Backward {unit}"] = (
            work["backward"] / (backward_ms * 1e-3) / scale if backward_ms > 0 else math.nan
        )
        grad_outs = {
            name: normal(tuple(out.shape), generator, bench.device, out.dtype)
            for name, out in outputs.items()
            if out.requires_grad
        }
        leaves = inputs.differentiable()
        grads = torch.autograd.grad(
            [outputs[name] for name in grad_outs], list(leaves.values()), list(grad_outs.values())
        )
        candidate.update({f"{name}.grad": grad for name, grad in zip(leaves, grads, strict=True)})
    reference = op.reference(inputs, grad_outs)
    for check in info.checks:
        if all(name in candidate for name in check.of):
            got, want = [candidate[name] for name in check.of], [reference[name] for name in check.of]
            figures[check.column] = harness.judge(
                check, got, want, op.threshold(check, got[0], shape), bench.cuda
            )[0]
    return figures


def geomean(values: list[float]) -> float:
    usable = [value for value in values if value > 0 and math.isfinite(value)]
    return math.exp(statistics.fmean(math.log(value) for value in usable)) if usable else math.nan


def speedup_table(results: list[dict[str, Any]], info: Any, forward_only: bool) -> str:
    """One line per shape: ours, the vendor's, ours/vendor's for each figure, then the geometric mean."""
    from tabulate import tabulate

    unit = info.unit
    phases = info.phases[:1] if forward_only else info.phases
    metrics = [f"{phase.capitalize()} {unit}" for phase in phases] + (
        [f"Combined Step {unit}"] if len(phases) == 2 else []
    )
    by_label: dict[str, dict[str, Any]] = {}
    for result in results:
        by_label.setdefault(result["label"], {})[result["provider"]] = result
    headers = ["label"]
    for metric in metrics:
        headers += [f"{metric} {PROVIDERS[0]}", f"{metric} {PROVIDERS[1]}", "speedup"]
    accuracy = info.checks[0].column
    headers.append(f"{accuracy} {PROVIDERS[0]} / {PROVIDERS[1]}")
    rows: list[list[object]] = []
    speedups: dict[str, list[float]] = {metric: [] for metric in metrics}
    for label, pair in by_label.items():
        ours, theirs = pair[PROVIDERS[0]], pair[PROVIDERS[1]]
        line: list[object] = [label]
        for metric in metrics:
            ratio = ours.get(metric, math.nan) / theirs.get(metric, math.nan)
            speedups[metric].append(ratio)
            line += [ours.get(metric, math.nan), theirs.get(metric, math.nan), ratio]
        line.append(f"{ours.get(accuracy, math.nan):.4g} / {theirs.get(accuracy, math.nan):.4g}")
        rows.append(line)
    footer: list[object] = ["geomean"]
    for metric in metrics:
        footer += [None, None, geomean(speedups[metric])]
    rows.append([*footer, None])
    # None, not "", for the footer's blanks: a string in a column makes tabulate print its floats raw
    return tabulate(rows, headers=headers, floatfmt=".4g", missingval="")


def parse_args(argv: list[str] | None, op_names: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Full benchmark: our kernel beside the vendor's path.")
    parser.add_argument("--op", help=f"a shipped op ({', '.join(op_names)}), or a variant of --op-spec")
    parser.add_argument(
        "--op-spec", type=Path, help="an op spec file (docs/op-spec.md) instead of a shipped op"
    )
    parser.add_argument(
        "--root", type=Path, help="where the spec's kernel module is imported from (default: .)"
    )
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
    from gitcampaign.errors import CampaignError
    from gitcampaign.harness import checks
    from gitcampaign.harness.contract import csv_line, spec_info, spec_literals
    from gitcampaign.harness.ops import op_names, spec_of
    from gitcampaign.harness.spec import Op, load_spec_module
    from gitcampaign.shapes import load_shapes

    args = parse_args(argv, op_names())
    if args.op_spec is not None:
        path = args.op_spec
        info = spec_info(spec_literals(path.read_text(), str(path)), str(path))
        args.op = args.op or info.op_names[0]
        root = args.root or Path.cwd()
    elif args.op in op_names():
        path, info = spec_of(args.op)  # type: ignore[misc]
        root = args.root or REPO_ROOT
    else:
        print("full_bench: give --op with a shipped op, or --op-spec", file=sys.stderr)
        return 3
    op = Op(load_spec_module(path), args.op, str(path))
    try:
        shapes = load_shapes(args.shapes, info)
    except CampaignError as exc:
        print(f"full_bench: {exc}", file=sys.stderr)
        return 3
    if not cuda and set(info.cuda_only_backends) & set(PROVIDERS):
        print(
            f"full_bench: {args.op} with the {'/'.join(info.cuda_only_backends)} backend needs a CUDA GPU",
            file=sys.stderr,
        )
        return 2
    device = torch.device("cuda" if cuda else "cpu")
    dtype = getattr(torch, info.dtype_for(device.type))
    name = torch.cuda.get_device_name(device) if cuda else f"CPU (Triton interpreter, {dtype})"
    bench = Bench(
        device,
        dtype,
        cuda,
        args.min_run_time if args.min_run_time is not None else (1.0 if cuda else 0.0),
        args.forward_only,
        args.seed,
    )
    op.load_kernel(PROVIDERS[0], cuda, root)
    header = columns(info, args.forward_only)
    results: list[dict[str, Any]] = []
    failed = False
    for shape in shapes:
        for provider in PROVIDERS:
            # The kernels read their backend variable at call time, so one process can run both.
            if info.backend_env:
                os.environ[info.backend_env] = provider
            op.backend = provider
            record: dict[str, Any] = {"label": shape.label, **dict(shape), "provider": provider}
            try:
                record.update(bench_shape(checks, op, shape, bench))
            except Exception:
                # Keep the other shapes: a row of NaN and the traceback, and exit 1 at the end.
                print(
                    f"full_bench: {shape.label} ({provider}) raised\n{traceback.format_exc()}",
                    file=sys.stderr,
                )
                failed = True
            results.append(record)
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        lines = [csv_line([record.get(column, math.nan) for column in header]) for record in results]
        args.csv.write_text(",".join(header) + "\n" + "".join(lines))
    import triton

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{args.op} on {name}; torch {torch.__version__}, triton {triton.__version__}; {stamp}")
    print(f"command: python benchmarks/full_bench.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(speedup_table(results, info, args.forward_only))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
