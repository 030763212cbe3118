"""Harness CSVs: parsed with the frozen header, partial files refused, aggregated over PASS rows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fixture_campaign import restore

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.errors import CampaignError
from gitcampaign.results import aggregate, geomean, parse_csv


def old_csv(root: Path) -> bytes:
    repo = g.open_repo(restore(root))
    raw = g.read_note(repo, C.NOTES_FULL, next(iter(g.note_blobs(repo, C.NOTES_FULL))))
    assert raw is not None
    return raw


def test_an_old_note_parses(tmp_path: Path) -> None:
    table = parse_csv(old_csv(tmp_path / "old"), "note", frozen_header=C.GEMM_HEADER)
    assert [row.label for row in table.rows] == ["s-small", "s-mid", "s-odd", "s-large"]
    assert all(row.passed for row in table.rows)
    value = aggregate(table, C.METRIC_STEP)
    assert value == pytest.approx(geomean([row.metric(C.METRIC_STEP) for row in table.rows]))
    assert aggregate(table, C.METRIC_STEP, ["s-mid"]) == pytest.approx(
        table.by_label()["s-mid"].metric(C.METRIC_STEP)
    )


def test_header_drift_and_partial_files_are_refused(tmp_path: Path) -> None:
    raw = old_csv(tmp_path / "old")
    with pytest.raises(CampaignError):
        parse_csv(raw.replace(b"Check", b"check", 1), "note", frozen_header=C.GEMM_HEADER)
    with pytest.raises(CampaignError, match="ends mid-line"):
        parse_csv(raw[:-5], "note")
    with pytest.raises(CampaignError, match="do not match the shapes"):
        parse_csv(raw, "note", expected_labels=["s-small"])


def test_geomean_of_nothing_usable_is_nan() -> None:
    assert math.isnan(geomean([]))
    assert math.isnan(geomean([2.0, math.nan]))
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("column", "value"),
    [("Forward TFLOPS", "inf"), ("Backward TFLOPS", "-inf"), ("Forward Time (ms)", "inf")],
)
def test_an_infinite_figure_is_implausible(tmp_path: Path, column: str, value: str) -> None:
    """`inf` with Check PASS crashed validate in its statistics: a figure no GPU reaches, like a
    1e-12 ms timer, stops the command and names the cell."""
    raw = old_csv(tmp_path / "old").decode()
    header, first, *rest = raw.splitlines()
    cells = first.split(",")
    cells[header.split(",").index(column)] = value
    broken = "\n".join([header, ",".join(cells), *rest]) + "\n"
    with pytest.raises(CampaignError, match=f"s-small .*{value}") as info:
        parse_csv(broken.encode(), "note")
    assert "timer" in info.value.hint
