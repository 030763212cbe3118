"""ANALYZE: `git campaign log`, the lineage table (docs/walkthrough.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.campaign import campaigns, opened
from gitcampaign.lineage import LineageRow, lineage_rows
from gitcampaign.vocabulary import Status


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


@dataclass
class OpLogResult:
    op: str
    campaigns: list[LogResult]
    not_imported: list[str]  # bundles in the work tree of campaigns on the op that are not imported

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "campaigns": [c.to_json() for c in self.campaigns],
            "not_imported": self.not_imported,
        }


def op_log(repo_path: Path, campaign_name: str | None) -> OpLogResult:
    """`log --op`: the lineage of every campaign in the repository on this campaign's target op, in
    name order, so that a new round can see what earlier campaigns on the kernel already measured;
    and the bundles of such campaigns that the work tree keeps but the repository has not imported."""
    op = opened(repo_path, campaign_name).manifest().target_op
    return OpLogResult(
        op, [log(repo_path, name) for name in _on_op(repo_path, op)], not_imported(repo_path, op)
    )


def not_imported(repo_path: Path, op: str) -> list[str]:
    """`campaigns/NAME/lineage.bundle` of the work tree whose manifest there names `op`, for the
    campaigns that are not in the repository (a clone has their bundles, not their refs)."""
    repo = g.open_repo(repo_path)
    root = Path(g.root(repo))
    known = set(campaigns(repo))
    found = []
    for bundle in sorted(root.glob(f"{C.CAMPAIGNS_DIR}/*/{C.BUNDLE_FILE}")):
        manifest = bundle.parent / C.MANIFEST_FILE
        fields = yaml.safe_load(manifest.read_text()) if manifest.is_file() else None
        if bundle.parent.name not in known and isinstance(fields, dict) and fields.get("target_op") == op:
            found.append(str(bundle.relative_to(root)))
    return found


def rejected_elsewhere(
    repo_path: Path, campaign_name: str | None
) -> tuple[list[tuple[str, LineageRow]], list[str]]:
    """(campaign, row) for every round that another campaign on this campaign's op rejected, and
    the bundles of campaigns on the op that are not imported (their rounds are unknown here)."""
    campaign = opened(repo_path, campaign_name)
    op = campaign.manifest().target_op
    others = [name for name in _on_op(repo_path, op) if name != campaign.name]
    rejected = [
        (name, row) for name in others for row in log(repo_path, name).rows if row.status == Status.REJECTED
    ]
    return rejected, not_imported(repo_path, op)


def _on_op(repo_path: Path, op: str) -> list[str]:
    return [
        name
        for name in campaigns(g.open_repo(repo_path))
        if opened(repo_path, name).manifest().target_op == op
    ]
