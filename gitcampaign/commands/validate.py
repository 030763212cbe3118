"""VALIDATE: a round judged (gitcampaign.validation: gates, an interleaved A/B measurement, a
mechanical decision), then its notes, then its ref moves; `--heat` judges the open heat's
candidates together (gitcampaign.heat_validation). This module holds the lock and owns the effects.

Order of effects: notes first, then refs (each a compare-and-swap), so a run killed anywhere leaves
either nothing (it is simply run again) or a decision noted but not applied, which the next
`validate` finishes ("pending" in `status`).
"""

from __future__ import annotations

from pathlib import Path

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import heat, verdict
from gitcampaign.campaign import Campaign, Round, apply_decision, locked, stale_decision
from gitcampaign.errors import CampaignError
from gitcampaign.heat_validation import HeatJudgement, HeatResult, judge_heat
from gitcampaign.progress import Progress
from gitcampaign.validation import Judge, Judgement, Options, ValidateResult
from gitcampaign.vocabulary import ACCEPTED, Decision, Status


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
    options = Options(full, pairs, probe, timeout_s, gpus, executor)
    options.check()
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        judge = Judge.of(campaign, options, progress or Progress.silent())
        incumbent = campaign.accepted_head()
        current = campaign.round_to_validate()
        g.require_clean(repo, "validate")  # after the checks that need no clean tree, for their errors
        if current.status == Status.PENDING and current.decision is not None:
            return _resume(campaign, judge, current)
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
            judged = judge.round(current, incumbent)
            g.fault_point("validate:measured")
            with g.repo_lock(repo):
                _require_unmoved(campaign, incumbent, {judged.number: judged.commit})
                _note(campaign, judged, full)
                apply_decision(campaign, judged.number, judged.commit, incumbent, judged.decision)
            return judged.result()


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
    """`validate --heat`: every candidate of the open heat, decided together; first what a killed
    run noted, then every candidate still waiting."""
    options = Options(full, pairs, probe, timeout_s, gpus, executor, sweeps)
    options.check()
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        judge = Judge.of(campaign, options, progress or Progress.silent())
        g.require_clean(repo, "validate the heat")
        _, rounds = campaign.lineage()
        heat.tidy(campaign, rounds)
        members = heat.members(campaign, rounds)
        if not members:
            raise CampaignError(
                f"campaign {campaign.name} has no open heat",
                'open one: `git campaign round --heat -m "HYPOTHESIS"` for each candidate, commit each, then'
                " `git campaign validate --heat` (a single round: `git campaign validate`)",
            )
        with heat.candidate_locks(repo, campaign.name, [entry.number for entry in members]):
            # A killed run's rejections first, its acceptance last: it moves main, which they do not need.
            pending = [entry for entry in members if entry.status == Status.PENDING]
            pending.sort(key=lambda entry: entry.decision is not None and entry.decision.decision in ACCEPTED)
            resumed = []
            for entry in pending:
                resumed.append(_resume(campaign, judge, entry))
                heat.leave(campaign, entry.number)
            accepted = next((entry.round for entry in resumed if entry.decision in ACCEPTED), None)
            result = HeatResult(campaign.name, resumed, accepted, None)
            waiting = [entry for entry in members if entry.status != Status.PENDING]
            if waiting:
                found = judge_heat(judge, waiting)
                g.fault_point("heat:measured")
                _apply_heat(campaign, found, full)
                result.rounds += [one.result() for one in found.judged]
                result.accepted, result.confirmed = found.accepted, found.confirmed
                result.screen, result.device_seconds = found.screen, found.device_seconds
            result.rounds.sort(key=lambda entry: entry.round)
            return result


def _apply_heat(campaign: Campaign, found: HeatJudgement, full: bool) -> None:
    """Every verdict of the heat noted, then the losers pinned and reset, then the winner on main.
    The confirmed candidate last: a run killed before its verdict is noted leaves it open in the
    heat, measured again by the next run; noted, it finds every loser noted before it."""
    order = sorted(found.judged, key=lambda one: (one.number == found.confirmed, one.number))
    with g.repo_lock(campaign.repo):
        _require_unmoved(campaign, found.incumbent, {one.number: one.commit for one in order})
        for one in order:
            _note(campaign, one, full)
        g.fault_point("heat:noted")
        for one in order:
            apply_decision(campaign, one.number, one.commit, found.incumbent, one.decision)
            heat.leave(campaign, one.number)
            g.fault_point("heat:applied")


def _require_unmoved(campaign: Campaign, incumbent: str, commits: dict[int, str]) -> None:
    """Refs may have moved during the measurement (another worktree, a hand commit on main): a
    decision is noted only while what it was measured against still stands."""
    main = g.rev(campaign.repo, campaign.main_ref)
    if main != incumbent:
        raise stale_decision(campaign, min(commits), incumbent, main)
    for number, commit in commits.items():
        if g.rev(campaign.repo, campaign.round_branch(number)) != commit:
            raise CampaignError(
                f"{campaign.round_branch(number)} moved while it was measured; nothing was recorded",
                "`git campaign validate` measures its new commit",
            )


def _note(campaign: Campaign, judged: Judgement, full: bool) -> None:
    """The candidate's CSV note (when it was measured), then its verdict: notes before refs move."""
    repo = campaign.repo
    if judged.csv is not None:
        notes_ref = C.NOTES_FULL if full else C.NOTES_BENCH
        judged.verdict.csv_note = verdict.write_csv_note(repo, notes_ref, judged.commit, judged.csv)
        g.fault_point("validate:csv-noted")
    verdict.append(repo, judged.commit, judged.verdict)
    g.fault_point("validate:verdict-noted")


def _resume(campaign: Campaign, judge: Judge, pending: Round) -> ValidateResult:
    """Apply the decision a killed run noted on round `pending`, once the judge allows it; a noted
    accept the gates do not allow is replaced by a REJECT, noted and applied: the round is pinned,
    nothing moves main, and the campaign goes on."""
    standing, commit = pending.decision, pending.commit
    assert standing is not None and standing.decision is not None and commit is not None
    refusal = judge.recheck(pending)
    if refusal is not None:
        with g.repo_lock(campaign.repo):
            verdict.append(campaign.repo, commit, refusal)
            apply_decision(campaign, pending.number, commit, campaign.accepted_head(), Decision.REJECT)
        return ValidateResult.of(refusal)
    why = "; ".join(standing.notes or [])
    apply_decision(campaign, pending.number, commit, str(standing.incumbent), standing.decision, why)
    return ValidateResult.of(standing, resumed=True)
