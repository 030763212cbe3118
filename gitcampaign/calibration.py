"""The agreement table of `git campaign calibrate`: the harness against an outside clock, per shape and
phase, for our backend and the vendor's. Pure arithmetic on gitcampaign.crosscheck's records, so the
benchmark scripts use it on a machine without the git layer.

Per shape the two measures must agree within SHAPE_LIMIT, and the our/vendor ratios within
RATIO_LIMIT: the decision rule accepts gains of 1-2%, so a harness that bends ratios by more than that
cannot be trusted to rank kernels.

The cross-check measures in rounds (see gitcampaign.crosscheck): each round times both backends with
both measures, the two backends' windows of a measure next to each other. A backend's figure is its
median over the rounds; a ratio is the median of the rounds' own ratios, each taken from two windows
seconds apart, never a quotient of figures timed at different moments (at different clocks). Its
spread over the rounds says how far one round's ratio can be trusted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from gitcampaign.decision import t975

VENDOR_BACKEND = "torch"
SHAPE_LIMIT = 0.03
RATIO_LIMIT = 0.01
# Two measures that hold one backend's SM clock this much further apart than the other's: a ratio
# gap is then the loops' power (what each does besides the op moves a power-limited clock) as much
# as their timing (on the H200, an op at its power limit ran 15-30 MHz apart between the loops while
# the vendor's ran at 1980 MHz in both: docs/benchmarks/ holds the runs).
CLOCK_GAP = 0.005
ROLES = ("ours", "vendor")  # how crosscheck's records name the two backends
MEASURES = ("harness", "back_to_back")
PHASES = ("forward", "backward")


def median(values: Iterable[float]) -> float:
    """The median of the values that are numbers (a clock NVML could not read is NaN); NaN if none."""
    finite = [value for value in values if not math.isnan(value)]
    return statistics.median(finite) if finite else math.nan


def spread(ratios: list[float]) -> float:
    """How far the rounds' ratios lie apart: (greatest - least) / median; 0 for one round."""
    return (max(ratios) - min(ratios)) / statistics.median(ratios) if ratios else math.nan


@dataclass
class CalibrationRow:
    """One shape and phase over the rounds: each backend's median ms by each measure, each round's
    our/vendor ratio by each measure, and the median SM clock each ran at."""

    label: str
    phase: str
    ours_harness_ms: float
    ours_b2b_ms: float
    vendor_harness_ms: float
    vendor_b2b_ms: float
    harness_ratios: list[float]  # per round: vendor ms / our ms, from the round's two harness windows
    b2b_ratios: list[float]
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
        """Our speed over the vendor's, as the harness sees it: the median over the rounds."""
        return median(self.harness_ratios)

    @property
    def b2b_ratio(self) -> float:
        return median(self.b2b_ratios)

    @property
    def ratio_deviation(self) -> float:
        return self.harness_ratio / self.b2b_ratio - 1.0

    @property
    def harness_ratio_spread(self) -> float:
        return spread(self.harness_ratios)

    @property
    def b2b_ratio_spread(self) -> float:
        return spread(self.b2b_ratios)

    @property
    def clock_gap(self) -> float:
        """How much further apart the two measures held our SM clock than the vendor's (harness over
        back-to-back, ours minus vendor's; NaN where NVML read no clock)."""
        return (self.ours_harness_mhz / self.ours_b2b_mhz) - (self.vendor_harness_mhz / self.vendor_b2b_mhz)

    def clock_note(self) -> str:
        """Why a ratio may disagree, from the clocks: empty where the ratio agrees or the clocks moved alike."""
        if abs(self.ratio_deviation) <= RATIO_LIMIT or not abs(self.clock_gap) >= CLOCK_GAP:
            return ""
        return (
            f"{self.label} {self.phase}: the ratio is {100 * self.ratio_deviation:+.1f}% off, and the two "
            f"measures held our clock at {self.ours_harness_mhz:.0f}/{self.ours_b2b_mhz:.0f} MHz, the "
            f"vendor's at {self.vendor_harness_mhz:.0f}/{self.vendor_b2b_mhz:.0f} (harness/outside): a "
            "power-limited clock follows what each loop does besides the op, so this gap is the loops' "
            "power as much as the harness's timing"
        )

    @property
    def ratio_deviation_interval(self) -> tuple[float, float]:
        """The 95% interval (Student t) of the rounds' own ratio deviations: each round's harness ratio
        over its outside-clock ratio, minus 1 (two pairs of windows seconds apart); NaN under two rounds."""
        deviations = [
            harness / b2b - 1.0 for harness, b2b in zip(self.harness_ratios, self.b2b_ratios, strict=True)
        ]
        if len(deviations) < 2:
            return math.nan, math.nan
        mean = statistics.fmean(deviations)
        half = t975(len(deviations) - 1) * statistics.stdev(deviations) / math.sqrt(len(deviations))
        return mean - half, mean + half

    def rounds_note(self) -> str:
        """Where only the ratio disagrees, and the rounds' own deviations reach back within the limit
        (ratio_deviation_interval), so that more rounds can tell; empty otherwise. With a spread of
        ~2% over the rounds, the median of 4 can sit a whole RATIO_LIMIT away, and 8 bring it back
        inside (docs/benchmarks/ has such a run)."""
        if self.agrees() or not max(abs(self.ours_deviation), abs(self.vendor_deviation)) <= SHAPE_LIMIT:
            return ""
        low, high = self.ratio_deviation_interval
        if not (low <= RATIO_LIMIT and high >= -RATIO_LIMIT):
            return ""
        rounds = len(self.harness_ratios)
        return (
            f"{self.label} {self.phase}: the ratio is {100 * self.ratio_deviation:+.1f}% off, but the rounds' "
            f"own deviations put it in [{100 * low:+.1f}%, {100 * high:+.1f}%] (95%), which reaches within "
            f"{100 * RATIO_LIMIT:g}%: {rounds} rounds cannot tell; `git campaign calibrate --rounds "
            f"{2 * rounds}` can"
        )

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
            "harness_ratio_spread": self.harness_ratio_spread,
            "b2b_ratio_spread": self.b2b_ratio_spread,
            "ratio_deviation_interval": list(self.ratio_deviation_interval),
            "clock_note": self.clock_note(),
            "rounds_note": self.rounds_note(),
            "agrees": self.agrees(),
        }


def row_notes(rows: list[CalibrationRow]) -> list[str]:
    """Why rows disagree, where the clocks or the rounds say (CalibrationRow.clock_note, rounds_note)."""
    return [note for row in rows for note in (row.clock_note(), row.rounds_note()) if note]


def build_rows(records: list[dict[str, Any]]) -> list[CalibrationRow]:
    """The table of gitcampaign.crosscheck's records, shape by shape and phase by phase, over the
    rounds that measured the phase for both backends with both measures (a round whose harness run
    ended in ERROR has no figures; its Check is reported apart)."""
    rows = []
    for record in records:
        for phase in PHASES:
            rounds = [
                one
                for one in record["rounds"]
                if all(phase in one[measure][role] for measure in MEASURES for role in ROLES)
            ]
            if rounds:
                rows.append(row_of_rounds(record["label"], phase, rounds))
    return rows


def row_of_rounds(label: str, phase: str, rounds: list[dict[str, Any]]) -> CalibrationRow:
    """One row from the rounds that measured `phase` completely."""

    def figures(measure: str, role: str, key: str = "ms") -> list[float]:
        return [float(one[measure][role][phase][key]) for one in rounds]

    def ratios(measure: str) -> list[float]:
        pairs = zip(figures(measure, "ours"), figures(measure, "vendor"), strict=True)
        return [vendor / ours for ours, vendor in pairs]

    return CalibrationRow(
        label,
        phase,
        median(figures("harness", "ours")),
        median(figures("back_to_back", "ours")),
        median(figures("harness", "vendor")),
        median(figures("back_to_back", "vendor")),
        ratios("harness"),
        ratios("back_to_back"),
        median(figures("harness", "ours", "sm_mhz")),
        median(figures("back_to_back", "ours", "sm_mhz")),
        median(figures("harness", "vendor", "sm_mhz")),
        median(figures("back_to_back", "vendor", "sm_mhz")),
    )
