"""The rounds of gitcampaign.crosscheck on a fake GPU whose clock moves: why both backends are
measured in one process, next to each other, in ABBA order. (The measurements themselves need CUDA;
benchmarks/harness_check.py runs them.)"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import kernels
from gitcampaign import crosscheck
from gitcampaign.calibration import RATIO_LIMIT, ROLES, SHAPE_LIMIT, CalibrationRow, build_rows
from gitcampaign.crosscheck import Figures, harness_figures, interleave, load_harness, round_order
from tests.harness_build import frozen_module, write_harness

qtb = frozen_module()

TRUE_MS = {"ours": {"forward": 3.6, "backward": 7.0}, "vendor": {"forward": 2.7, "backward": 5.4}}
WINDOW_S = 2.0  # one phase's pre-roll and timed window
CHECKS_S = 1.0  # the harness's correctness checks after its windows
PROCESS_GAP_S = 20.0  # start-up and compilation of the next process, in the scheme before
HARNESS_BIAS = 1.02  # the harness reads 2% slower than the outside clock, for both backends alike


class FakeGpu:
    """A compute-bound op takes its true time scaled by the clock: ms = true ms x 1500 / SM MHz.
    Every window takes WINDOW_S of its time, at the clock `clock(t)` with a little hunting that a
    window does not average out (0.2%, seeded)."""

    def __init__(self, clock: Callable[[float], float], seed: int = 0, hunting: float = 0.002) -> None:
        self.clock, self.now, self.hunting = clock, 0.0, hunting
        self.random = random.Random(seed)
        self.windows: list[tuple[str, str]] = []

    def window(self, what: str, role: str, ms: float) -> dict[str, float]:
        mhz = self.clock(self.now) * (1.0 + self.random.gauss(0.0, self.hunting))
        self.now += WINDOW_S
        self.windows.append((what, role))
        return {"ms": ms * 1500.0 / mhz, "sm_mhz": mhz, "power_w": 690.0}

    def harness(self, role: str, round_index: int) -> tuple[str, Figures]:
        figures = {
            phase: self.window("harness", role, HARNESS_BIAS * ms) for phase, ms in TRUE_MS[role].items()
        }
        self.now += CHECKS_S
        return "PASS", figures

    def back_to_back(self, role: str, round_index: int) -> Figures:
        return {phase: self.window("b2b", role, ms) for phase, ms in TRUE_MS[role].items()}


def interleaved(gpu: FakeGpu, rounds: int) -> list[CalibrationRow]:
    return build_rows(
        [{"label": "s", "backends": {}, "rounds": interleave(rounds, gpu.harness, gpu.back_to_back)}]
    )


def per_process(gpu: FakeGpu) -> list[CalibrationRow]:
    """The scheme before: one process per backend, one after the other, each timing the shape with
    the harness and then the outside clock."""
    one: dict[str, Any] = {"order": list(ROLES), "check": {}, "harness": {}, "back_to_back": {}}
    for role in ROLES:
        one["check"][role], one["harness"][role] = gpu.harness(role, 0)
        one["back_to_back"][role] = gpu.back_to_back(role, 0)
        gpu.now += PROCESS_GAP_S
    return build_rows([{"label": "s", "backends": {}, "rounds": [one]}])


def off(ratio: float, phase: str) -> float:
    """How far a measured ratio (the vendor's ms over ours) is from the true one."""
    return ratio / (TRUE_MS["vendor"][phase] / TRUE_MS["ours"][phase]) - 1.0


def test_rounds_alternate_and_keep_each_measures_windows_together() -> None:
    gpu = FakeGpu(lambda t: 1500.0)
    rounds = interleave(3, gpu.harness, gpu.back_to_back)
    assert [round_order(index) for index in range(4)] == [ROLES, ROLES[::-1], ROLES, ROLES[::-1]]
    assert [one["order"] for one in rounds] == [["ours", "vendor"], ["vendor", "ours"], ["ours", "vendor"]]
    # Per round: both harness runs (forward and backward each), then both outside-clock runs.
    assert gpu.windows[:8] == [
        ("harness", "ours"),
        ("harness", "ours"),
        ("harness", "vendor"),
        ("harness", "vendor"),
        ("b2b", "ours"),
        ("b2b", "ours"),
        ("b2b", "vendor"),
        ("b2b", "vendor"),
    ]
    assert gpu.windows[8:12] == [("harness", "vendor")] * 2 + [("harness", "ours")] * 2
    assert rounds[0]["check"] == {"ours": "PASS", "vendor": "PASS"}


@pytest.mark.parametrize(
    ("clock", "bends_the_comparison"),
    [
        # A steady fall biases the harness's ratio and the outside clock's about alike: each is off,
        # their comparison less.
        pytest.param(lambda t: 1500.0 + 150.0 * math.exp(-t / 40.0), False, id="sinking-as-it-heats"),
        # A clock that comes back up bends them differently: the comparison is off too.
        pytest.param(lambda t: 1500.0 * (1.0 + 0.02 * math.sin(2 * math.pi * t / 60.0)), True, id="hunting"),
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interleaved_rounds_recover_the_true_ratio_where_separate_processes_do_not(
    clock: Callable[[float], float], bends_the_comparison: bool, seed: int
) -> None:
    before = per_process(FakeGpu(clock, seed))
    # Each backend at its own clock: a ratio is off by how far the clock moved between the processes.
    worst_before = max(abs(off(ratio, r.phase)) for r in before for ratio in (r.harness_ratio, r.b2b_ratio))
    assert worst_before > 0.015
    if bends_the_comparison:
        assert max(abs(r.ratio_deviation) for r in before) > RATIO_LIMIT
    for row in interleaved(FakeGpu(clock, seed), rounds=4):
        assert abs(off(row.harness_ratio, row.phase)) < 0.006
        assert abs(off(row.b2b_ratio, row.phase)) < 0.006
        assert abs(row.ratio_deviation) < RATIO_LIMIT
        # Per shape: the harness's own bias, give or take the clock's fall over the half round that
        # separates a backend's harness window from its outside-clock window (about 1% here).
        assert abs(row.ours_deviation - (HARNESS_BIAS - 1.0)) < SHAPE_LIMIT / 2


def test_an_even_number_of_rounds_cancels_a_steady_drift() -> None:
    """Under a steady drift each round's ratio leans towards the backend that ran second; ABBA
    alternates the lean, and the median of an even number of rounds averages it away."""
    drifting = lambda t: 1600.0 - 2.0 * t  # noqa: E731
    (odd, _) = interleaved(FakeGpu(drifting, hunting=0.0), rounds=3)
    (even, _) = interleaved(FakeGpu(drifting, hunting=0.0), rounds=4)
    assert abs(off(odd.harness_ratio, "forward")) > 0.005  # two rounds of three lean the same way
    assert abs(off(even.harness_ratio, "forward")) < 0.0005
    assert abs(off(even.b2b_ratio, "forward")) < 0.0005
    assert even.harness_ratio_spread > 0.01  # the spread shows the lean of single rounds


def test_two_harness_copies_in_one_process_measure_with_their_own_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness as `prepare` writes it, imported once per backend: each copy runs its own main
    on the CPU, sets the backend the kernels read at each call, and passes its own seal."""
    path = write_harness(tmp_path, "gemm", "triton", campaign="c")
    (tmp_path / "kernels").symlink_to(Path(kernels.__file__).parent)  # the harness's own repository
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("- {label: tiny, M: 32, N: 32, K: 32}\n")
    for name in ("KERNELS_GEMM_BACKEND", "TRITON_INTERPRET"):  # the harness sets them: restored after
        monkeypatch.setenv(name, "")
    monkeypatch.setattr(sys, "path", list(sys.path))
    for role in ROLES:  # load_harness registers the copies there: gone after the test
        monkeypatch.setitem(sys.modules, f"campaign_quick_test_bench_{role}", None)
    copies = {
        role: load_harness(path, role, backend)
        for role, backend in zip(ROLES, ("triton", "torch"), strict=True)
    }
    assert copies["ours"] is not copies["vendor"]
    for role in ("vendor", "ours"):
        csv_path = tmp_path / f"{role}.csv"
        assert copies[role].main(["--summary-csv", str(csv_path), "--shapes-file", str(shapes)]) == 0
        assert os.environ["KERNELS_GEMM_BACKEND"] == copies[role].BACKEND
        check, figures = harness_figures(copies[role], csv_path)
        assert check == "PASS" and set(figures) == {"forward", "backward"}

    # The rounds of one shape as the child runs them (the outside clock needs CUDA: a fake here).
    def outside_clock(harness: ModuleType, shape: Any, forward_only: bool) -> Figures:
        return {"forward": {"ms": 1.0, "sm_mhz": math.nan, "power_w": math.nan}}

    monkeypatch.setattr(crosscheck, "independent", outside_clock)
    args = argparse.Namespace(out=tmp_path / "out", rounds=2, forward_only=False, shapes_file=shapes)
    for role in ROLES:
        (args.out / role).mkdir(parents=True)
    record = crosscheck.cross_check_shape(copies, {"label": "tiny", "M": 32, "N": 32, "K": 32}, args)
    assert record["backends"] == {"ours": "triton", "vendor": "torch"}
    assert [one["check"] for one in record["rounds"]] == [{"ours": "PASS", "vendor": "PASS"}] * 2
    assert sorted(path.name for path in (args.out / "vendor").glob("*.csv")) == ["tiny-r1.csv", "tiny-r2.csv"]
    (row,) = build_rows([record])  # forward: the only phase both measures have here
    assert len(row.harness_ratios) == 2 and row.harness_ratios[0] > 0


def test_the_clear_outlasts_the_launch_only_where_the_host_cannot_run_ahead() -> None:
    """do_bench's 256 MB where the GPU's call is at least twice the host's launch (an 8B gate_up
    fp8 forward: 1.7 ms for a ~0.5 ms launch); sized to twice the launch where it is not (a 30 us
    quantisation launched in 60 us: 360 MB at 3 TB/s), and never above 1 GB."""
    mb = 1024 * 1024
    assert crosscheck.clear_bytes(launch_s=0.5e-3, call_s=1.7e-3) == crosscheck.FLUSH_BYTES == 256 * mb
    assert crosscheck.clear_bytes(launch_s=60e-6, call_s=30e-6) == int(
        2 * 60e-6 * crosscheck.HBM_WRITE_BYTES_PER_S
    )
    assert (
        crosscheck.clear_bytes(launch_s=10e-6, call_s=15e-6) == crosscheck.FLUSH_BYTES
    )  # under 256 MB anyway
    assert crosscheck.clear_bytes(launch_s=2e-3, call_s=1e-3) == crosscheck.MAX_FLUSH_BYTES
