"""The entry point: read the request, set up device, clock and seal (before the kernels are
imported), then time and check every shape and write the CSV, or the training probe, or a profile.

Modes (the tool adds `--summary-csv`/`--json`/`--profile` and `--shapes-file`):
    quick_test_bench.py --summary-csv OUT.csv --shapes-file SHAPES.yaml        the per-shape CSV
    quick_test_bench.py --train-probe --json OUT.json --shapes-file SHAPES.yaml  the training probe
    quick_test_bench.py --profile OUT.json --shapes-file SHAPES.yaml            a profile (ANALYZE)
Exit codes: 0 every shape PASS (probe: finite loss), 1 some shape FAIL/ERROR (probe: a loss that is
not finite), 2 no GPU for a GPU-only backend, 3 usage error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from gitcampaign.harness.checks import Failures, Seal
from gitcampaign.harness.clock import (
    PREROLL_MIN_S,
    QUEUE_AHEAD_S,
    TIMED_MIN_S,
    Clock,
    device_peaks,
)
from gitcampaign.harness.contract import (
    CLOCK_LOG_SUFFIX,
    EXIT_FAILED,
    EXIT_NO_GPU,
    EXIT_OK,
    EXIT_USAGE,
    PASS,
    Shape,
    UsageError,
    csv_line,
    parse_shapes,
)
from gitcampaign.harness.probe import run_probe
from gitcampaign.harness.profile import PROFILE_CALLS, profile_shapes
from gitcampaign.harness.routing import routing_replaced
from gitcampaign.harness.runner import Run, error_cells, run_shape
from gitcampaign.harness.spec import Op, load_spec_module

LOADED = time.perf_counter()  # the process's time before this is Python's own start-up
RUNS = itertools.count()  # main() calls so far: gitcampaign.crosscheck makes several in one process

# `git campaign prepare` fills these in; the op spec lies beside this file, the measured tree's
# root two levels up (campaigns/NAME/quick_test_bench.py), so a run from a round's worktree
# measures that round's kernels.
OP = "__OP__"
BACKEND = "__BACKEND__"
SPEC_FILE = "op_spec.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse would exit 2, which this harness reserves for "no GPU for a GPU-only op".
        self.print_usage(sys.stderr)
        raise UsageError(message)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(
        description="Quick validation harness of a gitcampaign campaign; writes the per-shape CSV."
    )
    parser.add_argument("--summary-csv", type=Path, help="where to write the per-shape CSV")
    parser.add_argument(
        "--shapes-file", required=True, type=Path, help="YAML list of shapes (the op spec's fields)"
    )
    parser.add_argument(
        "--train-probe", action="store_true", help="run the training probe instead of the per-shape CSV"
    )
    parser.add_argument("--json", type=Path, help="the training probe's result")
    parser.add_argument(
        "--steps", type=int, help="training probe: timed optimiser steps (default: GPU 20, CPU 8)"
    )
    parser.add_argument(
        "--warmup", type=int, help="training probe: untimed steps first (default: GPU 3, CPU 1)"
    )
    parser.add_argument("--profile", type=Path, help="write a per-kernel profile here instead of gating")
    parser.add_argument("--profile-calls", type=int, default=PROFILE_CALLS, help="profiled calls per phase")
    parser.add_argument("--repeats", type=int, help="timed repeats per shape (default: GPU 20, CPU 3)")
    parser.add_argument("--iters-per-repeat", type=int, help="timed calls per repeat (default: GPU 5, CPU 1)")
    parser.add_argument("--forward-only", action="store_true", help="skip the backward (its columns are nan)")
    parser.add_argument(
        "--preroll-s",
        type=float,
        default=PREROLL_MIN_S,
        help=f"GPU: least back-to-back pre-roll per figure, 0 for none (default {PREROLL_MIN_S:g})",
    )
    parser.add_argument(
        "--window-s",
        type=float,
        default=TIMED_MIN_S,
        help=f"GPU: least duration of a figure's timed calls (default {TIMED_MIN_S:g})",
    )
    parser.add_argument(
        "--queue-s",
        type=float,
        default=QUEUE_AHEAD_S,
        help=f"GPU: most GPU time the host queues ahead, 0 for no bound (default {QUEUE_AHEAD_S:g})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    # Running the package itself (`python -m gitcampaign.harness`); a campaign's copy has them filled in.
    parser.add_argument("--op", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--op-spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    modes = [bool(args.summary_csv), args.train_probe, bool(args.profile)]
    if sum(modes) != 1:
        parser.error("give exactly one of --summary-csv PATH, --train-probe, --profile PATH")
    if args.train_probe and args.json is None:
        parser.error("--train-probe needs --json PATH")
    for name in ("repeats", "iters_per_repeat", "steps", "profile_calls"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup is not None and args.warmup < 0:
        parser.error("--warmup must be at least 0")
    for name in ("preroll_s", "window_s", "queue_s"):
        if not 0.0 <= getattr(args, name) <= 60.0:
            parser.error(f"--{name.replace('_', '-')} must be between 0 and 60 seconds")
    return args


def request(args: argparse.Namespace) -> tuple[str, str, Path, Path]:
    """The op, backend, spec file and measured tree of this run; UsageError with placeholders left."""
    op, backend = args.op or OP, args.backend or BACKEND
    if op.startswith("__") or backend.startswith("__"):
        raise UsageError(
            "OP and BACKEND are still placeholders; `git campaign prepare` fills them in "
            '(for a manual copy, set the lines to e.g. OP = "gemm" and BACKEND = "triton")'
        )
    here = Path(__file__).resolve()
    return op, backend, args.op_spec or here.with_name(SPEC_FILE), args.root or here.parents[2]


def read_shapes(args: argparse.Namespace, op: Op) -> list[Shape]:
    try:
        import yaml

        data = yaml.safe_load(args.shapes_file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read the shape file {args.shapes_file}: {exc}") from exc
    return parse_shapes(data, str(args.shapes_file), op.info)


def start_run(args: argparse.Namespace) -> tuple[Run | None, list[Shape]]:
    """Device, op spec, clock and seal (all before the kernels are imported), the kernels and the
    GPU's peaks; None when the backend needs a GPU and there is none. UsageError when bad."""
    import torch

    op_name, backend, spec_file, root = request(args)
    op = Op(load_spec_module(spec_file), op_name, str(spec_file))
    shapes = read_shapes(args, op)
    cuda = torch.cuda.is_available()
    if args.train_probe and cuda and op.info.probe_shapes:
        # Where launching costs the host more than the GPU's work; on the CPU every shape is that.
        shapes += parse_shapes(list(op.info.probe_shapes), f"{spec_file}: PROBE_SHAPES", op.info)
    if not cuda and backend in op.info.cuda_only_backends:
        print(
            f"quick_test_bench: {op_name} with the {backend} backend needs a CUDA GPU, and none is visible",
            file=sys.stderr,
        )
        return None, shapes
    device = torch.device("cuda" if cuda else "cpu")
    dtype = getattr(torch, op.info.dtype_for(device.type))
    if not cuda:
        print(
            f"quick_test_bench: no CUDA GPU: Triton interpreter (TRITON_INTERPRET=1), {dtype} inputs, CPU figures; "
            "exact checks of fp8 outputs forgive the interpreter's fp32->fp8 rounding faults (only a GPU run "
            "demands them bit for bit)",
            file=sys.stderr,
        )
    clock = Clock(device, args.preroll_s, args.window_s, args.queue_s)
    seal = Seal(device, op.spec_module, clock, op)  # before the kernels are imported, like the clock
    op.load_kernel(backend, cuda, root)
    gpu_name, peaks = device_peaks(device)
    print(f"quick_test_bench: {op_name} ({backend}) from {root}; clock: {clock.name}", file=sys.stderr)
    if cuda and peaks is None:
        print(
            f"quick_test_bench: no datasheet peak known for {gpu_name}: no plausibility check",
            file=sys.stderr,
        )
    run = Run(
        op,
        device,
        dtype,
        clock,
        args.repeats or (20 if cuda else 3),
        args.iters_per_repeat or (5 if cuda else 1),
        args.forward_only or not op.info.backward,
        args.seed,
        peaks,
        gpu_name,
        seal,
    )
    return run, shapes


def main(argv: list[str] | None = None) -> int:
    """Read the arguments and shapes, set up the run, then the mode's work."""
    began = LOADED if next(RUNS) == 0 else time.perf_counter()  # a later run has no imports to pay
    try:
        args = parse_args(argv)
        run, shapes = start_run(args)
    except UsageError as exc:
        print(f"quick_test_bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if run is None:
        return EXIT_NO_GPU
    print(
        f"quick_test_bench: start-up (imports, device, kernels): {run.clock.perf_counter() - began:.2f} s",
        file=sys.stderr,
    )
    if args.train_probe:
        return probe_main(args, run, shapes)
    if args.profile:
        write_json(args.profile, profile_shapes(run, shapes, args.profile_calls))
        return EXIT_OK
    lines, all_pass = run_shapes(run, shapes)
    write_results(args.summary_csv, run, lines)
    return EXIT_OK if all_pass else EXIT_FAILED


def probe_main(args: argparse.Namespace, run: Run, shapes: list[Shape]) -> int:
    cuda = run.device.type == "cuda"
    steps = args.steps or (20 if cuda else 8)
    warmup = args.warmup if args.warmup is not None else (3 if cuda else 1)
    result = run_probe(run.op, shapes, run.device, run.dtype, args.seed, steps, warmup)
    write_json(args.json, result)
    for record in result["shapes"]:
        print(
            f"train_probe: {record['label']}: median step {record['median_ms']:.3f} ms over {result['steps']} steps "
            f"({result['clock']}), loss {record['loss'][0]:.4g} -> {record['loss'][-1]:.4g}",
            file=sys.stderr,
        )
    if not result["loss_finite"]:
        print("train_probe: the loss is not finite: the op does not train", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def write_json(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")


def run_shapes(run: Run, shapes: list[Shape]) -> tuple[list[str], bool]:
    """Every shape in order, each row printed as it is done: the CSV lines and whether all passed.
    A shape that raises is an ERROR row; a timer or routing replaced at import fails every row."""
    op, clock, seal = run.op, run.clock, run.seal
    assert seal is not None
    startup = clock.replaced() + seal.broken()
    header = op.info.header()
    lines = [header + "\n"]
    print(header, flush=True)
    all_pass = True
    for index, shape in enumerate(shapes):
        began, windows_before = clock.perf_counter(), len(clock.windows)
        warm_up_before, tuning_before = run.warm_up_s, run.tuning_s
        failures = Failures()
        try:
            cells = run_shape(run, shape, index, failures)
            reasons = failures.reasons
            if startup:
                reasons.insert(0, f"timer replaced when the kernels were imported: {', '.join(startup)}")
            rerouted = routing_replaced()
            if rerouted:
                reasons.insert(0, f"MoE routing replaced by the kernels: {', '.join(rerouted)}")
            check_at = len(op.info.columns) + 1
            if reasons and cells[check_at] == PASS:
                cells[check_at] = "FAIL"
        except Exception:
            print(f"quick_test_bench: {shape.label}: ERROR\n{traceback.format_exc()}", file=sys.stderr)
            cells, reasons = error_cells(op, shape), failures.reasons  # what the checks found first
        for reason in reasons:
            print(f"quick_test_bench: {shape.label}: FAIL: {reason}", file=sys.stderr)
        # Where a shape's time goes (the validation's length is mostly this, shape after shape).
        windows_s = sum(window.wall_s for window in clock.windows[windows_before:])
        print(
            f"quick_test_bench: {shape.label}: {clock.perf_counter() - began:.2f} s, {windows_s:.2f} s of it in "
            f"timed windows, {run.warm_up_s - warm_up_before:.2f} s in first calls (compilation, autotuning; "
            f"{run.tuning_s - tuning_before:.2f} s of it timing configs), the rest inputs and checks",
            file=sys.stderr,
        )
        line = csv_line(cells)
        all_pass &= cells[len(op.info.columns) + 1] == PASS
        lines.append(line)
        print(line, end="", flush=True)
    return lines, all_pass


def write_results(path: Path, run: Run, lines: list[str]) -> None:
    """The CSV, and beside it the clock log of every timed window."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    if run.clock.windows:
        # Beside the CSV (whose schema is frozen): what the GPU ran at while each figure was timed.
        clock_log = [window.summary() for window in run.clock.windows]
        write_json(path.with_suffix(CLOCK_LOG_SUFFIX), {"gpu": run.gpu_name, "windows": clock_log})
