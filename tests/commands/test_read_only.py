"""The read-only verbs (`status`, `log`, `show`) change nothing, not even what a killed command left:
no lock is taken, no ref moves, no process is stopped. `status` reports the leftovers and names
`recover`, which finishes them, as every command that changes the campaign does first."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from gitcampaign import git as g
from gitcampaign import process
from gitcampaign.cli import main, status_text
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.log import log
from gitcampaign.commands.recover import recover
from gitcampaign.commands.show import show
from gitcampaign.commands.status import status
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Status

# The kill is a forked child's SIGKILL, and leftover processes are found through /proc: Linux.
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and /proc")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faultkit import KILLED, fast_fingerprint, run  # noqa: E402, F401 (autouse fixture)
from test_loop import NAME, commit_round, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project  # noqa: E402


@pytest.fixture
def left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A repository a killed command left: round 2's ACCEPT noted, the fast-forward of the checked-out
    main journalled with HEAD detached (validate killed inside the move); plus a harness whose
    command died (a live process in the registry, its owner gone) and that command's scratch
    worktree."""
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    baseline(root, None)
    commit_round(root, "faster", 150)
    git(root, "checkout", "-q", CampaignRef.main(NAME).branch)
    code, stderr = run(root, ["validate"], fault="move:detached")
    assert code == KILLED, stderr
    repo = g.open_repo(root)
    token = "read-only-test-" + os.urandom(4).hex()
    harness = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, process.RUN_TOKEN_ENV: token},
        start_new_session=True,
    )
    dead = subprocess.Popen(["true"])
    dead.wait()
    g.procs_dir(repo).mkdir(parents=True, exist_ok=True)
    (g.procs_dir(repo) / f"{harness.pid}.json").write_text(
        json.dumps({"owner": dead.pid, "pgid": harness.pid, "token": token})
    )
    g.add_worktree(repo, g.common_dir(repo) / "campaign" / "worktrees" / NAME / "candidate", "HEAD")
    yield root, harness
    process.kill_group(harness.pid)
    harness.wait()


def _state(root: Path) -> dict[str, object]:
    """Refs (notes and pins included), HEAD, the index, the move journal, the process registry and
    the worktrees: everything the leftovers and their recovery are made of."""
    common = g.common_dir(g.open_repo(root))
    return {
        "refs": git(root, "for-each-ref", "--format=%(refname) %(objectname)"),
        "head": git(root, "rev-parse", "--symbolic-full-name", "HEAD", "HEAD"),
        "index": git(root, "ls-files", "--stage"),
        "journal": (common / "campaign" / "move-journal.json").read_bytes(),
        "registry": sorted(p.name for p in (common / "campaign" / "procs").iterdir()),
        "worktrees": git(root, "worktree", "list", "--porcelain"),
    }


def _locks_held_elsewhere(root: Path, stack: ExitStack) -> None:
    """Hold the repository lock and the campaign's lock as another process would (an flock on an
    open file of its own): a command that takes either now waits or finds the campaign busy."""
    common = g.common_dir(g.open_repo(root)) / "campaign"
    for name in ("repository.lock", f"{NAME}.lock"):
        handle = stack.enter_context((common / name).open("a+"))
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_read_only_verbs_take_no_lock_move_no_ref_and_kill_nothing(
    left_behind: tuple[Path, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, harness = left_behind
    monkeypatch.setattr(g, "REPO_LOCK_WAIT_S", 1.0)  # a verb that took the lock would fail, not hang
    before = _state(root)
    with ExitStack() as stack:
        _locks_held_elsewhere(root, stack)
        state = status(root, None)
        rows = log(root, None).rows
        shown = show(root, None, 2)
    assert _state(root) == before
    assert harness.poll() is None, "a read-only verb stopped the orphaned harness"
    assert state.rounds[Status.PENDING] == 1 and rows[-1].status == Status.PENDING
    assert shown.verdict is not None and "decision: ACCEPT" in shown.verdict
    assert len(state.unfinished) == 3
    moving, running, trees = state.unfinished
    assert f"{CampaignRef.main(NAME).branch} moving from" in moving and "HEAD is detached" in moving
    assert running == "1 process(es) started by a killed command still run"
    assert trees == f"1 scratch worktree(s) of a killed command on {NAME} remain"
    assert state.next.startswith("git campaign recover")
    assert f"unfinished: {moving}" in status_text(state)


def test_recover_finishes_what_status_reported(
    left_behind: tuple[Path, subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, harness = left_behind
    done = recover(root).done
    assert done[0].startswith(f"finished the interrupted move of {CampaignRef.main(NAME).branch}")
    assert "stopped 1 process(es) left running by a killed command" in done
    assert harness.wait(timeout=10) == -9
    assert (
        git(root, "rev-parse", "--symbolic-full-name", "HEAD").strip()
        == f"refs/heads/{CampaignRef.main(NAME).branch}"
    )
    state = status(root, None)
    assert state.unfinished == [] and state.rounds[Status.ACCEPTED] == 1
    assert state.next.startswith("git campaign round")
    assert recover(root).done == []
    assert main(["-C", str(root), "recover"]) == 0
    assert capsys.readouterr().out == "nothing left unfinished\n"
