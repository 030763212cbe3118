"""`git campaign export NAME [FILE]` and `git campaign import FILE`: a campaign as one git bundle.

The bundle holds the campaign's branches, rejected pins and notes refs (bench, full, verdict,
environment, profile), so the whole lineage (rejected rounds included) survives in a repository that
publishes only `main`, and moves between machines with no shared remote. It leaves out the project
history the campaign started from (the manifest's `git_commit`), which any clone of the project
already has; import checks it.
Import is a pull from the bundle: the same commits and note blobs, the same refusal to clobber.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import sync
from gitcampaign.campaign import check_name, locked
from gitcampaign.errors import CampaignError
from gitcampaign.refs import HEADS, CampaignRef
from gitcampaign.sync import SyncResult, integrate


@dataclass
class ExportResult:
    campaign: str
    path: str
    refs: dict[str, str]
    prerequisite: str | None
    size_bytes: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def default_path(name: str) -> str:
    return f"{C.campaign_dir(name)}/{C.BUNDLE_FILE}"


def export(
    repo_path: Path, campaign_name: str | None, path: Path | None = None, self_contained: bool = False
) -> ExportResult:
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        target = path if path is not None else g.root(repo) / default_path(campaign.name)
        refs = sync.campaign_refs(repo, campaign.name)
        base = None if self_contained else campaign.manifest().git_commit
        if base is not None and g.rev(repo, base) is None:
            base = None  # the start commit is gone from this clone: carry the history it reached
        g.bundle_create(repo, target, sorted(refs), [base] if base else [])
    return ExportResult(campaign.name, str(target), refs, base, target.stat().st_size)


def import_bundle(repo_path: Path, path: Path) -> SyncResult:
    repo = g.open_repo(repo_path)
    if not path.is_file():
        raise CampaignError(f"no bundle at {path}", "give the file `git campaign export` wrote")
    heads = g.bundle_heads(repo, path)
    names = sorted({owner for ref in heads if ref.startswith(HEADS) and (owner := CampaignRef.owner(ref))})
    if len(names) != 1:
        raise CampaignError(
            f"{path} holds {len(names)} campaigns ({', '.join(names) or 'none'}), not one",
            "import a bundle written by `git campaign export NAME`",
        )
    name = check_name(names[0], repo)
    main = CampaignRef.main(name)
    if str(main) not in heads:
        raise CampaignError(
            f"{path} holds campaign {name}'s rounds or notes but not its accepted line ({main.branch});"
            " nothing was imported",
            f"export the campaign again from the clone that has it: `git campaign export {name}`",
        )
    g.recover(repo)  # drops what a killed import left
    label = sync.import_label()  # a private tracking namespace, dropped afterwards
    with g.campaign_lock(repo, name):
        try:
            theirs = sync.fetch(repo, name, str(path.resolve()), label)
            g.fault_point("import:fetched")
            return integrate(repo, name, theirs, str(path))
        finally:
            sync.drop_tracking(repo, label)
