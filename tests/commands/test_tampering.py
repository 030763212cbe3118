"""Tampering and bad input: forged, copied, broken or edited notes and manifests, a hijacked harness,
hostile paths and names. Each is refused with a hint that leads somewhere correct, or ignored, and
nothing recorded is lost."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.campaign import STATUS_ACCEPTED, STATUS_EMPTY, STATUS_OPEN, Campaign
from gitcampaign.commands import validate as validate_module
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.override import rollback
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.hook_install import install_hooks
from gitcampaign.measure import HarnessJob, run_quick
from gitcampaign.results import parse_csv
from gitcampaign.shapes import load_shapes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faultkit import assert_invariants, fast_fingerprint  # noqa: E402, F401
from test_loop import NAME, commit_round, options  # noqa: E402
from test_robustness import snapshot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    baseline(root, None)
    return root


def main_sha(root: Path) -> str:
    return git(root, "rev-parse", C.main_branch(NAME)).strip()


def rounds(root: Path) -> dict[int, str]:
    _, found = Campaign(g.open_repo(root), NAME).lineage()
    return {r.number: r.status for r in found}


def forged(root: Path, commit: str, **extra: object) -> None:
    document = {
        "campaign": NAME,
        "round": 2,
        "phase": "VALIDATE",
        "decision": C.DECISION_ACCEPT,
        "commit": commit,
        "incumbent": git(root, "rev-parse", f"{commit}^").strip(),
        "tree": git(root, "rev-parse", f"{commit}^{{tree}}").strip(),
        "ratio": 9.0,
        **extra,
    }
    verdict.append(g.open_repo(root), commit, document)


# -- tampering -------------------------------------------------------------------------------------


def test_forged_accept_on_an_unmeasured_commit_is_not_obeyed(project: Path) -> None:
    """A hand-written ACCEPT (right commit, parent and tree; no measurement behind it) on a 9x
    slower round: validate measures it and rejects it instead of fast-forwarding main."""
    incumbent = main_sha(project)
    slow = commit_round(project, "slower", 11)
    forged(project, slow)
    forged(
        project, slow, samples=[{"session": 1, "incumbent": {"s-small": 1.0}, "candidate": {"s-small": 9.0}}]
    )
    assert rounds(project)[2] == STATUS_OPEN  # not "pending": nothing backs the forged decision
    result = validate(project, None)
    assert not result.resumed and result.decision == C.DECISION_REJECT
    assert main_sha(project) == incumbent
    assert_invariants(project, NAME)


def test_a_note_naming_the_round_on_another_commit_decides_nothing(project: Path) -> None:
    """The lineage used to take whichever note for a round came last (notes list in sha order):
    a consistent-looking REJECT for round 2 on a commit sorting after the real one won."""
    real = commit_round(project, "faster", 150)
    validate(project, None)  # round 2 accepted
    commit_round(project, "later", 160)
    head = main_sha(project)
    tree = git(project, "rev-parse", f"{head}^{{tree}}").strip()
    scratch, attempt = "", 0
    while scratch <= real:
        attempt += 1
        scratch = git(project, "commit-tree", tree, "-p", head, "-m", f"scratch {attempt}").strip()
    forged(project, scratch, decision=C.DECISION_REJECT)
    assert rounds(project) == {2: STATUS_ACCEPTED, 3: STATUS_OPEN}
    assert validate(project, None).decision == C.DECISION_ACCEPT


def test_one_malformed_note_breaks_no_campaign(project: Path) -> None:
    commit = commit_round(project, "faster", 150)
    repo = g.open_repo(project)
    g.write_note(repo, C.NOTES_VERDICT, git(project, "rev-parse", "main").strip(), b"decision: [ACCEPT\n")
    good = verdict.render({"campaign": "elsewhere", "round": 2, "decision": "ACCEPT"})
    g.write_note(
        repo, C.NOTES_VERDICT, commit, good + b"---\n: : bad: [\n" + b"---\ndecision: 7\ncampaign: x\n"
    )
    assert [doc["campaign"] for doc in verdict.read(repo, commit)] == ["elsewhere"]  # the others skipped
    status(project, None)
    assert validate(project, None).decision == C.DECISION_ACCEPT
    assert verdict.read(repo, commit)[-1]["decision"] == C.DECISION_ACCEPT


def test_commit_on_main_during_validate_is_reported_not_stuck(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main moved while the round was measured: no ACCEPT over an unmoved main; the hint (rebase)
    leads to a validation that decides."""
    commit_round(project, "faster", 150)
    measure = validate_module.measure_round

    def user_commits_meanwhile(*args: object, **kwargs: object) -> bytes:
        raw = measure(*args, **kwargs)  # type: ignore[arg-type]
        head = main_sha(project)
        tree = git(project, "rev-parse", f"{head}^{{tree}}").strip()
        moved = git(project, "commit-tree", tree, "-p", head, "-m", "a hand commit on main").strip()
        git(project, "update-ref", f"refs/heads/{C.main_branch(NAME)}", moved, head)
        return raw

    monkeypatch.setattr(validate_module, "measure_round", user_commits_meanwhile)
    before = verdict.read(g.open_repo(project), git(project, "rev-parse", "HEAD").strip())
    with pytest.raises(CampaignError, match="moved to .* while round 2 was measured") as info:
        validate(project, None)
    monkeypatch.undo()
    assert verdict.read(g.open_repo(project), git(project, "rev-parse", "HEAD").strip()) == before
    assert "git rebase" in info.value.hint
    with pytest.raises(CampaignError, match="does not start from the accepted head") as again:
        validate(project, None)
    rebase = again.value.hint.split("rebase it: ", 1)[1].split()
    git(project, *rebase[1:])
    result = validate(project, None)
    assert result.decision == C.DECISION_ACCEPT and main_sha(project) == result.commit
    assert_invariants(project, NAME)


def test_amended_accepted_head_leaves_a_way_out(project: Path) -> None:
    commit_round(project, "faster", 150)
    validate(project, None)
    git(project, "commit", "-q", "--amend", "-m", "Hypothesis: faster\nChange: reworded")
    assert rounds(project)[2] == STATUS_OPEN  # its ACCEPT was for another commit now
    with pytest.raises(CampaignError, match="round 2 is still open") as info:
        open_round(project, None, "next")
    assert "rollback" in info.value.hint
    with pytest.raises(CampaignError, match="does not start from the accepted head") as info:
        rollback(project, None, 2, "")
    git(project, *info.value.hint.split("rebase it: ", 1)[1].split()[1:])
    assert rounds(project)[2] == STATUS_EMPTY  # the amend already holds the change
    rollback(project, None, 2, "folded into the amend")
    assert open_round(project, None, "next").base == main_sha(project)


def test_tampered_csv_note_stops_a_pending_decision(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = commit_round(project, "faster", 150)
    incumbent = main_sha(project)
    monkeypatch.setattr(
        validate_module, "apply_decision", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt)
    )
    with pytest.raises(KeyboardInterrupt):
        validate(project, None)
    monkeypatch.undo()
    git(project, "notes", "--ref", C.NOTES_BENCH, "add", "-f", "-m", "label,Check\nforged,PASS", commit)
    assert rounds(project)[2] == STATUS_OPEN and main_sha(project) == incumbent
    result = validate(project, None)
    assert not result.resumed and result.decision == C.DECISION_ACCEPT  # measured again
    document = verdict.read(g.open_repo(project), commit)[-1]
    assert g.note_blobs(g.open_repo(project), C.NOTES_BENCH)[commit] == document["csv_note"]["blob"]


def test_csv_note_of_a_killed_run_is_replaced_by_the_deciding_one(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = commit_round(project, "faster", 150)
    monkeypatch.setenv("BENCH_NOISE", "0.001")  # every run writes other bytes
    real_append = verdict.append
    monkeypatch.setattr(verdict, "append", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        validate(project, None)
    monkeypatch.setattr(verdict, "append", real_append)
    repo = g.open_repo(project)
    killed_run = g.read_note(repo, C.NOTES_BENCH, commit)
    validate(project, None)
    document = verdict.read(repo, commit)[-1]
    note = g.read_note(repo, C.NOTES_BENCH, commit)
    assert note != killed_run and g.note_blobs(repo, C.NOTES_BENCH)[commit] == document["csv_note"]["blob"]
    table = parse_csv(note or b"", "note")
    assert {row.label: row.metric(C.METRIC_STEP) for row in table.rows} == document["samples"][0]["candidate"]


def test_a_new_module_next_to_the_harness_is_a_harness_change(project: Path) -> None:
    """`statistics.py` beside bench.py used to make the harness report 1000x; now the round is
    rejected for it, and the harness could not import it anyway."""
    open_round(project, None, "hijack")
    (project / "statistics.py").write_text("def fmean(values):\n    return 1000.0 * sum(values)\n")
    git(project, "add", "statistics.py")
    git(project, "commit", "-q", "-m", "Hypothesis: h\nChange: a helper module")
    result = validate(project, None)
    assert result.decision == C.DECISION_REJECT and result.reasons == [C.REASON_HARNESS_CHANGED]
    assert_invariants(project, NAME)


def test_the_harness_cannot_import_a_shadowing_module(project: Path, tmp_path: Path) -> None:
    shapes = load_shapes(str(project / "shapes.yaml"))[:1]
    job = HarnessJob(f"{sys.executable} bench.py", shapes, 60, C.GEMM_HEADER)
    honest = run_quick(project, job, tmp_path / "a.csv").rows[0].metric(C.METRIC_STEP)
    (project / "statistics.py").write_text("def fmean(values):\n    return 1000.0 * sum(values)\n")
    shadowed = run_quick(project, job, tmp_path / "b.csv").rows[0].metric(C.METRIC_STEP)
    assert shadowed == pytest.approx(honest)


def test_a_new_file_in_the_campaign_folder_is_a_harness_change(project: Path) -> None:
    open_round(project, None, "sneak")
    (project / "campaigns" / NAME / "helper.txt").write_text("x\n")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "Hypothesis: h\nChange: c")
    assert validate(project, None).reasons == [C.REASON_HARNESS_CHANGED]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.update(pairs=100_000_000_000), r"pairs = 100000000000 is outside \[1, 50\]"),
        (lambda m: m.update(harness_timeout_s=-5), r"harness_timeout_s = -5 is outside"),
        (lambda m: m.update(csv_header=m["csv_header"] + ",extra"), "csv_header does not match"),
        (lambda m: m.update(name="other"), "name is 'other'"),
        (lambda m: m.update(representative_shapes=["s-small"]), "representative_shapes changed by hand"),
    ],
)
def test_hand_edited_manifest_is_refused_with_the_fix(project: Path, edit: object, message: str) -> None:
    path = project / "campaigns" / NAME / "manifest.yaml"
    good = main_sha(project)
    data = yaml.safe_load(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    git(project, "commit", "-q", "-am", "hand edit")
    with pytest.raises(CampaignError, match=message) as info:
        open_round(project, None, "h")
    assert info.value.hint
    git(project, "checkout", "-q", good, "--", str(path))  # the restore the hints name
    git(project, "commit", "-q", "-am", "restore")
    assert open_round(project, None, "h").number == 2


# -- moves that local files would block -------------------------------------------------------------


def test_uncommitted_edit_blocks_an_accept_before_anything_moves(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_round(project, "faster", 150)
    incumbent = main_sha(project)
    git(project, "checkout", "-q", C.main_branch(NAME))
    checkout = g.checkout
    monkeypatch.setattr(g, "checkout", lambda repo, branch: None)  # stay on main, as a user could
    monkeypatch.setattr(validate_module.g, "require_clean", lambda repo, action: None)
    (project / "kernel.py").write_text("SPEED = 1\nCORRECT = True\n")  # the edit the move would overwrite
    with pytest.raises(CampaignError, match="cannot move") as info:
        validate(project, None)
    monkeypatch.setattr(g, "checkout", checkout)
    assert main_sha(project) == incumbent  # not moved under the edited file
    assert (project / "kernel.py").read_text() == "SPEED = 1\nCORRECT = True\n"
    assert "git stash" in info.value.hint
    git(project, "checkout", "--", "kernel.py")
    assert validate(project, None).resumed and main_sha(project) != incumbent
    assert_invariants(project, NAME)


def test_untracked_file_in_the_way_of_report(project: Path) -> None:
    commit_round(project, "faster", 150)
    validate(project, None)
    blocking = project / "campaigns" / NAME / C.REPORT_FILE
    blocking.write_text("my own notes\n")
    head = main_sha(project)
    with pytest.raises(CampaignError, match="cannot move") as info:
        report(project, None, force=True)
    assert main_sha(project) == head and blocking.read_text() == "my own notes\n"
    assert git(project, "status", "--porcelain", "--untracked-files=no") == ""
    assert "git stash -u" in info.value.hint
    git(project, "stash", "-q", "-u")
    report(project, None, force=True)
    assert_invariants(project, NAME)


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a..b", "not usable in a ref"),
        ("x.lock", "not usable in a ref"),
        ("n" * 252, "not usable in a ref"),
        ("taken", "branch campaign/taken exists"),
    ],
)
def test_bad_campaign_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, message: str) -> None:
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    git(root, "branch", "campaign/taken")
    before = snapshot(root)
    with pytest.raises(CampaignError, match=message) as info:
        init(root, options(name=name))
    assert info.value.hint and snapshot(root) == before


def test_empty_shape_and_unfit_metric_are_refused_at_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    (root / "zero.yaml").write_text("- {label: empty, M: 0, N: 64, K: 64}\n")
    with pytest.raises(CampaignError, match="M = 0 is not a positive integer"):
        init(root, options(shapes="zero.yaml"))
    with pytest.raises(CampaignError, match="does not fit op 'quantize_fp8_rowwise'") as info:
        init(root, options(op="quantize_fp8_rowwise", metric="step"))
    assert "Forward GB/s" in info.value.hint or "Forward GB/s" in info.value.message


def test_implausible_figures_stop_the_command(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_round(project, "faster", 150)
    before = snapshot(project)
    monkeypatch.setenv("BENCH_MODE", "instant")  # a harness whose timer reports 1e-12 ms
    with pytest.raises(CampaignError, match="beyond any GPU") as info:
        validate(project, None)
    assert "timer" in info.value.hint and snapshot(project) == before


def test_incumbent_nan_is_not_blamed_on_the_candidate(project: Path) -> None:
    set_kernel(project, "float('nan')")  # type: ignore[arg-type]
    git(project, "commit", "-q", "-am", "a broken accepted head")
    commit_round(project, "faster", 150)
    before = snapshot(project)
    with pytest.raises(CampaignError, match="incumbent .* measured NaN"):
        validate(project, None)
    assert snapshot(project) == before


def test_hostile_repository_path_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`;`, `$(...)` and spaces in the repository path stay inside one argument of the probe."""
    root = make_project(tmp_path / "a b;touch PWNED;$(touch PWNED2)")
    (root / "probe.py").write_text(
        "import json, sys\npath = sys.argv[sys.argv.index('--json') + 1]\n"
        "open(path, 'w').write(json.dumps({'median_ms': 1.0}))\n"
    )
    git(root, "add", "probe.py")
    git(root, "commit", "-q", "-m", "probe")
    monkeypatch.chdir(root)
    init(root, options(probe_command=f"{sys.executable} probe.py"))
    baseline(root, None)
    commit_round(root, "faster", 150)
    result = validate(root, None)
    assert result.decision == C.DECISION_ACCEPT and result.transfer == "ACCEPT-as-real"
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


def test_tracked_hooks_folder_is_not_rewritten(project: Path) -> None:
    hooks = project / ".githooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\necho team hook\n")
    git(project, "add", ".githooks")
    git(project, "commit", "-q", "-m", "team hooks")
    git(project, "config", "core.hooksPath", ".githooks")
    with pytest.raises(CampaignError, match="committed files") as info:
        install_hooks(project)
    assert "--no-hooks" in info.value.hint
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\necho team hook\n"
    assert sorted(p.name for p in hooks.iterdir()) == ["pre-commit"]


def test_crash_log_is_per_user_and_private(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gitcampaign import cli

    monkeypatch.setattr(
        "gitcampaign.commands.status.status", lambda *a: (_ for _ in ()).throw(RuntimeError("bug"))
    )
    assert cli.main(["status"]) == cli.EXIT_BUG
    shown = capsys.readouterr().err.split("traceback written to ", 1)[1].strip()
    log = Path(shown)
    assert log.is_relative_to(Path(os.environ["HOME"])) and "RuntimeError: bug" in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_shape_file_is_kept_in_the_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The file may be anywhere (here outside the repository): the campaign's benchmark command must
    # run in any clone, so it points at the campaign's own copy.
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    outside = tmp_path / "mine.yaml"
    outside.write_text("- {label: s1, M: 64, N: 32, K: 16}\n- {label: s2, M: 128, N: 64, K: 32}\n")
    init(root, options(op="gemm", shapes=str(outside)))
    manifest = Campaign(g.open_repo(root), NAME).manifest()
    copy = f"{C.campaign_dir(NAME)}/{C.SHAPES_FILE}"
    assert manifest.benchmark_command == f"python benchmarks/full_bench.py --op gemm --shapes {copy}"
    assert [shape.label for shape in load_shapes(str(root / copy))] == ["s1", "s2"]
    assert str(outside).encode() not in manifest.to_yaml()
