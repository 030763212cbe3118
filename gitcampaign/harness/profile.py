"""The profile behind `git campaign analyze`: per shape and phase, the op's calls on the harness's own
inputs under torch.profiler, broken down by kernel, with the host's time to issue a call beside the
device's time to run it. It never decides a round: nothing here is timed for the CSV."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

from gitcampaign.harness.checks import synchronize
from gitcampaign.harness.clock import median_sm_mhz
from gitcampaign.harness.contract import Shape
from gitcampaign.harness.runner import Calls, Run, warm_up

PROFILE_FORMAT = 1
PROFILE_CALLS = 20
PREROLL_S = 1.0  # back-to-back calls before the profiled ones (on a GPU): the sustained clock
STEP_RANGE = "ProfilerStep"  # torch.profiler's range around each step (`ProfilerStep#N`)


def profile_phase(run: Run, calls: Calls, phase: str, count: int, work: float) -> dict[str, Any]:
    """`count` calls of one phase back to back, twice: with nothing attached, for the host's time to
    issue one, then under torch.profiler, for the kernels and the SM clock they ran at. Each time their
    inputs (and a backward's forward) are prepared first, outside the timed window."""
    from torch.profiler import ProfilerActivity, profile, schedule

    op = run.op

    def prepare() -> Any:
        return (
            op.provider(calls.timed_inputs())
            if phase == "forward"
            else calls.backward_call(calls.timed_inputs())
        )

    def preroll() -> None:
        """On a GPU, the same calls back to back for PREROLL_S, as the timed runs' pre-roll runs them:
        the figures are held against ceilings measured at the sustained clock under the power limit,
        and calls on an idle GPU run at boost clock."""
        if run.device.type == "cuda":
            began = time.perf_counter()
            while time.perf_counter() - began < PREROLL_S:
                prepare()()
            synchronize(run.device)

    def prepared() -> list[Any]:
        calls = [prepare() for _ in range(count)]
        synchronize(run.device)
        return calls

    # The host's time to issue a call, with no profiler attached: torch.profiler records every
    # operator and launch, and its own cost lands on the host. Under it a bf16 GEMM forward read
    # 0.16-0.51 ms to issue at Llama shapes (H200, 2026-12-05), where benchmarks/host_cost.py reads
    # 37 us with nothing attached: enough to call a GPU-bound op host-bound. Nor NVML's sampling
    # thread, whose driver queries take the launches' path: profiles with it there read blockwise fp8
    # calls at 2-2.6x the host time of one without it (two H100s, 2026-12-06; not measured apart).
    issued_s = issue(prepared(), run.device)
    cuda = run.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    # The SM clock while the profiled calls run (NVML, on a GPU that has it), whose kernels' times
    # the figures are: a GEMM peak is held against them at this clock (roofline.Limit.at_clock).
    monitor = getattr(run.clock, "monitor", None)

    def profiled(calls: list[Any]) -> list[tuple[float, float, float]]:
        """Issue the calls (bracketed for ncu); the clock samples taken while they ran."""
        with monitor.recording() if monitor is not None else contextlib.nullcontext([]) as samples:
            issue(calls, run.device, bracket=True)
        return samples

    # The profiled calls (their kernels) are also bracketed for Nsight Compute (`--profile-from-start
    # off`), under which the torch profiler may find CUPTI taken: then ncu's report is what counts.
    # Prepared before the profiler starts: a backward's forward runs when its call is prepared, and
    # its kernels are not the backward's. The pre-roll runs in the profiler's warm-up step, after
    # its start: the GPU idles while the profiler starts, and profiled calls right after it ran at
    # boost clock on an H100, a grouped GEMM's at 1.36 of the bf16 peak held at the 1245 MHz of the
    # calls before them (2026-12-06); the warm-up step's calls are not recorded.
    ready = prepared()
    events: list[Any] = []
    try:
        steps = schedule(wait=0, warmup=1, active=1, repeat=1)
        with profile(activities=activities, schedule=steps) as profiler:
            preroll()
            profiler.step()
            clocks = profiled(ready)
            profiler.step()
        events = list(profiler.events())
    except RuntimeError as exc:
        print(f"quick_test_bench: torch.profiler failed ({exc}); host time only", file=sys.stderr)
        clocks = profiled(prepared())
    kernels = tally(events, cuda)
    total_us = sum(record["us"] for record in kernels.values()) or 1.0
    ranked = sorted(kernels.items(), key=lambda item: -item[1]["us"])
    return {
        "calls": count,
        "unit": "flop" if op.info.unit == "TFLOPS" else "byte",
        "work": work,
        "host_ms_per_call": issued_s * 1e3 / count,
        "gpu_ms_per_call": total_us / 1e3 / count,
        "sm_mhz": median_sm_mhz(clocks),
        "kernels": [
            {
                "name": name,
                "launches": int(record["launches"]),
                "gpu_ms": record["us"] / 1e3,
                "share": record["us"] / total_us,
            }
            for name, record in ranked
        ],
    }


def tally(events: list[Any], cuda: bool) -> dict[str, dict[str, float]]:
    """Launches and microseconds by name: on the GPU of its kernels, on the CPU of the top-level ops
    the calls ran. A range is no kernel: the profiler's step, which CUPTI also draws on the GPU's
    timeline, and `record_function` ranges are left out (the step's range was counted as a kernel
    on 2026-12-06 and doubled a forward's GPU time)."""
    import torch

    kernels: dict[str, dict[str, float]] = {}
    for event in events:
        if cuda:
            kernel = event.device_type == torch.autograd.DeviceType.CUDA
            if not kernel or event.is_user_annotation or event.name.startswith(STEP_RANGE):
                continue
        elif not _top_level(event):
            continue
        record = kernels.setdefault(event.name, {"launches": 0, "us": 0.0})
        record["launches"] += 1
        record["us"] += event.device_time_total if cuda else event.cpu_time_total
    return kernels


def _top_level(event: Any) -> bool:
    """An operator the calls ran themselves: under the profiler's step (its schedule wraps each step
    in a `ProfilerStep#N` range), not inside another operator, and not the step itself."""
    parent = event.cpu_parent
    return not event.name.startswith(STEP_RANGE) and (parent is None or parent.name.startswith(STEP_RANGE))


def issue(calls: list[Any], device: Any, bracket: bool = False) -> float:
    """Run the calls back to back; the host's seconds to issue them (the GPU drains after). With
    `bracket`, between cudaProfilerStart and Stop: the calls Nsight Compute captures."""
    import torch

    bracket = bracket and device.type == "cuda"
    if bracket:
        torch.cuda.profiler.start()
    began = time.perf_counter()
    for call in calls:
        call()
    issued_s = time.perf_counter() - began
    synchronize(device)
    if bracket:
        torch.cuda.profiler.stop()
    return issued_s


def profile_shapes(run: Run, shapes: list[Shape], count: int) -> dict[str, Any]:
    import torch

    records = []
    for index, shape in enumerate(shapes):
        generator = torch.Generator(device=run.device).manual_seed(run.seed + 1000 * index)
        calls = Calls(run, shape, generator)
        warm_up(run, calls)
        work = run.op.work(shape, run.dtype)
        records.append(
            {
                "label": shape.label,
                "phases": {
                    phase: profile_phase(run, calls, phase, count, work[phase]) for phase in run.phases
                },
            }
        )
    return {
        "format": PROFILE_FORMAT,
        "op": run.op.name,
        "device": run.gpu_name if run.device.type == "cuda" else "cpu",
        "profiler": "torch.profiler",
        # The datasheet ceiling its figures are held against: tensor-core bf16 or fp8, or HBM.
        "peak": "hbm" if run.op.info.unit == "GB/s" else run.op.info.peak,
        "shapes": records,
    }
