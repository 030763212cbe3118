"""The gates: the reasons of a REJECT that no override talks past, and what each accepted round's
verdict says it passed.

A gate judges whether a round may count at all (it is correct, it builds, its tests pass, it leaves
its judge alone, it has no cheat the lint sees, its gain transfers to a training step); the speed
rules judge whether it is worth taking. A person may overrule the speed rules (`accept`, recorded in
the verdict); a gate's REJECT is final. The training probe is the one gate with an explicit escape
(`accept --override-overfit`): it is a small model of a training step, and the person who knows the
real step is larger may say so, on the record. `accept` (the CLI verb and the MCP tool) and the
report read this module; nothing else keeps a list of gates.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitcampaign import constants as C
from gitcampaign.errors import CampaignError
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Phase

GATES = (
    C.REASON_CHECK_FAILED,
    C.REASON_TESTS_FAILED,
    C.REASON_BUILD_FAILED,
    C.REASON_STATIC_CHECK,
    C.REASON_HARNESS_CHANGED,
    C.REASON_OVERFIT,
)
OVERFIT_FLAG = "--override-overfit"


def measured(docs: Sequence[VerdictDoc]) -> VerdictDoc | None:
    """The round's last decision by `validate`: what its gates and measurement said, whatever an
    override noted after it."""
    return next((doc for doc in reversed(docs) if doc.phase == Phase.VALIDATE and doc.decision), None)


def reasons_of(doc: VerdictDoc) -> list[str]:
    reasons = doc.get("reasons")
    return [str(reason) for reason in reasons] if isinstance(reasons, list) else []


def overridable(number: int, docs: Sequence[VerdictDoc], override_overfit: bool = False) -> list[str]:
    """The reasons an accept of round `number` overrides (its validation's), or CampaignError when
    it may not: never validated (accepting it would skip every gate), or rejected by a gate."""
    validated = measured(docs)
    if validated is None:
        raise CampaignError(
            f"round {number} has not been validated: accepting it would skip every gate",
            "run `git campaign validate` (the MCP validate tool); an override may then overrule its speed rules",
        )
    reasons = reasons_of(validated)
    failed = [reason for reason in reasons if reason in GATES]
    if override_overfit:
        failed = [reason for reason in failed if reason != C.REASON_OVERFIT]
    if failed:
        plural = "s" if len(failed) > 1 else ""
        fix = "fix the cause in a new round (`git campaign round -m ...`, commit, `git campaign validate`)"
        hint = (
            f"the training probe says the gain does not transfer; where you know the probe does not "
            f"represent your training step, `git campaign accept {number} {OVERFIT_FLAG} -m WHY` records "
            f"that (a person's decision, not the MCP tool's); else {fix}"
            if failed == [C.REASON_OVERFIT]
            else fix
        )
        raise CampaignError(
            f"round {number} failed the {' and '.join(failed)} gate{plural}: no override accepts it", hint
        )
    return reasons


def audit(docs: Sequence[VerdictDoc], builtin_harness: bool) -> str:
    """What an accepted round's verdict records: how it was accepted, then each gate it passed or
    did not (only what a document recorded is claimed)."""
    validated = measured(docs)
    standing = next((doc for doc in reversed(docs) if doc.decision), None)
    if validated is None or standing is None:
        return "no validation recorded: no gate is known to have run"
    if standing.phase == Phase.OVERRIDE:
        why = "; ".join(str(note) for note in standing.get("notes") or []) or "no reason given"
        how = (
            f"accepted by manual override of {validated.decision} ({', '.join(reasons_of(validated))}): {why}"
        )
    else:
        how = str(standing.decision)
    transfer = validated.get("transfer")
    parts = [how, f"training probe {transfer}" if transfer else "no training probe ran"]
    return f"{', '.join(parts)}; {'; '.join(_gate_record(validated, builtin_harness))}"


def _gate_record(doc: VerdictDoc, builtin_harness: bool) -> list[str]:
    record = []
    build = (doc.get("build") or {}).get("candidate")
    if isinstance(build, dict):
        record.append("built" if build.get("passed") else "build FAILED")
    tests = doc.get("tests")
    if isinstance(tests, dict):
        record.append("tests passed" if tests.get("passed") else "tests FAILED")
    else:
        record.append("no tests ran")
    found = doc.get("gates")
    if isinstance(found, dict):
        static, protected = found.get("static") or [], found.get("protected_changed") or []
        record.append(f"lint FAILED ({len(static)} findings)" if static else "lint clean")
        record.append(
            f"protected files CHANGED ({', '.join(map(str, protected))})"
            if protected
            else "protected files unchanged"
        )
    else:
        record.append("lint and protected files: not recorded")
    shapes = doc.get("shapes") or {}
    checks = [entry.get("check") for entry in shapes.values() if isinstance(entry, dict)]
    if checks and all(check == C.CHECK_PASS for check in checks):
        record.append(
            "every shape PASS in the harness's run-time checks"
            if builtin_harness
            else "every shape PASS in the project's own harness (only the checks it performs)"
        )
    else:
        record.append("Check: not every shape PASS" if checks else "Check: no shape measured")
    return record
