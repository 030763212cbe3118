"""The outside clock of `git campaign calibrate`, run as a child under the harness's interpreter:

    python -m gitcampaign.crosscheck --harness campaigns/NAME/quick_test_bench.py --ours triton \
        --vendor torch --shapes-file SHAPES.yaml --out DIR [--rounds 4]

Both backends are measured in this one process, shape by shape, in rounds. A round times the shape
with both measures for both backends, back to back:
1. the campaign's committed harness, our backend's then the vendor's (or the other way round):
   the harness file imported twice, once per backend, each copy with its `BACKEND` fixed as
   `prepare` fixes it, and run on the one shape through its own `main` (its figure and its clock
   record, exactly as a harness run makes them);
2. the same op on the same kind of inputs timed independently of the harness's timing code, the way
   `triton.testing.do_bench` times, in the same order: one input set reused (each backward on a
   forward of its own, as in training and the harness), calls back to back with a memset of at
   least 256 MB clearing L2 between them, CUDA events, median; after a pre-roll of
   the same so that the clock has settled as it has in the harness, and over a second
   (back_to_back_ms says why).
Why rounds: under its power limit the H200's SM clock hunts (1300-1600 MHz), and a compute-bound
kernel follows it. Timed in separate processes, each backend got its own clock, and the our/vendor
ratios of the two measures differed by several percent. Within a round a measure's two windows
(ours, the vendor's) are seconds apart, not a process apart; rounds alternate which backend goes
first (ABBA), so that a clock drifting through the rounds favours each side equally.
gitcampaign.calibration takes medians over the rounds, and the spread of the rounds' ratios shows
how much of the clock's wandering is left in one round.
Writes DIR/crosscheck.json (and the harness's CSVs and clock logs under DIR/ours, DIR/vendor). Needs
a CUDA GPU (exit 2 without one); this module imports torch only to measure, so the tool itself only
ever runs it as a child, and the round logic (`interleave`) is tested on the CPU with fake timers.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from gitcampaign.calibration import ROLES, VENDOR_BACKEND

Figures = dict[str, dict[str, Any]]  # phase -> {"ms", "sm_mhz", "power_w", ...}

PREROLL_S = 1.0  # back to back before the timed window, as long as the harness's shortest pre-roll
TIMED_S = 1.0  # the timed window: the power-limited clock hunts within tenths of a second
FLUSH_BYTES = 256 * 1024 * 1024  # do_bench's L2 clear
HBM_WRITE_BYTES_PER_S = 3.0e12  # to size a clear that outlasts the host's launch of the op
MAX_FLUSH_BYTES = 1024 * 1024 * 1024
EXIT_NO_GPU = 2
ROUNDS = 4  # even, so that in ABBA order each backend goes first as often as the other


def round_order(index: int) -> tuple[str, str]:
    """ABBA: ours first in even rounds, the vendor's in odd ones."""
    return ROLES if index % 2 == 0 else (ROLES[1], ROLES[0])


def interleave(
    rounds: int,
    harness: Callable[[str, int], tuple[str, Figures]],
    back_to_back: Callable[[str, int], Figures],
) -> list[dict[str, Any]]:
    """`rounds` rounds on one shape. A round runs `harness(role, round)` (the harness's Check and
    figures) for both roles, then `back_to_back(role, round)` for both, in the round's order: each
    measure's two windows follow each other, and both measures keep the same order, so that a
    drift within the round biases both ratios alike. Per round: the order, the Checks, and the
    figures by measure and role."""
    records = []
    for index in range(rounds):
        order = round_order(index)
        record: dict[str, Any] = {"order": list(order), "check": {}, "harness": {}, "back_to_back": {}}
        for role in order:
            record["check"][role], record["harness"][role] = harness(role, index)
        for role in order:
            record["back_to_back"][role] = back_to_back(role, index)
        records.append(record)
    return records


def load_harness(path: Path, role: str, backend: str) -> ModuleType:
    """The harness file as a module of its own for `role`, with its BACKEND set as `prepare` sets
    it: two copies in one process, each measuring with its backend, share nothing but the kernels
    (which read the backend from the environment at each call; the harness sets it in main())."""
    spec = importlib.util.spec_from_file_location(f"campaign_quick_test_bench_{role}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"crosscheck: cannot import the harness {path}")
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness  # its dataclasses and its seal look their module up there
    spec.loader.exec_module(harness)
    setattr(harness, "BACKEND", backend)  # noqa: B010 (a module attribute mypy cannot see)
    return harness


def clear_bytes(launch_s: float, call_s: float) -> int:
    """Bytes of the memset before each call, from the least of a few launches of the op (the first
    ones pay one-off costs) and its GPU time: do_bench's 256 MB where the call takes the GPU at least
    twice as long as its launch takes the host (the host runs ahead, the queue hides the launch);
    otherwise long enough to outlast the launch, at most MAX_FLUSH_BYTES. A long memset between
    calls lowers the duty cycle, and with it the power draw, and raises the clock (a clear sized
    from the slowest of a few backward launches ran the calls at boost clock where the harness ran
    them a quarter lower)."""
    uncovered_s = launch_s if call_s < 2 * launch_s else 0.0
    return min(MAX_FLUSH_BYTES, max(FLUSH_BYTES, int(2 * uncovered_s * HBM_WRITE_BYTES_PER_S)))


def back_to_back_ms(
    harness: ModuleType, next_call: Callable[[], Any], clear: str = "write"
) -> dict[str, Any]:
    """do_bench's loop (clear L2 with a memset, event, call, event; no host sync until the end;
    median), after a pre-roll of the same loop, with the clock record of the timed part.
    `next_call()` gives the call to time next; what it runs itself (new inputs) goes before the
    memset, outside the interval.

    One change from do_bench: where the op's launch takes the host more than half the op's GPU time,
    the host cannot run ahead of the GPU, and the memset is made long enough to outlast the launch,
    so that the GPU is still busy when the host records the start event and launches the op.
    do_bench's fixed 256 MB clear (~0.1 ms) does not cover a launch-heavy op of a few tens of
    microseconds: its interval then includes the launch (for an fp8 quantisation of 8192x4096, more
    than twice the GPU's time). Where the host does run ahead, the queue hides the launch and the
    clear stays at 256 MB: a longer one lowers the GPU's duty cycle and raises its clock (sized from
    the launch alone, it read the fp8 GEMMs a few percent faster than the harness). `clear="read"` (an
    experiment) reads the buffer
    instead of writing it, leaving L2 with clean lines."""
    import time

    import torch

    monitor = harness.GpuMonitor(torch.device("cuda"))
    launch_s = call_s = math.inf
    for _ in range(5):
        call = next_call()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        began = time.perf_counter()
        start.record()
        call()
        end.record()
        launch_s = min(launch_s, time.perf_counter() - began)
        end.synchronize()
        call_s = min(call_s, start.elapsed_time(end) * 1e-3)
    flush = torch.empty(clear_bytes(launch_s, call_s), dtype=torch.uint8, device="cuda")

    def loop(seconds: float, timed: bool) -> list[float]:
        pairs = []
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            for _ in range(32):  # calls between reads of the host clock
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                call = next_call()
                if clear == "write":
                    flush.zero_()
                else:
                    flush.amax()
                start.record()
                call()
                end.record()
                if timed:
                    pairs.append((start, end))
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in pairs]

    loop(PREROLL_S, timed=False)
    with monitor.recording() as samples:
        per_call = loop(TIMED_S, timed=True)
    ms = float(sorted(per_call)[len(per_call) // 2])
    clocks = [sample[0] for sample in samples]
    power = [sample[1] for sample in samples]
    return {
        "ms": ms,
        "sm_mhz": sorted(clocks)[len(clocks) // 2] if clocks else math.nan,
        "power_w": sorted(power)[len(power) // 2] if power else math.nan,
        "temp_c": max((sample[2] for sample in samples), default=math.nan),
    }


def independent(
    harness: ModuleType,
    shape: Any,
    forward_only: bool,
    input_sets: int = 1,
    fresh: bool = False,
    clear: str = "write",
) -> Figures:
    """Both phases back to back (back_to_back_ms) on `input_sets` input sets taken in turn, or
    with `fresh` on inputs drawn before every call. Each timed backward follows a forward of its own, run outside the
    interval, as in the harness: the same GEMM work between the timed calls, so the same duty cycle
    (a graph kept and run again put none, and read the backward faster than the harness at a higher
    clock). Other than the defaults, experiments:
    benchmarks/dev/agreement_dev.py."""
    import torch

    op = harness_op(harness)
    device = torch.device("cuda")
    dtype = getattr(torch, op.info.dtype_for("cuda"))
    generator = torch.Generator(device=device).manual_seed(20261129)
    backward = op.info.backward and not forward_only
    draw = harness.Draw(generator, device, dtype, backward)

    def inputs() -> Any:
        return draw.inputs(op.spec_module, dict(shape))

    # One upstream gradient per output that requires one, drawn once (outside every interval).
    sample = op.named(op.call(inputs())) if backward else {}
    grad_outs = {name: torch.randn_like(out) for name, out in sample.items() if out.requires_grad}
    del sample

    def backward_of(one: Any) -> Any:
        outputs = op.named(op.provider(one)())
        targets = [outputs[name] for name in grad_outs]
        leaves = list(one.differentiable().values())
        return lambda: torch.autograd.grad(targets, leaves, list(grad_outs.values()))

    sets = itertools.cycle([inputs() for _ in range(0 if fresh else input_sets)])

    def calls(make: Callable[[Any], Any]) -> Callable[[], Any]:
        """`make` runs for every call: a backward's forward is not kept and run again."""
        return lambda: make(inputs() if fresh else next(sets))

    figures = {"forward": back_to_back_ms(harness, calls(op.provider), clear)}
    if backward:
        figures["backward"] = back_to_back_ms(harness, calls(backward_of), clear)
    return figures


def harness_op(harness: ModuleType) -> Any:
    """The op a harness copy measures, bound to the kernels its run imported and to its backend
    (which the kernels read at each call, as the harness sets it)."""
    if not hasattr(harness, "Op"):
        raise SystemExit(
            "crosscheck: this campaign's frozen harness predates op specs; calibrate a campaign prepared by "
            "this version of gitcampaign"
        )
    spec_file = Path(str(harness.__file__)).with_name(harness.SPEC_FILE)
    op = harness.Op(harness.load_spec_module(spec_file), harness.OP, str(spec_file))
    op.kernel, op.backend = sys.modules[op.info.module], harness.BACKEND
    if op.info.backend_env:
        os.environ[op.info.backend_env] = harness.BACKEND
    return op


def harness_figures(harness: ModuleType, csv_path: Path) -> tuple[str, Figures]:
    """Check and per-phase ms of the harness's one-row CSV, with its clock record."""
    header, line = csv_path.read_text().splitlines()[:2]
    row = dict(zip(header.split(","), line.split(","), strict=True))
    clock_path = csv_path.with_suffix(harness.CLOCK_LOG_SUFFIX)
    windows = json.loads(clock_path.read_text())["windows"] if clock_path.exists() else []
    figures: Figures = {}
    for phase, column in (("forward", "Forward Time (ms)"), ("backward", "Backward Time (ms)")):
        if column in row and math.isfinite(float(row[column])):
            window: dict[str, Any] = next((w for w in windows if w["what"].endswith(f" {phase}")), {})
            figures[phase] = {
                "ms": float(row[column]),
                "sm_mhz": window.get("sm_mhz", {}).get("median", math.nan),
                "power_w": window.get("power_w", {}).get("median", math.nan),
                "temp_c": window.get("temp_c", {}).get("max", math.nan),
                "clock_moved": window.get("clock_moved", 0.0) > harness.CLOCK_MOVED_WARN,
            }
    return row["Check"], figures


def cross_check_shape(
    harnesses: dict[str, ModuleType], entry: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """The rounds of one shape (an entry of the shape file), with both harness copies."""
    label = entry["label"]
    one = args.out / f"{label}.shapes.yaml"
    one.write_text(yaml.safe_dump([entry], sort_keys=False))

    def say(what: str, role: str, round_index: int) -> None:
        print(
            f"crosscheck: {label} round {round_index + 1}/{args.rounds}: {what} {role} "
            f"({harnesses[role].BACKEND})",
            file=sys.stderr,
            flush=True,
        )

    def run_harness(role: str, round_index: int) -> tuple[str, Figures]:
        say("harness", role, round_index)
        harness = harnesses[role]
        csv_path = args.out / role / f"{label}-r{round_index + 1}.csv"
        harness.main(
            ["--summary-csv", str(csv_path), "--shapes-file", str(one)]
            + (["--forward-only"] if args.forward_only else [])
        )
        return harness_figures(harness, csv_path)

    def run_back_to_back(role: str, round_index: int) -> Figures:
        say("back to back", role, round_index)
        harness = harnesses[role]
        shape = harness.parse_shapes([entry], str(args.shapes_file), harness_op(harness).info)[0]
        return independent(harness, shape, args.forward_only)

    backends = {role: harness.BACKEND for role, harness in harnesses.items()}
    return {
        "label": label,
        "backends": backends,
        "rounds": interleave(args.rounds, run_harness, run_back_to_back),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", required=True, type=Path)
    parser.add_argument("--ours", required=True, help="our backend (the campaign's)")
    parser.add_argument("--vendor", default=VENDOR_BACKEND, help="the reference backend")
    parser.add_argument("--shapes-file", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds per shape (default {ROUNDS})")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    import torch

    if not torch.cuda.is_available():
        print("crosscheck: needs a CUDA GPU, and none is visible", file=sys.stderr)
        return EXIT_NO_GPU
    backends = dict(zip(ROLES, (args.ours, args.vendor), strict=True))
    harnesses = {role: load_harness(args.harness, role, backend) for role, backend in backends.items()}
    entries = yaml.safe_load(args.shapes_file.read_text())
    for role in ROLES:
        (args.out / role).mkdir(parents=True, exist_ok=True)
    results = []
    for index, entry in enumerate(entries):
        print(f"crosscheck: shape {index + 1}/{len(entries)}", file=sys.stderr, flush=True)
        results.append(cross_check_shape(harnesses, entry, args))
        # Rewritten after each shape: a run stopped by its time limit keeps the shapes it finished.
        (args.out / "crosscheck.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
