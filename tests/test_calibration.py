"""The agreement table of `git campaign calibrate` (gitcampaign.calibration), on synthetic records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gitcampaign import envinfo
from gitcampaign.calibration import RATIO_LIMIT, SHAPE_LIMIT, build_rows
from gitcampaign.templates import quick_test_bench as qtb


def record(label: str, harness_ms: float, b2b_ms: float) -> dict[str, object]:
    figures = {"ms": harness_ms, "sm_mhz": 1500.0, "power_w": 690.0}
    return {
        "label": label,
        "check": "PASS",
        "harness": {"forward": figures},
        "back_to_back": {"forward": {"ms": b2b_ms, "sm_mhz": 1490.0, "power_w": 695.0}},
    }


def test_deviations_and_ratios_from_the_two_measures() -> None:
    (row,) = build_rows([record("s", 1.02, 1.0)], [record("s", 0.8, 0.8)])
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
    (row,) = build_rows([record("s", *ours)], [record("s", *vendor)])
    assert row.agrees() is agrees


def test_rows_join_on_label_and_phase() -> None:
    ours = [record("a", 1.0, 1.0), record("b", 1.0, 1.0)]
    vendor = [record("b", 1.0, 1.0)]
    rows = build_rows(ours, vendor)
    assert [(row.label, row.phase) for row in rows] == [("b", "forward")]
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
