"""All git access: GitPython's `Repo` and `repo.git`, outcomes decided from exit codes.

Ref moves are compare-and-swap (`update-ref REF NEW OLD`); notes are written verbatim (a blob, then
`git notes add -C`) and read back byte for byte (GitPython strips command output unless told not to).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import git
from git import Repo
from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

from gitcampaign import process
from gitcampaign.errors import CampaignError
from gitcampaign.refs import TRACKING, import_pid

ZERO_SHA = "0" * 40
# Tests kill the process at a named step (`GITCAMPAIGN_FAULT=NAME`) and list the steps a command
# passes (`GITCAMPAIGN_FAULT_TRACE=FILE`): how the fault suite reaches every crash point.
FAULT_ENV = "GITCAMPAIGN_FAULT"
FAULT_TRACE_ENV = "GITCAMPAIGN_FAULT_TRACE"
REPO_LOCK_WAIT_S = 120.0
# A campaign note is a CSV of a few shapes or a stream of verdict documents (safe_yaml bounds each);
# anything far larger did not come from gitcampaign, and is never read into memory.
MAX_NOTE_BYTES = 64 * 1024 * 1024


def open_repo(path: Path | str = ".") -> Repo:
    try:
        return Repo(path, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError) as exc:
        raise CampaignError(
            f"{path} is not inside a git repository", "run `git init` first, or cd into one"
        ) from exc


def root(repo: Repo) -> Path:
    if repo.working_tree_dir is None:
        raise CampaignError("this is a bare repository", "run git campaign inside a checkout")
    return Path(repo.working_tree_dir)


def common_dir(repo: Repo) -> Path:
    """The git dir shared by all worktrees (locks and scratch state live here)."""
    return Path(repo.common_dir)


def rev(repo: Repo, name: str, peel: str = "^{commit}") -> str | None:
    """The commit `name` points to (any object with peel=""), or None; decided by exit code."""
    try:
        return repo.git.rev_parse("--verify", "-q", f"{name}{peel}")
    except GitCommandError:
        return None


def is_ancestor(repo: Repo, ancestor: str, descendant: str) -> bool:
    try:
        repo.git.merge_base("--is-ancestor", ancestor, descendant)
    except GitCommandError as exc:
        if exc.status == 1:
            return False
        raise
    return True


def count_commits(repo: Repo, exclude: str, include: str) -> int:
    return int(repo.git.rev_list("--count", f"{exclude}..{include}"))


def parent(repo: Repo, commit: str) -> str | None:
    return rev(repo, f"{commit}^")


def tree_of(repo: Repo, commit: str) -> str:
    return repo.git.rev_parse(f"{commit}^{{tree}}")


def trees_and_parents(repo: Repo, commits: list[str]) -> dict[str, tuple[str, list[str]]]:
    """{commit: (tree, parents)} of many commits in one `git log --no-walk` call; a commit this
    repository does not have (a note can outlive its commit: `git gc` prunes the commit, not the
    note) is left out rather than failing the whole call."""
    out = repo.git.log("--no-walk=unsorted", "--ignore-missing", "--format=%H %T %P", *commits)
    found = {}
    for line in out.splitlines():
        sha, tree, *parents = line.split()
        found[sha] = (tree, parents)
    return found


def merge_base(repo: Repo, one: str, other: str) -> str:
    return repo.git.merge_base(one, other)


def first_parents_since(repo: Repo, fork: str, tip: str) -> list[str]:
    """The first-parent commits after `fork` up to `tip`, oldest first."""
    return repo.git.rev_list("--first-parent", "--reverse", f"{fork}..{tip}").split()


def staged_files(repo: Repo, pattern: str) -> dict[str, str]:
    """{path: staged content} of the added or changed files matching `pattern`: what is being
    committed, not the work tree (`git add -p` can stage something else)."""
    names = repo.git.diff("--cached", "--name-only", "-z", "--diff-filter=ACMR", "--", pattern)
    return {
        path: repo.git.cat_file("blob", f":{path}", strip_newline_in_stdout=False)
        for path in filter(None, names.split("\0"))
    }


def git_path(repo: Repo, name: str) -> Path:
    """Where git keeps `name` (`hooks`, ...) for this repository, per `git rev-parse --git-path`."""
    return Path(repo.git.rev_parse("--git-path", name))


def tracked(repo: Repo, paths: list[str]) -> list[str]:
    """Those of `paths` (relative to the top of the work tree) that git tracks."""
    return [line for line in repo.git.ls_files("--", *paths).splitlines() if line]


def current_branch(repo: Repo) -> str | None:
    """The checked-out branch name, or None on a detached HEAD."""
    try:
        return repo.git.symbolic_ref("-q", "--short", "HEAD")
    except GitCommandError:
        return None


def head_ref_name(repo: Repo) -> str | None:
    try:
        return repo.git.symbolic_ref("-q", "HEAD")
    except GitCommandError:
        return None


def dirty_paths(repo: Repo) -> list[str]:
    """Tracked files with staged or unstaged changes (untracked files do not count)."""
    out = repo.git.status("--porcelain", "--untracked-files=no", strip_newline_in_stdout=False)
    return [line[3:] for line in out.splitlines() if line.strip()]


def require_clean(repo: Repo, action: str) -> None:
    dirty = dirty_paths(repo)
    if dirty:
        shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise CampaignError(
            f"cannot {action}: the working tree has uncommitted changes to tracked files ({shown})",
            "commit them (`git commit`) or set them aside (`git stash`), then run the command again",
        )


def update_ref(repo: Repo, ref: str, new: str, old: str | None, message: str) -> None:
    """Move `ref` from `old` (None: it must not exist yet) to `new`, atomically, or fail."""
    try:
        with repo_lock(repo):
            repo.git.update_ref("-m", message, ref, new, old or ZERO_SHA)
    except GitCommandError as exc:
        raise CampaignError(
            f"{ref} moved while this command ran (expected {old or 'no ref'}): {exc.stderr.strip()}",
            "another command changed the campaign; run `git campaign status` and retry",
        ) from exc


def delete_ref(repo: Repo, ref: str, old: str) -> None:
    try:
        with repo_lock(repo):
            repo.git.update_ref("-d", ref, old)
    except GitCommandError as exc:
        raise CampaignError(
            f"{ref} moved while this command ran", "run `git campaign status` and retry"
        ) from exc


def refs_under(repo: Repo, prefix: str) -> dict[str, str]:
    """{refname: commit} for every ref below `prefix` (one for-each-ref call)."""
    out = repo.git.for_each_ref("--format=%(refname) %(objectname)", prefix)
    pairs = (line.split(" ", 1) for line in out.splitlines() if line)
    return {name: sha for name, sha in pairs}


def checkout(repo: Repo, branch: str) -> None:
    """Switch the work tree to `branch`; git refuses (and changes nothing) when local changes or
    untracked files are in the way, which becomes an error that names them."""
    if current_branch(repo) == branch:
        return
    with repo_lock(repo):
        try:
            repo.git.checkout("-q", branch)
        except GitCommandError as exc:
            raise CampaignError(
                f"cannot check out {branch}: {exc.stderr.strip()}",
                f"set the files it names aside (`git stash -u`), then `git checkout {branch}`",
            ) from exc


def config_get(repo: Repo, key: str) -> str | None:
    try:
        return repo.git.config("--get", key)
    except GitCommandError:
        return None


def config_set(repo: Repo, key: str, value: str) -> None:
    """Under the repository lock: git refuses a second writer of `.git/config` at once ("could not
    lock config file"), and two campaigns' commands (or an MCP server's threads) write it."""
    with repo_lock(repo):
        repo.git.config(key, value)


def config_add_once(repo: Repo, key: str, value: str) -> None:
    """Add a multi-valued config entry unless it is already there (under the lock, as config_set)."""
    with repo_lock(repo):
        try:
            values = repo.git.config("--get-all", key).splitlines()
        except GitCommandError:
            values = []
        if value not in values:
            repo.git.config("--add", key, value)


# -- objects and notes ------------------------------------------------------------------------------


def write_blob(repo: Repo, content: bytes) -> str:
    return _git(repo, "hash-object", "-w", "--stdin", stdin=content)


def read_blob(repo: Repo, sha: str) -> bytes:
    return repo.odb.stream(bytes.fromhex(sha)).read()


def blob_size(repo: Repo, sha: str) -> int:
    """The object's size, from its header (nothing is read into memory)."""
    return int(repo.odb.info(bytes.fromhex(sha)).size)


def read_file_at(repo: Repo, commit: str, path: str) -> bytes | None:
    blob = rev(repo, f"{commit}:{path}", peel="")
    return None if blob is None else read_blob(repo, blob)


def has_notes(repo: Repo, notes_ref: str) -> bool:
    """Whether `notes_ref` exists; CampaignError, naming the way back, when it exists but is no
    notes commit (set by hand, or a hostile push), which every `git notes` command would die on."""
    if rev(repo, notes_ref, peel="") is None:
        return False
    if rev(repo, notes_ref) is None:
        raise CampaignError(
            f"{notes_ref} points at {rev(repo, notes_ref, peel='')}, which is not a notes commit: no note"
            " under it can be read or written",
            f"put back its last notes commit: `git reflog show {notes_ref}` lists them, then"
            f" `git update-ref {notes_ref} COMMIT`",
        )
    return True


def note_blobs(repo: Repo, notes_ref: str) -> dict[str, str]:
    """{annotated commit: note blob} for a whole notes ref, in one command."""
    if not has_notes(repo, notes_ref):
        return {}
    out = repo.git.notes("--ref", notes_ref, "list")
    pairs = (line.split() for line in out.splitlines() if line)
    return {commit: blob for blob, commit in pairs}


def read_note(repo: Repo, notes_ref: str, commit: str) -> bytes | None:
    """The note's bytes exactly as written, or None; a note over MAX_NOTE_BYTES (notes arrive by
    pull from anyone) is an error naming it, never read into memory."""
    if not has_notes(repo, notes_ref):
        return None
    try:
        blob = repo.git.notes("--ref", notes_ref, "list", commit).strip()
    except GitCommandError:
        return None
    size = blob_size(repo, blob)
    if size > MAX_NOTE_BYTES:
        raise CampaignError(
            f"the {notes_ref} note on {commit[:12]} is {size} bytes, over the {MAX_NOTE_BYTES} a campaign"
            " note may hold: it was not written by gitcampaign",
            f"see its history with `git log -p {notes_ref}`; restore an earlier version"
            f" (`git notes --ref {notes_ref} add -f -C BLOB {commit[:12]}`) or remove it"
            f" (`git notes --ref {notes_ref} remove {commit[:12]}`)",
        )
    return read_blob(repo, blob)


def note_history(repo: Repo, notes_ref: str, commit: str) -> list[str]:
    """Every blob the note on `commit` has held in `notes_ref`'s history, newest first: what a
    damaged note is restored from (each `git notes add` is a commit of the notes ref)."""
    if not has_notes(repo, notes_ref):
        return []
    out = repo.git.log("--format=", "--raw", "--no-abbrev", "--no-renames", notes_ref)
    blobs: list[str] = []
    for line in out.splitlines():
        meta, _, path = line.partition("\t")
        if not meta.startswith(":") or path.replace("/", "") != commit:
            continue
        _, _, old, new, _ = meta.split()
        blobs += [blob for blob in (new, old) if blob != ZERO_SHA and blob not in blobs]
    return blobs


def write_note(repo: Repo, notes_ref: str, commit: str, content: bytes, replace: bool = False) -> str:
    """Attach `content` verbatim (blob + `notes add -C`, which keeps that blob as the note); refuses to
    overwrite unless `replace`. Returns the note's blob.

    `git notes add` moves the notes ref without a compare-and-swap, so two writers can each commit
    on the same parent and one note vanishes; the repository lock serialises every writer here."""
    blob = write_blob(repo, content)
    args = ["--ref", notes_ref, "add", "-C", blob]
    if replace:
        args.append("-f")
    with repo_lock(repo):
        repo.git.notes(*args, commit)
    return blob


# -- commits without touching the user's index ------------------------------------------------------


def _git(repo: Repo, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
    """Plumbing that needs stdin bytes or its own environment (GitPython's `repo.git` covers the rest)."""
    done = subprocess.run(
        ["git", "-C", str(root(repo)), *args], input=stdin, env=env, capture_output=True, check=True
    )
    return done.stdout.decode().strip()


def commit_tree(repo: Repo, tree: str, parent: str, message: str) -> str:
    """A commit object (no ref moves); the message is passed verbatim on stdin."""
    return _git(repo, "commit-tree", tree, "-p", parent, "-F", "-", stdin=message.encode())


def pick_onto(repo: Repo, commit: str, base: str) -> str | None:
    """`commit`'s change (against its parent) as a new commit on `base`, with its message and author:
    a cherry-pick in a private index, so no ref, index or file moves. None when the change does not
    apply to `base` (a conflict)."""
    top = str(root(repo))
    patch = subprocess.run(
        ["git", "-C", top, "diff", "--binary", "--full-index", f"{commit}^", commit],
        capture_output=True,
        check=True,
    ).stdout
    author = _git(repo, "log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw", commit).split("\0")
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(repo, "read-tree", base, env=env)
        applied = subprocess.run(
            ["git", "-C", top, "apply", "--cached", "--3way", "-"], input=patch, env=env, capture_output=True
        )
        if applied.returncode != 0:
            return None
        tree = _git(repo, "write-tree", env=env)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": author[0],
        "GIT_AUTHOR_EMAIL": author[1],
        "GIT_AUTHOR_DATE": author[2],
    }
    return _git(
        repo, "commit-tree", tree, "-p", base, "-F", "-", stdin=commit_message(repo, commit).encode(), env=env
    )


def move_branch(repo: Repo, branch: str, new: str, old: str | None, message: str) -> None:
    """Compare-and-swap `branch` to `new`; when it is checked out, its index and work tree follow.

    A checked-out branch never moves under its index: HEAD is detached at `old` first (no file
    changes), the ref moves, then `git checkout` brings index and files along. Every crash point
    leaves HEAD, index and files agreeing with each other, and a journal that `recover` rolls
    forward. A move that local changes or untracked files would block is refused before anything
    moves (`read-tree -n`, git's own dry run of that checkout).
    """
    ref = f"refs/heads/{branch}"
    with repo_lock(repo):
        if old is None or head_ref_name(repo) != ref:
            update_ref(repo, ref, new, old, message)
            return
        try:
            repo.git.read_tree("-m", "-u", "-n", old, new)
        except GitCommandError as exc:
            raise CampaignError(
                f"{branch} cannot move to {new[:12]}: {exc.stderr.strip()}; nothing was moved",
                "commit or set aside the files it names (`git stash -u`), then run the command again",
            ) from exc
        _write_journal(repo, {"branch": branch, "old": old, "new": new, "message": message})
        fault_point("move:journaled")
        repo.git.checkout("-q", "--detach")
        fault_point("move:detached")
        try:
            update_ref(repo, ref, new, old, message)
        except CampaignError as exc:
            _journal_path(repo).unlink()
            raise CampaignError(
                exc.message + f"; HEAD was left detached at {old[:12]}", f"`git checkout {branch}`"
            ) from exc
        fault_point("move:ref-moved")
        repo.git.checkout("-q", branch)
        _journal_path(repo).unlink()


def _journal_path(repo: Repo) -> Path:
    return common_dir(repo) / "campaign" / "move-journal.json"


def _write_journal(repo: Repo, entry: dict[str, str]) -> None:
    path = _journal_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps({**entry, "pid": os.getpid(), "git_dir": repo.git_dir}))
    scratch.replace(path)


def procs_dir(repo: Repo) -> Path:
    """The registry of the process groups campaign commands started (`process.register`)."""
    return common_dir(repo) / "campaign" / "procs"


def recover(repo: Repo) -> list[str]:
    """Finish what a killed command left: a journalled branch move is rolled forward, harness
    processes of dead commands are stopped, then their scratch worktrees removed (in that order: a
    harness still starting up writes into its worktree, `__pycache__` for one, and would leave a
    folder behind). Returns what was done. Every command that changes a campaign runs it first."""
    done: list[str] = []
    with repo_lock(repo):
        done += _finish_move(repo)
        done += process.sweep_orphans(procs_dir(repo))
        done += _sweep_worktrees(repo)
        for label in stale_imports(repo):
            for ref, sha in refs_under(repo, f"{TRACKING}/{label}/").items():
                delete_ref(repo, ref, sha)
            done.append(f"dropped {TRACKING}/{label}/, left by an interrupted import")
    return done


def stale_imports(repo: Repo) -> list[str]:
    """The tracking labels of imports whose process is gone (killed before it dropped them)."""
    labels = {ref[len(TRACKING) + 1 :].split("/", 1)[0] for ref in refs_under(repo, f"{TRACKING}/")}
    return sorted(
        label for label in labels if (pid := import_pid(label)) is not None and not process.pid_alive(pid)
    )


def unfinished(repo: Repo) -> list[str]:
    """What a killed command left for `recover` to finish, one line each. Reads only: no lock is
    taken, no process signalled, nothing moved or removed (the read-only verbs report it)."""
    left = []
    move = _killed_move(repo)
    if move is not None:
        detached = "; HEAD is detached" if head_ref_name(repo) is None else ""
        left.append(
            f"a killed command left {move['branch']} moving from {move['old'][:12]} to {move['new'][:12]}{detached}"
        )
    left += [f"{TRACKING}/{label}/ of an interrupted import remains" for label in stale_imports(repo)]
    running = sum(orphan.still_running() for orphan in process.orphans(procs_dir(repo)))
    if running:
        left.append(f"{running} process(es) started by a killed command still run")
    base = common_dir(repo) / "campaign" / "worktrees"
    for folder in sorted(base.glob("*")) if base.is_dir() else []:
        trees = list(folder.glob("*"))
        if trees and not _lock_held(repo, folder.name):
            left.append(f"{len(trees)} scratch worktree(s) of a killed command on {folder.name} remain")
    return left


def _killed_move(repo: Repo) -> dict[str, str] | None:
    """The journal of a branch move whose command died before finishing it; None when there is
    none (or its command still runs)."""
    try:
        entry = json.loads(_journal_path(repo).read_text())
    except (OSError, ValueError):
        return None
    return None if process.pid_alive(int(entry.get("pid", 0))) else entry


def _finish_move(repo: Repo) -> list[str]:
    entry = _killed_move(repo)
    if entry is None:
        return []
    path = _journal_path(repo)
    branch, old, new = entry["branch"], entry["old"], entry["new"]
    ref = f"refs/heads/{branch}"
    # The killed command's `git checkout` may have died with it, holding the index lock.
    Path(entry.get("git_dir", repo.git_dir), "index.lock").unlink(missing_ok=True)
    if rev(repo, ref) == old:
        if head_ref_name(repo) == ref:  # killed before HEAD was detached: detach, as the move would
            repo.git.checkout("-q", "--detach")
        update_ref(repo, ref, new, old, entry["message"])
    if head_ref_name(repo) is None and rev(repo, "HEAD") in (old, new) and rev(repo, ref) == new:
        try:
            repo.git.checkout("-q", branch)
        except GitCommandError as exc:
            path.unlink()
            raise CampaignError(
                f"an interrupted command moved {branch} to {new[:12]} and left HEAD detached; "
                f"checking it out now fails: {exc.stderr.strip()}",
                f"set the files it names aside (`git stash -u`), then `git checkout {branch}`",
            ) from exc
    path.unlink()
    return [f"finished the interrupted move of {branch} to {new[:12]}"]


def _sweep_worktrees(repo: Repo) -> list[str]:
    """Scratch worktrees whose campaign lock nobody holds belong to a command that was killed."""
    base = common_dir(repo) / "campaign" / "worktrees"
    done = []
    for folder in sorted(base.glob("*")) if base.is_dir() else []:
        if not _lock_is_free(repo, folder.name):
            continue
        for tree in sorted(folder.glob("*")):
            remove_worktree(repo, tree)
            done.append(f"removed the stale worktree {tree}")
    return done


def fault_point(name: str) -> None:
    """A step where the fault suite may kill this process (SIGKILL: no cleanup runs, as in a crash)."""
    trace = os.environ.get(FAULT_TRACE_ENV)
    if trace:
        with open(trace, "a") as handle:
            handle.write(name + "\n")
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def commit_files(
    repo: Repo,
    branch: str,
    files: dict[str, bytes],
    message: str,
    notes: dict[str, bytes] | None = None,
    create_from: str | None = None,
) -> str:
    """Commit `files` on top of `branch` and move it (compare-and-swap); returns the new commit.

    The tree is built in a temporary index so the user's index is never half-written; notes are
    attached before the ref moves; a checked-out branch brings its work tree along. With
    `create_from`, the branch must not exist yet and is created pointing at the new commit (whose
    parent is `create_from`).
    """
    old = rev(repo, f"refs/heads/{branch}")
    if create_from is not None and old is not None:
        raise CampaignError(
            f"branch {branch} already exists", f"pick another name, or `git checkout {branch}`"
        )
    base = create_from or old
    if base is None:
        raise CampaignError(f"branch {branch} does not exist", "run `git campaign init` first")
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(repo, "read-tree", base, env=env)
        for path, content in files.items():
            _git(
                repo,
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{write_blob(repo, content)},{path}",
                env=env,
            )
        tree = _git(repo, "write-tree", env=env)
    commit = commit_tree(repo, tree, base, message)
    with repo_lock(repo):
        for notes_ref, content in (notes or {}).items():
            # The commit is new and on no branch yet; a note already on it can only come from a run
            # killed before its branch moved (same tree, parent, message and second), so replace it.
            write_note(repo, notes_ref, commit, content, replace=True)
            fault_point(f"commit:noted-{notes_ref.rsplit('/', 1)[-1]}")
        move_branch(repo, branch, commit, old, f"campaign: {message.splitlines()[0]}")
    return commit


def changed_paths(repo: Repo, old: str, new: str) -> list[str]:
    out = repo.git.diff("--name-only", "--no-renames", old, new)
    return [line for line in out.splitlines() if line]


def added_paths(repo: Repo, old: str, new: str) -> list[str]:
    out = repo.git.diff("--name-only", "--no-renames", "--diff-filter=A", old, new)
    return [line for line in out.splitlines() if line]


def diff_stat(repo: Repo, old: str, new: str) -> str:
    return repo.git.diff("--stat", old, new)


def diff_text(repo: Repo, old: str, new: str) -> str:
    """The patch from `old` to `new`, newline-exact (GitPython would strip its last newline)."""
    return repo.git.diff("--no-color", "--no-ext-diff", old, new, strip_newline_in_stdout=False)


def top_level_entries(repo: Repo, commit: str) -> dict[str, str]:
    """Name -> object id of each entry at the root of `commit`'s tree (`git ls-tree`)."""
    entries = {}
    for line in repo.git.ls_tree("-z", commit).split("\0"):
        if line:
            info, name = line.split("\t", 1)
            entries[name] = info.split()[2]
    return entries


def commit_message(repo: Repo, commit: str) -> str:
    return repo.git.log("-1", "--format=%B", commit)


def first_parent_chain(repo: Repo, tip: str) -> list[str]:
    """Commits from the root to `tip` along first parents (oldest first)."""
    return repo.git.rev_list("--first-parent", "--reverse", tip).split()


# -- worktrees --------------------------------------------------------------------------------------


def add_worktree(repo: Repo, path: Path, commit: str) -> None:
    """A detached worktree of `commit` at `path`, replacing a stale one left by a killed run. Under
    the repository lock, like every change to git's worktree records: another command's `worktree
    prune` would delete this one's record while `add` is still writing it."""
    with repo_lock(repo):
        remove_worktree(repo, path)
        repo.git.worktree("add", "--detach", "-f", str(path), commit)


def export_paths(repo: Repo, commit: str, paths: list[str], dest: Path) -> None:
    """A plain copy of `paths` as `commit` holds them at `dest` (workspace mode's minimal tree);
    `git archive` reads the object store, so the user's index and work tree are never touched."""
    remove_worktree(repo, dest)
    try:
        archive = subprocess.run(
            ["git", "-C", str(root(repo)), "archive", "--format=tar", commit, "--", *paths],
            capture_output=True,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise CampaignError(
            f"cannot copy the workspace {', '.join(paths)} of {commit[:12]}: {exc.stderr.decode().strip()}",
            "every workspace path must be committed; fix the paths with a new campaign (init --workspace)",
        ) from exc
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        # The "tar" filter (refuses links out of `dest`) exists from Python 3.11.4 and 3.12 on.
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(dest, filter="tar")
        else:
            tar.extractall(dest)  # our own commit's archive, from our object store


def tree_listing(repo: Repo, commit: str, paths: list[str] | None = None) -> str:
    """`ls-tree -r`: mode, blob id and path of every file (under `paths`): the sources' identity."""
    return repo.git.ls_tree("-r", commit, "--", *(paths or []))


def remove_worktree(repo: Repo, path: Path) -> None:
    """Remove the worktree (or plain copy) at `path` and prune git's records of missing ones; under
    the repository lock (see add_worktree)."""
    with repo_lock(repo):
        if path.exists():
            try:
                repo.git.worktree("remove", "--force", str(path))
            except GitCommandError:
                shutil.rmtree(path, ignore_errors=True)
        repo.git.worktree("prune")


# -- locking ----------------------------------------------------------------------------------------


def _lock_path(repo: Repo, campaign: str) -> Path:
    return common_dir(repo) / "campaign" / f"{campaign.replace('/', '_')}.lock"


def _lock_file(repo: Repo, campaign: str) -> Path:
    path = _lock_path(repo, campaign)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _lock_held(repo: Repo, campaign: str) -> bool:
    """Whether a live process holds the campaign's lock, from the pid its holder writes into the
    file (a killed holder's pid stays there, dead): read without taking the lock, which would make
    a command starting at that moment find its campaign busy."""
    try:
        holder = _lock_path(repo, campaign).read_text().strip()
    except OSError:
        return False
    pid = holder.removeprefix("pid ")
    return pid.isdigit() and process.pid_alive(int(pid))


def _lock_is_free(repo: Repo, campaign: str) -> bool:
    return lock_free(_lock_file(repo, campaign))


def lock_free(path: Path) -> bool:
    """No process holds the flock on `path` (an absent lock file is free, and stays absent)."""
    if not path.exists():
        return True
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


@contextmanager
def campaign_lock(repo: Repo, campaign: str) -> Iterator[None]:
    """One mutating command per campaign; released by the OS even when the process is killed."""
    with open(_lock_file(repo, campaign), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise CampaignError(
                f"campaign {campaign} is busy: {holder} is running a command on it",
                "wait for it to finish (or stop it), then run the command again",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class _RepoLockState:
    """One repository's lock within this process: a thread lock that one thread at a time holds
    (re-entrant for that thread), and the flock it takes on its first level, for other processes."""

    threads: threading.RLock = field(default_factory=threading.RLock)
    depth: int = 0  # levels the holding thread has entered; only that thread changes it
    handle: IO[str] | None = None


_repo_locks: dict[str, _RepoLockState] = {}
_repo_locks_guard = threading.Lock()
# A forked child has only the forking thread: a level another thread held is not the child's.
os.register_at_fork(after_in_child=_repo_locks.clear)


@contextmanager
def repo_lock(repo: Repo) -> Iterator[None]:
    """Everything that writes shared refs, notes, the index or the work tree, across campaigns,
    worktrees, processes and the threads of one process (the MCP server runs tools in threads).
    Held for seconds, never across a measurement, so a second writer waits for it instead of
    failing; re-entrant within the thread that holds it."""
    key = str(common_dir(repo).resolve())
    with _repo_locks_guard:
        state = _repo_locks.setdefault(key, _RepoLockState())
    deadline = time.monotonic() + REPO_LOCK_WAIT_S
    if not state.threads.acquire(timeout=REPO_LOCK_WAIT_S):
        raise _repo_lock_timeout()
    try:
        if state.depth == 0:
            state.handle = _flock_repository(repo, deadline)
        state.depth += 1
        try:
            yield
        finally:
            state.depth -= 1
            if state.depth == 0 and state.handle is not None:
                fcntl.flock(state.handle, fcntl.LOCK_UN)
                state.handle.close()
                state.handle = None
    finally:
        state.threads.release()


def _flock_repository(repo: Repo, deadline: float) -> IO[str]:
    path = common_dir(repo) / "campaign" / "repository.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - closed when the outermost level is left
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise _repo_lock_timeout() from None
            time.sleep(0.02)


def _repo_lock_timeout() -> CampaignError:
    return CampaignError(
        f"the repository stayed locked for {REPO_LOCK_WAIT_S:g} s by another campaign command",
        "wait for it to finish (`ps` shows it), then run the command again",
    )


def git_version() -> str:
    return ".".join(str(part) for part in git.Git().version_info)


def git_version_line() -> str:
    """`git --version` as git prints it (what environment fingerprints record)."""
    return git.Git().execute(["git", "--version"])


def run_in(root: Path, *args: str, hint: str) -> str:
    """Run git in `root`, which may not be a repository yet (the demo builds one): its output, or a
    CampaignError with git's own words (hooks included) and `hint`."""
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CampaignError(f"`git {' '.join(args[:2])}` failed in {root}:\n{done.stdout}{done.stderr}", hint)
    return done.stdout


# -- remotes, bundles and notes merges (push/pull/export/import) -----------------------------------


def remotes(repo: Repo) -> list[str]:
    return repo.git.remote().split()


def fetch(repo: Repo, source: str, refspecs: list[str]) -> None:
    """Fetch `refspecs` from a remote or a bundle file; `--prune` keeps the tracking refs a mirror."""
    try:
        repo.git.fetch("--quiet", "--no-tags", "--prune", "--no-write-fetch-head", source, *refspecs)
    except GitCommandError as exc:
        raise CampaignError(
            f"cannot fetch from {source}: {exc.stderr.strip()}",
            "check the remote's name and that you can reach it (`git remote -v`, `git fetch`)",
        ) from exc


def push_with_leases(repo: Repo, remote: str, updates: dict[str, tuple[str, str | None]]) -> None:
    """Push {remote ref: (new object, value seen there or None for absent)} in one atomic push.

    Each ref carries `--force-with-lease=REF:SEEN`, so the push fails as a whole when anyone moved
    any of them since we looked; nothing newer on the other side is ever overwritten.
    """
    leases = [f"--force-with-lease={ref}:{seen or ''}" for ref, (_, seen) in updates.items()]
    refspecs = [f"{new}:{ref}" for ref, (new, _) in updates.items()]
    try:
        repo.git.push("--quiet", "--atomic", "--no-verify", *leases, remote, *refspecs)
    except GitCommandError as exc:
        raise CampaignError(
            f"{remote} refused the push (someone pushed to the campaign since it was fetched): "
            f"{exc.stderr.strip()}",
            "run `git campaign pull` to merge what they pushed, then `git campaign push` again",
        ) from exc


def notes_tree(repo: Repo, blobs: dict[str, str]) -> str:
    """A notes tree for {annotated object: note blob}: one entry per object, no fan-out (git reads
    any fan-out, and rewrites its own when it next adds a note)."""
    listing = "".join(f"100644 blob {blob}\t{target}\n" for target, blob in sorted(blobs.items()))
    return _git(repo, "mktree", stdin=listing.encode())


def commit_tree_parents(repo: Repo, tree: str, parents: list[str], message: str) -> str:
    args = [arg for parent in parents for arg in ("-p", parent)]
    return _git(repo, "commit-tree", tree, *args, "-F", "-", stdin=message.encode())


def bundle_create(repo: Repo, path: Path, refs: list[str], exclude: list[str]) -> None:
    """A bundle holding `refs` and the objects they reach, minus what `exclude` reaches."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _git(repo, "bundle", "create", "--quiet", str(scratch), *refs, *(f"^{sha}" for sha in exclude))
    except subprocess.CalledProcessError as exc:
        scratch.unlink(missing_ok=True)
        raise CampaignError(f"git bundle create failed: {exc.stderr.decode().strip()}") from exc
    scratch.replace(path)  # a reader never sees half a bundle


def bundle_heads(repo: Repo, path: Path) -> dict[str, str]:
    """{ref: object} of a bundle, after checking that this repository has its prerequisites."""
    try:
        # Not --quiet: with it, git says nothing at all about what is missing.
        _git(repo, "bundle", "verify", str(path))
    except subprocess.CalledProcessError as exc:
        missing = [
            f"{sha[:12]}{f' ({comment})' if comment else ''}"
            for sha, comment in _bundle_prerequisites(path)
            if rev(repo, sha) is None
        ]
        said = " ".join(line for line in exc.stderr.decode(errors="replace").splitlines() if line.strip())
        what = (
            f"it needs commit {', '.join(missing)}, which this repository does not have"
            if missing
            else said or f"`git bundle verify` exited {exc.returncode}"
        )
        raise CampaignError(
            f"{path} cannot be imported here: {what}",
            "import into a clone of the project the campaign ran on (`git fetch` its history first), or"
            " export the campaign with its history (`git campaign export NAME FILE --self-contained`)",
        ) from exc
    out = _git(repo, "bundle", "list-heads", str(path))
    pairs = (line.split(" ", 1) for line in out.splitlines() if line)
    return {name: sha for sha, name in pairs}


def _bundle_prerequisites(path: Path) -> list[tuple[str, str]]:
    """(commit, its subject) for each prerequisite a bundle's header lists (`-SHA SUBJECT` lines,
    git's bundle format v2 and v3); [] when the file is no bundle."""
    found = []
    try:
        with open(path, "rb") as handle:
            for line in handle:
                if line in (b"\n", b""):
                    break
                if line.startswith(b"-"):
                    sha, _, comment = line[1:].decode(errors="replace").strip().partition(" ")
                    found.append((sha, comment))
    except OSError:
        return []
    return found


def remote_heads(repo: Repo, source: str) -> list[str]:
    """The branch refs a remote (or a bundle file) has, without fetching anything."""
    try:
        out = str(repo.git.ls_remote("--heads", source))
    except GitCommandError as exc:
        raise CampaignError(
            f"cannot list the branches of {source}: {exc.stderr.strip()}",
            "check the remote's name and that you can reach it (`git remote -v`, `git ls-remote`)",
        ) from exc
    return [line.split("\t", 1)[1] for line in out.splitlines() if "\t" in line]


def notes_at(repo: Repo, notes_commit: str) -> dict[str, str]:
    """{annotated object: note blob} of a notes commit that need not be under refs/notes/ (`git notes`
    only reads refs there); fan-out directories ("ab/cdef...") are joined back into the object id."""
    out = repo.git.ls_tree("-r", "--full-tree", notes_commit)
    found = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        found[path.replace("/", "")] = meta.split()[2]
    return found
