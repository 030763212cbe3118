"""The agreement table of `git campaign calibrate` (gitcampaign.calibration), on synthetic records."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gitcampaign import envinfo
from gitcampaign.calibration import RATIO_LIMIT, SHAPE_LIMIT, build_rows, row_notes
from tests.harness_build import frozen_module

qtb = frozen_module()


def one_round(ours: tuple[float, float], vendor: tuple[float, float]) -> dict[str, Any]:
    """A round of gitcampaign.crosscheck: (harness ms, back-to-back ms) of each backend, forward."""

    def figures(ms: float, mhz: float) -> dict[str, dict[str, float]]:
        return {"forward": {"ms": ms, "sm_mhz": mhz, "power_w": 690.0}}

    return {
        "order": ["ours", "vendor"],
        "check": {"ours": "PASS", "vendor": "PASS"},
        "harness": {"ours": figures(ours[0], 1500.0), "vendor": figures(vendor[0], 1500.0)},
        "back_to_back": {"ours": figures(ours[1], 1490.0), "vendor": figures(vendor[1], math.nan)},
    }


def record(label: str, *rounds: dict[str, Any]) -> dict[str, Any]:
    return {"label": label, "backends": {"ours": "triton", "vendor": "torch"}, "rounds": list(rounds)}


def test_deviations_and_ratios_from_the_two_measures() -> None:
    (row,) = build_rows([record("s", one_round((1.02, 1.0), (0.8, 0.8)))])
    assert row.ours_deviation == pytest.approx(0.02)
    assert row.vendor_deviation == pytest.approx(0.0)
    assert row.harness_ratio == pytest.approx(0.8 / 1.02)
    assert row.b2b_ratio == pytest.approx(0.8)
    assert row.ratio_deviation == pytest.approx(1.0 / 1.02 - 1.0)
    assert not row.agrees()  # 2% inside the shape limit, but the ratio moved by 2%: more than 1%


@pytest.mark.parametrize(
    ("ours", "vendor", "agrees"),
    [
        ((1.0, 1.0), (1.0, 1.0), True),
        ((1.0 + 0.9 * SHAPE_LIMIT, 1.0), (1.0 + 0.9 * SHAPE_LIMIT, 1.0), True),  # both off alike
        ((1.0 + 1.1 * SHAPE_LIMIT, 1.0), (1.0 + 1.1 * SHAPE_LIMIT, 1.0), False),  # ratio fine, shape not
        ((1.0 + 1.2 * RATIO_LIMIT, 1.0), (1.0, 1.0), False),
        ((math.nan, 1.0), (1.0, 1.0), False),  # NaN never agrees
    ],
)
def test_limits(ours: tuple[float, float], vendor: tuple[float, float], agrees: bool) -> None:
    (row,) = build_rows([record("s", one_round(ours, vendor))])
    assert row.agrees() is agrees


def test_a_ratio_gap_with_one_side_s_clock_moved_says_so() -> None:
    """H200, 2026-11-30: our fp8 blockwise forward at 1800 MHz in the harness and 1770 outside, the
    vendor's at 1980 in both, the ratio 1.6% apart."""
    round_ = one_round((2.48, 2.52), (4.40, 4.40))
    round_["harness"]["ours"]["forward"]["sm_mhz"] = 1800.0
    round_["back_to_back"]["ours"]["forward"]["sm_mhz"] = 1770.0
    for measure in ("harness", "back_to_back"):
        round_[measure]["vendor"]["forward"]["sm_mhz"] = 1980.0
    (row,) = build_rows([record("s", round_)])
    assert not row.agrees() and row.clock_gap == pytest.approx(1800 / 1770 - 1)
    assert "held our clock at 1800/1770 MHz, the vendor's at 1980/1980" in row.clock_note()
    assert row.to_json()["clock_note"] == row.clock_note() and row_notes([row]) == [row.clock_note()]
    # The same clocks with the ratio within the limit, or the ratio gap with both clocks moved
    # alike: nothing to explain.
    round_["harness"]["ours"]["forward"]["ms"] = 2.52
    (agreeing,) = build_rows([record("s", round_)])
    assert agreeing.agrees() and agreeing.clock_note() == ""
    round_["harness"]["ours"]["forward"]["ms"] = 2.48
    round_["back_to_back"]["vendor"]["forward"]["sm_mhz"] = 1950.0
    (alike,) = build_rows([record("s", round_)])
    assert not alike.agrees() and alike.clock_note() == "" and row_notes([alike, agreeing]) == []


def test_medians_over_rounds_and_the_ratio_of_each_round() -> None:
    """Figures are medians over the rounds; the ratio is the median of each round's own ratio (its
    two windows ran at one clock), not the quotient of medians taken from different rounds."""
    rounds = [
        one_round((1.00, 1.00), (0.80, 0.80)),  # a fast round: both backends at a high clock
        one_round((1.10, 1.10), (0.88, 0.88)),  # a slower one: both at a lower clock
        one_round((1.20, 1.20), (0.90, 0.90)),  # the ratio moved in this round only
        one_round((1.30, 1.30), (1.04, 1.04)),
    ]
    (row,) = build_rows([record("s", *rounds)])
    assert row.ours_harness_ms == pytest.approx(1.15)
    assert row.vendor_harness_ms == pytest.approx(0.89)
    assert row.harness_ratios == pytest.approx([0.8, 0.8, 0.75, 0.8])
    assert row.harness_ratio == pytest.approx(0.8)
    # The quotient of the medians pairs windows of different rounds, at different clocks: 3% off.
    assert row.vendor_harness_ms / row.ours_harness_ms == pytest.approx(0.7739, abs=1e-4)
    assert row.harness_ratio_spread == pytest.approx(0.05 / 0.8)
    assert row.to_json()["b2b_ratio_spread"] == pytest.approx(0.05 / 0.8)
    assert row.ours_harness_mhz == 1500.0
    assert math.isnan(row.vendor_b2b_mhz)  # no NVML: NaN, not a number made up
    (single,) = build_rows([record("s", rounds[0])])
    assert single.harness_ratio_spread == 0.0


def test_rows_cover_the_phases_every_measure_has() -> None:
    complete = one_round((1.0, 1.0), (1.0, 1.0))
    errored = one_round((1.0, 1.0), (1.0, 1.0))
    errored["harness"]["vendor"] = {}  # the vendor's harness run ended in ERROR: no figures
    errored["check"]["vendor"] = "ERROR"
    rows = build_rows([record("a", errored), record("b", errored, complete)])
    assert [(row.label, row.phase, len(row.harness_ratios)) for row in rows] == [("b", "forward", 1)]
    assert rows[0].to_json()["agrees"] is True


def test_clock_records_summarise_the_harness_windows(tmp_path: Path) -> None:
    """The harness's clock log (beside its CSV) read back per shape and phase over several runs."""
    assert envinfo.CLOCK_DRIFT_WARN == qtb.CLOCK_MOVED_WARN
    assert envinfo.CLOCK_LOG_GLOB == "*" + qtb.CLOCK_LOG_SUFFIX
    for run, (clock, drift) in enumerate([(1500.0, 0.0), (1540.0, 0.05), (1520.0, 0.01)]):
        samples = [(clock, 690.0, 60.0 + run)] * 3
        window = qtb.Window("s forward", 100, 2, 600.0, 1.0, True, samples).summary()
        window["clock_moved"] = drift
        (tmp_path / f"pair{run}.clocks.json").write_text(json.dumps({"gpu": "H200", "windows": [window]}))
    (tmp_path / "broken.clocks.json").write_text("{")
    assert envinfo.clock_records(tmp_path) == {
        "s forward": {
            "windows": 3,
            "sm_mhz": [1500.0, 1520.0, 1540.0],
            "power_w": 690.0,
            "temp_c_max": 62.0,
            "drifted": 1,
        }
    }
    assert envinfo.clock_records(tmp_path / "none") == {}


def test_a_ratio_the_rounds_cannot_tell_from_agreement_says_to_run_more() -> None:
    """The ratio's median is 1.5% off, but the rounds' own deviations (+2.0, +3.1, -1.0, +1.0%) put
    it anywhere from -1.5% to +4.1%: the note asks for twice the rounds. Deviations that hold in
    every round disagree plainly, with no such note."""
    noisy = [one_round(ours, (1.0, 1.0)) for ours in ((0.98, 1.0), (0.97, 1.0), (1.0, 0.99), (0.99, 1.0))]
    (row,) = build_rows([record("s", *noisy)])
    assert not row.agrees() and row.ratio_deviation == pytest.approx(0.0153, abs=1e-4)
    low, high = row.ratio_deviation_interval
    assert low == pytest.approx(-0.0150, abs=1e-4) and high == pytest.approx(0.0407, abs=1e-4)
    assert "4 rounds cannot tell; `git campaign calibrate --rounds 8` can" in row.rounds_note()
    assert row_notes([row]) == [row.rounds_note()] and row.to_json()["rounds_note"] == row.rounds_note()
    (steady,) = build_rows([record("s", *[one_round((0.97, 1.0), (1.0, 1.0))] * 4)])
    assert not steady.agrees() and steady.rounds_note() == ""
    (agreeing,) = build_rows([record("s", *[one_round((1.0, 1.0), (1.0, 1.0))] * 4)])
    assert agreeing.agrees() and agreeing.rounds_note() == ""
