"""The gates: the reasons of a REJECT that no override talks past, and what each accepted round's
verdict says it passed.

A gate judges whether a round may count at all (it is correct, it builds, its tests pass, it leaves
its judge alone, it has no cheat the lint sees, its gain transfers to a training step); the speed
rules judge whether it is worth taking. A person may overrule the speed rules (`accept`, recorded in
the verdict); a gate's REJECT is final. The training probe is the one gate with an explicit escape
(`accept --override-overfit`): it is a small model of a training step, and the person who knows the
real step is larger may say so, on the record. The list of gates is the rule book's
(gitcampaign.rules); this module applies the gates that git and each step's outcome decide, for
`validate`'s judge (gitcampaign.validation), `accept` (the CLI verb and the MCP tool), an accept
`validate` finds noted, and the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.errors import CampaignError
from gitcampaign.lint import lint_source
from gitcampaign.manifest import Manifest
from gitcampaign.protected import protected_changes
from gitcampaign.results import BenchTable
from gitcampaign.rules import GATES
from gitcampaign.verdict import GateFindings, VerdictDoc
from gitcampaign.vocabulary import Phase

OVERFIT_FLAG = "--override-overfit"
# The gate each step before a measurement is: a candidate whose build or tests fail is rejected
# unmeasured (gitcampaign.steps names the step that failed).
STEP_GATES = {"build": C.REASON_BUILD_FAILED, "tests": C.REASON_TESTS_FAILED}


@dataclass(frozen=True)
class Rejection:
    """A rule's REJECT: the reason the verdict records, and what the round did (its notes)."""

    reason: str
    notes: list[str]


class GateRefusal(CampaignError):
    """An accept no gate allows; `gates` names the gates it failed (none: it was never measured)."""

    def __init__(self, message: str, hint: str, gates: list[str]) -> None:
        super().__init__(message, hint)
        self.gates = gates


def measured(docs: Sequence[VerdictDoc]) -> VerdictDoc | None:
    """The round's last decision by `validate`: what its gates and measurement said, whatever an
    override noted after it."""
    return next((doc for doc in reversed(docs) if doc.phase == Phase.VALIDATE and doc.decision), None)


def gate_findings(
    repo: Repo, manifest: Manifest, incumbent: str, commit: str, changed: list[str]
) -> GateFindings:
    """The integrity and static gates, from git alone: run by `validate` because hooks can be
    skipped (--no-verify), and again by `accept` because notes can be written by hand."""
    protected = protected_changes(repo, manifest, incumbent, commit, changed)
    static, suppressed, info = [], [], []
    for path in changed:
        content = g.read_file_at(repo, commit, path) if path.endswith(".py") else None
        if content is None:
            continue
        for finding in lint_source(content.decode(errors="replace"), path):
            text = f"{finding.path}:{finding.line}: {finding.rule} {finding.message}"
            if finding.blocking:
                static.append(text)
            elif finding.suppressed_reason is not None:
                suppressed.append(f"{text} (suppressed: {finding.suppressed_reason})")
            else:
                info.append(text)  # W1: the allowed weight cache, reported so the verdict shows it
    return GateFindings(protected_changed=protected, static=static, suppressed=suppressed, info=info)


def integrity_reasons(found: GateFindings) -> list[str]:
    """The integrity and static gates' REJECT reasons for their findings (none: both passed)."""
    return ([C.REASON_HARNESS_CHANGED] if found.protected_changed else []) + (
        [C.REASON_STATIC_CHECK] if found.static else []
    )


def correctness(table: BenchTable) -> Rejection | None:
    """The correctness gate on one measured CSV: "label: FAIL" for each shape whose Check is not
    PASS (None: every shape passed)."""
    failing = [f"{row.label}: {row.check}" for row in table.rows if not row.passed]
    return Rejection(C.REASON_CHECK_FAILED, failing) if failing else None


def unready(step: str, notes: list[str]) -> Rejection:
    """The build or tests gate on the candidate's `step` ("build", "tests") that failed."""
    return Rejection(STEP_GATES[step], notes)


def overridable(
    repo: Repo,
    manifest: Manifest,
    number: int,
    commit: str,
    docs: Sequence[VerdictDoc],
    override_overfit: bool = False,
) -> list[str]:
    """The reasons an accept of round `number` (its one commit, on the accepted head) overrules, or
    GateRefusal when it may not: never validated (accepting it would skip every gate), rejected by
    a gate in any of its validations, failing the integrity or static gate now (re-run from git: a
    note cannot hide a changed harness), or a validation no measurement on the commit backs."""
    validated = measured(docs)
    if validated is None:
        raise GateRefusal(
            f"round {number} has not been validated: accepting it would skip every gate",
            "run `git campaign validate` (the MCP validate tool); an override may then overrule its speed rules",
            [],
        )
    recorded = [reason for doc in docs if doc.phase == Phase.VALIDATE for reason in doc.reasons or []]
    incumbent = g.parent(repo, commit) or commit
    found = gate_findings(repo, manifest, incumbent, commit, g.changed_paths(repo, incumbent, commit))
    failed = list(
        dict.fromkeys(reason for reason in [*recorded, *integrity_reasons(found)] if reason in GATES)
    )
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
        raise GateRefusal(
            f"round {number} failed the {' and '.join(failed)} gate{plural}: no override accepts it",
            hint,
            failed,
        )
    facts = verdict.commit_facts(repo, [commit]).get(commit)
    if facts is None or not verdict.names_its_csv(validated, facts):
        raise GateRefusal(
            f"round {number}'s validation names no measurement on {commit[:12]} (the CSV note it names is not"
            " the commit's): an override overrules measured speed rules only",
            "run `git campaign validate` on a new round with this change (`git campaign round --from ...`)",
            [],
        )
    return list(validated.reasons or [])


def audit(docs: Sequence[VerdictDoc], builtin_harness: bool) -> str:
    """What an accepted round's verdict records: how it was accepted, then each gate it passed or
    did not (only what a document recorded is claimed)."""
    validated = measured(docs)
    standing = next((doc for doc in reversed(docs) if doc.decision), None)
    if validated is None or standing is None:
        return "no validation recorded: no gate is known to have run"
    if standing.phase == Phase.OVERRIDE:
        why = "; ".join(standing.notes or []) or "no reason given"
        how = f"accepted by manual override of {validated.decision} ({', '.join(validated.reasons or [])}): {why}"
    else:
        how = str(standing.decision)
    transfer = validated.transfer
    parts = [how, f"training probe {transfer}" if transfer else "no training probe ran"]
    return f"{', '.join(parts)}; {'; '.join(_gate_record(validated, builtin_harness))}"


def _gate_record(doc: VerdictDoc, builtin_harness: bool) -> list[str]:
    record = []
    build = (doc.build or {}).get(C.CANDIDATE)
    if build is not None:
        record.append("built" if build.passed else "build FAILED")
    if doc.tests is not None:
        record.append("tests passed" if doc.tests.passed else "tests FAILED")
    else:
        record.append("no tests ran")
    found = doc.gates
    if found is not None:
        static, protected = found.static or [], found.protected_changed or []
        record.append(f"lint FAILED ({len(static)} findings)" if static else "lint clean")
        record.append(
            f"protected files CHANGED ({', '.join(protected)})" if protected else "protected files unchanged"
        )
    else:
        record.append("lint and protected files: not recorded")
    checks = [entry.check for entry in (doc.shapes or {}).values()]
    if checks and all(check == C.CHECK_PASS for check in checks):
        record.append(
            "every shape PASS in the harness's run-time checks"
            if builtin_harness
            else "every shape PASS in the project's own harness (only the checks it performs)"
        )
    else:
        record.append("Check: not every shape PASS" if checks else "Check: no shape measured")
    return record
