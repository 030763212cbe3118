"""The measurements behind BENCHMARKS.md's first table (the harness against an outside clock) and its spread.

    python3 benchmarks/harness_check.py agreement OUT [--ops gemm:2,quantize_fp8_rowwise:1] [--rounds 4]
    python3 benchmarks/harness_check.py spread OUT [--processes 5] [--harness-args "--preroll-s 0.5"]
        [--op gemm_fp8_tensorwise --pick 1,0]

agreement: for each op, the harness and the independent back-to-back measurement
(`python -m gitcampaign.crosscheck`, what `git campaign calibrate` runs: one process, both backends
interleaved in --rounds ABBA rounds per shape) for the triton and the torch backend on the first N
shapes (OP:N, default 2) of the op's preset; prints the agreement table (markdown), rewritten after
each op.
spread: the quick harness for --op (default gemm; triton) in --processes processes of one commit on
the --pick shapes of its preset (default 2,3: 8B gate_up and down), each process's figures and wall
time, the process-to-process spread and the A/A noise floor of consecutive pairs
(`gitcampaign.decision.noise_floor`, as BASELINE computes it); --harness-args passes options to the
harness (shorter pre-rolls or windows: what they save against what they cost in spread).
Run from the repository root on the GPU machine; one pinned autotune config per kernel (as the
issue's comparison), so that tuning time stays out of a 10-minute device call.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gitcampaign.calibration import build_rows, row_notes  # noqa: E402
from gitcampaign.decision import PairSample, noise_floor  # noqa: E402
from gitcampaign.harness.ops import op_names  # noqa: E402
from gitcampaign.shapes import dump_shapes, preset  # noqa: E402

# The configs the persistent TMA kernels' tuners picked on the H200 for the Llama-3.1-8B / Mixtral
# shapes (benchmarks/dev/*_dev.py): both measures time this one kernel.
PINNED = {
    "KERNELS_GEMM_CONFIG": "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,EPILOGUE_SUBTILE=1,num_warps=8,num_stages=3",
    "KERNELS_GROUPED_GEMM_CONFIG": (
        "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,EPILOGUE_SUBTILE=1,num_warps=8,num_stages=3"
    ),
    "KERNELS_GROUPED_GEMM_DB_CONFIG": "BLOCK_M=64,BLOCK_N=128,BLOCK_K=256,GROUP_M=8,num_warps=8,num_stages=3",
    "KERNELS_GEMM_FP8_CONFIG": (
        "BLOCK_M=128,BLOCK_N=256,BLOCK_K=128,GROUP_M=8,EPILOGUE_SUBTILE=1,OCCUPANCY=1,num_warps=8,num_stages=3"
    ),
}


def preset_of(op: str) -> str:
    """The shapes an op is checked on, from its spec: a routed op on Mixtral's experts, a
    memory-bound one on the 8B activations, a GEMM on the 8B linears."""
    from gitcampaign.harness.ops import spec_of

    info = spec_of(op)[1]  # type: ignore[index]
    if any(field.type == "routing" for field in info.fields):
        return "mixtral-8x7b:mbs=1"
    return "llama3.1-8b-quant:mbs=1" if info.unit == "GB/s" else "llama3.1-8b:mbs=1"


PRESETS = {op: preset_of(op) for op in op_names()}
# Which of the preset's shapes, in order: gate_up is the largest 8B linear, qkv a mid-size one.
PICK = {"llama3.1-8b:mbs=1": [2, 0, 3, 1], "mixtral-8x7b:mbs=1": [0, 6], "llama3.1-8b-quant:mbs=1": [0, 1]}


def harness_copy(op: str, backend: str) -> Path:
    """campaigns/harness-OP/quick_test_bench.py and its op spec, as `git campaign prepare` writes them."""
    from gitcampaign.harness.build import frozen_harness
    from gitcampaign.harness.ops import spec_of

    folder = ROOT / "campaigns" / f"harness-{op}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "op_spec.py").write_bytes(spec_of(op)[0].read_bytes())  # type: ignore[index]
    path = folder / "quick_test_bench.py"
    path.write_bytes(frozen_harness(op, backend))
    return path


# Blockwise fp8 goes to the Gluon kernel (kernels/_gluon_fp8.py: one tile, no tuner) unless a tile is
# pinned, which would time the Triton kernel instead: the harness times it unpinned, as training runs it.
OP_UNPINNED = {"gemm_fp8_blockwise": ("KERNELS_GEMM_FP8_CONFIG",)}


def child_env(op: str = "gemm") -> dict[str, str]:
    unpinned = OP_UNPINNED.get(op, ())
    env = {name: value for name, value in os.environ.items() if name not in unpinned}
    pins = {name: value for name, value in PINNED.items() if name not in unpinned}
    return {**env, **pins, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def agreement(out: Path, ops: list[str], rounds: int, timeout_s: float) -> None:
    lines = [
        "| op | shape | phase | ours harness ms | ours b2b ms | dev | vendor harness ms | vendor b2b ms | dev "
        "| ratio harness | ratio b2b | ratio dev | ratio spread harness/b2b | SM MHz ours harness/b2b, vendor harness/b2b |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    summary = []
    for spec in ops:
        op, _, count = spec.partition(":")
        shapes = [preset(PRESETS[op])[index] for index in PICK[PRESETS[op]][: int(count or 2)]]
        shapes_file = out / f"{op}.shapes.yaml"
        shapes_file.write_text(dump_shapes(shapes))
        harness = harness_copy(op, "triton")
        result = out / op / "crosscheck.json"
        result.unlink(missing_ok=True)
        began = time.time()
        command = [
            sys.executable,
            "-m",
            "gitcampaign.crosscheck",
            "--harness",
            str(harness),
            "--ours",
            "triton",
            "--vendor",
            "torch",
            "--rounds",
            str(rounds),
            "--shapes-file",
            str(shapes_file),
            "--out",
            str(out / op),
        ]
        with open(out / f"{op}.log", "w") as log:
            try:
                code = subprocess.run(
                    command,
                    cwd=ROOT,
                    env=child_env(op),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                ).returncode
            except subprocess.TimeoutExpired:
                code = -1
        print(f"== {op}: exit {code} in {time.time() - began:.0f} s", flush=True)
        if not result.exists():  # rewritten after each shape: a timed-out run keeps the shapes it finished
            continue
        records = json.loads(result.read_text())
        for row in build_rows(records):
            summary.append(row)
            lines.append(
                f"| {op} | {row.label} | {row.phase} | {row.ours_harness_ms:.4g} | {row.ours_b2b_ms:.4g} | "
                f"{100 * row.ours_deviation:+.1f}% | {row.vendor_harness_ms:.4g} | {row.vendor_b2b_ms:.4g} | "
                f"{100 * row.vendor_deviation:+.1f}% | {row.harness_ratio:.4f} | {row.b2b_ratio:.4f} | "
                f"{100 * row.ratio_deviation:+.2f}% | {100 * row.harness_ratio_spread:.1f}%/"
                f"{100 * row.b2b_ratio_spread:.1f}% | {row.ours_harness_mhz:.0f}/{row.ours_b2b_mhz:.0f}, "
                f"{row.vendor_harness_mhz:.0f}/{row.vendor_b2b_mhz:.0f} |"
            )
        for record in records:
            for number, one in enumerate(record["rounds"], start=1):
                for role, check in one["check"].items():
                    if check != "PASS":
                        lines.append(
                            f"<!-- {op} {record['backends'][role]} {record['label']} round {number}: Check {check} -->"
                        )
        (out / "agreement.md").write_text("\n".join(lines) + "\n")
    worst_shape = max(
        (max(abs(r.ours_deviation), abs(r.vendor_deviation)) for r in summary), default=math.nan
    )
    worst_ratio = max((abs(r.ratio_deviation) for r in summary), default=math.nan)
    lines.append(
        f"\n{len(summary)} rows; worst per-shape deviation {100 * worst_shape:.2f}%, worst ratio deviation "
        f"{100 * worst_ratio:.2f}%; all agree: {all(r.agrees() for r in summary) and bool(summary)}"
    )
    lines += [f"- note: {note}" for note in row_notes(summary)]
    (out / "agreement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def spread(
    out: Path, processes: int, op: str, pick: list[int], timeout_s: float, harness_args: list[str]
) -> None:
    harness = harness_copy(op, "triton")
    shapes = [preset(PRESETS[op])[index] for index in pick]
    shapes_file = out / "spread.shapes.yaml"
    shapes_file.write_text(dump_shapes(shapes))
    tables, walls = [], []
    for index in range(processes):
        started = time.perf_counter()
        csv_path = out / f"spread{index + 1}.csv"
        with open(out / f"spread{index + 1}.log", "w") as log:
            subprocess.run(
                [
                    sys.executable,
                    str(harness),
                    "--summary-csv",
                    str(csv_path),
                    "--shapes-file",
                    str(shapes_file),
                    *harness_args,
                ],
                cwd=ROOT,
                env=child_env(op),
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
            )
        walls.append(time.perf_counter() - started)
        header, *rows = csv_path.read_text().splitlines()
        tables.append(
            {row.split(",")[0]: dict(zip(header.split(","), row.split(","), strict=True)) for row in rows}
        )
    labels = [shape.label for shape in shapes]
    lines = [
        "| shape | metric | per process | mean | min - max | process-to-process CV |",
        "|---|---|---|---|---|---|",
    ]
    for label in labels:
        for metric in ("Forward TFLOPS", "Backward TFLOPS", "step"):
            values = [
                step_tflops(table[label]) if metric == "step" else float(table[label][metric])
                for table in tables
            ]
            mean = statistics.fmean(values)
            lines.append(
                f"| {label} | {metric} | {' / '.join(f'{v:.1f}' for v in values)} | {mean:.1f} | "
                f"{min(values):.1f} - {max(values):.1f} | {100 * statistics.pstdev(values) / mean:.2f}% |"
            )
    pairs = [
        PairSample(
            incumbent={label: step_tflops(tables[i][label]) for label in labels},
            candidate={label: step_tflops(tables[i + 1][label]) for label in labels},
            session=0,
        )
        for i in range(0, len(tables) - 1, 2)
    ]
    aggregate, per_shape = noise_floor(pairs, labels)
    lines.append(
        f"\nA/A noise floor over {len(pairs)} pairs (processes 1/2, 3/4, ...; Combined Step TFLOPS): aggregate "
        f"{100 * aggregate:.2f}%, "
        + ", ".join(f"{label} {100 * value:.2f}%" for label, value in per_shape.items())
    )
    lines.append(
        f"Harness options: {' '.join(harness_args) or '(defaults)'}; wall time a process: "
        + " / ".join(f"{wall:.1f}" for wall in walls)
        + " s"
    )
    (out / "spread.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def step_tflops(row: dict[str, str]) -> float:
    """Combined Step TFLOPS = 6MNK / (forward ms + backward ms)."""
    work = 6.0 * int(row["M"]) * int(row["N"]) * int(row["K"])
    return work / ((float(row["Forward Time (ms)"]) + float(row["Backward Time (ms)"])) * 1e-3) / 1e12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("agreement", "spread"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--ops", default=",".join(PRESETS))
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--shapes", type=int, default=2, help="spread: how many of the --pick shapes")
    parser.add_argument("--op", default="gemm", choices=PRESETS, help="spread: the op")
    parser.add_argument(
        "--pick", default="2,3", help="spread: indices into the op's preset (8B: qkv,o,gate_up,down)"
    )
    parser.add_argument("--rounds", type=int, default=4, help="agreement: ABBA rounds per shape")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per child process")
    parser.add_argument("--harness-args", default="", help="spread: options for the harness, one string")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(yaml.safe_dump({"argv": sys.argv, "started": time.strftime("%FT%TZ", time.gmtime())}), flush=True)
    if args.stage == "agreement":
        agreement(args.out, args.ops.split(","), args.rounds, args.timeout)
    else:
        pick = [int(index) for index in args.pick.split(",")][: args.shapes]
        spread(args.out, args.processes, args.op, pick, args.timeout, shlex.split(args.harness_args))


if __name__ == "__main__":
    main()
