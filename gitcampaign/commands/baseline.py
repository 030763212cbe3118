"""BASELINE (round 1): full validation, representative shapes, an A/A noise floor, all in git."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import envinfo, steps, trust, verdict
from gitcampaign import executor as ex
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, locked
from gitcampaign.cost import DeviceClock
from gitcampaign.decision import PairSample, noise_floor
from gitcampaign.errors import CampaignError
from gitcampaign.harness.contract import CLOCK_LOG_SUFFIX
from gitcampaign.manifest import Manifest, NoiseFloor, check_pairs, sha256_bytes
from gitcampaign.measure import (
    HarnessJob,
    run_dir,
    samples,
    worktrees,
)
from gitcampaign.progress import Progress
from gitcampaign.results import BenchTable, aggregate, require_metric
from gitcampaign.shapes import SKEWED_DISTRIBUTIONS, Shape
from gitcampaign.verdict import Aggregate, ShapeFigures, VerdictDoc
from gitcampaign.vocabulary import Decision, Phase

DEFAULT_REPRESENTATIVE = 4


@dataclass
class BaselineResult:
    commit: str
    full: BenchTable
    representative: list[str]
    noise: NoiseFloor
    aggregate: float
    metric: str = ""  # the primary metric the aggregate is of

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "aggregate": self.aggregate,
            "representative_shapes": self.representative,
            "noise_floor": {"aggregate": self.noise.aggregate, "shapes": self.noise.shapes},
        }


def relative_spread(row_values: dict[str, float], metric: str) -> float:
    """Run-to-run spread of the primary metric within the harness process (stddev / value)."""
    columns = ("Forward TFLOPS", "Backward TFLOPS") if metric == C.METRIC_STEP else (metric,)
    spreads = [
        row_values.get(f"{column}_stddev", math.nan) / row_values[column]
        for column in columns
        if row_values.get(column, 0) > 0
    ]
    finite = [spread for spread in spreads if math.isfinite(spread)]
    return max(finite, default=0.0)


def require_measured(table: BenchTable, metric: str, run: str) -> None:
    """Every PASS shape has a positive, finite primary metric. A baseline recorded otherwise is a
    stuck campaign: its aggregate is 0 or NaN, and every later validate stops on the incumbent."""
    unusable = [row for row in table.rows if row.passed and not 0 < row.metric(metric) < math.inf]
    if not unusable:
        return
    values = sorted({f"{row.metric(metric):g}" for row in unusable})
    raise CampaignError(
        f"{run} of the baseline measured {metric} = {' / '.join(values)} on "
        f"{', '.join(row.label for row in unusable)}, shapes whose Check is PASS: a baseline needs a positive,"
        " finite figure on every PASS shape; nothing was recorded",
        "run the quick command by hand on the accepted head and look at the harness's timer and metric"
        " columns, fix the harness (or mark such shapes FAIL), then `git campaign baseline` again",
    )


def choose_representative(
    full: BenchTable, shapes: list[Shape], metric: str, count: int = DEFAULT_REPRESENTATIVE
) -> list[str]:
    """3-5 PASS shapes: the smallest and the largest work, a skewed load for grouped ops, then the
    noisiest (docs/design.md: high-variance shapes are preferred); returned in target-shape order."""
    rows = full.by_label()
    passing = [s for s in shapes if rows[s.label].passed and math.isfinite(rows[s.label].metric(metric))]
    if not passing:
        raise CampaignError(
            "no target shape passes Check at baseline: there is nothing to optimise against",
            "fix correctness first (run the test command), then run `git campaign baseline` again",
        )
    count = max(3, min(count, 5))
    chosen = {min(passing, key=Shape.work).label, max(passing, key=Shape.work).label}
    by_spread = sorted(passing, key=lambda s: -relative_spread(rows[s.label].values, metric))
    skewed = [s for s in by_spread if s.dist in SKEWED_DISTRIBUTIONS]
    if skewed and not any(s.dist in SKEWED_DISTRIBUTIONS for s in passing if s.label in chosen):
        chosen.add(skewed[0].label)
    for shape in by_spread:
        if len(chosen) >= count:
            break
        chosen.add(shape.label)
    return [s.label for s in shapes if s.label in chosen]


def baseline(
    repo_path: Path,
    campaign_name: str | None,
    pairs: int | None = None,
    gpus: str | None = None,
    executor: str | None = None,
    progress: Progress | None = None,
) -> BaselineResult:
    progress = progress or Progress.silent()
    check_pairs(pairs)
    with locked(repo_path, campaign_name, clean_for="run the baseline") as campaign:
        repo = campaign.repo
        manifest = campaign.manifest()
        if manifest.csv_header is not None:
            raise CampaignError(
                f"campaign {campaign.name} already has its baseline",
                "start rounds with `git campaign round -m ...`",
            )
        trust.require(campaign)
        plan = ex.make_plan(repo, campaign.name, manifest.executor, gpus, executor)
        g.checkout(repo, campaign.main_branch)
        head = campaign.accepted_head()
        shapes = manifest.shapes()
        scratch = run_dir(repo, campaign.name, "baseline")
        clock = DeviceClock(len(plan.devices))
        with worktrees(
            repo, campaign.name, {C.INCUMBENT: head, C.CANDIDATE: head}, steps.measured_paths(manifest)
        ) as trees:
            with progress.phase("build and tests"):
                prepared = steps.prepare_baseline(
                    repo, manifest, trees, head, scratch, manifest.harness_timeout_s
                )
            full_job = HarnessJob(manifest.quick_command, shapes, manifest.harness_timeout_s, None)
            with progress.phase("full validation", runs=1):
                measured_full = ex.measure(plan, trees, full_job, 0, scratch, progress=progress)
            full = measured_full.pairs[0].candidate
            require_metric(full.header, manifest.primary_metric, "the baseline's full validation")
            require_measured(full, manifest.primary_metric, "the full validation")
            representative = choose_representative(full, shapes, manifest.primary_metric)
            by_label = {s.label: s for s in shapes}
            quick_job = HarnessJob(
                manifest.quick_command,
                [by_label[label] for label in representative],
                manifest.harness_timeout_s,
                full.header,
                manifest.header_hint(),
            )
            aa_count = pairs or manifest.pairs
            with progress.phase("A/A noise floor", runs=2 * aa_count):
                measured_aa = ex.measure(
                    plan, trees, quick_job, aa_count, scratch, stop_on_failure=False, progress=progress
                )
            aa_pairs = measured_aa.pairs
            for number, pair in enumerate(aa_pairs, start=1):
                for table in (pair.candidate, pair.incumbent):
                    if table is not None:
                        require_measured(table, manifest.primary_metric, f"A/A pair {number}")
        aa_samples = samples(aa_pairs, manifest.primary_metric, representative, session=0)
        noise_aggregate, noise_shapes = noise_floor(aa_samples, representative)
        noise = NoiseFloor(round(noise_aggregate, 6), {k: round(v, 6) for k, v in noise_shapes.items()})
        devices = (
            {"full": measured_full.devices, "quick": measured_aa.devices} if measured_full.devices else None
        )
        return _record(
            campaign,
            manifest,
            head,
            full,
            aa_pairs[0].candidate,
            representative,
            noise,
            aa_samples,
            prepared,
            devices,
            clock.seconds(),
            # The SM clock of the full validation's figures, from the harness's logs of that run.
            envinfo.shape_clocks(scratch.glob(f"**/full{CLOCK_LOG_SUFFIX}")),
        )


def _record(
    campaign: Campaign,
    manifest: Manifest,
    head: str,
    full: BenchTable,
    quick: BenchTable,
    representative: list[str],
    noise: NoiseFloor,
    aa_samples: list[PairSample],
    prepared: steps.Readiness,
    devices: dict[str, dict[str, dict[str, str]]] | None = None,
    device_seconds: float | None = None,
    clocks: dict[str, float] | None = None,
) -> BaselineResult:
    repo = campaign.repo
    manifest.csv_header = full.header
    manifest.csv_header_sha256 = sha256_bytes(full.header.encode())
    manifest.representative_shapes = representative
    manifest.noise_floor = noise
    for path in manifest.protected_paths:
        content = g.read_file_at(repo, head, path)
        if content is None:
            raise CampaignError(
                f"protected path {path} is not committed on {campaign.main_branch}",
                "run `git campaign prepare` (it copies the harness), or commit the file",
            )
        manifest.protected_paths[path] = sha256_bytes(content)
    value = aggregate(full, manifest.primary_metric)
    document = VerdictDoc(
        campaign=campaign.name,
        round=1,
        phase=Phase.BASELINE,
        hypothesis="baseline",
        decision=Decision.BASELINE,
        reasons=[],
        primary_metric=manifest.primary_metric,
        aggregate=Aggregate(baseline=value, quick=aggregate(quick, manifest.primary_metric, representative)),
        representative_shapes=representative,
        noise_floor={"aggregate": noise.aggregate, "shapes": noise.shapes},
        aa_samples=[{"a": s.incumbent, "b": s.candidate} for s in aa_samples],
        shapes={
            row.label: ShapeFigures(
                check=row.check,
                value=row.metric(manifest.primary_metric),
                sm_mhz=(clocks or {}).get(row.label),
            )
            for row in full.rows
        },
        devices=devices or None,
        environment=envinfo.fingerprint(),
        harness_sha256=dict(manifest.protected_paths),
        csv_schema_sha256=manifest.csv_header_sha256,
        measured_commit=head,
        tree=g.tree_of(repo, head),
        build=prepared.build or None,
        tests=prepared.tests,
        device_seconds=device_seconds,
        layout=verdict.BASELINE_LAYOUT,
    )
    message = (
        f"campaign {campaign.name}: baseline (round 1)\n\n{manifest.primary_metric}: {value:.6g} (geomean of PASS shapes)\n"
        f"Representative shapes: {', '.join(representative)}\nNoise floor (A/A): {100 * noise.aggregate:.2f}%\n"
    )
    commit = g.commit_files(
        repo,
        campaign.main_branch,
        {manifest.path: manifest.to_yaml()},
        message,
        notes={
            C.NOTES_FULL: full.raw,
            C.NOTES_BENCH: quick.raw,
            C.NOTES_VERDICT: verdict.render(document),
        },
    )
    return BaselineResult(commit, full, representative, noise, value, manifest.primary_metric)
