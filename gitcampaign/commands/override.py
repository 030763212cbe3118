"""`accept` / `rollback`: a person overrides the mechanical decision, recorded as such in the verdict.

The accepted line is never rewritten: rolling back an accepted round adds a commit that restores
the tree before it, and pins the round as rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.campaign import (
    STATUS_ACCEPTED,
    STATUS_EMPTY,
    STATUS_OPEN,
    STATUS_PENDING,
    STATUS_REJECTED,
    Campaign,
    Round,
    resolve,
)
from gitcampaign.commands.validate import apply_decision, check_round_shape
from gitcampaign.errors import CampaignError


@dataclass
class OverrideResult:
    round: int
    decision: str
    previous: str
    commit: str | None


def _pick(campaign: Campaign, number: int | None) -> Round:
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
    campaign: Campaign, entry: Round, decision: str, reason: str, incumbent: str
) -> dict[str, object]:
    previous = entry.decision
    return {
        "campaign": campaign.name,
        "round": entry.number,
        "phase": verdict.PHASE_OVERRIDE,
        "hypothesis": entry.hypothesis,
        "decision": decision,
        "override": True,
        "previous_decision": previous.get("decision") if previous else None,
        "reasons": [C.REASON_MANUAL],
        "notes": [reason] if reason else [],
        "commit": entry.commit,
        "incumbent": incumbent,
        "ratio": previous.get("ratio") if previous else None,
        "shapes": previous.get("shapes", {}) if previous else {},
    }


def accept(repo_path: Path, campaign_name: str | None, number: int | None, reason: str) -> OverrideResult:
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    with g.campaign_lock(repo, campaign.name):
        g.require_clean(repo, "accept a round")
        campaign.require_baseline()
        entry = _pick(campaign, number)
        head = campaign.accepted_head()
        if entry.status in (STATUS_ACCEPTED, STATUS_EMPTY, STATUS_PENDING):
            hints = {
                STATUS_ACCEPTED: "nothing to do",
                STATUS_EMPTY: "commit the round's change first",
                STATUS_PENDING: "finish it with `git campaign validate`",
            }
            raise CampaignError(f"round {entry.number} is {entry.status}", hints[entry.status])
        assert entry.commit is not None
        commit = check_round_shape(campaign, entry.number, entry.commit, head)
        previous = entry.decision.get("decision", "none") if entry.decision else "none"
        with g.repo_lock(repo):  # noted, then applied; a kill in between is finished by `validate`
            verdict.append(repo, commit, _document(campaign, entry, C.DECISION_ACCEPT, reason, head))
            g.fault_point("override:noted")
            apply_decision(campaign, entry.number, commit, head, C.DECISION_ACCEPT)
        return OverrideResult(entry.number, C.DECISION_ACCEPT, str(previous), commit)


def rollback(repo_path: Path, campaign_name: str | None, number: int | None, reason: str) -> OverrideResult:
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    with g.campaign_lock(repo, campaign.name):
        g.require_clean(repo, "roll back a round")
        entry = _pick(campaign, number)
        head = campaign.accepted_head()
        previous = entry.decision.get("decision", "none") if entry.decision else "none"
        if entry.status == STATUS_REJECTED:
            raise CampaignError(f"round {entry.number} is already rejected", "nothing to do")
        if entry.status == STATUS_PENDING:
            raise CampaignError(
                f"round {entry.number} is pending", "finish it with `git campaign validate` first"
            )
        if entry.status == STATUS_EMPTY:
            branch = campaign.round_branch(entry.number)
            g.checkout(repo, campaign.main_branch)
            g.delete_ref(repo, f"refs/heads/{branch}", head)
            return OverrideResult(entry.number, "ABANDONED", str(previous), None)
        assert entry.commit is not None
        if entry.status == STATUS_OPEN:
            commit = check_round_shape(campaign, entry.number, entry.commit, head)
            with g.repo_lock(repo):
                verdict.append(repo, commit, _document(campaign, entry, C.DECISION_REJECT, reason, head))
                g.fault_point("override:noted")
                apply_decision(campaign, entry.number, commit, head, C.DECISION_REJECT)
            return OverrideResult(entry.number, C.DECISION_REJECT, str(previous), commit)
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
        verdict.append(campaign.repo, head, _document(campaign, entry, C.DECISION_REJECT, reason, before))
        g.fault_point("override:noted")
        apply_decision(campaign, entry.number, head, before, C.DECISION_REJECT, reason)
    return OverrideResult(entry.number, C.DECISION_REJECT, previous, head)
