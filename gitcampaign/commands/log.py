"""ANALYZE: `git campaign log`, the lineage table (docs/walkthrough.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import heat, profile, rejections, safe_yaml
from gitcampaign.campaign import Campaign, campaigns, opened
from gitcampaign.lineage import LineageRow, rows_of
from gitcampaign.rejections import Rejected
from gitcampaign.vocabulary import Status


@dataclass
class LogResult:
    campaign: str
    metric: str
    rows: list[LineageRow]
    profiles: dict[int, list[str]] = field(default_factory=dict)  # round -> its latest profile's verdicts
    heat: list[int] = field(default_factory=list)  # the open heat's rounds

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "metric": self.metric,
            "rounds": [{**asdict(r), "profile": self.profiles.get(r.round, [])} for r in self.rows],
            "heat": self.heat,
        }


def log(repo_path: Path, campaign_name: str | None) -> LogResult:
    return _log_of(opened(repo_path, campaign_name))


def _log_of(campaign: Campaign) -> LogResult:
    baseline, rounds = campaign.lineage()
    _, rows = rows_of(baseline, rounds)
    profiled = profile.read_all(campaign.repo)
    commits = {row.round: row.commit for row in rows}
    if rows and rows[0].round == 1:
        commits[1] = campaign.baseline_commit()
    verdicts = {number: profile.verdicts(profiled[c][-1]) for number, c in commits.items() if c in profiled}
    in_heat = [entry.number for entry in heat.members(campaign, rounds)]
    return LogResult(campaign.name, campaign.manifest().primary_metric, rows, verdicts, in_heat)


@dataclass
class RejectedResult:
    campaign: str
    grep: str
    rounds: list[Rejected]

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "grep": self.grep, "rounds": [r.to_json() for r in self.rounds]}


def rejected(repo_path: Path, campaign_name: str | None, grep: str = "") -> RejectedResult:
    """`log --rejected [--grep WORDS]`: every rejected round's hypothesis, reasons and per-shape
    deltas, those holding every one of WORDS when given."""
    campaign = opened(repo_path, campaign_name)
    found = rejections.rejected_rounds(campaign.lineage()[1])
    return RejectedResult(campaign.name, grep, rejections.matching(found, grep) if grep else found)


@dataclass
class OpLogResult:
    campaign: str  # the one asked about
    op: str
    campaigns: list[LogResult]  # every campaign on the op, in name order, that one included
    not_imported: list[str]  # bundles in the work tree of campaigns on the op that are not imported

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "op": self.op,
            "campaigns": [c.to_json() for c in self.campaigns],
            "not_imported": self.not_imported,
        }

    def rejected_elsewhere(self) -> list[tuple[str, LineageRow]]:
        """(campaign, row) for every round that another campaign on the op rejected."""
        return [
            (other.campaign, row)
            for other in self.campaigns
            if other.campaign != self.campaign
            for row in other.rows
            if row.status == Status.REJECTED
        ]


def op_log(repo_path: Path, campaign_name: str | None) -> OpLogResult:
    """`log --op`: the lineage of every campaign in the repository on this campaign's target op, so
    that a new round can see what earlier campaigns on the kernel already measured (`round` lists
    what they rejected); and the bundles of such campaigns that the work tree keeps but the
    repository has not imported."""
    campaign = opened(repo_path, campaign_name)
    op = campaign.manifest().target_op
    others = (opened(repo_path, name) for name in campaigns(campaign.repo))
    on_op = [_log_of(other) for other in others if other.manifest().target_op == op]
    return OpLogResult(campaign.name, op, on_op, not_imported(campaign.repo, op))


def not_imported(repo: Repo, op: str) -> list[str]:
    """`campaigns/NAME/lineage.bundle` of the work tree whose manifest there names `op`, for the
    campaigns that are not in the repository (a clone has their bundles, not their refs)."""
    root = Path(g.root(repo))
    known = set(campaigns(repo))
    found = []
    for bundle in sorted(root.glob(f"{C.CAMPAIGNS_DIR}/*/{C.BUNDLE_FILE}")):
        manifest = bundle.parent / C.MANIFEST_FILE
        try:
            fields = safe_yaml.load(manifest.read_bytes()) if manifest.is_file() else None
        except safe_yaml.UnsafeYAML:
            fields = None  # not a campaign this can list; `import` says what is wrong with it
        if bundle.parent.name not in known and isinstance(fields, dict) and fields.get("target_op") == op:
            found.append(str(bundle.relative_to(root)))
    return found
