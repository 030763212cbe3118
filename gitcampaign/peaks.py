"""The machine's ceilings for `git campaign calibrate --peaks`, measured in a child process:

    python -m gitcampaign.peaks --out PEAKS.json

Each figure is taken at the steady clock, as the harness times kernels: calls back to back for a
pre-roll of PREROLL_S (under its power limit an H200 runs an isolated call at boost clock, 10-25%
faster than a training step sees), then WINDOWS windows of calls back to back, each timed with CUDA
events around the whole window; the figure is the median over the windows.
- dense bf16 GEMM TFLOP/s: torch.matmul (cuBLAS) of two bf16 GEMM_N x GEMM_N matrices, 2n^3 FLOPs;
- dense fp8 GEMM TFLOP/s: torch._scaled_mm of e4m3 GEMM_N x GEMM_N matrices (per-tensor scales,
  bf16 output, fast accumulation: cuBLAS's fastest fp8 path), where the GPU has fp8 (sm_89 on);
- device copy GB/s: `copy_` of a COPY_BYTES tensor into another, counted as read plus write;
- launch floor: `torch.cuda._sleep(0)`, an empty kernel, launched back to back: the GPU time per
  launch (events around the window), and the host's time to issue one.
Writes the figures with the GPU's name, UUID, SM count, clocks (NVML, where nvidia-ml-py is
installed) and versions. Exit 2 without a CUDA GPU. This module imports torch only to measure, so
the tool itself only runs it as a child, and the window logic (`steady`) is tested on the CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from gitcampaign.harness.clock import GpuMonitor, median_sm_mhz

PREROLL_S = 2.0
WINDOWS = 8
WINDOW_S = 0.25
GEMM_N = 8192
COPY_BYTES = 1 << 30
LAUNCHES = 2000  # empty kernels issued to time the host's launch
EXIT_NO_GPU = 2
# GpuMonitor.recording: (SM MHz, W, C) samples while its block runs; none without NVML.
Recording = Callable[[], AbstractContextManager[list[tuple[float, float, float]]]]


def steady(
    timed: Callable[[int], float],
    per_call: float,
    recording: Recording,
    preroll_s: float = PREROLL_S,
    windows: int = WINDOWS,
    window_s: float = WINDOW_S,
) -> dict[str, Any]:
    """`timed(n)` runs n calls back to back and returns their seconds (events around all n). After
    a first call (compiling, cuBLAS's heuristics, left out), a second that sizes the windows, and the
    pre-roll, `windows` windows of about `window_s` each; the rate is `per_call` units per call over
    the median window's seconds per call. The SM clock is the median of `recording`'s samples
    (GpuMonitor.recording: (MHz, W, C) while the block runs) over the windows.
    Sized from the first call, an H100's bf16 windows held 2 calls, not 169 (2026-12-06)."""
    timed(1)
    calls = max(1, round(window_s / max(timed(1), 1e-9)))
    began = time.perf_counter()
    while time.perf_counter() - began < preroll_s:
        timed(calls)
    seconds, clocks = [], []
    for _ in range(windows):
        with recording() as samples:
            seconds.append(timed(calls) / calls)
        clocks += samples
    per_call_s = statistics.median(seconds)
    return {
        "rate": per_call / per_call_s,
        "seconds_per_call": per_call_s,
        "calls_per_window": calls,
        "windows": windows,
        "spread": (max(seconds) - min(seconds)) / per_call_s,
        "sm_mhz": median_sm_mhz(clocks),
    }


def _nvml_info(monitor: GpuMonitor) -> dict[str, Any]:
    """The GPU's driver, clock limits and power limit through the monitor's NVML handle."""
    if monitor.handle is None:
        return {"nvml": f"not available ({monitor.unavailable}): clocks not read"}
    nvml, handle = monitor.nvml, monitor.handle
    return {
        "driver": nvml.nvmlSystemGetDriverVersion(),
        "max_sm_mhz": nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
        "max_memory_mhz": nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
    }


def measure() -> dict[str, Any]:
    import torch

    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", ""))
    monitor = GpuMonitor(device)
    recording = monitor.recording

    def timer(call: Callable[[], Any]) -> Callable[[int], float]:
        def timed(count: int) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(count):
                call()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3

        return timed

    figures = _gemms(torch, device, timer, recording)
    figures["copy"] = _copy(torch, device, timer, recording)
    figures["launch"] = _launch_floor(torch, timer, recording)
    return {
        "gpu": torch.cuda.get_device_name(device),
        "uuid": uuid,
        "capability": list(torch.cuda.get_device_capability(device)),
        "sm_count": props.multi_processor_count,
        "memory_gb": round(props.total_memory / 1e9, 1),
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda or "none"},
        "nvml": _nvml_info(monitor),
        "ceilings": {
            "bf16_gemm_tflops": figures["bf16_gemm"]["rate"] / 1e12,
            "fp8_gemm_tflops": figures["fp8_gemm"]["rate"] / 1e12 if "rate" in figures["fp8_gemm"] else None,
            "copy_gbs": figures["copy"]["rate"] / 1e9,
            "launch_floor_us": figures["launch"]["gpu_us"],
            "launch_host_us": figures["launch"]["host_us"],
        },
        "figures": figures,
        "method": {
            "preroll_s": PREROLL_S,
            "windows": WINDOWS,
            "window_s": WINDOW_S,
            "gemm_n": GEMM_N,
            "copy_bytes": COPY_BYTES,
            "host_launches": LAUNCHES,
        },
    }


def _gemms(torch: Any, device: Any, timer: Any, recording: Recording) -> dict[str, Any]:
    n = GEMM_N
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    return {
        "bf16_gemm": steady(timer(lambda: torch.matmul(a, b)), 2.0 * n**3, recording),
        "fp8_gemm": _fp8(torch, a, b, timer, recording),
    }


def _copy(torch: Any, device: Any, timer: Any, recording: Recording) -> dict[str, Any]:
    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device).random_()
    target = torch.empty_like(source)
    return steady(timer(lambda: target.copy_(source)), 2.0 * COPY_BYTES, recording)


def _fp8(torch: Any, a: Any, b: Any, timer: Any, recording: Recording) -> dict[str, Any]:
    if tuple(torch.cuda.get_device_capability()) < (8, 9) or not hasattr(torch, "_scaled_mm"):
        return {"not_measured": "this GPU has no fp8 tensor cores (sm_89 on), or torch no _scaled_mm"}
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.to(torch.float8_e4m3fn).t()  # column-major, as cuBLAS's fp8 GEMM takes its second operand
    scale = torch.ones((), device=a.device, dtype=torch.float32)

    def call() -> Any:
        return torch._scaled_mm(
            a8, b8, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16, use_fast_accum=True
        )

    try:
        call()
    except RuntimeError as exc:
        return {"not_measured": f"torch._scaled_mm failed: {exc}"}
    return steady(timer(call), 2.0 * a.shape[0] ** 3, recording)


def _launch_floor(torch: Any, timer: Any, recording: Recording) -> dict[str, Any]:
    """Empty kernels back to back: the GPU time per launch (what a stream of tiny kernels costs at
    best), and the host's time to issue one (from a window of launches without a sync)."""

    def launches(count: int) -> float:
        return timer(lambda: torch.cuda._sleep(0))(count)

    gpu = steady(launches, 1.0, recording, preroll_s=0.5, window_s=0.05)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(LAUNCHES):
        torch.cuda._sleep(0)
    host_s = (time.perf_counter() - began) / LAUNCHES
    torch.cuda.synchronize()
    return {"gpu_us": gpu["seconds_per_call"] * 1e6, "host_us": host_s * 1e6, "windows": gpu}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="where to write the figures (JSON)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("peaks: needs a CUDA GPU, and none is visible", file=sys.stderr)
        return EXIT_NO_GPU
    figures = measure()
    args.out.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures["ceilings"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
