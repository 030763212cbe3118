"""What the fault suite shares: commands run in a forked child (killed at a named step, as by
SIGKILL), and the invariants every test asserts after a kill, a race or a tampering attempt."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from gitcampaign import constants as C
from gitcampaign import envinfo
from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.cli import main
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git  # noqa: E402

KILLED = "killed"
NOTES = (C.NOTES_BENCH, C.NOTES_FULL, C.NOTES_VERDICT)


def quick_fingerprint(timeout_s: float = 120.0) -> dict[str, object]:
    """The environment probe imports torch (seconds); the fault suite runs hundreds of commands."""
    return {"torch": "not probed in the fault suite", "gpu": "none (CPU)"}


@pytest.fixture(autouse=True)
def fast_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "fingerprint", quick_fingerprint)


def run(
    root: Path, argv: list[str], fault: str | None = None, trace: Path | None = None
) -> tuple[int | str, str]:
    """`git campaign ARGV` in a forked child: (exit code, or KILLED if it died by SIGKILL; stderr).

    Forking keeps the suite fast: a child costs milliseconds, a fresh `python -m` about a second."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 98
        try:
            os.close(read_end)
            os.chdir(root)
            if fault:
                os.environ[g.FAULT_ENV] = fault
            if trace:
                os.environ[g.FAULT_TRACE_ENV] = str(trace)
            os.dup2(write_end, 2)  # the child's stderr comes back to the test
            sys.stderr = os.fdopen(2, "w", buffering=1)
            code = main(["-C", str(root), *argv])
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        stderr = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return KILLED, stderr
    return os.WEXITSTATUS(status), stderr


def trace_points(template: Path, scratch: Path, argv: list[str]) -> list[str]:
    """Every fault point the command passes, in order (first hits only), from a run on a copy."""
    copy = clone_state(template, scratch)
    trace = scratch.parent / f"{scratch.name}.trace"
    code, stderr = run(copy, argv, trace=trace)
    assert code == 0, stderr
    seen: list[str] = []
    for name in trace.read_text().split():
        if name not in seen:
            seen.append(name)
    return seen


def clone_state(template: Path, target: Path) -> Path:
    """A byte copy of a prepared repository (cheaper than building it again)."""
    shutil.copytree(template, target, symlinks=True)
    return target


def notes_state(root: Path) -> dict[str, dict[str, bytes]]:
    """{notes ref: {commit: note bytes}} for the campaign notes."""
    repo = g.open_repo(root)
    result = {}
    for ref in NOTES:
        result[ref] = {commit: g.read_blob(repo, blob) for commit, blob in g.note_blobs(repo, ref).items()}
    return result


def assert_no_note_lost(before: dict[str, dict[str, bytes]], after: dict[str, dict[str, bytes]]) -> None:
    """Every note survives; a verdict only grows (appended documents); a CSV note never changes."""
    for ref, notes in before.items():
        for commit, content in notes.items():
            assert commit in after[ref], f"{ref} lost its note on {commit[:12]}"
            if ref == C.NOTES_VERDICT:
                assert after[ref][commit].startswith(content), f"verdict on {commit[:12]} was rewritten"
            else:
                assert after[ref][commit] == content, f"{ref} note on {commit[:12]} was replaced"


def processes_under(root: Path) -> list[str]:
    """Live processes working inside `root`'s git dir: harnesses run in the scratch worktrees there
    (the test's own `git cat-file` helpers work in `root` itself)."""
    root = root / ".git"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == str(root) or cwd.startswith(f"{root}/")):
            found.append(f"{entry.name} in {cwd}")
    return found


def assert_invariants(root: Path, campaign: str, settled: bool = True) -> None:
    """No stale lock or worktree, no orphan process, HEAD on a branch over a clean index, a linear
    accepted line, and (when `settled`) no decision left pending."""
    common = Path(git(root, "rev-parse", "--git-common-dir").strip())
    common = common if common.is_absolute() else root / common
    assert not (common / "index.lock").exists(), "stale index.lock"
    assert not (common / "campaign" / "move-journal.json").exists(), "branch move left unfinished"
    for lock in (common / "campaign").glob("*.lock"):
        assert g.lock_free(lock), f"{lock.name} still held"
    assert "/campaign/worktrees/" not in git(root, "worktree", "list"), "scratch worktree left behind"
    scratch_trees = common / "campaign" / "worktrees"
    assert not any(scratch_trees.glob("*/*")), "scratch worktree folder left behind"
    left = processes_under(root)
    assert left == [], f"harness processes left running: {left}"
    assert git(root, "symbolic-ref", "-q", "HEAD").strip(), "HEAD left detached"
    assert git(root, "status", "--porcelain", "--untracked-files=no") == "", (
        "index or files disagree with HEAD"
    )
    main_branch = CampaignRef.main(campaign).branch
    assert git(root, "rev-list", "--merges", main_branch) == "", "merge commit on the accepted line"
    _, rounds = Campaign(g.open_repo(root), campaign).lineage()
    if settled:
        assert all(r.status != Status.PENDING for r in rounds), "a noted decision was left unapplied"


def next_command(root: Path) -> list[str]:
    """What `git campaign status` says to run next, as arguments (the hint the user would follow)."""
    from gitcampaign.commands.status import status

    data = status(root, None).to_json()
    hint = str(data["next"])
    if hint.startswith("git campaign recover"):
        assert data["unfinished"], "recover is named only for something a killed command left"
        return ["recover"]
    if hint.startswith("git campaign validate --heat"):
        return ["validate", "--heat"]
    if hint.startswith("git campaign validate"):
        return ["validate"]
    if "git campaign baseline" in hint:
        return ["baseline"]
    return []
