"""`git campaign trust`: approve, in this clone, the commands of a campaign that came from elsewhere
(gitcampaign/trust.py has the rule)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import trust as rule
from gitcampaign.campaign import opened


@dataclass
class TrustResult:
    campaign: str
    commands: dict[str, str]  # the set approved: the accepted line's manifest as it stands now,
    files: dict[str, str]  # and the files of the campaign's folder they run, by blob id
    newly: bool  # False where this clone had approved that very set already

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        return rule.CommandSet(self.commands, self.files).lines()


def trust(repo_path: Path, campaign_name: str | None) -> TrustResult:
    campaign = opened(repo_path, campaign_name)
    approved = rule.command_set(campaign)
    return TrustResult(campaign.name, approved.commands, approved.files, rule.approve(campaign, approved))
