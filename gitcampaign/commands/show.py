"""ANALYZE: `git campaign show N`, one round: hypothesis, diff stat, CSV notes, verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import sync, verdict
from gitcampaign.campaign import Campaign, resolve
from gitcampaign.errors import CampaignError


def show(repo_path: Path, campaign_name: str | None, number: int) -> tuple[str, dict[str, Any]]:
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    _, rounds = campaign.lineage()
    if number == 1:
        commit = next(
            (c for c, docs in campaign.verdicts().items() if docs[0].get("phase") == "BASELINE"), None
        )
        hypothesis = "baseline"
    else:
        entry = next((r for r in rounds if r.number == number), None)
        if entry is None:
            raise CampaignError(
                f"campaign {campaign.name} has no round {number}", "list rounds with `git campaign log`"
            )
        commit, hypothesis = entry.commit, entry.hypothesis
    if commit is None:
        text = f"round {number}: no commit yet\nhypothesis: {hypothesis}"
        return text, {"round": number, "commit": None, "hypothesis": hypothesis}
    parent = g.parent(repo, commit)
    stat = g.diff_stat(repo, parent, commit) if parent else ""
    bench = g.read_note(repo, C.NOTES_BENCH, commit)
    full = g.read_note(repo, C.NOTES_FULL, commit)
    verdict_raw = g.read_note(repo, C.NOTES_VERDICT, commit)
    parts = [f"round {number} at {commit}", f"hypothesis: {hypothesis}", "", "diff --stat:", stat or "(none)"]
    for title, raw in (("quick CSV (bench note)", bench), ("full CSV", full), ("verdict", verdict_raw)):
        if raw is not None:
            parts += ["", f"{title}:", raw.decode(errors="replace").rstrip("\n")]
    conflicts = sync.conflicting_decisions(verdict.parse_stream(verdict_raw))
    if conflicts:
        parts += ["", "conflicting verdicts (this round was validated in two clones; both are kept):"]
        parts += [f"  {doc['decision']} written {doc.get('written', '?')}" for doc in conflicts]
        parts.append(f"  settle it with `git campaign accept {number}` or `git campaign rollback {number}`")
    data = {
        "round": number,
        "commit": commit,
        "hypothesis": hypothesis,
        "diff_stat": stat,
        "bench_csv": bench.decode() if bench else None,
        "full_csv": full.decode() if full else None,
        "verdict": verdict_raw.decode() if verdict_raw else None,
        "conflicting_decisions": [doc["decision"] for doc in conflicts],
    }
    return "\n".join(parts), data
