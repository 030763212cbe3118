"""The window logic of `calibrate --peaks` (gitcampaign/peaks.py) with a fake timer; the measuring
itself needs a GPU (the command the lead runs on the H200 is in docs/analyze.md)."""

from __future__ import annotations

import pytest

from gitcampaign.peaks import steady


def test_the_rate_is_the_median_window_after_the_preroll() -> None:
    calls: list[int] = []
    per_call_s = iter([2e-3] + [1.0e-3] * 1000)  # the first call compiles; then steady

    def timed(count: int) -> float:
        calls.append(count)
        step = next(per_call_s)
        return count * step

    clocks = iter([1500.0, 1510.0, 1490.0, 1500.0])
    found = steady(timed, 2.0e12, lambda: next(clocks), preroll_s=0.0, windows=4, window_s=0.25)
    assert calls[0] == 1 and calls[1:] == [125] * 4  # windows sized from the first call
    assert found["rate"] == pytest.approx(2.0e15)
    assert found["sm_mhz"] == 1500.0 and found["spread"] == pytest.approx(0.0)


def test_without_nvml_the_clock_is_unknown() -> None:
    found = steady(lambda count: count * 1e-3, 1.0, lambda: None, preroll_s=0.0, windows=3)
    assert found["sm_mhz"] is None and found["rate"] == pytest.approx(1e3)
