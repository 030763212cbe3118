"""Which campaigns' commands this clone has approved to run, as `direnv allow` and `mise trust` do.

A campaign's manifest names shell commands (build, tests, the quick harness, the probe, the full
benchmark, the acceptance suite), and a campaign arrives as data: a `pull` or an `import` brings
someone else's manifest, and its commands would run on the next `validate`, `report` or commit hook.
So a campaign runs none of its commands until this clone has approved that very set of commands
(`git campaign trust`); `init` approves the campaign it creates. A changed set asks again.

Approvals are files in the clone's common git dir (`campaign/trusted/NAME@SHA256`, the set written
out inside for the record): never in the work tree, never in a ref, so nothing that travels with a
campaign can approve it, and every worktree of the clone shares them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from git import Repo

from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import COMMAND_FIELDS
from gitcampaign.verdict import now


def commands_of(fields: Mapping[str, object]) -> dict[str, str]:
    """The command set of a manifest (its fields as a mapping), '' for a command it has not."""
    return {key: str(fields.get(key) or "") for key in COMMAND_FIELDS}


def _digest(name: str, commands: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps([name, dict(commands)], sort_keys=True).encode()).hexdigest()


def _store(repo: Repo) -> Path:
    return g.common_dir(repo) / "campaign" / "trusted"


def _approval(repo: Repo, name: str, commands: Mapping[str, str]) -> Path:
    return _store(repo) / f"{name}@{_digest(name, commands)}"


def is_trusted(repo: Repo, name: str, commands: Mapping[str, str]) -> bool:
    return _approval(repo, name, commands).is_file()


def approve(repo: Repo, name: str, commands: Mapping[str, str]) -> bool:
    """Record this clone's approval of `commands` for campaign `name`; False where it already was."""
    path = _approval(repo, name, commands)
    if path.is_file():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(
        json.dumps({"campaign": name, "approved": now(), "commands": dict(commands)}, indent=2)
    )
    scratch.replace(path)
    return True


def pending(campaign: Campaign) -> dict[str, str] | None:
    """The campaign's commands (the accepted line's manifest) where this clone has not approved
    them, else None."""
    commands = commands_of(campaign.manifest_fields())
    return None if is_trusted(campaign.repo, campaign.name, commands) else commands


def require(campaign: Campaign) -> None:
    """CampaignError, showing the commands and the one command that approves them, where this clone
    has not approved the campaign's commands. Every command that runs them calls this first."""
    commands = pending(campaign)
    if commands is not None:
        raise CampaignError(refusal(campaign, commands), approve_hint(campaign.name))


def approve_hint(name: str) -> str:
    return f"read them; where you would run them yourself, approve them: git campaign trust --campaign {name}"


def refusal(campaign: Campaign, commands: Mapping[str, str]) -> str:
    """Why nothing runs: the commands, and what changed since an earlier approval of this campaign."""
    changed = _changed_since_approval(campaign.repo, campaign.name, commands)
    why = (
        f"they changed since this clone approved them: {', '.join(changed)}"
        if changed
        else "they came with the campaign (a pull or an import), and none of them runs until you approve them"
    )
    shown = [f"  {key}: {command}" for key, command in commands.items() if command]
    return "\n".join([f"campaign {campaign.name}'s commands are not approved in this clone; {why}:", *shown])


def _changed_since_approval(repo: Repo, name: str, commands: Mapping[str, str]) -> list[str]:
    """The commands that differ from this campaign's most recent approval here ([] without one)."""
    approvals = sorted(_store(repo).glob(f"{name}@*"), key=lambda path: path.stat().st_mtime)
    for path in reversed(approvals):
        try:
            earlier = json.loads(path.read_text()).get("commands")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(earlier, dict):
            continue
        return [key for key in COMMAND_FIELDS if earlier.get(key, "") != commands.get(key, "")]
    return []
