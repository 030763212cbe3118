"""The agreement table of `git campaign calibrate`: the gate against an outside clock, per shape and
phase, for our backend and the vendor's. Pure arithmetic on gitcampaign.crosscheck's records, so the
benchmark scripts use it on a machine without the git layer.

Per shape the two measures must agree within SHAPE_LIMIT, and the our/vendor ratios within
RATIO_LIMIT: the decision rule accepts gains of 1-2%, so a gate that bends ratios by more than that
cannot be trusted to rank kernels.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

VENDOR_BACKEND = "torch"
SHAPE_LIMIT = 0.03
RATIO_LIMIT = 0.01


@dataclass
class CalibrationRow:
    """One shape and phase: ms of each backend by each measure, and the SM clock each ran at."""

    label: str
    phase: str
    ours_harness_ms: float
    ours_b2b_ms: float
    vendor_harness_ms: float
    vendor_b2b_ms: float
    ours_harness_mhz: float = math.nan
    ours_b2b_mhz: float = math.nan
    vendor_harness_mhz: float = math.nan
    vendor_b2b_mhz: float = math.nan

    @property
    def ours_deviation(self) -> float:
        """Harness over back-to-back time, minus 1 (positive: the harness reads slower)."""
        return self.ours_harness_ms / self.ours_b2b_ms - 1.0

    @property
    def vendor_deviation(self) -> float:
        return self.vendor_harness_ms / self.vendor_b2b_ms - 1.0

    @property
    def harness_ratio(self) -> float:
        """Our speed over the vendor's, as the gate sees it."""
        return self.vendor_harness_ms / self.ours_harness_ms

    @property
    def b2b_ratio(self) -> float:
        return self.vendor_b2b_ms / self.ours_b2b_ms

    @property
    def ratio_deviation(self) -> float:
        return self.harness_ratio / self.b2b_ratio - 1.0

    def agrees(self) -> bool:
        # Written so that NaN disagrees.
        return (
            abs(self.ours_deviation) <= SHAPE_LIMIT
            and abs(self.vendor_deviation) <= SHAPE_LIMIT
            and abs(self.ratio_deviation) <= RATIO_LIMIT
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "ours_deviation": self.ours_deviation,
            "vendor_deviation": self.vendor_deviation,
            "harness_ratio": self.harness_ratio,
            "b2b_ratio": self.b2b_ratio,
            "ratio_deviation": self.ratio_deviation,
            "agrees": self.agrees(),
        }


def build_rows(ours: list[dict[str, Any]], vendor: list[dict[str, Any]]) -> list[CalibrationRow]:
    """Join the two backends' cross-check records (gitcampaign.crosscheck's JSON) shape by shape."""
    by_label = {record["label"]: record for record in vendor}
    rows = []
    for record in ours:
        other = by_label.get(record["label"])
        if other is None:
            continue
        for phase, harness in record["harness"].items():
            if phase not in other["harness"] or phase not in record["back_to_back"]:
                continue
            rows.append(
                CalibrationRow(
                    record["label"],
                    phase,
                    harness["ms"],
                    record["back_to_back"][phase]["ms"],
                    other["harness"][phase]["ms"],
                    other["back_to_back"][phase]["ms"],
                    harness["sm_mhz"],
                    record["back_to_back"][phase]["sm_mhz"],
                    other["harness"][phase]["sm_mhz"],
                    other["back_to_back"][phase]["sm_mhz"],
                )
            )
    return rows
