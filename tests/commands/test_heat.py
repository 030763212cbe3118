"""Heats on the fake project (docs/design.md, Heats): several candidates on one accepted head, every
gate on each, one screen against a shared incumbent, the best confirmed afresh, the others pinned
with their own ratios; membership in refs, locks per candidate, what was rejected kept queryable."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitcampaign import constants as C
from gitcampaign import envinfo, heat, verdict
from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.cli import cli
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.log import log, rejected
from gitcampaign.commands.override import rollback
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate, validate_heat
from gitcampaign.errors import CampaignError
from gitcampaign.hook_install import install_hooks
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision, Status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, commit_round, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import KERNEL, git, make_project, set_kernel  # noqa: E402


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options(max_iterations=20))
    baseline(root, None)
    return root


def heat_round(
    root: Path,
    hypothesis: str,
    speed: float,
    edge_cases_ok: bool = True,
    copy: int | None = None,
    correct: bool = True,
) -> str:
    """Open a round in the heat, make its one change, commit it; its commit."""
    open_round(root, None, hypothesis, heat=True)
    set_kernel(root, speed, correct=correct, edge_cases_ok=edge_cases_ok)
    if copy is not None:  # the incumbent's kernel, one comment apart: an A/A copy
        (root / "kernel.py").write_text(
            KERNEL.format(speed=speed, correct=True, edge_cases_ok=True) + f"# copy {copy}\n"
        )
    git(root, "commit", "-q", "-am", f"Hypothesis: {hypothesis}\nChange: speed {speed}")
    return git(root, "rev-parse", "HEAD").strip()


def main_sha(root: Path) -> str:
    return git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()


def standing(root: Path, commit: str) -> verdict.VerdictDoc:
    found = verdict.standing(verdict.read(g.open_repo(root), commit))
    assert found is not None
    return found


def statuses(root: Path) -> dict[int, Status]:
    return {entry.number: entry.status for entry in Campaign(g.open_repo(root), NAME).lineage()[1]}


def test_heat_accepts_only_the_fastest_and_pins_the_others(project: Path) -> None:
    base = main_sha(project)
    faster = heat_round(project, "bigger tiles", 110)
    slower = heat_round(project, "smaller tiles", 90)
    fastest = heat_round(project, "much bigger tiles", 120)
    for commit in (faster, slower, fastest):
        assert git(project, "rev-parse", f"{commit}^").strip() == base  # each its own branch on one head

    result = validate_heat(project, None)

    assert (result.accepted, result.confirmed) == (4, 4)
    assert main_sha(project) == fastest
    assert (
        git(project, "rev-list", "--count", f"{base}..{CampaignRef.main(NAME).branch}").strip() == "1"
    )  # linear
    assert statuses(project) == {2: Status.REJECTED, 3: Status.REJECTED, 4: Status.ACCEPTED}
    by_round = {entry.round: entry for entry in result.rounds}
    assert by_round[2].reasons == [C.REASON_OUTRUN]
    assert by_round[2].ratio == pytest.approx(1.10, rel=1e-4)  # its own measured ratio, kept
    assert by_round[3].reasons == [C.REASON_SHAPE_REGRESSION]
    assert by_round[3].ratio == pytest.approx(0.90, rel=1e-4)
    assert result.screen[4] == pytest.approx(1.20, rel=1e-4)
    for number, commit in ((2, faster), (3, slower)):
        assert git(project, "rev-parse", str(CampaignRef.rejected(NAME, number))).strip() == commit  # pinned
        assert (
            git(project, "rev-parse", CampaignRef.round_branch(NAME, number).branch).strip() == base
        )  # reset
    repo = g.open_repo(project)
    for commit in (faster, slower, fastest):  # every candidate's CSV and verdict notes are kept
        assert g.read_note(repo, C.NOTES_BENCH, commit) is not None
        doc = standing(project, commit)
        assert doc.heat is not None and doc.heat["rounds"] == [2, 3, 4] and doc.heat["accepted"] == 4
        assert doc.device_seconds is not None and doc.device_seconds > 0
    winner = standing(project, fastest)
    assert winner.decision == Decision.ACCEPT and winner.ratio == pytest.approx(1.20, rel=1e-4)
    assert [s["session"] for s in winner.samples or []] == [1, 1]  # its fresh confirmation's 2 pairs alone
    assert verdict.inconsistency(fastest, winner, verdict.commit_facts(repo, [fastest])[fastest]) is None
    assert repo.git.for_each_ref(heat_prefix()) == ""  # the heat is closed
    assert "Notes (campaign/verdict)" in git(project, "log", "-1", CampaignRef.main(NAME).branch)

    assert f"git campaign round --from {str(CampaignRef.rejected(NAME, 2))} --heat" in by_round[2].notes[-1]
    spent = status(project, None)
    assert spent.measurements == 4 and spent.device_seconds > 0  # the baseline and three candidates


def heat_prefix() -> str:
    from gitcampaign.refs import CampaignRef

    return CampaignRef.heat_prefix(NAME)


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_heat_of_aa_copies_accepts_none(project: Path, monkeypatch: pytest.MonkeyPatch, noise: float) -> None:
    """Three copies of the incumbent: exact ties, or 1% process noise, which the screen's best
    contender is confirmed against afresh (and found within noise)."""
    monkeypatch.setenv("BENCH_NOISE", str(noise))
    base = main_sha(project)
    for copy in range(3):
        heat_round(project, f"the same kernel, copy {copy}", 100, copy=copy)
    result = validate_heat(project, None)
    assert result.accepted is None and main_sha(project) == base
    assert statuses(project) == {2: Status.REJECTED, 3: Status.REJECTED, 4: Status.REJECTED}
    allowed = {C.REASON_NOT_FASTER, C.REASON_WITHIN_NOISE, C.REASON_OUTRUN, C.REASON_SHAPE_REGRESSION}
    assert all(set(entry.reasons) <= allowed and entry.reasons for entry in result.rounds), result.rounds
    if noise == 0.0:  # ties: not faster on the screen, so nothing is confirmed
        assert result.confirmed is None
        assert all(entry.reasons == [C.REASON_NOT_FASTER] for entry in result.rounds)
    # A rejected candidate re-opens as it was, in a new heat; on the same head, as a known repeat.
    reopened = open_round(project, None, "", from_ref=str(CampaignRef.rejected(NAME, 3)), heat=True)
    assert (reopened.number, reopened.heat, reopened.base) == (5, [5], base)
    assert len(reopened.warnings) == 1 and "round 3" in reopened.warnings[0]


def test_a_candidate_failing_its_tests_is_rejected_before_anything_is_measured(project: Path) -> None:
    """Its tests fail: REJECT tests_failed, never measured; the rest are decided among themselves
    (one whose harness Check fails is rejected by the screen, whatever its speed)."""
    faster = heat_round(project, "bigger tiles", 110)
    broken = heat_round(project, "tiles that miss the K tail", 130, edge_cases_ok=False)
    fastest = heat_round(project, "much bigger tiles", 120)
    wrong = heat_round(project, "tiles that drop a row", 140, correct=False)
    result = validate_heat(project, None)
    by_round = {entry.round: entry for entry in result.rounds}
    assert by_round[3].reasons == [C.REASON_TESTS_FAILED]
    assert by_round[5].reasons == [C.REASON_CHECK_FAILED] and by_round[5].shapes["s-large"].check == "FAIL"
    assert (result.accepted, main_sha(project)) == (4, fastest)
    assert by_round[2].reasons == [C.REASON_OUTRUN]
    assert set(result.screen) == {2, 4}  # the broken candidate never ran in the screen
    assert g.read_note(g.open_repo(project), C.NOTES_BENCH, wrong) is not None  # the failing CSV, kept
    repo = g.open_repo(project)
    assert g.read_note(repo, C.NOTES_BENCH, broken) is None
    doc = standing(project, broken)
    assert doc.tests is not None and doc.tests.passed is False and doc.samples is None
    screens = list((g.common_dir(repo) / "campaign" / "runs" / NAME).glob("heat-*/screen"))
    assert len(screens) == 1 and not list(screens[0].glob("*round-3*"))
    assert list(screens[0].glob("sweep0-round-2.csv")) and faster


def test_the_candidates_tests_run_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The heat's candidates are independent trees: their suites run side by side, so the heat
    waits on its slowest suite, not on the sum (each suite here takes a second and logs its span)."""
    spans = tmp_path / "spans"
    root = make_project(tmp_path / "proj")
    (root / "test_kernel.py").write_text(
        "import os, time\nimport kernel\nstart = time.time()\ntime.sleep(1.0)\n"
        "with open(os.environ['TEST_SPANS'], 'a') as log:\n    log.write(f'{start} {time.time()}\\n')\n"
        "assert kernel.EDGE_CASES_OK, 'edge cases fail'\n"
    )
    git(root, "commit", "-qam", "a suite that takes a second")
    monkeypatch.chdir(root)
    monkeypatch.setenv("TEST_SPANS", str(spans))
    init(root, options())
    baseline(root, None)
    spans.unlink()
    for speed in (110, 120, 130):
        heat_round(root, f"speed {speed}", speed)
    result = validate_heat(root, None)
    ran = [tuple(map(float, line.split())) for line in spans.read_text().splitlines()]
    assert len(ran) == 3
    assert max(start for start, _ in ran) < min(end for _, end in ran)  # all three at once
    assert result.accepted == 4
    assert all(standing(root, entry.commit).tests is not None for entry in result.rounds)


def test_plain_round_and_plain_validate_in_an_open_heat_say_how_to_join_or_close_it(project: Path) -> None:
    heat_round(project, "bigger tiles", 110)
    open_round(project, None, "much bigger tiles", heat=True)  # not committed yet
    with pytest.raises(CampaignError) as plain:
        open_round(project, None, "a third idea")
    assert "round --heat" in plain.value.hint and "validate --heat" in plain.value.hint
    with pytest.raises(CampaignError) as single:
        validate(project, None)
    assert "validate --heat" in single.value.hint
    with pytest.raises(CampaignError) as empty:
        validate_heat(project, None)
    assert "round 3 of the heat has no commit yet" in empty.value.message
    assert "rollback 3" in empty.value.hint

    state = status(project, None)
    assert state.heat == [2, 3] and "validate --heat" in state.next and "round 3" in state.next
    assert log(project, None).heat == [2, 3]
    shown = CliRunner().invoke(cli, ["-C", str(project), "log"])
    assert "open heat: rounds 2 and 3" in shown.output
    assert "open heat: rounds 2 and 3" in CliRunner().invoke(cli, ["-C", str(project), "status"]).output

    rollback(project, None, 3, "")  # the empty round leaves; the heat of one is validated as usual
    assert status(project, None).heat == [2]
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    assert validate_heat(project, None).accepted == 2


def test_round_heat_joins_the_open_round_of_this_clone(project: Path) -> None:
    open_round(project, None, "bigger tiles")
    set_kernel(project, 110)
    git(project, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 110")
    joined = open_round(project, None, "much bigger tiles", heat=True)
    assert joined.heat == [2, 3]
    assert sorted(Campaign(g.open_repo(project), NAME).heat_refs()) == [2, 3]


def test_heat_membership_is_a_ref_and_leftovers_are_tidied(project: Path) -> None:
    heat_round(project, "bigger tiles", 110)
    campaign = Campaign(g.open_repo(project), NAME)
    assert campaign.heat_refs() == {2: main_sha(project)}
    # A killed round left a heat ref without its branch: it says nothing and goes at the next round.
    heat.join(campaign, 7, main_sha(project))
    assert [entry.number for entry in heat.members(campaign, campaign.lineage()[1])] == [2]
    with pytest.raises(CampaignError):  # compare-and-swap: the ref exists
        heat.join(campaign, 7, main_sha(project))
    open_round(project, None, "much bigger tiles", heat=True)
    assert sorted(campaign.heat_refs()) == [2, 3]


def test_log_rejected_lists_directions_and_round_warns_on_a_repeat(project: Path) -> None:
    open_round(project, None, "8 warps a program")
    set_kernel(project, 90)
    git(project, "commit", "-q", "-am", "Hypothesis: 8 warps a program\nChange: speed 90")
    assert validate(project, None).decision == Decision.REJECT
    heat_round(project, "bigger tiles", 110)
    heat_round(project, "much bigger tiles", 120)
    validate_heat(project, None)

    listed = rejected(project, None)
    assert [entry.round for entry in listed.rounds] == [2, 3]
    warps, outrun = listed.rounds
    assert warps.reasons == [C.REASON_SHAPE_REGRESSION] and warps.deltas["s-large"] == pytest.approx(-10.0)
    assert outrun.reasons == [C.REASON_OUTRUN] and outrun.ratio == pytest.approx(1.10, rel=1e-4)
    assert [entry.round for entry in rejected(project, None, "WARPS program").rounds] == [2]
    assert rejected(project, None, "warps tiles").rounds == []
    shown = CliRunner().invoke(cli, ["-C", str(project), "log", "--rejected", "--grep", "outrun"])
    assert shown.exit_code == 0 and "bigger tiles" in shown.output and "8 warps" not in shown.output

    # Round 2 was rejected on another head: trying it again on this one is no repeat.
    assert open_round(project, None, "8 warps per program").warnings == []
    set_kernel(project, 90)
    git(project, "commit", "-q", "-am", "Hypothesis: 8 warps per program\nChange: speed 90")
    validate(project, None)
    again = open_round(project, None, "8 Warps a program!")
    assert (
        len(again.warnings) == 1
        and "round 5" in again.warnings[0]
        and "shape_regression" in again.warnings[0]
    )


def test_agents_commit_to_their_own_rounds_at_once(project: Path, tmp_path: Path) -> None:
    """Two agents, each in a worktree of its own, open their candidates in the heat and commit at
    the same moment: each commit's hooks hold its own round's lock, so neither waits for the other;
    a commit to a round that a validation holds stops at once."""
    install_hooks(project)
    agents = []
    for index, speed in enumerate((110, 120)):
        tree = tmp_path / f"agent{index}"
        git(project, "worktree", "add", "-q", "--detach", str(tree), CampaignRef.main(NAME).branch)
        opened = open_round(tree, None, f"speed {speed}", heat=True)
        assert opened.number == 2 + index
        set_kernel(tree, speed)
        agents.append(tree)
    commits = [
        subprocess.Popen(
            [
                "git",
                "-C",
                str(tree),
                "commit",
                "-q",
                "-am",
                f"Hypothesis: speed {speed}\nChange: speed {speed}",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for tree, speed in zip(agents, (110, 120), strict=True)
    ]
    assert [process.wait() for process in commits] == [0, 0], [p.stderr.read() for p in commits if p.stderr]
    with heat.candidate_locks(g.open_repo(project), NAME, [2]):  # as `validate --heat` holds it
        (agents[0] / "kernel.py").write_text((agents[0] / "kernel.py").read_text() + "# late\n")
        late = subprocess.run(
            ["git", "-C", str(agents[0]), "commit", "-q", "--amend", "-a", "--no-edit"],
            capture_output=True,
            text=True,
        )
        assert late.returncode != 0 and "round 2 of campaign demo is busy" in late.stderr
    git(agents[0], "checkout", "-q", "kernel.py")
    result = validate_heat(project, None)
    assert (result.accepted, main_sha(project)) == (3, git(agents[1], "rev-parse", "HEAD").strip())


def test_two_validations_of_one_heat_never_run_at_once(project: Path) -> None:
    """While one `validate --heat` measures, a second stops at once (nothing recorded by it), and a
    commit to any of the heat's rounds is refused; the first then decides the heat alone."""
    from faultkit import processes_under, run

    heat_round(project, "bigger tiles", 110)
    heat_round(project, "much bigger tiles", 120)
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    first: list[tuple[int | str, str]] = []
    os.environ["BENCH_MODE"] = "hang"
    try:
        thread = threading.Thread(
            target=lambda: first.append(run(project, ["validate", "--heat", "--timeout", "8"]))
        )
        thread.start()
        for _ in range(400):  # until its harness runs
            if processes_under(project):
                break
            time.sleep(0.02)
        second = run(project, ["validate", "--heat"])
        with (
            pytest.raises(CampaignError, match="round 2 of campaign demo is busy"),
            heat.candidate_locks(g.open_repo(project), NAME, [2]),
        ):
            pass
        thread.join()
    finally:
        del os.environ["BENCH_MODE"]
    assert second[0] == 1 and "campaign demo is busy" in second[1], second
    assert first[0][0] == 1 and "did not finish within 8 s" in first[0][1]  # the hang, nothing recorded
    assert statuses(project) == {2: Status.OPEN, 3: Status.OPEN}
    assert validate_heat(project, None).accepted == 3
    repo = g.open_repo(project)
    for commit in (git(project, "rev-parse", str(CampaignRef.rejected(NAME, 2))).strip(), main_sha(project)):
        assert sum(doc.phase == "VALIDATE" for doc in verdict.read(repo, commit)) == 1  # decided once


def test_status_and_report_total_the_device_time_of_every_verdict(project: Path) -> None:
    heat_round(project, "bigger tiles", 110)
    heat_round(project, "much bigger tiles", 120)
    decided = validate_heat(project, None)
    docs = [
        standing(project, git(project, "rev-parse", ref).strip())
        for ref in (str(CampaignRef.rejected(NAME, 2)), CampaignRef.main(NAME).branch)
    ]
    spent = [doc.device_seconds or 0.0 for doc in docs]
    assert decided.device_seconds == pytest.approx(sum(spent), abs=0.11)
    assert spent[1] > spent[0]  # the confirmation is the winner's alone
    before = status(project, None)
    assert before.measurements == 3 and before.device_seconds > decided.device_seconds  # and the baseline's
    report(project, None, force=True)
    markdown = git(project, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "- Cost: device time: " in markdown and "over 4 measurements" in markdown
    after = status(project, None)
    assert after.measurements == 4 and after.device_seconds > before.device_seconds


def test_next_run_validates_the_open_heat(project: Path) -> None:
    from gitcampaign.loop import run_next

    heat_round(project, "bigger tiles", 110)
    heat_round(project, "much bigger tiles", 120)
    performed = run_next(project, None, "the next idea")
    (validated, opened) = [done.result for done in performed.performed]
    assert validated.accepted == 3 and opened.number == 4 and opened.heat == []
    shown = CliRunner().invoke(cli, ["-C", str(project), "next"])
    assert "next: edit" in shown.output  # round 4 is open without its change


def test_a_round_is_judged_only_on_the_gpu_of_its_noise_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Baseline on one GPU, validate on another: refused before any gate or run, nothing recorded,
    for a single round and for a heat; on the floor's GPU the same rounds are judged."""
    real = envinfo.fingerprint
    machine = {"gpu": "NVIDIA H100 80GB HBM3"}
    monkeypatch.setattr(envinfo, "fingerprint", lambda timeout_s=120.0: {**real(timeout_s), **machine})
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options(max_iterations=20))
    baseline(root, None)

    def refused(judge: Callable[[], object], commit: str) -> None:
        before = git(root, "for-each-ref").strip()
        machine["gpu"] = "NVIDIA H200"
        with pytest.raises(
            CampaignError, match="measured on NVIDIA H100 80GB HBM3 .* this machine has NVIDIA H200"
        ) as info:
            judge()
        assert "another GPU's noise" in info.value.message
        assert "validate on a machine with NVIDIA H100 80GB HBM3" in info.value.hint
        assert git(root, "for-each-ref").strip() == before  # no ref moved, no note written
        assert not verdict.read(g.open_repo(root), commit)
        machine["gpu"] = "NVIDIA H100 80GB HBM3"

    single = commit_round(root, "bigger tiles", 130)
    refused(lambda: validate(root, None), single)
    assert validate(root, None).decision in ACCEPTED
    candidate = heat_round(root, "deeper pipeline", 160)
    refused(lambda: validate_heat(root, None), candidate)
    assert validate_heat(root, None).accepted == 3
