"""The lineage table and the termination rules, from the fixture campaign's notes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fixture_campaign import NAME, restore

from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.lineage import lineage_rows, log_table, termination
from gitcampaign.vocabulary import Decision, Status


@pytest.fixture
def old(tmp_path: Path) -> Campaign:
    return Campaign(g.open_repo(restore(tmp_path / "old")), NAME)


def test_rows_carry_status_decision_and_cumulative_speedup(old: Campaign) -> None:
    _, rows = lineage_rows(old)
    assert [(r.round, r.status, r.decision) for r in rows] == [
        (1, Status.BASELINE, Decision.BASELINE),
        (2, Status.ACCEPTED, Decision.ACCEPT),
        (3, Status.REJECTED, Decision.REJECT),
        (4, Status.REJECTED, Decision.REJECT),
        (5, Status.ACCEPTED, Decision.ACCEPT),
        (6, Status.REJECTED, Decision.REJECT),
        (7, Status.OPEN, ""),
    ]
    # Paired ratios multiply along the accepted line: 1.10 then 0.97/1.10 of it.
    assert rows[1].vs_baseline == pytest.approx(1.10, rel=1e-4)
    assert rows[4].vs_baseline == pytest.approx(0.97, rel=1e-4)
    assert rows[3].key_deltas == "harness_changed"  # rejected by a gate before any measurement
    assert "a friendlier harness" in log_table(rows, old.manifest().primary_metric)


def test_termination_rules(old: Campaign) -> None:
    manifest = old.manifest()
    _, rows = lineage_rows(old)
    assert termination(manifest, rows) == ["T3 max iterations: 5 rounds >= 5"]
    assert termination(replace(manifest, max_iterations=9), rows) == []
    reached = termination(replace(manifest, max_iterations=9, performance_target={"speedup": 0.95}), rows)
    assert reached == ["T1 target reached: 0.970x >= 0.95x"]


def test_t2_is_not_judged_on_a_ceiling_the_figures_read_above(old: Campaign) -> None:
    """Per shape, T2 holds where every share reaches the efficiency; where one reads above its
    ceiling (1.07 on an H100, 2026-12-06: the calibrated peak understated the card), the ceiling is
    no distance to the hardware and T2 is not claimed."""
    manifest = replace(old.manifest(), max_iterations=9, performance_target={"efficiency": 0.95})
    _, rows = lineage_rows(old)
    reached = termination(manifest, rows, {"a": 0.97, "b": 1.01})
    assert reached == [
        "T2 hardware efficiency: every representative shape at >= 0.95 of its limit (the least at 0.97)"
    ]
    assert termination(manifest, rows, {"a": 0.97, "b": 1.07}) == []
    assert termination(manifest, rows, {"a": 0.97, "b": None}) == []
