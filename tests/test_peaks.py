"""The window logic of `calibrate --peaks` (gitcampaign/peaks.py) with a fake timer; the measuring
itself needs a GPU (the command the lead runs on the H200 is in docs/analyze.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from gitcampaign.peaks import Recording, steady


def recording_of(clocks: list[float]) -> Recording:
    """As GpuMonitor.recording: each window's samples, taken while it runs (here two a window)."""
    source = iter(clocks)

    @contextlib.contextmanager
    def recording() -> Iterator[list[tuple[float, float, float]]]:
        samples = [(next(source), 700.0, 60.0)]
        yield samples
        samples.append((next(source), 700.0, 60.0))

    return recording


def test_the_rate_is_the_median_window_after_the_preroll() -> None:
    """The first call (cuBLAS's heuristics, 0.2 s) is left out: the second sizes the windows, 250
    calls of 1 ms; the clock is the median of the samples taken while the windows ran."""
    calls: list[int] = []
    per_call_s = iter([0.2] + [1.0e-3] * 1000)

    def timed(count: int) -> float:
        calls.append(count)
        step = next(per_call_s)
        return count * step

    recording = recording_of([1500.0, 1510.0, 1490.0, 1500.0, 1400.0, 1500.0, 1500.0, 1980.0])
    found = steady(timed, 2.0e12, recording, preroll_s=0.0, windows=4, window_s=0.25)
    assert calls[:2] == [1, 1] and calls[2:] == [250] * 4
    assert found["calls_per_window"] == 250 and found["rate"] == pytest.approx(2.0e15)
    assert found["sm_mhz"] == 1500.0 and found["spread"] == pytest.approx(0.0)


def test_without_nvml_the_clock_is_unknown() -> None:
    found = steady(
        lambda count: count * 1e-3, 1.0, lambda: contextlib.nullcontext([]), preroll_s=0.0, windows=3
    )
    assert found["sm_mhz"] is None and found["rate"] == pytest.approx(1e3)
