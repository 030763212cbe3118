"""`accept` / `rollback`: a person overrides the mechanical decision, recorded as such in the verdict.

An accept overrules the speed rules only: a round that a gate rejected, or that nobody validated, is
refused (`gitcampaign.gates`), whoever asks (the CLI, the MCP tool). The accepted line is never rewritten: rolling back an accepted round adds a commit that restores
the tree before it, and pins the round as rejected.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import gates, verdict
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, Round, apply_decision, check_one_commit, locked
from gitcampaign.errors import CampaignError
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Decision, Phase, Status

ABANDONED = "ABANDONED"  # what a rollback of a round without its commit did: no note, nothing to decide


@dataclass
class OverrideResult:
    round: int
    decision: str
    previous: str
    commit: str | None
    overrides: list[str] = field(default_factory=list)  # the REJECT reasons an accept overruled

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pick_round(campaign: Campaign, number: int | None) -> Round:
    """Round `number`, else the latest round: what an override (or the MCP diff_round) acts on."""
    _, rounds = campaign.lineage()
    if not rounds:
        raise CampaignError(
            f"campaign {campaign.name} has no rounds", 'open one with `git campaign round -m "..."`'
        )
    if number is None:
        return rounds[-1]
    for entry in rounds:
        if entry.number == number:
            return entry
    raise CampaignError(
        f"campaign {campaign.name} has no round {number}", "list rounds with `git campaign log`"
    )


def _document(
    campaign: Campaign,
    entry: Round,
    decision: Decision,
    reason: str,
    incumbent: str,
    overrides: list[str] | None = None,
) -> VerdictDoc:
    """The override's verdict document; an accept names the reasons of the REJECT it overrules."""
    previous = entry.decision
    return VerdictDoc(
        campaign=campaign.name,
        round=entry.number,
        phase=Phase.OVERRIDE,
        hypothesis=entry.hypothesis,
        decision=decision,
        override=True,
        previous_decision=previous.decision if previous else None,
        reasons=[C.REASON_MANUAL],
        overrides=overrides,
        notes=[reason] if reason else [],
        commit=entry.commit,
        incumbent=incumbent,
        ratio=previous.ratio if previous else None,
        shapes=(previous.shapes or {}) if previous else {},
        layout=verdict.OVERRIDE_LAYOUT,
    )


def accept(
    repo_path: Path,
    campaign_name: str | None,
    number: int | None,
    reason: str,
    override_overfit: bool = False,
) -> OverrideResult:
    """Accept round `number` (default: the latest) over its speed rules; `override_overfit` also
    overrules the training probe's `overfit`, never another gate."""
    with locked(repo_path, campaign_name, clean_for="accept a round") as campaign:
        repo = campaign.repo
        manifest = campaign.require_baseline()
        entry = pick_round(campaign, number)
        head = campaign.accepted_head()
        if entry.status in (Status.ACCEPTED, Status.EMPTY, Status.PENDING):
            hints = {
                Status.ACCEPTED: "nothing to do",
                Status.EMPTY: "commit the round's change first",
                Status.PENDING: "finish it with `git campaign validate`",
            }
            raise CampaignError(f"round {entry.number} is {entry.status}", hints[entry.status])
        assert entry.commit is not None
        overrides = gates.overridable(
            repo, manifest, entry.number, entry.commit, entry.docs, override_overfit
        )
        commit = check_one_commit(campaign, entry.number, entry.commit, head)
        previous = entry.decision.decision if entry.decision else "none"
        document = _document(campaign, entry, Decision.ACCEPT, reason, head, overrides)
        with g.repo_lock(repo):  # noted, then applied; a kill in between is finished by `validate`
            verdict.append(repo, commit, document)
            g.fault_point("override:noted")
            apply_decision(campaign, entry.number, commit, head, Decision.ACCEPT)
        return OverrideResult(entry.number, Decision.ACCEPT, str(previous), commit, overrides)


def rollback(repo_path: Path, campaign_name: str | None, number: int | None, reason: str) -> OverrideResult:
    with locked(repo_path, campaign_name, clean_for="roll back a round") as campaign:
        repo = campaign.repo
        campaign.require_intact()
        entry = pick_round(campaign, number)
        head = campaign.accepted_head()
        previous = entry.decision.decision if entry.decision else "none"
        if entry.status == Status.REJECTED:
            raise CampaignError(f"round {entry.number} is already rejected", "nothing to do")
        if entry.status == Status.PENDING:
            raise CampaignError(
                f"round {entry.number} is pending", "finish it with `git campaign validate` first"
            )
        if entry.status == Status.EMPTY:
            campaign.leave_for_main()
            g.delete_ref(repo, campaign.round_ref(entry.number), head)
            return OverrideResult(entry.number, ABANDONED, str(previous), None)
        assert entry.commit is not None
        if entry.status == Status.OPEN:
            commit = check_one_commit(campaign, entry.number, entry.commit, head)
            with g.repo_lock(repo):
                verdict.append(repo, commit, _document(campaign, entry, Decision.REJECT, reason, head))
                g.fault_point("override:noted")
                apply_decision(campaign, entry.number, commit, head, Decision.REJECT)
            return OverrideResult(entry.number, Decision.REJECT, str(previous), commit)
        if entry.commit != head:
            raise CampaignError(
                f"round {entry.number} is not the accepted head: later rounds build on it",
                "roll back the later rounds first (`git campaign rollback N`, newest first)",
            )
        return _revert_accepted(campaign, entry, head, reason, str(previous))


def _revert_accepted(
    campaign: Campaign, entry: Round, head: str, reason: str, previous: str
) -> OverrideResult:
    before = g.parent(campaign.repo, head)
    assert before is not None
    with g.repo_lock(campaign.repo):
        verdict.append(campaign.repo, head, _document(campaign, entry, Decision.REJECT, reason, before))
        g.fault_point("override:noted")
        apply_decision(campaign, entry.number, head, before, Decision.REJECT, reason)
    return OverrideResult(entry.number, Decision.REJECT, previous, head)
