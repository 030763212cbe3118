"""OPTIMIZE: `git campaign round -m HYPOTHESIS` opens `campaign/NAME/round-N` on the accepted head."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import git as g
from gitcampaign.campaign import locked
from gitcampaign.errors import CampaignError
from gitcampaign.vocabulary import Status


@dataclass
class RoundResult:
    number: int
    branch: str
    base: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def open_round(repo_path: Path, campaign_name: str | None, hypothesis: str) -> RoundResult:
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        if not hypothesis.strip():
            raise CampaignError(
                "a round needs its hypothesis", 'git campaign round -m "what you expect, and why"'
            )
        g.require_clean(repo, "open a round")
        campaign.require_baseline()
        _, rounds = campaign.lineage()
        # One hypothesis at a time per person: a round pulled from a teammate (no description here,
        # `open_round` writes one) does not block this clone from opening the next number.
        unfinished = [
            r
            for r in rounds
            if r.status in (Status.OPEN, Status.EMPTY, Status.PENDING)
            and g.config_get(repo, f"branch.{campaign.round_branch(r.number)}.description") is not None
        ]
        if unfinished:
            current = unfinished[-1]
            raise CampaignError(
                f"round {current.number} is still {current.status}: one hypothesis at a time",
                "finish it with `git campaign validate` (or `git campaign rollback`) first",
            )
        number = campaign.next_round_number()
        branch = campaign.round_branch(number)
        base = campaign.accepted_head()
        g.update_ref(repo, campaign.round_ref(number), base, None, f"campaign: open round {number}")
        g.config_set(repo, f"branch.{branch}.description", hypothesis.strip())
        g.checkout(repo, branch)
        return RoundResult(number, branch, base)
