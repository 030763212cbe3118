"""A campaign as git holds it: which one is meant, its manifest, its rounds and their lineage.

Reading the lineage costs a fixed number of git calls whatever the number of rounds (refs in one
`for-each-ref`, notes in one `notes list` plus the object database's batch reader).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import safe_yaml, verdict
from gitcampaign.errors import CampaignError, CampaignWarning
from gitcampaign.manifest import COMMAND_FIELDS, Manifest, frozen_changes, parse_manifest
from gitcampaign.refs import HEADS, MAX_ROUND, CampaignRef, RefKind
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import ACCEPTED, Phase, Status, escape_not_utf8, hypothesis_of

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

MAX_NAME = 64  # the name is a path component of refs and lock files; keep it well under NAME_MAX


def check_name(name: str, repo: Repo | None = None) -> str:
    """A name git accepts in `refs/heads/campaign/NAME/main`, that fits a file name, and whose refs
    no existing branch blocks (refs are paths: branch `campaign/NAME` forbids `campaign/NAME/main`)."""
    hint = f"use 1-{MAX_NAME} letters, digits, '.', '_', '-' (not '..', not ending in '.lock' or '.')"
    if len(name) > MAX_NAME or not _NAME.fullmatch(name) or ".." in name or name.endswith((".lock", ".")):
        raise CampaignError(f"campaign name {name!r} is not usable in a ref", hint)
    if repo is not None:
        for blocking in (CampaignRef.branches_prefix(), CampaignRef.branches_prefix(name)):
            branch = blocking[len(HEADS) : -1]
            if g.rev(repo, blocking[:-1], peel="") is not None:
                raise CampaignError(
                    f"branch {branch} exists, so {CampaignRef.main(name).branch} cannot be"
                    " created (a branch name cannot also be a folder of branch names)",
                    f"pick another campaign name, or rename that branch (`git branch -m {branch} NEW`)",
                )
    return name


def campaigns(repo: Repo) -> list[str]:
    parsed = (CampaignRef.from_ref(ref) for ref in g.refs_under(repo, CampaignRef.branches_prefix()))
    return sorted(ref.campaign for ref in parsed if ref is not None and ref.kind == RefKind.MAIN)


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
    owner = CampaignRef.owner(branch) if branch else None
    if owner in known:
        return owner
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
    status: Status
    commit: str | None
    hypothesis: str
    docs: list[VerdictDoc] = field(default_factory=list)
    damage: str = ""  # DAMAGED: why the verdict note on `commit` decides nothing

    @property
    def decision(self) -> VerdictDoc | None:
        return verdict.standing(self.docs)


@dataclass
class Campaign:
    repo: Repo
    name: str

    @property
    def main_branch(self) -> str:
        return CampaignRef.main(self.name).branch

    @property
    def main_ref(self) -> str:
        return str(CampaignRef.main(self.name))

    def leave_for_main(self) -> None:
        """Check out the campaign's main where HEAD is on one of the campaign's branches (a round
        branch is about to be reset or deleted under it, or the next round opens from main); HEAD
        anywhere else, the project's own branch or a detached HEAD, stays where the user has it."""
        current = g.current_branch(self.repo)
        if current is not None and CampaignRef.owner(current) == self.name:
            g.checkout(self.repo, self.main_branch)

    def round_branch(self, number: int) -> str:
        return CampaignRef.round_branch(self.name, number).branch

    def round_ref(self, number: int) -> str:
        return str(CampaignRef.round_branch(self.name, number))

    def rejected_ref(self, number: int) -> str:
        return str(CampaignRef.rejected(self.name, number))

    def accepted_head(self) -> str:
        head = g.rev(self.repo, self.main_ref)
        if head is None:
            raise CampaignError(
                f"campaign {self.name} has no branch {self.main_branch}", "run `git campaign init`"
            )
        return head

    def reported(self) -> bool:
        """The accepted head is this campaign's `report` commit (a later round moves the head on)."""
        return any(
            doc.phase == Phase.REPORT and doc.campaign == self.name
            for doc in verdict.read(self.repo, self.accepted_head())
        )

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

    def manifest_command(self, key: str) -> str:
        """One command of the manifest as the accepted line has it, read without the whole
        manifest's validation (the commit hooks run while a campaign is still being set up); a
        round cannot loosen its own gate by editing the manifest."""
        value = self.manifest_fields().get(key) or ""
        if not isinstance(value, str):
            path = f"{C.campaign_dir(self.name)}/{C.MANIFEST_FILE}"
            raise CampaignError(f"{path}: {key} must be a shell command string", f"set {key} in the manifest")
        return value

    def manifest_fields(self) -> dict[str, object]:
        """The manifest's fields as the accepted line has them, without the whole validation."""
        main = self.main_branch
        path = f"{C.campaign_dir(self.name)}/{C.MANIFEST_FILE}"
        content = g.read_file_at(self.repo, main, path) if g.rev(self.repo, main) else None
        if content is None:
            raise CampaignError(
                f"{path} is not on {main}, so the round's gates cannot run",
                f"run `git campaign init {self.name} ...` first",
            )
        try:
            fields = safe_yaml.load(content)
        except safe_yaml.UnsafeYAML as exc:
            raise CampaignError(
                f"{path} on {main} is not read: {exc}", "repair the manifest on the campaign's main"
            ) from exc
        if not isinstance(fields, dict):
            raise CampaignError(
                f"{path} on {main} is not a mapping", "repair the manifest on the campaign's main"
            )
        return fields

    def baseline_commit(self) -> str | None:
        """The accepted-line commit this campaign's baseline recorded. Its own baseline verdict
        marks it, not any full-validation note: a campaign started on another's accepted line (a
        project whose main took that campaign's rounds) has the other's baseline in its history."""
        candidates = {
            commit: docs
            for commit, docs in self.verdicts().items()
            if any(d.phase == Phase.BASELINE for d in docs)
        }
        facts = verdict.commit_facts(self.repo, list(candidates))
        baselines = {  # a baseline document counts only where git's records back it (as in `lineage`)
            commit
            for commit, docs in candidates.items()
            if any(
                d.phase == Phase.BASELINE and verdict.inconsistency(commit, d, facts.get(commit)) is None
                for d in docs
            )
        }
        chain = g.first_parent_chain(self.repo, self.accepted_head())
        return next((commit for commit in chain if commit in baselines), None)

    def require_baseline(self) -> Manifest:
        """The manifest, once the records every decision compares against stand: the baseline (its
        verdict note included), the frozen fields, and every round's verdict (`require_intact`)."""
        manifest = self.manifest()
        if manifest.csv_header is None or manifest.noise_floor is None:
            raise CampaignError(f"campaign {self.name} has no baseline yet", "run `git campaign baseline`")
        self.require_intact()
        base = self.baseline_commit()
        assert base is not None  # require_intact refused a baseline without its verdict
        changed = frozen_changes(self.manifest(base), manifest)
        if changed:
            commands = [name for name in changed if name in COMMAND_FIELDS]
            raise CampaignError(
                f"{manifest.path}: {', '.join(changed)} changed by hand since the baseline ({base[:12]});"
                " decisions compare against what the baseline froze"
                + (
                    " (the commands are frozen with the harness: every decision so far ran them)"
                    if commands
                    else ""
                ),
                f"restore them: `git checkout {base[:12]} -- {manifest.path}` and commit on {self.main_branch};"
                " for another target or other commands, start a new campaign, a new baseline: land the accepted"
                f" rounds on your branch (`git merge --ff-only {self.main_branch}`), then `git campaign init"
                f" {self.name}-2 ...` there",
            )
        return manifest

    def _numbered(self, prefix: str, kind: RefKind) -> dict[int, str]:
        """{N: commit} for this campaign's refs of `kind` under `prefix`."""
        found = {}
        for name, sha in g.refs_under(self.repo, prefix).items():
            ref = CampaignRef.from_ref(name)
            if ref is not None and ref.kind == kind and ref.campaign == self.name and ref.round is not None:
                found[ref.round] = sha
        return found

    def round_branches(self) -> dict[int, str]:
        return self._numbered(CampaignRef.branches_prefix(self.name), RefKind.ROUND)

    def rejected_pins(self) -> dict[int, str]:
        return self._numbered(CampaignRef.rejected_prefix(self.name), RefKind.REJECTED)

    def heat_refs(self) -> dict[int, str]:
        """{N: the accepted head round N joined the heat on} (gitcampaign.heat reads them)."""
        return self._numbered(CampaignRef.heat_prefix(self.name), RefKind.HEAT)

    def next_round_number(self) -> int:
        used = set(self.round_branches()) | set(self.rejected_pins())
        number = max(used, default=1) + 1
        if number > MAX_ROUND:
            raise CampaignError(
                f"campaign {self.name} has a round {number - 1}: round numbers stop at {MAX_ROUND}",
                f"start a new campaign (`git campaign init {self.name}-2 ...`)",
            )
        return number

    def verdicts(self) -> dict[str, list[VerdictDoc]]:
        """{commit: verdict documents} for every annotated commit, read in bulk."""
        return self._read_verdicts()[0]

    def _read_verdicts(self) -> tuple[dict[str, list[VerdictDoc]], dict[str, list[str]]]:
        """({commit: this campaign's documents}, {commit: why documents of its note were skipped}).
        A skipped document cannot say whose it is, so every campaign warns about it."""
        documents, skipped = verdict.read_many(self.repo, g.note_blobs(self.repo, C.NOTES_VERDICT))
        for commit, problems in skipped.items():
            warnings.warn(
                CampaignWarning(
                    f"the {C.NOTES_VERDICT} note on {commit[:12]}: {'; '.join(problems)}; skipped"
                    f" (`git log -p {C.NOTES_VERDICT}` shows its earlier versions)"
                ),
                stacklevel=2,
            )
        result = {}
        for commit, docs in documents.items():
            mine = [doc for doc in docs if doc.campaign == self.name]
            if mine:
                result[commit] = mine
        return result, skipped

    def round_to_validate(self) -> Round:
        """The round to validate: the checked-out round branch, else the only unfinished one."""
        _, rounds = self.lineage()
        checked_out = CampaignRef.from_ref(g.current_branch(self.repo) or "")
        if (
            checked_out is not None
            and checked_out.kind == RefKind.ROUND
            and checked_out.campaign == self.name
        ):
            return next(r for r in rounds if r.number == checked_out.round)
        unfinished = [r for r in rounds if r.status in (Status.OPEN, Status.PENDING)]
        if not unfinished:
            raise CampaignError(
                f"campaign {self.name} has no round waiting for validation",
                'open one with `git campaign round -m "HYPOTHESIS"`, edit, `git commit`, then validate',
            )
        return unfinished[-1]

    def require_intact(self) -> None:
        """CampaignError naming the note and the command that restores it, where a record the
        campaign's decisions stand on cannot be read: the baseline's verdict, or the verdict of a
        round that the refs show decided (accepted onto the line) while its note decides nothing.
        Every command that decides or reports stops here with the same words, so no two of them
        send the user in circles."""
        if self.manifest().csv_header is not None and self.baseline_commit() is None:
            raise self._missing_baseline()
        _, rounds = self.lineage()
        damaged = [entry for entry in rounds if entry.status == Status.DAMAGED]
        if damaged:
            entry = damaged[0]
            assert entry.commit is not None
            raise CampaignError(
                f"round {entry.number}'s verdict ({C.NOTES_VERDICT} on {entry.commit[:12]}) decides nothing:"
                f" {entry.damage}; the round is on {self.main_branch}, but its record cannot be read",
                self._restore_hint(entry.commit, lambda docs: _decides_round(docs, entry.number)),
            )

    def integrity_error(self) -> CampaignError | None:
        """What `require_intact` would stop on, for the commands that only read (status, next)."""
        try:
            self.require_intact()
        except CampaignError as exc:
            return exc
        return None

    def _missing_baseline(self) -> CampaignError:
        commit = self._baseline_by_manifest()
        where = f" on {commit[:12]}" if commit else ""
        return CampaignError(
            f"campaign {self.name}'s baseline verdict ({C.NOTES_VERDICT}{where}) is missing or cannot be"
            " read: the frozen-field check and every comparison with the baseline need it",
            self._restore_hint(commit, lambda docs: any(doc.phase == Phase.BASELINE for doc in docs))
            if commit
            else f"fetch the campaign's notes from a clone that has them (`git campaign pull`), or"
            f" start a new campaign (`git campaign init {self.name}-2 ...`)",
        )

    def _baseline_by_manifest(self) -> str | None:
        """The accepted-line commit that froze the manifest (the baseline's own commit), found
        without its verdict: the first one whose manifest holds a CSV header."""
        path = f"{C.campaign_dir(self.name)}/{C.MANIFEST_FILE}"
        touching = self.repo.git.rev_list("--first-parent", "--reverse", self.accepted_head(), "--", path)
        for commit in touching.split():
            try:
                if self.manifest(commit).csv_header is not None:
                    return commit
            except CampaignError:
                continue
        return None

    def _restore_hint(self, commit: str, good: Callable[[list[VerdictDoc]], bool]) -> str:
        """The command that puts back the last version of `commit`'s verdict note (from the notes
        ref's own history) whose documents of this campaign git's records back and `good` accepts."""
        facts = verdict.commit_facts(self.repo, [commit]).get(commit)
        current = g.note_blobs(self.repo, C.NOTES_VERDICT).get(commit)
        for blob in g.note_history(self.repo, C.NOTES_VERDICT, commit):
            if blob == current:
                continue
            docs = [
                doc
                for doc in verdict.parse_stream(g.read_blob(self.repo, blob))
                if doc.campaign == self.name and verdict.inconsistency(commit, doc, facts) is None
            ]
            if good(docs):
                return (
                    f"restore its last good version from the notes history: `git notes --ref"
                    f" {C.NOTES_VERDICT} add -f -C {blob} {commit}` (`git log -p {C.NOTES_VERDICT}`"
                    " lists every version)"
                )
        return (
            f"no earlier version in `git log -p {C.NOTES_VERDICT}` records it: fetch the notes from a clone"
            f" that has them (`git campaign pull`), or remove the note (`git notes --ref {C.NOTES_VERDICT}"
            f" remove {commit}`) to go on without that record"
        )

    def lineage(self) -> tuple[list[VerdictDoc], list[Round]]:
        """(baseline documents, rounds by number) from refs and notes, without per-round git calls.

        A round is found through its refs (rejected pin, accepted line, round branch), never through
        whichever note mentions its number; and only verdict documents that git's records back
        count (`verdict.inconsistency`), so a copied, edited or hand-written note decides nothing.
        """
        head = self.accepted_head()
        accepted_line = set(g.first_parent_chain(self.repo, head))
        notes, skipped = self._read_verdicts()
        facts = verdict.commit_facts(self.repo, list(notes))
        absent = [commit[:12] for commit in notes if commit not in facts]
        if absent:
            warnings.warn(
                CampaignWarning(
                    f"{len(absent)} verdict note(s) of campaign {self.name} annotate no commit of this repository"
                    f" ({', '.join(absent[:5])}{' ...' if len(absent) > 5 else ''}: pruned by `git gc`, or"
                    f" not a commit); skipped. `git notes --ref {C.NOTES_VERDICT} prune` removes the notes of"
                    " objects that are gone"
                ),
                stacklevel=2,
            )
        valid: dict[str, list[VerdictDoc]] = {}
        refuted: dict[str, list[str]] = {}
        for commit, docs in notes.items():
            for doc in docs:
                reason = verdict.inconsistency(commit, doc, facts.get(commit))
                if reason is None:
                    valid.setdefault(commit, []).append(doc)
                elif doc.decision is not None and doc.commit == commit:  # a copy (amend, rebase) is no damage
                    refuted.setdefault(commit, []).append(f"its {doc.decision} document: {reason}")
        baseline = next(
            (
                docs
                for commit, docs in valid.items()
                if commit in accepted_line and docs[0].phase == Phase.BASELINE
            ),
            [],
        )
        by_round: dict[int, dict[str, list[VerdictDoc]]] = {}
        for commit, docs in valid.items():
            number = docs[-1].round
            if number is not None and number >= 2:
                by_round.setdefault(number, {})[commit] = docs
        branches, pins = self.round_branches(), self.rejected_pins()
        first_on: dict[str, int] = {}  # a round branch's tip -> the first round on it (its owner)
        for number in sorted(branches):
            first_on.setdefault(branches[number], number)
        rounds = []
        for number in sorted(set(branches) | set(pins) | set(by_round)):
            noted = by_round.get(number, {})
            tip, pin = branches.get(number), pins.get(number)
            accepted = [c for c, docs in noted.items() if c in accepted_line and _accepted(docs)]
            unapplied = [
                c for c, docs in noted.items() if _unapplied(c, docs, head, c in accepted_line, pin, tip)
            ]
            round_commit: str | None
            status: Status
            damage: list[str] = []
            if accepted and accepted[0] != pin:
                status, round_commit = Status.ACCEPTED, accepted[0]
            elif unapplied:
                status, round_commit = Status.PENDING, unapplied[0]
            elif pin is not None:
                status, round_commit = Status.REJECTED, pin
            elif tip is not None and tip not in accepted_line:
                status, round_commit = Status.OPEN, tip
            elif tip is not None:
                # A tip on the accepted line is where an empty round started, unless that commit is
                # the round's own and its note is damaged: then the round was decided, and no
                # document shows it (a hand edit, a broken pull), which must not read as "empty".
                if first_on[tip] == number and tip not in valid:
                    damage = skipped.get(tip) or refuted.get(tip) or []
                if damage:
                    status, round_commit = Status.DAMAGED, tip
                else:
                    status, round_commit = Status.EMPTY, None
            else:
                continue
            docs = noted.get(round_commit, []) if round_commit else []
            decision = verdict.standing(docs)
            hypothesis = (decision.hypothesis or "") if decision else ""
            if not hypothesis:
                hypothesis = g.config_get(self.repo, f"branch.{self.round_branch(number)}.description") or ""
            if not hypothesis and round_commit:  # a branch description stays in its clone; a message travels
                hypothesis = hypothesis_of(g.commit_message(self.repo, round_commit))
            # A description set by hand or a message committed past the hooks may hold bytes that
            # are not UTF-8: carried as escapes, so the verdict and the report can hold them.
            hypothesis = escape_not_utf8(hypothesis.strip())
            rounds.append(Round(number, status, round_commit, hypothesis, docs, "; ".join(damage)))
        return baseline, rounds


def _decides_round(docs: list[VerdictDoc], number: int) -> bool:
    decision = verdict.standing([doc for doc in docs if doc.round == number])
    return decision is not None and decision.decision in ACCEPTED


def _accepted(docs: list[VerdictDoc]) -> bool:
    decision = verdict.standing(docs)
    return decision is not None and decision.decision in ACCEPTED


def _unapplied(
    commit: str, docs: list[VerdictDoc], head: str, on_line: bool, pin: str | None, tip: str | None
) -> bool:
    """A noted decision the refs do not show yet: what a killed validate, accept or rollback left."""
    if not _applicable(docs, head):
        return False
    if on_line:  # only a rollback of the accepted head can be noted on the accepted line
        # ... or a supersede killed before it moved main back, which only the pull finishes.
        return commit == head and not _accepted(docs) and not verdict.superseded(verdict.standing(docs))
    # Pinned means rejected, unless the round branch still holds it (not reset yet) or a manual
    # accept of the rejected round was noted (the pin is not dropped yet).
    return commit != pin or commit == tip or _accepted(docs)


def _applicable(docs: list[VerdictDoc], accepted_head: str) -> bool:
    """A noted decision that can still be applied: a rejection always, an acceptance only onto the
    incumbent it was measured against (else it is stale, and the round must be measured again)."""
    decision = verdict.standing(docs)
    if decision is None:
        return False
    return decision.decision not in ACCEPTED or decision.incumbent == accepted_head


@contextmanager
def locked(repo_path: Path, name: str | None, clean_for: str | None = None) -> Iterator[Campaign]:
    """The preamble of every command that changes a campaign: open the repository, finish what a
    killed command left (`git.recover`), resolve the campaign, hold its lock, and, when the command
    checks out or commits (`clean_for` says what it does, for the error), require a clean work tree."""
    repo = g.open_repo(repo_path)
    g.recover(repo)
    campaign = Campaign(repo, resolve(repo, name))
    with g.campaign_lock(repo, campaign.name):
        if clean_for is not None:
            g.require_clean(repo, clean_for)
        yield campaign


def opened(repo_path: Path, name: str | None) -> Campaign:
    """The campaign a read-only command looks at. No lock (reading refs and notes is atomic) and
    no recovery: what a killed command left stays for a command that changes the campaign, and
    `git.unfinished` reports it."""
    repo = g.open_repo(repo_path)
    return Campaign(repo, resolve(repo, name))


def configure_notes(repo: Repo) -> None:
    """Plain `git log` shows the campaign notes, and amend/rebase carry them along."""
    g.config_add_once(repo, "notes.displayRef", C.NOTES_GLOB)
    g.config_add_once(repo, "notes.rewriteRef", C.NOTES_GLOB)
    g.config_set(repo, "notes.rewrite.amend", "true")
    g.config_set(repo, "notes.rewrite.rebase", "true")


# -- the one-commit rule: a round is exactly one commit on top of the accepted head it started from --


def check_one_commit(campaign: Campaign, number: int, commit: str | None, incumbent: str) -> str:
    """The round's commit, or CampaignError when the round is not one commit on `incumbent`."""
    branch = campaign.round_branch(number)
    if commit is None or commit == incumbent:
        raise CampaignError(f"{branch} has no commit yet", "make the one change, `git commit`, then validate")
    parent = g.parent(campaign.repo, commit)
    if parent != incumbent:
        if g.is_ancestor(campaign.repo, incumbent, commit):
            raise CampaignError(
                f"{branch} holds {g.count_commits(campaign.repo, incumbent, commit)} commits: a round is one change",
                _squash(campaign),
            )
        raise CampaignError(
            f"{branch} does not start from the accepted head {incumbent[:12]} (main moved since the round began)",
            f"rebase it: git rebase {campaign.main_branch} {branch}",
        )
    return commit


def check_next_commit(campaign: Campaign, number: int, amending: bool) -> None:
    """Whether the commit being made on round `number`'s checked-out branch keeps it at one commit
    (an amend of its one commit does); CampaignError when it would not."""
    repo, main, branch = campaign.repo, campaign.main_branch, campaign.round_branch(number)
    if g.rev(repo, main) is None:
        raise CampaignError(
            f"{main} does not exist, so {branch} has no accepted line to sit on",
            "run `git campaign init` first",
        )
    ahead = g.count_commits(repo, main, "HEAD") if g.rev(repo, "HEAD") else 0
    if ahead == 0 or (ahead == 1 and amending):
        return
    if ahead == 1:
        raise CampaignError(
            f"{branch} already has its one commit: a round is exactly one commit on top of {main}",
            "fold this change into it with `git commit --amend`",
        )
    raise CampaignError(
        f"{branch} is {ahead} commits ahead of {main}; a round is exactly one commit", _squash(campaign)
    )


def _squash(campaign: Campaign) -> str:
    return f"squash them: git reset --soft {campaign.main_branch} && git commit"


# -- applying a noted decision -------------------------------------------------------------------------


def apply_decision(
    campaign: Campaign, number: int, commit: str, incumbent: str, decision: str, why: str = ""
) -> None:
    """Move refs for a noted decision; idempotent, so an interrupted run is finished by the next one.

    ACCEPT: drop a rejection pin (a manual accept of a rejected round), then fast-forward main, but
    only from the incumbent the round was measured against: if main moved, the decision is stale
    and this says so (never ACCEPT over an unmoved main). REJECT: pin the commit first (so it is
    never lost), then reset the round branch, or, for the accepted head, add a commit restoring the
    tree before it (the accepted line is never rewritten).
    """
    repo = campaign.repo
    round_ref = campaign.round_ref(number)
    pin = campaign.rejected_ref(number)
    with g.repo_lock(repo):
        main = g.rev(repo, campaign.main_ref)
        if decision in ACCEPTED:
            if main not in (incumbent, commit):
                raise stale_decision(campaign, number, incumbent, main)
            if g.rev(repo, pin) == commit:
                g.delete_ref(repo, pin, commit)
                g.fault_point("apply:unpinned")
            if g.rev(repo, round_ref) == incumbent:
                g.update_ref(repo, round_ref, commit, incumbent, f"campaign: accept round {number}")
            if main == incumbent:
                g.move_branch(
                    repo, campaign.main_branch, commit, incumbent, f"campaign: accept round {number}"
                )
            campaign.leave_for_main()
            return
        campaign.leave_for_main()
        if g.rev(repo, pin) is None:
            g.update_ref(repo, pin, commit, None, f"campaign: pin rejected round {number}")
        g.fault_point("apply:pinned")
        # What a rejection restores is the commit's own parent, whatever a document claims.
        parent = g.parent(repo, commit) or incumbent
        if main == commit:
            message = f"campaign {campaign.name}: roll back round {number}\n\n{why or 'manual rollback'}\n"
            revert = g.commit_tree(repo, g.tree_of(repo, parent), commit, message)
            g.move_branch(repo, campaign.main_branch, revert, commit, f"campaign: roll back round {number}")
        elif g.rev(repo, round_ref) == commit:
            g.update_ref(repo, round_ref, parent, commit, f"campaign: reset rejected round {number}")


def stale_decision(campaign: Campaign, number: int, incumbent: str, main: str | None) -> CampaignError:
    branch = campaign.round_branch(number)
    return CampaignError(
        f"{campaign.main_branch} moved to {str(main)[:12]} while round {number} was measured against "
        f"{incumbent[:12]}: the measurement no longer applies and nothing was moved",
        f"rebase the round onto the new head (`git rebase {campaign.main_branch} {branch}`), then "
        "`git campaign validate` measures it again",
    )
