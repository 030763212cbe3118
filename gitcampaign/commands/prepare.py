"""PREPARE_ENVIRONMENT: environment report, the quick harness and probe copied in, notes and hooks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import envinfo, hook_install, trust
from gitcampaign import git as g
from gitcampaign.campaign import configure_notes, locked
from gitcampaign.errors import CampaignError

PLACEHOLDER_OP = 'OP = "__OP__"'
PLACEHOLDER_BACKEND = 'BACKEND = "__BACKEND__"'


@dataclass
class PrepareResult:
    environment: dict[str, object]
    actions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def template_text(name: str) -> str:
    return resources.files("gitcampaign.templates").joinpath(name).read_text()


def harness_copy(op: str, backend: str) -> bytes:
    """The template with its op and backend set: the copy refuses to run with placeholders left in."""
    text = template_text(C.HARNESS_FILE)
    for placeholder in (PLACEHOLDER_OP, PLACEHOLDER_BACKEND):
        if text.count(placeholder) != 1:
            raise CampaignError(f"the harness template lacks the line {placeholder}", "reinstall gitcampaign")
    text = text.replace(PLACEHOLDER_OP, f'OP = "{op}"').replace(PLACEHOLDER_BACKEND, f'BACKEND = "{backend}"')
    return text.encode()


def prepare(repo_path: Path, campaign_name: str | None, install_hooks: bool = True) -> PrepareResult:
    with locked(repo_path, campaign_name, clean_for="prepare the campaign") as campaign:
        repo = campaign.repo
        manifest = campaign.manifest()
        result = PrepareResult(environment=envinfo.fingerprint())
        result.environment["git_version"] = g.git_version()
        folder = C.campaign_dir(manifest.name)
        files: dict[str, bytes] = {}
        if manifest.quick_command.startswith(f"python {folder}/{C.HARNESS_FILE}"):
            files[f"{folder}/{C.HARNESS_FILE}"] = harness_copy(manifest.target_op, manifest.target_backend)
        if manifest.probe_command.startswith(f"python {folder}/train_probe.py"):
            files[f"{folder}/train_probe.py"] = template_text("train_probe.py").encode()
        head = campaign.accepted_head()
        changed = {path: body for path, body in files.items() if g.read_file_at(repo, head, path) != body}
        if changed and manifest.csv_header is not None:
            raise CampaignError(
                "the campaign already has a baseline; its harness is frozen and prepare will not replace it",
                "start a new campaign to use a newer harness",
            )
        if changed:
            approved = trust.pending(campaign) is None
            g.checkout(repo, campaign.main_branch)
            g.commit_files(
                repo,
                campaign.main_branch,
                changed,
                f"campaign {manifest.name}: prepare environment\n\nCopies the quick harness and the training probe.\n",
            )
            result.actions += [f"copied {path}" for path in sorted(changed)]
            if approved:  # the files are this tool's own copies: an approved campaign stays approved
                trust.approve(campaign)
        configure_notes(repo)
        result.actions.append(f"notes.displayRef and notes.rewriteRef set to {C.NOTES_GLOB}")
        if install_hooks:
            result.actions += hook_install.install_hooks(g.root(repo))
        return result
