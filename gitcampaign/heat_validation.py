"""VALIDATE a heat: the judge of `git campaign validate --heat`, which decides every candidate of the
open heat at once (docs/design.md, Heats); the verb, which notes the verdicts and moves the refs,
is `commands/validate.py`, a single round's judge `validation.py`.

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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import executor as ex
from gitcampaign import gates, heat, steps
from gitcampaign.campaign import Round
from gitcampaign.decision import PairedStats, PairSample, paired_stats, screen
from gitcampaign.errors import CampaignError
from gitcampaign.measure import PairResult, run_dir, samples, worktrees
from gitcampaign.refs import CampaignRef
from gitcampaign.validation import (
    Judge,
    Judgement,
    ValidateResult,
    reject,
    sample_records,
    shape_figures,
    sides_aggregate,
)
from gitcampaign.verdict import ShapeFigures
from gitcampaign.vocabulary import ACCEPTED, Decision, Status


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


@dataclass
class HeatJudgement:
    """The heat's candidates judged against `incumbent`: each one's verdict (none noted yet)."""

    incumbent: str
    judged: list[Judgement]  # in the order of the rounds given
    confirmed: int | None  # the contender measured afresh (None: the screen left none)
    screen: dict[int, float]  # the screened candidates' aggregate ratios
    device_seconds: float

    @property
    def accepted(self) -> int | None:
        return next(
            (one.number for one in self.judged if one.number == self.confirmed and one.decision in ACCEPTED),
            None,
        )


def judge_heat(judge: Judge, waiting: list[Round]) -> HeatJudgement:
    """Gates, screen and confirmation of the heat's `waiting` candidates against the accepted head;
    each verdict names the heat (its rounds, base, sweeps, screen, the round confirmed and the one
    accepted)."""
    campaign = judge.campaign
    empty = [entry.number for entry in waiting if entry.status == Status.EMPTY]
    if empty:
        raise CampaignError(
            f"{heat.listing(empty)} of the heat {'has' if len(empty) == 1 else 'have'} no commit yet; nothing"
            " was measured",
            "commit each round's one change on its branch, or take a round out of the heat"
            f" (`git campaign rollback {empty[0]}`), then `git campaign validate --heat`",
        )
    incumbent = campaign.accepted_head()
    with judge.progress.phase("gates"):
        candidates = [judge.gate(entry, incumbent) for entry in waiting]
    measured = _Measurement(judge, incumbent)
    measured.run([c for c in candidates if not c.verdict.reasons])
    found = HeatJudgement(
        incumbent,
        candidates,
        measured.confirmed,
        measured.screen,
        round(sum(measured.device_seconds.values()), 1),
    )
    record = {
        "rounds": [c.number for c in candidates],
        "base": incumbent,
        "sweeps": judge.options.sweeps,
        "screen": {  # keyed by the round's number as text: notes hold plain names as keys
            str(number): round(ratio, 6) for number, ratio in measured.screen.items() if math.isfinite(ratio)
        },
        "confirmed": measured.confirmed,
        "accepted": found.accepted,
    }
    for candidate in candidates:
        candidate.verdict.device_seconds = measured.device_seconds.get(candidate.number)
        judge.close(candidate)
        candidate.verdict.heat = record
    return found


@dataclass
class _Measurement:
    """The heat's measured part: builds and tests, the screen, the confirmation. Fills each
    candidate's verdict and CSV, and keeps the device time of each."""

    judge: Judge
    incumbent: str
    screen: dict[int, float] = field(default_factory=dict)
    confirmed: int | None = None
    device_seconds: dict[int, float] = field(default_factory=dict)

    def run(self, candidates: list[Judgement]) -> None:
        if not candidates:
            return
        judge = self.judge
        repo, manifest, timeout_s = judge.campaign.repo, judge.manifest, judge.job.timeout_s
        scratch = run_dir(repo, judge.campaign.name, "heat")
        commits = {C.INCUMBENT: self.incumbent, **{role(c.number): c.commit for c in candidates}}
        started = time.monotonic()
        own: dict[int, float] = {}
        with worktrees(repo, judge.campaign.name, commits, steps.measured_paths(manifest)) as trees:
            with judge.progress.phase("build and tests"):
                began = time.monotonic()
                places = {role(c.number): (trees[role(c.number)], c.commit) for c in candidates}
                prepared = steps.prepare_candidates(repo, manifest, places, scratch, timeout_s)
                # The tests ran at once: each candidate's share of the phase is in proportion to
                # its own steps' time, so that the shares add up to the phase.
                took = time.monotonic() - began
                total = sum(readiness.seconds for readiness in prepared.values())
                ready = []
                for candidate in candidates:
                    readiness = prepared[role(candidate.number)]
                    own[candidate.number] = (
                        took * readiness.seconds / total if total else took / len(candidates)
                    )
                    candidate.verdict.build = readiness.build or None
                    candidate.verdict.tests = readiness.tests
                    if readiness.failed is not None:
                        failed = readiness.failed
                        reject(candidate.verdict, gates.unready(failed.what, failed.failure_notes()))
                    else:
                        ready.append(candidate)
                if ready:
                    built = steps.prepare_incumbent(
                        repo, manifest, trees[C.INCUMBENT], self.incumbent, scratch, timeout_s
                    )
                    if built is not None:
                        for candidate in ready:
                            candidate.verdict.build = {
                                **(candidate.verdict.build or {}),
                                C.INCUMBENT: built.record(),
                            }
            contenders = self._screen(ready, trees, scratch) if len(ready) > 1 else ready
            shared = time.monotonic() - started - sum(own.values())
            confirming = 0.0
            if contenders:
                best, rest = contenders[0], contenders[1:]
                began = time.monotonic()
                self._confirm(best, trees, scratch)
                confirming = time.monotonic() - began
                for candidate in rest:
                    self._outrun(candidate, best)
        # What the candidates share (the worktrees, the incumbent's build, the screen) is split
        # evenly among those measured (or, none measured, among those built and tested).
        sharing = {c.number for c in ready or candidates}
        devices = len(judge.plan.devices)
        for candidate in candidates:
            seconds = own[candidate.number] + (shared / len(sharing) if candidate.number in sharing else 0.0)
            if candidate.number == self.confirmed:
                seconds += confirming
            self.device_seconds[candidate.number] = round(seconds * devices, 1)

    def _screen(self, ready: list[Judgement], trees: dict[str, Path], scratch: Path) -> list[Judgement]:
        """The screen's sweeps over `ready`; fills the screened candidates' verdicts (a REJECT where
        the single round's rules reject them on their screen pairs) and returns the contenders, best first."""
        judge = self.judge
        manifest, job, sweeps = judge.manifest, judge.job, judge.options.sweeps
        metric, labels = manifest.primary_metric, job.labels()
        screened_trees = {
            C.INCUMBENT: trees[C.INCUMBENT],
            **{role(c.number): trees[role(c.number)] for c in ready},
        }
        runs = sweeps * len(screened_trees)
        with judge.progress.phase("heat screen", runs=runs):
            measured = ex.measure(
                judge.plan, screened_trees, job, 0, scratch / "screen", progress=judge.progress, sweeps=sweeps
            )
        stats: dict[int, PairedStats] = {}
        by_number = {c.number: c for c in ready}
        for candidate in ready:
            own = [pair for pair in measured.pairs if pair.role == role(candidate.number)]
            candidate.csv = own[0].candidate.raw
            if measured.devices:
                candidate.verdict.devices = measured.devices
            failing = [(pair, rejection) for pair in own if (rejection := gates.correctness(pair.candidate))]
            if failing:  # every failing run of the screen says which shapes failed
                last, reason = failing[-1][0].candidate, failing[0][1].reason
                reject(
                    candidate.verdict,
                    gates.Rejection(reason, [note for _, one in failing for note in one.notes]),
                )
                candidate.verdict.shapes = {row.label: ShapeFigures(check=row.check) for row in last.rows}
                candidate.csv = last.raw
                continue
            found = samples(own, metric, labels, session=1)
            stats[candidate.number] = paired_stats(found, labels)
            self._figures(candidate, own, stats[candidate.number], found)
        noise = manifest.noise_floor
        assert noise is not None
        read = screen(stats, metric, noise.aggregate, noise.shapes, manifest.min_gain)
        self.screen = {number: one.ratio for number, one in stats.items()}
        for number, outcome in read.outcomes.items():
            if outcome.decision == Decision.REJECT:
                by_number[number].verdict.reasons = outcome.reasons
                by_number[number].verdict.notes = [*outcome.notes, _screened(sweeps)]
        return [by_number[number] for number in read.contenders]

    def _figures(
        self, candidate: Judgement, own: list[PairResult], stats: PairedStats, found: list[PairSample]
    ) -> None:
        """A screened candidate's own measured ratio, interval, shapes and samples (what it keeps
        whatever the heat decides)."""
        metric, labels = self.judge.manifest.primary_metric, self.judge.job.labels()
        doc = candidate.verdict
        doc.ratio, doc.ci = _finite(stats.ratio), [_finite(bound) for bound in stats.ci]
        doc.shapes = shape_figures(stats, found, labels)
        doc.sessions, doc.pairs = 1, len(found)
        doc.aggregate = sides_aggregate(own[0], metric, labels)
        doc.samples = sample_records(found)

    def _confirm(self, best: Judgement, trees: dict[str, Path], scratch: Path) -> None:
        """The best contender measured afresh against the incumbent, decided on that alone."""
        self.confirmed = best.number
        screened = best.verdict.ratio
        confirming = {C.INCUMBENT: trees[C.INCUMBENT], C.CANDIDATE: trees[role(best.number)]}
        commits = {C.INCUMBENT: self.incumbent, C.CANDIDATE: best.commit}
        best.csv = self.judge.sessions(best, confirming, commits, scratch / f"confirm-{best.number}")
        if screened is not None:
            assert best.verdict.notes is not None
            best.verdict.notes.append(
                f"the heat's best candidate (screen ratio {screened:.4f}), decided on a fresh measurement"
                " against the incumbent"
            )

    def _outrun(self, candidate: Judgement, best: Judgement) -> None:
        pin = CampaignRef.rejected(self.judge.campaign.name, candidate.number)
        ratio = candidate.verdict.ratio
        candidate.verdict.reasons = [C.REASON_OUTRUN]
        candidate.verdict.notes = [
            f"outrun: round {best.number} measured {self.screen[best.number]:.4f} in the heat's screen against"
            f" this round's {math.nan if ratio is None else ratio:.4f}; only the best candidate is confirmed"
            " (afresh), so that picking the best of several noisy candidates does not raise the false-accept rate",
            f"re-open it on the accepted head: git campaign round --from {pin} --heat",
        ]


def _screened(sweeps: int) -> str:
    return (
        f"decided on the heat's screen: {sweeps} sweep{'s' * (sweeps != 1)}, each of its runs paired with the"
        " incumbent's run of the same sweep"
    )
