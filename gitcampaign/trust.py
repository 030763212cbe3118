"""Which campaigns' commands this clone has approved to run, as `direnv allow` and `mise trust` do.

A campaign's manifest names shell commands (build, tests, the quick harness, the probe, the full
benchmark, the acceptance suite), and a campaign arrives as data: a `pull` or an `import` brings
someone else's manifest, and its commands would run on the next `validate`, `report` or commit hook.
So a campaign runs none of its commands until this clone has approved that very set (the commands,
and the files of the campaign's folder they run: `CommandSet`) with `git campaign trust`; `init`
approves the campaign it creates, `prepare` the harness it copies into an approved one. A changed
set asks again.

Approvals are files in the clone's common git dir (`campaign/trusted/NAME@SHA256`, the set written
out inside for the record): never in the work tree, never in a ref, so nothing that travels with a
campaign can approve it, and every worktree of the clone shares them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import COMMAND_FIELDS
from gitcampaign.verdict import now


@dataclass(frozen=True)
class CommandSet:
    """What an approval covers: the manifest's commands, and the files in the campaign's own folder
    that they run (the copied harness and probe, a shape file), by blob id. Those files travel with
    the campaign as the commands do, so `python campaigns/NAME/quick_test_bench.py` approved once
    does not run another file under the same name. The project's own files a command runs (its
    tests, its build) are the project's code, as on any branch one checks out."""

    commands: dict[str, str]
    files: dict[str, str]

    def lines(self) -> list[str]:
        shown = [f"  {key}: {command}" for key, command in self.commands.items() if command]
        return shown + [f"  runs {path} (blob {blob[:12]})" for path, blob in self.files.items()]


def commands_of(fields: Mapping[str, object]) -> dict[str, str]:
    """The commands of a manifest (its fields as a mapping), '' for a command it has not."""
    return {key: str(fields.get(key) or "") for key in COMMAND_FIELDS}


def command_set(campaign: Campaign) -> CommandSet:
    """The set the accepted line's manifest (and campaign folder) holds now."""
    commands = commands_of(campaign.manifest_fields())
    folder = C.campaign_dir(campaign.name) + "/"
    named: set[str] = set()
    for command in commands.values():
        try:
            named.update(token for token in shlex.split(command) if token.startswith(folder))
        except ValueError:  # unbalanced quotes: the command itself is still what is approved
            continue
    if f"{folder}{C.HARNESS_FILE}" in named:  # the frozen harness runs the op spec beside it
        named.add(f"{folder}{C.OP_SPEC_FILE}")
    files = {}
    for path in sorted(named):
        blob = g.rev(campaign.repo, f"{campaign.main_ref}:{path}", peel="")
        if blob is not None:
            files[path] = blob
    return CommandSet(commands, files)


def _digest(name: str, approved: CommandSet) -> str:
    return hashlib.sha256(
        json.dumps([name, approved.commands, approved.files], sort_keys=True).encode()
    ).hexdigest()


def _store(repo: Repo) -> Path:
    return g.common_dir(repo) / "campaign" / "trusted"


def _approval(repo: Repo, name: str, approved: CommandSet) -> Path:
    return _store(repo) / f"{name}@{_digest(name, approved)}"


def approve(campaign: Campaign, approved: CommandSet | None = None) -> bool:
    """Record this clone's approval of the campaign's set (default: as it stands now); False where
    it already was."""
    approved = approved or command_set(campaign)
    path = _approval(campaign.repo, campaign.name, approved)
    if path.is_file():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "campaign": campaign.name,
        "approved": now(),
        "commands": approved.commands,
        "files": approved.files,
    }
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(record, indent=2))
    scratch.replace(path)
    return True


def pending(campaign: Campaign) -> CommandSet | None:
    """The campaign's set where this clone has not approved it, else None."""
    current = command_set(campaign)
    return None if _approval(campaign.repo, campaign.name, current).is_file() else current


def require(campaign: Campaign) -> None:
    """CampaignError, showing the commands and the one command that approves them, where this clone
    has not approved the campaign's set. Every command that runs them calls this first."""
    current = pending(campaign)
    if current is not None:
        raise CampaignError(refusal(campaign, current), approve_hint(campaign.name))


def approve_hint(name: str) -> str:
    return f"read them; where you would run them yourself, approve them: git campaign trust --campaign {name}"


def refusal(campaign: Campaign, current: CommandSet) -> str:
    """Why nothing runs: the set, and what changed since an earlier approval of this campaign."""
    changed = _changed_since_approval(campaign.repo, campaign.name, current)
    why = (
        f"they changed since this clone approved them: {', '.join(changed)}"
        if changed
        else "they came with the campaign (a pull or an import), and none of them runs until you approve them"
    )
    return "\n".join(
        [f"campaign {campaign.name}'s commands are not approved in this clone; {why}:", *current.lines()]
    )


def _changed_since_approval(repo: Repo, name: str, current: CommandSet) -> list[str]:
    """What differs from this campaign's most recent approval here ([] without one)."""
    approvals = sorted(_store(repo).glob(f"{name}@*"), key=lambda path: path.stat().st_mtime)
    for path in reversed(approvals):
        try:
            earlier = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(earlier, dict) or not isinstance(earlier.get("commands"), dict):
            continue
        files = earlier.get("files")
        files = files if isinstance(files, dict) else {}
        commands = [
            key for key in COMMAND_FIELDS if earlier["commands"].get(key, "") != current.commands[key]
        ]
        paths = sorted(
            path for path in {*files, *current.files} if files.get(path) != current.files.get(path)
        )
        return commands + paths
    return []
