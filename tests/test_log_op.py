"""`git campaign log --op` and `round`'s list of what other campaigns on the op rejected: a round
should not repeat, unawares, a change an earlier campaign on the same kernel measured and rejected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_project import git
from fixture_campaign import FIXTURES, NAME, restore

from gitcampaign.cli import cli
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.round import RoundResult
from gitcampaign.loop import NextRun, Performed
from gitcampaign.next_step import NextStep

SECOND = "again"


def _two_campaigns(tmp_path: Path) -> Path:
    """The v1 fixture (op fake_gemm; rounds 3, 4 and 6 rejected) and a second campaign on its op,
    started from the fixture's project, with the first kept as a bundle in the work tree."""
    root = restore(tmp_path / "repo")
    git(root, "checkout", "-q", "main")
    manifest = git(root, "show", f"campaign/{NAME}/main:campaigns/{NAME}/manifest.yaml")
    (root / "campaigns" / NAME).mkdir(parents=True, exist_ok=True)
    (root / "campaigns" / NAME / "manifest.yaml").write_text(manifest)
    shutil.copy(FIXTURES / "campaign-v1.bundle", root / "campaigns" / NAME / "lineage.bundle")
    git(root, "add", "campaigns")
    git(root, "commit", "-q", "-m", "keep the first campaign's bundle")
    init(root, InitOptions(name=SECOND, op="fake_gemm", quick_command="python bench.py", test_command="true"))
    return root


def test_log_op_shows_every_campaign_on_the_op(tmp_path: Path) -> None:
    root = _two_campaigns(tmp_path)
    result = CliRunner().invoke(cli, ["-C", str(root), "-c", SECOND, "log", "--op", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["op"] == "fake_gemm" and found["not_imported"] == []
    assert [c["campaign"] for c in found["campaigns"]] == [SECOND, NAME]  # name order
    rejected = [r["round"] for r in found["campaigns"][1]["rounds"] if r["status"] == "rejected"]
    assert rejected == [3, 4, 6]
    text = CliRunner().invoke(cli, ["-C", str(root), "-c", SECOND, "log", "--op"]).output
    assert f"campaign {NAME} (fake_gemm)" in text and "smaller tiles" in text


def test_a_campaign_kept_only_as_a_bundle_is_named_with_the_import_to_run(tmp_path: Path) -> None:
    root = _two_campaigns(tmp_path)
    for ref in git(root, "for-each-ref", "--format=%(refname)", f"refs/heads/campaign/{NAME}").split():
        git(root, "update-ref", "-d", ref)
    text = CliRunner().invoke(cli, ["-C", str(root), "-c", SECOND, "log", "--op"]).output
    assert f"campaign {NAME} " not in text
    assert f"not imported, so not above (`git campaign import PATH`): campaigns/{NAME}/lineage.bundle" in text


def test_round_lists_what_other_campaigns_on_the_op_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a round (here stubbed: the second campaign has no baseline) names each round that
    another campaign on the op rejected, with its reasons and hypothesis."""
    root = _two_campaigns(tmp_path)
    opened = RoundResult(2, f"campaign/{SECOND}/round-2", "0" * 40)
    monkeypatch.setattr("gitcampaign.commands.round.open_round", lambda *args: opened)
    result = CliRunner().invoke(cli, ["-C", str(root), "-c", SECOND, "round", "-m", "smaller tiles again"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "rejected by other campaigns on this op (3; `git campaign log --op` has them all):"
    assert lines[2] == f"  {NAME} round 3 (shape_regression): smaller tiles"
    assert [line.split(":")[0] for line in lines[3:5]] == [
        f"  {NAME} round 4 (harness_changed)",
        f"  {NAME} round 6 (manual_override)",
    ]


def test_next_run_lists_them_too_when_it_opens_a_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _two_campaigns(tmp_path)
    then = NextStep(SECOND, "validate", "git campaign validate", "a round is open", True)
    opened = NextRun(then, [Performed("round", RoundResult(2, f"campaign/{SECOND}/round-2", "0" * 40))])
    monkeypatch.setattr("gitcampaign.loop.run_next", lambda *args: opened)
    monkeypatch.setattr("gitcampaign.cli._next_text", lambda outcome: "round 2 opened")
    result = CliRunner().invoke(
        cli, ["-C", str(root), "-c", SECOND, "next", "--run", "-m", "smaller tiles again"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith("rejected by other campaigns on this op (3;")
