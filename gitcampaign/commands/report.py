"""REPORT: after a termination condition, a final full validation of the accepted head against the
baseline, and `campaigns/NAME/REPORT.md` (+ a plot) committed on the accepted line.

GitHub shows no notes, so the report carries the whole lineage, rejected rounds included.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from gitcampaign import constants as C
from gitcampaign import cost, envinfo, gates, plot, profile, roofline, rules, steps, trust, verdict
from gitcampaign import git as g
from gitcampaign.campaign import (
    Campaign,
    locked,
)
from gitcampaign.cost import DeviceClock, DeviceTotal
from gitcampaign.decision import PairedStats, paired_stats
from gitcampaign.errors import CampaignError
from gitcampaign.harness.contract import CLOCK_LOG_SUFFIX
from gitcampaign.lineage import LineageRow, log_table, one_line, rows_of, shape_limits, termination
from gitcampaign.manifest import Manifest, check_pairs
from gitcampaign.measure import (
    HarnessJob,
    PairResult,
    interleaved,
    run_dir,
    samples,
    worktrees,
)
from gitcampaign.progress import Progress
from gitcampaign.verdict import ShapeFigures, VerdictDoc
from gitcampaign.vocabulary import ACCEPTED, Phase, Status


@dataclass
class ReportResult:
    commit: str
    path: str
    ratio: float
    ci: tuple[float, float]
    termination: list[str]
    # passed, failed (recorded with --record-failures), none (no acceptance command) or unchanged
    # (not run: the final head changes nothing outside the campaign's folder)
    acceptance: str = "none"
    clean_diff: bool = True
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def report(
    repo_path: Path,
    campaign_name: str | None,
    force: bool = False,
    pairs: int | None = None,
    record_failures: bool = False,
    progress: Progress | None = None,
    next_hypotheses: tuple[str, ...] = (),
) -> ReportResult:
    progress = progress or Progress.silent()
    check_pairs(pairs)
    if any(not text.strip() for text in next_hypotheses):
        raise CampaignError(
            "--next: a hypothesis is empty",
            "name what the next round would change and which bound of the profile it moves",
        )
    with locked(repo_path, campaign_name, clean_for="write the report") as campaign:
        repo = campaign.repo
        manifest = campaign.require_baseline()
        trust.require(campaign)
        baseline_docs, rounds = campaign.lineage()
        baseline, rows = rows_of(baseline_docs, rounds)
        unfinished = [row for row in rows if row.status in (Status.OPEN, Status.PENDING)]
        if unfinished:
            raise CampaignError(
                f"round {unfinished[-1].round} is {unfinished[-1].status}",
                "finish it with `git campaign validate` or `git campaign rollback` first",
            )
        reached = termination(manifest, rows, shape_limits(campaign, manifest))
        if force:
            reached.append("T4 the user stopped the campaign (report --force)")
        if not reached:
            raise CampaignError(
                "no termination condition holds yet (T1 target, T2 efficiency, T3 max_iterations)",
                "keep optimising, or stop here with `git campaign report --force` (T4)",
            )
        g.checkout(repo, campaign.main_branch)
        head = campaign.accepted_head()
        assert baseline is not None  # require_baseline: the lineage has its baseline
        base_commit = str(baseline.measured_commit)
        shapes = manifest.shapes()
        labels = [shape.label for shape in shapes]
        job = HarnessJob(
            manifest.quick_command,
            shapes,
            manifest.harness_timeout_s,
            manifest.csv_header,
            manifest.header_hint(),
        )
        diff = steps.final_diff(
            repo,
            campaign.name,
            manifest.git_commit,
            head,
            {row.commit: row.round for row in rows if row.status == Status.ACCEPTED and row.commit},
            {row.commit for row in rows if row.status == Status.REJECTED and row.commit},
        )
        if not diff.clean and not record_failures:
            raise CampaignError(
                diff.statement(campaign.name) + " No report was committed.",
                "roll those commits back on the accepted line, or record it with `git campaign report --record-failures`",
            )
        scratch = run_dir(repo, campaign.name, "report")
        clock = DeviceClock()
        commits = {C.INCUMBENT: base_commit, C.CANDIDATE: head}
        count = pairs or manifest.pairs
        with worktrees(repo, campaign.name, commits, steps.measured_paths(manifest)) as trees:
            built = steps.build_all(repo, manifest, trees, commits, scratch, manifest.harness_timeout_s)
            # With nothing accepted the suite would test the start's code, not the campaign's: on
            # 2026-12-06 a whole-project suite cost a report 6 minutes of a lent GPU for that.
            suite = (
                None
                if diff.unchanged
                else steps.acceptance(
                    repo, manifest, head, trees[C.CANDIDATE], scratch, manifest.harness_timeout_s
                )
            )
            if suite is not None and not suite.passed and not record_failures:
                raise CampaignError(
                    f"the acceptance suite failed on the final accepted head {head[:12]}; no report was committed\n"
                    + "\n".join(suite.failure_notes()),
                    "fix it in a new round (`git campaign round -m ...`), or record the failure with"
                    " `git campaign report --record-failures`",
                )
            with progress.phase("final full validation", runs=2 * count):
                results = interleaved(trees, job, count, scratch, False, progress)
        spent = clock.seconds()
        final = results[0].candidate
        passing = [
            label
            for label in labels
            if all(
                p.candidate.by_label()[label].passed and p.incumbent.by_label()[label].passed
                for p in results
                if p.incumbent
            )
        ]
        stats = (
            paired_stats(samples(results, manifest.primary_metric, passing, 0), passing) if passing else None
        )
        per_shape = _per_shape(results, manifest.primary_metric, labels, stats.shape_ratios if stats else {})
        environment = envinfo.fingerprint()
        ceilings = roofline.ceilings_for(repo, str(environment.get("gpu", "")))
        dtype = roofline.spec_dtype(repo, campaign.name, head)
        # The final head's SM clock per shape, from the harness's logs of the final validation.
        clocks = envinfo.shape_clocks(scratch.glob(f"**/*-{C.CANDIDATE}{CLOCK_LOG_SUFFIX}"))
        for label, entry in per_shape.items():
            entry["sm_mhz"] = clocks.get(label)
            entry["share_of_limit"] = roofline.metric_share(
                entry["final"],
                manifest.primary_metric,
                manifest.target_op,
                ceilings,
                dtype,
                entry["sm_mhz"],
            )
        folder = C.campaign_dir(campaign.name)
        files: dict[str, bytes] = {}
        warnings = []
        if plot.available():
            ratios = {label: v["ratio"] for label, v in per_shape.items() if isinstance(v["ratio"], float)}
            files[f"{folder}/{C.REPORT_PLOT_FILE}"] = plot.report_plot(campaign, ratios)
        else:
            warnings.append(f"{C.REPORT_PLOT_FILE} not drawn: matplotlib is missing; {plot.INSTALL_HINT}")
        markdown = _markdown(
            campaign,
            manifest,
            rows,
            {entry.number: entry.docs for entry in rounds},
            per_shape,
            stats,
            reached,
            environment,
            _limit_note(
                ceilings,
                manifest,
                dtype,
                {label: v["share_of_limit"] for label, v in per_shape.items()},
                bool(clocks),
            ),
            head,
            base_commit,
            f"git campaign report{' --force' * force}{' --record-failures' * record_failures}"
            f"{f' --pairs {count}' if pairs else ''}",
            count,
            bool(files),
            cost.total(campaign).plus(spent),
            profile.of_lineage(campaign, rounds, head),
            next_hypotheses,
        ) + "\n".join(steps.report_section(suite, diff, campaign.name, manifest.acceptance_command))
        files[f"{folder}/{C.REPORT_FILE}"] = markdown.encode()
        document = VerdictDoc(
            campaign=campaign.name,
            round=None,
            phase=Phase.REPORT,
            primary_metric=manifest.primary_metric,
            ratio=stats.ratio if stats else None,
            ci=list(stats.ci) if stats else None,
            termination=reached,
            baseline_commit=base_commit,
            final_commit=head,
            shapes={
                label: ShapeFigures(**figures, layout=verdict.REPORT_SHAPE_LAYOUT)
                for label, figures in per_shape.items()
            },
            environment=environment,
            build=built or None,
            acceptance=suite.record() if suite else None,
            final_diff=diff.to_json(),
            device_seconds=spent,
            layout=verdict.REPORT_LAYOUT,
        )
        commit = g.commit_files(
            repo,
            campaign.main_branch,
            files,
            f"campaign {campaign.name}: report\n\n" + "\n".join(reached) + "\n",
            notes={C.NOTES_FULL: final.raw, C.NOTES_VERDICT: verdict.render(document)},
        )
        return ReportResult(
            commit,
            f"{folder}/{C.REPORT_FILE}",
            stats.ratio if stats else math.nan,
            stats.ci if stats else (math.nan, math.nan),
            reached,
            _acceptance_outcome(suite, diff, manifest.acceptance_command),
            diff.clean,
            warnings,
        )


def _acceptance_outcome(suite: steps.Step | None, diff: steps.FinalDiff, command: str) -> str:
    if suite is not None:
        return "passed" if suite.passed else "failed"
    return "unchanged" if command and diff.unchanged else "none"


def _per_shape(
    results: list[PairResult], metric: str, labels: list[str], ratios: dict[str, float]
) -> dict[str, dict[str, Any]]:
    table = {}
    for label in labels:
        base = [p.incumbent.by_label()[label] for p in results if p.incumbent]
        final = [p.candidate.by_label()[label] for p in results]
        table[label] = {
            "baseline_check": base[0].check,
            "final_check": final[0].check,
            "baseline": statistics.median(row.metric(metric) for row in base),
            "final": statistics.median(row.metric(metric) for row in final),
            "ratio": ratios.get(label),
        }
    return table


def _fmt(value: object, spec: str = ".4g") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def _interval(stats: PairedStats | None) -> str:
    """The aggregate's 95% interval, or why there is none: one pair has no spread to take it from."""
    if stats is not None and stats.pairs < 2:
        return "no 95% interval from one pair (`--pairs 2` or more give one)"
    low, high = stats.ci if stats else (None, None)
    return f"95% CI [{_fmt(low, '.3f')}, {_fmt(high, '.3f')}]"


# What starts Markdown syntax inside a line: a backslash, code, emphasis (an underscore only at a
# word's edge: `shape_regression` stays readable), links and images, table cells, strikethrough.
# `&`, `<` and `>` become entities first, so no HTML and no autolink gets through.
_MARKDOWN_SYNTAX = re.compile(r"[\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def markdown_text(text: object) -> str:
    """Text that came with a round (a hypothesis, a reason, a note) as one line of Markdown that
    renders as that very text: no HTML, no link, no emphasis, no table cell break, no new line."""
    entities = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SYNTAX.sub(lambda found: "\\" + found.group(0), entities)


def markdown_code(text: str) -> str:
    """`text` as an inline code span, whatever backticks it holds (CommonMark: a longer fence)."""
    line = one_line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def why_rejected(row: LineageRow) -> str:
    """`REJECT within_noise: shape +1.9%, ...`: the decision, its reason codes, the largest per-shape
    deltas (a round rejected before any measurement has only its reasons)."""
    deltas = row.key_deltas if row.key_deltas != row.reasons else ""
    head = " ".join(filter(None, [row.decision, row.reasons]))
    return f"{head}: {deltas}" if deltas else head or "see verdict"


def _audit_lines(accepted: list[LineageRow], docs: dict[int, list[VerdictDoc]], builtin: bool) -> list[str]:
    """The rules every round was judged by (the rule book's), then one line per accepted round,
    from what its verdict recorded; the sentence that every accepted round passed every gate only
    where each record says so."""
    book = f"- The rules (gitcampaign/rules.py): {rules.summary()}"
    if not accepted:
        return [book, "- no accepted rounds"]
    lines = [book] + [
        f"- round {r.round}: {markdown_text(gates.audit(docs.get(r.round, []), builtin))}" for r in accepted
    ]
    clean = all(_passed_every_gate(docs.get(r.round, [])) for r in accepted)
    if clean:
        checks = (
            "gitcampaign's harness checks on every representative shape (fresh inputs per call, poisoned"
            " outputs, input-mutation, determinism and identity-flip checks, spot checks of timed calls, the"
            " seal over timers and the harness, the datasheet peak)"
            if builtin
            else "the project's own harness (only the checks it performs; none of gitcampaign's run-time checks)"
        )
        lines.append(
            "- Every accepted round passed every gate by its own validation, none by override: the build and"
            f" tests where configured, the static anti-cheat lint, the protected-file gate and {checks}."
        )
    return lines


def _passed_every_gate(docs: list[VerdictDoc]) -> bool:
    validated = gates.measured(docs)
    standing = verdict.standing(docs)
    if validated is None or standing is None or standing.phase != Phase.VALIDATE:
        return False
    found = validated.gates
    shapes = validated.shapes or {}
    return (
        validated.decision in ACCEPTED
        and not (found and found.static)
        and not (found and found.protected_changed)
        and bool(shapes)
        and all(v.check == C.CHECK_PASS for v in shapes.values())
    )


def _profile_lines(profiles: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """A bullet a profiled commit (device, profiler), a sub-bullet a shape with its verdict."""
    lines = []
    for title, _, doc in profiles:
        lines.append(
            f"- {title}, {markdown_text(doc.get('written', '?'))} on {markdown_text(doc.get('device', '?'))}"
            f" ({markdown_text(doc.get('profiler', '?'))}):"
        )
        lines += [f"  - {markdown_text(line)}" for line in profile.verdicts(doc)] or ["  - no shape profiled"]
    return lines


def _limit_note(
    ceilings: roofline.Ceilings,
    manifest: Manifest,
    dtype: str | None,
    shares: dict[str, float | None],
    clocked: bool = False,
) -> str:
    """The sentence under the shape table: what the share-of-the-limit column (`shares`, by shape)
    holds the figures against (`clocked`: a GEMM peak scaled to the SM clock the harness logged for
    each shape), and where a figure reads above it."""
    unit = roofline.metric_unit(manifest.primary_metric)
    limit = ceilings.limit(unit, manifest.target_op, dtype)
    if limit is not None:
        caveat = roofline.above_ceiling(shares)
        at_clock = (
            f" scaled from the {limit.sm_mhz:.0f} MHz it was measured at to the SM clock of each shape's"
            " final figure"
            if clocked and limit.sm_mhz
            else ""
        )
        return (
            f"Share of the limit: the final figure over the {limit.name} of {ceilings.gpu}{at_clock} "
            f"({ceilings.source}; `git campaign calibrate --peaks` measures it, docs/analyze.md)."
            + (f" Shares {caveat}." if caveat else "")
        )
    if roofline.uncovered(unit, dtype):
        return f"Share of the limit: not measured ({roofline.NO_WIDE_CEILING.format(dtype=dtype)})."
    return f"Share of the limit: not measured (no ceilings for {ceilings.gpu or 'this machine'})."


def _markdown(
    campaign: Campaign,
    manifest: Manifest,
    rows: list[LineageRow],
    docs: dict[int, list[VerdictDoc]],
    per_shape: dict[str, dict[str, Any]],
    stats: PairedStats | None,
    reached: list[str],
    environment: dict[str, object],
    limit_note: str,
    head: str,
    base_commit: str,
    command: str,
    pairs: int,
    plotted: bool,
    spent: DeviceTotal,
    profiles: list[tuple[str, str, dict[str, Any]]],
    next_hypotheses: tuple[str, ...],
) -> str:
    rounds = [row for row in rows if row.round >= 2]
    accepted = [row for row in rounds if row.status == Status.ACCEPTED]
    rejected = [row for row in rounds if row.status == Status.REJECTED]
    overridden = {
        row.round
        for row in accepted
        if (standing := verdict.standing(docs.get(row.round, []))) is not None
        and standing.phase == Phase.OVERRIDE
    }
    metric = manifest.primary_metric
    shape_rows = [
        [
            label,
            v["baseline_check"],
            v["final_check"],
            _fmt(v["baseline"]),
            _fmt(v["final"]),
            _fmt(v["ratio"], ".3f"),
            roofline.share_text(v["share_of_limit"]),
        ]
        for label, v in per_shape.items()
    ]
    least = sorted((v["ratio"], label) for label, v in per_shape.items() if isinstance(v["ratio"], float))[:3]
    # With no round accepted both sides run the same kernels: the ratio is the measurement's spread.
    same_kernels = (
        []
        if accepted
        else [
            "",
            "No round was accepted: baseline and final run the same kernels, so this ratio and its"
            " interval are the measurement's own spread between processes of one tree (an A/A"
            " check), not a change.",
        ]
    )
    next_steps = (
        [f"- {label}: {_fmt(ratio, '.3f')}x, the least gained so far" for ratio, label in least] or ["- none"]
        if accepted
        else ["- no round was accepted: start from the verdicts of the rounds above and what each tried"]
    )
    # A report again (a newer profile, other next hypotheses): the line's head is the earlier one.
    replaced = (
        [f"- Reported again: this report replaces the report committed at `{head[:12]}`"]
        if campaign.reported()
        else []
    )
    shown_environment = ", ".join(
        f"{k} {v}"
        for k, v in environment.items()
        if k in ("gpu", "driver", "cuda", "torch", "triton", "python")
    )
    lines = [
        f"# Campaign `{campaign.name}`: report",
        "",
        f"- Op: {markdown_code(manifest.target_op)} ({markdown_text(manifest.target_backend)}); primary metric: **{metric}**",
        f"- Baseline commit `{base_commit[:12]}`, final accepted head `{head[:12]}` on `{campaign.main_branch}`",
        *replaced,
        f"- Environment: {markdown_text(shown_environment)}",
        f"- Date: {verdict.now()}; command: `{command}` (final full validation, "
        f"{pairs} interleaved pairs of {markdown_code(manifest.quick_command)})",
        f"- Termination: {'; '.join(reached)}",
        f"- Cost: {spent.text()} (the baseline, every validation and heat, and this report's final"
        " validation; each verdict records its own `device_seconds`)",
        "",
        "## Baseline vs final (full validation, same run, interleaved)",
        "",
        f"Aggregate (geomean over PASS shapes) final/baseline: **{_fmt(stats.ratio if stats else None, '.3f')}x**, "
        f"{_interval(stats)}",
        *same_kernels,
        "",
        tabulate(
            shape_rows,
            headers=[
                "shape",
                "baseline check",
                "final check",
                f"baseline {metric}",
                f"final {metric}",
                "ratio",
                "share of the limit",
            ],
            tablefmt="github",
        ),
        "",
        limit_note,
        "",
        "## Iterations",
        "",
        f"{len(rounds)} round{'' if len(rounds) == 1 else 's'}: {len(accepted)} accepted"
        f"{f' ({len(overridden)} by manual override)' if overridden else ''}, {len(rejected)} rejected.",
        "",
        "### Directions that worked",
        "",
        *(
            [
                f"- round {r.round}: {markdown_text(r.hypothesis)} ({_fmt(r.vs_baseline, '.3f')}x cumulative;"
                f" transfer: {markdown_text(r.transfer or 'not probed')}"
                f"{'; accepted by manual override' if r.round in overridden else ''})"
                for r in accepted
            ]
            or ["- none"]
        ),
        "",
        "### Directions verified not to work",
        "",
        *(
            [
                f"- round {r.round}: {markdown_text(r.hypothesis)} ({markdown_text(why_rejected(r))})"
                for r in rejected
            ]
            or ["- none"]
        ),
        "",
        "## Lineage (rejected rounds included; git notes carry the CSVs and verdicts)",
        "",
        log_table(rows, metric, tablefmt="github", cell=markdown_text),
        "",
        "## Gates and real-training audit (each accepted round, as its verdict records it)",
        "",
        *_audit_lines(accepted, docs, manifest.harness_file is not None),
        "",
        "## Profiles (`git campaign analyze`: the latest of each profiled commit)",
        "",
        *(_profile_lines(profiles) or ["- none: no commit of this campaign was profiled"]),
        "",
        "## Next steps (from the data)",
        "",
        *next_steps,
        "",
        "## Next hypotheses",
        "",
        *(
            [f"- {markdown_text(text.strip())}" for text in next_hypotheses]
            or ["- none named (`git campaign report --next HYPOTHESIS`, once for each)"]
        ),
        "",
        *([f"![speedup per round and per-shape ratios]({C.REPORT_PLOT_FILE})", ""] if plotted else []),
    ]
    return "\n".join(lines)
