"""`git campaign next`: the step it names at each point of the loop, and `--run` performing it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402
from scratch_campaign import init_options, with_baseline  # noqa: E402

from gitcampaign.cli import main  # noqa: E402
from gitcampaign.commands.init import init  # noqa: E402
from gitcampaign.errors import CampaignError  # noqa: E402
from gitcampaign.loop import run_next  # noqa: E402
from gitcampaign.next_step import (  # noqa: E402
    STEP_BASELINE,
    STEP_COMMIT,
    STEP_REPORT,
    STEP_ROUND,
    STEP_VALIDATE,
    next_step,
)
from gitcampaign.refs import CampaignRef  # noqa: E402
from gitcampaign.vocabulary import Decision  # noqa: E402


def test_before_the_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, init_options())
    step = next_step(root, None)
    assert (step.step, step.runnable) == (STEP_BASELINE, True)


def test_two_commands_per_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "proj"
    monkeypatch.chdir(tmp_path)
    root.mkdir()
    monkeypatch.chdir(root)
    with_baseline(root)
    assert next_step(root, None).step == STEP_ROUND
    with pytest.raises(CampaignError, match="nothing to run") as info:
        run_next(root, None)  # a round needs its hypothesis: never guessed
    assert "-m" in info.value.hint

    opened = run_next(root, None, "bigger tiles")
    assert [done.step for done in opened.performed] == [STEP_ROUND]
    assert opened.then.step == STEP_COMMIT and not opened.then.runnable
    assert main(["-C", str(root), "next", "--run"]) == 1  # the edit is the person's

    set_kernel(root, 110)
    git(root, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 110")
    assert next_step(root, None).step == STEP_VALIDATE
    capsys.readouterr()
    assert main(["-C", str(root), "next", "--run", "-m", "smaller tiles"]) == 0
    printed = capsys.readouterr().out
    assert "round 2: ACCEPT" in printed and "next: edit" in printed
    assert git(root, "branch", "--show-current").strip() == CampaignRef.round_branch("demo", 3).branch
    assert (
        git(root, "config", f"branch.{CampaignRef.round_branch('demo', 3).branch}.description").strip()
        == "smaller tiles"
    )

    set_kernel(root, 95)
    git(root, "commit", "-q", "-am", "Hypothesis: smaller tiles\nChange: speed 95")
    done = run_next(root, None)
    assert done.performed[0].result.decision == Decision.REJECT
    assert done.then.step == STEP_ROUND


def test_report_when_a_termination_condition_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    monkeypatch.chdir(tmp_path)
    make_project(root)
    monkeypatch.chdir(root)
    init(root, init_options(max_iterations=1))
    from gitcampaign.commands.baseline import baseline

    baseline(root, None)
    run_next(root, None, "bigger tiles")
    set_kernel(root, 110)
    git(root, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 110")
    assert run_next(root, None).then.step == STEP_REPORT  # T3: one finished round of one
    reported = run_next(root, None)
    assert reported.performed[0].step == STEP_REPORT
    assert reported.then.step == "done"
