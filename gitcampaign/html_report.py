"""`git campaign report --html`: one self-contained page for a reviewer (no network, no other files).

The lineage table, the plots (PNG as data URIs), for each round its hypothesis, diffstat,
verdict and per-shape deltas, and the latest profile of each profiled commit (`git campaign
analyze`), all read from refs and notes. It measures nothing and commits nothing,
so a reviewer can write it at any point of a campaign.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path

from gitcampaign import git as g
from gitcampaign import plot, profile, roofline, verdict
from gitcampaign.campaign import Campaign, Round, resolve
from gitcampaign.lineage import LineageRow, rows_of
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Status

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.accepted td.status { color: #186a18; font-weight: 600; }
tr.rejected td.status { color: #b21e1e; font-weight: 600; }
.up { color: #186a18; } .down { color: #b21e1e; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; font-size: 12px; }
section.round { border-top: 1px solid #ddd; margin-top: 1.5em; }
img { max-width: 100%; border: 1px solid #eee; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: object, spec: str = ".4g") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def _change(ratio: object) -> str:
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
        return "-"
    css = "up" if ratio >= 1 else "down"
    return f'<span class="{css}">{100 * (ratio - 1):+.2f}%</span>'


def _image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img class="plot" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _lineage_table(rows: list[LineageRow], metric: str) -> str:
    head = "".join(
        f"<th>{_e(h)}</th>"
        for h in ("round", "status", "decision", "hypothesis", metric, "vs baseline", "key per-shape deltas")
    )
    body = "".join(
        f'<tr class="lineage {_e(row.status)}"><td class="num"><a href="#round-{row.round}">{row.round}</a></td>'
        f'<td class="status">{_e(row.status)}</td><td>{_e(row.decision)}</td><td>{_e(row.hypothesis)}</td>'
        f'<td class="num">{_num(row.metric)}</td><td class="num">{_num(row.vs_baseline, ".3f")}</td>'
        f"<td>{_e(row.key_deltas)}</td></tr>"
        for row in rows
    )
    return f'<table id="lineage"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _shape_table(decision: VerdictDoc) -> str:
    shapes = decision.shapes or {}
    if not shapes:
        return "<p>No per-shape measurement (a gate decided before anything was timed).</p>"
    rows = "".join(
        f"<tr><td>{_e(label)}</td><td>{_e(v.check or '')}</td>"
        f'<td class="num">{_num(v.incumbent)}</td><td class="num">{_num(v.candidate)}</td>'
        f'<td class="num">{_change(v.ratio)}</td></tr>'
        for label, v in shapes.items()
    )
    return (
        '<table class="shapes"><thead><tr><th>shape</th><th>check</th><th>incumbent</th>'
        f"<th>candidate</th><th>change</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _round_section(campaign: Campaign, entry: Round) -> str:
    decision = entry.decision
    parts = [
        f'<section class="round" id="round-{entry.number}">',
        f"<h3>Round {entry.number}: {_e(entry.status)}</h3>",
        f"<p><b>Hypothesis:</b> {_e(entry.hypothesis) or '<i>none recorded</i>'}</p>",
    ]
    if entry.commit:
        parent = str((decision and decision.incumbent) or g.parent(campaign.repo, entry.commit) or "")
        stat = g.diff_stat(campaign.repo, parent, entry.commit) if parent else ""
        parts.append(f"<p><b>Commit</b> <code>{_e(entry.commit[:12])}</code></p>")
        parts.append(f'<pre class="diffstat">{_e(stat) or "(no change)"}</pre>')
    if decision:
        reasons = ", ".join(decision.reasons or []) or "none"
        ci = decision.ci or [None, None]
        parts.append(
            f"<p><b>Verdict:</b> {_e(decision.decision)} (reasons: {_e(reasons)}); aggregate ratio "
            f"{_num(decision.ratio, '.4f')}, 95% CI [{_num(ci[0], '.4f')}, {_num(ci[1], '.4f')}]"
            + (f"; transfer: {_e(decision.transfer)}" if decision.transfer else "")
            + (" <b>(manual override)</b>" if decision.override else "")
            + "</p>"
        )
        notes = decision.notes or []
        if notes:
            parts.append("<ul>" + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>")
        parts.append(_shape_table(decision))
    else:
        parts.append("<p><b>Verdict:</b> not validated yet.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _profile_section(title: str, anchor: str, doc: dict[str, object]) -> str:
    """One `analyze` document: per shape and phase the bound, the share of the limit, host and GPU
    time per call and launches; then the kernels (with ncu's throughput where it ran)."""
    shapes = doc.get("shapes")
    ceilings = doc.get("ceilings")
    source = ceilings.get("source", "?") if isinstance(ceilings, dict) else "?"
    phase_rows, kernel_rows = [], []
    for label, entry in shapes.items() if isinstance(shapes, dict) else ():
        for phase, found in entry.items():
            if not isinstance(found, dict):
                continue
            share = found.get("share_of_limit")
            phase_rows.append(
                f"<tr><td>{_e(label)}</td><td>{_e(phase)}</td><td>{_e(found.get('bound'))}"
                f"{' (host-bound)' if found.get('host_bound') else ''}</td>"
                f'<td class="num">{_e(roofline.share_text(share if isinstance(share, float) else None))}</td>'
                f"<td>{_e(found.get('limit'))}</td>"
                f'<td class="num">{_num(found.get("host_ms_per_call"))}</td>'
                f'<td class="num">{_num(found.get("gpu_ms_per_call"))}</td>'
                f'<td class="num">{_num(found.get("launches_per_call"))}</td></tr>'
            )
            for kernel in found.get("kernels") or []:
                figures = kernel.get("ncu") or {}
                kernel_rows.append(
                    f"<tr><td>{_e(label)}</td><td>{_e(phase)}</td><td><code>{_e(kernel.get('name'))}</code></td>"
                    f'<td class="num">{_num(kernel.get("launches_per_call"))}</td>'
                    f'<td class="num">{_num(kernel.get("gpu_ms_per_call"))}</td>'
                    f'<td class="num">{_num(kernel.get("share"), ".2f")}</td>'
                    f'<td class="num">{_num(figures.get("sm_throughput_pct"), ".0f")}</td>'
                    f'<td class="num">{_num(figures.get("dram_throughput_pct"), ".0f")}</td></tr>'
                )
    verdicts = "".join(f"<li>{_e(line)}</li>" for line in profile.verdicts(doc))
    return "\n".join(
        [
            f'<section class="profile" id="{_e(anchor)}"><h3>{_e(title)}</h3>',
            f"<p>Profiled {_e(doc.get('written', '?'))} on {_e(doc.get('device', '?'))} with "
            f"{_e(doc.get('profiler', '?'))}; ceilings: {_e(source)}.</p>",
            f"<ul>{verdicts}</ul>",
            '<table class="profile-phases"><thead><tr><th>shape</th><th>phase</th><th>bound</th>'
            "<th>share of the limit</th><th>limit</th><th>host ms/call</th><th>GPU ms/call</th>"
            f"<th>launches/call</th></tr></thead><tbody>{''.join(phase_rows)}</tbody></table>",
            '<table class="profile-kernels"><thead><tr><th>shape</th><th>phase</th><th>kernel</th>'
            "<th>launches/call</th><th>GPU ms/call</th><th>share</th><th>SM %</th><th>DRAM %</th></tr>"
            f"</thead><tbody>{''.join(kernel_rows)}</tbody></table>",
            "</section>",
        ]
    )


def _profiles(campaign: Campaign, rounds: list[Round], head: str) -> list[str]:
    """The latest profile of each profiled commit of the lineage: baseline, rounds, accepted head."""
    return [
        _profile_section(title, f"profile-{key}", doc)
        for title, key, doc in profile.of_lineage(campaign, rounds, head)
    ]


def render(campaign: Campaign) -> str:
    manifest = campaign.manifest()
    baseline_docs, rounds = campaign.lineage()  # read once: the table, the plots and the sections
    _, rows = rows_of(baseline_docs, rounds)
    head = campaign.accepted_head()
    data = plot.plot_data(campaign, rounds=rounds)
    figure = plot.render(data, "png")
    shape_figures = [
        _image(
            plot.render(
                plot.PlotData(**{**vars(data), "series": plot.series(campaign, label, rounds)}), "png", False
            ),
            f"speedup per round of {label}",
        )
        for label in manifest.representative_shapes
    ]
    speedup = next(
        (row.vs_baseline for row in reversed(rows) if row.status in (Status.BASELINE, Status.ACCEPTED)), None
    )
    summary = [
        f"Op <code>{_e(manifest.target_op)}</code> ({_e(manifest.target_backend)}), primary metric "
        f"<b>{_e(manifest.primary_metric)}</b>",
        f"Accepted head <code>{_e(head[:12])}</code> on <code>{_e(campaign.main_branch)}</code>; "
        f"speedup over baseline {_num(speedup, '.3f')}x",
        f"{sum(r.status == Status.ACCEPTED for r in rows)} accepted, "
        f"{sum(r.status == Status.REJECTED for r in rows)} rejected of {len(rounds)} rounds",
        f"Written {verdict.now()} by <code>git campaign report --html</code>",
    ]
    sections = [_round_section(campaign, entry) for entry in rounds if entry.commit is not None]
    profiles = _profiles(campaign, rounds, head)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>campaign {_e(campaign.name)}</title><style>{STYLE}</style></head><body>",
            f"<h1>Campaign <code>{_e(campaign.name)}</code></h1>",
            "<ul>" + "".join(f"<li>{line}</li>" for line in summary) + "</ul>",
            "<h2>Lineage</h2>",
            _lineage_table(rows, manifest.primary_metric),
            "<h2>Speedup per round and per-shape ratios</h2>",
            _image(figure, "speedup per round, and final/baseline per shape"),
            "<h2>Speedup per round of each representative shape</h2>",
            *shape_figures,
            "<h2>Rounds</h2>",
            *sections,
            "<h2>Profiles</h2>",
            *(profiles or ["<p>No commit is profiled yet (<code>git campaign analyze</code>).</p>"]),
            "</body></html>",
            "",
        ]
    )


def write_report(repo_path: Path, campaign_name: str | None, output: Path | None) -> Path:
    """`git campaign report --html`: the page for the campaign as it stands (default NAME-report.html)."""
    plot.require_matplotlib()
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    target = output or Path(f"{campaign.name}-report.html")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(campaign), encoding="utf-8")
    return target
