"""ANALYZE: `git campaign log`, the lineage table (docs/walkthrough.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign.campaign import opened
from gitcampaign.lineage import LineageRow, lineage_rows


@dataclass
class LogResult:
    campaign: str
    metric: str
    rows: list[LineageRow]

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "metric": self.metric, "rounds": [asdict(r) for r in self.rows]}


def log(repo_path: Path, campaign_name: str | None) -> LogResult:
    campaign = opened(repo_path, campaign_name)
    metric = campaign.manifest().primary_metric
    _, rows = lineage_rows(campaign)
    return LogResult(campaign.name, metric, rows)
