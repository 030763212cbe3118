"""ANALYZE: `git campaign show N`, one round: hypothesis, diff stat, CSV notes, verdict, profiles."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import profile, sync, verdict
from gitcampaign.campaign import opened
from gitcampaign.errors import CampaignError
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Phase


@dataclass
class ShowResult:
    round: int
    commit: str | None
    hypothesis: str
    diff_stat: str = ""
    bench_csv: str | None = None
    full_csv: str | None = None
    verdict: str | None = None
    conflicts: list[VerdictDoc] = field(default_factory=list)  # decisions two clones both noted
    profiles: list[dict[str, Any]] = field(default_factory=list)  # `analyze` documents, oldest first

    def to_json(self) -> dict[str, Any]:
        if self.commit is None:
            return {"round": self.round, "commit": None, "hypothesis": self.hypothesis}
        return {
            "round": self.round,
            "commit": self.commit,
            "hypothesis": self.hypothesis,
            "diff_stat": self.diff_stat,
            "bench_csv": self.bench_csv,
            "full_csv": self.full_csv,
            "verdict": self.verdict,
            "conflicting_decisions": [doc.decision for doc in self.conflicts],
            "profiles": self.profiles,
        }


def show(repo_path: Path, campaign_name: str | None, number: int) -> ShowResult:
    campaign = opened(repo_path, campaign_name)
    repo = campaign.repo
    _, rounds = campaign.lineage()
    if number == 1:
        commit = next((c for c, docs in campaign.verdicts().items() if docs[0].phase == Phase.BASELINE), None)
        hypothesis = "baseline"
    else:
        entry = next((r for r in rounds if r.number == number), None)
        if entry is None:
            raise CampaignError(
                f"campaign {campaign.name} has no round {number}", "list rounds with `git campaign log`"
            )
        commit, hypothesis = entry.commit, entry.hypothesis
    if commit is None:
        return ShowResult(number, None, hypothesis)
    parent = g.parent(repo, commit)
    bench = g.read_note(repo, C.NOTES_BENCH, commit)
    full = g.read_note(repo, C.NOTES_FULL, commit)
    verdict_raw = g.read_note(repo, C.NOTES_VERDICT, commit)
    return ShowResult(
        number,
        commit,
        hypothesis,
        g.diff_stat(repo, parent, commit) if parent else "",
        bench.decode() if bench else None,
        full.decode() if full else None,
        verdict_raw.decode() if verdict_raw else None,
        sync.conflicting_decisions(verdict.parse_stream(verdict_raw)),
        profile.read(repo, commit),
    )
