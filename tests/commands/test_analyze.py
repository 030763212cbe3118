"""`git campaign analyze` on a CPU campaign (the fake harness's --profile file): the profile note,
what reads it (show, status, log --json, report --html, the MCP tool), how it travels, and where
the loop asks for it. The GPU side (torch's CUPTI profile, ncu, the measured ceilings) is in
docs/analyze.md with the commands that exercise it on the H200."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign import envinfo, measure, profile, roofline, verdict
from gitcampaign import git as g
from gitcampaign.cli import main, show_text, status_text
from gitcampaign.commands import analyze as analyze_module
from gitcampaign.commands.analyze import analyze, scratch_name
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.bundle import export, import_bundle
from gitcampaign.commands.init import init
from gitcampaign.commands.log import log
from gitcampaign.commands.pull import pull
from gitcampaign.commands.push import push
from gitcampaign.commands.report import report
from gitcampaign.commands.round import _unnamed_bound, open_round
from gitcampaign.commands.show import show
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.loop import STEP_ANALYZE, STEP_ROUND, next_step, run_next
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import HARNESS_BEFORE_PROFILING, git, make_project  # noqa: E402
from scratch_campaign import NAME, commit_round, init_options, with_baseline  # noqa: E402

LABELS = ["s-small", "s-mid", "s-odd", "s-large"]  # the fake's four shapes, all representative


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return with_baseline(root)


def head(root: Path) -> str:
    return git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()


def note(root: Path, commit: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(root), "notes", "--ref", C.NOTES_PROFILE, "show", commit],
        capture_output=True,
        check=True,
    ).stdout


def test_a_cpu_campaign_gets_a_profile_note(project: Path) -> None:
    result = analyze(project, None)
    incumbent = head(project)
    assert (result.commit, result.round, result.device) == (incumbent, 1, "cpu")  # the baseline commit
    assert result.ceilings["source"] == roofline.NOT_MEASURED and not result.ncu["ran"]
    (doc,) = profile.read(g.open_repo(project), incumbent)
    assert doc["campaign"] == NAME and doc["profiler"] == "torch.profiler" and doc["tree"]
    assert list(doc["shapes"]) == LABELS
    large = doc["shapes"]["s-large"]
    assert large["forward"]["share_of_limit"] is None and large["forward"]["limit"] == roofline.NOT_MEASURED
    assert [k["name"] for k in large["backward"]["kernels"]] == ["fake_gemm_da", "fake_gemm_db"]
    assert large["backward"]["launches_per_call"] == 2
    # The fake's forward: 2MNK FLOPs at SPEED (100) x 1.1 GFLOP/s for M = 512.
    assert large["forward"]["gpu_ms_per_call"] == pytest.approx(2 * 512**3 / 110e9 * 1e3)
    assert large["verdict"].startswith(
        "forward: compute-bound (share of the limit not measured: no ceilings for cpu)"
    )
    assert "2 launches" in large["verdict"]


def test_a_second_profile_adds_to_the_note_and_a_round_is_profiled_in_its_own_tree(project: Path) -> None:
    analyze(project, None)
    first = note(project, head(project))
    analyze(project, None, 1, shape="s-odd")
    assert note(project, head(project)).startswith(first)  # appended, never rewritten
    docs = profile.read(g.open_repo(project), head(project))
    assert [list(doc["shapes"]) for doc in docs] == [LABELS, ["s-odd"]]

    rejected = commit_round(project, "smaller tiles", 50)
    assert validate(project, None, probe=False).decision == Decision.REJECT
    slower = analyze(project, None, 2, shape="s-large")
    assert (slower.commit, slower.round) == (rejected, 2)  # the pinned commit, not the accepted head
    assert slower.shapes["s-large"]["forward"]["gpu_ms_per_call"] == pytest.approx(2 * 512**3 / 55e9 * 1e3)
    with pytest.raises(CampaignError, match="no round 7"):
        analyze(project, None, 7)
    with pytest.raises(CampaignError, match="no target shape 'nope'") as unknown:
        analyze(project, None, shape="nope")
    assert "s-small" in unknown.value.hint


def test_a_harness_before_profiling_is_named_and_nothing_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "proj")
    (root / "bench.py").write_text(HARNESS_BEFORE_PROFILING)
    git(root, "commit", "-qam", "a harness from before analyze")
    monkeypatch.chdir(root)
    init(root, init_options())
    with pytest.raises(CampaignError, match="frozen harness predates profiling") as refused:
        analyze(root, None)
    assert "git campaign init" in refused.value.hint
    assert git(root, "for-each-ref", C.NOTES_PROFILE) == ""
    assert not list((g.common_dir(g.open_repo(root)) / "campaign" / "worktrees").glob("*/*"))


def test_a_malformed_profile_file_stops_with_the_field(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = measure.run_logged

    def harness(command: str, cwd: Path, log_path: Path, *args: object, **kwargs: object) -> int:
        code = real(command, cwd, log_path, *args, **kwargs)  # type: ignore[arg-type]
        out = Path(str(kwargs.get("args", args[-1] if args else [])[1]))  # type: ignore[index]
        data = json.loads(out.read_text())
        data["shapes"][0]["phases"]["forward"]["unit"] = "joule"
        out.write_text(json.dumps(data))
        return code

    monkeypatch.setattr(measure, "run_logged", harness)
    with pytest.raises(CampaignError, match="unit 'joule' is not flop or byte"):
        analyze(project, None)
    assert git(project, "for-each-ref", C.NOTES_PROFILE) == ""


def test_show_status_log_and_the_cli_read_it(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "profile of the accepted head: none" in status_text(status(project, None))
    assert main(["-C", str(project), "analyze"]) == 0
    printed = capsys.readouterr().out
    assert "s-large: forward: compute-bound" in printed and "fake_gemm_da" in printed
    assert f"recorded in {C.NOTES_PROFILE}" in printed and "ncu: not run (no GPU)" in printed
    shown = show(project, None, 1)
    assert [doc["kind"] for doc in shown.profiles] == ["profile"]
    assert "s-odd: forward: compute-bound" in show_text(shown)
    assert (
        shown.to_json()["profiles"][0]["shapes"]["s-odd"]["forward"]["kernels"][0]["name"]
        == "fake_gemm_kernel"
    )
    state = status(project, None)
    assert any(line.startswith("s-small: forward") for line in state.profile)
    assert "profile of the accepted head (`git campaign show`)" in status_text(state)
    rows = log(project, None).to_json()["rounds"]
    assert rows[0]["round"] == 1 and rows[0]["profile"][0].startswith("s-small: forward")
    assert main(["-C", str(project), "analyze", "--shape", "s-mid", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["shapes"]) == ["s-mid"] and data["ceilings"]["source"] == roofline.NOT_MEASURED


def test_a_round_on_an_unprofiled_head_says_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hypothesis should name the bound a profile showed: `round` says when there is none."""
    assert main(["-C", str(project), "round", "-m", "guess"]) == 0
    assert "has no profile: `git campaign analyze`" in capsys.readouterr().err
    assert main(["-C", str(project), "rollback"]) == 0
    analyze(project, None, shape="s-large")
    assert open_round(project, None, "bigger tiles: the profile reads compute-bound").profiled
    assert main(["-C", str(project), "rollback"]) == 0
    capsys.readouterr()
    assert main(["-C", str(project), "round", "-m", "named"]) == 0
    err = capsys.readouterr().err
    assert "no profile" not in err
    assert "names none of the bounds" in err and "(compute: s-large)" in err
    assert main(["-C", str(project), "rollback"]) == 0
    assert open_round(project, None, "bigger tiles: less compute a load").warnings == []
    assert main(["-C", str(project), "rollback"]) == 0
    assert open_round(project, None, "one kernel: fewer launches").warnings == [
        f"the hypothesis names none of the bounds of {head(project)[:12]}'s profile (compute: s-large):"
        " say which one the change moves, and how"
    ]


def test_bounds_lists_each_bound_with_its_shapes() -> None:
    phase = {"bound": "memory", "host_bound": False}
    doc = {
        "shapes": {
            "a": {"forward": phase, "backward": {"bound": "compute", "host_bound": False}, "verdict": "x"},
            "b": {"forward": {**phase, "host_bound": True}, "verdict": "y"},
            "c": {"forward": phase, "backward": phase},
            "d": "not a record",
        }
    }
    assert profile.bounds(doc) == {"memory": ["a", "c"], "compute": ["a"], "host": ["b"]}
    assert profile.bounds({}) == {}
    launch_bound = {"shapes": {"s": {"forward": {"bound": "launch", "host_bound": False}}}}
    assert _unnamed_bound("one kernel: fewer launches", "0" * 40, launch_bound) == []
    assert _unnamed_bound("anything", "0" * 40, {}) == []
    assert "(launch: s)" in _unnamed_bound("bigger tiles", "0" * 40, launch_bound)[0]


def test_a_share_above_the_ceiling_is_flagged() -> None:
    """A phase placed above its ceiling says the ceiling understates the card (an H100 read 1.22 on
    12-06); within the profile's noise (<= OVER_CEILING), or with no ceiling, nothing is said."""
    found = {
        "qkv": {"forward": {"share_of_limit": 1.22}, "backward": {"share_of_limit": 0.74}, "verdict": "x"},
        "o": {"forward": {"share_of_limit": 1.01}, "backward": {"share_of_limit": None}, "verdict": "y"},
    }
    (warning,) = profile.over_the_ceiling(found)
    assert warning.startswith("above the measured ceiling (qkv forward 1.22):")
    assert "best_vendor.py" in warning
    del found["qkv"]
    assert profile.over_the_ceiling(found) == []


def test_report_html_shows_the_profiles(project: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    analyze(project, None, shape="s-large")
    out = tmp_path / "page.html"
    assert main(["-C", str(project), "report", "--html", "-o", str(out)]) == 0
    page = out.read_text()
    assert 'id="profile-1"' in page and "fake_gemm_db" in page and "profiled" in page.lower()
    assert "s-large: forward: compute-bound" in page


def test_the_report_lists_each_profiled_commit_and_the_next_hypotheses(project: Path) -> None:
    analyze(project, None, shape="s-large")
    commit_round(project, "smaller tiles", 50)
    assert validate(project, None, probe=False).decision == Decision.REJECT
    analyze(project, None, 2, shape="s-odd")
    with pytest.raises(CampaignError, match="--next: a hypothesis is empty"):
        report(project, None, force=True, next_hypotheses=("wider tiles", " "))
    done = report(
        project, None, force=True, next_hypotheses=("wider tiles: fewer loads a FLOP", "two stages")
    )
    markdown = (project / done.path).read_text()
    profiles = markdown.split("## Profiles")[1].split("\n## ")[0]
    assert profiles.count("\n- ") == 2  # the baseline and the rejected round, each with its shapes
    assert (
        "- Baseline (" in profiles and "- Round 2 (" in profiles and " on cpu (torch.profiler):" in profiles
    )
    assert "  - s-large: forward: compute-bound" in profiles and "  - s-odd: forward:" in profiles
    hypotheses = markdown.split("## Next hypotheses\n\n")[1].split("\n\n")[0]
    assert hypotheses == "- wider tiles: fewer loads a FLOP\n- two stages"


def test_the_note_travels_and_merges(project: Path, tmp_path: Path) -> None:
    """Export/import carries it byte for byte; two clones profiling the same commit keep both."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(project), str(origin)], check=True)
    git(project, "remote", "add", "origin", str(origin))
    push(project, None)
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(origin), str(other)], check=True)
    pull(other, NAME)

    analyze(project, None, shape="s-small")
    bundle = Path(export(project, NAME, tmp_path / "lineage.bundle").path)
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    git(fresh, "remote", "remove", "origin")
    import_bundle(fresh, bundle)
    assert note(fresh, head(project)) == note(project, head(project))

    analyze(other, None, shape="s-mid")  # the same commit, profiled in the other clone
    push(project, None)
    merged = pull(other, None)
    assert any(C.NOTES_PROFILE in line for line in merged.updated)
    labels = [list(doc["shapes"]) for doc in profile.read(g.open_repo(other), head(project))]
    assert sorted(labels) == [["s-mid"], ["s-small"]]


def test_its_worktree_is_not_swept_by_another_command(project: Path) -> None:
    """analyze holds no campaign lock while it measures; its worktree sits under a lock of its own,
    which a command starting meanwhile (every command first removes a killed command's worktrees)
    sees held."""
    repo = g.open_repo(project)
    with (
        g.campaign_lock(repo, scratch_name(NAME)),
        measure.worktrees(repo, scratch_name(NAME), {"analyze": head(project)}) as trees,
    ):
        status(project, None)  # runs the sweep
        assert (trees["analyze"] / "kernel.py").is_file()


def test_a_busy_campaign_keeps_the_profile_and_says_where(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analyze_module, "NOTE_LOCK_WAIT_S", 0.0)
    repo = g.open_repo(project)
    with g.campaign_lock(repo, NAME), pytest.raises(CampaignError, match="is busy") as busy:
        analyze(project, None, shape="s-small")
    kept = Path(busy.value.message.split("kept in ")[1].rstrip(")"))
    assert yaml.safe_load(kept.read_text())["shapes"]["s-small"]["verdict"]
    assert git(project, "for-each-ref", C.NOTES_PROFILE) == ""


def test_next_asks_for_a_profile_after_two_rollbacks_and_the_isa_after_four(project: Path) -> None:
    for number in range(2):
        commit_round(project, f"idea {number}", 90)
        validate(project, None, probe=False)
    step = next_step(project, None)
    assert (step.step, step.command, step.runnable) == (STEP_ANALYZE, "git campaign analyze", True)
    assert "2 rounds in a row were rolled back" in step.why
    assert status(project, None).next == "git campaign analyze"
    done = run_next(project, None, "bigger tiles from the profile")
    assert [one.step for one in done.performed] == [STEP_ANALYZE, STEP_ROUND]  # profiled, then the round
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    git(project, "branch", "-q", "-D", CampaignRef.round_branch(NAME, 4).branch)
    assert next_step(project, None).step == STEP_ROUND  # the incumbent has its profile now

    for number in range(2):
        commit_round(project, f"more {number}", 90)
        validate(project, None, probe=False)
    step = next_step(project, None)
    assert (step.step, step.command) == (STEP_ANALYZE, "git campaign analyze --isa")
    assert "SASS" in step.why
    analyze(project, None, shape="s-small", with_isa=True)  # no cubin on the CPU: noted, not fatal
    assert next_step(project, None).step == STEP_ROUND


def test_the_mcp_tool_profiles_and_show_returns_it(project: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from test_mcp_server import server

    async def session() -> None:
        async with Client(server(project), read_timeout_seconds=120) as client:
            done = await client.call_tool("analyze", {"shape": "s-odd"})
            assert not done.is_error, done.content
            data = dict(done.structured_content or {})
            assert data["device"] == "cpu" and data["shapes"]["s-odd"]["verdict"].startswith("forward:")
            shown = dict((await client.call_tool("show", {"number": 1})).structured_content or {})
            assert shown["profiles"][-1]["shapes"]["s-odd"]["forward"]["bound"] == roofline.COMPUTE
            refused = await client.call_tool("analyze", {"shape": "nope"})
            assert refused.is_error and "s-small" in dict(refused.structured_content or {})["hint"]

    anyio.run(session)


@pytest.fixture
def on_an_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment fingerprint names an H200, so that figures are held against its ceilings
    (the fake harness's figures stand in for the GPU's)."""
    real = envinfo.fingerprint
    monkeypatch.setattr(
        envinfo, "fingerprint", lambda timeout_s=120.0: {**real(timeout_s), "gpu": "NVIDIA H200"}
    )


def test_t2_per_shape_from_the_ceilings_and_the_report_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_an_h200: None
) -> None:
    """`--target efficiency=0.8` alone: every representative shape at 0.8 of its limit. The fake's
    Combined Step TFLOPS are SPEED x (1 + (M mod 7)/10) = 110, 120, 130, 110: against the H200's
    datasheet (989 TFLOP/s) about 0.11-0.13; against a measured 135 TFLOP/s, 0.81-0.96."""
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, init_options(target=("efficiency=0.8",)))
    baseline(root, None)
    assert not any(line.startswith("T2") for line in status(root, None).termination)
    repo = g.open_repo(root)
    peaks = {"kind": roofline.PEAKS_KIND, "campaign": NAME, "gpu": "NVIDIA H200"}
    verdict.append(repo, head(root), {**peaks, "ceilings": {"bf16_gemm_tflops": 135.0}}, C.NOTES_ENVIRONMENT)
    (reached,) = status(root, None).termination
    assert (
        reached
        == "T2 hardware efficiency: every representative shape at >= 0.8 of its limit (the least at 0.81)"
    )
    assert next_step(root, None).step == "report"
    done = report(root, None)
    markdown = (root / done.path).read_text()
    (header,) = [line for line in markdown.splitlines() if line.startswith("| shape ")]
    assert header.split("|")[-2].strip() == "share of the limit"
    (odd,) = [line for line in markdown.splitlines() if line.startswith("| s-odd ")]
    assert odd.split("|")[-2].strip() == "0.96"
    assert "bf16 GEMM peak of NVIDIA H200 (measured;" in markdown
    final = verdict.read(repo, done.commit)[-1]
    shares = {label: entry.share_of_limit for label, entry in (final.shapes or {}).items()}
    assert shares["s-odd"] == pytest.approx(130 / 135, rel=1e-3) and shares["s-small"] == pytest.approx(
        110 / 135, rel=1e-3
    )


def test_a_gemm_peak_is_taken_at_the_clock_each_figure_ran_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_an_h200: None
) -> None:
    """The harness logs an SM clock of 1500 MHz; the bf16 peak, 120 TFLOP/s, was measured at 1200,
    so every figure is held against 150: the fake's 110-130 TFLOP/s read 0.73-0.87, short of T2's
    0.9, which the unscaled 0.92-1.08 would pass. Baseline, validate and report record the clock."""
    monkeypatch.setenv("BENCH_SM_MHZ", "1500")
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, init_options(target=("efficiency=0.9",)))
    baseline(root, None)
    repo = g.open_repo(root)
    peaks = {"kind": roofline.PEAKS_KIND, "campaign": NAME, "gpu": "NVIDIA H200"}
    figures = {"bf16_gemm": {"sm_mhz": 1200.0}}
    verdict.append(
        repo,
        head(root),
        {**peaks, "ceilings": {"bf16_gemm_tflops": 120.0}, "figures": figures},
        C.NOTES_ENVIRONMENT,
    )
    (first,) = verdict.read(repo, head(root))
    assert {entry.sm_mhz for entry in (first.shapes or {}).values()} == {1500.0}
    assert status(root, None).termination == []  # the best share, 130 / 150, is 0.87

    commit = commit_round(root, "faster", 110)
    validate(root, None)
    judged = verdict.standing(verdict.read(repo, commit))
    assert judged is not None and {entry.sm_mhz for entry in (judged.shapes or {}).values()} == {1500.0}

    done = report(root, None, force=True)
    markdown = (root / done.path).read_text()
    assert "bf16 GEMM peak of NVIDIA H200 scaled from the 1200 MHz it was measured at" in markdown
    final = verdict.read(repo, done.commit)[-1]
    odd = (final.shapes or {})["s-odd"]
    assert odd.sm_mhz == 1500.0 and odd.share_of_limit == pytest.approx(odd.final / 150.0, rel=1e-6)


def test_t2_with_a_peak_keeps_the_aggregate_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, init_options(target=("efficiency=0.5", "peak=200")))
    baseline(root, None)  # the aggregate: the geomean of 110, 120, 130, 110 = 117.3, 0.59 of 200
    assert status(root, None).termination == ["T2 hardware efficiency: 0.59 of peak >= 0.5"]


def test_the_report_says_not_measured_on_the_cpu(project: Path) -> None:
    done = report(project, None, force=True)
    markdown = (project / done.path).read_text()
    assert "Share of the limit: not measured (no ceilings for none (CPU))." in markdown
    assert markdown.count("| not measured") == 4  # one per target shape
    assert "- none: no commit of this campaign was profiled" in markdown
    assert "- none named (`git campaign report --next HYPOTHESIS`" in markdown
