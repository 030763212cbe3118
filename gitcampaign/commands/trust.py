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
    commands: dict[str, str]  # the set approved: the accepted line's manifest as it stands now
    newly: bool  # False where this clone had approved that very set already

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def trust(repo_path: Path, campaign_name: str | None) -> TrustResult:
    campaign = opened(repo_path, campaign_name)
    commands = rule.commands_of(campaign.manifest_fields())
    return TrustResult(campaign.name, commands, rule.approve(campaign.repo, campaign.name, commands))
