"""`git campaign`: click only parses, normalises and calls `gitcampaign.commands`; one handler maps
outcomes to exit codes (user error 1, ^C 130, bug 3 with the traceback in a log)."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click
from tabulate import tabulate

from gitcampaign import __version__, process
from gitcampaign import constants as C
from gitcampaign.completion import COMPLETE_VAR
from gitcampaign.errors import CampaignError, CampaignWarning
from gitcampaign.harness.ops import op_names
from gitcampaign.progress import Progress
from gitcampaign.vocabulary import ACCEPTED

if TYPE_CHECKING:
    from gitcampaign.commands.show import ShowResult
    from gitcampaign.commands.status import StatusResult
    from gitcampaign.heat_validation import HeatResult
    from gitcampaign.validation import ValidateResult

EXIT_USER_ERROR = 1
EXIT_REJECTED = 1  # `validate --exit-code` on a REJECT, as `git diff --exit-code` on a difference
EXIT_BUG = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process stopped by `kill`


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
MAN_PAGE = "git-campaign.1"  # generated from this module's commands by `python -m gitcampaign.manpage`


def _emit(text: str, data: Any, as_json: bool) -> None:
    click.echo(json.dumps(data, indent=2, default=str) if as_json else text)


def status_text(result: StatusResult) -> str:
    from gitcampaign.cost import DeviceTotal
    from gitcampaign.heat import listing
    from gitcampaign.sync import describe_standing

    lines = [f"campaign {result.campaign}: {result.op} ({result.backend}), {result.metric}"]
    lines.append(
        f"accepted head {result.accepted_head[:12]} on {result.main_branch}; HEAD on {result.head_branch}"
    )
    lines.append(
        "rounds: " + ", ".join(f"{n} {state}" for state, n in result.rounds.items() if n)
        if any(result.rounds.values())
        else "rounds: none yet"
    )
    if result.speedup:
        lines.append(f"speedup over baseline: {result.speedup:.3f}x")
    lines.append("termination: " + (", ".join(result.termination) if result.termination else "none reached"))
    lines += [describe_standing(remote, states) for remote, states in result.remotes.items()]
    if result.profile:
        lines += [
            "profile of the accepted head (`git campaign show`):",
            *(f"  {line}" for line in result.profile),
        ]
    else:
        lines.append("profile of the accepted head: none (`git campaign analyze`)")
    if result.heat:
        lines.append(
            f"open heat: {listing(result.heat)} (`git campaign validate --heat` decides them together)"
        )
    lines.append(DeviceTotal(result.device_seconds, result.measurements).text())
    lines += [f"unfinished: {line}" for line in result.unfinished]
    if result.damaged:
        lines.append(f"damaged: {result.damaged}")
    lines.append(f"next: {result.next}")
    return "\n".join(lines)


def show_text(result: ShowResult) -> str:
    if result.commit is None:
        return f"round {result.round}: no commit yet\nhypothesis: {result.hypothesis}"
    parts = [
        f"round {result.round} at {result.commit}",
        f"hypothesis: {result.hypothesis}",
        "",
        "diff --stat:",
        result.diff_stat or "(none)",
    ]
    for title, text in (
        ("quick CSV (bench note)", result.bench_csv),
        ("full CSV", result.full_csv),
        ("verdict", result.verdict),
    ):
        if text is not None:
            parts += ["", f"{title}:", text.rstrip("\n")]
    if result.profiles:
        from gitcampaign.profile import verdicts

        latest = result.profiles[-1]
        parts += [
            "",
            f"profile ({len(result.profiles)} in the note; the latest, {latest.get('written', '?')} on "
            f"{latest.get('device', '?')}, ceilings {(latest.get('ceilings') or {}).get('source', '?')}; "
            f"all of it: git notes --ref {C.NOTES_PROFILE} show {result.commit[:12]}):",
            *(f"  {line}" for line in verdicts(latest)),
        ]
    if result.conflicts:
        parts += ["", "conflicting verdicts (this round was validated in two clones; both are kept):"]
        parts += [f"  {doc.decision} written {doc.written or '?'}" for doc in result.conflicts]
        parts.append(
            f"  settle it with `git campaign accept {result.round}` or `git campaign rollback {result.round}`"
        )
    return "\n".join(parts)


def _repo(ctx: click.Context) -> Path:
    return Path(ctx.obj["repo"])


def _campaign(ctx: click.Context) -> str | None:
    return ctx.obj["campaign"]


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version")
@click.option(
    "--repo", "-C", default=".", show_default=True, type=click.Path(file_okay=False), help="Repository."
)
@click.option(
    "--campaign", "-c", default=None, help="Campaign name (default: the checked-out one, or the only one)."
)
@click.pass_context
def cli(ctx: click.Context, repo: str, campaign: str | None) -> None:
    """Git-native GPU-kernel optimisation campaigns: one hypothesis, one change, one measurement,
    one mechanical decision per round; the git history is the lineage."""
    ctx.obj = {"repo": repo, "campaign": campaign}


@cli.command(context_settings=CONTEXT)
@click.argument("name")
@click.option(
    "--op",
    default=None,
    help=f"A shipped op ({', '.join(op_names())}); with --op-spec, one of the spec's variants (default: its NAME); a label with --quick-command.",
)
@click.option(
    "--op-spec",
    default=None,
    help="Your op spec (a Python file in the repository, docs/op-spec.md): the harness measures your kernel with every check.",
)
@click.option(
    "--backend", default="triton", show_default=True, help="Backend the harness measures (triton|torch)."
)
@click.option(
    "--metric",
    default=None,
    help='"Forward TFLOPS", "Combined Step TFLOPS", "Forward GB/s", "Backward GB/s" or forward|step|gbs|bwd-gbs.',
)
@click.option(
    "--shapes",
    default="tiny",
    show_default=True,
    help="A preset (e.g. llama3.1-8b:mbs=1; several joined with commas) or a YAML shape file.",
)
@click.option(
    "--test-command", default=None, help="Focused correctness test command ('' for none: no test gate)."
)
@click.option(
    "--quick-command",
    default=None,
    help="Your own quick harness (must write the frozen CSV; none of gitcampaign's run-time checks then run).",
)
@click.option("--benchmark-command", default=None, help="Full benchmark command.")
@click.option("--probe-command", default=None, help="Training-step probe command ('' for none).")
@click.option("--kernel-source", default=None, help="Path of the kernel being optimised.")
@click.option(
    "--build-command",
    default="",
    help="Builds a measured tree in place before its tests and measurement (e.g. 'python setup.py build_ext --inplace').",
)
@click.option(
    "--acceptance-command",
    default=None,
    help="Suite `report` runs on the final head (default: the project's full test suite; '' for none).",
)
@click.option(
    "--execution-mode",
    type=click.Choice(["repo", "workspace"]),
    default="repo",
    show_default=True,
    help="Measure checkouts of the whole repository, or minimal copies of --workspace paths.",
)
@click.option("--workspace", multiple=True, help="A path the workspace copy holds (repeatable).")
@click.option("--protect", multiple=True, help="Extra path a round may not change (repeatable).")
@click.option("--max-iterations", default=20, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--target",
    multiple=True,
    help="speedup=1.2 | value=800 | efficiency=0.9 (per shape, of the measured limit) | efficiency=0.8 with"
    " peak=989 (repeatable).",
)
@click.option("--gpu", default="NVIDIA H200", show_default=True)
@click.option(
    "--pairs",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    help="Interleaved process pairs per measurement.",
)
@click.option("--min-gain", default=0.01, show_default=True, type=click.FloatRange(min=0))
@click.option(
    "--timeout",
    "timeout_s",
    default=1800,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds before a harness process counts as hung.",
)
@click.pass_context
def init(ctx: click.Context, name: str, **options: Any) -> None:
    """DEFINE_TARGET: write the manifest on a new campaign/NAME/main."""
    from gitcampaign.commands.init import InitOptions
    from gitcampaign.commands.init import init as run

    options["protect"] = tuple(options["protect"])
    options["target"] = tuple(options["target"])
    options["workspace"] = tuple(options["workspace"])
    result = run(_repo(ctx), InitOptions(name=name, **options))
    click.echo(f"campaign {name}: manifest committed at {result.commit[:12]} on {result.main_branch}")
    click.echo("next: git campaign prepare")


@cli.command(context_settings=CONTEXT)
@click.option("--no-hooks", is_flag=True, help="Do not install the git hooks.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def prepare(ctx: click.Context, no_hooks: bool, as_json: bool) -> None:
    """PREPARE_ENVIRONMENT: environment report, harness copy, notes config, hooks."""
    from gitcampaign.commands.prepare import prepare as run

    result = run(_repo(ctx), _campaign(ctx), install_hooks=not no_hooks)
    text = "\n".join(
        ["environment:", *(f"  {k}: {v}" for k, v in result.environment.items())]
        + [*(f"done: {a}" for a in result.actions), *(f"warning: {w}" for w in result.warnings)]
        + ["next: git campaign baseline"]
    )
    _emit(text, result.to_json(), as_json)


_EXIT_CODE_HELP = "Exit 1 when the round is rejected, 0 when accepted (as `git diff --exit-code`), for CI."
_GPUS_HELP = "Split the shapes across these GPUs (nvidia-smi indices), one interleaved sequence each."
_EXECUTOR_HELP = (
    "Where shards run: direct (here), local (submitit) or slurm (default: manifest executor.kind)."
)


@cli.command(context_settings=CONTEXT)
@click.option("--all-shapes", is_flag=True, help="All target shapes (default: the representative ones).")
@click.option("--forward-only", is_flag=True, help="Skip the backward.")
@click.option(
    "--rounds",
    default=None,
    type=click.IntRange(min=1),
    help="Rounds per shape, each timing both backends with both measures (default 4: ABBA order).",
)
@click.option(
    "--peaks",
    is_flag=True,
    help="Instead: measure this GPU's ceilings (bf16/fp8 GEMM, copy, launch floor) for analyze and report.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def calibrate(
    ctx: click.Context, all_shapes: bool, forward_only: bool, rounds: int | None, peaks: bool, as_json: bool
) -> None:
    """Check the harness against an outside clock: harness vs back-to-back do_bench, ours and vendor's."""
    from gitcampaign.calibration import RATIO_LIMIT, SHAPE_LIMIT, row_notes
    from gitcampaign.commands.calibrate import calibrate as run

    if peaks:
        if all_shapes or forward_only or rounds:
            raise click.UsageError(
                "--peaks measures the GPU, not the harness: drop --all-shapes, --forward-only, --rounds"
            )
        _peaks(ctx, as_json)
        return
    result = run(_repo(ctx), _campaign(ctx), all_shapes=all_shapes, forward_only=forward_only, rounds=rounds)
    ours, vendor = result.backends

    def pct(value: float) -> str:
        return f"{100 * value:+.1f}%"

    def range_pct(value: float) -> str:
        return f"{100 * value:.1f}%"

    rows = [
        [
            row.label,
            row.phase,
            f"{row.ours_harness_ms:.4g}",
            f"{row.ours_b2b_ms:.4g}",
            pct(row.ours_deviation),
            f"{row.vendor_harness_ms:.4g}",
            f"{row.vendor_b2b_ms:.4g}",
            pct(row.vendor_deviation),
            f"{row.harness_ratio:.4f}",
            f"{row.b2b_ratio:.4f}",
            pct(row.ratio_deviation),
            f"{range_pct(row.harness_ratio_spread)}/{range_pct(row.b2b_ratio_spread)}",
            f"{row.ours_harness_mhz:.0f}/{row.ours_b2b_mhz:.0f}/{row.vendor_harness_mhz:.0f}/{row.vendor_b2b_mhz:.0f}",
            "ok" if row.agrees() else "NO",
        ]
        for row in result.rows
    ]
    headers = [
        "shape",
        "phase",
        f"{ours} harness ms",
        f"{ours} b2b ms",
        "dev",
        f"{vendor} harness ms",
        f"{vendor} b2b ms",
        "dev",
        "ratio harness",
        "ratio b2b",
        "dev",
        "spread harness/b2b",
        "SM MHz",
        "agrees",
    ]
    verdict_line = (
        f"the harness agrees with the outside clock (per shape within {100 * SHAPE_LIMIT:g}%, ratios within "
        f"{100 * RATIO_LIMIT:g}%)"
        if result.agreed
        else "the harness DISAGREES with the outside clock on the rows marked NO: do not trust its decisions here"
    )
    text = "\n".join(
        [
            tabulate(rows, headers=headers),
            "b2b: triton.testing.do_bench after a pre-roll (events, L2 cleared, median); "
            f"{result.rounds} rounds, {ours} and {vendor} next to each other in each (ABBA); ms and SM MHz: "
            f"medians over the rounds; ratio: {ours} speed / {vendor} speed, the median of the rounds' "
            "ratios; spread: (greatest - least) / median of the rounds' ratios; SM MHz: "
            f"{ours} harness/b2b, {vendor} harness/b2b",
            *(f"warning: {w}" for w in result.warnings),
            *(f"note: {note}" for note in row_notes(result.rows)),
            verdict_line,
            f"recorded in {C.NOTES_ENVIRONMENT} on {result.commit[:12]}",
        ]
    )
    _emit(text, result.to_json(), as_json)
    if not result.agreed:
        ctx.exit(EXIT_USER_ERROR)


def _peaks(ctx: click.Context, as_json: bool) -> None:
    from gitcampaign.commands.calibrate import calibrate_peaks

    result = calibrate_peaks(_repo(ctx), _campaign(ctx))
    ceilings = result.figures["ceilings"]

    def figure(key: str, unit: str) -> str:
        value = ceilings.get(key)
        return f"{value:.4g} {unit}" if isinstance(value, (int, float)) else "not measured"

    lines = [
        f"{result.figures['gpu']} (UUID {result.figures.get('uuid') or '?'}), at the steady clock "
        "(pre-roll, then the median of windows of calls back to back, CUDA events):",
        f"  dense bf16 GEMM: {figure('bf16_gemm_tflops', 'TFLOP/s')}",
        f"  dense fp8 GEMM:  {figure('fp8_gemm_tflops', 'TFLOP/s')}",
        f"  device copy:     {figure('copy_gbs', 'GB/s')} (read + write)",
        f"  launch floor:    {figure('launch_floor_us', 'us')} per empty kernel on the GPU, "
        f"{figure('launch_host_us', 'us')} for the host to issue one",
        f"recorded in {C.NOTES_ENVIRONMENT} on {result.commit[:12]}",
    ]
    _emit("\n".join(lines), result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--pairs", default=None, type=click.IntRange(min=1), help="A/A process pairs (default: manifest)."
)
@click.option("--gpus", default=None, help=_GPUS_HELP)
@click.option(
    "--executor", default=None, type=click.Choice(["direct", "local", "slurm"]), help=_EXECUTOR_HELP
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def baseline(
    ctx: click.Context, pairs: int | None, gpus: str | None, executor: str | None, as_json: bool
) -> None:
    """BASELINE (round 1): full validation, representative shapes, A/A noise floor."""
    from gitcampaign.commands.baseline import baseline as run

    progress = Progress.for_cli(as_json)
    result = run(_repo(ctx), _campaign(ctx), pairs, gpus=gpus, executor=executor, progress=progress)
    rows = [[row.label, row.check, f"{row.metric(result.metric):.4g}"] for row in result.full.rows]
    text = "\n".join(
        [
            tabulate(rows, headers=["shape", "check", result.metric]),
            f"baseline aggregate: {result.aggregate:.6g}",
            f"representative shapes: {', '.join(result.representative)}",
            f"noise floor (A/A): {100 * result.noise.aggregate:.2f}%",
            f'recorded at {result.commit[:12]}; next: git campaign round -m "HYPOTHESIS"',
        ]
    )
    _emit(text, {**result.to_json(), "phase_seconds": progress.phase_seconds}, as_json)


@cli.command("round", context_settings=CONTEXT)
@click.option("-m", "--message", "hypothesis", default="", help="The round's one hypothesis.")
@click.option(
    "--from",
    "from_ref",
    default=None,
    metavar="REF",
    help="Open the round with commit REF on it (a candidate on another branch; its message's "
    "Hypothesis: line is the default -m).",
)
@click.option(
    "--heat",
    is_flag=True,
    help="Open it in the heat: one of several candidates on the same accepted head, decided together "
    "by `validate --heat` (an open round of yours joins the heat too).",
)
@click.pass_context
def round_(ctx: click.Context, hypothesis: str, from_ref: str | None, heat: bool) -> None:
    """OPTIMIZE: open campaign/NAME/round-N on the accepted head."""
    from gitcampaign.commands.round import open_round
    from gitcampaign.heat import listing

    result = open_round(_repo(ctx), _campaign(ctx), hypothesis, from_ref, heat)
    click.echo(f"round {result.number} open on {result.branch} (from {result.base[:12]})")
    if result.heat:
        click.echo(f"the heat: {listing(result.heat)}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    _echo_rejected_elsewhere(ctx)
    validate = (
        "`git campaign validate --heat` (once every round of the heat is committed)"
        if heat
        else "`git campaign validate`"
    )
    if result.picked:
        click.echo(f"its commit {result.picked[:12]} is {from_ref} applied there; next: {validate}")
    else:
        click.echo(f"make ONE change, `git commit` (Hypothesis:/Change: lines), then {validate}")
    if not result.profiled:
        click.echo(
            f"note: {result.base[:12]} has no profile: `git campaign analyze` shows where its time goes"
            " and what bounds each shape, for the hypothesis to name",
            err=True,
        )


def _echo_rejected_elsewhere(ctx: click.Context) -> None:
    """What other campaigns on the op rejected: a new round that repeats one should say why it
    would fare better now (`git campaign log --op` has every round)."""
    from gitcampaign.commands.log import op_log

    found = op_log(_repo(ctx), _campaign(ctx))
    rejected = found.rejected_elsewhere()
    if found.not_imported:
        click.echo(
            f"other campaigns on this op, kept as bundles and not imported: {', '.join(found.not_imported)}"
        )
    if rejected:
        click.echo(
            f"rejected by other campaigns on this op ({len(rejected)}; `git campaign log --op` has them all):"
        )
    for name, row in rejected:
        reasons = f" ({row.reasons})" if row.reasons else ""
        hypothesis = (row.hypothesis[:70] + "...") if len(row.hypothesis) > 73 else row.hypothesis
        click.echo(f"  {name} round {row.round}{reasons}: {hypothesis}")


def _validation_text(result: ValidateResult) -> str:
    def pct(value: float | None) -> str:
        return f"{100 * (value - 1):+.2f}%" if value is not None and math.isfinite(value) else "-"

    rows = [
        [
            label,
            v.check or "",
            f"{v.incumbent:.4g}" if v.incumbent is not None else "-",
            f"{v.candidate:.4g}" if v.candidate is not None else "-",
            pct(v.ratio),
        ]
        for label, v in result.shapes.items()
    ]
    lines = [tabulate(rows, headers=["shape", "check", "incumbent", "candidate", "change"])] if rows else []
    ci = ", ".join(f"{b:.4f}" if math.isfinite(b) else "-" for b in result.ci)
    lines.append(
        f"round {result.round}: {result.decision}"
        + (f" ({', '.join(result.reasons)})" if result.reasons else "")
    )
    lines.append(
        f"aggregate ratio {result.ratio:.4f}, 95% CI [{ci}]"
        if math.isfinite(result.ratio)
        else "aggregate ratio: not measured"
    )
    lines += [f"  {note}" for note in result.notes]
    if result.transfer:
        lines.append(f"training-step transfer: {result.transfer}")
    return "\n".join(lines)


@cli.command(context_settings=CONTEXT)
@click.option("--full", is_flag=True, help="Validate on all target shapes.")
@click.option(
    "--pairs", default=None, type=click.IntRange(min=1), help="Process pairs per session (default: manifest)."
)
@click.option("--no-probe", is_flag=True, help="Skip the training-step probe.")
@click.option(
    "--timeout", "timeout_s", default=None, type=click.IntRange(min=1), help="Seconds per harness process."
)
@click.option("--gpus", default=None, help=_GPUS_HELP)
@click.option(
    "--executor", default=None, type=click.Choice(["direct", "local", "slurm"]), help=_EXECUTOR_HELP
)
@click.option(
    "--heat",
    is_flag=True,
    help="Decide the open heat: every gate on every candidate, one screen of them all against the "
    "incumbent, the best confirmed by a fresh measurement; the others REJECT (outrun).",
)
@click.option(
    "--sweeps",
    default=1,
    show_default=True,
    type=click.IntRange(min=1, max=20),
    help="With --heat: sweeps of the screen (each: every candidate once, the incumbent once).",
)
@click.option("--exit-code", is_flag=True, help=_EXIT_CODE_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def validate(
    ctx: click.Context,
    full: bool,
    pairs: int | None,
    no_probe: bool,
    timeout_s: int | None,
    gpus: str | None,
    executor: str | None,
    heat: bool,
    sweeps: int,
    exit_code: bool,
    as_json: bool,
) -> None:
    """VALIDATE: gates, interleaved measurement, decision, notes, ref moves."""
    from gitcampaign.commands.validate import validate as run

    progress = Progress.for_cli(as_json)
    if heat:
        from gitcampaign.commands.validate import validate_heat

        decided = validate_heat(
            _repo(ctx),
            _campaign(ctx),
            full=full,
            pairs=pairs,
            probe=not no_probe,
            timeout_s=timeout_s,
            gpus=gpus,
            executor=executor,
            sweeps=sweeps,
            progress=progress,
        )
        _emit(_heat_text(decided), {**decided.to_json(), "phase_seconds": progress.phase_seconds}, as_json)
        if exit_code and decided.accepted is None:
            ctx.exit(EXIT_REJECTED)
        return
    result = run(
        _repo(ctx),
        _campaign(ctx),
        full=full,
        pairs=pairs,
        probe=not no_probe,
        timeout_s=timeout_s,
        gpus=gpus,
        executor=executor,
        progress=progress,
    )
    _emit(_validation_text(result), {**result.to_json(), "phase_seconds": progress.phase_seconds}, as_json)
    if exit_code and result.decision not in ACCEPTED:
        ctx.exit(EXIT_REJECTED)


def _heat_text(result: HeatResult) -> str:
    """Each candidate's decision (the accepted one's with its table), then what the heat did."""
    from gitcampaign.cost import duration

    parts = []
    for entry in result.rounds:
        if entry.round == result.accepted:
            parts.append(_validation_text(entry))
            continue
        ratio = f", ratio {entry.ratio:.4f}" if math.isfinite(entry.ratio) else ""
        reasons = f" ({', '.join(entry.reasons)})" if entry.reasons else ""
        parts.append(f"round {entry.round}: {entry.decision}{reasons}{ratio}")
        parts += [f"  {note}" for note in entry.notes]
    accepted = f"round {result.accepted} accepted" if result.accepted is not None else "no round accepted"
    confirmed = (
        f"; round {result.confirmed} was confirmed afresh"
        if result.confirmed not in (None, result.accepted)
        else ""
    )
    parts.append(f"heat: {accepted}{confirmed}; device time {duration(result.device_seconds)}")
    return "\n".join(parts)


def _override_text(result: Any) -> str:
    overruled = f"; {', '.join(result.overrides)} overridden" if result.overrides else ""
    return f"round {result.round}: {result.previous} -> {result.decision} (manual override, recorded in the verdict{overruled})"


@cli.command(context_settings=CONTEXT)
@click.argument("number", required=False, type=int)
@click.option("-m", "--message", "reason", default="", help="Why you override.")
@click.option(
    "--override-overfit",
    is_flag=True,
    help="Also overrule the training probe's overfit REJECT (recorded as such); no other gate is overridable.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def accept(
    ctx: click.Context, number: int | None, reason: str, override_overfit: bool, as_json: bool
) -> None:
    """Override: accept the last (or given) round over its speed rules (never over a gate)."""
    from gitcampaign.commands.override import accept as run

    result = run(_repo(ctx), _campaign(ctx), number, reason, override_overfit)
    _emit(_override_text(result), result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("number", required=False, type=int)
@click.option("-m", "--message", "reason", default="", help="Why you override.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def rollback(ctx: click.Context, number: int | None, reason: str, as_json: bool) -> None:
    """Override: reject the last (or given) round by hand; an accepted one is reverted on main."""
    from gitcampaign.commands.override import rollback as run

    result = run(_repo(ctx), _campaign(ctx), number, reason)
    _emit(_override_text(result), result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--fetch", is_flag=True, help="Fetch each remote's copy first (else: as of the last push/pull)."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, fetch: bool, as_json: bool) -> None:
    """Where the campaign stands and what to run next."""
    from gitcampaign.commands.status import status as run

    result = run(_repo(ctx), _campaign(ctx), fetch)
    _emit(status_text(result), result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recover(ctx: click.Context, as_json: bool) -> None:
    """Finish what a killed command left (a branch move, running harnesses, scratch worktrees)."""
    from gitcampaign.commands.recover import recover as run

    result = run(_repo(ctx))
    _emit("\n".join(result.done) or "nothing left unfinished", result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--op",
    "every_campaign",
    is_flag=True,
    help="Every campaign on this campaign's target op, one table each.",
)
@click.option(
    "--rejected",
    is_flag=True,
    help="Every rejected round: its hypothesis, reasons and per-shape deltas (what not to try again).",
)
@click.option(
    "--grep", default="", metavar="WORDS", help="With --rejected: those holding every one of WORDS."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def log(ctx: click.Context, every_campaign: bool, rejected: bool, grep: str, as_json: bool) -> None:
    """The lineage table: every round, its decision and its effect."""
    from gitcampaign.commands.log import log as run
    from gitcampaign.commands.log import op_log
    from gitcampaign.commands.log import rejected as rejected_rounds
    from gitcampaign.heat import listing
    from gitcampaign.lineage import log_table, one_line

    if grep and not rejected:
        raise CampaignError("--grep filters the rejected rounds", "git campaign log --rejected --grep WORDS")
    if rejected:
        listed = rejected_rounds(_repo(ctx), _campaign(ctx), grep)
        table = tabulate(
            [
                [
                    r.round,
                    ", ".join(r.reasons),
                    f"{r.ratio:.4f}" if r.ratio is not None else "-",
                    one_line(r.hypothesis),
                    r.deltas_text(),
                ]
                for r in listed.rounds
            ],
            headers=["round", "reasons", "ratio", "hypothesis", "per-shape deltas"],
        )
        _emit(
            table if listed.rounds else "no rejected round" + (f" holds {grep!r}" if grep else ""),
            listed.to_json(),
            as_json,
        )
        return
    if every_campaign:
        found = op_log(_repo(ctx), _campaign(ctx))
        text = "\n\n".join(
            f"campaign {c.campaign} ({found.op})\n{log_table(c.rows, c.metric)}" for c in found.campaigns
        )
        if found.not_imported:
            text += "\n\nnot imported, so not above (`git campaign import PATH`): " + ", ".join(
                found.not_imported
            )
        _emit(text, found.to_json(), as_json)
        return
    result = run(_repo(ctx), _campaign(ctx))
    heat = f"\nopen heat: {listing(result.heat)} (`git campaign validate --heat`)" if result.heat else ""
    _emit(log_table(result.rows, result.metric) + heat, result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("number", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, number: int, as_json: bool) -> None:
    """One round: hypothesis, diff stat, CSV, verdict."""
    from gitcampaign.commands.show import show as run

    result = run(_repo(ctx), _campaign(ctx), number)
    _emit(show_text(result), result.to_json(), as_json)


def analyze_text(result: Any) -> str:
    """The verdicts, the kernel breakdown (with ncu's figures where it ran), and where it is noted."""
    from gitcampaign.roofline import NOT_MEASURED

    ceilings = result.ceilings
    where = f"round {result.round}" if result.round is not None else "the incumbent"
    source = ceilings.get("source", NOT_MEASURED)
    lines = [f"{where} ({result.commit[:12]}) profiled on {result.device}; ceilings: {source}"]
    lines += [f"  {label}: {entry['verdict']}" for label, entry in result.shapes.items()]
    rows = []
    for label, entry in result.shapes.items():
        for phase, found in entry.items():
            if phase == "verdict":
                continue
            for kernel in found["kernels"]:
                figures = kernel.get("ncu") or {}
                stalls = ", ".join(reason for reason, _ in figures.get("top_stalls", []))

                def pct(key: str, figures: dict[str, Any] = figures) -> str:
                    value = figures.get(key)
                    return f"{value:.0f}" if isinstance(value, (int, float)) and math.isfinite(value) else ""

                name = kernel["name"] if len(kernel["name"]) <= 48 else kernel["name"][:45] + "..."
                rows.append(
                    [
                        label,
                        phase,
                        name,
                        f"{kernel['launches_per_call']:g}",
                        f"{kernel['gpu_ms_per_call']:.4g}",
                        f"{kernel['share']:.2f}",
                        pct("sm_throughput_pct"),
                        pct("dram_throughput_pct"),
                        pct("achieved_occupancy_pct"),
                        pct("registers_per_thread"),
                        pct("shared_mem_per_block_bytes"),
                        pct("local_memory_instructions_per_launch"),
                        stalls,
                    ]
                )
    headers = ["shape", "phase", "kernel", "launches/call", "GPU ms/call", "share"]
    ncu_headers = ["SM %", "DRAM %", "occupancy %", "regs", "smem B", "local ld/st", "top stalls"]
    if result.ncu.get("ran"):
        lines.append(tabulate(rows, headers=headers + ncu_headers))
    else:
        lines.append(tabulate([row[: len(headers)] for row in rows], headers=headers))
        lines.append(f"ncu: not run ({result.ncu.get('why', '?')})")
    if result.isa is not None:
        lines += [
            f"isa: {listing['sass']} ({listing['instructions']} instructions)"
            for listing in result.isa["listings"]
        ]
    lines += [f"warning: {warning}" for warning in result.warnings]
    lines.append(f"recorded in {C.NOTES_PROFILE} on {result.commit[:12]}; run files in {result.run_dir}")
    return "\n".join(lines)


@cli.command(context_settings=CONTEXT)
@click.argument("number", required=False, type=int)
@click.option(
    "--shape", default=None, help="Profile this target shape only (default: the representative ones)."
)
@click.option(
    "--ncu/--no-ncu",
    "use_ncu",
    default=None,
    help="Also measure each kernel under Nsight Compute (default: when `ncu` is on PATH and a GPU is used).",
)
@click.option("--isa", "with_isa", is_flag=True, help="Also disassemble the compiled Triton kernels (SASS).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def analyze(
    ctx: click.Context,
    number: int | None,
    shape: str | None,
    use_ncu: bool | None,
    with_isa: bool,
    as_json: bool,
) -> None:
    """ANALYZE: profile the incumbent (or round N): kernels, host vs GPU, share of the roofline, the bound."""
    from gitcampaign.commands.analyze import analyze as run

    progress = Progress.for_cli(as_json)
    result = run(_repo(ctx), _campaign(ctx), number, shape, use_ncu, with_isa, progress)
    _emit(analyze_text(result), result.to_json(), as_json)


# The report's acceptance outcome as the terminal says it (--json keeps the word).
ACCEPTANCE_TEXT = {"unchanged": "not run (the final head changes nothing outside the campaign's folder)"}


@cli.command(context_settings=CONTEXT)
@click.option("--force", is_flag=True, help="T4: stop the campaign here.")
@click.option("--pairs", default=None, type=click.IntRange(min=1))
@click.option(
    "--record-failures",
    is_flag=True,
    help="Commit the report even when the acceptance suite fails or the final diff holds changes"
    " outside the accepted rounds, recorded as such.",
)
@click.option(
    "--next",
    "next_hypotheses",
    multiple=True,
    metavar="HYPOTHESIS",
    help="A hypothesis for the next round, listed under Next hypotheses (once for each).",
)
@click.option(
    "--html",
    is_flag=True,
    help="Instead: write one self-contained HTML page of the campaign as it stands (measures nothing).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="File for --html (default: NAME-report.html)."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def report(
    ctx: click.Context,
    force: bool,
    pairs: int | None,
    record_failures: bool,
    next_hypotheses: tuple[str, ...],
    html: bool,
    output: str | None,
    as_json: bool,
) -> None:
    """REPORT: final full validation and campaigns/NAME/REPORT.md (+ REPORT.svg) on the accepted line."""
    if html:
        from gitcampaign.html_report import write_report

        if force or pairs or record_failures or next_hypotheses:
            raise click.UsageError(
                "--html writes the page and measures nothing: drop --force, --pairs, --record-failures and --next"
            )
        path = write_report(_repo(ctx), _campaign(ctx), Path(output) if output else None)
        _emit(f"HTML report written: {path}", {"path": str(path)}, as_json)
        return
    from gitcampaign.commands.report import report as run

    progress = Progress.for_cli(as_json)
    result = run(
        _repo(ctx),
        _campaign(ctx),
        force=force,
        pairs=pairs,
        record_failures=record_failures,
        progress=progress,
        next_hypotheses=next_hypotheses,
    )
    text = (
        f"report committed at {result.commit[:12]}: {result.path}\nfinal/baseline {result.ratio:.4f}x\n"
        + "\n".join([*result.termination, *(f"warning: {w}" for w in result.warnings)])
        + f"\nacceptance suite: {ACCEPTANCE_TEXT.get(result.acceptance, result.acceptance)};"
        f" final diff only the accepted rounds: {result.clean_diff}"
    )
    _emit(text, {**result.to_json(), "phase_seconds": progress.phase_seconds}, as_json)


@cli.command(context_settings=CONTEXT)
@click.option("--shape", default=None, help="Plot this shape's speedup per round instead of the aggregate.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="PNG or SVG file (default: NAME[-SHAPE]-speedup.png).",
)
@click.pass_context
def plot(ctx: click.Context, shape: str | None, output: str | None) -> None:
    """Speedup per round (accepted/rejected marked, noise band shaded) and per-shape ratios (needs [plot])."""
    from gitcampaign.plot import draw

    click.echo(f"plot written: {draw(_repo(ctx), _campaign(ctx), shape, Path(output) if output else None)}")


def _next_text(outcome: Any) -> str:
    from gitcampaign.heat_validation import HeatResult
    from gitcampaign.next_step import STEP_ANALYZE, STEP_BASELINE, STEP_REPORT, STEP_ROUND, STEP_VALIDATE

    lines = []
    for done in outcome.performed:
        result = done.result
        if done.step == STEP_VALIDATE:
            lines.append(_heat_text(result) if isinstance(result, HeatResult) else _validation_text(result))
        elif done.step == STEP_ANALYZE:
            lines.append(analyze_text(result))
        elif done.step == STEP_BASELINE:
            lines.append(f"baseline recorded at {result.commit[:12]}: aggregate {result.aggregate:.6g}")
        elif done.step == STEP_ROUND:
            lines.append(f"round {result.number} open on {result.branch} (from {result.base[:12]})")
        elif done.step == STEP_REPORT:
            lines.append(f"report committed at {result.commit[:12]}: {result.path}")
        else:
            lines.append(f"done: {done.step}")
    step = outcome.then
    lines += [f"next: {step.command}", f"  why: {step.why}"]
    return "\n".join(lines)


@cli.command("next", context_settings=CONTEXT)
@click.option("--run", "perform", is_flag=True, help="Perform the step instead of printing it.")
@click.option(
    "-m",
    "--message",
    "hypothesis",
    default=None,
    help="With --run: then open the next round with this hypothesis.",
)
@click.option("--exit-code", is_flag=True, help="With --run: where it validates, " + _EXIT_CODE_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def next_(ctx: click.Context, perform: bool, hypothesis: str | None, exit_code: bool, as_json: bool) -> None:
    """The next step of the loop (prints it; --run performs it). A round: edit, commit, next --run -m IDEA."""
    from gitcampaign.loop import NextRun, run_next
    from gitcampaign.next_step import STEP_ROUND, STEP_VALIDATE, next_step

    if perform:
        outcome = run_next(_repo(ctx), _campaign(ctx), hypothesis)
    else:
        outcome = NextRun(next_step(_repo(ctx), _campaign(ctx)))
    _emit(_next_text(outcome), outcome.to_json(), as_json)
    if not as_json and any(done.step == STEP_ROUND for done in outcome.performed):
        _echo_rejected_elsewhere(ctx)
    validated = [done.result for done in outcome.performed if done.step == STEP_VALIDATE]
    if exit_code and any(result.decision not in ACCEPTED for result in validated):
        ctx.exit(EXIT_REJECTED)


@cli.command(context_settings=CONTEXT)
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve the campaign tools over MCP on stdio, for agent tools (needs the [mcp] extra)."""
    from gitcampaign.mcp_server import serve

    serve(_repo(ctx), _campaign(ctx))


@cli.command(context_settings=CONTEXT)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(git campaign completion bash)" in ~/.bashrc."""
    from gitcampaign.completion import script

    click.echo(script(cli, shell))


@cli.command(context_settings=CONTEXT)
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1, 3))
@click.pass_context
def demo(ctx: click.Context, directory: str | None, rounds: int) -> None:
    """The whole loop on a scratch repo with the GEMM kernel (CPU when there is no GPU)."""
    from gitcampaign.demo_flow import demo as run

    target = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="gitcampaign-demo-"))
    run(target, rounds=rounds, echo=click.echo, progress=Progress.for_cli(as_json=False))


@cli.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True)
def lint(paths: tuple[str, ...], as_json: bool) -> None:
    """Static anti-cheat check (identity-keyed caches, patched timers, reference fallbacks, ...)."""
    from gitcampaign.commands.lint import run_lint

    code, text = run_lint([Path(p) for p in (paths or (".",))], as_json)
    click.echo(text)
    click.get_current_context().exit(code)


@cli.group(context_settings=CONTEXT)
def hooks() -> None:
    """Git hooks that enforce the gates (install, or run one)."""


@hooks.command("install", context_settings=CONTEXT)
@click.pass_context
def hooks_install(ctx: click.Context) -> None:
    """Install pre-commit, prepare-commit-msg and commit-msg (chaining existing hooks)."""
    from gitcampaign import git as g
    from gitcampaign.hook_install import install_hooks

    for line in install_hooks(g.root(g.open_repo(_repo(ctx)))):
        click.echo(line)


@hooks.command("run", context_settings=CONTEXT)
@click.argument("hook", type=click.Choice(["pre-commit", "prepare-commit-msg", "commit-msg"]))
@click.argument("args", nargs=-1)
@click.pass_context
def hooks_run(ctx: click.Context, hook: str, args: tuple[str, ...]) -> None:
    """Run one hook's logic (what the installed hook scripts call)."""
    from gitcampaign import git as g
    from gitcampaign.commands import hooks as logic

    code, text = logic.run_hook(hook, g.root(g.open_repo(_repo(ctx))), list(args))
    if text:
        click.echo(text, err=True)
    ctx.exit(code)


def _sync_text(result: Any, verb: str) -> str:
    lines = [f"{verb} campaign {result.campaign} ({result.source}):"]
    lines += [f"  {line}" for line in result.updated] or ["  nothing to move: already up to date"]
    lines += [f"  merge: {line}" for line in result.merges]
    if result.waiting:
        lines.append(
            f"  {result.source} has news for {len(result.waiting)} ref(s): git campaign pull {result.source}"
        )
    return "\n".join(lines)


def _arrived(ctx: click.Context, result: Any, verb: str, as_json: bool) -> None:
    """What `pull` and `import` print: the refs moved, and whether this clone has approved the
    commands the campaign brought (until it does, none of them runs)."""
    from gitcampaign import trust
    from gitcampaign.campaign import opened

    campaign = opened(_repo(ctx), result.campaign)
    commands = trust.pending(campaign)
    text = _sync_text(result, verb)
    if commands is not None:
        text += f"\n{trust.refusal(campaign, commands)}\nhint: {trust.approve_hint(campaign.name)}"
    _emit(text, {**result.to_json(), "commands_approved": commands is None}, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@click.option("--campaign", "-c", "name", default=None, help="Campaign name (also accepted before the verb).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def push(ctx: click.Context, remote: str | None, name: str | None, as_json: bool) -> None:
    """Publish the campaign (branches, rejected pins, notes) to REMOTE, never overwriting news there."""
    from gitcampaign.commands.push import push as run

    result = run(_repo(ctx), name or _campaign(ctx), remote)
    _emit(_sync_text(result, "push"), result.to_json(), as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@click.option("--campaign", "-c", "name", default=None, help="Campaign name (also accepted before the verb).")
@click.option(
    "--supersede",
    is_flag=True,
    help="Main diverged: keep REMOTE's line, mark your own acceptances superseded.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def pull(ctx: click.Context, remote: str | None, name: str | None, supersede: bool, as_json: bool) -> None:
    """Bring the campaign from REMOTE: fast-forward branches, add pins, merge notes."""
    from gitcampaign.commands.pull import pull as run

    result = run(_repo(ctx), name or _campaign(ctx), remote, supersede)
    _arrived(ctx, result, "pull", as_json)


@cli.command("export", context_settings=CONTEXT)
@click.argument("name", required=False)
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--self-contained", is_flag=True, help="Also carry the project history the campaign started from."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def export_(
    ctx: click.Context, name: str | None, file: str | None, self_contained: bool, as_json: bool
) -> None:
    """Write the campaign as a git bundle (default campaigns/NAME/lineage.bundle)."""
    from gitcampaign.commands.bundle import export as run

    result = run(_repo(ctx), name or _campaign(ctx), Path(file) if file else None, self_contained)
    text = f"campaign {result.campaign}: {len(result.refs)} refs in {result.path} ({result.size_bytes} bytes)"
    if result.prerequisite:
        text += (
            f"\nimport needs the project commit {result.prerequisite[:12]} (any clone of the project has it)"
        )
    _emit(text, result.to_json(), as_json)


@cli.command("import", context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def import_(ctx: click.Context, file: str, as_json: bool) -> None:
    """Restore a campaign from a bundle written by `export` (same commits, same notes)."""
    from gitcampaign.commands.bundle import import_bundle as run

    result = run(_repo(ctx), Path(file))
    _arrived(ctx, result, "import", as_json)


@cli.command(context_settings=CONTEXT)
@click.option("--campaign", "-c", "name", default=None, help="Campaign name (also accepted before the verb).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def trust(ctx: click.Context, name: str | None, as_json: bool) -> None:
    """Approve, in this clone, the commands of a campaign that came from elsewhere (pull, import)."""
    from gitcampaign.commands.trust import trust as run

    result = run(_repo(ctx), name or _campaign(ctx))
    what = "approved" if result.newly else "already approved"
    text = "\n".join([f"campaign {result.campaign}: {what} in this clone, these commands:", *result.lines()])
    _emit(text, result.to_json(), as_json)


def crash_log_path() -> Path:
    """A fresh file per crash in the user's own state folder (never a name shared by all users)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    folder = Path(state) / "gitcampaign"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="gitcampaign-crash-"))
    return folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def main(argv: list[str] | None = None) -> int:
    """Entry point: the one place that turns outcomes into exit codes."""
    previous = signal.signal(signal.SIGTERM, process.terminate)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", CampaignWarning)
            warnings.showwarning = _WarningPrinter()
            code = cli.main(
                args=argv, prog_name="git campaign", complete_var=COMPLETE_VAR, standalone_mode=False
            )
    except CampaignError as exc:
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return EXIT_USER_ERROR
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except process.Terminated:
        click.echo(
            "terminated (SIGTERM): measurements stopped and scratch worktrees removed; refs and notes are "
            "as the last completed step left them\nhint: `git campaign status` shows where the campaign "
            "stands; the next command finishes or redoes the interrupted one",
            err=True,
        )
        return EXIT_TERMINATED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USER_ERROR
    except Exception:
        log = crash_log_path()
        with open(log, "w", opener=lambda path, flags: os.open(path, flags, 0o600)) as handle:
            handle.write(traceback.format_exc())
        click.echo(f"internal error (a bug in gitcampaign); traceback written to {log}", err=True)
        return EXIT_BUG
    finally:
        signal.signal(signal.SIGTERM, previous)
        process.clear_termination()
    return code if isinstance(code, int) else 0


class _WarningPrinter:
    """What the library skipped and went on without, as `warning: ...` lines on stderr, each once
    per command (the lineage is read several times by one command)."""

    def __init__(self) -> None:
        self.shown: set[str] = set()

    def __call__(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not issubclass(category, CampaignWarning):
            click.echo(warnings.formatwarning(message, category, filename, lineno).rstrip("\n"), err=True)
        elif str(message) not in self.shown:
            self.shown.add(str(message))
            click.echo(f"warning: {message}", err=True)


def entry() -> int:
    """The `git-campaign` executable: first make sure `git campaign --help` (= `man git-campaign`)
    finds the page after an editable install, which installs no data files."""
    install_man_page()
    return main()


def install_man_page() -> Path | None:
    """Copy the checkout's page into a virtual environment's share/man/man1 when it is missing or
    stale there; returns the path written.

    git turns `git campaign --help` into `man git-campaign`. The wheel puts the page in
    `share/man/man1` of the installation prefix, where man finds it from PATH (`<prefix>/bin` ->
    `<prefix>/share/man`); an editable install (PEP 660) installs no data files, so there this
    copies it on the first run. A wheel install already has it, and nothing here may stop the
    command, so an unwritable prefix is left alone."""
    source = Path(__file__).resolve().parents[1] / "man" / MAN_PAGE
    if sys.prefix == sys.base_prefix or not source.is_file():
        return None
    target = Path(sys.prefix) / "share" / "man" / "man1" / MAN_PAGE
    try:
        content = source.read_bytes()
        if target.is_file() and target.read_bytes() == content:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    except OSError:
        return None
    return target


if __name__ == "__main__":
    sys.exit(main())
