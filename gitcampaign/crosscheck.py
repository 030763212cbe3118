"""The outside clock of `git campaign calibrate`, run as a child under the harness's interpreter:

    python -m gitcampaign.crosscheck --harness campaigns/NAME/quick_test_bench.py --backend torch \
        --shapes-file SHAPES.yaml --out DIR

For each shape, one after the other so that both see the same thermal state:
1. the campaign's committed harness, imported from its file and run in this process with its backend
   set to `--backend` (its figure and its clock record, exactly as a gate run makes them);
2. the same op on the same kind of inputs timed independently of the harness's timing code, the way
   `triton.testing.do_bench` times: one input set reused, calls back to back with a memset of at
   least 256 MB clearing L2 between them, CUDA events, median; after a pre-roll of the same so that
   the clock has settled as it has in the harness, and over a second (back_to_back_ms says why).
Writes DIR/BACKEND.json. Needs a CUDA GPU (exit 2 without one); this module imports torch, so the
tool itself only ever runs it as a child.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

PREROLL_S = 1.0  # back to back before the timed window, as long as the harness's shortest pre-roll
TIMED_S = 1.0  # the timed window: the power-limited clock hunts within tenths of a second
FLUSH_BYTES = 256 * 1024 * 1024  # do_bench's L2 clear
HBM_WRITE_BYTES_PER_S = 3.0e12  # to size a clear that outlasts the host's launch of the op
MAX_FLUSH_BYTES = 1024 * 1024 * 1024
EXIT_NO_GPU = 2


def load_harness(path: Path, backend: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("campaign_quick_test_bench", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"crosscheck: cannot import the harness {path}")
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness  # its dataclasses look their module up there
    spec.loader.exec_module(harness)
    # Read at call time by its main() and load_kernels().
    setattr(harness, "BACKEND", backend)  # noqa: B010 (a module attribute mypy cannot see)
    return harness


def back_to_back_ms(harness: ModuleType, call: Any) -> dict[str, Any]:
    """do_bench's loop (clear L2 with a memset, event, call, event; no host sync until the end;
    median), after a pre-roll of the same loop, with the clock record of the timed part.

    One change from do_bench: the memset is made long enough to outlast the host's launch of the
    op, so that the GPU is still busy when the host records the start event and launches the op.
    do_bench's fixed 256 MB clear (~0.1 ms) does not cover a launch-heavy op of a few tens of
    microseconds: its interval then includes the launch (0.077 ms against 0.028 ms for an fp8
    quantisation of 8192x4096, H200, 2026-11-29)."""
    import time

    import torch

    monitor = harness.GpuMonitor(torch.device("cuda"))
    launch_s = math.inf
    for _ in range(5):
        torch.cuda.synchronize()
        began = time.perf_counter()
        call()
        launch_s = min(launch_s, time.perf_counter() - began)
    torch.cuda.synchronize()
    # The least of a few launches (the first ones pay one-off costs), and at most MAX_FLUSH_BYTES: a
    # long memset between calls lowers the duty cycle, and with it the power draw, and raises the
    # clock (a clear sized from the slowest of 3 backward launches ran the calls at 1980 MHz where
    # the harness ran them at 1485, H200, 2026-11-29).
    flush_bytes = min(MAX_FLUSH_BYTES, max(FLUSH_BYTES, int(2 * launch_s * HBM_WRITE_BYTES_PER_S)))
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")

    def loop(seconds: float, timed: bool) -> list[float]:
        pairs = []
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            for _ in range(32):  # calls between reads of the host clock
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                flush.zero_()
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
    }


def independent(harness: ModuleType, shape: Any, forward_only: bool) -> dict[str, dict[str, Any]]:
    import torch

    op = harness.OPS[harness.OP]
    kernels = sys.modules[op.module]  # imported by the harness run just before, with this backend
    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(20261129)
    inputs = op.inputs(shape, generator, device, torch.bfloat16)
    forward = op.provider(kernels, inputs)
    figures = {"forward": back_to_back_ms(harness, forward)}
    if not op.quant and not forward_only:
        out = forward()
        grad_out = op.grad_out(shape, generator, device, torch.bfloat16)
        figures["backward"] = back_to_back_ms(
            harness,
            lambda: torch.autograd.grad(out, (inputs.a, inputs.b), grad_out, retain_graph=True),
        )
    return figures


def harness_figures(harness: ModuleType, csv_path: Path) -> tuple[str, dict[str, dict[str, Any]]]:
    """Check and per-phase ms of the harness's one-row CSV, with its clock record."""
    header, line = csv_path.read_text().splitlines()[:2]
    row = dict(zip(header.split(","), line.split(","), strict=True))
    clock_path = csv_path.with_suffix(harness.CLOCK_LOG_SUFFIX)
    windows = json.loads(clock_path.read_text())["windows"] if clock_path.exists() else []
    figures: dict[str, dict[str, Any]] = {}
    for phase, column in (("forward", "Forward Time (ms)"), ("backward", "Backward Time (ms)")):
        if column in row and math.isfinite(float(row[column])):
            window: dict[str, Any] = next((w for w in windows if w["what"].endswith(f" {phase}")), {})
            figures[phase] = {
                "ms": float(row[column]),
                "sm_mhz": window.get("sm_mhz", {}).get("median", math.nan),
                "power_w": window.get("power_w", {}).get("median", math.nan),
                "clock_moved": window.get("clock_moved", 0.0) > harness.CLOCK_MOVED_WARN,
            }
    return row["Check"], figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", required=True, type=Path)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--shapes-file", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--forward-only", action="store_true")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("crosscheck: needs a CUDA GPU, and none is visible", file=sys.stderr)
        return EXIT_NO_GPU
    harness = load_harness(args.harness, args.backend)
    op = harness.OPS[harness.OP]
    entries = yaml.safe_load(args.shapes_file.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for index, entry in enumerate(entries):
        label = entry["label"]
        print(f"crosscheck: {args.backend} {label} ({index + 1}/{len(entries)})", file=sys.stderr, flush=True)
        one = args.out / f"{args.backend}-{label}.shapes.yaml"
        one.write_text(yaml.safe_dump([entry], sort_keys=False))
        csv_path = args.out / f"{args.backend}-{label}.csv"
        harness.main(
            ["--summary-csv", str(csv_path), "--shapes-file", str(one)]
            + (["--forward-only"] if args.forward_only else [])
        )
        check, measured = harness_figures(harness, csv_path)
        shape = harness.parse_shapes([entry], str(args.shapes_file), op.grouped, op.quant)[0]
        results.append(
            {
                "label": label,
                "check": check,
                "harness": measured,
                "back_to_back": independent(harness, shape, args.forward_only),
            }
        )
    (args.out / f"{args.backend}.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
