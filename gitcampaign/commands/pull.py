"""`git campaign pull [REMOTE]`: bring another clone's rounds, pins and notes into this one.

Everything is checked before anything moves: a diverged accepted line or two different rounds under
one number stops the pull with nothing changed. Then notes (fast-forwarded or merged), pins, and
branches (fast-forward only), each a compare-and-swap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import sync
from gitcampaign.campaign import campaigns, check_name, resolve
from gitcampaign.commands.init import configure_notes
from gitcampaign.errors import CampaignError


@dataclass
class SyncResult:
    campaign: str
    source: str
    updated: list[str] = field(default_factory=list)  # "REF OLD..NEW" for every ref moved here or there
    merges: list[str] = field(default_factory=list)  # what a notes merge had to decide
    waiting: list[str] = field(default_factory=list)  # refs the other side is ahead on (push only)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pull(repo_path: Path, campaign_name: str | None, remote: str | None = None) -> SyncResult:
    repo = g.open_repo(repo_path)
    source = sync.default_remote(repo, remote)
    name = _campaign_name(repo, campaign_name)
    with g.campaign_lock(repo, name):
        theirs = sync.fetch(repo, name, source, source)
        if not theirs:
            raise CampaignError(
                f"{source} has no campaign {name}",
                f"push it from the clone that has it: git campaign push {source}",
            )
        return integrate(repo, name, theirs, source)


def _campaign_name(repo: Repo, name: str | None) -> str:
    """A campaign this clone may not have yet (pulling it is how it arrives) must be named."""
    if name and name not in campaigns(repo):
        return check_name(name)
    return resolve(repo, name)


def integrate(repo: Repo, name: str, theirs: dict[str, str], source: str) -> SyncResult:
    """Bring the refs `theirs` (already fetched) into this clone without losing anything of ours."""
    ours = sync.campaign_refs(repo, name)
    comparison = sync.compare(repo, ours, theirs)
    problems = list(comparison.conflicts)
    main_ref = f"refs/heads/{C.main_branch(name)}"
    for ref in comparison.refs_in(sync.DIVERGED):
        if ref == main_ref:
            problems.append(
                f"{C.main_branch(name)} diverged: {source} accepted "
                f"{g.count_commits(repo, ours[ref], theirs[ref])} commit(s) this clone does not have, and "
                f"this clone accepted {g.count_commits(repo, theirs[ref], ours[ref])} that {source} does not;"
                " the accepted line is linear and cannot be merged"
            )
        elif ref.startswith("refs/heads/"):
            problems.append(
                f"{ref[len('refs/heads/') :]} is {ours[ref][:12]} here and {theirs[ref][:12]} on {source}: "
                "two people opened the same round number"
            )
    if problems:
        raise CampaignError(
            f"cannot bring campaign {name} from {source}; nothing was changed:\n  " + "\n  ".join(problems),
            "settle it with whoever pushed: keep one side (delete or rename yours with `git branch -m`, "
            f"re-run your round on top of {source}'s accepted head), then pull again",
        )
    result = SyncResult(name, source)
    behind = comparison.refs_in(sync.BEHIND)
    for notes_ref in sync.NOTES_REFS:  # notes first: a ref never points at a commit without its notes
        state = comparison.states.get(notes_ref)
        if state == sync.BEHIND:
            _move(repo, notes_ref, theirs[notes_ref], ours.get(notes_ref), source, result)
        elif state == sync.DIVERGED:
            merged, decisions = sync.merge_notes(repo, notes_ref, ours[notes_ref], theirs[notes_ref], source)
            _move(repo, notes_ref, merged, ours[notes_ref], source, result)
            result.merges += decisions
    for ref in behind:
        if ref.startswith(f"refs/campaign/{name}/rejected/"):
            _move(repo, ref, theirs[ref], None, source, result)
    checked_out = g.head_ref_name(repo)
    if any(ref == checked_out for ref in behind):
        g.require_clean(repo, f"move the checked-out {checked_out} to {source}'s")
    for ref in behind:
        if ref.startswith("refs/heads/"):
            branch = ref[len("refs/heads/") :]
            g.move_branch(repo, branch, theirs[ref], ours.get(ref), f"campaign: pull from {source}")
            result.updated.append(f"{ref} {_short(ours.get(ref))}..{theirs[ref][:12]}")
    if name in campaigns(repo):
        configure_notes(g.root(repo))
    return result


def _move(repo: Repo, ref: str, new: str, old: str | None, source: str, result: SyncResult) -> None:
    g.update_ref(repo, ref, new, old, f"campaign: pull from {source}")
    result.updated.append(f"{ref} {_short(old)}..{new[:12]}")


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "(new)"
