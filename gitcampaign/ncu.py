"""Nsight Compute for `git campaign analyze --ncu`: the command lines and the reading of its CSV.

The harness's profiling run (`--profile ... --profile-calls 1`, one shape) is run under

    ncu --target-processes all --metrics METRICS --launch-count LAUNCH_CAP --export REPORT -f COMMAND

and the report is then printed as `ncu --import REPORT.ncu-rep --csv --page raw --print-units base`:
one row per kernel launch, the columns `ID`, ..., `Kernel Name`, ..., one per metric, after a
second line of units (`--print-units base`: bytes, nanoseconds, percent). The report file stays in
the run directory for Nsight Compute's own viewer.

Every launch of the process is measured (ncu replays each one, its caches flushed first), the
warm-up call's and the inputs' included: the harness's interface names no range to measure. The
launches are matched to the profile's kernels by name, and each kernel gets the duration-weighted
mean of its launches' figures (a kernel's launches after autotuning share one configuration).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitcampaign.roofline import weighted

LAUNCH_CAP = 2000  # launches measured per shape at most: ncu replays each one dozens of times
DURATION = "gpu__time_duration.sum"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_THROUGHPUT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGISTERS = "launch__registers_per_thread"
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
BLOCK_SIZE = "launch__block_size"
LOCAL_LOADS = "smsp__sass_inst_executed_op_local_ld.sum"  # register spills (and local arrays)
LOCAL_STORES = "smsp__sass_inst_executed_op_local_st.sum"
STALL_PREFIX = "smsp__average_warp_latency_issue_stalled_"
# Stall reasons every GPU since Volta counts; the top three by their share of the warps' latency
# say whether a kernel waits on memory (long_scoreboard), shared memory or the MIO queue
# (short_scoreboard, mio_throttle), a math pipe, a barrier, or its own instruction stream.
STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "barrier",
    "membar",
    "wait",
    "not_selected",
    "no_instruction",
)
STALLS = tuple(f"{STALL_PREFIX}{reason}.ratio" for reason in STALL_REASONS)
METRICS = (
    DURATION,
    SM_THROUGHPUT,
    MEMORY_THROUGHPUT,
    DRAM_THROUGHPUT,
    OCCUPANCY,
    REGISTERS,
    SHARED_STATIC,
    SHARED_DYNAMIC,
    BLOCK_SIZE,
    LOCAL_LOADS,
    LOCAL_STORES,
    *STALLS,
)
KERNEL_COLUMN = "Kernel Name"
TOP_STALLS = 3
# Units `--print-units base` may still attach to a time, to bring it to nanoseconds.
_TIME_UNITS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}


def profile_command(report: Path, launch_cap: int = LAUNCH_CAP) -> list[str]:
    """ncu's words before the profiled command: every launch, these metrics, a report file."""
    return [
        "ncu",
        "--target-processes",
        "all",
        "--metrics",
        ",".join(METRICS),
        "--launch-count",
        str(launch_cap),
        "--export",
        str(report),
        "-f",
    ]


def import_command(report: Path) -> list[str]:
    """The report as one CSV row per launch, in base units."""
    return ["ncu", "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


@dataclass(frozen=True)
class Launch:
    kernel: str
    values: dict[str, float]  # metric -> value in base units (NaN where ncu had none)


def parse_raw_csv(text: str) -> list[Launch]:
    """The launches of `ncu --csv --page raw` output. Lines before the header (ncu's `==PROF==`
    messages, the application's own output) are skipped; the line after the header holds units."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, body = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    if KERNEL_COLUMN not in header:
        return []
    kernel_at = header.index(KERNEL_COLUMN)
    launches = []
    for row in body:
        if len(row) != len(header):
            continue  # a line of ncu's own (a warning) between rows
        values = {
            name: _value(row[i], units[i] if i < len(units) else "")
            for i, name in enumerate(header)
            if name in METRICS
        }
        launches.append(Launch(row[kernel_at], values))
    return launches


def _value(text: str, unit: str) -> float:
    """A number as ncu prints it ("1,024", "n/a"), times to nanoseconds."""
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return math.nan
    return number * _TIME_UNITS.get(unit, 1.0)


def base_name(kernel: str) -> str:
    """A kernel's name without its return type and parameter list, as both torch's profiler and
    ncu can print it: "void ns::k<int>(float*, int)" and "ns::k<int>" are both "ns::k<int>"."""
    name = kernel.strip()
    if name.startswith("void "):
        name = name[len("void ") :]
    if name.endswith(")"):
        depth = 0
        for index in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[index], 0)
            if depth == 0:
                name = name[:index]
                break
    return re.sub(r"\s+", " ", name).strip()


def summarise(launches: Sequence[Launch]) -> dict[str, Any]:
    """One kernel's figures over its launches: throughputs and occupancy weighted by each launch's
    duration, the largest resource use, local-memory instructions per launch, the top stalls."""

    def mean(metric: str) -> float:
        return weighted(
            [(one.values.get(metric, math.nan), one.values.get(DURATION, 0.0)) for one in launches]
        )

    def most(metric: str) -> float:
        found = [one.values.get(metric, math.nan) for one in launches]
        finite = [value for value in found if math.isfinite(value)]
        return max(finite) if finite else math.nan

    stalls = sorted(
        ((reason, mean(metric)) for reason, metric in zip(STALL_REASONS, STALLS, strict=True)),
        key=lambda item: -item[1] if math.isfinite(item[1]) else math.inf,
    )
    local = [one.values.get(LOCAL_LOADS, 0.0) + one.values.get(LOCAL_STORES, 0.0) for one in launches]
    return {
        "launches_measured": len(launches),
        "gpu_us_per_launch": sum(one.values.get(DURATION, math.nan) for one in launches)
        / len(launches)
        / 1e3,
        "sm_throughput_pct": mean(SM_THROUGHPUT),
        "memory_throughput_pct": mean(MEMORY_THROUGHPUT),
        "dram_throughput_pct": mean(DRAM_THROUGHPUT),
        "achieved_occupancy_pct": mean(OCCUPANCY),
        "registers_per_thread": most(REGISTERS),
        "shared_mem_per_block_bytes": most(SHARED_STATIC) + most(SHARED_DYNAMIC),
        "block_size": most(BLOCK_SIZE),
        "local_memory_instructions_per_launch": sum(local) / len(local),
        "top_stalls": [[reason, value] for reason, value in stalls[:TOP_STALLS] if math.isfinite(value)],
    }


def by_kernel(launches: Sequence[Launch]) -> dict[str, dict[str, Any]]:
    """summarise() per kernel base name."""
    grouped: dict[str, list[Launch]] = {}
    for one in launches:
        grouped.setdefault(base_name(one.kernel), []).append(one)
    return {name: summarise(group) for name, group in grouped.items()}
