"""The lineage table: each round's status, decision, effect and key per-shape deltas, from notes."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tabulate import tabulate

from gitcampaign import constants as C
from gitcampaign import roofline
from gitcampaign.campaign import Campaign, Round
from gitcampaign.manifest import Manifest
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Decision, Status


@dataclass
class LineageRow:
    round: int
    status: Status
    decision: str
    hypothesis: str
    metric: float | None
    vs_baseline: float | None
    key_deltas: str
    transfer: str | None
    commit: str | None
    reasons: str = ""  # the decision's reason codes (within_noise, shape_regression, ...)


@dataclass(frozen=True)
class RoundLevel:
    entry: Round
    speedup: float | None  # the round's over the baseline: incumbent's times its paired ratio, or None
    incumbent: float  # the accepted line's speedup over the baseline after the round


def aggregate_ratio(decision: VerdictDoc | None) -> float | None:
    return decision.ratio if decision else None


def cumulative(
    rounds: list[Round], ratio_of: Callable[[VerdictDoc | None], float | None] = aggregate_ratio
) -> list[RoundLevel]:
    """Speedup over the baseline of each round, as the product of paired ratios of accepted rounds
    (paired ratios are robust to drift between days; absolute numbers of different runs are not);
    `ratio_of` picks the ratio from a decision (the aggregate's, or one shape's)."""
    level, result = 1.0, []
    for entry in rounds:
        ratio = ratio_of(entry.decision)
        speedup = level * ratio if ratio is not None else None
        if entry.status == Status.ACCEPTED and speedup is not None:
            level = speedup
        result.append(RoundLevel(entry, speedup, level))
    return result


def _key_deltas(decision: VerdictDoc | None, top: int = 2) -> str:
    shapes = (decision.shapes if decision else None) or {}
    ratios = [(label, v.ratio) for label, v in shapes.items() if v.ratio is not None]
    ratios.sort(key=lambda item: -abs(item[1] - 1))
    if not ratios:
        failing = [label for label, v in shapes.items() if v.check not in (None, C.CHECK_PASS)]
        # Rejected before any measurement (build_failed, tests_failed, a gate): its reasons say why.
        return (
            ("FAIL: " + ", ".join(failing))
            if failing
            else ", ".join((decision.reasons if decision else None) or [])
        )
    return ", ".join(f"{label} {100 * (r - 1):+.1f}%" for label, r in ratios[:top])


def lineage_rows(campaign: Campaign) -> tuple[VerdictDoc | None, list[LineageRow]]:
    """(the baseline document, or None before the baseline; a row per round)."""
    return rows_of(*campaign.lineage())


def rows_of(
    baseline_docs: list[VerdictDoc], rounds: list[Round]
) -> tuple[VerdictDoc | None, list[LineageRow]]:
    """`lineage_rows` of a lineage already read (`Campaign.lineage()`)."""
    baseline = baseline_docs[0] if baseline_docs else None
    quick_base = baseline.aggregate.quick if baseline and baseline.aggregate else None
    rows = (
        [LineageRow(1, Status.BASELINE, Decision.BASELINE, "baseline", quick_base, 1.0, "", None, None)]
        if baseline
        else []
    )
    for step in cumulative(rounds):
        entry, level = step.entry, step.speedup
        decision = entry.decision
        rows.append(
            LineageRow(
                entry.number,
                entry.status,
                str(decision.decision or "") if decision else "",
                entry.hypothesis,
                quick_base * level if quick_base and level else None,
                level,
                _key_deltas(decision),
                decision.transfer if decision else None,
                entry.commit,
                ", ".join(decision.reasons or []) if decision else "",
            )
        )
    return baseline, rows


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(text: object) -> str:
    """Text from a round (a hypothesis, a note: anyone's commit message or note) as one line
    without control characters: a newline cannot break a table, an escape sequence cannot drive the
    terminal that shows it."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())


def log_table(
    rows: list[LineageRow], metric: str, tablefmt: str = "simple", cell: Callable[[str], str] = one_line
) -> str:
    """The lineage as a table; `cell` writes each text cell (the report's escapes Markdown)."""

    def fmt(value: float | None, spec: str) -> str:
        return "" if value is None or not math.isfinite(value) else format(value, spec)

    def short(text: str) -> str:
        text = one_line(text)
        return (text[:48] + "...") if len(text) > 51 else text

    return tabulate(
        [
            [
                row.round,
                row.status,
                cell(row.decision),
                cell(short(row.hypothesis)),
                fmt(row.metric, ".4g"),
                fmt(row.vs_baseline, ".3f") + ("x" if row.vs_baseline else ""),
                cell(row.key_deltas),
            ]
            for row in rows
        ],
        headers=["round", "status", "decision", "hypothesis", metric, "vs baseline", "key per-shape deltas"],
        tablefmt=tablefmt,
    )


def termination(
    manifest: Manifest, rows: list[LineageRow], limits: Mapping[str, float | None] | None = None
) -> list[str]:
    """The termination conditions (T1-T3) that hold now; T4 is the user's `--force`. T2 takes two
    forms: `efficiency` with `peak`, the accepted aggregate over a peak the user gave; `efficiency`
    alone, every representative shape at that share of its limit (`limits`: shape_limits), not
    judged while any share reads above its ceiling."""
    reached = []
    target = manifest.performance_target
    accepted = [row for row in rows if row.status in (Status.BASELINE, Status.ACCEPTED)]
    speedup = accepted[-1].vs_baseline if accepted else None
    value = accepted[-1].metric if accepted else None
    if speedup and "speedup" in target and speedup >= target["speedup"]:
        reached.append(f"T1 target reached: {speedup:.3f}x >= {target['speedup']}x")
    if value and "value" in target and value >= target["value"]:
        reached.append(f"T1 target reached: {value:.4g} >= {target['value']:.4g}")
    if (
        value
        and "efficiency" in target
        and "peak" in target
        and value / target["peak"] >= target["efficiency"]
    ):
        reached.append(
            f"T2 hardware efficiency: {value / target['peak']:.2f} of peak >= {target['efficiency']}"
        )
    shares = list((limits or {}).values())
    # A share above its ceiling says the ceiling understates the card in the figures' state: the
    # other shares are then no distance to the hardware either.
    trusted = not roofline.above_ceiling(limits or {})
    if "efficiency" in target and "peak" not in target and shares and None not in shares and trusted:
        least = min(share for share in shares if share is not None)
        if least >= target["efficiency"]:
            reached.append(
                f"T2 hardware efficiency: every representative shape at >= {target['efficiency']} of its "
                f"limit (the least at {least:.2f})"
            )
    finished = sum(1 for row in rows if row.status in (Status.ACCEPTED, Status.REJECTED))
    if finished >= manifest.max_iterations:
        reached.append(f"T3 max iterations: {finished} rounds >= {manifest.max_iterations}")
    return reached


def shape_limits(campaign: Campaign, manifest: Manifest) -> dict[str, float | None] | None:
    """For T2 per shape (`efficiency` without `peak`): each representative shape's standing figure
    (the last accepted round's, else the baseline's) as a share of its limit on the GPU it was
    measured on (gitcampaign.roofline; None where there is no ceiling). None for other targets."""
    target = manifest.performance_target
    if "efficiency" not in target or "peak" in target or not manifest.representative_shapes:
        return None
    baseline_docs, rounds = campaign.lineage()
    standing: VerdictDoc | None = None
    figures: dict[str, float] = {}
    for entry in reversed([entry for entry in rounds if entry.status == Status.ACCEPTED]):
        standing = next((doc for doc in reversed(entry.docs) if _figures(doc, "candidate")), None)
        if standing is not None:
            figures = _figures(standing, "candidate")
            break
    if standing is None and baseline_docs:
        standing, figures = baseline_docs[0], _figures(baseline_docs[0], "value")
    if standing is None:
        return None
    ceilings = roofline.ceilings_for(campaign.repo, standing.gpu)
    dtype = roofline.spec_dtype(campaign.repo, campaign.name, campaign.main_branch)
    clocks = _figures(standing, "sm_mhz")  # where the harness logged the figure's SM clock
    return {
        label: roofline.metric_share(
            figures[label], manifest.primary_metric, manifest.target_op, ceilings, dtype, clocks.get(label)
        )
        if label in figures
        else None
        for label in manifest.representative_shapes
    }


def _figures(doc: VerdictDoc, key: str) -> dict[str, float]:
    """{shape: figure} of a verdict document's `shapes` (`candidate` of a validation, `value` of the
    baseline, `sm_mhz` of either where the harness logged it)."""
    return {
        label: float(figure)
        for label, entry in (doc.shapes or {}).items()
        if (figure := getattr(entry, key)) is not None
    }
