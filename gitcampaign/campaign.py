"""A campaign as git holds it: which one is meant, its manifest, its rounds and their lineage.

Reading the lineage costs a fixed number of git calls whatever the number of rounds (refs in one
`for-each-ref`, notes in one `notes list` plus the object database's batch reader).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import Manifest, parse_manifest

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ROUND = re.compile(r"round-(\d+)")

STATUS_BASELINE = "baseline"
STATUS_ACCEPTED = "accepted"
STATUS_REJECTED = "rejected"
STATUS_OPEN = "open"  # a round branch with its commit, not validated yet
STATUS_EMPTY = "empty"  # a round branch without its commit yet
STATUS_PENDING = "pending"  # decided and noted, refs not moved yet (an interrupted validate)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise CampaignError(
            f"campaign name {name!r} is not usable in a ref", "use letters, digits, '.', '_', '-'"
        )
    return name


def campaigns(repo: Repo) -> list[str]:
    names = []
    for ref in g.refs_under(repo, "refs/heads/campaign/"):
        parts = ref.split("/")
        if len(parts) == 5 and parts[4] == "main":
            names.append(parts[3])
    return sorted(names)


def resolve(repo: Repo, name: str | None) -> str:
    """The campaign meant: --campaign, else the one of the checked-out branch, else the only one."""
    known = campaigns(repo)
    if name:
        if name not in known:
            raise CampaignError(
                f"unknown campaign {name!r}" + (f" (known: {', '.join(known)})" if known else ""),
                "start it with `git campaign init NAME ...`, or pick one with --campaign",
            )
        return name
    branch = g.current_branch(repo)
    if branch and branch.startswith("campaign/"):
        parts = branch.split("/")
        if len(parts) == 3 and parts[1] in known:
            return parts[1]
    if len(known) == 1:
        return known[0]
    if not known:
        raise CampaignError("this repository has no campaign", "start one with `git campaign init NAME ...`")
    where = "HEAD is detached" if branch is None else f"branch {branch} belongs to no campaign"
    raise CampaignError(
        f"{where} and there are several campaigns ({', '.join(known)})",
        "name one with --campaign NAME, or `git checkout campaign/NAME/main`",
    )


@dataclass
class Round:
    number: int
    status: str
    commit: str | None
    hypothesis: str
    docs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def decision(self) -> dict[str, Any] | None:
        return verdict.standing(self.docs)


@dataclass
class Campaign:
    repo: Repo
    name: str

    @property
    def main_branch(self) -> str:
        return C.main_branch(self.name)

    @property
    def main_ref(self) -> str:
        return f"refs/heads/{self.main_branch}"

    def round_branch(self, number: int) -> str:
        return C.round_branch(self.name, number)

    def accepted_head(self) -> str:
        head = g.rev(self.repo, self.main_ref)
        if head is None:
            raise CampaignError(
                f"campaign {self.name} has no branch {self.main_branch}", "run `git campaign init`"
            )
        return head

    def manifest(self, commit: str | None = None) -> Manifest:
        """The manifest as committed on the accepted line (never the work tree's copy)."""
        at = commit or self.accepted_head()
        path = f"{C.campaign_dir(self.name)}/{C.MANIFEST_FILE}"
        raw = g.read_file_at(self.repo, at, path)
        if raw is None:
            raise CampaignError(
                f"{path} is missing at {at[:12]}", f"restore it: git checkout {at[:12]} -- {path}"
            )
        return parse_manifest(raw, path)

    def require_baseline(self) -> Manifest:
        manifest = self.manifest()
        if manifest.csv_header is None or manifest.noise_floor is None:
            raise CampaignError(f"campaign {self.name} has no baseline yet", "run `git campaign baseline`")
        return manifest

    def _numbered(self, prefix: str) -> dict[int, str]:
        """{N: commit} for the refs `prefix` + `round-N`."""
        found = {}
        for ref, sha in g.refs_under(self.repo, prefix).items():
            match = _ROUND.fullmatch(ref[len(prefix) :])
            if match:
                found[int(match.group(1))] = sha
        return found

    def round_branches(self) -> dict[int, str]:
        return self._numbered(f"refs/heads/campaign/{self.name}/")

    def rejected_pins(self) -> dict[int, str]:
        return self._numbered(f"refs/campaign/{self.name}/rejected/")

    def next_round_number(self) -> int:
        used = set(self.round_branches()) | set(self.rejected_pins())
        return max(used, default=1) + 1

    def verdicts(self) -> dict[str, list[dict[str, Any]]]:
        """{commit: verdict documents} for every annotated commit, read in bulk."""
        documents = verdict.read_many(self.repo, g.note_blobs(self.repo, C.NOTES_VERDICT))
        result = {}
        for commit, docs in documents.items():
            mine = [doc for doc in docs if doc.get("campaign") == self.name]
            if mine:
                result[commit] = mine
        return result

    def lineage(self) -> tuple[list[dict[str, Any]], list[Round]]:
        """(baseline documents, rounds by number) from refs and notes, without per-round git calls."""
        accepted_line = set(g.first_parent_chain(self.repo, self.accepted_head()))
        notes = self.verdicts()
        baseline = next(
            (
                docs
                for commit, docs in notes.items()
                if commit in accepted_line and docs[0].get("phase") == "BASELINE"
            ),
            [],
        )
        by_round: dict[int, tuple[str, list[dict[str, Any]]]] = {}
        for commit, docs in notes.items():
            number = docs[-1].get("round")
            if isinstance(number, int) and number >= 2:
                by_round[number] = (commit, docs)
        branches, pins = self.round_branches(), self.rejected_pins()
        rounds = []
        for number in sorted(set(branches) | set(pins) | set(by_round)):
            noted_commit, docs = by_round.get(number, (None, []))
            tip = branches.get(number)
            decision = verdict.standing(docs)
            round_commit: str | None
            if number in pins:
                status, round_commit = STATUS_REJECTED, pins[number]
                docs = notes.get(round_commit, docs)
            elif decision and decision["decision"] in C.ACCEPTED:
                status = STATUS_ACCEPTED if noted_commit in accepted_line else STATUS_PENDING
                round_commit = noted_commit
            elif decision:
                status, round_commit = STATUS_PENDING, noted_commit
            elif tip is not None and tip not in accepted_line:
                status, round_commit = STATUS_OPEN, tip
            else:
                status, round_commit = STATUS_EMPTY, None
            hypothesis = str(decision.get("hypothesis", "")) if decision else ""
            if not hypothesis:
                hypothesis = g.config_get(self.repo, f"branch.{self.round_branch(number)}.description") or ""
            rounds.append(Round(number, status, round_commit, hypothesis.strip(), docs))
        return baseline, rounds
