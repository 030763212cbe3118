"""Timing: the GPU in the state a training step runs it in (back to back, at its sustained clock,
L2 cleared before every call, fresh inputs per call), the clock record, and the warm-up that
compiles an autotuner's configs together."""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gitcampaign.harness.contract import PEAKS
from gitcampaign.harness.inputs import Bank, sets_apart

FLUSH_BYTES = 256 * 1024 * 1024  # written before every timed call, as do_bench clears L2
# Under its power limit a Hopper GPU's SM clock hunts by 10-20% within a few hundred ms, so a figure
# is a window of calls long enough to average the hunting, after a pre-roll that lets the clock
# settle: fixed counts of short windows left 1-2% between processes, and 1 s windows after 0.5 s of
# pre-roll spread least for the time they cost (docs/benchmarks/ holds the measurements).
PREROLL_CHUNK_S = 0.25  # the clock is read after each chunk of pre-roll calls
PREROLL_MIN_S, PREROLL_MAX_S = 0.5, 4.0
SETTLED_CLOCK = 0.03  # two successive chunks' median SM clocks this close: settled
TIMED_MIN_S = 1.0  # a timed window lasts at least this long: more calls per repeat when calls are short
MAX_TIMED_CALLS = 20_000
CLOCK_MOVED_WARN = 0.03  # warn when the SM clock drifts more than this within a timed window
MONITOR_PERIOD_S = 0.01  # NVML sampling period
LAUNCH_PROBES = 3  # calls timed with the GPU idle to size the launch cover
MIN_COVER_S, MAX_COVER_S = 20e-6, 5e-3  # spin length bounds when the host does not keep ahead
# The host keeps at most this much GPU time queued (Cover.launched): enough to hide any launch, far
# less than the launch queue's own depth (a second or more of large GEMMs), by which a pre-roll
# settled in the host's time would run on for as long again on the GPU, and a window sized from the
# host's pace would come out several times longer.
QUEUE_AHEAD_S = 0.02
SPIN_CYCLES_PER_S = 2.0e9  # torch.cuda._sleep counts SM cycles; at a lower clock the spin only lasts longer


def median_sm_mhz(samples: list[tuple[float, float, float]]) -> float | None:
    """The median SM clock of `GpuMonitor.recording`'s samples; None where there are none (no NVML)."""
    return statistics.median(sample[0] for sample in samples) if samples else None


class GpuMonitor:
    """SM clock, power and temperature through NVML (`nvidia-ml-py`, imported here, lazily: CPU
    installs need not have it), sampled by a background thread while a window of calls runs.
    Without NVML the harness still times; it only cannot say at what clock."""

    def __init__(self, device: Any) -> None:
        self.handle: Any = None
        self.unavailable = ""
        try:
            import pynvml
        except ImportError:
            self.unavailable = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            return
        self.nvml = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = self._handle(device)
        except pynvml.NVMLError as exc:
            self.unavailable = f"NVML failed: {exc}"

    def _handle(self, device: Any) -> Any:
        """The NVML device of this CUDA device, matched by UUID: CUDA_VISIBLE_DEVICES renumbers CUDA's
        indices but not NVML's."""
        import torch

        try:
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            return self.nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except (AttributeError, TypeError, ValueError, self.nvml.NVMLError):
            return self.nvml.nvmlDeviceGetHandleByIndex(device.index or 0)

    def sample(self) -> tuple[float, float, float]:
        """(SM clock MHz, power W, temperature C) now."""
        nvml = self.nvml
        return (
            float(nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)),
            nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0,
            float(nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU)),
        )

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[tuple[float, float, float]]]:
        """Samples every MONITOR_PERIOD_S while the block runs (and one at each end). ctypes drops the
        GIL inside NVML, so the thread does not slow the host's launches."""
        samples: list[tuple[float, float, float]] = []
        if self.handle is None:
            yield samples
            return
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(MONITOR_PERIOD_S):
                samples.append(self.sample())

        samples.append(self.sample())
        thread = threading.Thread(target=loop, daemon=True)  # campaign-lint: allow S1 -- NVML reads only
        thread.start()
        try:
            yield samples
        finally:
            stop.set()
            thread.join()
            samples.append(self.sample())


class Cover:
    """Whether the GPU has enough queued to hide the host's launch of the next call; if not, a spin
    (torch.cuda._sleep) goes before the call's start event, so the interval holds the GPU's time only.

    The queued work is counted in whole calls still running or waiting, the one at the head taken
    as almost done. Checking only whether the GPU had caught up is not enough: where launching a call
    takes the host longer than running it (fp8 ops of ~10 Triton launches, 0.3-1 ms of host time),
    the GPU finishes call i while the host is half-way through launching call i + 1, whose interval
    then holds part of the launch, and the figure depends on how host and GPU happen to interleave
    (it differed by half between processes for an fp8 forward). The spin lasts twice the launch
    measured with the GPU idle, so the host gets that far ahead and the calls then run in bursts;
    the less the host keeps up, the more often a spin comes, up to one a call.

    The host stays at most `queue_s` of calls ahead of the GPU, and never less than one whole call
    (the bound is at least twice the cover, so it never brings on a spin; 0: as far ahead as the
    launch queue lets it)."""

    def __init__(self, launch_s: float, call_s: float, queue_s: float = QUEUE_AHEAD_S) -> None:
        self.cover_s = min(max(2.0 * launch_s, MIN_COVER_S), MAX_COVER_S)
        self.cycles = int(self.cover_s * SPIN_CYCLES_PER_S)
        self.call_s = max(call_s, 1e-9)
        self.queue_s = max(queue_s, 2.0 * self.cover_s) if queue_s > 0 else math.inf
        self.pending: collections.deque[Any] = collections.deque()  # end events, in launch order
        self.covered = 0  # calls given a spin so far

    def needed(self) -> bool:
        while self.pending and self.pending[0].query():
            self.pending.popleft()
        if (len(self.pending) - 1) * self.call_s >= self.cover_s:
            return False
        self.covered += 1
        return True

    def launched(self, end: Any) -> None:
        """Count the call just launched; where more than queue_s is queued, wait for the oldest calls
        to end (never for the GPU to drain: what stays queued still hides the next launch)."""
        self.pending.append(end)
        while len(self.pending) > 2 and (len(self.pending) - 1) * self.call_s > self.queue_s:
            self.pending.popleft().synchronize()


@dataclass
class Window:
    """What the GPU did while one shape's calls were timed: how they were fed, and at what clock."""

    what: str
    calls: int
    pool_sets: int
    pool_mb: float
    preroll_s: float
    settled: bool
    samples: list[tuple[float, float, float]]
    wall_s: float = 0.0  # all of it: the pool's inputs, launch probes, pre-roll, timed calls, drain
    host_ms: float = math.nan  # the host's time to launch one call (fastest probe, GPU idle)
    gpu_ms: float = math.nan  # the GPU's time for one call (median of the timed calls)
    covered: int = 0  # timed calls given a spin first (Cover): more of them the more host-bound

    @property
    def host_bound(self) -> bool:
        """Launching a call takes the host longer than the GPU takes to run it."""
        return self.host_ms > self.gpu_ms

    def summary(self) -> dict[str, object]:
        record: dict[str, object] = {
            "what": self.what,
            "calls": self.calls,
            "pool_sets": self.pool_sets,
            "pool_mb": round(self.pool_mb, 1),
            "preroll_s": round(self.preroll_s, 3),
            "settled": self.settled,
            "samples": len(self.samples),
            "clock_moved": round(self.clock_moved, 4),
            "wall_s": round(self.wall_s, 3),
            "host_ms": round(self.host_ms, 4),
            "gpu_ms": round(self.gpu_ms, 4),
            "covered": self.covered,
        }
        for index, name in enumerate(("sm_mhz", "power_w", "temp_c")):
            values = [sample[index] for sample in self.samples]
            if values:
                record[name] = {
                    "min": min(values),
                    "median": statistics.median(values),
                    "max": max(values),
                }
        return record

    @property
    def clock_moved(self) -> float:
        """How far the SM clock drifted over the timed window: the median of its last third against
        the median of its first third, over the median of all. Not max - min: under the power limit
        the clock hunts by 10-20% within tenths of a second, which a window of a second averages out;
        a drift (heat, another process) it does not. 0 with fewer than 3 samples."""
        clocks = [sample[0] for sample in self.samples]
        if len(clocks) < 3:
            return 0.0
        third = len(clocks) // 3
        drift = statistics.median(clocks[-third:]) - statistics.median(clocks[:third])
        return abs(drift) / statistics.median(clocks)

    def describe(self) -> str:
        text = (
            f"{self.what}: {self.calls} calls back to back after {self.preroll_s:.2f} s of pre-roll"
            f"{'' if self.settled else ' (clock not settled)'}, inputs from a pool of {self.pool_sets} "
            f"sets ({self.pool_mb:.0f} MB), {self.wall_s:.2f} s in all; a call: host {self.host_ms:.3f} ms "
            f"to launch, GPU {self.gpu_ms:.3f} ms"
        )
        if self.covered:
            text += f"; {self.covered} of the timed calls after a spin that covers the launch"
        if not self.samples:
            return text + "; no clock record"
        record = self.summary()
        sm, power, temp = record["sm_mhz"], record["power_w"], record["temp_c"]
        assert isinstance(sm, dict) and isinstance(power, dict) and isinstance(temp, dict)
        return (
            f"{text}; SM {sm['median']:.0f} MHz ({sm['min']:.0f}-{sm['max']:.0f}), "
            f"{power['median']:.0f} W ({power['min']:.0f}-{power['max']:.0f}), {temp['max']:.0f} C max"
        )


class Clock:
    """CUDA events on a GPU, `time.perf_counter` on the CPU; originals captured before the kernels
    are imported, so a kernel module that replaces a timer cannot change what this clock reads."""

    def __init__(
        self,
        device: Any,
        min_preroll_s: float = PREROLL_MIN_S,
        min_window_s: float = TIMED_MIN_S,
        queue_s: float = QUEUE_AHEAD_S,
    ) -> None:
        import torch

        self.device = device
        self.min_preroll_s, self.min_window_s, self.queue_s = min_preroll_s, min_window_s, queue_s
        self.originals: dict[str, object] = {"time.perf_counter": time.perf_counter}
        self.perf_counter = time.perf_counter
        self.windows: list[Window] = []
        self.l2_bytes = 0
        if device.type == "cuda":
            import triton.testing

            self.event_class = torch.cuda.Event
            self.originals.update(
                {
                    "torch.cuda.Event": torch.cuda.Event,
                    "torch.cuda.Event.record": torch.cuda.Event.record,
                    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                    "torch.cuda.synchronize": torch.cuda.synchronize,
                    "triton.testing.do_bench": triton.testing.do_bench,
                }
            )
            self.l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0))
            self.monitor = GpuMonitor(device)

    @property
    def name(self) -> str:
        if self.device.type != "cuda":
            return "time.perf_counter"
        nvml = "NVML clock record" if self.monitor.handle is not None else self.monitor.unavailable
        return (
            "CUDA events, calls back to back at sustained clock after a pre-roll, L2 cleared before each, "
            f"fresh inputs as views into random banks larger than L2 ({nvml})"
        )

    def replaced(self) -> list[str]:
        """The timers that are no longer the objects captured at start-up."""
        import torch

        current: dict[str, object] = {"time.perf_counter": time.perf_counter}
        if self.device.type == "cuda":
            import triton.testing

            current.update(
                {
                    "torch.cuda.Event": torch.cuda.Event,
                    "torch.cuda.Event.record": torch.cuda.Event.record,
                    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                    "torch.cuda.synchronize": torch.cuda.synchronize,
                    "triton.testing.do_bench": triton.testing.do_bench,
                }
            )
        return [name for name, original in self.originals.items() if current[name] is not original]

    def time_ms(self, call: Callable[[], Any]) -> float:
        """Milliseconds of one call on the CPU (the interpreter: no clocks to settle, no L2 to mind)."""
        start = self.perf_counter()
        call()
        return (self.perf_counter() - start) * 1e3

    def back_to_back(
        self, bank: Bank, prepare: Callable[[], Callable[[], Any]], repeats: int, iters: int, what: str
    ) -> list[float]:
        """Milliseconds of repeats x n timed calls run back to back on the GPU, each on inputs of its
        own; n is `iters`, or more where that many calls would not fill `min_window_s`.

        A training step runs its kernels back to back at the clock the power limit allows, not one
        at a time on a cold GPU at boost clock (on an H200 the two differ by 10-25%). So:
        - every call on inputs of its own, taken from a Bank (views at new addresses, out of L2
          when their turn comes: Bank says why no random draw runs between the calls), through a
          FIFO pool of prepared calls deep enough that the bytes a set holds (its views, and what
          preparing it allocated: a timed backward's forward) exceed POOL_L2_MULTIPLE x L2 between
          its making and its use;
        - L2 cleared before every timed call by writing FLUSH_BYTES, as triton's `do_bench` does:
          the previous call's outputs are not left in L2, and the GPU's duty cycle is do_bench's
          (a training step, too, runs other kernels between its GEMMs); without it the GPU runs
          at another duty cycle and clock than do_bench's, and the two disagree by several percent;
        - a pre-roll of the same calls until the SM clock settles (NVML), then at least
          `min_window_s` of timed calls, with no wait for the GPU to drain from the pre-roll's start
          to the window's end: the host runs ahead and the GPU never waits for it; the host stays
          at most `queue_s` ahead (Cover), so that the host's time tracks the GPU's;
        - where the host does not keep ahead (kernels of a few microseconds, or ops of many
          launches), a GPU spin sized from the measured launch time goes before the start event
          whenever too little is queued to hide the launch (Cover), so the host's launch stays out
          of the interval.
        """
        import torch

        device = self.device
        flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
        torch.cuda.synchronize(device)
        window_began = self.perf_counter()
        before, taken = torch.cuda.memory_allocated(device), bank.handed_out
        pool: collections.deque[Callable[[], Any]] = collections.deque([prepare()])
        set_bytes = torch.cuda.memory_allocated(device) - before + bank.handed_out - taken
        depth = sets_apart(self.l2_bytes, set_bytes)
        while len(pool) < depth:
            pool.append(prepare())

        def step(cover: Cover, start: Any, end: Any) -> None:
            call = pool.popleft()
            if cover.needed():
                torch.cuda._sleep(cover.cycles)  # too little queued to hide this launch: cover it
            flush.zero_()
            start.record()
            call()
            end.record()
            cover.launched(end)
            del call  # its outputs (and a backward's forward) are freed in stream order
            pool.append(prepare())

        # Launch time of one call as the host sees it, with the GPU idle (the worst case).
        launches, call_s = [], 0.0
        for _ in range(LAUNCH_PROBES):
            call = pool.popleft()
            start, end = self.event_class(enable_timing=True), self.event_class(enable_timing=True)
            torch.cuda.synchronize(device)
            began = self.perf_counter()
            start.record()
            call()
            end.record()
            launches.append(self.perf_counter() - began)
            del call
            pool.append(prepare())
            end.synchronize()
            call_s = max(call_s, start.elapsed_time(end) * 1e-3)
        cover = Cover(max(launches), call_s, self.queue_s)

        # The host reads the clock between chunks without waiting for the GPU to drain: once it is
        # queue_s ahead it goes at the GPU's pace, so host time measures the pre-roll, and the GPU
        # never idles between the pre-roll and the timed window. A chunk is sized from the GPU's time a
        # call, or from the host's where launching is slower (host-bound: the host sets the pace).
        preroll_began = self.perf_counter()
        per_call_s = max(call_s, max(launches), 1e-6)
        settled, previous_clock, preroll_calls = False, math.nan, 0
        while self.min_preroll_s > 0 and not settled and self.perf_counter() - preroll_began < PREROLL_MAX_S:
            chunk = max(1, math.ceil(PREROLL_CHUNK_S / per_call_s))
            chunk_began = self.perf_counter()
            with self.monitor.recording() as samples:
                preroll_calls += chunk
                for _ in range(chunk):
                    start, end = self.event_class(enable_timing=True), self.event_class(enable_timing=True)
                    step(cover, start, end)
            per_call_s = max(call_s, (self.perf_counter() - chunk_began) / chunk, 1e-6)
            long_enough = self.perf_counter() - preroll_began >= self.min_preroll_s
            if not samples:
                settled = long_enough
                continue
            clock = statistics.median(sample[0] for sample in samples)
            settled = long_enough and abs(clock - previous_clock) <= SETTLED_CLOCK * previous_clock
            previous_clock = clock
        preroll_s = self.perf_counter() - preroll_began
        # What one timed step costs, prepare included (the probes' figure when there was no pre-roll).
        sustained_call_s = preroll_s / preroll_calls if preroll_calls else call_s
        per_repeat = max(iters, math.ceil(self.min_window_s / (repeats * max(sustained_call_s, 1e-9))))
        calls = min(repeats * per_repeat, max(repeats * iters, MAX_TIMED_CALLS // repeats * repeats))

        events = [
            (self.event_class(enable_timing=True), self.event_class(enable_timing=True)) for _ in range(calls)
        ]
        covered_before = cover.covered
        with self.monitor.recording() as samples:
            for start, end in events:
                step(cover, start, end)
            torch.cuda.synchronize(device)
        pool.clear()  # sets prepared and never timed: their views and forwards go unused
        times = [float(start.elapsed_time(end)) for start, end in events]
        window = Window(
            what,
            calls,
            depth,
            depth * set_bytes / 1e6,
            preroll_s,
            settled,
            samples,
            self.perf_counter() - window_began,
            min(launches) * 1e3,
            statistics.median(times),
            cover.covered - covered_before,
        )
        self.windows.append(window)
        print(f"quick_test_bench: {window.describe()}", file=sys.stderr)
        if window.host_bound:
            print(
                f"quick_test_bench: {what}: WARNING: host-bound: launching a call takes the host "
                f"{window.host_ms:.3f} ms, running it the GPU {window.gpu_ms:.3f} ms. The figure is GPU "
                "time (the launch is hidden); a training step whose host does not run ahead pays the host's",
                file=sys.stderr,
            )
        if window.clock_moved > CLOCK_MOVED_WARN:
            print(
                f"quick_test_bench: {what}: WARNING: the SM clock drifted {100 * window.clock_moved:.1f}% "
                f"during the timed window (more than {100 * CLOCK_MOVED_WARN:.0f}%): the figure mixes "
                "clock states",
                file=sys.stderr,
            )
        return times


@dataclass
class Timing:
    """Per-repeat mean call time (ms) and the derived per-repeat metric."""

    repeat_ms: list[float]
    work: float
    scale: float  # metric = work / seconds / scale (1e12 for TFLOPS, 1e9 for GB/s)

    @property
    def per_repeat_metric(self) -> list[float]:
        return [self.work / (ms * 1e-3) / self.scale if ms > 0 else math.inf for ms in self.repeat_ms]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.repeat_ms)

    @property
    def metric(self) -> float:
        return statistics.median(self.per_repeat_metric)

    @property
    def stddev(self) -> float:
        return statistics.pstdev(self.per_repeat_metric)


def measure(
    clock: Clock,
    bank: Bank,
    prepare: Callable[[], Callable[[], Any]],
    repeats: int,
    iters: int,
    work: float,
    scale: float,
    what: str = "",
) -> Timing:
    """`prepare()` takes fresh inputs from `bank` and returns the zero-argument call to time (setup
    untimed). A repeat is the mean of `iters` consecutive calls."""
    if clock.device.type == "cuda":
        call_ms = clock.back_to_back(bank, prepare, repeats, iters, what)
        iters = len(call_ms) // repeats
    else:
        call_ms = []
        for _ in range(repeats * iters):
            call = prepare()
            call_ms.append(clock.time_ms(call))
            del call
    repeat_ms = [statistics.fmean(call_ms[index : index + iters]) for index in range(0, len(call_ms), iters)]
    return Timing(repeat_ms, work, scale)


def device_peaks(device: Any) -> tuple[str, dict[str, float] | None]:
    import torch

    if device.type != "cuda":
        return "CPU", None
    name = torch.cuda.get_device_name(device)
    for words, peaks in PEAKS:
        if all(word in name for word in words):
            return name, peaks
    return name, None


# The autotuner's timing of one config in the warm-up: do_bench with 5 ms of warm-up calls and 20 ms
# of timed ones (Triton's defaults: 25 and 100), about 20 ms / the kernel's time of timed calls (9
# for a 2 ms kernel, ~100 for 0.1 ms with do_bench's L2 clear), of which the median decides: enough
# to pick the fastest config, at a quarter of the default's cost in a cold process.
TUNING_WARMUP_MS = 5
TUNING_REP_MS = 20


@dataclass
class Tuning:
    seconds: float = 0.0  # spent in the autotuner's timing of configs (not in compiling them together)


@contextlib.contextmanager
def configs_compiled_together(device: Any, perf_counter: Callable[[], float]) -> Iterator[Tuning]:
    """While the block runs, an autotuned kernel compiles all its configs at once, in threads, before
    Triton's autotuner times them one by one (which then finds them compiled), each briefly
    (TUNING_WARMUP_MS, TUNING_REP_MS) unless the kernel brings a benchmark of its own. Yields the
    seconds the timing took, by `perf_counter` (the clock's original, which no kernel can replace).

    Triton compiles an autotuner's configs one after another, each as the benchmark reaches it, the
    GPU idle meanwhile: most of a cold process's first calls. Part of a compile holds the GIL (Python builds the IR), the rest does not (the MLIR passes,
    ptxas in a process of its own). Which config wins is still Triton's choice, from do_bench's median.
    A config that does not compile fails here silently and again, as Triton reports it, in the
    benchmark. The compiling hooks the autotuner's timing of a key's first config, so a key whose
    tuning is known (in memory, or in the autotune results a validation keeps on disk) compiles only
    the config it launches. Kernels with one config, and the CPU (the interpreter), are left alone."""
    tuning = Tuning()
    if device.type != "cuda":
        yield tuning
        return
    from concurrent.futures import ThreadPoolExecutor  # campaign-lint: allow S1 -- warm-up compiles

    import triton.testing
    from triton.runtime import _async_compile
    from triton.runtime.autotuner import Autotuner

    original = Autotuner._bench
    brief = functools.partial(triton.testing.do_bench, warmup=TUNING_WARMUP_MS, rep=TUNING_REP_MS)

    def bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        configs = self.prune_configs(meta)  # what Autotuner.run is timing, in its order
        if config is configs[0]:
            launch = {key: value for key, value in meta.items() if key != "warmup"}
            with (
                ThreadPoolExecutor(min(len(configs), os.cpu_count() or 1)) as pool,
                _async_compile.AsyncCompileMode(pool, ignore_errors=True),
            ):
                for each in configs:
                    with contextlib.suppress(Exception):
                        self.fn.run(*args, warmup=True, **launch, **each.all_kwargs())
        # Triton's `do_bench` property caches its benchmark in the instance's __dict__; one there
        # shadows it for this timing only. A kernel's own benchmark (`do_bench=`) is kept.
        began = perf_counter()
        own = getattr(self, "_do_bench", None) is not None
        before = self.__dict__.get("do_bench")
        if not own:
            self.__dict__["do_bench"] = brief
        try:
            return original(self, *args, config=config, **meta)
        finally:
            if not own:
                if before is None:
                    del self.__dict__["do_bench"]
                else:
                    self.__dict__["do_bench"] = before
            tuning.seconds += perf_counter() - began

    Autotuner._bench = bench
    try:
        yield tuning
    finally:
        Autotuner._bench = original
