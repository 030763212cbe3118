"""The commit-time gates of a round, on real `git init` repositories in tmp dirs.

The hook functions are called directly, and the shell hooks in hooks/ are exercised end to end by a
real `git commit` with a `git-campaign` shim on PATH that calls the same functions.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gitcampaign.commands import trust
from gitcampaign.commands.hooks import (
    run_commit_msg,
    run_hook,
    run_pre_commit,
    run_prepare_commit_msg,
)
from gitcampaign.errors import CampaignError
from gitcampaign.hook_install import HOOK_NAMES, hook_script, install_hooks
from gitcampaign.vocabulary import hypothesis_of

REPO_ROOT = Path(__file__).resolve().parents[1]
CHEATS = Path(__file__).parent / "cheats"
HYPOTHESIS = "128x256 tiles keep both warpgroups busy on the large shapes"
# The test command passes while verdict.txt says ok; it prints so a failure's output can be checked.
TEST_COMMAND = (
    f"{sys.executable} -c \"import pathlib, sys; text = pathlib.Path('verdict.txt').read_text().strip(); "
    "print('tests say', text); sys.exit(text != 'ok')\""
)


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)


def write_manifest(repo: Path, test_command: str) -> None:
    manifest = repo / "campaigns" / "demo" / "manifest.yaml"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(f"target_op: gemm\ntest_command: '{test_command.replace(chr(39), chr(39) * 2)}'\n")


def commit_manifest(repo: Path, message: str) -> None:
    """Commit the manifest's change on campaign/demo/main, and approve its commands in this clone
    (as `git campaign trust` would: the hooks run no command this clone has not approved)."""
    git(repo, "commit", "-q", "-am", message)
    trust.trust(repo, "demo")


@pytest.fixture
def campaign_repo(tmp_path: Path) -> Path:
    """A repository with campaign `demo`: manifest and an op file on campaign/demo/main, and the
    round branch campaign/demo/round-2 checked out with its hypothesis as branch description."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("project\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "initial")
    git(repo, "checkout", "-q", "-b", "campaign/demo/main")
    write_manifest(repo, TEST_COMMAND)
    (repo / "verdict.txt").write_text("ok\n")
    (repo / "op.py").write_text("def op(a, b):\n    return a @ b.t()\n")
    git(repo, "add", ".")
    commit_manifest(repo, "campaign demo: init")
    git(repo, "checkout", "-q", "-b", "campaign/demo/round-2")
    git(repo, "config", "branch.campaign/demo/round-2.description", HYPOTHESIS)
    return repo


def stage(repo: Path, name: str, content: str) -> None:
    (repo / name).write_text(content)
    git(repo, "add", name)


# -- pre-commit --------------------------------------------------------------------------------------


def test_pre_commit_does_nothing_off_round_branches(campaign_repo: Path) -> None:
    git(campaign_repo, "checkout", "-q", "campaign/demo/main")
    stage(campaign_repo, "op.py", (CHEATS / "w2_id_activation_cache.py.txt").read_text())
    (campaign_repo / "verdict.txt").write_text("broken\n")
    assert run_pre_commit(campaign_repo) == (0, "")


def test_pre_commit_passes_an_honest_change(campaign_repo: Path) -> None:
    stage(campaign_repo, "op.py", (CHEATS / "honest_w1_weight_cache.py.txt").read_text())
    code, text = run_pre_commit(campaign_repo)
    assert code == 0, text
    assert "W1 (info)" in text  # the allowed weight cache is reported, not blocked
    assert "tests passed" in text


def test_pre_commit_blocks_a_staged_cheat(campaign_repo: Path) -> None:
    stage(campaign_repo, "op.py", (CHEATS / "w2_id_activation_cache.py.txt").read_text())
    code, text = run_pre_commit(campaign_repo)
    assert code == 1
    assert "op.py:8: W2 " in text


def test_pre_commit_judges_the_staged_content_not_the_work_tree(campaign_repo: Path) -> None:
    cheat = (CHEATS / "t1_patched_timers.py.txt").read_text()
    honest = (CHEATS / "honest_config_dict.py.txt").read_text()
    stage(campaign_repo, "op.py", cheat)
    (campaign_repo / "op.py").write_text(honest)  # clean work tree, cheat still staged
    assert run_pre_commit(campaign_repo)[0] == 1
    stage(campaign_repo, "op.py", honest)
    (campaign_repo / "op.py").write_text(cheat)  # cheat only in the work tree: not being committed
    assert run_pre_commit(campaign_repo)[0] == 0


def test_pre_commit_blocks_when_the_tests_fail_and_shows_their_output(campaign_repo: Path) -> None:
    (campaign_repo / "verdict.txt").write_text("broken\n")
    stage(campaign_repo, "verdict.txt", "broken\n")
    code, text = run_pre_commit(campaign_repo)
    assert code == 1
    assert "tests say broken" in text
    assert "test_command failed (exit 1)" in text


def test_pre_commit_builds_before_the_tests(campaign_repo: Path) -> None:
    """A compiled project's tests need its build: the hook runs build_command first, in place."""
    git(campaign_repo, "checkout", "-q", "campaign/demo/main")
    manifest = campaign_repo / "campaigns" / "demo" / "manifest.yaml"
    manifest.write_text(manifest.read_text() + "build_command: echo ok > verdict.txt\n")
    commit_manifest(campaign_repo, "campaign demo: a build command")
    git(campaign_repo, "checkout", "-q", "campaign/demo/round-2")
    (campaign_repo / "verdict.txt").write_text("broken\n")  # what only the build repairs
    code, text = run_pre_commit(campaign_repo)
    assert code == 0, text


def test_pre_commit_uses_the_accepted_manifest_not_the_rounds_copy(campaign_repo: Path) -> None:
    """A round cannot switch its own gate off by editing the manifest."""
    (campaign_repo / "verdict.txt").write_text("broken\n")
    write_manifest(campaign_repo, "true")
    git(campaign_repo, "add", ".")
    assert run_pre_commit(campaign_repo)[0] == 1


def test_test_command_does_not_inherit_the_hook_index(
    campaign_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git sets GIT_INDEX_FILE for hooks; tests that build their own repositories must not see it."""
    git(campaign_repo, "checkout", "-q", "campaign/demo/main")
    probe = f"{sys.executable} -c \"import os, sys; sys.exit('GIT_INDEX_FILE' in os.environ)\""
    write_manifest(campaign_repo, probe)
    commit_manifest(campaign_repo, "probe env")
    git(campaign_repo, "checkout", "-q", "-B", "campaign/demo/round-2")
    monkeypatch.setenv("GIT_INDEX_FILE", str(campaign_repo / ".git" / "index"))
    assert run_pre_commit(campaign_repo)[0] == 0


# -- prepare-commit-msg ------------------------------------------------------------------------------


def test_prepare_prefills_an_empty_message(campaign_repo: Path, tmp_path: Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("\n# Please enter the commit message for your changes.\n")
    assert run_prepare_commit_msg(campaign_repo, message) == 0
    text = message.read_text()
    assert text.startswith(f"Hypothesis: {HYPOTHESIS}\nChange: \n")
    assert "# Please enter the commit message" in text


def test_prepare_adds_the_hypothesis_to_a_message_given_with_m(campaign_repo: Path, tmp_path: Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("Change: BLOCK_N 256\n")
    run_prepare_commit_msg(campaign_repo, message, "message", None)
    assert message.read_text() == f"Change: BLOCK_N 256\n\nHypothesis: {HYPOTHESIS}\n"
    run_prepare_commit_msg(campaign_repo, message, "message", None)  # already there: unchanged
    assert message.read_text().count("Hypothesis:") == 1


def test_prepare_refuses_a_second_commit_but_allows_amend(campaign_repo: Path, tmp_path: Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("")
    assert run_prepare_commit_msg(campaign_repo, message) == 0  # the round's first commit
    stage(campaign_repo, "op.py", "def op(a, b):\n    return b @ a.t()\n")
    git(campaign_repo, "commit", "-q", "--no-verify", "-m", "first")
    with pytest.raises(CampaignError, match="already has its one commit") as refused:
        run_prepare_commit_msg(campaign_repo, message, "message", None)
    assert "git commit --amend" in refused.value.hint
    assert run_prepare_commit_msg(campaign_repo, message, "commit", "HEAD") == 0
    git(campaign_repo, "commit", "-q", "--no-verify", "--allow-empty", "-m", "second")
    with pytest.raises(CampaignError, match="2 commits ahead") as squash:
        run_prepare_commit_msg(campaign_repo, message, "commit", "HEAD")
    assert "git reset --soft campaign/demo/main" in squash.value.hint


# -- commit-msg --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "blocked"),
    [
        (f"Hypothesis: {HYPOTHESIS}\nChange: BLOCK_N 128 -> 256\n", False),
        # The prefilled template left as it was: Change is empty.
        (f"Hypothesis: {HYPOTHESIS}\nChange: \n", True),
        # A commented-out line does not count.
        ("Hypothesis: faster\n# Change: BLOCK_N 256\n", True),
        ("Change: BLOCK_N 256\n", True),
        # Everything under git's scissors line (commit -v) is discarded by git, so it does not count.
        ("Change: x\n# ------------------------ >8 ------------------------\nHypothesis: y\n", True),
    ],
)
def test_commit_msg_requires_hypothesis_and_change(
    campaign_repo: Path, tmp_path: Path, message: str, blocked: bool
) -> None:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    code, text = run_commit_msg(campaign_repo, path)
    assert code == int(blocked)
    if blocked:
        assert "Hypothesis: <what you expect and why>" in text


@pytest.mark.parametrize(
    ("message", "hypothesis"),
    [
        ("Hypothesis: bigger tiles\nChange: BLOCK_N 256\n", "bigger tiles"),
        # Wrapped: the paragraph goes on to the next label (a round from a candidate branch lost
        # everything after its first line, 2026-12-01) ...
        (
            "tiles\n\nHypothesis: the tile leaves the tensor cores idle\nwhile both consumers promote.\n"
            "Kernel alone (H200): 0.81 -> 0.88.\nChange: three consumers\n",
            "the tile leaves the tensor cores idle while both consumers promote. Kernel alone (H200): 0.81 -> 0.88.",
        ),
        # ... or to a blank line.
        ("Hypothesis: fewer launches\n\nMeasured later.\nChange: fuse\n", "fewer launches"),
        ("Change: only\n", ""),
    ],
)
def test_the_hypothesis_is_its_whole_paragraph(message: str, hypothesis: str) -> None:
    assert hypothesis_of(message) == hypothesis


def test_commit_msg_is_free_off_round_branches(campaign_repo: Path, tmp_path: Path) -> None:
    git(campaign_repo, "checkout", "-q", "main")
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text("fix typo\n")
    assert run_commit_msg(campaign_repo, path) == (0, "")


def test_run_hook_dispatches_with_git_arguments(campaign_repo: Path) -> None:
    (campaign_repo / ".git" / "COMMIT_EDITMSG").write_text("Change: only\n")
    assert run_hook("commit-msg", campaign_repo, [".git/COMMIT_EDITMSG"])[0] == 1


def test_message_hooks_refuse_a_message_that_is_not_utf8(campaign_repo: Path, tmp_path: Path) -> None:
    """A latin-1 message (`git commit -m` in a latin-1 terminal) crashed prepare-commit-msg; a round's
    message is read into its verdict, so both message hooks refuse it and say where the byte is."""
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_bytes("Hypothesis: caf\xe9 tiles\nChange: BLOCK_N 256\n".encode("latin-1"))
    with pytest.raises(CampaignError, match=r"not UTF-8 \(byte 0xe9 in line 1\)") as refused:
        run_prepare_commit_msg(campaign_repo, message, "message", None)
    assert "UTF-8" in refused.value.hint
    code, text = run_commit_msg(campaign_repo, message)
    assert code == 1 and "byte 0xe9 in line 1" in text
    assert message.read_bytes().startswith(b"Hypothesis: caf\xe9")  # left as the user wrote it


# -- install -----------------------------------------------------------------------------------------


def test_shipped_hook_files_are_what_install_writes() -> None:
    for name in HOOK_NAMES:
        shipped = REPO_ROOT / "hooks" / name
        assert shipped.read_text() == hook_script(name)
        assert shipped.stat().st_mode & stat.S_IXUSR


def test_hook_script_survives_an_awkward_interpreter_path() -> None:
    """The install-time interpreter may live under a path with spaces or shell metacharacters."""
    python = '/opt/my envs/py"3$HOME`x`\\bin'
    line = next(
        line for line in hook_script("commit-msg", python).splitlines() if "GITCAMPAIGN_PYTHON" in line
    )
    echoed = subprocess.run(
        ["sh", "-c", line.replace("exec ", "printf '%s\\n' ", 1), "hook", "MSGFILE"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": SYSTEM_PATH},
    ).stdout.splitlines()
    assert echoed == [python, "-m", "gitcampaign", "hooks", "run", "commit-msg", "MSGFILE"]


def test_install_chains_a_foreign_hook_and_is_idempotent(campaign_repo: Path) -> None:
    hooks = campaign_repo / ".git" / "hooks"
    foreign = "#!/bin/sh\necho foreign\n"
    (hooks / "pre-commit").write_text(foreign)
    actions = install_hooks(campaign_repo)
    assert len(actions) == 3
    assert (hooks / "pre-commit.local").read_text() == foreign
    for name in HOOK_NAMES:
        assert (hooks / name).read_text() == hook_script(name, sys.executable)
        assert os.access(hooks / name, os.X_OK)
    again = install_hooks(campaign_repo)
    assert all(line.endswith("already installed") for line in again)
    assert (hooks / "pre-commit.local").read_text() == foreign  # never chained to ourselves
    assert not (hooks / "commit-msg.local").exists()


def test_install_respects_core_hooks_path(campaign_repo: Path) -> None:
    git(campaign_repo, "config", "core.hooksPath", "custom-hooks")
    install_hooks(campaign_repo)
    assert sorted(p.name for p in (campaign_repo / "custom-hooks").iterdir()) == sorted(HOOK_NAMES)
    assert not (campaign_repo / ".git" / "hooks" / "pre-commit").exists()


# -- the shell hooks, end to end ---------------------------------------------------------------------

SHIM = """#!/bin/sh
# Stands in for the installed `git-campaign` console script.
exec {python} -m gitcampaign "$@"
"""
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(params=["git-campaign on PATH", "python -m gitcampaign fallback"])
def hooked_repo(
    request: pytest.FixtureRequest, campaign_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """campaign_repo with the hooks installed over a foreign pre-commit hook that leaves a mark;
    the hooks reach the tool through `git campaign` on PATH, or through the install-time python."""
    path = SYSTEM_PATH
    if request.param == "git-campaign on PATH":
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "git-campaign"
        shim.write_text(SHIM.format(python=sys.executable))
        shim.chmod(0o755)
        path = f"{bin_dir}{os.pathsep}{path}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    foreign = campaign_repo / ".git" / "hooks" / "pre-commit"
    foreign.write_text('#!/bin/sh\necho ran >> "$(git rev-parse --git-dir)/foreign-hook-ran"\n')
    foreign.chmod(0o755)
    install_hooks(campaign_repo)
    return campaign_repo


def test_real_commits_go_through_the_gates(hooked_repo: Path) -> None:
    repo = hooked_repo
    stage(repo, "op.py", (CHEATS / "w2_data_ptr_key.py.txt").read_text())
    blocked = git(repo, "commit", "-m", "Hypothesis: x\nChange: y", check=False)
    assert blocked.returncode != 0
    assert "W2" in blocked.stderr
    assert (repo / ".git" / "foreign-hook-ran").exists()  # the chained hook ran first

    stage(repo, "op.py", "def op(a, b):\n    return (a @ b.t()).contiguous()\n")
    # The editor keeps the prefilled template: Change is empty, so commit-msg blocks.
    empty_change = subprocess.run(
        ["git", "-C", str(repo), "commit"],
        env={**os.environ, "GIT_EDITOR": "true"},
        capture_output=True,
        text=True,
    )
    assert empty_change.returncode != 0
    assert "Change:" in empty_change.stderr
    filled = subprocess.run(
        ["git", "-C", str(repo), "commit"],
        env={**os.environ, "GIT_EDITOR": "sed -i 's/^Change: $/Change: contiguous output/'"},
        capture_output=True,
        text=True,
    )
    assert filled.returncode == 0, filled.stderr
    assert git(repo, "log", "-1", "--format=%B").stdout.startswith(
        f"Hypothesis: {HYPOTHESIS}\nChange: contiguous output"
    )

    stage(repo, "op.py", "def op(a, b):\n    return a @ b.T\n")
    second = git(repo, "commit", "-m", "Change: use .T", check=False)
    assert second.returncode != 0
    assert "git commit --amend" in second.stderr
    amend = git(repo, "commit", "--amend", "-m", "Change: use .T", check=False)
    assert amend.returncode == 0, amend.stderr
    assert git(repo, "rev-list", "--count", "campaign/demo/main..HEAD").stdout.strip() == "1"
