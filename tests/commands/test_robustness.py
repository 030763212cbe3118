"""Bad input and interruptions: a clear error naming the fix, and no ref or note half-done."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from git.exc import GitCommandError

from gitcampaign import constants as C
from gitcampaign import executor as executor_module
from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.commands import validate as validate_module
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.round import open_round
from gitcampaign.commands.status import status
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision, Status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, commit_round, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    baseline(root, None)
    return root


def snapshot(root: Path) -> str:
    """Every ref (notes included) and the tracked-file status: what 'nothing half-done' compares."""
    refs = git(root, "for-each-ref", "--format=%(refname) %(objectname)")
    return refs + git(root, "status", "--porcelain", "--untracked-files=no")


def test_dirty_tree_is_refused_with_the_fix(project: Path) -> None:
    commit_round(project, "faster", 110)
    (project / "kernel.py").write_text("SPEED = 1\nCORRECT = True\n")
    before = snapshot(project)
    with pytest.raises(CampaignError, match="uncommitted changes") as info:
        validate(project, None)
    assert "git stash" in info.value.hint
    assert snapshot(project) == before


def test_detached_head_and_unknown_campaign(project: Path) -> None:
    git(project, "checkout", "-q", "main")
    init(project, options(name="other"))
    git(project, "checkout", "-q", "--detach", "HEAD")
    with pytest.raises(CampaignError, match="HEAD is detached") as info:
        validate(project, None)
    assert "--campaign" in info.value.hint
    with pytest.raises(CampaignError, match="unknown campaign 'nope'"):
        validate(project, "nope")


def test_missing_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    init(root, options())
    for action in (lambda: open_round(root, None, "h"), lambda: validate(root, None)):
        with pytest.raises(CampaignError, match="no baseline") as info:
            action()
        assert "git campaign baseline" in info.value.hint


def test_malformed_manifest_names_the_field(project: Path) -> None:
    path = project / "campaigns" / NAME / "manifest.yaml"
    path.write_text(path.read_text().replace("max_iterations: 3", "max_iterations: three"))
    git(project, "commit", "-q", "-am", "break the manifest")
    with pytest.raises(CampaignError, match="'max_iterations' is str, expected int"):
        open_round(project, None, "h")
    path.write_text("just: [a, list")
    git(project, "commit", "-q", "-am", "break it more")
    with pytest.raises(CampaignError, match="not valid YAML"):
        open_round(project, None, "h")


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("drift", "CSV header differs from the one frozen at BASELINE at byte 14"),
        ("crash", "exited 1"),
        ("partial", "partial CSV"),
        ("hang", "did not finish within 3 s"),
    ],
)
def test_harness_failures_leave_nothing_half_done(
    project: Path, monkeypatch: pytest.MonkeyPatch, mode: str, message: str
) -> None:
    commit_round(project, "faster", 110)
    before = snapshot(project)
    monkeypatch.setenv("BENCH_MODE", mode)
    with pytest.raises(CampaignError, match=message):
        validate(project, None, timeout_s=3)
    assert snapshot(project) == before
    monkeypatch.delenv("BENCH_MODE")
    assert validate(project, None).decision == Decision.ACCEPT  # the same round validates afterwards


def test_killed_after_notes_resumes(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    candidate = commit_round(project, "faster", 110)
    incumbent = git(project, "rev-parse", CampaignRef.main(NAME).branch).strip()

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(validate_module, "apply_decision", killed)
    with pytest.raises(KeyboardInterrupt):
        validate(project, None)
    monkeypatch.undo()
    assert git(project, "rev-parse", CampaignRef.main(NAME).branch).strip() == incumbent  # refs not moved yet
    state = status(project, None).to_json()
    assert state["rounds"][Status.PENDING] == 1 and "finishes the interrupted decision" in state["next"]
    result = validate(project, None)
    assert result.resumed and result.decision == Decision.ACCEPT
    assert git(project, "rev-parse", CampaignRef.main(NAME).branch).strip() == candidate
    docs = Campaign(g.open_repo(project), NAME).verdicts()[candidate]
    assert len(docs) == 1  # resuming adds no second measurement


def test_killed_while_measuring_leaves_the_round_open(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_round(project, "faster", 110)
    before = snapshot(project)

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(executor_module, "interleaved", killed)  # the shard runner calls it
    with pytest.raises(KeyboardInterrupt):
        validate(project, None)
    monkeypatch.undo()
    assert snapshot(project) == before
    assert len(git(project, "worktree", "list").splitlines()) == 1  # scratch worktrees removed
    assert validate(project, None).decision == Decision.ACCEPT


def test_concurrent_commands_refuse_while_locked(project: Path) -> None:
    commit_round(project, "faster", 110)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from gitcampaign import git as g\n"
            "with g.campaign_lock(g.open_repo(sys.argv[1]), sys.argv[2]):\n print('held', flush=True); time.sleep(30)",
            str(project),
            NAME,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = snapshot(project)
        with pytest.raises(CampaignError, match="is busy: pid") as info:
            validate(project, None)
        assert "wait for it" in info.value.hint
        assert snapshot(project) == before
    finally:
        holder.kill()
        holder.wait()
    assert validate(project, None).decision == Decision.ACCEPT  # the lock died with its holder


def test_notes_survive_amend_and_rebase(project: Path) -> None:
    repo = g.open_repo(project)
    git(project, "checkout", "-q", "-b", "scratch")
    set_kernel(project, 123)
    git(project, "commit", "-q", "-am", "annotated")
    payload = b"label,Check\nx,PASS  \n"
    g.write_note(repo, C.NOTES_BENCH, git(project, "rev-parse", "HEAD").strip(), payload)
    git(project, "commit", "-q", "--amend", "-m", "amended")
    amended = git(project, "rev-parse", "HEAD").strip()
    assert g.read_note(repo, C.NOTES_BENCH, amended) == payload
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    (project / "other.txt").write_text("moves main\n")
    git(project, "add", "other.txt")
    git(project, "commit", "-q", "-m", "other")
    git(project, "rebase", "-q", CampaignRef.main(NAME).branch, "scratch")
    rebased = git(project, "rev-parse", "scratch").strip()
    assert rebased != amended and g.read_note(repo, C.NOTES_BENCH, rebased) == payload


def test_rejected_rounds_survive_gc(project: Path) -> None:
    slow = commit_round(project, "slower", 90)
    validate(project, None)
    git(project, "branch", "-q", "-D", CampaignRef.round_branch(NAME, 2).branch)
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")
    git(project, "notes", "--ref", C.NOTES_BENCH, "prune")
    assert git(project, "cat-file", "-t", slow).strip() == "commit"
    assert slow in git(project, "log", "--format=%H", str(CampaignRef.rejected(NAME, 2)))
    assert git(project, "notes", "--ref", C.NOTES_BENCH, "show", slow).startswith(C.GEMM_HEADER)


@pytest.mark.parametrize(
    "payload",
    [b"a,b\n1,2   \n\n", b"no newline at end", b"crlf\r\nline\r\n", b"\n\nleading blank lines\n", b"  x\t\n"],
)
def test_note_round_trips_byte_for_byte(project: Path, payload: bytes) -> None:
    repo = g.open_repo(project)
    head = git(project, "rev-parse", "HEAD").strip()
    g.write_note(repo, "refs/notes/campaign/test", head, payload)
    assert g.read_note(repo, "refs/notes/campaign/test", head) == payload


def test_csv_note_is_never_overwritten(project: Path) -> None:
    repo = g.open_repo(project)
    head = git(project, "rev-parse", "HEAD").strip()
    original = g.read_note(repo, C.NOTES_BENCH, head)
    with pytest.raises(GitCommandError, match="existing notes"):
        g.write_note(repo, C.NOTES_BENCH, head, b"other")
    assert g.read_note(repo, C.NOTES_BENCH, head) == original


def test_validating_a_decided_round_names_the_next_step(project: Path) -> None:
    commit_round(project, "faster", 110)
    validate(project, None)
    git(project, "checkout", "-q", CampaignRef.round_branch(NAME, 2).branch)
    with pytest.raises(CampaignError, match="round 2 is already accepted") as info:
        validate(project, None)
    assert "git campaign round" in info.value.hint


def test_a_hypothesis_that_is_not_utf8_is_refused_by_round(project: Path) -> None:
    """`round -m` with a latin-1 byte (Python keeps it as a lone surrogate) used to write a verdict
    that could not be read back."""
    before = snapshot(project)
    with pytest.raises(CampaignError, match=r"not UTF-8 \(byte 0xe9") as info:
        open_round(project, None, "caf\udce9 tiles")
    assert "UTF-8" in info.value.hint and snapshot(project) == before


def test_a_latin1_round_that_skipped_the_hooks_is_decided_and_readable(project: Path, tmp_path: Path) -> None:
    """A round whose hypothesis reaches validate with bytes that are not UTF-8 (hooks skipped with
    --no-verify; a branch description set by hand): validate accepted it and moved main, but its
    verdict could not be read back, the round showed "empty" and `report --html` crashed. The bytes
    are carried as `\\xNN` escapes now, and the verdict reads back."""
    from gitcampaign.html_report import write_report

    open_round(project, None, "placeholder")
    branch = CampaignRef.round_branch(NAME, 2).branch
    subprocess.run(
        [b"git", b"-C", bytes(project), b"config", f"branch.{branch}.description".encode(), b"caf\xe9 tiles"],
        check=True,
    )
    set_kernel(project, 150)
    git(project, "add", "kernel.py")
    subprocess.run(
        [
            b"git",
            b"-C",
            bytes(project),
            b"commit",
            b"-q",
            b"--no-verify",
            b"-m",
            b"Hypothesis: caf\xe9\nChange: x",
        ],
        check=True,
    )
    assert validate(project, None).decision == Decision.ACCEPT
    _, rounds = Campaign(g.open_repo(project), NAME).lineage()
    assert (rounds[0].status, rounds[0].hypothesis) == ("accepted", "caf\\xe9 tiles")
    page = tmp_path / "report.html"
    write_report(project, None, page)
    assert "caf\\xe9 tiles" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("cache", ["[1, 2]", "{BLOBS}", "not json"])
def test_a_damaged_verdict_cache_is_rebuilt(project: Path, cache: str) -> None:
    """The cache of parsed verdict notes lives in the git dir: damaged, it costs a re-read."""
    commit_round(project, "faster", 150)
    validate(project, None)
    repo = g.open_repo(project)
    blobs = g.note_blobs(repo, C.NOTES_VERDICT).values()
    path = g.common_dir(repo) / "campaign" / "verdict-cache-v3.json"
    path.write_text(cache.replace("BLOBS", ", ".join(f'"{blob}": {{"docs": 7}}' for blob in blobs)))
    _, rounds = Campaign(repo, NAME).lineage()
    assert [entry.status for entry in rounds] == ["accepted"]
