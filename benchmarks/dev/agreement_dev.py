"""Why the harness and the outside clock disagree on an op: in one process, rounds of the quick harness
and of variants of `git campaign calibrate`'s back-to-back loop (gitcampaign.crosscheck) on one
shape, each with its SM clock, power and temperature.

    python3 benchmarks/dev/agreement_dev.py OUT [--op grouped_gemm] [--pick 0] [--rounds 3] [--backend triton]

Variants:
- harness     the quick harness (fresh inputs as views into banks of random values drawn once, a
              pre-roll until the clock settles);
- b2b         crosscheck's loop: one input set, a memset of at least 256 MB before each call;
- b2b-pool    the memset, and two input sets taken in turn;
- b2b-fresh   the memset, and new inputs drawn before every call (outside the interval), as the
              harness drew them before its banks;
- b2b-read    one input set, the clear reads its buffer instead of writing it (L2 left clean, where the
              memset leaves it dirty);
Each round runs them in a rotated order, so that the heat one leaves biases none in particular; then
the GPU time of drawing one input set (the work b2b-fresh puts between its calls).
On 2026-11-30 the harness read grouped gate_up 9-11% faster than b2b at a 13-16% higher clock, both at
the 700 W limit, and the fp8 quantisers 5-7% faster at 1980 MHz (BENCHMARKS.md). A first run
(11:33 UTC) left out the memset and the single input set as causes (b2b without the memset, a
variant since dropped: grouped 1470 MHz, slower still; quantiser 0.0997 ms, the host's launch inside
the interval), which left the fresh draws.
Needs a CUDA GPU; the GEMM configs are pinned as in benchmarks/harness_check.py. Writes OUT/agreement_dev.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from harness_check import PICK, PRESETS, child_env, harness_copy  # noqa: E402

from gitcampaign.crosscheck import harness_figures, independent, load_harness  # noqa: E402
from gitcampaign.shapes import dump_shapes, preset  # noqa: E402

# The outside clock's variants: crosscheck.independent's arguments for each.
OUTSIDE = {
    "b2b": {},
    "b2b-pool": {"input_sets": 2},
    "b2b-fresh": {"fresh": True},
    "b2b-read": {"clear": "read"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--op", default="grouped_gemm", choices=sorted(PRESETS))
    parser.add_argument("--pick", type=int, default=0, help="which of harness_check's picked shapes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="triton", help="triton (ours) or torch (the vendor)")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("agreement_dev: needs a CUDA GPU, and none is visible")
    env = child_env(args.op)
    os.environ.clear()
    os.environ.update(env)
    args.out.mkdir(parents=True, exist_ok=True)
    entry = preset(PRESETS[args.op])[PICK[PRESETS[args.op]][args.pick]]
    shapes_file = args.out / "shape.yaml"
    shapes_file.write_text(dump_shapes([entry]))
    harness = load_harness(harness_copy(args.op, args.backend), "ours", args.backend)
    variants = ("harness", *OUTSIDE)
    op = harness.OPS[harness.OP]
    shape = harness.parse_shapes(
        yaml.safe_load(shapes_file.read_text()), str(shapes_file), op.grouped, op.quant
    )[0]
    rows = []
    for index in range(args.rounds):
        order = variants[index % len(variants) :] + variants[: index % len(variants)]
        for variant in order:
            print(f"agreement_dev: round {index + 1}/{args.rounds}: {variant}", file=sys.stderr, flush=True)
            if variant == "harness":
                csv_path = args.out / f"harness-r{index + 1}.csv"
                harness.main(["--summary-csv", str(csv_path), "--shapes-file", str(shapes_file)])
                check, figures = harness_figures(harness, csv_path)
                if check != "PASS":
                    raise SystemExit(f"agreement_dev: the harness says {check} (see {csv_path})")
            else:
                figures = independent(harness, shape, False, **OUTSIDE[variant])
            for phase, figure in figures.items():
                rows.append({"round": index + 1, "variant": variant, "phase": phase, **figure})
            (args.out / "agreement_dev.json").write_text(json.dumps(rows, indent=1) + "\n")
    generator = torch.Generator(device="cuda").manual_seed(1)
    draws = []
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        drawn = op.inputs(shape, generator, torch.device("cuda"), torch.bfloat16)
        end.record()
        end.synchronize()
        draws.append(start.elapsed_time(end))
        del drawn
    print(f"{args.op} {entry.label} ({args.backend}), {args.rounds} rounds")
    print(f"drawing one input set: {statistics.median(draws[1:]):.3f} ms of GPU time (median of 5)")
    print("| variant | phase | ms (median of rounds) | per round | SM MHz | W | C max |")
    print("|---|---|---|---|---|---|---|")
    for variant in variants:
        for phase in ("forward", "backward"):
            mine = [row for row in rows if row["variant"] == variant and row["phase"] == phase]
            if not mine:
                continue

            def median(key: str, mine: list[dict[str, Any]] = mine) -> float:
                return statistics.median(row[key] for row in mine)

            per_round = " / ".join(f"{row['ms']:.4g}" for row in mine)
            print(
                f"| {variant} | {phase} | {median('ms'):.4g} | {per_round} | "
                f"{median('sm_mhz'):.0f} | {median('power_w'):.0f} | {max(row['temp_c'] for row in mine):.0f} |"
            )


if __name__ == "__main__":
    main()
