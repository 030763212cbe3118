"""ANALYZE: `git campaign log`, the lineage table (docs/walkthrough.md)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from gitcampaign import git as g
from gitcampaign.campaign import Campaign, resolve
from gitcampaign.lineage import lineage_rows, log_table


def log(repo_path: Path, campaign_name: str | None) -> tuple[str, dict[str, Any]]:
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    metric = campaign.manifest().primary_metric
    _, rows = lineage_rows(campaign)
    return log_table(rows, metric), {
        "campaign": campaign.name,
        "metric": metric,
        "rounds": [asdict(r) for r in rows],
    }
