"""Plots of a campaign (matplotlib, the optional `[plot]` extra): speedup per round and per-shape ratios.

The top panel follows the accepted line: the incumbent's speedup over the baseline as a step, the A/A
noise floor measured at BASELINE shaded around it (a candidate inside the band is indistinguishable
from noise), accepted rounds as green dots, rejected ones as red crosses at the speedup they measured,
and rounds rejected by a gate (a failed check, lint finding or protected file: no speed ratio) as
hollow red squares on the incumbent's level.
The bottom panel is the final state per shape: final/baseline ratio, one bar per shape.

Speedups are products of paired ratios, as in the lineage table: absolute numbers of runs on
different days are never compared.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import lineage, verdict
from gitcampaign.campaign import Campaign, Round, resolve
from gitcampaign.errors import CampaignError
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Phase, Status

FORMATS = ("png", "svg")
INSTALL_HINT = 'install the plotting extra: pip install "gitcampaign[plot]" (or pip install matplotlib)'


@dataclass
class Point:
    round: int
    status: str
    speedup: float  # the candidate's speedup over the baseline (the incumbent's level without a ratio)
    measured: bool


@dataclass
class Series:
    """One quantity over the rounds: the aggregate, or one shape's ratio."""

    title: str
    points: list[Point]
    levels: list[tuple[int, float]]  # (round, incumbent speedup after that round), baseline first
    noise: float


@dataclass
class PlotData:
    campaign: str
    metric: str
    series: Series
    shape_ratios: dict[str, float]  # final/baseline per shape
    shape_source: str
    highlight: str | None = None


def _ratio(decision: VerdictDoc | None, shape: str | None) -> float | None:
    if not decision:
        return None
    if shape is None:
        return decision.ratio if decision.ratio is not None and math.isfinite(decision.ratio) else None
    figures = (decision.shapes or {}).get(shape)
    return figures.measured_ratio if figures else None


def series(campaign: Campaign, shape: str | None = None, rounds: list[Round] | None = None) -> Series:
    """Speedup per round of the aggregate (or of one shape) from the verdict notes; `rounds` is the
    campaign's lineage when the caller has read it already."""
    manifest = campaign.manifest()
    noise_floor = manifest.noise_floor
    if shape is not None and shape not in [s.label for s in manifest.shapes()]:
        raise CampaignError(
            f"campaign {campaign.name} has no shape {shape!r}",
            "pick one of: " + ", ".join(s.label for s in manifest.shapes()),
        )
    if noise_floor is None:
        noise = 0.0
    else:
        noise = (
            noise_floor.aggregate if shape is None else noise_floor.shapes.get(shape, noise_floor.aggregate)
        )
    if rounds is None:
        _, rounds = campaign.lineage()
    points = [Point(1, Status.BASELINE, 1.0, True)]
    levels = [(1, 1.0)]
    for step in lineage.cumulative(rounds, lambda decision: _ratio(decision, shape)):
        entry = step.entry
        if entry.status not in (Status.ACCEPTED, Status.REJECTED):
            continue
        # Without a ratio (a gate decided) the round sits on the incumbent's level, unchanged by it.
        speedup = step.speedup if step.speedup is not None else step.incumbent
        points.append(Point(entry.number, entry.status, speedup, step.speedup is not None))
        levels.append((entry.number, step.incumbent))
    title = "aggregate (geomean over shapes)" if shape is None else f"shape {shape}"
    return Series(title, points, levels, noise)


def final_shape_ratios(campaign: Campaign, rounds: list[Round] | None = None) -> tuple[dict[str, float], str]:
    """Final/baseline per shape: the report's full validation when the accepted head carries one,
    else the product of the accepted rounds' paired ratios (shapes measured in every accepted round);
    `rounds` is the campaign's lineage when the caller has read it already."""
    head = campaign.accepted_head()
    for document in reversed(verdict.read(campaign.repo, head)):
        if document.phase == Phase.REPORT and document.campaign == campaign.name:
            measured = {
                label: float(v.ratio) for label, v in (document.shapes or {}).items() if v.ratio is not None
            }
            return measured, "final full validation (report)"
    manifest = campaign.manifest()
    if rounds is None:
        _, rounds = campaign.lineage()
    accepted = [entry for entry in rounds if entry.status == Status.ACCEPTED]
    labels = manifest.representative_shapes or [s.label for s in manifest.shapes()]
    ratios = {label: 1.0 for label in labels}
    for entry in accepted:
        shapes = (entry.decision.shapes if entry.decision else None) or {}
        for label in list(ratios):
            value = shapes[label].ratio if label in shapes else None
            if value is not None:
                ratios[label] *= value
            else:
                del ratios[label]  # not measured in every accepted round: no honest product
    return ratios, "product of the accepted rounds' paired ratios"


def plot_data(campaign: Campaign, shape: str | None = None, rounds: list[Round] | None = None) -> PlotData:
    if rounds is None:
        _, rounds = campaign.lineage()
    ratios, source = final_shape_ratios(campaign, rounds)
    return PlotData(
        campaign.name,
        campaign.manifest().primary_metric,
        series(campaign, shape, rounds),
        ratios,
        source,
        shape,
    )


def require_matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise CampaignError("plots need matplotlib, which is not installed", INSTALL_HINT) from None
    return matplotlib


def available() -> bool:
    try:
        require_matplotlib()
    except CampaignError:
        return False
    return True


def render(data: PlotData, fmt: str, shapes_panel: bool = True) -> bytes:
    """The figure as PNG or SVG bytes (SVG with text as text and no date, so it diffs in git);
    `shapes_panel=False` draws the rounds alone."""
    if fmt not in FORMATS:
        raise CampaignError(f"cannot draw a .{fmt} file", "name the output *.png or *.svg")
    matplotlib = require_matplotlib()
    from matplotlib.figure import Figure

    settings = {"svg.hashsalt": "gitcampaign", "svg.fonttype": "none", "font.size": 9}
    with matplotlib.rc_context(settings):
        if shapes_panel:
            figure = Figure(figsize=(8, 7.5), layout="constrained")
            top, bottom = figure.subplots(2, 1, height_ratios=[3, 2])
            _draw_shapes(bottom, data)
        else:
            figure = Figure(figsize=(8, 4.2), layout="constrained")
            top = figure.subplots()
        _draw_rounds(top, data)
        buffer = io.BytesIO()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        figure.savefig(buffer, format=fmt, dpi=110, metadata=metadata)
    return buffer.getvalue()


def write(data: PlotData, path: Path) -> Path:
    path.write_bytes(render(data, path.suffix.lstrip(".").lower()))
    return path


def _draw_rounds(axes: Any, data: PlotData) -> None:
    series_ = data.series
    rounds = [number for number, _ in series_.levels]
    levels = [level for _, level in series_.levels]
    last = max(rounds) + 0.5
    xs, ys = [*rounds, last], [*levels, levels[-1]]
    band = series_.noise
    # The floor is a fraction of a ratio (log space): x(1 + floor) up, /(1 + floor) down, never below 0.
    axes.fill_between(
        xs,
        [y / (1 + band) for y in ys],
        [y * (1 + band) for y in ys],
        step="post",
        color="#9ab",
        alpha=0.35,
        linewidth=0,
        label=f"noise floor (A/A, ±{100 * band:.2f}%)",
    )
    axes.step(xs, ys, where="post", color="#236", linewidth=1.8, label="incumbent (accepted line)")
    groups = {
        Status.BASELINE: (
            [p for p in series_.points if p.status == Status.BASELINE],
            "o",
            "#236",
            str(Status.BASELINE),
        ),
        Status.ACCEPTED: (
            [p for p in series_.points if p.status == Status.ACCEPTED],
            "o",
            "#2a2",
            str(Status.ACCEPTED),
        ),
        Status.REJECTED: (
            [p for p in series_.points if p.status == Status.REJECTED and p.measured],
            "x",
            "#c22",
            str(Status.REJECTED),
        ),
    }
    for points, marker, colour, label in groups.values():
        if points:
            axes.scatter(
                [p.round for p in points],
                [p.speedup for p in points],
                marker=marker,
                color=colour,
                s=46,
                zorder=3,
                label=label,
            )
    gated = [p for p in series_.points if p.status == Status.REJECTED and not p.measured]
    if gated:
        axes.scatter(
            [p.round for p in gated],
            [p.speedup for p in gated],
            marker="s",
            facecolors="none",
            edgecolors="#c22",
            s=46,
            zorder=3,
            label="rejected by a gate (no speed ratio)",
        )
    axes.axhline(1.0, color="#888", linewidth=0.8, linestyle=":")
    axes.set_xlim(0.5, last)
    axes.set_xticks(rounds)
    axes.set_xlabel("round (1 = baseline)")
    axes.set_ylabel("speedup over baseline (x)")
    axes.set_title(f"campaign {data.campaign}: {data.metric}, {series_.title}")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="best", fontsize=8)


def _draw_shapes(axes: Any, data: PlotData) -> None:
    labels = list(data.shape_ratios)
    if not labels:
        axes.text(0.5, 0.5, "no per-shape ratios yet", ha="center", va="center", transform=axes.transAxes)
        axes.set_axis_off()
        return
    ratios = [data.shape_ratios[label] for label in labels]
    colours = ["#2a2" if ratio >= 1 else "#c22" for ratio in ratios]
    bars = axes.barh(labels, [ratio - 1 for ratio in ratios], left=1, color=colours, height=0.6)
    for bar, label in zip(bars, labels, strict=True):
        if label == data.highlight:
            bar.set_edgecolor("black")
            bar.set_linewidth(1.5)
    axes.bar_label(bars, labels=[f"{ratio:.3f}x" for ratio in ratios], padding=3, fontsize=8)
    axes.axvline(1.0, color="#444", linewidth=0.8)
    axes.invert_yaxis()
    low, high = min([*ratios, 1.0]), max([*ratios, 1.0])
    pad = 0.15 * (high - low) or 0.05
    axes.set_xlim(max(0.0, low - pad), high + pad)
    axes.set_xlabel("final / baseline (x)")
    axes.set_title(f"final state per shape: {data.shape_source}")
    axes.grid(axis="x", alpha=0.3)


def report_plot(campaign: Campaign, shape_ratios: dict[str, float]) -> bytes:
    """The report's figure (REPORT_PLOT_FILE), with the per-shape panel from its final full validation."""
    data = PlotData(
        campaign.name,
        campaign.manifest().primary_metric,
        series(campaign),
        shape_ratios,
        "final full validation (report)",
    )
    return render(data, Path(C.REPORT_PLOT_FILE).suffix.lstrip("."))


def draw(repo_path: Path, campaign_name: str | None, shape: str | None, output: Path | None) -> Path:
    """`git campaign plot`: the report's figure for the campaign as it stands, drawn on demand."""
    require_matplotlib()
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    target = output or Path(f"{campaign.name}{'-' + shape if shape else ''}-speedup.png")
    return write(plot_data(campaign, shape), target)
