"""Reading the harness CSV: the one reader BASELINE and every VALIDATE share (docs/harness.md).

The header is compared byte for byte with the frozen one; a drifted header, a missing or partial
row, or an unknown Check value stops the command instead of silently disabling the per-shape regression rule.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

from gitcampaign import constants as C
from gitcampaign.errors import CampaignError

# Ceilings no single GPU reaches (B200 dense FP4 is about 10 PFLOP/s, HBM3e about 8 TB/s): a figure
# above one comes from a broken timer (a 1e-12 ms "kernel"), not from a fast kernel.
MAX_TFLOPS = 20_000.0
MAX_GBS = 100_000.0
_CEILINGS = {
    "Forward TFLOPS": MAX_TFLOPS,
    "Backward TFLOPS": MAX_TFLOPS,
    C.METRIC_STEP: MAX_TFLOPS,
    C.METRIC_GBS: MAX_GBS,
    C.METRIC_BWD_GBS: MAX_GBS,
}


@dataclass(frozen=True)
class BenchRow:
    label: str
    check: str
    values: dict[str, float]

    def metric(self, metric: str) -> float:
        """The primary metric of this row; Combined Step TFLOPS is derived (docs/harness.md)."""
        if metric == C.METRIC_STEP:
            step_ms = self.step_ms()
            flops = 6.0 * self.values["M"] * self.values["N"] * self.values["K"]
            return flops / (step_ms * 1e-3) / 1e12 if step_ms > 0 else math.nan
        return self.values.get(metric, math.nan)

    def step_ms(self) -> float:
        return self.values.get("Forward Time (ms)", math.nan) + self.values.get(
            "Backward Time (ms)", math.nan
        )

    @property
    def passed(self) -> bool:
        return self.check == C.CHECK_PASS


@dataclass(frozen=True)
class BenchTable:
    header: str
    rows: list[BenchRow]
    raw: bytes

    def by_label(self) -> dict[str, BenchRow]:
        return {row.label: row for row in self.rows}


def parse_csv(
    raw: bytes,
    source: str,
    expected_labels: list[str] | None = None,
    frozen_header: str | None = None,
    header_hint: str = "",
) -> BenchTable:
    """Parse a harness CSV; with `frozen_header`, a header differing by one byte is the first error
    (`header_hint` says how this campaign gets it back)."""
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if not lines:
        raise CampaignError(
            f"{source} is empty: the harness wrote no CSV", "run the quick command by hand to see why"
        )
    header = lines[0]
    if frozen_header is not None:
        require_header(header, frozen_header, source, header_hint)
    columns = header.split(",")
    for required in ("label", "Check"):
        if required not in columns:
            raise CampaignError(
                f"{source}: header has no {required!r} column: {header!r}", "keep the frozen schema"
            )
    if not text.endswith("\n"):
        raise CampaignError(
            f"{source} ends mid-line: the harness stopped while writing it (partial CSV)",
            "run the quick command by hand, fix the crash, then re-run",
        )
    rows = []
    for number, record in enumerate(csv.reader(io.StringIO("\n".join(lines[1:]))), start=2):
        if len(record) != len(columns):
            raise CampaignError(
                f"{source}: line {number} has {len(record)} fields, the header has {len(columns)} (partial CSV)",
                "run the quick command by hand, fix the harness, then re-run",
            )
        cells = dict(zip(columns, record, strict=True))
        check = cells["Check"]
        if check not in (C.CHECK_PASS, C.CHECK_FAIL, C.CHECK_ERROR):
            raise CampaignError(
                f"{source}: line {number}: Check {check!r} is not PASS/FAIL/ERROR", "fix the harness"
            )
        values = {name: _number(cell) for name, cell in cells.items() if name not in ("label", "Check")}
        row = BenchRow(cells["label"], check, values)
        _require_plausible(row, f"{source}: line {number}")
        rows.append(row)
    if expected_labels is not None:
        got = [row.label for row in rows]
        if got != expected_labels:
            missing = [label for label in expected_labels if label not in got]
            raise CampaignError(
                f"{source}: rows {got} do not match the shapes asked for {expected_labels}"
                + (f" (missing {missing}: partial CSV)" if missing else ""),
                "the harness must write one row per shape, in order; run it by hand to see why",
            )
    return BenchTable(header, rows, raw)


def _require_plausible(row: BenchRow, where: str) -> None:
    """Figures a harness reports (and the step TFLOPS derived from them) must be physically possible."""
    figures = {name: row.values[name] for name in _CEILINGS if name in row.values}
    times = [name for name in row.values if name.endswith("(ms)")]
    if times and all(name in row.values for name in ("M", "N", "K")):
        figures[C.METRIC_STEP] = row.metric(C.METRIC_STEP)
    for name, value in figures.items():  # NaN is what an ERROR row holds; infinity is no measurement
        if not math.isnan(value) and not 0 <= value <= _CEILINGS[name]:
            raise CampaignError(
                f"{where}: {row.label} {name} = {value:.6g} is outside [0, {_CEILINGS[name]:g}], beyond any GPU:"
                " the harness's timing is broken; nothing was recorded",
                "run the quick command by hand and check its timer (a time of 0 or 1e-12 ms is not a measurement)",
            )
    broken = [
        f"{name} = {row.values[name]:g}"
        for name in times
        if row.values[name] in (math.inf, -math.inf) or row.values[name] < 0
    ]
    if broken:
        raise CampaignError(
            f"{where}: {row.label} has negative or infinite times ({', '.join(broken)}); nothing was recorded",
            "run the quick command by hand and check its timer",
        )


def require_metric(header: str, metric: str, source: str) -> None:
    """The CSV must carry what the primary metric is computed from; otherwise every row would read
    NaN and the campaign would look broken for the wrong reason."""
    columns = header.split(",")
    needed = (
        ["M", "N", "K", "Forward Time (ms)", "Backward Time (ms)"] if metric == C.METRIC_STEP else [metric]
    )
    missing = [column for column in needed if column not in columns]
    if missing:
        given = [m for m in (C.METRIC_FORWARD, C.METRIC_GBS, C.METRIC_BWD_GBS) if m in columns]
        raise CampaignError(
            f"{source}: the campaign's primary metric is {metric!r}, but the harness's CSV has no "
            f"{', '.join(repr(m) for m in missing)} column (its header: {header})",
            "start the campaign again with `git campaign init ... --metric` naming a metric the CSV gives"
            + (f" ({', '.join(repr(m) for m in given)})" if given else ""),
        )


def require_header(header: str, frozen: str, source: str, hint: str = "") -> None:
    if header != frozen:
        position = next(
            (i for i, (a, b) in enumerate(zip(header, frozen, strict=False)) if a != b),
            min(len(header), len(frozen)),
        )
        raise CampaignError(
            f"{source}: CSV header differs from the one frozen at BASELINE at byte {position}:\n"
            f"  frozen: {frozen}\n  got:    {header}",
            hint
            or "restore the harness that wrote the baseline's CSV; the schema never changes within a campaign",
        )


def _number(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.nan


def geomean(values: list[float]) -> float:
    finite = [value for value in values if math.isfinite(value) and value > 0]
    if not finite or len(finite) != len(values):
        return math.nan
    return math.exp(sum(math.log(value) for value in finite) / len(finite))


def aggregate(table: BenchTable, metric: str, labels: list[str] | None = None) -> float:
    """Geometric mean of the primary metric over PASS shapes (docs/harness.md)."""
    rows = [row for row in table.rows if row.passed and (labels is None or row.label in labels)]
    return geomean([row.metric(metric) for row in rows]) if rows else math.nan
