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
from gitcampaign.manifest import Manifest, frozen_changes, parse_manifest

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ROUND = re.compile(r"round-(\d+)")

STATUS_BASELINE = "baseline"
STATUS_ACCEPTED = "accepted"
STATUS_REJECTED = "rejected"
STATUS_OPEN = "open"  # a round branch with its commit, not validated yet
STATUS_EMPTY = "empty"  # a round branch without its commit yet
STATUS_PENDING = "pending"  # decided and noted, refs not moved yet (an interrupted validate)


MAX_NAME = 64  # the name is a path component of refs and lock files; keep it well under NAME_MAX


def check_name(name: str, repo: Repo | None = None) -> str:
    """A name git accepts in `refs/heads/campaign/NAME/main`, that fits a file name, and whose refs
    no existing branch blocks (refs are paths: branch `campaign/NAME` forbids `campaign/NAME/main`)."""
    hint = f"use 1-{MAX_NAME} letters, digits, '.', '_', '-' (not '..', not ending in '.lock' or '.')"
    if len(name) > MAX_NAME or not _NAME.fullmatch(name) or ".." in name or name.endswith((".lock", ".")):
        raise CampaignError(f"campaign name {name!r} is not usable in a ref", hint)
    if repo is not None:
        for blocking in ("refs/heads/campaign", f"refs/heads/campaign/{name}"):
            if g.rev(repo, blocking, peel="") is not None:
                raise CampaignError(
                    f"branch {blocking[len('refs/heads/') :]} exists, so {C.main_branch(name)} cannot be"
                    " created (a branch name cannot also be a folder of branch names)",
                    f"pick another campaign name, or rename that branch (`git branch -m {blocking[11:]} NEW`)",
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
    """The campaign meant: --campaign, else the one of the checked-out branch, else the only one.

    Every command starts here, so this is where what a killed command left is finished first."""
    g.recover(repo)
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
        manifest = parse_manifest(raw, path)
        if manifest.name != self.name:
            raise CampaignError(
                f"{path}: name is {manifest.name!r}, but the file belongs to campaign {self.name!r}",
                f"set `name: {self.name}` back in {path} and commit it",
            )
        return manifest

    def baseline_commit(self) -> str | None:
        """The accepted-line commit the baseline recorded (the first one with a full-validation note)."""
        full = g.note_blobs(self.repo, C.NOTES_FULL)
        return next((c for c in g.first_parent_chain(self.repo, self.accepted_head()) if c in full), None)

    def require_baseline(self) -> Manifest:
        manifest = self.manifest()
        if manifest.csv_header is None or manifest.noise_floor is None:
            raise CampaignError(f"campaign {self.name} has no baseline yet", "run `git campaign baseline`")
        base = self.baseline_commit()
        changed = frozen_changes(self.manifest(base), manifest) if base else []
        if base and changed:
            raise CampaignError(
                f"{manifest.path}: {', '.join(changed)} changed by hand since the baseline ({base[:12]});"
                " decisions compare against what the baseline froze",
                f"restore them: `git checkout {base[:12]} -- {manifest.path}` and commit on {self.main_branch}"
                " (or start a new campaign for a new target)",
            )
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
        """(baseline documents, rounds by number) from refs and notes, without per-round git calls.

        A round is found through its refs (rejected pin, accepted line, round branch), never through
        whichever note mentions its number; and only verdict documents that git's records back
        count (`verdict.inconsistency`), so a copied, edited or hand-written note decides nothing.
        """
        head = self.accepted_head()
        accepted_line = set(g.first_parent_chain(self.repo, head))
        notes = self.verdicts()
        facts = verdict.commit_facts(self.repo, list(notes))
        valid = {
            commit: kept
            for commit, docs in notes.items()
            if (kept := [d for d in docs if verdict.inconsistency(commit, d, facts.get(commit)) is None])
        }
        baseline = next(
            (
                docs
                for commit, docs in valid.items()
                if commit in accepted_line and docs[0].get("phase") == verdict.PHASE_BASELINE
            ),
            [],
        )
        by_round: dict[int, dict[str, list[dict[str, Any]]]] = {}
        for commit, docs in valid.items():
            number = docs[-1].get("round")
            if isinstance(number, int) and number >= 2:
                by_round.setdefault(number, {})[commit] = docs
        branches, pins = self.round_branches(), self.rejected_pins()
        rounds = []
        for number in sorted(set(branches) | set(pins) | set(by_round)):
            noted = by_round.get(number, {})
            tip, pin = branches.get(number), pins.get(number)
            accepted = [c for c, docs in noted.items() if c in accepted_line and _accepted(docs)]
            unapplied = [
                c for c, docs in noted.items() if _unapplied(c, docs, head, c in accepted_line, pin, tip)
            ]
            round_commit: str | None
            if accepted and accepted[0] != pin:
                status, round_commit = STATUS_ACCEPTED, accepted[0]
            elif unapplied:
                status, round_commit = STATUS_PENDING, unapplied[0]
            elif pin is not None:
                status, round_commit = STATUS_REJECTED, pin
            elif tip is not None and tip not in accepted_line:
                status, round_commit = STATUS_OPEN, tip
            elif tip is not None:
                status, round_commit = STATUS_EMPTY, None
            else:
                continue
            docs = noted.get(round_commit, []) if round_commit else []
            decision = verdict.standing(docs)
            hypothesis = str(decision.get("hypothesis", "")) if decision else ""
            if not hypothesis:
                hypothesis = g.config_get(self.repo, f"branch.{self.round_branch(number)}.description") or ""
            rounds.append(Round(number, status, round_commit, hypothesis.strip(), docs))
        return baseline, rounds


def _accepted(docs: list[dict[str, Any]]) -> bool:
    decision = verdict.standing(docs)
    return decision is not None and decision["decision"] in C.ACCEPTED


def _unapplied(
    commit: str, docs: list[dict[str, Any]], head: str, on_line: bool, pin: str | None, tip: str | None
) -> bool:
    """A noted decision the refs do not show yet: what a killed validate, accept or rollback left."""
    if not _applicable(docs, head):
        return False
    if on_line:  # only a rollback of the accepted head can be noted on the accepted line
        return commit == head and not _accepted(docs)
    # Pinned means rejected, unless the round branch still holds it (not reset yet) or a manual
    # accept of the rejected round was noted (the pin is not dropped yet).
    return commit != pin or commit == tip or _accepted(docs)


def _applicable(docs: list[dict[str, Any]], accepted_head: str) -> bool:
    """A noted decision that can still be applied: a rejection always, an acceptance only onto the
    incumbent it was measured against (else it is stale, and the round must be measured again)."""
    decision = verdict.standing(docs)
    if decision is None:
        return False
    return decision["decision"] not in C.ACCEPTED or decision.get("incumbent") == accepted_head
