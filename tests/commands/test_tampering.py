"""Tampering and bad input: forged, copied, broken or edited notes and manifests, a hijacked harness,
hostile paths and names. Each is refused with a hint that leads somewhere correct, or ignored, and
nothing recorded is lost."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.campaign import Campaign
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
from gitcampaign.refs import CampaignRef
from gitcampaign.results import parse_csv
from gitcampaign.shapes import load_shapes
from gitcampaign.validation import Judge
from gitcampaign.vocabulary import Decision, Status

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
    return git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()


def rounds(root: Path) -> dict[int, str]:
    _, found = Campaign(g.open_repo(root), NAME).lineage()
    return {r.number: r.status for r in found}


def forged(root: Path, commit: str, **extra: object) -> None:
    document = {
        "campaign": NAME,
        "round": 2,
        "phase": "VALIDATE",
        "decision": Decision.ACCEPT,
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
    assert rounds(project)[2] == Status.OPEN  # not "pending": nothing backs the forged decision
    result = validate(project, None)
    assert not result.resumed and result.decision == Decision.REJECT
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
    forged(project, scratch, decision=Decision.REJECT)
    assert rounds(project) == {2: Status.ACCEPTED, 3: Status.OPEN}
    assert validate(project, None).decision == Decision.ACCEPT


def test_one_malformed_note_breaks_no_campaign(project: Path) -> None:
    commit = commit_round(project, "faster", 150)
    repo = g.open_repo(project)
    g.write_note(repo, C.NOTES_VERDICT, git(project, "rev-parse", "main").strip(), b"decision: [ACCEPT\n")
    good = verdict.render({"campaign": "elsewhere", "round": 2, "decision": "ACCEPT"})
    g.write_note(
        repo, C.NOTES_VERDICT, commit, good + b"---\n: : bad: [\n" + b"---\ndecision: 7\ncampaign: x\n"
    )
    assert [doc.campaign for doc in verdict.read(repo, commit)] == ["elsewhere"]  # the others skipped
    status(project, None)
    assert validate(project, None).decision == Decision.ACCEPT
    assert verdict.read(repo, commit)[-1].decision == Decision.ACCEPT


def cli(root: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`git campaign ARGV` through the CLI's one handler: (exit code, stdout + stderr)."""
    from gitcampaign.cli import main

    code = main(["-C", str(root), *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_note_on_a_pruned_commit_is_skipped_with_the_fix(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A note outlives its commit (`git gc --prune=now` removes an unreachable commit, never the note
    on it): every verb went on to end in "internal error"; now the note is skipped and named."""
    tree = git(project, "rev-parse", "HEAD^{tree}").strip()
    gone = git(project, "commit-tree", tree, "-p", "HEAD", "-m", "unreachable").strip()
    git(project, "notes", "--ref", C.NOTES_VERDICT, "add", "-m", f"campaign: {NAME}\nround: 5", gone)
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "-C", str(project), "cat-file", "-e", gone]).returncode != 0  # gone
    for argv in (["status"], ["log"], ["show", "1"], ["next"]):
        code, out = cli(project, capsys, *argv)
        assert code == 0, out
        assert f"git notes --ref {C.NOTES_VERDICT} prune" in out and gone[:12] in out
    commit_round(project, "faster", 150)
    code, out = cli(project, capsys, "validate")
    assert code == 0 and "round 2: ACCEPT" in out
    git(project, "notes", "--ref", C.NOTES_VERDICT, "prune")  # the fix the warning names
    assert "prune" not in cli(project, capsys, "status")[1]


def alias_bomb(levels: int) -> bytes:
    """A verdict document of `levels` nested aliases, 9 wide: 9**levels strings once expanded."""
    lines = [f"campaign: {NAME}", "round: 2", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return ("---\n" + "\n".join(lines) + "\n").encode()


def test_a_yaml_alias_bomb_in_a_verdict_note_is_refused_fast(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nested aliases in a note (a pull brings anyone's) made status, log and show run for minutes
    and grow by gigabytes; a document with an alias is skipped, and the warning says why."""
    import time

    commit = commit_round(project, "faster", 150)
    validate(project, None)
    repo = g.open_repo(project)
    before = g.read_note(repo, C.NOTES_VERDICT, commit) or b""
    g.write_note(repo, C.NOTES_VERDICT, commit, before + alias_bomb(7), replace=True)
    started = time.monotonic()
    for argv in (["status"], ["log"], ["show", "2"]):
        code, out = cli(project, capsys, *argv)
        assert code == 0, out
        assert "document 2: it uses a YAML alias" in out and commit[:12] in out
    assert time.monotonic() - started < 20
    assert rounds(project)[2] == Status.ACCEPTED  # the round's own document still decides
    assert [doc.phase for doc in verdict.read(repo, commit)] == ["VALIDATE"]


def test_a_broken_verdict_on_an_accepted_round_names_the_note_and_its_restore(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The round's note was overwritten by hand: status called the round "empty", validate found
    nothing waiting, rollback said the ref moved, report refused, and nothing named the note. Now
    each says the same thing, and its hint is the command that puts the last good version back."""
    commit = commit_round(project, "faster", 150)
    validate(project, None)
    git(project, "notes", "--ref", C.NOTES_VERDICT, "add", "-f", "-m", "decision: [ACCEPT", commit)
    code, out = cli(project, capsys, "status")
    assert code == 0 and "rounds: 1 damaged" in out and f"{C.NOTES_VERDICT} on {commit[:12]}" in out
    restore = out.split("next: ", 1)[1].split("`")[1]
    assert restore.startswith(f"git notes --ref {C.NOTES_VERDICT} add -f -C ") and restore.endswith(commit)
    for verb in (
        lambda: validate(project, None),
        lambda: rollback(project, None, 2, "x"),
        lambda: report(project, None, force=True),
        lambda: open_round(project, None, "next"),
    ):
        with pytest.raises(CampaignError, match=f"round 2's verdict .* on {commit[:12]}") as info:
            verb()
        assert restore in info.value.hint
    git(project, *restore.split()[1:])
    assert rounds(project)[2] == Status.ACCEPTED and "damaged" not in cli(project, capsys, "status")[1]


def test_an_emptied_verdict_on_an_accepted_round_is_damage(project: Path) -> None:
    commit = commit_round(project, "faster", 150)
    validate(project, None)
    git(project, "notes", "--ref", C.NOTES_VERDICT, "add", "-f", "--allow-empty", "-m", "", commit)
    assert rounds(project)[2] == "damaged"
    with pytest.raises(CampaignError, match="the note holds no document") as info:
        validate(project, None)
    git(project, *info.value.hint.split("`")[1].split()[1:])
    assert rounds(project)[2] == Status.ACCEPTED


def test_an_edited_ratio_on_an_accepted_round_is_damage_not_an_empty_round(project: Path) -> None:
    """A document that parses but that git's records no longer back (its ratio edited by hand)."""
    commit = commit_round(project, "faster", 150)
    validate(project, None)
    repo = g.open_repo(project)
    edited = (g.read_note(repo, C.NOTES_VERDICT, commit) or b"").replace(b"\nratio: 1.", b"\nratio: 9.", 1)
    g.write_note(repo, C.NOTES_VERDICT, commit, edited, replace=True)
    assert rounds(project)[2] == "damaged"
    with pytest.raises(CampaignError, match="ratio and interval are not what its samples give") as info:
        validate(project, None)
    git(project, *info.value.hint.split("`")[1].split()[1:])
    assert rounds(project)[2] == Status.ACCEPTED


def test_a_missing_baseline_verdict_is_an_error_naming_the_fix(project: Path) -> None:
    """Without the baseline's verdict the frozen-field check was silently skipped (and report
    crashed); now every deciding command stops on it, naming the note and the restore."""
    baseline_commit = git(project, "rev-parse", CampaignRef.main(NAME).branch).strip()
    git(project, "notes", "--ref", C.NOTES_VERDICT, "remove", baseline_commit)
    manifest = project / "campaigns" / NAME / "manifest.yaml"
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    manifest.write_text(manifest.read_text().replace("aggregate: ", "aggregate: 0.5 #", 1))
    git(project, "commit", "-q", "-am", "a frozen field edited by hand")
    for verb in (lambda: open_round(project, None, "faster"), lambda: report(project, None, force=True)):
        with pytest.raises(CampaignError, match=f"baseline verdict .* on {baseline_commit[:12]}") as info:
            verb()
        assert "add -f -C" in info.value.hint
    git(project, *info.value.hint.split("`")[1].split()[1:])
    with pytest.raises(CampaignError, match="changed by hand since the baseline"):
        open_round(project, None, "faster")  # the frozen-field check runs again


def test_a_notes_ref_that_is_no_notes_commit_names_the_way_back(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A notes ref moved to a blob (by hand, or by a hostile push): `git notes list` dies on it, and
    every verb ended in "internal error"."""
    previous = git(project, "rev-parse", C.NOTES_VERDICT).strip()
    blob = (
        subprocess.run(
            ["git", "-C", str(project), "hash-object", "-w", "--stdin"],
            input=b"junk\n",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    git(project, "update-ref", C.NOTES_VERDICT, blob)
    code, out = cli(project, capsys, "status")
    assert code == 1 and f"{C.NOTES_VERDICT} points at {blob}, which is not a notes commit" in out
    assert f"git reflog show {C.NOTES_VERDICT}" in out
    git(project, "update-ref", C.NOTES_VERDICT, previous)
    assert cli(project, capsys, "status")[0] == 0


@pytest.mark.parametrize(
    ("field", "why"),
    [
        ("written: 2026-01-01", "it holds a date value"),  # the verdict cache's JSON failed on it
        ("when: !!binary aGk=", "it holds a bytes value"),
        ("1: one", "a mapping key is int 1"),
        ("reasons: 5", "field 'reasons' is not a list of strings"),  # ", ".join(5) in the lineage
        ("shapes: {s-small: {ratio: fast}}", "field 'shapes' is not a mapping of shapes"),
        ("ci: 3", "field 'ci' is not two numbers"),
    ],
)
def test_a_field_of_another_type_in_a_note_breaks_no_reader(
    project: Path, capsys: pytest.CaptureFixture[str], field: str, why: str
) -> None:
    """A document that git's records back (the right commit, parent and tree) with one field of a
    type no reader expects made status, log, show and `report --html` end in "internal error"."""
    commit = commit_round(project, "faster", 150)
    parent = git(project, "rev-parse", f"{commit}^").strip()
    tree = git(project, "rev-parse", f"{commit}^{{tree}}").strip()
    text = (
        f"campaign: {NAME}\nround: 2\nphase: OVERRIDE\ndecision: REJECT\ncommit: {commit}\n"
        f"incumbent: {parent}\ntree: {tree}\n{field}\n"
    )
    g.write_note(g.open_repo(project), C.NOTES_VERDICT, commit, text.encode())
    for argv in (
        ["status"],
        ["log"],
        ["show", "2"],
        ["report", "--html", "-o", str(project.parent / "r.html")],
    ):
        code, out = cli(project, capsys, *argv)
        assert code == 0, out
        assert f"document 1: {why}" in out
    assert rounds(project)[2] == Status.OPEN  # the skipped REJECT decided nothing


def test_commit_on_main_during_validate_is_reported_not_stuck(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main moved while the round was measured: no ACCEPT over an unmoved main; the hint (rebase)
    leads to a validation that decides."""
    commit_round(project, "faster", 150)
    measure = Judge.measure

    def user_commits_meanwhile(judge: Judge, *args: Any, **kwargs: Any) -> None:
        measure(judge, *args, **kwargs)
        head = main_sha(project)
        tree = git(project, "rev-parse", f"{head}^{{tree}}").strip()
        moved = git(project, "commit-tree", tree, "-p", head, "-m", "a hand commit on main").strip()
        git(project, "update-ref", f"refs/heads/{CampaignRef.main(NAME).branch}", moved, head)

    monkeypatch.setattr(Judge, "measure", user_commits_meanwhile)
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
    assert result.decision == Decision.ACCEPT and main_sha(project) == result.commit
    assert_invariants(project, NAME)


def test_amended_accepted_head_leaves_a_way_out(project: Path) -> None:
    commit_round(project, "faster", 150)
    validate(project, None)
    git(project, "commit", "-q", "--amend", "-m", "Hypothesis: faster\nChange: reworded")
    assert rounds(project)[2] == Status.OPEN  # its ACCEPT was for another commit now
    with pytest.raises(CampaignError, match="round 2 is still open") as info:
        open_round(project, None, "next")
    assert "rollback" in info.value.hint
    with pytest.raises(CampaignError, match="does not start from the accepted head") as info:
        rollback(project, None, 2, "")
    git(project, *info.value.hint.split("rebase it: ", 1)[1].split()[1:])
    assert rounds(project)[2] == Status.EMPTY  # the amend already holds the change
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
    assert rounds(project)[2] == Status.OPEN and main_sha(project) == incumbent
    result = validate(project, None)
    assert not result.resumed and result.decision == Decision.ACCEPT  # measured again
    document = verdict.read(g.open_repo(project), commit)[-1]
    assert (
        document.csv_note
        and g.note_blobs(g.open_repo(project), C.NOTES_BENCH)[commit] == document.csv_note.blob
    )


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
    assert document.csv_note and note != killed_run
    assert g.note_blobs(repo, C.NOTES_BENCH)[commit] == document.csv_note.blob
    table = parse_csv(note or b"", "note")
    assert {row.label: row.metric(C.METRIC_STEP) for row in table.rows} == (document.samples or [])[0][
        "candidate"
    ]


def test_a_new_module_next_to_the_harness_is_a_harness_change(project: Path) -> None:
    """`statistics.py` beside bench.py used to make the harness report 1000x; now the round is
    rejected for it, and the harness could not import it anyway."""
    open_round(project, None, "hijack")
    (project / "statistics.py").write_text("def fmean(values):\n    return 1000.0 * sum(values)\n")
    git(project, "add", "statistics.py")
    git(project, "commit", "-q", "-m", "Hypothesis: h\nChange: a helper module")
    result = validate(project, None)
    assert result.decision == Decision.REJECT and result.reasons == [C.REASON_HARNESS_CHANGED]
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
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
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


def test_an_infinite_metric_stops_validate_with_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A candidate whose Forward TFLOPS is `inf` with Check PASS crashed validate every time."""
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    init(root, options(metric="forward"))
    baseline(root, None)
    commit_round(root, "infinitely fast", "float('inf')")  # type: ignore[arg-type]
    before = snapshot(root)
    with pytest.raises(CampaignError, match="s-small Forward TFLOPS = inf .* beyond any GPU") as info:
        validate(root, None)
    assert "timer" in info.value.hint and snapshot(root) == before


@pytest.mark.parametrize(
    ("speed", "mode", "message"),
    [
        # NaN was reported as "no target shape passes Check"
        ("float('nan')", "", "Combined Step TFLOPS = nan on s-small, s-mid, s-odd, s-large"),
        # 0 was recorded, and every later validate stopped on the incumbent: the campaign was stuck
        ("100.0", "zero", "Forward TFLOPS = 0 on s-small, s-mid, s-odd, s-large"),
    ],
)
def test_a_baseline_that_measures_nothing_usable_is_refused_with_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speed: str, mode: str, message: str
) -> None:
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    metric = "forward" if mode == "zero" else "step"
    init(root, options(metric=metric))
    set_kernel(root, speed)  # type: ignore[arg-type]
    git(root, "commit", "-q", "--allow-empty", "-am", "the kernel under test")
    monkeypatch.setenv("BENCH_MODE", mode)
    before = snapshot(root)
    with pytest.raises(CampaignError, match=message) as info:
        baseline(root, None)
    assert "PASS" in info.value.message and "harness" in info.value.hint
    assert snapshot(root) == before


def test_a_shape_no_gpu_can_hold_is_refused_at_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10^9-row shape was accepted, then baselined as ERROR without a word."""
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    (root / "huge.yaml").write_text("- {label: huge, M: 1000000000, N: 4096, K: 4096}\n")
    before = snapshot(root)
    with pytest.raises(CampaignError, match="huge needs at least 16384 GB") as info:
        init(root, options(shapes="huge.yaml"))
    assert "huge.yaml" in info.value.hint and snapshot(root) == before
    with pytest.raises(CampaignError, match="llama3.1-8b-qkv-mbs100000 needs at least"):
        init(root, options(shapes="llama3.1-8b:mbs=100000"))  # a preset scaled past any GPU


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
    assert result.decision == Decision.ACCEPT and result.transfer == "ACCEPT-as-real"
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
