"""git.py, the one module that runs git: reads that must come back byte for byte, decisions by exit
code, and the helpers the commands use instead of `repo.git`."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_project import git
from fixture_campaign import NAME, restore

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.errors import CampaignError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return restore(tmp_path / "old")


def test_revisions_trees_and_ancestry(root: Path) -> None:
    repo = g.open_repo(root)
    head = g.rev(repo, f"campaign/{NAME}/main")
    assert head is not None and g.rev(repo, "no-such-branch") is None
    assert g.tree_of(repo, head) == git(root, "rev-parse", f"{head}^{{tree}}").strip()
    parent = g.parent(repo, head)
    assert parent is not None and g.is_ancestor(repo, parent, head) and not g.is_ancestor(repo, head, parent)
    facts = g.trees_and_parents(repo, [head, parent])
    assert facts[head] == (g.tree_of(repo, head), [parent])
    round_tip = g.rev(repo, f"campaign/{NAME}/round-7")
    assert round_tip is not None
    assert g.merge_base(repo, round_tip, head) == head
    assert g.first_parents_since(repo, parent, round_tip) == [head, round_tip]
    assert g.count_commits(repo, parent, round_tip) == 2


def test_notes_come_back_byte_for_byte(root: Path) -> None:
    repo = g.open_repo(root)
    blobs = g.note_blobs(repo, C.NOTES_BENCH)
    commit, blob = next(iter(blobs.items()))
    raw = g.read_note(repo, C.NOTES_BENCH, commit)
    assert raw == g.read_blob(repo, blob)
    assert raw is not None and raw.endswith(b"\n") and raw.startswith(C.GEMM_HEADER.encode())
    assert raw == git(root, "notes", "--ref", C.NOTES_BENCH, "show", commit).encode()


def test_write_note_returns_the_blob_git_lists(root: Path) -> None:
    repo = g.open_repo(root)
    commit = git(root, "rev-parse", "HEAD").strip()
    # Blank lines and no final newline: what `git notes add -m` would clean up must stay as written.
    content = b"\n\na,b\n1,2\n\n\nno final newline"
    blob = g.write_note(repo, "refs/notes/campaign/test", commit, content)
    assert blob == g.note_blobs(repo, "refs/notes/campaign/test")[commit]
    assert g.read_note(repo, "refs/notes/campaign/test", commit) == content


def test_staged_files_are_what_is_committed_not_the_work_tree(root: Path) -> None:
    repo = g.open_repo(root)
    (root / "new.py").write_text("staged = 1\n")
    git(root, "add", "new.py")
    (root / "new.py").write_text("unstaged = 2\n")
    (root / "notes.txt").write_text("not python\n")
    git(root, "add", "notes.txt")
    assert g.staged_files(repo, "*.py") == {"new.py": "staged = 1\n"}
    assert g.tracked(repo, ["new.py", "absent.py"]) == ["new.py"]
    assert g.git_path(repo, "hooks").name == "hooks"


def test_run_in_reports_git_s_own_words(tmp_path: Path) -> None:
    assert "git version" in g.git_version_line()
    with pytest.raises(CampaignError, match="failed in") as failed:
        g.run_in(tmp_path, "rev-parse", "HEAD", hint="the hint")
    assert failed.value.hint == "the hint"


def test_worktree_records_change_only_under_the_repository_lock(root: Path, tmp_path: Path) -> None:
    # Two campaigns validating at once: one's `worktree prune` deleted the record the other's
    # `worktree add` was still writing. Worktree changes now wait for the repository lock.
    import fcntl
    import os
    import time

    repo = g.open_repo(root)
    with g.repo_lock(repo):  # creates the lock file
        pass
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # another command, holding the lock for a while
        with open(g.common_dir(repo) / "campaign" / "repository.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            os.write(ready_write, b"x")
            time.sleep(0.5)
        os._exit(0)
    os.read(ready_read, 1)
    began = time.monotonic()
    g.add_worktree(repo, tmp_path / "wt", g.rev(repo, "HEAD") or "")
    waited = time.monotonic() - began
    os.waitpid(pid, 0)
    assert waited >= 0.3 and (tmp_path / "wt" / ".git").exists()
    g.remove_worktree(repo, tmp_path / "wt")
    assert not (tmp_path / "wt").exists()
