"""`git campaign pull [REMOTE]`: bring another clone's rounds, pins and notes into this one.

Everything is checked before anything moves: a diverged accepted line or two different rounds under
one number stops the pull with nothing changed. Then notes (fast-forwarded or merged), pins, and
branches (fast-forward only), each a compare-and-swap.
"""

from __future__ import annotations

from pathlib import Path

from git import Repo

from gitcampaign import git as g
from gitcampaign import sync
from gitcampaign.campaign import campaigns, check_name, resolve
from gitcampaign.errors import CampaignError
from gitcampaign.refs import HEADS, CampaignRef, RefKind
from gitcampaign.sync import SyncResult, integrate


def pull(
    repo_path: Path, campaign_name: str | None, remote: str | None = None, supersede: bool = False
) -> SyncResult:
    repo = g.open_repo(repo_path)
    g.recover(repo)
    source = sync.default_remote(repo, remote)
    name = _campaign_name(repo, campaign_name, source)
    with g.campaign_lock(repo, name):
        theirs = sync.fetch(repo, name, source, sync.tracking_label(source))
        main = CampaignRef.main(name)
        if str(main) not in theirs:
            has_some = any(ref.startswith(HEADS) for ref in theirs)
            raise CampaignError(
                f"{source} has no campaign {name}"
                + (f": it has rounds of it, but not its accepted line {main.branch}" if has_some else "")
                + "; nothing was pulled",
                f"push it from the clone that has it: git campaign push {source}",
            )
        return integrate(repo, name, theirs, source, supersede)


def _campaign_name(repo: Repo, name: str | None, source: str) -> str:
    """A campaign this clone may not have yet (pulling it is how it arrives) must be named, unless
    this clone has none and the remote has exactly one (a fresh clone's first pull)."""
    if name and name not in campaigns(repo):
        return check_name(name, repo)
    if name or campaigns(repo):
        return resolve(repo, name)
    g.recover(repo)
    parsed = (CampaignRef.from_ref(ref) for ref in g.remote_heads(repo, source))
    there = sorted(ref.campaign for ref in parsed if ref is not None and ref.kind == RefKind.MAIN)
    if len(there) == 1:
        return check_name(there[0], repo)
    if not there:
        raise CampaignError(
            f"{source} has no campaign, and neither has this repository",
            "start one with `git campaign init NAME ...`, or push one to the remote from the clone that has it",
        )
    raise CampaignError(
        f"{source} has {len(there)} campaigns: {', '.join(there)}",
        f"name the one to pull: git campaign pull {source} --campaign NAME",
    )
