"""`git campaign hooks install|run`: the commit-time gates of a round (docs/design.md, Gates).

On a round branch (`campaign/NAME/round-N`) a commit must pass the campaign's tests and the static
anti-cheat lint on what is staged (pre-commit), be the round's only commit on top of the accepted
line unless it is an amend (prepare-commit-msg: unlike pre-commit it sees `--amend`, and
`--no-verify` does not skip it), and say what it tries and what it changes (commit-msg: a
`Hypothesis:` and a `Change:` line, prefilled from the round's hypothesis). Off round branches every
hook does nothing. Hooks can still be skipped with `--no-verify`, so VALIDATE re-runs every gate.

The shell hooks in `hooks/` only hand over to `git campaign hooks run NAME ARGS...`; the same scripts
are what `install_hooks` writes, so the two never drift.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from git import Repo

from gitcampaign import git as gitops
from gitcampaign.commands.lint import format_finding
from gitcampaign.constants import MANIFEST_FILE, campaign_dir, main_branch
from gitcampaign.envinfo import tool_env
from gitcampaign.errors import CampaignError
from gitcampaign.lint import lint_source

HOOK_NAMES = ("pre-commit", "prepare-commit-msg", "commit-msg")
MARKER = "# gitcampaign-managed hook"
ROUND_BRANCH_RE = re.compile(r"^campaign/(?P<campaign>.+)/round-(?P<round_no>\d+)$")
HYPOTHESIS_RE = re.compile(r"^hypothesis:\s*\S", re.IGNORECASE)
CHANGE_RE = re.compile(r"^change:\s*\S", re.IGNORECASE)
SCISSORS = "# ------------------------ >8 ------------------------"
MESSAGE_FORMAT = "Hypothesis: <what you expect and why>\nChange: <the one change this round makes>"
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

HOOK_TEMPLATE = """#!/bin/sh
{marker}: {name} (written by `git campaign hooks install`; the logic is
# gitcampaign/commands/hooks.py). A hook this one replaced was kept as {name}.local and runs first.
hook_dir=$(dirname "$0")
if [ -x "$hook_dir/{name}.local" ]; then
    "$hook_dir/{name}.local" "$@" || exit $?
fi
if command -v git-campaign >/dev/null 2>&1; then
    exec git campaign hooks run {name} "$@"
fi
exec "${{GITCAMPAIGN_PYTHON:-{python}}}" -m gitcampaign hooks run {name} "$@"
"""


@dataclass(frozen=True)
class RoundBranch:
    campaign: str
    round_no: int
    branch: str


def hook_script(name: str, python: str = "python3") -> str:
    """The shell hook `name`; `python` runs `-m gitcampaign` where `git-campaign` is not on PATH."""
    # The path sits inside "${...:-PATH}": escape what double quotes do not protect.
    escaped = re.sub(r'([\\"$`])', r"\\\1", python)
    return HOOK_TEMPLATE.format(marker=MARKER, name=name, python=escaped)


def current_round(repo: Repo) -> RoundBranch | None:
    """The round branch checked out, or None off campaign round branches (and on a detached HEAD)."""
    branch = gitops.current_branch(repo)
    match = ROUND_BRANCH_RE.match(branch or "")
    if branch is None or match is None:
        return None
    return RoundBranch(match["campaign"], int(match["round_no"]), branch)


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
    VALIDATE re-runs them on the committed tree in a worktree of its own."""
    repo = gitops.open_repo(repo_root)
    current = current_round(repo)
    if current is None:
        return 0, ""
    findings = [
        finding for path, source in _staged_python_sources(repo) for finding in lint_source(source, path)
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
    test_command = _manifest_value(repo, current, "test_command")
    if not test_command:
        return 0, "\n".join([*report, f"campaign {current.campaign}: no test_command; tests not run"])
    # A compiled project's tests need its build: in place here, as validate builds each worktree.
    build_command = _manifest_value(repo, current, "build_command")
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


def _staged_python_sources(repo: Repo) -> list[tuple[str, str]]:
    """(path, staged content) of every added/changed Python file: the lint judges what is being
    committed, not the work tree (`git add -p` can stage something else)."""
    names = repo.git.diff("--cached", "--name-only", "-z", "--diff-filter=ACMR", "--", "*.py")
    sources = []
    for path in filter(None, names.split("\0")):
        blob = repo.git.cat_file("blob", f":{path}", strip_newline_in_stdout=False)
        sources.append((path, blob))
    return sources


def _manifest_value(repo: Repo, current: RoundBranch, key: str) -> str:
    """A manifest field as the accepted line has it (a round cannot loosen its own gate by editing
    the manifest; validate's integrity gate rejects that anyway)."""
    main = main_branch(current.campaign)
    path = f"{campaign_dir(current.campaign)}/{MANIFEST_FILE}"
    content = gitops.read_file_at(repo, main, path) if gitops.rev(repo, main) else None
    if content is None:
        raise CampaignError(
            f"{path} is not on {main}, so the round's gates cannot run",
            f"run `git campaign init {current.campaign} ...` first",
        )
    try:
        manifest = yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise CampaignError(
            f"{path} on {main} is not valid YAML: {exc}", "repair the manifest on the campaign's main"
        ) from exc
    if not isinstance(manifest, dict):
        raise CampaignError(
            f"{path} on {main} is not a mapping", "repair the manifest on the campaign's main"
        )
    value = manifest.get(key) or ""
    if not isinstance(value, str):
        raise CampaignError(f"{path}: {key} must be a shell command string", f"set {key} in the manifest")
    return value


# -- prepare-commit-msg ------------------------------------------------------------------------------


def run_prepare_commit_msg(
    repo_root: Path, msg_file: Path, source: str | None = None, sha: str | None = None
) -> int:
    """On a round branch: refuse a second commit on the round (CampaignError: the round is one
    commit, amend it), then prefill `Hypothesis:` (the round's description) and `Change:` in an empty
    message, or add the `Hypothesis:` line to a `-m` message that lacks one. Returns the exit code."""
    repo = gitops.open_repo(repo_root)
    current = current_round(repo)
    if current is None:
        return 0
    _require_one_commit(repo, current, source, sha)
    hypothesis = " ".join((gitops.config_get(repo, f"branch.{current.branch}.description") or "").split())
    text = msg_file.read_text(encoding="utf-8")
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


def _require_one_commit(repo: Repo, current: RoundBranch, source: str | None, sha: str | None) -> None:
    """Raise unless this commit keeps the round at one commit on top of the accepted line."""
    main = main_branch(current.campaign)
    if gitops.rev(repo, main) is None:
        raise CampaignError(
            f"{main} does not exist, so {current.branch} has no accepted line to sit on",
            "run `git campaign init` first",
        )
    head = gitops.rev(repo, "HEAD")
    ahead = gitops.count_commits(repo, main, "HEAD") if head else 0
    # `--amend` reaches this hook as source `commit` with `HEAD`, except with -m/-F (source `message`).
    amending = (source == "commit" and sha is not None and gitops.rev(repo, sha) == head) or (
        source == "message" and _git_commit_has_amend()
    )
    if ahead == 0 or (ahead == 1 and amending):
        return
    if ahead == 1:
        raise CampaignError(
            f"{current.branch} already has its one commit: a round is exactly one commit on top of {main}",
            "fold this change into it with `git commit --amend`",
        )
    raise CampaignError(
        f"{current.branch} is {ahead} commits ahead of {main}; a round is exactly one commit",
        f"squash them with `git reset --soft {main} && git commit`",
    )


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
    repo = gitops.open_repo(repo_root)
    current = current_round(repo)
    if current is None:
        return 0, ""
    lines = []
    for line in msg_file.read_text(encoding="utf-8").splitlines():
        if line.startswith(SCISSORS):
            break
        if not line.startswith("#"):
            lines.append(line)
    missing = [
        label
        for label, pattern in (("Hypothesis:", HYPOTHESIS_RE), ("Change:", CHANGE_RE))
        if not any(pattern.match(line) for line in lines)
    ]
    if not missing:
        return 0, ""
    return 1, "\n".join(
        [
            f"commit message on {current.branch} lacks a non-empty {' and '.join(missing)} line; expected:",
            MESSAGE_FORMAT,
            "hint: `git commit` (no -m) prefills both from the round's hypothesis",
        ]
    )


# -- install -----------------------------------------------------------------------------------------


def hooks_dir(repo: Repo) -> Path:
    """Where git runs hooks from: `core.hooksPath` if set, else the repository's hooks dir."""
    root = gitops.root(repo)
    configured = gitops.config_get(repo, "core.hooksPath")
    path = Path(configured).expanduser() if configured else Path(repo.git.rev_parse("--git-path", "hooks"))
    return path if path.is_absolute() else root / path


def _tracked(repo: Repo, paths: list[Path]) -> list[str]:
    """Those of `paths` that are committed files of the work tree (`git ls-files`)."""
    root = gitops.root(repo).resolve()
    inside = [str(p.resolve().relative_to(root)) for p in paths if p.resolve().is_relative_to(root)]
    if not inside:
        return []
    return [line for line in repo.git.ls_files("--", *inside).splitlines() if line]


def install_hooks(repo_root: Path) -> list[str]:
    """Install the three hooks; a foreign hook already there is kept as `NAME.local` and run first.
    Idempotent: our own hook is rewritten in place, never chained to itself."""
    repo = gitops.open_repo(repo_root)
    directory = hooks_dir(repo)
    tracked = _tracked(
        repo, [directory / name for name in HOOK_NAMES] + [directory / f"{n}.local" for n in HOOK_NAMES]
    )
    if tracked:
        raise CampaignError(
            f"core.hooksPath points at {directory}, where {', '.join(tracked)} are committed files;"
            " installing would rewrite them in everyone's checkout",
            'call `git campaign hooks run NAME "$@"` from those committed hooks by hand (or use'
            " .pre-commit-hooks.yaml); `git campaign prepare --no-hooks` skips this step",
        )
    directory.mkdir(parents=True, exist_ok=True)
    actions = []
    for name in HOOK_NAMES:
        target = directory / name
        script = hook_script(name, sys.executable)
        if target.exists() or target.is_symlink():
            existing = target.read_text(encoding="utf-8", errors="replace") if target.exists() else ""
            if MARKER in existing:
                if existing == script:
                    actions.append(f"{target}: already installed")
                    continue
                actions.append(f"{target}: updated")
            else:
                local = directory / f"{name}.local"
                if local.exists() or local.is_symlink():
                    raise CampaignError(
                        f"{target} is not ours and {local} already exists, so there is nowhere to keep it",
                        f"merge {target} into {local} by hand, delete {target}, then run `git campaign hooks install`",
                    )
                target.rename(local)
                actions.append(f"{target}: installed; the existing hook now runs first from {local}")
        else:
            actions.append(f"{target}: installed")
        target.write_text(script, encoding="utf-8")
        target.chmod(0o755)
    return actions
