"""A campaign written by the tool before the domain layer (issue 10) still reads, validates and
reports: `fixtures/campaign-v1.bundle` was made by main at 36c8ed1 (baseline; rounds accepted,
rejected, rejected by a gate, accepted by hand, rolled back, one left open), and
`campaign-v1.expected.json` holds what that code's `status` and `log` said about it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixture_campaign import FIXTURES, restore

from gitcampaign.commands.log import log
from gitcampaign.commands.report import report
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate


def expected() -> dict[str, Any]:
    return json.loads((FIXTURES / "campaign-v1.expected.json").read_text())


def test_old_campaign_reads_the_same(tmp_path: Path) -> None:
    root = restore(tmp_path / "old")
    state = status(root, None).to_json()
    rows = log(root, None).to_json()
    want = {key: expected()[key] for key in ("status", "log")}
    # One deliberate change since: the open round 7 came without its branch description (a bundle
    # carries no git config), so that code showed no hypothesis; the lineage now reads its commit's.
    (open_round,) = [row for row in want["log"]["rounds"] if row["status"] == "open"]
    assert open_round["hypothesis"] == ""
    open_round["hypothesis"] = "left open"
    # Another: each row names its decision's reason codes, which that code's log left out.
    reasons = [row.pop("reasons") for row in rows["rounds"]]
    overridden, gated = "manual_override", "harness_changed"
    assert reasons == ["", "", "shape_regression", gated, overridden, overridden, ""]
    # And the profiles `analyze` notes: the old campaign has none.
    assert state.pop("profile") == [] and all(row.pop("profile") == [] for row in rows["rounds"])
    # And status lists what a killed command left for `recover` (nothing, here).
    assert state.pop("unfinished") == []
    # And the open heat (none: heats came later) and the device time its verdicts recorded (none).
    assert state.pop("heat") == [] and rows.pop("heat") == []
    assert (state.pop("device_seconds"), state.pop("measurements")) == (0.0, 0)
    assert json.loads(json.dumps({"status": state, "log": rows})) == want


def test_old_campaign_validates_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = restore(tmp_path / "old")
    monkeypatch.chdir(root)
    decided = validate(root, None)
    assert (decided.round, decided.decision) == (7, expected()["validate"]["decision"])
    written = report(root, None)
    assert written.termination == expected()["report"]["termination"]
    assert written.ratio == pytest.approx(expected()["report"]["ratio"], rel=1e-6)
    assert written.acceptance == expected()["report"]["acceptance"]
    text = (root / written.path).read_text()
    assert "round 5: slower but wanted" in text and "round 6: faster again (REJECT" in text
