"""What a campaign learnt does not work: every rejected round as a direction (its hypothesis), with
its reasons and per-shape deltas (`git campaign log --rejected`, the MCP tool `list_rejected`, in the
spirit of an auto-optimizer's list of ineffective directions), and whether a new hypothesis repeats
one already rejected on the same incumbent (`round` warns: a swarm of agents tends to try the same
idea twice)."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from gitcampaign.campaign import Round
from gitcampaign.vocabulary import Decision, Status

_WORD = re.compile(r"[a-z0-9_.]*[a-z0-9_]")
# Words that carry no direction: "8 warps a program" and "8 warps per program" are one idea.
_FILLER = frozenset({"a", "an", "the", "of", "per", "to", "for", "in", "on", "at", "by", "with", "and"})
SIMILAR = 0.8  # above this share of words in common, in order, two hypotheses are one idea


@dataclass
class Rejected:
    round: int
    hypothesis: str
    reasons: list[str]
    ratio: float | None  # the aggregate ratio it measured (None: rejected before any measurement)
    deltas: dict[str, float]  # per shape, the change in percent of the primary metric
    incumbent: str | None  # the accepted head it was measured against
    commit: str | None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def deltas_text(self) -> str:
        return ", ".join(f"{label} {delta:+.1f}%" for label, delta in self.deltas.items())


def rejected_rounds(rounds: list[Round]) -> list[Rejected]:
    """Every rejected round, by number, from what its standing decision records."""
    found = []
    for entry in rounds:
        decision = entry.decision
        if entry.status != Status.REJECTED or decision is None or decision.decision != Decision.REJECT:
            continue
        ratio = decision.ratio
        found.append(
            Rejected(
                entry.number,
                entry.hypothesis,
                list(decision.reasons or []),
                ratio if ratio is not None and math.isfinite(ratio) else None,
                {
                    label: round(100 * (figures.ratio - 1), 3)
                    for label, figures in (decision.shapes or {}).items()
                    if figures.ratio is not None
                },
                decision.incumbent,
                entry.commit,
                list(decision.notes or []),
            )
        )
    return found


def matching(found: list[Rejected], words: str) -> list[Rejected]:
    """The rejected rounds whose hypothesis, reasons or notes hold every one of `words` (any case)."""
    wanted = words.lower().split()
    return [
        entry
        for entry in found
        if all(word in " ".join([entry.hypothesis, *entry.reasons, *entry.notes]).lower() for word in wanted)
    ]


def repeats(found: list[Rejected], hypothesis: str, incumbent: str) -> list[Rejected]:
    """The rounds rejected on `incumbent` whose hypothesis says what `hypothesis` says."""
    return [
        entry for entry in found if entry.incumbent == incumbent and similar(entry.hypothesis, hypothesis)
    ]


def similar(one: str, other: str) -> bool:
    """One idea in other words: the same numbers (a tile of 64 is not one of 128), and most of the
    other words the same, in the same order (filler words aside)."""
    first, second = _words(one), _words(other)
    if not first or not second:
        return False
    if {w for w in first if any(c.isdigit() for c in w)} != {
        w for w in second if any(c.isdigit() for c in w)
    }:
        return False
    return difflib.SequenceMatcher(None, first, second).ratio() > SIMILAR


def _words(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in _FILLER]
