"""`git campaign hooks install|run`: the commit-time gates of a round (docs/design.md, Gates).

On a round branch (`campaign/NAME/round-N`) a commit must pass the campaign's tests and the static
anti-cheat lint on what is staged (pre-commit), be the round's only commit on top of the accepted
line unless it is an amend (prepare-commit-msg: unlike pre-commit it sees `--amend`, and
`--no-verify` does not skip it), and say what it tries and what it changes (commit-msg: a
`Hypothesis:` and a `Change:` line, prefilled from the round's hypothesis). Off round branches every
hook does nothing. Hooks can still be skipped with `--no-verify`, so VALIDATE re-runs every gate.

The shell hooks in `hooks/` only hand over to `git campaign hooks run NAME ARGS...`; the same scripts
are what `gitcampaign.hook_install` writes, so the two never drift.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from git import Repo

from gitcampaign import git as g
from gitcampaign import heat, trust
from gitcampaign.campaign import Campaign, check_next_commit
from gitcampaign.envinfo import tool_env
from gitcampaign.errors import CampaignError
from gitcampaign.hook_install import HOOK_NAMES
from gitcampaign.lint import format_finding, lint_source
from gitcampaign.refs import CampaignRef, RefKind
from gitcampaign.vocabulary import (
    HYPOTHESIS_RE,
    MESSAGE_FORMAT,
    NOT_UTF8_HINT,
    missing_message_lines,
    not_utf8,
)

SCISSORS = "# ------------------------ >8 ------------------------"
# Variables git sets for its hooks that pin a repository; the test command may run git itself
# (e.g. tests that build scratch repositories), so it must not inherit them.
REPOSITORY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)
OUTPUT_TAIL_CHARS = 6000


def checked_out_round(repo: Repo) -> CampaignRef | None:
    """The round branch checked out, or None off campaign round branches (and on a detached HEAD)."""
    ref = CampaignRef.from_ref(g.current_branch(repo) or "")
    return ref if ref is not None and ref.kind == RefKind.ROUND else None


def run_hook(name: str, repo_root: Path, args: list[str]) -> tuple[int, str]:
    """Dispatch `git campaign hooks run NAME ARGS...` (the arguments git gives that hook): the exit
    code and the text to show. A refusal of prepare-commit-msg raises CampaignError."""
    if name == "pre-commit":
        return run_pre_commit(repo_root)
    if name == "prepare-commit-msg" and args:
        source = args[1] if len(args) > 1 else None
        sha = args[2] if len(args) > 2 else None
        return run_prepare_commit_msg(repo_root, _message_path(repo_root, args[0]), source, sha), ""
    if name == "commit-msg" and args:
        return run_commit_msg(repo_root, _message_path(repo_root, args[0]))
    raise CampaignError(
        f"unknown hook invocation: {name} {' '.join(args)}".rstrip(),
        f"hooks are {', '.join(HOOK_NAMES)}; the message hooks take the message file as first argument",
    )


def _message_path(repo_root: Path, argument: str) -> Path:
    """Git passes the message file relative to the top of the work tree, where hooks run."""
    path = Path(argument)
    return path if path.is_absolute() else repo_root / path


# -- pre-commit --------------------------------------------------------------------------------------


def run_pre_commit(repo_root: Path) -> tuple[int, str]:
    """On a round branch: the anti-cheat lint on the staged Python files, then the campaign's
    `test_command`; non-zero with the failing check's output. Off round branches: 0, nothing run.
    The tests run on the work tree, as every pre-commit hook does (unstaged edits included);
    VALIDATE re-runs them on the committed tree in a worktree of its own. The round's candidate lock
    is held throughout (gitcampaign.heat): agents committing to their own rounds of a heat run at
    once, and a round that a validate is measuring takes no commit."""
    repo = g.open_repo(repo_root)
    current = checked_out_round(repo)
    if current is None:
        return 0, ""
    assert current.round is not None
    with heat.candidate_locks(repo, current.campaign, [current.round]):
        return _pre_commit(repo, repo_root, current)


def _pre_commit(repo: Repo, repo_root: Path, current: CampaignRef) -> tuple[int, str]:
    findings = [
        finding
        for path, source in g.staged_files(repo, "*.py").items()
        for finding in lint_source(source, path)
    ]
    report = [format_finding(f) for f in findings]
    if any(f.blocking for f in findings):
        return 1, "\n".join(
            [
                f"campaign-lint blocks this commit on {current.branch}:",
                *report,
                "hint: remove the pattern, or if it is honest, add `# campaign-lint: allow ID -- reason` "
                "on that line (the verdict reports it)",
            ]
        )
    campaign = Campaign(repo, current.campaign)
    test_command = campaign.manifest_command("test_command")
    if not test_command:
        return 0, "\n".join([*report, f"campaign {current.campaign}: no test_command; tests not run"])
    commands = trust.pending(campaign)
    if commands is not None:  # a campaign pulled or imported runs nothing before this clone approves it
        return 1, "\n".join(
            [*report, trust.refusal(campaign, commands), f"hint: {trust.approve_hint(campaign.name)}"]
        )
    # A compiled project's tests need its build: in place here, as validate builds each worktree.
    build_command = campaign.manifest_command("build_command")
    if build_command:
        test_command = f"{build_command} && {test_command}"
    completed = subprocess.run(
        test_command,
        shell=True,
        cwd=repo_root,
        # `python` in the command is the interpreter running gitcampaign, as for the harness.
        env={k: v for k, v in tool_env().items() if k not in REPOSITORY_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        return 1, "\n".join(
            [
                f"test_command failed (exit {completed.returncode}) on {current.branch}: {test_command}",
                completed.stdout[-OUTPUT_TAIL_CHARS:].rstrip(),
                "hint: fix the failure, `git add` the fix and commit again",
            ]
        )
    return 0, "\n".join([*report, f"campaign {current.campaign}: lint clean, tests passed ({test_command})"])


# -- prepare-commit-msg ------------------------------------------------------------------------------


def run_prepare_commit_msg(
    repo_root: Path, msg_file: Path, source: str | None = None, sha: str | None = None
) -> int:
    """On a round branch: refuse a second commit on the round (CampaignError: the round is one
    commit, amend it), then prefill `Hypothesis:` (the round's description) and `Change:` in an empty
    message, or add the `Hypothesis:` line to a `-m` message that lacks one. Returns the exit code."""
    repo = g.open_repo(repo_root)
    current = checked_out_round(repo)
    if current is None:
        return 0
    head = g.rev(repo, "HEAD")
    # `--amend` reaches this hook as source `commit` with `HEAD`, except with -m/-F (source `message`).
    amending = (source == "commit" and sha is not None and g.rev(repo, sha) == head) or (
        source == "message" and _git_commit_has_amend()
    )
    assert current.round is not None
    with heat.candidate_locks(repo, current.campaign, [current.round]):  # `--no-verify` skips pre-commit
        check_next_commit(Campaign(repo, current.campaign), current.round, amending)
    hypothesis = " ".join((g.config_get(repo, f"branch.{current.branch}.description") or "").split())
    raw = msg_file.read_bytes()
    undecodable = not_utf8(raw)
    if undecodable:  # unlike commit-msg, --no-verify does not skip this hook
        raise CampaignError(
            f"the commit message on {current.branch} is not UTF-8 ({undecodable}): a round's message"
            " goes into its verdict note and the report",
            f"{NOT_UTF8_HINT}, then commit again",
        )
    text = raw.decode("utf-8")
    lines = text.splitlines(keepends=True)
    first_comment = next((i for i, line in enumerate(lines) if line.startswith("#")), len(lines))
    body, comments = lines[:first_comment], lines[first_comment:]
    if not "".join(body).strip():
        body = [f"Hypothesis: {hypothesis}\n", "Change: \n"]
    elif hypothesis and not any(HYPOTHESIS_RE.match(line) for line in body):
        if not body[-1].endswith("\n"):
            body[-1] += "\n"
        body.append(f"\nHypothesis: {hypothesis}\n")
    else:
        return 0
    msg_file.write_text("".join(body + (["\n"] if comments else []) + comments), encoding="utf-8")
    return 0


def _git_commit_has_amend() -> bool:
    """Whether the `git commit` this hook runs under was given `--amend`. Git does not tell
    prepare-commit-msg when a message also came with -m/-F, so look at the ancestor processes
    (hook script -> `git campaign` -> here). A miss only refuses an amend with a clear message."""
    pid = os.getppid()
    for _ in range(6):
        found = _process(pid)
        if found is None:
            return False
        parent, args = found
        if args and Path(args[0]).name.startswith("git") and "commit" in args:
            return "--amend" in args[args.index("commit") + 1 :]
        pid = parent
    return False


def _process(pid: int) -> tuple[int, list[str]] | None:
    """(parent pid, argv) of a process, from /proc on Linux, else from `ps`."""
    proc = Path("/proc") / str(pid)
    try:
        if proc.is_dir():
            stat_fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            return int(stat_fields[1]), (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        out = subprocess.run(
            ["ps", "-o", "ppid=", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=True
        ).stdout.split()
        return int(out[0]), out[1:]
    except (OSError, ValueError, IndexError, subprocess.CalledProcessError):
        return None


# -- commit-msg --------------------------------------------------------------------------------------


def run_commit_msg(repo_root: Path, msg_file: Path) -> tuple[int, str]:
    """On a round branch the message must carry a non-empty `Hypothesis:` and `Change:` line."""
    repo = g.open_repo(repo_root)
    current = checked_out_round(repo)
    if current is None:
        return 0, ""
    raw = msg_file.read_bytes()
    undecodable = not_utf8(raw)
    if undecodable:
        return 1, (
            f"commit message on {current.branch} is not UTF-8 ({undecodable}): a round's message goes"
            f" into its verdict note and the report\nhint: {NOT_UTF8_HINT}, then commit again"
        )
    lines = []
    for line in raw.decode("utf-8").splitlines():
        if line.startswith(SCISSORS):
            break
        if not line.startswith("#"):
            lines.append(line)
    missing = missing_message_lines(lines)
    if not missing:
        return 0, ""
    return 1, "\n".join(
        [
            f"commit message on {current.branch} lacks a non-empty {' and '.join(missing)} line; expected:",
            MESSAGE_FORMAT,
            "hint: `git commit` (no -m) prefills both from the round's hypothesis",
        ]
    )
