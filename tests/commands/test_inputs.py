"""Bad input in the manifest, at init and in a round gets a clear error before anything changes
(issue 36, section 5: manifest fields, messages, inputs from rounds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.cli import main
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.round import MAX_HYPOTHESIS, open_round
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.steps import FinalDiff, Step, report_section
from gitcampaign.vocabulary import Decision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, commit_round, options  # noqa: E402
from test_robustness import snapshot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project  # noqa: E402


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    baseline(root, None)
    return root


def manifest_of(root: Path, name: str = NAME) -> dict:
    return yaml.safe_load(
        git(root, "show", f"{CampaignRef.main(name).branch}:campaigns/{name}/manifest.yaml")
    )


# -- the manifest and init ----------------------------------------------------------------------------


@pytest.mark.parametrize("target", [{"speedpu": 1.2}, {"speedup": "fast"}, "1.2x"])
def test_a_bad_performance_target_is_a_clear_error_in_status(
    project: Path, target: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "campaigns" / NAME / "manifest.yaml"
    fields = yaml.safe_load(path.read_text())
    fields["performance_target"] = target
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    git(project, "commit", "-q", "-am", "a target by hand")
    assert main(["-C", str(project), "status"]) == 1  # a user error, not "internal error" (3)
    err = capsys.readouterr().err
    assert "performance_target" in err and "hint:" in err


def test_an_empty_test_command_records_no_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--test-command ""` means no focused tests, recorded as such, not a default naming a file the
    project does not have."""
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    init(root, options(test_command=""))
    assert manifest_of(root)["test_command"] == ""
    baseline(root, None)
    commit_round(root, "faster", 120)
    result = validate(root, None)
    assert result.decision == Decision.ACCEPT
    doc = yaml.safe_load(git(root, "notes", "--ref", C.NOTES_VERDICT, "show", result.commit))
    assert "tests" not in doc  # nothing claims tests ran


def test_the_builtin_harness_needs_the_ops_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`init --op gemm` in a project with no kernels/gemm.py is refused at init, not at baseline."""
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    before = snapshot(root)
    with pytest.raises(CampaignError, match="kernels/gemm.py") as refused:
        init(root, options(op="gemm", quick_command=None, test_command=None, probe_command=None))
    assert "--quick-command" in refused.value.hint
    assert snapshot(root) == before


def test_a_default_test_command_names_a_file_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "p")
    (root / "kernels").mkdir()
    (root / "kernels" / "gemm.py").write_text("def gemm(a, b):\n    return a @ b.T\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "a gemm kernel without its tests")
    monkeypatch.chdir(root)
    before = snapshot(root)
    with pytest.raises(CampaignError, match="tests/kernels/test_gemm.py") as refused:
        init(root, options(op="gemm", quick_command=None, test_command=None, probe_command=None))
    assert '--test-command ""' in refused.value.hint
    assert snapshot(root) == before
    init(root, options(op="gemm", quick_command=None, test_command="", probe_command=None))
    assert manifest_of(root)["test_command"] == ""


def test_the_acceptance_output_cannot_close_its_own_fence() -> None:
    suite = Step("acceptance", "pytest", False, 1, 1.0, "log", "FAILED\n```\n<script>alert(1)</script>\n````")
    diff = FinalDiff("a" * 40, "b" * 40, [], [], [], [])
    lines = report_section(suite, diff, NAME)
    opened = lines.index("`````")  # longer than the output's longest run of backticks
    closed = lines.index("`````", opened + 1)
    assert lines[opened + 1 : closed] == suite.output.splitlines()


def test_the_header_mismatch_hint_names_the_campaign_and_its_own_harness(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_round(project, "faster", 120)
    monkeypatch.setenv("BENCH_MODE", "drift")  # the fake harness writes `check` for `Check`
    with pytest.raises(CampaignError, match="CSV header differs") as refused:
        validate(project, None)
    hint = refused.value.hint
    assert "NAME" not in hint and C.HARNESS_FILE not in hint
    assert f"campaign/{NAME}/main" in hint and f"{sys.executable} bench.py" in hint


# -- inputs from rounds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hypothesis", "message"),
    [
        ("x" * (MAX_HYPOTHESIS + 1), f"longer than {MAX_HYPOTHESIS}"),
        ("tiles\x00and more", "control character"),
        ("tiles \x1b[31mred", "control character"),
        ("tiles \u202egnp.", "control character"),  # a right-to-left override: shows other text
        ("tiles \udcff", "not UTF-8"),  # a byte that is not UTF-8, as Python reads it from argv
    ],
)
def test_a_hypothesis_too_long_or_with_control_bytes_opens_nothing(
    project: Path, hypothesis: str, message: str
) -> None:
    before = snapshot(project)
    with pytest.raises(CampaignError, match=message) as refused:
        open_round(project, None, hypothesis)
    assert "-m" in refused.value.hint
    assert snapshot(project) == before  # no branch, no description
    assert "branch.campaign" not in git(project, "config", "--list")
    assert open_round(project, None, "a multi-line\nhypothesis\twith a tab").number == 2


@pytest.mark.parametrize("pairs", [-5, 0, 10**9])
def test_pairs_outside_the_manifest_bound_are_refused(project: Path, pairs: int) -> None:
    commit_round(project, "faster", 120)
    before = snapshot(project)
    with pytest.raises(CampaignError, match=r"pairs .* is outside \[1, 50\]") as refused:
        validate(project, None, pairs=pairs)
    assert "--pairs" in refused.value.hint
    assert snapshot(project) == before
    assert status(project, None).rounds["open"] == 1
