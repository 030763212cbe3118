"""The environment recorded with every verdict: the fingerprint, read in a child process, and the
GPU clocks the harness logged while it timed.

The tool itself never imports torch (its bookkeeping stays fast); the probe runs under the same
interpreter that runs the harness.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gitcampaign import git as g

_PROBE = r"""
import importlib.metadata as md, json, sys
info = {"python": sys.version.split()[0]}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda or "none"
    info["gpu_count"] = torch.cuda.device_count()
    info["gpu"] = torch.cuda.get_device_name(0) if info["gpu_count"] else "none (CPU)"
except Exception as exc:
    info["torch"] = f"unavailable ({exc.__class__.__name__})"
try:
    import triton
    info["triton"] = triton.__version__
except Exception as exc:
    info["triton"] = f"unavailable ({exc.__class__.__name__})"
try:
    dist = md.distribution("gitcampaign")
    direct = dist.read_text("direct_url.json") or "{}"
    info["editable_install"] = bool(json.loads(direct).get("dir_info", {}).get("editable", False))
except md.PackageNotFoundError:
    info["editable_install"] = False
print(json.dumps(info))
"""


def tool_env(cwd: Path | None = None) -> dict[str, str]:
    """The environment for child commands: `python` resolves to the interpreter running the tool;
    with `cwd` (a measured tree), that tree comes first on PYTHONPATH, ahead of any installed copy."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    if cwd is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@functools.cache
def _probe(timeout_s: float) -> str:
    try:
        return subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, env=tool_env()
        ).stdout
    except subprocess.TimeoutExpired:
        return ""


def fingerprint(timeout_s: float = 120.0) -> dict[str, object]:
    """GPU, driver, CUDA, torch, triton, python, git: what a verdict must name to be reproducible.

    Read once per process: the interpreter and its packages do not change under a running command.
    """
    out = _probe(timeout_s)
    try:
        info: dict[str, object] = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    except json.JSONDecodeError:
        info = {}
    info = info or {"torch": "probe failed"}
    info["driver"] = _driver_version()
    info["platform"] = platform.platform()
    info["git"] = g.git_version_line()
    return info


@functools.cache  # nvidia-smi is slow; the driver does not change within a process
def _driver_version() -> str:
    if shutil.which("nvidia-smi") is None:
        return "none"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except subprocess.TimeoutExpired:
        return "nvidia-smi timed out"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


# Written by the quick harness beside each CSV (its CLOCK_LOG_SUFFIX): one record per timed window.
CLOCK_LOG_GLOB = "*.clocks.json"


def clock_records(directory: Path) -> dict[str, dict[str, object]]:
    """What the GPU ran at while a measurement's figures were timed, per shape and phase over all
    the harness runs under `directory`: SM clock (least, median, greatest of the windows' medians),
    median power, hottest temperature, and how many windows drifted. Empty without NVML records."""
    windows = _windows(sorted(directory.rglob(CLOCK_LOG_GLOB)))
    summary: dict[str, dict[str, object]] = {}
    for what, records in windows.items():
        clocks = sorted(float(r["sm_mhz"]["median"]) for r in records)
        power = sorted(float(r.get("power_w", {}).get("median", math.nan)) for r in records)
        summary[what] = {
            "windows": len(records),
            "sm_mhz": [clocks[0], statistics.median(clocks), clocks[-1]],
            "power_w": statistics.median(power),
            "temp_c_max": max(float(r.get("temp_c", {}).get("max", math.nan)) for r in records),
            "drifted": sum(1 for r in records if r.get("clock_moved", 0.0) > CLOCK_DRIFT_WARN),
        }
    return summary


def shape_clocks(paths: Iterable[Path]) -> dict[str, float]:
    """{shape label: SM clock} over the clock logs at `paths`: the median of the windows' median
    clocks, every phase of the shape together (a window's `what` is "LABEL PHASE"). Where a figure
    of the shape was taken; empty without NVML records."""
    by_shape: dict[str, list[float]] = {}
    for what, records in _windows(sorted(paths)).items():
        label = what.rpartition(" ")[0] or what
        by_shape.setdefault(label, []).extend(float(r["sm_mhz"]["median"]) for r in records)
    return {label: statistics.median(clocks) for label, clocks in by_shape.items()}


def _windows(paths: Iterable[Path]) -> dict[str, list[dict[str, Any]]]:
    """The timed windows with an SM clock record in the clock logs at `paths`, by their `what`."""
    windows: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        try:
            records = json.loads(path.read_text()).get("windows", [])
        except (OSError, ValueError, AttributeError):
            continue
        for record in records:
            if isinstance(record, dict) and isinstance(record.get("sm_mhz"), dict):
                windows.setdefault(str(record.get("what")), []).append(record)
    return windows


CLOCK_DRIFT_WARN = 0.03  # the harness's CLOCK_MOVED_WARN (a test keeps them equal)
