"""The decision contract (docs/design.md, Decision rules): paired statistics and mechanical rules.

Candidate and incumbent run interleaved, process by process; each pair of processes gives one log
ratio per shape. The aggregate ratio is the geometric mean over shapes, its 95% interval a Student-t
interval over pairs. The noise floor comes from an A/A measurement at BASELINE.
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, field

from gitcampaign import constants as C
from gitcampaign.errors import CampaignError
from gitcampaign.vocabulary import Decision

# Two-sided 95% Student-t quantiles by degrees of freedom; the normal quantile beyond 30.
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
}
REGRESSION_LIMIT = 0.05  # a representative shape 5% or more slower rejects (docs/design.md)
NEAR_NOISE_GAIN = 0.02  # gains under 2% need three measurements that agree (docs/design.md)
NEAR_NOISE_SESSIONS = 3
MAX_SESSIONS = 3
NOTE_FLOOR = 0.005  # a shape "fell" only when it lost more than its noise and at least 0.5%


@dataclass(frozen=True)
class PairSample:
    """One incumbent process and one candidate process: primary metric per shape label."""

    incumbent: dict[str, float]
    candidate: dict[str, float]
    session: int = 0


@dataclass
class PairedStats:
    ratio: float
    ci: tuple[float, float]
    shape_ratios: dict[str, float]
    pairs: int
    session_gains: list[float] = field(default_factory=list)
    # "label (pair k)" where that side's metric was NaN, infinite or not positive: whom a NaN blames.
    invalid: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Outcome:
    """`decision` is None when the result is inconclusive and another measurement is due."""

    decision: str | None
    reasons: list[str]
    notes: list[str]


def t975(degrees: int) -> float:
    return _T975.get(degrees, 1.960) if degrees >= 1 else math.inf


def _log_ratios(sample: PairSample, labels: list[str]) -> dict[str, float]:
    ratios = {}
    for label in labels:
        inc, cand = sample.incumbent.get(label, math.nan), sample.candidate.get(label, math.nan)
        # A difference of logs: `cand / inc` overflows for figures far apart (1e-310 against 100).
        ratios[label] = math.log(cand) - math.log(inc) if _measured(inc) and _measured(cand) else math.nan
    return ratios


def _exp(log: float) -> float:
    """exp, infinite past the largest float instead of OverflowError: a ratio that large is out of
    all proportion, and `decide` rejects it as it rejects a NaN."""
    return math.exp(log) if log < math.log(sys.float_info.max) else math.inf


def _measured(value: float) -> bool:
    """A figure a ratio can be taken of: positive and finite (NaN and infinity are no measurement)."""
    return 0 < value < math.inf


def paired_stats(samples: list[PairSample], labels: list[str]) -> PairedStats:
    """Aggregate ratio candidate/incumbent with a 95% interval; NaN anywhere makes it NaN."""
    per_pair = [_log_ratios(sample, labels) for sample in samples]
    aggregate_logs = [sum(logs.values()) / len(logs) for logs in per_pair]
    mean_log = sum(aggregate_logs) / len(aggregate_logs)
    if math.isnan(mean_log):
        half = math.nan
    elif len(aggregate_logs) > 1:
        half = (
            t975(len(aggregate_logs) - 1) * statistics.stdev(aggregate_logs) / math.sqrt(len(aggregate_logs))
        )
    else:
        half = math.inf
    shape_ratios = {label: _exp(sum(logs[label] for logs in per_pair) / len(per_pair)) for label in labels}
    invalid = {
        side: [
            f"{label} (pair {index + 1})"
            for index, sample in enumerate(samples)
            for label in labels
            if not _measured(getattr(sample, side).get(label, math.nan))
        ]
        for side in ("incumbent", "candidate")
    }
    sessions = sorted({sample.session for sample in samples})
    session_gains = [
        _exp(statistics.fmean(log for log, s in zip(aggregate_logs, samples, strict=True) if s.session == k))
        - 1
        for k in sessions
    ]
    return PairedStats(
        ratio=_exp(mean_log),
        ci=(_exp(mean_log - half), _exp(mean_log + half)),
        shape_ratios=shape_ratios,
        pairs=len(samples),
        session_gains=session_gains,
        invalid=invalid,
    )


def noise_floor(samples: list[PairSample], labels: list[str]) -> tuple[float, dict[str, float]]:
    """From an A/A measurement: |mean| + stddev of the per-pair ratio, aggregate and per shape.

    That is how far one pair of processes of the same code typically lands from 1.
    """
    per_pair = [_log_ratios(sample, labels) for sample in samples]

    def spread(logs: list[float]) -> float:
        if any(math.isnan(log) for log in logs):
            return math.nan
        deviation = statistics.pstdev(logs) if len(logs) > 1 else 0.0
        return _exp(abs(statistics.fmean(logs)) + deviation) - 1

    aggregate_logs = [sum(logs.values()) / len(logs) for logs in per_pair]
    return spread(aggregate_logs), {label: spread([logs[label] for logs in per_pair]) for label in labels}


def regression_threshold(metric: str) -> float:
    """Shape ratio at or below which a shape counts as regressed; on step time for the combined metric."""
    if metric == C.METRIC_STEP:
        return 1.0 / (1.0 + REGRESSION_LIMIT)
    return 1.0 - REGRESSION_LIMIT


def decide(
    stats: PairedStats,
    metric: str,
    noise_aggregate: float,
    noise_shapes: dict[str, float],
    min_gain: float,
    sessions_done: int,
    max_sessions: int = MAX_SESSIONS,
) -> Outcome:
    """Apply the speed rules; the correctness and integrity gates are applied before this.

    A NaN from the candidate rejects it; one from the incumbent says nothing about the candidate,
    so it stops the command (nothing recorded) instead of being blamed on the round."""
    if stats.invalid.get("incumbent"):
        raise CampaignError(
            f"the incumbent (accepted head) measured NaN, an infinite or a non-positive {metric} on "
            f"{', '.join(stats.invalid['incumbent'][:5])}: no decision can be made; nothing was recorded",
            "run the quick command on the accepted head by hand to see why, fix it, then validate again",
        )
    if not all(math.isfinite(value) for value in (stats.ratio, *stats.shape_ratios.values())):
        shown = ", ".join(stats.invalid.get("candidate", [])[:5])
        return Outcome(
            Decision.REJECT,
            [C.REASON_CHECK_FAILED],
            [
                f"the candidate's {metric} is NaN, infinite or not positive"
                + (f" on {shown}" if shown else "")
            ],
        )
    limit = regression_threshold(metric)
    regressed = {label: r for label, r in stats.shape_ratios.items() if r <= limit}
    if regressed:
        shown = ", ".join(f"{label} {100 * (r - 1):+.1f}%" for label, r in regressed.items())
        return Outcome(Decision.REJECT, [C.REASON_SHAPE_REGRESSION], [f"regressed: {shown}"])
    if stats.ratio <= 1.0:
        return Outcome(Decision.REJECT, [C.REASON_NOT_FASTER], [f"aggregate {100 * (stats.ratio - 1):+.2f}%"])
    required = max(noise_aggregate if math.isfinite(noise_aggregate) else 0.0, min_gain)
    gain = stats.ratio - 1.0
    notes = [f"gain {100 * gain:+.2f}%, needs > {100 * required:.2f}% with the interval above 1"]
    if stats.ci[1] < 1.0 + required:
        return Outcome(Decision.REJECT, [C.REASON_WITHIN_NOISE], notes + ["the whole interval is under it"])
    conclusive = stats.ci[0] > 1.0 and gain >= required
    if conclusive and gain < NEAR_NOISE_GAIN:
        if sessions_done < NEAR_NOISE_SESSIONS:
            return Outcome(None, [], notes + ["gain under 2%: measuring again"])
        gains = stats.session_gains
        mean_gain = statistics.fmean(gains)
        spread = statistics.stdev(gains) if len(gains) > 1 else math.inf
        conclusive = mean_gain > min_gain and spread < mean_gain / 2
        notes.append(f"near noise: session gains {[round(100 * g, 2) for g in gains]}%")
    if not conclusive:
        if sessions_done < max_sessions:
            return Outcome(None, [], notes + ["inconclusive: measuring again"])
        return Outcome(Decision.REJECT, [C.REASON_WITHIN_NOISE], notes)
    fell = {
        label: r
        for label, r in stats.shape_ratios.items()
        if r < 1.0 - max(noise_shapes.get(label, 0.0), NOTE_FLOOR)
    }
    if fell:
        shown = ", ".join(f"{label} {100 * (r - 1):+.1f}%" for label, r in fell.items())
        return Outcome(Decision.ACCEPT_WITH_NOTE, [], notes + [f"slower shapes (under 5%): {shown}"])
    return Outcome(Decision.ACCEPT, [], notes)


@dataclass
class Screen:
    """A heat's screen, read by the single round's rules: each candidate's outcome on its own
    screen pairs, and the contenders (not rejected there), best aggregate ratio first."""

    outcomes: dict[int, Outcome]
    contenders: list[int]


def screen(
    stats: dict[int, PairedStats],
    metric: str,
    noise_aggregate: float,
    noise_shapes: dict[str, float],
    min_gain: float,
) -> Screen:
    """The first stage of a heat (docs/design.md, Heats): every candidate, keyed by its round, is
    read by `decide` on its screen pairs as one session of a single round. Those it rejects there
    keep that REJECT; the rest (accepted there, or due to be measured again) are contenders, and
    only the best of them is confirmed, by a fresh measurement that `decide` reads alone. Picking
    the best of N noisy candidates favours the luckiest (the winner's curse); deciding on fresh
    samples makes a heat of N copies of the incumbent accept exactly when that one fresh
    validation does, at the single round's rate."""
    outcomes = {
        number: decide(one, metric, noise_aggregate, noise_shapes, min_gain, sessions_done=1)
        for number, one in stats.items()
    }
    contenders = [number for number, outcome in outcomes.items() if outcome.decision != Decision.REJECT]
    contenders.sort(key=lambda number: -stats[number].ratio)
    return Screen(outcomes, contenders)
