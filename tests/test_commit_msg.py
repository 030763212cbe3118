"""The commit-message check of this repository's own work (.ci/commit_msg.py): as git's commit-msg
hook in a real `git commit`, and as CI over a range of commits. Campaign rounds are left to the tool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CHECK = REPO_ROOT / ".ci" / "commit_msg.py"
SUBJECT_72 = "Keep the subject of a commit to seventy-two characters; this is exact..."
ROUND = "Hypothesis: " + "a long hypothesis " * 8 + "\nChange: one change\n"


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose commit-msg hook is the check, linked as docs/contributing.md says."""
    root = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    (root / ".git" / "hooks" / "commit-msg").symlink_to(CHECK)
    return root


def with_python() -> dict[str, str]:
    """The environment with this test's interpreter first on PATH, as the hook's `python3`."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def commit(repo: Path, message: str) -> subprocess.CompletedProcess[str]:
    (repo / "file.txt").write_text(message)  # a change for every commit
    git(repo, "add", "file.txt")
    command = ["git", "-C", str(repo), "commit", "-q", "-F", "-"]
    return subprocess.run(command, input=message, capture_output=True, text=True, env=with_python())


def test_subject_length_is_exact() -> None:
    assert len(SUBJECT_72) == 72


def test_the_hook_takes_a_short_subject_and_a_body(repo: Path) -> None:
    assert commit(repo, f"{SUBJECT_72}\n\nThe body explains.\n").returncode == 0
    assert commit(repo, "One line is a message too\n").returncode == 0


def test_the_hook_refuses_a_long_subject(repo: Path) -> None:
    refused = commit(repo, f"{SUBJECT_72}!\n\nThe body.\n")
    assert refused.returncode == 1
    assert "the subject is 73 characters, over 72" in refused.stderr and "hint:" in refused.stderr
    assert git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False).returncode != 0  # nothing committed


def test_the_hook_refuses_a_body_glued_to_the_subject(repo: Path) -> None:
    refused = commit(repo, "Short subject\nand the body at once\n")
    assert refused.returncode == 1 and "second line is not blank" in refused.stderr


def test_the_hook_reads_the_message_git_will_record(repo: Path) -> None:
    """Comment lines and the scissors' tail are not the message (git strips them after the hook)."""
    comments = f"# {'a comment line longer than any subject may be ' * 3}\n"
    assert commit(repo, f"{comments}Short subject\n\nBody.\n{comments}").returncode == 0
    scissors = "# ------------------------ >8 ------------------------\n"
    assert commit(repo, f"Another short subject\n\nBody.\n{scissors}diff --git a/x b/x\n").returncode == 0


def test_the_hook_leaves_rounds_and_fixups_alone(repo: Path) -> None:
    assert commit(repo, ROUND).returncode == 0
    assert commit(repo, f"fixup! {SUBJECT_72}\n").returncode == 0


def test_ci_checks_every_commit_since_the_rule(repo: Path) -> None:
    before = "An old subject from before the rule, long enough to break it today: 80 chars"
    for message in (before, f"{SUBJECT_72}\n\nBody.", ROUND):
        (repo / "file.txt").write_text(message)
        git(repo, "add", "file.txt")
        git(repo, "commit", "-q", "--no-verify", "-m", message)
        if message == before:
            since = git(repo, "rev-parse", "HEAD").stdout.strip()

    def ci() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(CHECK), "--since", since]
        return subprocess.run(command, cwd=repo, capture_output=True, text=True, env=with_python())

    passed = ci()
    assert passed.returncode == 0, passed.stdout
    assert "2 commit(s)" in passed.stdout
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", "A subject\nglued to its body")
    failed = ci()
    assert failed.returncode == 1
    assert "'A subject': the second line is not blank" in failed.stdout
