"""The whole loop on a real temp repo: refs, notes, decisions, overrides, lineage and report."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gitcampaign import constants as C
from gitcampaign import executor as ex
from gitcampaign.cli import cli, main
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.log import log
from gitcampaign.commands.override import accept, rollback
from gitcampaign.commands.report import report, why_rejected
from gitcampaign.commands.round import open_round
from gitcampaign.commands.show import show
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.lineage import LineageRow, log_table
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision, Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402

NAME = "demo"


def options(**overrides: object) -> InitOptions:
    base = dict(
        name=NAME,
        op="fake_gemm",
        metric="step",
        shapes="shapes.yaml",
        quick_command=f"{sys.executable} bench.py",
        test_command=f"{sys.executable} test_kernel.py",
        probe_command="",
        kernel_source="kernel.py",
        pairs=2,
        max_iterations=3,
    )
    base.update(overrides)
    return InitOptions(**base)  # type: ignore[arg-type]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)  # the fake shapes file is given relative to the repo, as a user would
    init(root, options())
    baseline(root, None)
    return root


def commit_round(root: Path, hypothesis: str, speed: float, correct: bool = True) -> str:
    open_round(root, None, hypothesis)
    set_kernel(root, speed, correct)
    git(root, "commit", "-q", "-am", f"Hypothesis: {hypothesis}\nChange: speed {speed}")
    return git(root, "rev-parse", "HEAD").strip()


def ref(root: Path, name: str) -> str | None:
    out = git(root, "for-each-ref", "--format=%(objectname)", name).strip()
    return out or None


def test_init_writes_every_manifest_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    init(root, options())
    manifest = yaml.safe_load(
        git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/manifest.yaml")
    )
    for field in [
        "target_op",
        "target_backend",
        "target_lang",
        "target_gpu",
        "execution_mode",
        "project_skill",
        "performance_target",
        "primary_metric",
        "target_shapes",
        "kernel_source",
        "test_command",
        "benchmark_command",
        "quick_command",
        "representative_shapes",
        "git_commit",
        "git_branch",
        "max_iterations",
        "created",
    ]:
        assert field in manifest, field
    assert manifest["primary_metric"] == C.METRIC_STEP
    assert "test_kernel.py" in manifest["protected_paths"] and "bench.py" in manifest["protected_paths"]
    assert git(root, "branch", "--show-current").strip() == CampaignRef.main(NAME).branch
    assert C.NOTES_GLOB in git(root, "config", "--get-all", "notes.displayRef")


def test_baseline_records_notes_and_manifest(project: Path) -> None:
    head = ref(project, f"refs/heads/{CampaignRef.main(NAME).branch}")
    manifest = yaml.safe_load(git(project, "show", f"{head}:campaigns/{NAME}/manifest.yaml"))
    assert manifest["csv_header"] == C.GEMM_HEADER
    assert 3 <= len(manifest["representative_shapes"]) <= 5
    assert {"s-small", "s-large"} <= set(manifest["representative_shapes"])  # smallest and largest work
    assert manifest["noise_floor"]["aggregate"] == 0.0  # the fake harness is deterministic
    assert all(manifest["protected_paths"].values())
    full = git(project, "notes", "--ref", C.NOTES_FULL, "show", head)
    assert full.startswith(C.GEMM_HEADER + "\n") and full.count("\n") == 5
    verdict = yaml.safe_load(git(project, "notes", "--ref", C.NOTES_VERDICT, "show", head))
    assert verdict["decision"] == Decision.BASELINE and verdict["round"] == 1
    # plain git log shows the campaign notes (notes.displayRef)
    assert "Notes (campaign/verdict)" in git(project, "log", "-1", CampaignRef.main(NAME).branch)


def test_accept_fast_forwards_and_reject_pins(project: Path) -> None:
    incumbent = ref(project, f"refs/heads/{CampaignRef.main(NAME).branch}")
    good = commit_round(project, "bigger tiles", 110)
    result = validate(project, None)
    assert result.decision == Decision.ACCEPT and result.round == 2
    assert result.ratio == pytest.approx(1.10, rel=1e-4)
    assert ref(project, f"refs/heads/{CampaignRef.main(NAME).branch}") == good
    assert git(project, "rev-parse", f"{good}^").strip() == incumbent  # fast-forward, no merge commit
    assert git(project, "branch", "--show-current").strip() == CampaignRef.main(NAME).branch
    bench = git(project, "notes", "--ref", C.NOTES_BENCH, "show", good)
    assert bench.startswith(C.GEMM_HEADER)

    slow = commit_round(project, "smaller tiles", 95)
    result = validate(project, None)
    assert result.decision == Decision.REJECT and C.REASON_SHAPE_REGRESSION in result.reasons
    assert ref(project, str(CampaignRef.rejected(NAME, 3))) == slow
    assert (
        ref(project, f"refs/heads/{CampaignRef.round_branch(NAME, 3).branch}") == good
    )  # round branch reset
    assert ref(project, f"refs/heads/{CampaignRef.main(NAME).branch}") == good

    wrong = commit_round(project, "skip the mask", 500, correct=False)
    result = validate(project, None)
    assert result.decision == Decision.REJECT and result.reasons == [C.REASON_CHECK_FAILED]
    assert ref(project, str(CampaignRef.rejected(NAME, 4))) == wrong
    docs = list(yaml.safe_load_all(git(project, "notes", "--ref", C.NOTES_VERDICT, "show", wrong)))
    assert docs[-1]["decision"] == Decision.REJECT
    for key in ("environment", "harness_sha256", "csv_schema_sha256", "tree", "tool_version", "hypothesis"):
        assert key in docs[-1], key


def test_csv_note_reads_back_byte_for_byte(project: Path) -> None:
    commit_round(project, "faster", 120)
    result = validate(project, None)
    runs = sorted((project / ".git" / "campaign" / "runs" / NAME).glob("round-2-*/s1/pair0-candidate.csv"))
    written = runs[-1].read_bytes()
    from gitcampaign import git as g

    repo = g.open_repo(project)
    assert g.read_note(repo, C.NOTES_BENCH, result.commit) == written


def test_round_refuses_second_round_and_empty_hypothesis(project: Path) -> None:
    with pytest.raises(CampaignError, match="hypothesis"):
        open_round(project, None, "  ")
    open_round(project, None, "first")
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    with pytest.raises(CampaignError, match="one hypothesis at a time"):
        open_round(project, None, "second")


def test_a_round_from_a_prepared_commit(project: Path) -> None:
    # A candidate made on a branch of its own (by a colleague, an agent, another machine), off a
    # commit older than the accepted head: the round carries that one change, on the accepted head.
    head = git(project, "rev-parse", CampaignRef.main(NAME).branch).strip()
    git(project, "checkout", "-q", "-b", "candidate", f"{CampaignRef.main(NAME).branch}~1")
    set_kernel(project, 130)
    git(project, "commit", "-q", "-am", "bigger tiles\n\nHypothesis: bigger tiles\nChange: speed 130")
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    result = open_round(project, None, "", "candidate")
    assert (
        result.picked
        == git(project, "rev-parse", "HEAD").strip()
        == ref(project, f"refs/heads/{result.branch}")
    )
    assert git(project, "rev-parse", f"{result.picked}^").strip() == head
    assert git(project, "diff", "--name-only", head, result.picked).split() == ["kernel.py"]
    assert git(project, "show", "-s", "--format=%an", result.picked).strip() == "Campaign Tester"
    assert git(project, "config", f"branch.{result.branch}.description").strip() == "bigger tiles"
    decided = validate(project, None)
    assert decided.decision == Decision.ACCEPT and decided.commit == result.picked


def test_a_round_from_a_commit_that_cannot_be_one_leaves_nothing(project: Path) -> None:
    main = CampaignRef.main(NAME).branch
    git(project, "checkout", "-q", "-b", "no-lines", main)
    set_kernel(project, 130)
    git(project, "commit", "-q", "-am", "bigger tiles")
    with pytest.raises(CampaignError, match="no Hypothesis: and Change: line") as info:
        open_round(project, None, "", "no-lines")
    assert "git commit --amend" in info.value.hint
    # A change to the kernel's own lines that the accepted head changed too: it does not apply.
    commit_round(project, "faster", 120)
    validate(project, None)
    git(project, "checkout", "-q", "-b", "stale", "no-lines")
    (project / "kernel.py").write_text((project / "kernel.py").read_text().replace("130", "140"))
    git(project, "commit", "-q", "-am", "Hypothesis: h\nChange: speed 140")
    git(project, "checkout", "-q", main)
    heads = git(project, "for-each-ref", "refs/heads/campaign").strip()
    with pytest.raises(CampaignError, match="does not apply") as info:
        open_round(project, None, "", "stale")
    assert f"git rebase {main}" in info.value.hint
    assert git(project, "for-each-ref", "refs/heads/campaign").strip() == heads  # no round ref
    assert git(project, "status", "--porcelain").strip() == ""
    with pytest.raises(CampaignError, match="not a commit"):
        open_round(project, None, "", "no-such-branch")


def test_two_commits_in_a_round_are_refused(project: Path) -> None:
    commit_round(project, "two changes", 110)
    set_kernel(project, 120)
    git(project, "commit", "-q", "-am", "another")
    with pytest.raises(CampaignError, match="a round is one change") as info:
        validate(project, None)
    assert "git reset --soft" in info.value.hint


def test_manual_overrides_are_recorded(project: Path) -> None:
    slow = commit_round(project, "slower", 90)
    validate(project, None)
    result = accept(project, None, None, "keeps the code simpler")
    assert result.decision == Decision.ACCEPT and result.previous == Decision.REJECT
    assert ref(project, f"refs/heads/{CampaignRef.main(NAME).branch}") == slow
    assert ref(project, str(CampaignRef.rejected(NAME, 2))) is None
    docs = list(yaml.safe_load_all(git(project, "notes", "--ref", C.NOTES_VERDICT, "show", slow)))
    assert [d["decision"] for d in docs] == [Decision.REJECT, Decision.ACCEPT]  # appended, not replaced
    assert docs[-1]["override"] is True

    before = git(project, "rev-list", "--count", CampaignRef.main(NAME).branch).strip()
    result = rollback(project, None, None, "changed my mind")
    assert result.decision == Decision.REJECT
    main_head = ref(project, f"refs/heads/{CampaignRef.main(NAME).branch}")
    assert int(git(project, "rev-list", "--count", main_head).strip()) == int(before) + 1  # never rewritten
    assert git(project, "rev-parse", f"{main_head}^{{tree}}") == git(
        project, "rev-parse", f"{slow}^^{{tree}}"
    )
    assert ref(project, str(CampaignRef.rejected(NAME, 2))) == slow
    assert git(project, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_decision_moves_head_only_off_the_campaigns_own_branches(project: Path) -> None:
    """From the project's own branch a rollback changes refs and leaves HEAD and files alone (a commit
    made next belongs to that branch, not to the campaign's line); from the round branch it takes the
    user to the campaign's main, where the next round opens."""
    commit_round(project, "abandoned", 90)
    git(project, "checkout", "-q", "main")
    rollback(project, None, 2, "stopped before its validation finished")
    assert git(project, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert ref(project, str(CampaignRef.rejected(NAME, 2))) is not None
    commit_round(project, "also abandoned", 95)
    rollback(project, None, 3, "")
    assert git(project, "symbolic-ref", "--short", "HEAD").strip() == CampaignRef.main(NAME).branch


def test_log_show_status_json_and_report(project: Path) -> None:
    commit_round(project, "faster", 110)
    validate(project, None)
    commit_round(project, "slower", 90)
    validate(project, None)
    lineage = log(project, None)
    text, data = log_table(lineage.rows, lineage.metric), lineage.to_json()
    assert [r["status"] for r in data["rounds"]] == ["baseline", "accepted", "rejected"]
    assert data["rounds"][1]["vs_baseline"] == pytest.approx(1.10, rel=1e-4)
    assert "faster" in text and "slower" in text
    shown = show(project, None, 3).to_json()
    assert shown["bench_csv"].startswith(C.GEMM_HEADER) and "kernel.py" in shown["diff_stat"]
    state = status(project, None).to_json()
    assert state["rounds"]["accepted"] == 1 and state["rounds"]["rejected"] == 1
    with pytest.raises(CampaignError, match="termination"):
        report(project, None)
    commit_round(project, "same", 110.2)
    validate(project, None)  # third finished round: T3 (max_iterations 3) holds
    assert status(project, None).next == "git campaign report"
    result = report(project, None, pairs=3)  # not the manifest's 2
    assert result.ratio == pytest.approx(1.10, rel=1e-4)
    markdown = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "`git campaign report --pairs 3` (final full validation, 3 interleaved pairs" in markdown
    assert "T3 max iterations" in markdown and "slower" in markdown and "| s-large" in markdown
    svg = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/{C.REPORT_PLOT_FILE}")
    assert "speedup over baseline (x)" in svg and "final / baseline (x)" in svg  # matplotlib's two panels
    assert f"]({C.REPORT_PLOT_FILE})" in markdown
    assert "the least gained so far" in markdown and "No round was accepted" not in markdown
    assert status(project, None).next.startswith("git campaign report --html  (reported;")
    assert git(project, "notes", "--ref", C.NOTES_FULL, "show", CampaignRef.main(NAME).branch).startswith(
        C.GEMM_HEADER
    )


def test_a_report_without_accepted_rounds_calls_its_ratio_spread(project: Path) -> None:
    """Final and baseline are the same kernels: the report reads their ratio as an A/A check, and
    names no shape as "the least gained"."""
    commit_round(project, "slower", 90)
    assert validate(project, None).decision not in ACCEPTED
    report(project, None, force=True)
    markdown = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "No round was accepted: baseline and final run the same kernels" in markdown
    assert "1 round: 0 accepted, 1 rejected." in markdown
    why = "(REJECT shape_regression: s-small -10.0%, s-mid -10.0%)"  # the reason, then the deltas
    assert f"- round 2: slower {why}" in markdown
    assert "- no round was accepted: start from the verdicts" in markdown
    assert "the least gained so far" not in markdown


def test_a_report_of_one_pair_says_it_has_no_interval(project: Path) -> None:
    """One pair has no spread to take an interval from: the report says so, where it printed
    "95% CI [0.000, -]" until 2026-12-06."""
    commit_round(project, "slower", 90)
    validate(project, None)
    one = report(project, None, force=True, pairs=1)
    markdown = (project / one.path).read_text()
    assert "**1.000x**, no 95% interval from one pair (`--pairs 2` or more give one)" in markdown
    assert "95% CI" not in markdown.split("## Iterations")[0]


def test_a_second_report_says_which_report_it_replaces(project: Path) -> None:
    """A campaign reported again (12-06: gemm-bf16-4 and quant-tw-2 after their profiles were read
    anew) names the earlier report's commit, which heads the accepted line."""
    first = report(project, None, force=True, pairs=1)
    assert "Reported again" not in (project / first.path).read_text()
    second = report(project, None, force=True, pairs=1)
    markdown = (project / second.path).read_text()
    assert f"- Reported again: this report replaces the report committed at `{first.commit[:12]}`" in markdown
    assert f"final accepted head `{first.commit[:12]}`" in markdown


def test_a_rejection_before_any_measurement_names_its_reason_once() -> None:
    row = LineageRow(
        round=3,
        status=Status.REJECTED,
        decision="REJECT",
        hypothesis="h",
        metric=None,
        vs_baseline=None,
        key_deltas="tests_failed",  # what _key_deltas gives a round without measured shapes
        transfer=None,
        commit=None,
        reasons="tests_failed",
    )
    assert why_rejected(row) == "REJECT tests_failed"


def test_cli_wiring(project: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["-C", str(project), "status", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["campaign"] == NAME
    assert runner.invoke(cli, ["-h"]).exit_code == 0
    for verb in [
        "init",
        "prepare",
        "baseline",
        "round",
        "validate",
        "accept",
        "rollback",
        "status",
        "log",
        "show",
        "report",
        "demo",
        "lint",
        "hooks",
        "next",
        "plot",
        "mcp",
        "completion",
    ]:
        assert verb in runner.invoke(cli, ["-h"]).output
    assert main(["-C", str(project), "show", "9"]) == 1  # user error -> exit 1


def test_validate_json_fields(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit_round(project, "faster", 110)
    assert main(["-C", str(project), "validate", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("decision", "reasons", "round", "ratio", "ci", "shapes"):
        assert key in data
    assert data["decision"] == Decision.ACCEPT and len(data["ci"]) == 2


def test_gates_reject_before_any_measurement(project: Path) -> None:
    """Hooks can be skipped (--no-verify), so validate re-runs the static and integrity gates."""
    open_round(project, None, "cache the output")
    set_kernel(project, 500)
    with open(project / "kernel.py", "a") as kernel:
        kernel.write("_cache = {}\n\n\ndef op(x):\n    if id(x) in _cache:\n        return _cache[id(x)]\n")
    git(project, "commit", "-q", "--no-verify", "-am", "Hypothesis: cache\nChange: memo")
    result = validate(project, None)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_STATIC_CHECK])
    assert result.shapes == {}  # nothing was measured
    docs = list(yaml.safe_load_all(git(project, "notes", "--ref", C.NOTES_VERDICT, "show", result.commit)))
    assert any("W2" in finding for finding in docs[-1]["gates"]["static"])
    assert any(note.startswith("lint: ") and "W2" in note for note in result.notes)

    open_round(project, None, "a friendlier harness")
    (project / "bench.py").write_text((project / "bench.py").read_text().replace("speed = ", "speed = 2 * "))
    git(project, "commit", "-q", "-am", "Hypothesis: h\nChange: harness")
    result = validate(project, None)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_HARNESS_CHANGED])
    docs = list(yaml.safe_load_all(git(project, "notes", "--ref", C.NOTES_VERDICT, "show", result.commit)))
    assert docs[-1]["gates"]["protected_changed"] == ["bench.py"]
    assert any(note.startswith("protected paths changed: bench.py;") for note in result.notes)


def test_a_campaign_started_on_another_campaigns_line(project: Path) -> None:
    # The project's main took campaign demo's accepted rounds, baseline commit included; a second
    # campaign started there has demo's baseline in its history, and must find its own.
    commit_round(project, "faster", 150)
    assert validate(project, None).decision == Decision.ACCEPT
    git(project, "checkout", "-q", "main")
    git(project, "merge", "-q", "--ff-only", CampaignRef.main(NAME).branch)
    init(project, options(name="second"))
    baseline(project, "second")
    result = open_round(project, "second", "bigger tiles")
    assert result.base == git(project, "rev-parse", CampaignRef.main("second").branch).strip()
    set_kernel(project, 200)
    git(project, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 200")
    assert validate(project, "second").decision == Decision.ACCEPT
    with pytest.raises(CampaignError, match="HEAD is on campaign/second/main, a branch of campaign second"):
        init(project, options(name="third"))
    assert ref(project, "refs/heads/campaign/third/main") is None


def test_round_from_a_candidate_that_edits_its_judge_is_refused_before_it_opens(project: Path) -> None:
    """A candidate branch with the kernel and a new test in one commit would be rejected by validate
    as harness_changed; `round --from` says so at once, with the split that works, and opens nothing."""
    head = git(project, "rev-parse", CampaignRef.main(NAME).branch).strip()
    git(project, "checkout", "-q", "-b", "candidate", head)
    set_kernel(project, 120)
    (project / "test_kernel.py").write_text(
        (project / "test_kernel.py").read_text() + "assert kernel.SPEED\n"
    )
    git(project, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 120, and a test")
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    with pytest.raises(CampaignError) as refused:
        open_round(project, None, "", "candidate")
    assert "test_kernel.py" in refused.value.message and "harness_changed" in refused.value.message
    assert "git checkout" in refused.value.hint and "-- kernel.py &&" in refused.value.hint
    assert ref(project, "refs/heads/" + CampaignRef.round_branch(NAME, 2).branch) is None
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD").strip() == CampaignRef.main(NAME).branch

    # The recipe in the hint, as given, yields a candidate that opens the round.
    recipe = refused.value.hint.split(": ", 1)[1].split(", then")[0]
    for step in recipe.split(" && "):
        git(project, *step.split()[1:])
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    opened = open_round(project, None, "", "candidate-kernel")
    assert opened.number == 2 and opened.picked
    assert git(project, "diff", "--name-only", head, opened.picked).split() == ["kernel.py"]


class Stopped(Exception):
    """The command's time limit, in the middle of a measurement session."""


def test_an_interrupted_validate_goes_on_from_its_last_finished_session(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gain under 2% is measured in three sessions. Stopped during the third, validate measures only
    the third when run again (the two finished ones are kept), and decides on all three; a round whose
    commit changed meanwhile is measured anew."""
    measure, runs = ex.measure, []

    def stopping_after(sessions: int) -> Callable[..., Any]:
        def measured(*args: Any, **kwargs: Any) -> Any:
            runs.append(args[4].name)  # the session's scratch folder: s1, s2, ...
            if len(runs) > sessions:
                raise Stopped
            return measure(*args, **kwargs)

        return measured

    commit_round(project, "a little faster", 101.5)
    monkeypatch.setattr(ex, "measure", stopping_after(2))
    with pytest.raises(Stopped):
        validate(project, None)
    assert runs == ["s1", "s2", "s3"] and CampaignRef.round_branch(NAME, 2).branch in git(project, "branch")
    assert "(round 2; 2 measurement sessions kept from " in status(project, None).next

    runs.clear()
    monkeypatch.setattr(ex, "measure", stopping_after(1))
    result = validate(project, None)
    assert runs == ["s3"]  # sessions 1 and 2 were not measured again
    assert (
        result.decision == Decision.ACCEPT
        and "sessions 1-2 were measured by an earlier, interrupted validate" in " ".join(result.notes)
    )
    assert abs(result.ratio - 1.015) < 1e-3
    doc = yaml.safe_load(git(project, "notes", "--ref", C.NOTES_VERDICT, "show", result.commit))
    assert doc["sessions"] == 3 and [s["session"] for s in doc["samples"]] == [1, 1, 2, 2, 3, 3]
    assert not list((project / ".git/campaign/sessions").rglob("*.json"))  # decided: nothing kept

    # Kept sessions belong to the commits they measured: amended, the round is measured anew.
    commit_round(project, "a little faster again", 103.0)  # +1.5% over the accepted 101.5
    runs.clear()
    monkeypatch.setattr(ex, "measure", stopping_after(1))
    with pytest.raises(Stopped):
        validate(project, None)
    assert "1 measurement session kept" in status(project, None).next
    kept = next((project / ".git/campaign/sessions").rglob("*.json"))
    kept.write_text('{"kept": "then", "samples": [{"session": 1}]}')  # not a record validate wrote
    assert "kept" not in status(project, None).next
    git(project, "commit", "-q", "--amend", "-m", "Hypothesis: reworded\nChange: speed 103")
    runs.clear()
    monkeypatch.setattr(ex, "measure", stopping_after(3))
    assert validate(project, None).decision == Decision.ACCEPT
    assert runs == ["s1", "s2", "s3"]
