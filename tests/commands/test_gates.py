"""A gate's REJECT is final: no override (CLI `accept`, the MCP `accept` tool) accepts a round that a
gate rejected; `overfit` only with its own flag; the report says what each verdict recorded, and
`validate --exit-code` tells a script the decision."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import rules, verdict
from gitcampaign.cli import main
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.override import accept, rollback
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, commit_round, options  # noqa: E402
from test_probe_gate import PROBE, faster_round  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402

# The fake project builds nothing; this build fails where the round's kernel.py says so.
BUILD = f"{sys.executable} -c \"import kernel, sys; sys.exit(getattr(kernel, 'BUILD_FAILS', 0))\""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    (root / "probe.py").write_text(PROBE)
    git(root, "add", "probe.py")
    git(root, "commit", "-q", "-m", "fake probe")
    monkeypatch.chdir(root)
    init(root, options(build_command=BUILD, probe_command=f"{sys.executable} probe.py", max_iterations=9))
    baseline(root, None)
    return root


def main_sha(root: Path) -> str:
    return git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()


def verdicts(root: Path, commit: str) -> list[dict]:
    return list(yaml.safe_load_all(git(root, "notes", "--ref", C.NOTES_VERDICT, "show", commit)))


def _harness(root: Path) -> None:
    bench = root / "bench.py"
    bench.write_text(bench.read_text().replace("speed = ", "speed = 2 * "))
    set_kernel(root, 100)


def _cache(root: Path) -> None:
    set_kernel(root, 500)
    with open(root / "kernel.py", "a") as kernel:
        kernel.write("_cache = {}\n\n\ndef op(x):\n    if id(x) in _cache:\n        return _cache[id(x)]\n")


# One round per gate, each faster than the incumbent where it is measured at all.
GATE_ROUNDS = {
    C.REASON_CHECK_FAILED: lambda root: set_kernel(root, 500, correct=False),
    C.REASON_TESTS_FAILED: lambda root: set_kernel(root, 300, edge_cases_ok=False),
    C.REASON_BUILD_FAILED: lambda root: (root / "kernel.py").write_text(
        "SPEED = 300\nCORRECT = True\nEDGE_CASES_OK = True\nBUILD_FAILS = 1\n"
    ),
    C.REASON_STATIC_CHECK: _cache,
    C.REASON_HARNESS_CHANGED: _harness,
}


def test_the_gate_reasons_are_one_list() -> None:
    assert set(rules.GATES) == {
        C.REASON_CHECK_FAILED,
        C.REASON_TESTS_FAILED,
        C.REASON_BUILD_FAILED,
        C.REASON_STATIC_CHECK,
        C.REASON_HARNESS_CHANGED,
        C.REASON_OVERFIT,
    }
    assert set(rules.SPEED_RULES) == {
        C.REASON_NOT_FASTER,
        C.REASON_WITHIN_NOISE,
        C.REASON_SHAPE_REGRESSION,
        C.REASON_OUTRUN,
    }


@pytest.mark.parametrize("reason", list(GATE_ROUNDS))
def test_no_override_accepts_a_gate_rejected_round(project: Path, reason: str) -> None:
    open_round(project, None, f"a round that fails {reason}")
    GATE_ROUNDS[reason](project)
    git(project, "commit", "-q", "--no-verify", "-am", "Hypothesis: h\nChange: c")
    commit = git(project, "rev-parse", "HEAD").strip()
    result = validate(project, None)
    assert (result.decision, result.reasons) == (Decision.REJECT, [reason])
    head, notes = main_sha(project), verdicts(project, commit)
    with pytest.raises(CampaignError, match=f"failed the {reason} gate") as refused:
        accept(project, None, 2, "looks fine to me")
    assert "new round" in refused.value.hint
    with pytest.raises(CampaignError, match=f"failed the {reason} gate"):
        accept(project, None, 2, "looks fine to me", override_overfit=True)
    assert main(["-C", str(project), "accept", "2", "-m", "x"]) == 1
    assert main(["-C", str(project), "accept", "2", "--override-overfit", "-m", "x"]) == 1
    assert main_sha(project) == head and verdicts(project, commit) == notes  # nothing noted, nothing moved
    assert git(project, "rev-parse", str(CampaignRef.rejected(NAME, 2))).strip() == commit


def test_overfit_is_overridden_only_with_its_own_flag_and_the_report_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit = faster_round(project, "wins the harness only", "PROBE_MS = 11.0\n")
    assert validate(project, None).reasons == [C.REASON_OVERFIT]
    with pytest.raises(CampaignError, match="failed the overfit gate") as refused:
        accept(project, None, 2, "the probe is unrepresentative")
    assert "--override-overfit" in refused.value.hint
    assert main_sha(project) != commit
    assert main(["-C", str(project), "accept", "2", "--override-overfit", "-m", "probe too small"]) == 0
    assert "overfit overridden" in capsys.readouterr().out
    assert main_sha(project) == commit
    override = verdicts(project, commit)[-1]
    assert override["override"] is True and override["overrides"] == [C.REASON_OVERFIT]
    assert override["notes"] == ["probe too small"]

    report(project, None, force=True)
    markdown = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "round 2: accepted by manual override of REJECT (overfit): probe too small" in markdown
    assert "REJECT-as-overfit" in markdown
    assert "Every accepted round passed" not in markdown


def test_a_round_nobody_validated_is_never_accepted(project: Path) -> None:
    """Accepting an open round, or one rejected by hand before it was measured, would skip every gate."""
    commit_round(project, "unmeasured", 130)
    head = main_sha(project)
    with pytest.raises(CampaignError, match="has not been validated") as refused:
        accept(project, None, None, "trust me")
    assert "git campaign validate" in refused.value.hint
    rollback(project, None, None, "not now")
    with pytest.raises(CampaignError, match="has not been validated"):
        accept(project, None, None, "now")
    assert main_sha(project) == head


def test_the_speed_rules_stay_overridable_and_the_report_says_override(project: Path) -> None:
    commit_round(project, "faster", 120)
    assert validate(project, None).decision == Decision.ACCEPT
    slower = commit_round(project, "simpler, slower", 95)
    assert validate(project, None).reasons == [C.REASON_SHAPE_REGRESSION]
    assert accept(project, None, None, "keeps the code simpler").decision == Decision.ACCEPT
    assert main_sha(project) == slower
    assert verdicts(project, slower)[-1]["overrides"] == [C.REASON_SHAPE_REGRESSION]

    report(project, None, force=True)
    markdown = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert (
        "round 3: accepted by manual override of REJECT (shape_regression): keeps the code simpler"
        in markdown
    )
    # Derived from each verdict: the gates round 2 passed, the build and the tests that ran.
    audit = next(line for line in markdown.splitlines() if line.startswith("- round 2: ACCEPT,"))
    for passed in ("built", "tests passed", "lint clean", "protected files unchanged", "every shape PASS"):
        assert passed in audit, audit
    assert "ACCEPT-as-real" in audit
    assert "Every accepted round passed" not in markdown  # one was an override


def test_the_harness_changed_reproduction_ends_at_accept(project: Path) -> None:
    """Issue 36: a round doubling the speed inside the harness, `accept N -m x`, `report --force`."""
    open_round(project, None, "a friendlier harness")
    _harness(project)
    git(project, "commit", "-q", "-am", "Hypothesis: harness\nChange: harness")
    assert validate(project, None).reasons == [C.REASON_HARNESS_CHANGED]
    assert main(["-C", str(project), "accept", "2", "-m", "x"]) == 1
    report(project, None, force=True)
    markdown = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "0 accepted, 1 rejected" in markdown and "rolled back" not in markdown
    assert "- no accepted rounds" in markdown
    assert f"- The rules (gitcampaign/rules.py): {rules.summary()}" in markdown  # the rule book's own words


def test_validate_exit_code_tells_reject_from_accept(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit_round(project, "slower", 90)
    assert main(["-C", str(project), "validate", "--no-probe"]) == 0  # as git diff: without the flag, 0
    commit_round(project, "slower again", 91)
    assert main(["-C", str(project), "validate", "--no-probe", "--exit-code"]) == 1
    assert "REJECT" in capsys.readouterr().out
    commit_round(project, "faster", 120)
    assert main(["-C", str(project), "validate", "--no-probe", "--exit-code", "--json"]) == 0
    commit_round(project, "slower once more", 90)
    assert main(["-C", str(project), "next", "--run", "--exit-code"]) == 1
    commit_round(project, "faster again", 150)
    assert main(["-C", str(project), "next", "--run", "--exit-code"]) == 0


def _forge(root: Path, commit: str, **fields: object) -> None:
    """A hand-written VALIDATE document, consistent with git's records where they are checked."""
    document = {
        "campaign": NAME,
        "round": 2,
        "phase": "VALIDATE",
        "decision": Decision.REJECT,
        "reasons": [C.REASON_NOT_FASTER],
        "commit": commit,
        "incumbent": git(root, "rev-parse", f"{commit}^").strip(),
        "tree": git(root, "rev-parse", f"{commit}^{{tree}}").strip(),
        **fields,
    }
    verdict.append(g.open_repo(root), commit, document)


@pytest.mark.parametrize("how", ["appended", "rewritten"])
def test_a_hand_written_note_cannot_talk_past_a_gate(project: Path, how: str) -> None:
    """A verdict saying `not_faster` written after (or instead of) the harness_changed one: accept
    re-runs the integrity and static gates from git, and reads every validation, not the last."""
    open_round(project, None, "a friendlier harness")
    _harness(project)
    git(project, "commit", "-q", "-am", "Hypothesis: harness\nChange: harness")
    commit = git(project, "rev-parse", "HEAD").strip()
    assert validate(project, None).reasons == [C.REASON_HARNESS_CHANGED]
    if how == "rewritten":
        git(project, "notes", "--ref", C.NOTES_VERDICT, "remove", commit)
    _forge(project, commit)
    head = main_sha(project)
    with pytest.raises(CampaignError, match="failed the harness_changed gate"):
        accept(project, None, 2, "the note says it was only slow")
    assert main_sha(project) == head


def test_an_override_needs_a_measured_validation(project: Path) -> None:
    """A hand-written `not_faster` on a round nobody measured (its tests fail): no CSV note backs it.
    (A noted rejection is applied by the next validate, as an interrupted one's would be.)"""
    open_round(project, None, "unmeasured")
    set_kernel(project, 300, edge_cases_ok=False)
    git(project, "commit", "-q", "--no-verify", "-am", "Hypothesis: unmeasured\nChange: c")
    commit = git(project, "rev-parse", "HEAD").strip()
    _forge(project, commit)
    assert validate(project, None).resumed
    with pytest.raises(CampaignError, match="names no measurement") as refused:
        accept(project, None, 2, "looks fast")
    assert "git campaign validate" in refused.value.hint
    assert main_sha(project) != commit


def test_a_noted_accept_no_gate_allows_is_rejected_by_validate(project: Path) -> None:
    """An override's accept written into the note by hand (or brought by a pull) would be "pending",
    and validate applies what an interrupted run noted: it re-checks it as accept would, and notes
    and applies a REJECT instead, so the campaign goes on."""
    open_round(project, None, "a friendlier harness")
    _harness(project)
    git(project, "commit", "-q", "-am", "Hypothesis: harness\nChange: harness")
    commit = git(project, "rev-parse", "HEAD").strip()
    assert validate(project, None).reasons == [C.REASON_HARNESS_CHANGED]
    head = main_sha(project)
    incumbent = git(project, "rev-parse", f"{commit}^").strip()
    accepted = {"phase": "OVERRIDE", "decision": Decision.ACCEPT, "override": True, "incumbent": incumbent}
    _forge(project, commit, reasons=[C.REASON_MANUAL], **accepted)
    assert status(project, None).rounds["pending"] == 1
    result = validate(project, None)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_HARNESS_CHANGED])
    assert "a noted accept of this commit was refused" in result.notes[0]
    assert main_sha(project) == head and status(project, None).rounds["rejected"] == 1
    assert verdicts(project, commit)[-1]["decision"] == Decision.REJECT
