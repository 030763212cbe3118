"""The campaign's git hooks as files: the shell scripts and their installation.

`git campaign prepare` and `git campaign hooks install` both install them; what a hook checks when it
runs is `gitcampaign/commands/hooks.py`. The scripts only hand over to `git campaign hooks run NAME`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from git import Repo

from gitcampaign import git as g
from gitcampaign.errors import CampaignError

HOOK_NAMES = ("pre-commit", "prepare-commit-msg", "commit-msg")
MARKER = "# gitcampaign-managed hook"

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


def hook_script(name: str, python: str = "python3") -> str:
    """The shell hook `name`; `python` runs `-m gitcampaign` where `git-campaign` is not on PATH."""
    # The path sits inside "${...:-PATH}": escape what double quotes do not protect.
    escaped = re.sub(r'([\\"$`])', r"\\\1", python)
    return HOOK_TEMPLATE.format(marker=MARKER, name=name, python=escaped)


def hooks_dir(repo: Repo) -> Path:
    """Where git runs hooks from: `core.hooksPath` if set, else the repository's hooks dir."""
    root = g.root(repo)
    configured = g.config_get(repo, "core.hooksPath")
    path = Path(configured).expanduser() if configured else g.git_path(repo, "hooks")
    return path if path.is_absolute() else root / path


def _tracked(repo: Repo, paths: list[Path]) -> list[str]:
    """Those of `paths` that are committed files of the work tree (`git ls-files`)."""
    root = g.root(repo).resolve()
    inside = [str(p.resolve().relative_to(root)) for p in paths if p.resolve().is_relative_to(root)]
    if not inside:
        return []
    return g.tracked(repo, inside)


def install_hooks(repo_root: Path) -> list[str]:
    """Install the three hooks; a foreign hook already there is kept as `NAME.local` and run first.
    Idempotent: our own hook is rewritten in place, never chained to itself."""
    repo = g.open_repo(repo_root)
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
