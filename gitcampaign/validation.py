"""VALIDATE's parts, shared by `validate` (one round) and `validate --heat` (gitcampaign.heat_validation):
a candidate checked and gated, its measurement sessions until the rules decide, its verdict document,
its notes, and the resumption of a decision a killed run noted.

Order of effects: notes first, then refs (each a compare-and-swap), so a run killed anywhere leaves
either nothing (it is simply run again) or a decision noted but not applied, which the next
`validate` finishes ("pending" in `status`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import envinfo, gates, steps, transfer, verdict
from gitcampaign import executor as ex
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, Round, apply_decision, check_one_commit, stale_decision
from gitcampaign.decision import PairedStats, PairSample, decide, paired_stats
from gitcampaign.errors import CampaignError
from gitcampaign.kept_sessions import KeptSessions
from gitcampaign.manifest import Manifest
from gitcampaign.measure import (
    HarnessJob,
    PairResult,
    run_dir,
    samples,
    worktrees,
)
from gitcampaign.progress import Progress
from gitcampaign.results import aggregate
from gitcampaign.shapes import Shape
from gitcampaign.verdict import Aggregate, Layout, ShapeFigures, VerdictDoc
from gitcampaign.vocabulary import ACCEPTED, Decision, Phase


@dataclass
class ValidateResult:
    round: int
    commit: str
    decision: str
    reasons: list[str]
    ratio: float
    ci: tuple[float, float]
    shapes: dict[str, ShapeFigures]
    notes: list[str] = field(default_factory=list)
    transfer: str | None = None
    resumed: bool = False
    device_seconds: float | None = None  # what measuring it cost (cost.DeviceClock); None: not measured

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "commit": self.commit,
            "decision": self.decision,
            "reasons": self.reasons,
            "ratio": _finite(self.ratio),
            "ci": [_finite(bound) for bound in self.ci],
            "shapes": {label: figures.to_mapping() for label, figures in self.shapes.items()},
            "notes": self.notes,
            "transfer": self.transfer,
            "resumed": self.resumed,
            "device_seconds": self.device_seconds,
        }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass
class Candidate:
    """A round about to be measured: its commit, the shapes it is measured on, and the verdict it
    gets so far (`result`, `document`: the integrity and static gates, already applied)."""

    number: int
    commit: str
    shapes: list[Shape]
    result: ValidateResult
    document: VerdictDoc

    @classmethod
    def of(
        cls, campaign: Campaign, manifest: Manifest, entry: Round, incumbent: str, full: bool
    ) -> Candidate:
        """Round `entry` checked for measuring against `incumbent` (one commit on it, inside the
        workspace: else an error, nothing recorded), then its integrity and static gates."""
        repo = campaign.repo
        commit = check_one_commit(
            campaign, entry.number, g.rev(repo, campaign.round_branch(entry.number)), incumbent
        )
        # The lineage already read the commit's `Hypothesis:` line where no decision or branch had one.
        hypothesis = entry.hypothesis or g.commit_message(repo, commit).partition("\n")[0]
        changed = g.changed_paths(repo, incumbent, commit)
        unmeasured = steps.outside_workspace(manifest, changed)
        if unmeasured:
            raise CampaignError(
                f"round {entry.number} changes {', '.join(unmeasured[:5])}, outside the workspace copy"
                f" ({', '.join(manifest.workspace)}): its measurement would not see the change",
                "keep the round's change inside the workspace (amend the commit), or start a campaign whose"
                " --workspace holds that path",
            )
        found = gates.gate_findings(repo, manifest, incumbent, commit, changed)
        noise = manifest.noise_floor
        document = VerdictDoc(
            campaign=campaign.name,
            round=entry.number,
            phase=Phase.VALIDATE,
            hypothesis=hypothesis,
            validation="full" if full else "quick",
            primary_metric=manifest.primary_metric,
            commit=commit,
            incumbent=incumbent,
            gates=found,
            noise_floor={"aggregate": noise.aggregate, "shapes": noise.shapes} if noise else None,
            started=verdict.now(),
            layout=verdict.VALIDATE_LAYOUT,
        )
        reasons = ([C.REASON_HARNESS_CHANGED] if found.protected_changed else []) + (
            [C.REASON_STATIC_CHECK] if found.static else []
        )
        result = ValidateResult(
            entry.number, commit, Decision.REJECT, reasons, math.nan, (math.nan, math.nan), {}
        )
        if found.protected_changed:
            # Say which, and why: a round that also adds tests is the usual case, and the tests
            # belong on the project's branch after the campaign, not in the round that they judge.
            result.notes.append(
                f"protected paths changed: {', '.join(found.protected_changed)}; the harness, the "
                "probe, the campaign folder and the test command's files are frozen at the baseline, "
                "so a round cannot change what judges it: commit the kernel alone, land new tests "
                "after the campaign"
            )
        result.notes += [f"lint: {finding}" for finding in found.static or []]
        shapes = manifest.shapes() if full else manifest.representative()
        return cls(entry.number, commit, shapes, result, document)


def job_of(manifest: Manifest, shapes: list[Shape], timeout_s: int | None) -> HarnessJob:
    return HarnessJob(
        manifest.quick_command,
        shapes,
        timeout_s or manifest.harness_timeout_s,
        manifest.csv_header,
        manifest.header_hint(),
    )


def close(document: VerdictDoc, result: ValidateResult, manifest: Manifest, repo: Repo, commit: str) -> None:
    """The verdict document's decision, figures and provenance, from `result`."""
    document.decision = Decision(result.decision)
    document.reasons = result.reasons
    document.notes = result.notes
    document.ratio = _finite(result.ratio)
    document.ci = [_finite(bound) for bound in result.ci]
    document.shapes = result.shapes
    document.transfer = result.transfer
    document.environment = envinfo.fingerprint()
    document.harness_sha256 = dict(manifest.protected_paths)
    document.csv_schema_sha256 = manifest.csv_header_sha256
    document.tree = g.tree_of(repo, commit)
    document.finished = verdict.now()
    document.device_seconds = result.device_seconds


def require_unmoved(campaign: Campaign, incumbent: str, commits: dict[int, str]) -> None:
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


def note(campaign: Campaign, commit: str, document: VerdictDoc, bench_raw: bytes | None, full: bool) -> None:
    """The candidate's CSV note (when it was measured), then its verdict: notes before refs move."""
    repo = campaign.repo
    if bench_raw is not None:
        notes_ref = C.NOTES_FULL if full else C.NOTES_BENCH
        document.csv_note = verdict.write_csv_note(repo, notes_ref, commit, bench_raw)
        g.fault_point("validate:csv-noted")
    verdict.append(repo, commit, document)
    g.fault_point("validate:verdict-noted")


def resume(campaign: Campaign, manifest: Manifest, pending: Round) -> ValidateResult:
    """Apply the decision a killed run noted on round `pending`, once git's records back it."""
    standing = pending.decision
    assert standing is not None and pending.commit is not None  # a pending round has a noted decision
    facts = verdict.commit_facts(campaign.repo, [pending.commit]).get(pending.commit)
    reason = verdict.inconsistency(pending.commit, standing, facts)
    if reason is not None:  # the lineage admits only consistent documents; checked again before refs move
        raise CampaignError(
            f"the decision noted on {pending.commit[:12]} is not backed by its measurement: {reason}",
            "`git campaign rollback` discards the round, or remove the note (`git notes --ref "
            f"{C.NOTES_VERDICT} remove {pending.commit[:12]}`) and validate again",
        )
    if standing.decision in ACCEPTED:  # what accept refuses, a noted accept (by hand, by a pull) does not get
        overfit = C.REASON_OVERFIT in (standing.overrides or [])
        try:
            gates.overridable(campaign.repo, manifest, pending.number, pending.commit, pending.docs, overfit)
        except gates.GateRefusal as refusal:
            return _refuse_noted_accept(campaign, pending, refusal)
    apply_decision(
        campaign,
        pending.number,
        pending.commit,
        str(standing.incumbent),
        str(standing.decision),
        "; ".join(standing.notes or []),
    )
    ci = standing.ci or [None, None]
    return ValidateResult(
        pending.number,
        pending.commit,
        str(standing.decision),
        list(standing.reasons or []),
        standing.ratio or math.nan,
        (ci[0] or math.nan, ci[1] or math.nan),
        dict(standing.shapes or {}),
        [*(standing.notes or []), "resumed: the decision was noted by an interrupted run"],
        standing.transfer,
        resumed=True,
    )


def _refuse_noted_accept(campaign: Campaign, pending: Round, refusal: gates.GateRefusal) -> ValidateResult:
    """A noted accept the gates do not allow is replaced by a REJECT, noted and applied: the round
    is pinned, nothing moves main, and the campaign goes on."""
    assert pending.commit is not None
    repo, commit = campaign.repo, pending.commit
    notes = [f"a noted accept of this commit was refused: {refusal.message}"]
    document = VerdictDoc(
        campaign=campaign.name,
        round=pending.number,
        phase=Phase.VALIDATE,
        hypothesis=pending.hypothesis,
        decision=Decision.REJECT,
        reasons=refusal.gates,
        notes=notes,
        commit=commit,
        incumbent=g.parent(repo, commit),
        tree=g.tree_of(repo, commit),
        layout=verdict.REFUSED_LAYOUT,
    )
    with g.repo_lock(repo):
        verdict.append(repo, commit, document)
        apply_decision(campaign, pending.number, commit, campaign.accepted_head(), Decision.REJECT)
    return ValidateResult(
        pending.number, commit, Decision.REJECT, refusal.gates, math.nan, (math.nan, math.nan), {}, notes
    )


def measure_round(
    campaign: Campaign,
    manifest: Manifest,
    commits: dict[str, str],
    job: HarnessJob,
    pairs: int | None,
    probe: bool,
    result: ValidateResult,
    document: VerdictDoc,
    progress: Progress,
    plan: ex.Plan | None = None,
) -> bytes | None:
    """Build, test, then measure sessions until the rules decide; fills `result`, returns the
    candidate CSV to note (None when the candidate failed its build or tests: nothing measured)."""
    scratch = run_dir(campaign.repo, campaign.name, f"round-{result.round}")
    with worktrees(campaign.repo, campaign.name, commits, steps.measured_paths(manifest)) as trees:
        with progress.phase("build and tests"):
            ready = steps.prepare_round(campaign.repo, manifest, trees, commits, scratch, job.timeout_s)
        document.build, document.tests = ready.build or None, ready.tests
        if ready.reason is not None:
            KeptSessions.of(
                campaign, result.round, commits, job.labels(), pairs or manifest.pairs, manifest
            ).drop()
            result.reasons, result.notes = [ready.reason], ready.notes
            return None
        return sessions(
            campaign, manifest, trees, commits, job, pairs, probe, result, document, progress, plan, scratch
        )


def sessions(
    campaign: Campaign,
    manifest: Manifest,
    trees: dict[str, Path],
    commits: dict[str, str],
    job: HarnessJob,
    pairs: int | None,
    probe: bool,
    result: ValidateResult,
    document: VerdictDoc,
    progress: Progress,
    plan: ex.Plan | None,
    scratch: Path,
) -> bytes:
    """Measurement sessions of the built and tested candidate against the incumbent (`trees`, by
    role) until the rules decide, then the training probe after an ACCEPT; fills `result`, returns
    the candidate CSV to note."""
    metric = manifest.primary_metric
    labels = job.labels()
    count = pairs or manifest.pairs
    kept = KeptSessions.of(campaign, result.round, commits, labels, count, manifest)
    all_samples, kept_when = kept.load()
    session = resumed = max((sample.session for sample in all_samples), default=0)
    if resumed:
        progress.note(
            f"measurement sessions 1-{resumed}: kept from an earlier validate of these commits ({kept_when})"
        )
    first: PairResult | None = None
    while True:
        session += 1
        with progress.phase(f"measurement session {session}", runs=2 * count):
            measured = ex.measure(plan, trees, job, count, scratch / f"s{session}", progress=progress)
        pair_results = measured.pairs
        if measured.devices:
            document.devices = measured.devices
        first = first or pair_results[0]
        failing = [row for row in pair_results[-1].candidate.rows if not row.passed]
        if failing:
            kept.drop()
            result.reasons = [C.REASON_CHECK_FAILED]
            result.notes = [f"{row.label}: {row.check}" for row in failing]
            result.shapes = {
                row.label: ShapeFigures(check=row.check) for row in pair_results[-1].candidate.rows
            }
            return pair_results[-1].candidate.raw
        all_samples += samples(pair_results, metric, labels, session)
        stats = paired_stats(all_samples, labels)
        noise = manifest.noise_floor
        assert noise is not None
        outcome = decide(stats, metric, noise.aggregate, noise.shapes, manifest.min_gain, session)
        if outcome.decision is not None:
            break
        kept.save(all_samples)  # an interrupted validate of the same commits goes on from here
        g.fault_point("validate:session-kept")
    kept.drop()
    result.decision, result.reasons, result.notes = outcome.decision, outcome.reasons, outcome.notes
    if resumed:
        result.notes.append(
            f"sessions 1-{resumed} were measured by an earlier, interrupted validate ({kept_when})"
        )
    result.ratio, result.ci = stats.ratio, stats.ci
    result.shapes = shape_figures(stats, all_samples, labels)
    document.sessions = session
    document.pairs = len(all_samples)
    document.aggregate = sides_aggregate(first, metric, labels)
    document.samples = sample_records(all_samples)
    on_cluster = plan is not None and plan.config.kind == ex.SLURM
    if probe and manifest.probe_command and result.decision in ACCEPTED and on_cluster:
        result.notes.append("training probe skipped: it runs on this machine, the shards ran on Slurm")
    elif probe and manifest.probe_command and result.decision in ACCEPTED:
        with progress.phase("training probe", runs=2 * transfer.PROBE_PAIRS):
            moved = transfer.run_probe(trees, manifest, scratch, job.shapes, progress)
        result.transfer, document.probe = moved.verdict, moved.record
        if moved.overfit:
            result.decision, result.reasons = Decision.REJECT, [C.REASON_OVERFIT]
            result.notes += moved.reasons
    return first.candidate.raw


def shape_figures(stats: PairedStats, found: list[PairSample], labels: list[str]) -> dict[str, ShapeFigures]:
    """The verdict's `shapes`: each shape's paired ratio and both sides' medians."""
    return {
        label: ShapeFigures(
            check=C.CHECK_PASS,
            ratio=round(stats.shape_ratios[label], 6),
            candidate=statistics.median(s.candidate[label] for s in found),
            incumbent=statistics.median(s.incumbent[label] for s in found),
        )
        for label in labels
    }


def sides_aggregate(first: PairResult, metric: str, labels: list[str]) -> Aggregate:
    """The verdict's `aggregate`: each side's geometric mean over the shapes, in the first pair."""
    return Aggregate(
        candidate=aggregate(first.candidate, metric, labels),
        incumbent=aggregate(first.incumbent, metric, labels) if first.incumbent else None,
        layout=Layout((C.CANDIDATE, C.INCUMBENT)),
    )


def sample_records(found: list[PairSample]) -> list[dict[str, Any]]:
    """The verdict's `samples`, from which a reader recomputes the ratio and its interval."""
    return [{"session": s.session, "incumbent": s.incumbent, "candidate": s.candidate} for s in found]
