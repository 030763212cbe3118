"""`git campaign push [REMOTE]`: publish the campaign's branches, rejected pins and notes.

The remote's copy is fetched first; only refs this clone is strictly ahead on are pushed, in one
atomic push where every ref carries a lease on the value just fetched. Anything newer over there
(a diverged line, notes written by someone else) stops the push before it starts.
"""

from __future__ import annotations

from pathlib import Path

from gitcampaign import git as g
from gitcampaign import sync
from gitcampaign.campaign import resolve
from gitcampaign.errors import CampaignError
from gitcampaign.sync import SyncResult


def push(repo_path: Path, campaign_name: str | None, remote: str | None = None) -> SyncResult:
    repo = g.open_repo(repo_path)
    g.recover(repo)
    name = resolve(repo, campaign_name)
    target = sync.default_remote(repo, remote)
    with g.campaign_lock(repo, name):
        theirs = sync.fetch(repo, name, target, sync.tracking_label(target))
        ours = sync.campaign_refs(repo, name)
        comparison = sync.compare(repo, ours, theirs)
        diverged = comparison.refs_in(sync.DIVERGED)
        if diverged:
            raise CampaignError(
                f"{target} has campaign {name} data this clone does not ({', '.join(diverged)}); "
                "nothing was pushed",
                f"run `git campaign pull {target}` (it merges notes and says what cannot merge), then push again",
            )
        result = SyncResult(name, target)
        result.waiting = [ref for ref in comparison.refs_in(sync.BEHIND)]
        updates = {ref: (ours[ref], theirs.get(ref)) for ref in comparison.refs_in(sync.AHEAD)}
        if updates:
            g.push_with_leases(repo, target, updates)
            for ref, (new, old) in updates.items():
                tracking = f"{sync.TRACKING}/{sync.tracking_label(target)}/{ref[len('refs/') :]}"
                g.update_ref(repo, tracking, new, old, f"campaign: pushed to {target}")
                result.updated.append(f"{ref} {old[:12] if old else '(new)'}..{new[:12]}")
        return result
