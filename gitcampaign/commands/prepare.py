"""PREPARE_ENVIRONMENT: environment report, the frozen harness and op spec copied in, notes and hooks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import envinfo, hook_install, trust
from gitcampaign import git as g
from gitcampaign.campaign import configure_notes, locked
from gitcampaign.errors import CampaignError
from gitcampaign.harness.build import frozen_harness
from gitcampaign.harness.ops import spec_of
from gitcampaign.manifest import Manifest
from gitcampaign.refs import CampaignRef


@dataclass
class PrepareResult:
    environment: dict[str, object]
    actions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def frozen_files(repo: Any, head: str, manifest: Manifest) -> dict[str, bytes]:
    """The campaign's frozen harness (its per-shape measurement and its training probe) and the op spec it measures,
    where the manifest's commands run them."""
    folder = C.campaign_dir(manifest.name)
    harness = f"{folder}/{C.HARNESS_FILE}"
    if not any(
        command.startswith(f"python {harness}")
        for command in (manifest.quick_command, manifest.probe_command)
    ):
        return {}
    if manifest.op_spec:
        spec = g.read_file_at(repo, head, manifest.op_spec)
        if spec is None:
            raise CampaignError(
                f"the op spec {manifest.op_spec} is not committed on {CampaignRef.main(manifest.name).branch}",
                f"restore it (`git checkout {manifest.git_commit} -- {manifest.op_spec}`) and commit it",
            )
    else:
        found = spec_of(manifest.target_op)
        if found is None:
            raise CampaignError(
                f"op {manifest.target_op} has no spec in this version of gitcampaign",
                "start the campaign again with --op-spec, or install the gitcampaign that made it",
            )
        spec = found[0].read_bytes()
    return {
        harness: frozen_harness(manifest.target_op, manifest.target_backend),
        f"{folder}/{C.OP_SPEC_FILE}": spec,
    }


def prepare(repo_path: Path, campaign_name: str | None, install_hooks: bool = True) -> PrepareResult:
    with locked(repo_path, campaign_name, clean_for="prepare the campaign") as campaign:
        repo = campaign.repo
        manifest = campaign.manifest()
        result = PrepareResult(environment=envinfo.fingerprint())
        result.environment["git_version"] = g.git_version()
        head = campaign.accepted_head()
        # After the baseline the harness is frozen as it was (a newer tool never replaces it); prepare
        # then only configures this clone (notes, hooks).
        files = frozen_files(repo, head, manifest) if manifest.csv_header is None else {}
        changed = {path: body for path, body in files.items() if g.read_file_at(repo, head, path) != body}
        if changed:
            approved = trust.pending(campaign) is None
            g.checkout(repo, campaign.main_branch)
            g.commit_files(
                repo,
                campaign.main_branch,
                changed,
                f"campaign {manifest.name}: prepare environment\n\nFreezes the quick harness (and training probe) and the op spec it measures.\n",
            )
            result.actions += [f"copied {path}" for path in sorted(changed)]
            if approved:  # the files are this tool's own copies: an approved campaign stays approved
                trust.approve(campaign)
        configure_notes(repo)
        result.actions.append(f"notes.displayRef and notes.rewriteRef set to {C.NOTES_GLOB}")
        if install_hooks:
            result.actions += hook_install.install_hooks(g.root(repo))
        return result
