"""ANALYZE: `git campaign status`, where the campaign stands and what to run next."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import cost, heat, profile, sync, trust
from gitcampaign import git as g
from gitcampaign.campaign import opened
from gitcampaign.kept_sessions import KeptSessions
from gitcampaign.lineage import LineageRow, rows_of, shape_limits, termination
from gitcampaign.next_step import STEP_COMMIT, STEP_DONE, STEP_VALIDATE, NextStep, choose, evidence_of
from gitcampaign.vocabulary import Status


@dataclass
class StatusResult:
    campaign: str
    head_branch: str | None
    accepted_head: str
    main_branch: str
    op: str
    backend: str
    metric: str
    baseline: bool
    representative_shapes: list[str]
    rounds: dict[str, int]  # how many rounds stand in each status, in `Status` order
    speedup: float | None
    max_iterations: int
    termination: list[str]
    next: str
    remotes: dict[str, Any]
    unfinished: list[str]  # what a killed command left (`git.unfinished`), for `recover` to finish
    profile: list[str] = field(default_factory=list)  # the latest `analyze` verdicts of the accepted head
    damaged: str | None = None  # a record decisions stand on that cannot be read (`next` restores it)
    heat: list[int] = field(default_factory=list)  # the open heat's rounds (`validate --heat` decides them)
    device_seconds: float = 0.0  # what its measurements cost, from their verdicts (gitcampaign.cost)
    measurements: int = 0  # the verdicts that recorded their device time

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["main_branch"], data["backend"]  # shown in the text; the JSON has kept its keys
        if data["damaged"] is None:
            del data["damaged"]  # present only where a record cannot be read
        return data


def status(repo_path: Path, campaign_name: str | None, fetch: bool = False) -> StatusResult:
    """Where the campaign stands, read only: what a killed command left is reported (`unfinished`,
    and `next` names `recover`), never finished here (no lock is taken, no process stopped)."""
    campaign = opened(repo_path, campaign_name)
    repo = campaign.repo
    if fetch:  # refresh what each remote holds (only the tracking refs move)
        for remote in g.remotes(repo):
            sync.fetch(repo, campaign.name, remote, sync.tracking_label(remote))
    manifest = campaign.manifest()
    baseline, lineage = campaign.lineage()
    _, rows = rows_of(baseline, lineage)
    rounds = [row for row in rows if row.round >= 2]
    in_heat = [entry.number for entry in heat.members(campaign, lineage)]
    spent = cost.total(campaign)
    counts: dict[str, int] = {
        state: sum(1 for row in rounds if row.status == state)
        for state in (Status.ACCEPTED, Status.REJECTED, Status.OPEN, Status.EMPTY, Status.PENDING)
    }
    if any(row.status == Status.DAMAGED for row in rounds):
        counts[Status.DAMAGED] = sum(1 for row in rounds if row.status == Status.DAMAGED)
    reached = termination(manifest, rows, shape_limits(campaign, manifest))
    profiles = profile.read(repo, campaign.accepted_head())
    unfinished = g.unfinished(repo)
    problem = campaign.integrity_error()
    step = _next_text(
        choose(
            campaign.name,
            manifest.csv_header is not None,
            rows,
            campaign.reported(),
            reached,
            evidence_of(campaign),
            trusted=trust.pending(campaign) is None,
            heat=in_heat,
        ),
        rounds[-1] if rounds else None,
        KeptSessions.summary(campaign, rounds[-1].round) if rounds else None,
    )
    return StatusResult(
        campaign=campaign.name,
        head_branch=g.current_branch(repo),
        accepted_head=campaign.accepted_head(),
        main_branch=campaign.main_branch,
        op=manifest.target_op,
        backend=manifest.target_backend,
        metric=manifest.primary_metric,
        baseline=manifest.csv_header is not None,
        representative_shapes=manifest.representative_shapes,
        rounds=counts,
        speedup=next(
            (row.vs_baseline for row in reversed(rows) if row.status in (Status.BASELINE, Status.ACCEPTED)),
            None,
        ),
        max_iterations=manifest.max_iterations,
        termination=reached,
        next=(
            problem.hint
            if problem
            else "git campaign recover  (finishes what a killed command left)"
            if unfinished
            else step
        ),
        remotes=sync.remote_standing(repo, campaign.name),
        unfinished=unfinished,
        profile=profile.verdicts(profiles[-1]) if profiles else [],
        damaged=problem.message if problem else None,
        heat=in_heat,
        device_seconds=spent.seconds,
        measurements=spent.measurements,
    )


def _next_text(step: NextStep, last: LineageRow | None, kept: str | None = None) -> str:
    """`status`'s wording of the next step `next_step.choose` chose, with the open round's number (and the
    measurement sessions an interrupted validate of it kept)."""
    if step.step in (STEP_VALIDATE, STEP_COMMIT) and "--heat" in step.command:
        return f"{step.command}  ({step.why})"
    if step.step == STEP_VALIDATE and last is not None:
        pending = last.status == Status.PENDING
        what = "finishes the interrupted decision" if pending else f"round {last.round}"
        return f"git campaign validate  ({what}{f'; {kept}' if kept and not pending else ''})"
    if step.step == STEP_COMMIT and last is not None:
        return f"edit, `git commit`, then `git campaign validate` (round {last.round})"
    if step.step == STEP_DONE:
        return 'git campaign report --html  (reported; `git campaign round -m "HYPOTHESIS"` continues it)'
    return step.command
