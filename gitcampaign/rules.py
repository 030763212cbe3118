"""The rule book: every rule that can REJECT a round, in one place (docs/design.md, Gates and
Decision rules).

A gate judges whether a round may count at all, and its REJECT is final; a speed rule judges
whether it is worth taking, and a person may overrule it (`accept`, recorded in the verdict). Each
rule names the module that applies it: `gates` (from git alone, each step's outcome and each
shape's Check), `decision` (the paired measurement; a metric that is no number fails correctness
there too), `transfer` (the training probe), `heat_validation` (a heat's screen). validate's judge
(gitcampaign.validation) applies them, `accept` refuses what a gate rejected (gitcampaign.gates),
the report and the MCP server's instructions say them; nothing else keeps a list of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitcampaign import constants as C


@dataclass(frozen=True)
class Rule:
    reason: str  # what a REJECT by it records in the verdict
    gate: bool  # final (no override accepts the round), else a speed rule a person may overrule
    module: str  # the gitcampaign module that applies it
    checks: str  # what it requires of a round (it REJECTs unless this holds)


_SPEED, _GATE = False, True
RULES = (
    Rule(C.REASON_CHECK_FAILED, _GATE, "gates", "every measured shape's Check is PASS"),
    Rule(C.REASON_TESTS_FAILED, _GATE, "gates", "the test command passes in the candidate's tree"),
    Rule(C.REASON_BUILD_FAILED, _GATE, "gates", "the build command builds the candidate"),
    Rule(C.REASON_STATIC_CHECK, _GATE, "gates", "the changed files have no blocking lint finding"),
    Rule(
        C.REASON_HARNESS_CHANGED,
        _GATE,
        "gates",
        "the round leaves the protected files, the campaign's folder and the harness's import path alone",
    ),
    Rule(
        C.REASON_OVERFIT,
        _GATE,
        "transfer",
        "the training probe is at most 3% slower (where one pair reads slower, on the fastest of three runs a side) "
        "and its loss stays on the incumbent's",
    ),
    Rule(C.REASON_SHAPE_REGRESSION, _SPEED, "decision", "every measured shape is less than 5% slower"),
    Rule(C.REASON_NOT_FASTER, _SPEED, "decision", "the aggregate ratio is above 1"),
    Rule(
        C.REASON_WITHIN_NOISE,
        _SPEED,
        "decision",
        "the interval is above 1 and the gain clears the A/A noise floor and the minimum gain",
    ),
    Rule(C.REASON_OUTRUN, _SPEED, "heat_validation", "it measured fastest of its heat's candidates"),
)
GATES = tuple(rule.reason for rule in RULES if rule.gate)
SPEED_RULES = tuple(rule.reason for rule in RULES if not rule.gate)
# Reasons no rule gives: a person's decision, and a pull that kept the other clone's line.
RECORDED = (C.REASON_MANUAL, C.REASON_SUPERSEDED)


def summary() -> str:
    """The rule book in two sentences, for people and agents (the MCP server's instructions)."""
    gates = "; ".join(f"{rule.reason} unless {rule.checks}" for rule in RULES if rule.gate)
    speed = "; ".join(f"{rule.reason} unless {rule.checks}" for rule in RULES if not rule.gate)
    return (
        f"Gates, whose REJECT no override accepts: {gates}. "
        f"Speed rules, which `accept` may overrule with a reason: {speed}."
    )
