"""VALIDATE a heat: `git campaign validate --heat` decides every candidate of the open heat in one
command (docs/design.md, Heats); the verb is `commands/validate.py`, its parts `validation.py`.

1. Every gate on every candidate: one commit on the accepted head and inside the workspace (else an
   error, and nothing is recorded), the protected paths and the lint, then each candidate's build
   and tests in its own worktree. A candidate a gate rejects is never measured.
2. The screen: the incumbent and every candidate left, in one session of sweeps (`heat_sweeps`:
   N + 1 processes a sweep, each candidate paired with its sweep's incumbent run; with `--gpus`,
   each GPU runs the sweeps on its shard of the shapes with an incumbent of its own). Each
   candidate is read by the single round's rules on its own screen pairs (`decision.screen`): one
   they reject keeps that REJECT.
3. The confirmation: the best of the rest by the primary metric is measured afresh against the
   incumbent exactly as a single round is (sessions until the rules decide, then the training
   probe), and decided on that fresh measurement alone. The other contenders are REJECT `outrun`,
   each with its own screen ratio.
4. Notes, then refs: every CSV and verdict is noted, the losers' first and the confirmed one's
   last; then the losers are pinned and reset, and the winner fast-forwards main. A run killed
   before its last verdict is noted leaves the candidates it did not note open in the heat: the
   next `validate --heat` applies what was noted and measures the rest again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import executor as ex
from gitcampaign import git as g
from gitcampaign import heat, steps
from gitcampaign.campaign import Campaign, Round, apply_decision
from gitcampaign.decision import PairedStats, PairSample, paired_stats, screen
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import Manifest
from gitcampaign.measure import HarnessJob, PairResult, run_dir, samples, worktrees
from gitcampaign.progress import Progress
from gitcampaign.refs import CampaignRef
from gitcampaign.validation import (
    Candidate,
    ValidateResult,
    close,
    job_of,
    note,
    require_unmoved,
    resume,
    sample_records,
    sessions,
    shape_figures,
    sides_aggregate,
)
from gitcampaign.verdict import ShapeFigures
from gitcampaign.vocabulary import ACCEPTED, Decision, Status

MAX_SWEEPS = 20


@dataclass
class HeatResult:
    campaign: str
    rounds: list[ValidateResult]  # every candidate decided by this run (or resumed), by round
    accepted: int | None  # the round that moved main
    confirmed: int | None  # the contender measured afresh (None: the screen left none)
    screen: dict[int, float] = field(default_factory=dict)  # screened candidates' aggregate ratios
    device_seconds: float = 0.0

    @property
    def decision(self) -> str:
        """ACCEPT when a candidate was accepted (what `--exit-code` and the MCP progress read)."""
        return Decision.ACCEPT if self.accepted is not None else Decision.REJECT

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "decision": self.decision,
            "accepted": self.accepted,
            "confirmed": self.confirmed,
            "screen": {str(number): _finite(ratio) for number, ratio in self.screen.items()},
            "device_seconds": self.device_seconds,
            "rounds": [entry.to_json() for entry in self.rounds],
        }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def role(number: int) -> str:
    """A candidate's role (and worktree folder) in the heat's measurement."""
    return f"round-{number}"


def check_sweeps(sweeps: int) -> None:
    if not 1 <= sweeps <= MAX_SWEEPS:
        raise CampaignError(
            f"--sweeps {sweeps} is outside [1, {MAX_SWEEPS}]",
            "one sweep is the default; more make the screen's ranking surer, at N + 1 runs a sweep",
        )


def decide_heat(
    campaign: Campaign,
    manifest: Manifest,
    plan: ex.Plan,
    full: bool,
    pairs: int | None,
    probe: bool,
    timeout_s: int | None,
    sweeps: int,
    progress: Progress,
) -> HeatResult:
    """The open heat of `campaign` (whose lock the caller holds) decided: first what a killed run
    noted, then every candidate still waiting."""
    _, rounds = campaign.lineage()
    heat.tidy(campaign, rounds)
    members = heat.members(campaign, rounds)
    if not members:
        raise CampaignError(
            f"campaign {campaign.name} has no open heat",
            'open one: `git campaign round --heat -m "HYPOTHESIS"` for each candidate, commit each, then'
            " `git campaign validate --heat` (a single round: `git campaign validate`)",
        )
    with heat.candidate_locks(campaign.repo, campaign.name, [entry.number for entry in members]):
        resumed = _resume(campaign, manifest, [entry for entry in members if entry.status == Status.PENDING])
        waiting = [entry for entry in members if entry.status != Status.PENDING]
        result = HeatResult(campaign.name, resumed, _accepted(resumed), None)
        if waiting:
            _decide(
                campaign, manifest, waiting, result, full, pairs, probe, timeout_s, plan, sweeps, progress
            )
        result.rounds.sort(key=lambda entry: entry.round)
        return result


def _resume(campaign: Campaign, manifest: Manifest, pending: list[Round]) -> list[ValidateResult]:
    """Apply what a killed `validate --heat` noted: the rejections first, the acceptance last (it
    moves main, which the rejections do not need)."""
    pending.sort(key=lambda entry: entry.decision is not None and entry.decision.decision in ACCEPTED)
    done = []
    for entry in pending:
        done.append(resume(campaign, manifest, entry))
        heat.leave(campaign, entry.number)
    return done


def _accepted(results: list[ValidateResult]) -> int | None:
    return next((entry.round for entry in results if entry.decision in ACCEPTED), None)


def _decide(
    campaign: Campaign,
    manifest: Manifest,
    waiting: list[Round],
    result: HeatResult,
    full: bool,
    pairs: int | None,
    probe: bool,
    timeout_s: int | None,
    plan: ex.Plan,
    sweeps: int,
    progress: Progress,
) -> None:
    """Gates, screen and confirmation of the waiting candidates, then their notes and refs."""
    repo = campaign.repo
    empty = [entry.number for entry in waiting if entry.status == Status.EMPTY]
    if empty:
        raise CampaignError(
            f"{heat.listing(empty)} of the heat {'has' if len(empty) == 1 else 'have'} no commit yet; nothing"
            " was measured",
            "commit each round's one change on its branch, or take a round out of the heat"
            f" (`git campaign rollback {empty[0]}`), then `git campaign validate --heat`",
        )
    incumbent = campaign.accepted_head()
    with progress.phase("gates"):
        candidates = [Candidate.of(campaign, manifest, entry, incumbent, full) for entry in waiting]
    job = job_of(manifest, candidates[0].shapes, timeout_s)
    measured = _Measurement(campaign, manifest, incumbent, job, plan, progress)
    measured.run([c for c in candidates if not c.result.reasons], pairs, probe, sweeps)
    result.confirmed, result.screen = measured.confirmed, measured.screen
    accepted = next(
        (c.number for c in candidates if c.number == measured.confirmed and c.result.decision in ACCEPTED),
        None,
    )
    record = {
        "rounds": [c.number for c in candidates],
        "base": incumbent,
        "sweeps": sweeps,
        "screen": {  # keyed by the round's number as text: notes hold plain names as keys
            str(number): round(ratio, 6) for number, ratio in measured.screen.items() if math.isfinite(ratio)
        },
        "confirmed": measured.confirmed,
        "accepted": accepted,
    }
    for candidate in candidates:
        candidate.result.device_seconds = measured.device_seconds.get(candidate.number)
        close(candidate.document, candidate.result, manifest, repo, candidate.commit)
        candidate.document.heat = record
    result.device_seconds = round(sum(measured.device_seconds.values()), 1)
    # The confirmed candidate last: a run killed before its verdict is noted leaves it open in the
    # heat, measured again by the next run; noted, it finds every loser noted before it.
    order = sorted(candidates, key=lambda c: (c.number == measured.confirmed, c.number))
    g.fault_point("heat:measured")
    with g.repo_lock(repo):
        require_unmoved(campaign, incumbent, {c.number: c.commit for c in candidates})
        for candidate in order:
            note(campaign, candidate.commit, candidate.document, measured.csv.get(candidate.number), full)
        g.fault_point("heat:noted")
        for candidate in order:
            apply_decision(campaign, candidate.number, candidate.commit, incumbent, candidate.result.decision)
            heat.leave(campaign, candidate.number)
            g.fault_point("heat:applied")
    result.rounds += [candidate.result for candidate in candidates]
    result.accepted = accepted


@dataclass
class _Measurement:
    """The heat's measured part: builds and tests, the screen, the confirmation. Fills each
    candidate's result and document, and keeps the CSV to note and the device time of each."""

    campaign: Campaign
    manifest: Manifest
    incumbent: str
    job: HarnessJob
    plan: ex.Plan
    progress: Progress
    csv: dict[int, bytes] = field(default_factory=dict)
    screen: dict[int, float] = field(default_factory=dict)
    confirmed: int | None = None
    device_seconds: dict[int, float] = field(default_factory=dict)

    def run(self, candidates: list[Candidate], pairs: int | None, probe: bool, sweeps: int) -> None:
        if not candidates:
            return
        repo, manifest = self.campaign.repo, self.manifest
        scratch = run_dir(repo, self.campaign.name, "heat")
        commits = {C.INCUMBENT: self.incumbent, **{role(c.number): c.commit for c in candidates}}
        started = time.monotonic()
        own: dict[int, float] = {}
        with worktrees(repo, self.campaign.name, commits, steps.measured_paths(manifest)) as trees:
            with self.progress.phase("build and tests"):
                ready = []
                for candidate in candidates:
                    began = time.monotonic()
                    readiness = steps.prepare_candidate(
                        repo,
                        manifest,
                        trees[role(candidate.number)],
                        candidate.commit,
                        scratch,
                        self.job.timeout_s,
                        role(candidate.number),
                    )
                    own[candidate.number] = time.monotonic() - began
                    candidate.document.build = readiness.build or None
                    candidate.document.tests = readiness.tests
                    if readiness.reason is not None:
                        candidate.result.reasons, candidate.result.notes = [readiness.reason], readiness.notes
                    else:
                        ready.append(candidate)
                if ready:
                    built = steps.prepare_incumbent(
                        repo, manifest, trees[C.INCUMBENT], self.incumbent, scratch, self.job.timeout_s
                    )
                    if built is not None:
                        for candidate in ready:
                            candidate.document.build = {
                                **(candidate.document.build or {}),
                                C.INCUMBENT: built.record(),
                            }
            contenders = self._screen(ready, trees, sweeps, scratch) if len(ready) > 1 else ready
            shared = time.monotonic() - started - sum(own.values())
            confirming = 0.0
            if contenders:
                best, rest = contenders[0], contenders[1:]
                began = time.monotonic()
                self._confirm(best, trees, pairs, probe, scratch)
                confirming = time.monotonic() - began
                for candidate in rest:
                    self._outrun(candidate, best)
        # What the candidates share (the worktrees, the incumbent's build, the screen) is split
        # evenly among those measured (or, none measured, among those built and tested).
        sharing = {c.number for c in ready or candidates}
        devices = len(self.plan.devices)
        for candidate in candidates:
            seconds = own[candidate.number] + (shared / len(sharing) if candidate.number in sharing else 0.0)
            if candidate.number == self.confirmed:
                seconds += confirming
            self.device_seconds[candidate.number] = round(seconds * devices, 1)

    def _screen(
        self, ready: list[Candidate], trees: dict[str, Path], sweeps: int, scratch: Path
    ) -> list[Candidate]:
        """The screen's sweeps over `ready`; fills the screened candidates' results (a REJECT where
        the single round's rules reject them on their screen pairs) and returns the contenders, best first."""
        metric, labels = self.manifest.primary_metric, self.job.labels()
        screened_trees = {
            C.INCUMBENT: trees[C.INCUMBENT],
            **{role(c.number): trees[role(c.number)] for c in ready},
        }
        runs = sweeps * len(screened_trees)
        with self.progress.phase("heat screen", runs=runs):
            measured = ex.measure(
                self.plan,
                screened_trees,
                self.job,
                0,
                scratch / "screen",
                progress=self.progress,
                sweeps=sweeps,
            )
        stats: dict[int, PairedStats] = {}
        by_number = {c.number: c for c in ready}
        for candidate in ready:
            own = [pair for pair in measured.pairs if pair.role == role(candidate.number)]
            self.csv[candidate.number] = own[0].candidate.raw
            if measured.devices:
                candidate.document.devices = measured.devices
            failing = [(pair, row) for pair in own for row in pair.candidate.rows if not row.passed]
            if failing:
                candidate.result.reasons = [C.REASON_CHECK_FAILED]
                candidate.result.notes = [f"{row.label}: {row.check}" for _, row in failing]
                candidate.result.shapes = {
                    row.label: ShapeFigures(check=row.check) for row in failing[-1][0].candidate.rows
                }
                self.csv[candidate.number] = failing[-1][0].candidate.raw
                continue
            found = samples(own, metric, labels, session=1)
            stats[candidate.number] = paired_stats(found, labels)
            self._figures(candidate, own, stats[candidate.number], found)
        noise = self.manifest.noise_floor
        assert noise is not None
        read = screen(stats, metric, noise.aggregate, noise.shapes, self.manifest.min_gain)
        self.screen = {number: one.ratio for number, one in stats.items()}
        for number, outcome in read.outcomes.items():
            if outcome.decision == Decision.REJECT:
                by_number[number].result.reasons = outcome.reasons
                by_number[number].result.notes = [*outcome.notes, _screened(sweeps)]
        return [by_number[number] for number in read.contenders]

    def _figures(
        self, candidate: Candidate, own: list[PairResult], stats: PairedStats, found: list[PairSample]
    ) -> None:
        """A screened candidate's own measured ratio, interval, shapes and samples (what it keeps
        whatever the heat decides)."""
        metric, labels = self.manifest.primary_metric, self.job.labels()
        candidate.result.ratio, candidate.result.ci = stats.ratio, stats.ci
        candidate.result.shapes = shape_figures(stats, found, labels)
        candidate.document.sessions = 1
        candidate.document.pairs = len(found)
        candidate.document.aggregate = sides_aggregate(own[0], metric, labels)
        candidate.document.samples = sample_records(found)

    def _confirm(
        self, best: Candidate, trees: dict[str, Path], pairs: int | None, probe: bool, scratch: Path
    ) -> None:
        """The best contender measured afresh against the incumbent, decided on that alone."""
        self.confirmed = best.number
        screened = best.result.ratio
        confirming = {C.INCUMBENT: trees[C.INCUMBENT], C.CANDIDATE: trees[role(best.number)]}
        commits = {C.INCUMBENT: self.incumbent, C.CANDIDATE: best.commit}
        self.csv[best.number] = sessions(
            self.campaign,
            self.manifest,
            confirming,
            commits,
            self.job,
            pairs,
            probe,
            best.result,
            best.document,
            self.progress,
            self.plan,
            scratch / f"confirm-{best.number}",
        )
        if math.isfinite(screened):
            best.result.notes.append(
                f"the heat's best candidate (screen ratio {screened:.4f}), decided on a fresh measurement"
                " against the incumbent"
            )

    def _outrun(self, candidate: Candidate, best: Candidate) -> None:
        pin = CampaignRef.rejected(self.campaign.name, candidate.number)
        candidate.result.reasons = [C.REASON_OUTRUN]
        candidate.result.notes = [
            f"outrun: round {best.number} measured {self.screen[best.number]:.4f} in the heat's screen against"
            f" this round's {candidate.result.ratio:.4f}; only the best candidate is confirmed (afresh), so that"
            " picking the best of several noisy candidates does not raise the false-accept rate",
            f"re-open it on the accepted head: git campaign round --from {pin} --heat",
        ]


def _screened(sweeps: int) -> str:
    return (
        f"decided on the heat's screen: {sweeps} sweep{'s' * (sweeps != 1)}, each of its runs paired with the"
        " incumbent's run of the same sweep"
    )
