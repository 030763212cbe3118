"""The build, test and acceptance steps in the loop, on the fake project: a hook skipped with
--no-verify caught by validate, a red start refused, the acceptance suite and the final diff in
report, and workspace mode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.override import rollback
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, commit_round, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402

FAILING_SUITE = f"{sys.executable} -c \"import sys; sys.exit('test_full_suite: 1 failed')\""


def start(root: Path, monkeypatch: pytest.MonkeyPatch, **overrides: object) -> Path:
    make_project(root)
    monkeypatch.chdir(root)  # the shapes file is given relative to the repo, as a user would
    init(root, options(**overrides))
    baseline(root, None)
    return root


def verdict(root: Path, commit: str) -> dict:
    return list(yaml.safe_load_all(git(root, "notes", "--ref", C.NOTES_VERDICT, "show", commit)))[-1]


def runs(root: Path, label: str) -> Path:
    return sorted((root / ".git" / "campaign" / "runs" / NAME).glob(f"{label}-*"))[-1]


def test_validate_runs_the_tests_a_skipped_hook_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = start(tmp_path / "proj", monkeypatch)
    open_round(root, None, "drop the K-tail branch")
    # Faster on every benchmark shape and PASS there: only the focused test sees the broken edge case.
    set_kernel(root, 300, correct=True, edge_cases_ok=False)
    git(root, "commit", "-q", "--no-verify", "-am", "Hypothesis: no tail\nChange: drop the K-tail branch")
    commit = git(root, "rev-parse", "HEAD").strip()
    result = validate(root, None)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_TESTS_FAILED])
    doc = verdict(root, commit)
    assert doc["tests"]["exit_code"] == 1 and "edge cases fail" in doc["tests"]["output"]
    assert any("edge cases fail" in note for note in result.notes)
    assert "sessions" not in doc  # rejected before any measurement
    assert len(git(root, "notes", "--ref", C.NOTES_BENCH, "list").splitlines()) == 1  # the baseline's only
    assert git(root, "rev-parse", str(CampaignRef.rejected(NAME, 2))).strip() == commit


def test_baseline_refuses_a_red_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    set_kernel(root, 100, edge_cases_ok=False)
    git(root, "commit", "-qam", "a kernel whose edge cases fail")
    init(root, options())
    with pytest.raises(CampaignError, match="failed its tests") as info:
        baseline(root, None)
    assert "edge cases fail" in info.value.message
    manifest = yaml.safe_load(
        git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/manifest.yaml")
    )
    assert manifest["csv_header"] is None  # nothing recorded


def test_report_runs_the_acceptance_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = start(tmp_path / "proj", monkeypatch, acceptance_command=FAILING_SUITE, max_iterations=1)
    good = commit_round(root, "faster", 120)
    assert validate(root, None).decision in ACCEPTED
    head = git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()
    with pytest.raises(CampaignError, match="acceptance suite failed") as info:
        report(root, None)
    assert "test_full_suite: 1 failed" in info.value.message and "--record-failures" in info.value.hint
    assert git(root, "rev-parse", CampaignRef.main(NAME).branch).strip() == head  # no report committed
    with pytest.raises(CampaignError, match="acceptance suite failed"):
        report(root, None, force=True)  # stopping the campaign (T4) does not wave a failing suite through
    assert git(root, "rev-parse", CampaignRef.main(NAME).branch).strip() == head

    result = report(root, None, record_failures=True)
    assert (result.acceptance, result.clean_diff) == ("failed", True)
    text = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "**FAILED** on the final head" in text and "test_full_suite: 1 failed" in text
    assert "recorded with `report --record-failures`" in text
    assert "holds only the accepted rounds' changes: 1 file(s)" in text and "`kernel.py`" in text
    doc = verdict(root, result.commit)
    assert doc["acceptance"]["passed"] is False and doc["final_diff"]["rounds"] == [2]
    assert doc["final_diff"]["files"] == ["kernel.py"] and head == good


def test_report_skips_the_acceptance_suite_when_nothing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No round accepted: the final head is the start's project, so the suite (here one that fails)
    would test code the campaign never changed; the report says it did not run, and why."""
    root = start(tmp_path / "proj", monkeypatch, acceptance_command=FAILING_SUITE, max_iterations=1)
    commit_round(root, "slower", 80)
    assert validate(root, None).decision not in ACCEPTED
    result = report(root, None, force=True)
    assert (result.acceptance, result.clean_diff) == ("unchanged", True)
    text = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert f"`{FAILING_SUITE}`: not run: the final head changes no file outside `campaigns/{NAME}/`" in text
    assert "holds only the accepted rounds' changes: 0 file(s)" in text
    assert verdict(root, result.commit).get("acceptance") is None
    assert not list(runs(root, "report").glob("acceptance*"))


def test_report_flags_a_change_that_skipped_the_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default acceptance suite of a project without pytest tests is its test command.
    root = start(tmp_path / "proj", monkeypatch, max_iterations=1)
    assert yaml.safe_load((root / "campaigns" / NAME / "manifest.yaml").read_text())[
        "acceptance_command"
    ] == (f"{sys.executable} test_kernel.py")
    commit_round(root, "faster", 120)
    validate(root, None)
    (root / "bench_notes.md").write_text("hand edit straight on the accepted line\n")
    git(root, "add", "bench_notes.md")
    git(root, "commit", "-qm", "unreviewed edit")
    with pytest.raises(CampaignError, match="NOT only the accepted rounds' changes") as info:
        report(root, None)
    assert "unreviewed edit" in info.value.message
    result = report(root, None, record_failures=True)
    assert (result.acceptance, result.clean_diff) == ("passed", False)
    text = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "passed** on the final head" in text and "did not go through a round" in text


def test_final_diff_counts_a_rolled_back_round_as_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = start(tmp_path / "proj", monkeypatch, max_iterations=2)
    commit_round(root, "faster", 120)
    assert validate(root, None).decision in ACCEPTED
    rollback(root, None, 2, "did not transfer to training")
    commit_round(root, "faster, differently", 130)
    assert validate(root, None).decision in ACCEPTED
    result = report(root, None)
    assert result.clean_diff
    text = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "from accepted round(s) 3 and 1 rollback commit(s)" in text


def test_workspace_mode_measures_a_minimal_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("not part of the kernel's stack\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "docs")
    listing = f"{sys.executable} -c \"import os; print('tree:', sorted(os.listdir('.')))\""
    init(root, options(execution_mode="workspace", workspace=("kernel.py",), build_command=listing))
    manifest = yaml.safe_load((root / "campaigns" / NAME / "manifest.yaml").read_text())
    assert manifest["workspace"] == ["bench.py", "kernel.py", "test_kernel.py"]  # + files the commands name
    baseline(root, None)
    good = commit_round(root, "faster", 120)
    result = validate(root, None)
    assert result.decision in ACCEPTED
    build_log = (runs(root, "round-2") / "build-candidate.log").read_text()
    assert "tree: ['bench.py', 'campaigns', 'kernel.py', 'test_kernel.py']" in build_log
    assert git(root, "rev-parse", CampaignRef.main(NAME).branch).strip() == good  # lands on the real branch

    open_round(root, None, "document the kernel")
    (root / "docs" / "guide.md").write_text("changed outside the workspace\n")
    git(root, "commit", "-qam", "Hypothesis: docs\nChange: docs")
    with pytest.raises(CampaignError, match="outside the workspace copy"):
        validate(root, None)
