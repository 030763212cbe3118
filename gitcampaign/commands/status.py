"""ANALYZE: `git campaign status`, where the campaign stands and what to run next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitcampaign import git as g
from gitcampaign import sync
from gitcampaign.campaign import (
    STATUS_ACCEPTED,
    STATUS_EMPTY,
    STATUS_OPEN,
    STATUS_PENDING,
    STATUS_REJECTED,
    Campaign,
    resolve,
)
from gitcampaign.commands.report import termination
from gitcampaign.lineage import LineageRow, lineage_rows


def status(repo_path: Path, campaign_name: str | None, fetch: bool = False) -> tuple[str, dict[str, Any]]:
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    if fetch:  # refresh what each remote holds (only the tracking refs move)
        for remote in g.remotes(repo):
            sync.fetch(repo, campaign.name, remote, sync.tracking_label(remote))
    manifest = campaign.manifest()
    _, rows = lineage_rows(campaign)
    rounds = [row for row in rows if row.round >= 2]
    counts = {
        state: sum(1 for row in rounds if row.status == state)
        for state in (STATUS_ACCEPTED, STATUS_REJECTED, STATUS_OPEN, STATUS_EMPTY, STATUS_PENDING)
    }
    reached = termination(campaign, manifest, rows)
    data: dict[str, Any] = {
        "campaign": campaign.name,
        "head_branch": g.current_branch(repo),
        "accepted_head": campaign.accepted_head(),
        "op": manifest.target_op,
        "metric": manifest.primary_metric,
        "baseline": manifest.csv_header is not None,
        "representative_shapes": manifest.representative_shapes,
        "rounds": counts,
        "speedup": next(
            (row.vs_baseline for row in reversed(rows) if row.status in ("baseline", STATUS_ACCEPTED)), None
        ),
        "max_iterations": manifest.max_iterations,
        "termination": reached,
        "next": _next_step(manifest.csv_header is not None, rounds),
        "remotes": sync.remote_standing(repo, campaign.name),
    }
    lines = [
        f"campaign {campaign.name}: {manifest.target_op} ({manifest.target_backend}), {manifest.primary_metric}"
    ]
    lines.append(
        f"accepted head {data['accepted_head'][:12]} on {campaign.main_branch}; HEAD on {data['head_branch']}"
    )
    lines.append(
        "rounds: " + ", ".join(f"{n} {state}" for state, n in counts.items() if n)
        if rounds
        else "rounds: none yet"
    )
    if data["speedup"]:
        lines.append(f"speedup over baseline: {data['speedup']:.3f}x")
    lines.append("termination: " + (", ".join(reached) if reached else "none reached"))
    lines += [sync.describe_standing(remote, states) for remote, states in data["remotes"].items()]
    lines.append(f"next: {data['next']}")
    return "\n".join(lines), data


def _next_step(has_baseline: bool, rounds: list[LineageRow]) -> str:
    if not has_baseline:
        return "git campaign prepare && git campaign baseline"
    last = rounds[-1] if rounds else None
    if last and last.status == STATUS_PENDING:
        return "git campaign validate  (finishes the interrupted decision)"
    if last and last.status == STATUS_EMPTY:
        return f"edit, `git commit`, then `git campaign validate` (round {last.round})"
    if last and last.status == STATUS_OPEN:
        return f"git campaign validate  (round {last.round})"
    return 'git campaign round -m "HYPOTHESIS"'
