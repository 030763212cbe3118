"""VALIDATE's judge: a round gated, measured and decided by the rules (gitcampaign.rules: the gates
of gitcampaign.gates, the speed rules of gitcampaign.decision, the transfer rule of
gitcampaign.transfer), its verdict returned as a typed record (`Judgement`). It writes no note and
moves no ref: the command (gitcampaign.commands.validate) notes the verdict and applies it under
the lock. `validate --heat` judges its candidates with gitcampaign.heat_validation, which builds on
this module's parts.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import envinfo, gates, steps, transfer, trust, verdict
from gitcampaign import executor as ex
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, Round, check_one_commit
from gitcampaign.cost import DeviceClock
from gitcampaign.decision import PairedStats, PairSample, decide, paired_stats
from gitcampaign.errors import CampaignError
from gitcampaign.harness.contract import CLOCK_LOG_SUFFIX
from gitcampaign.kept_sessions import KeptSessions
from gitcampaign.manifest import Manifest, check_pairs
from gitcampaign.measure import HarnessJob, PairResult, run_dir, samples, worktrees
from gitcampaign.progress import Progress
from gitcampaign.results import aggregate
from gitcampaign.verdict import Aggregate, Layout, ShapeFigures, VerdictDoc
from gitcampaign.vocabulary import ACCEPTED, Decision, Phase

MAX_SWEEPS = 20
RESUMED = "resumed: the decision was noted by an interrupted run"


@dataclass
class ValidateResult:
    """What `validate` tells its caller about one round: its verdict's decision and figures."""

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

    @classmethod
    def of(cls, doc: VerdictDoc, resumed: bool = False) -> ValidateResult:
        """The result a verdict says; a resumed one (`RESUMED` noted) cost this run no device time."""
        assert doc.round is not None and doc.commit is not None and doc.decision is not None
        low, high = doc.ci or (None, None)
        return cls(
            doc.round,
            doc.commit,
            doc.decision,
            list(doc.reasons or []),
            _nan(doc.ratio),
            (_nan(low), _nan(high)),
            dict(doc.shapes or {}),
            [*(doc.notes or []), *([RESUMED] if resumed else [])],
            doc.transfer,
            resumed,
            None if resumed else doc.device_seconds,
        )

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


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


@dataclass
class Options:
    """How `validate` judges: the shapes (`full`: every target shape), pairs a session, the
    training probe, the harness's timeout, where to measure, and a heat's sweeps."""

    full: bool = False
    pairs: int | None = None
    probe: bool = True
    timeout_s: int | None = None
    gpus: str | None = None
    executor: str | None = None
    sweeps: int = 1

    def check(self) -> None:
        check_pairs(self.pairs)
        if not 1 <= self.sweeps <= MAX_SWEEPS:
            raise CampaignError(
                f"--sweeps {self.sweeps} is outside [1, {MAX_SWEEPS}]",
                "one sweep is the default; more make the screen's ranking surer, at N + 1 runs a sweep",
            )


@dataclass
class Judgement:
    """A judged round: its verdict, decided and not yet noted, and the CSV it was decided from
    (None: nothing was measured)."""

    number: int
    commit: str
    verdict: VerdictDoc
    csv: bytes | None = None

    @property
    def decision(self) -> Decision:
        assert self.verdict.decision is not None  # a judged verdict is decided
        return self.verdict.decision

    def result(self) -> ValidateResult:
        return ValidateResult.of(self.verdict)


@dataclass
class Judge:
    """Judges one campaign's rounds against its accepted head: gates first, then measurement
    sessions until the speed rules decide, then the training probe after an ACCEPT."""

    campaign: Campaign
    manifest: Manifest
    options: Options
    plan: ex.Plan
    progress: Progress

    @classmethod
    def of(cls, campaign: Campaign, options: Options, progress: Progress) -> Judge:
        """The judge of `campaign` (whose lock the caller holds): its baseline, its commands approved
        by this clone (they run), and the devices to measure on."""
        manifest = campaign.require_baseline()
        trust.require(campaign)
        plan = ex.make_plan(campaign.repo, campaign.name, manifest.executor, options.gpus, options.executor)
        return cls(campaign, manifest, options, plan, progress)

    @property
    def job(self) -> HarnessJob:
        """The harness run on the shapes judged (`full`: every target shape)."""
        manifest = self.manifest
        return HarnessJob(
            manifest.quick_command,
            manifest.shapes() if self.options.full else manifest.representative(),
            self.options.timeout_s or manifest.harness_timeout_s,
            manifest.csv_header,
            manifest.header_hint(),
        )

    def round(self, entry: Round, incumbent: str) -> Judgement:
        """Round `entry` judged against `incumbent`: gated, then (unless a gate rejected it) built,
        tested and measured until the rules decide."""
        with self.progress.phase("gates"):
            judged = self.gate(entry, incumbent)
        if not judged.verdict.reasons:  # no gate rejected it
            clock = DeviceClock(len(self.plan.devices))
            self.measure(judged, {C.INCUMBENT: incumbent, C.CANDIDATE: judged.commit})
            judged.verdict.device_seconds = clock.seconds()
        self.close(judged)
        return judged

    def gate(self, entry: Round, incumbent: str) -> Judgement:
        """Round `entry` checked for measuring against `incumbent` (one commit on it, inside the
        workspace: else an error, nothing recorded), then its integrity and static gates: its
        verdict so far, a REJECT until the measurement decides."""
        campaign, manifest, repo = self.campaign, self.manifest, self.campaign.repo
        self.require_floor_gpu()
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
        notes = []
        if found.protected_changed:
            # Say which, and why: a round that also adds tests is the usual case, and the tests
            # belong on the project's branch after the campaign, not in the round that they judge.
            notes.append(
                f"protected paths changed: {', '.join(found.protected_changed)}; the harness, the "
                "probe, the campaign folder and the test command's files are frozen at the baseline, "
                "so a round cannot change what judges it: commit the kernel alone, land new tests "
                "after the campaign"
            )
        notes += [f"lint: {finding}" for finding in found.static or []]
        document = VerdictDoc(
            campaign=campaign.name,
            round=entry.number,
            phase=Phase.VALIDATE,
            hypothesis=hypothesis,
            validation="full" if self.options.full else "quick",
            primary_metric=manifest.primary_metric,
            commit=commit,
            incumbent=incumbent,
            gates=found,
            noise_floor={"aggregate": noise.aggregate, "shapes": noise.shapes} if noise else None,
            started=verdict.now(),
            decision=Decision.REJECT,
            reasons=gates.integrity_reasons(found),
            notes=notes,
            ci=[None, None],
            shapes={},
            layout=verdict.VALIDATE_LAYOUT,
        )
        return Judgement(entry.number, commit, document)

    @functools.cached_property
    def floor_gpu(self) -> str:
        """The GPU the baseline measured the noise floor on ("" where its verdict names none): read
        once, not for each candidate of a heat."""
        baselines, _ = self.campaign.lineage()
        return baselines[0].gpu if baselines else ""

    def require_floor_gpu(self) -> None:
        """An error where this machine's GPU is not the one the baseline measured the noise floor
        on: a gain is held against that floor, and another GPU has its own noise (and its own
        speeds: the figures of the lineage would mix two machines). Shards on Slurm run elsewhere,
        so there the check is the user's."""
        if self.plan.config.kind == ex.SLURM:
            return
        floor_gpu = self.floor_gpu
        here = str(envinfo.fingerprint().get("gpu", ""))
        if floor_gpu and here and floor_gpu != here:
            name = self.campaign.name
            raise CampaignError(
                f"campaign {name}'s noise floor was measured on {floor_gpu} (its baseline) and this"
                f" machine has {here}: a gain measured here would be held against another GPU's noise;"
                " nothing was measured",
                f"validate on a machine with {floor_gpu}, or start a campaign of this GPU from the"
                f" accepted head (`git checkout {self.campaign.main_branch}`, then `git campaign init`"
                " and `git campaign baseline`)",
            )

    def measure(self, judged: Judgement, commits: dict[str, str]) -> None:
        """Build, test, then measure sessions until the rules decide (the candidate's build or tests
        failing rejects it unmeasured); fills the verdict and the CSV to note."""
        campaign, manifest = self.campaign, self.manifest
        scratch = run_dir(campaign.repo, campaign.name, f"round-{judged.number}")
        with worktrees(campaign.repo, campaign.name, commits, steps.measured_paths(manifest)) as trees:
            with self.progress.phase("build and tests"):
                ready = steps.prepare_round(
                    campaign.repo, manifest, trees, commits, scratch, self.job.timeout_s
                )
            judged.verdict.build, judged.verdict.tests = ready.build or None, ready.tests
            if ready.failed is not None:
                self.kept(judged.number, commits).drop()
                reject(judged.verdict, gates.unready(ready.failed.what, ready.failed.failure_notes()))
                return
            judged.csv = self.sessions(judged, trees, commits, scratch)

    def kept(self, number: int, commits: dict[str, str]) -> KeptSessions:
        """The measurement sessions an interrupted validate of these commits kept."""
        count = self.options.pairs or self.manifest.pairs
        return KeptSessions.of(self.campaign, number, commits, self.job.labels(), count, self.manifest)

    def sessions(
        self, judged: Judgement, trees: dict[str, Path], commits: dict[str, str], scratch: Path
    ) -> bytes:
        """Measurement sessions of the built and tested candidate against the incumbent (`trees`,
        by role) until the rules decide, then the training probe after an ACCEPT; fills the verdict
        and returns the candidate CSV to note."""
        metric, job, doc = self.manifest.primary_metric, self.job, judged.verdict
        labels = job.labels()
        count = self.options.pairs or self.manifest.pairs
        kept = self.kept(judged.number, commits)
        all_samples, kept_when = kept.load()
        session = resumed = max((sample.session for sample in all_samples), default=0)
        if resumed:
            self.progress.note(
                f"measurement sessions 1-{resumed}: kept from an earlier validate of these commits ({kept_when})"
            )
        first: PairResult | None = None
        while True:
            session += 1
            with self.progress.phase(f"measurement session {session}", runs=2 * count):
                measured = ex.measure(
                    self.plan, trees, job, count, scratch / f"s{session}", progress=self.progress
                )
            pair_results = measured.pairs
            if measured.devices:
                doc.devices = measured.devices
            first = first or pair_results[0]
            last = pair_results[-1].candidate
            failing = gates.correctness(last)
            if failing is not None:
                kept.drop()
                reject(doc, failing)
                doc.shapes = {row.label: ShapeFigures(check=row.check) for row in last.rows}
                return last.raw
            all_samples += samples(pair_results, metric, labels, session)
            stats = paired_stats(all_samples, labels)
            noise = self.manifest.noise_floor
            assert noise is not None
            outcome = decide(stats, metric, noise.aggregate, noise.shapes, self.manifest.min_gain, session)
            if outcome.decision is not None:
                break
            kept.save(all_samples)  # an interrupted validate of the same commits goes on from here
            g.fault_point("validate:session-kept")
        kept.drop()
        doc.decision, doc.reasons, doc.notes = Decision(outcome.decision), outcome.reasons, outcome.notes
        if resumed:
            doc.notes.append(
                f"sessions 1-{resumed} were measured by an earlier, interrupted validate ({kept_when})"
            )
        doc.ratio, doc.ci = _finite(stats.ratio), [_finite(bound) for bound in stats.ci]
        # The candidate side's clock, from the harness's logs of this validate's sessions.
        clocks = envinfo.shape_clocks(scratch.glob(f"s*/**/*-{C.CANDIDATE}{CLOCK_LOG_SUFFIX}"))
        doc.shapes = shape_figures(stats, all_samples, labels, clocks)
        doc.sessions, doc.pairs = session, len(all_samples)
        doc.aggregate = sides_aggregate(first, metric, labels)
        doc.samples = sample_records(all_samples)
        self.probe(doc, trees, scratch)
        return first.candidate.raw

    def probe(self, doc: VerdictDoc, trees: dict[str, Path], scratch: Path) -> None:
        """The transfer rule after an ACCEPT: the training probe, on both sides."""
        if not (self.options.probe and self.manifest.probe_command and doc.decision in ACCEPTED):
            return
        if self.plan.config.kind == ex.SLURM:
            assert doc.notes is not None
            doc.notes.append("training probe skipped: it runs on this machine, the shards ran on Slurm")
            return
        with self.progress.phase("training probe", runs=2 * transfer.PROBE_PAIRS):
            moved = transfer.run_probe(trees, self.manifest, scratch, self.job.shapes, self.progress)
        doc.transfer, doc.probe = moved.verdict, moved.record
        if moved.rejection is not None:
            doc.decision, doc.reasons = Decision.REJECT, [moved.rejection.reason]
            doc.notes = [*(doc.notes or []), *moved.rejection.notes]
        doc.notes = [*(doc.notes or []), *moved.notes]

    def close(self, judged: Judgement) -> None:
        """The verdict's provenance: environment, protected paths, schema, tree, finishing time."""
        doc = judged.verdict
        doc.environment = envinfo.fingerprint()
        doc.harness_sha256 = dict(self.manifest.protected_paths)
        doc.csv_schema_sha256 = self.manifest.csv_header_sha256
        doc.tree = g.tree_of(self.campaign.repo, judged.commit)
        doc.finished = verdict.now()

    def recheck(self, pending: Round) -> VerdictDoc | None:
        """The decision a killed run noted on round `pending`, judged again before it is applied: an
        error where git's records do not back it; the REJECT that replaces it where it is an accept
        the gates do not allow (what accept refuses, a noted accept, by hand or by a pull, does not
        get); else None, and it stands."""
        standing = pending.decision
        assert standing is not None and pending.commit is not None  # a pending round has a noted decision
        repo, commit = self.campaign.repo, pending.commit
        facts = verdict.commit_facts(repo, [commit]).get(commit)
        reason = verdict.inconsistency(commit, standing, facts)
        if reason is not None:  # the lineage admits only consistent documents; checked again before refs move
            raise CampaignError(
                f"the decision noted on {commit[:12]} is not backed by its measurement: {reason}",
                "`git campaign rollback` discards the round, or remove the note (`git notes --ref "
                f"{C.NOTES_VERDICT} remove {commit[:12]}`) and validate again",
            )
        if standing.decision not in ACCEPTED:
            return None
        overfit = C.REASON_OVERFIT in (standing.overrides or [])
        try:
            gates.overridable(repo, self.manifest, pending.number, commit, pending.docs, overfit)
        except gates.GateRefusal as refusal:
            return VerdictDoc(
                campaign=self.campaign.name,
                round=pending.number,
                phase=Phase.VALIDATE,
                hypothesis=pending.hypothesis,
                decision=Decision.REJECT,
                reasons=refusal.gates,
                notes=[f"a noted accept of this commit was refused: {refusal.message}"],
                commit=commit,
                incumbent=g.parent(repo, commit),
                tree=g.tree_of(repo, commit),
                layout=verdict.REFUSED_LAYOUT,
            )
        return None


def reject(doc: VerdictDoc, rejection: gates.Rejection) -> None:
    """A gate's REJECT of a round not measured to the end: its reason and notes, nothing else."""
    doc.decision, doc.reasons, doc.notes = Decision.REJECT, [rejection.reason], rejection.notes


def shape_figures(
    stats: PairedStats, found: list[PairSample], labels: list[str], clocks: Mapping[str, float] | None = None
) -> dict[str, ShapeFigures]:
    """The verdict's `shapes`: each shape's paired ratio and both sides' medians, and the
    candidate's SM clock where the harness logged one (`clocks`, by shape)."""
    return {
        label: ShapeFigures(
            check=C.CHECK_PASS,
            ratio=round(stats.shape_ratios[label], 6),
            candidate=statistics.median(s.candidate[label] for s in found),
            incumbent=statistics.median(s.incumbent[label] for s in found),
            sm_mhz=(clocks or {}).get(label),
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
