"""VALIDATE: gates, an interleaved A/B measurement, a mechanical decision, notes, then ref moves
(gitcampaign.validation); `--heat` decides the open heat's candidates together
(gitcampaign.heat_validation).

Order of effects: notes first, then refs (each a compare-and-swap), so a run killed anywhere leaves
either nothing (it is simply run again) or a decision noted but not applied, which the next
`validate` finishes ("pending" in `status`).
"""

from __future__ import annotations

from pathlib import Path

from gitcampaign import constants as C
from gitcampaign import executor as ex
from gitcampaign import git as g
from gitcampaign import heat, heat_validation, trust
from gitcampaign.campaign import Campaign, Round, apply_decision, locked
from gitcampaign.cost import DeviceClock
from gitcampaign.errors import CampaignError
from gitcampaign.heat_validation import HeatResult
from gitcampaign.manifest import check_pairs
from gitcampaign.progress import Progress
from gitcampaign.refs import CampaignRef, RefKind
from gitcampaign.validation import (
    Candidate,
    ValidateResult,
    close,
    job_of,
    measure_round,
    note,
    require_unmoved,
    resume,
)
from gitcampaign.vocabulary import Status


def round_to_validate(campaign: Campaign) -> Round:
    """The round to validate: the checked-out round branch, else the only unfinished one."""
    _, rounds = campaign.lineage()
    checked_out = CampaignRef.from_ref(g.current_branch(campaign.repo) or "")
    if (
        checked_out is not None
        and checked_out.kind == RefKind.ROUND
        and checked_out.campaign == campaign.name
    ):
        return next(r for r in rounds if r.number == checked_out.round)
    unfinished = [r for r in rounds if r.status in (Status.OPEN, Status.PENDING)]
    if not unfinished:
        raise CampaignError(
            f"campaign {campaign.name} has no round waiting for validation",
            'open one with `git campaign round -m "HYPOTHESIS"`, edit, `git commit`, then validate',
        )
    return unfinished[-1]


def validate(
    repo_path: Path,
    campaign_name: str | None,
    full: bool = False,
    pairs: int | None = None,
    probe: bool = True,
    timeout_s: int | None = None,
    gpus: str | None = None,
    executor: str | None = None,
    progress: Progress | None = None,
) -> ValidateResult:
    progress = progress or Progress.silent()
    check_pairs(pairs)
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        manifest = campaign.require_baseline()
        trust.require(campaign)
        plan = ex.make_plan(repo, campaign.name, manifest.executor, gpus, executor)
        incumbent = campaign.accepted_head()
        current = round_to_validate(campaign)
        g.require_clean(repo, "validate")  # after the checks that need no clean tree, for their errors
        if current.status == Status.PENDING and current.decision is not None:
            return resume(campaign, manifest, current)
        if current.status in (Status.ACCEPTED, Status.REJECTED):
            raise CampaignError(
                f"round {current.number} is already {current.status}",
                f'`git checkout {campaign.main_branch}` and open the next one: git campaign round -m "..."',
            )
        in_heat = [entry.number for entry in heat.members(campaign, campaign.lineage()[1])]
        if current.number in in_heat:
            raise CampaignError(
                f"round {current.number} is in the open heat ({heat.listing(in_heat)}): a heat is decided"
                " as one, its best candidate confirmed against the incumbent",
                "`git campaign validate --heat` (or take the round out first: `git campaign rollback "
                f"{current.number}`)",
            )
        with heat.candidate_locks(repo, campaign.name, [current.number]):
            with progress.phase("gates"):
                candidate = Candidate.of(campaign, manifest, current, incumbent, full)
            result, document = candidate.result, candidate.document
            bench_raw: bytes | None = None
            if not result.reasons:
                clock = DeviceClock(len(plan.devices))
                bench_raw = measure_round(
                    campaign,
                    manifest,
                    {C.INCUMBENT: incumbent, C.CANDIDATE: candidate.commit},
                    job_of(manifest, candidate.shapes, timeout_s),
                    pairs,
                    probe,
                    result,
                    document,
                    progress,
                    plan,
                )
                result.device_seconds = clock.seconds()
            close(document, result, manifest, repo, candidate.commit)
            g.fault_point("validate:measured")
            with g.repo_lock(repo):
                require_unmoved(campaign, incumbent, {current.number: candidate.commit})
                note(campaign, candidate.commit, document, bench_raw, full)
                apply_decision(campaign, current.number, candidate.commit, incumbent, result.decision)
            return result


def validate_heat(
    repo_path: Path,
    campaign_name: str | None,
    full: bool = False,
    pairs: int | None = None,
    probe: bool = True,
    timeout_s: int | None = None,
    gpus: str | None = None,
    executor: str | None = None,
    sweeps: int = 1,
    progress: Progress | None = None,
) -> HeatResult:
    """`validate --heat`: every candidate of the open heat, decided together (gitcampaign.heat_validation)."""
    check_pairs(pairs)
    heat_validation.check_sweeps(sweeps)
    with locked(repo_path, campaign_name) as campaign:
        manifest = campaign.require_baseline()
        trust.require(campaign)
        plan = ex.make_plan(campaign.repo, campaign.name, manifest.executor, gpus, executor)
        g.require_clean(campaign.repo, "validate the heat")
        return heat_validation.decide_heat(
            campaign, manifest, plan, full, pairs, probe, timeout_s, sweeps, progress or Progress.silent()
        )
