"""What a campaign is in git, and how two copies of it are compared and merged (push, pull, import).

A campaign is its branches (`campaign/NAME/*`), its rejected pins (`refs/campaign/NAME/rejected/*`)
and its notes refs (bench, full, verdict, the environment note that `calibrate` writes and the
profile note that `analyze` writes). A remote's copy is fetched into `refs/campaign-remote/REMOTE/...` (a bundle
is fetched the same way), so every decision below is local: ancestry by exit code, never by stderr.

Rules that keep data from being lost:
- a branch only fast-forwards; the one exception is a round branch reset by a REJECT, recognised by
  its pin (the pinned commit was the round, the reset value is its parent);
- a pin is written once: two different pins for one round are a conflict, never a replacement;
- notes refs merge: a bench/full CSV is written once per commit (on a clash the side already
  published wins and the other stays in the notes history), verdict, environment and profile
  streams keep every document of both sides.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import safe_yaml, verdict
from gitcampaign.campaign import Campaign, campaigns, configure_notes
from gitcampaign.errors import CampaignError
from gitcampaign.refs import HEADS, IMPORT_LABEL, TRACKING, CampaignRef, RefKind
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import ACCEPTED, Decision, Phase

NOTES_REFS = (C.NOTES_BENCH, C.NOTES_FULL, C.NOTES_VERDICT, C.NOTES_ENVIRONMENT, C.NOTES_PROFILE)
CSV_NOTES = (C.NOTES_BENCH, C.NOTES_FULL)

SAME, AHEAD, BEHIND, DIVERGED = "same", "ahead", "behind", "diverged"

_DOC_START = re.compile(rb"(?m)^(?=---$)")


def campaign_refs(repo: Repo, name: str) -> dict[str, str]:
    """{ref: object} of everything the campaign is, in this repository."""
    refs = g.refs_under(repo, CampaignRef.branches_prefix(name))
    refs.update(g.refs_under(repo, CampaignRef.rejected_prefix(name)))
    for notes_ref in NOTES_REFS:
        sha = g.rev(repo, notes_ref, peel="")
        if sha is not None:
            refs[notes_ref] = sha
    return refs


def refspecs(name: str, source: str) -> list[str]:
    """Fetch refspecs mirroring a remote's (or a bundle's) campaign into the tracking namespace."""
    base = f"{TRACKING}/{source}/"
    return [f"+{prefix}*:{base}{prefix[len('refs/') :]}*" for prefix in _mirrored(name)]


def _mirrored(name: str) -> tuple[str, ...]:
    """The ref prefixes that make up the campaign `name` (see the module docstring)."""
    return (CampaignRef.branches_prefix(name), CampaignRef.rejected_prefix(name), "refs/notes/campaign/")


def tracked_refs(repo: Repo, name: str, source: str) -> dict[str, str]:
    """{ref as named on the other side: object} as of the last fetch from `source`."""
    prefix = f"{TRACKING}/{source}/"
    found = {}
    for mirrored in _mirrored(name):
        for ref, sha in g.refs_under(repo, prefix + mirrored[len("refs/") :]).items():
            found["refs/" + ref[len(prefix) :]] = sha
    return {ref: sha for ref, sha in found.items() if not ref.startswith("refs/notes/") or ref in NOTES_REFS}


def fetch(repo: Repo, name: str, source: str, label: str) -> dict[str, str]:
    g.fetch(repo, source, refspecs(name, label))
    return tracked_refs(repo, name, label)


def tracking_label(source: str) -> str:
    """A remote's name as is; a URL or path made fit for a ref name."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", source).strip("_") or "remote"


def drop_tracking(repo: Repo, label: str) -> None:
    for ref, sha in g.refs_under(repo, f"{TRACKING}/{label}/").items():
        g.delete_ref(repo, ref, sha)


def import_label() -> str:
    """The private tracking namespace of one import: its process and thread, so that a killed
    import's refs are recognised (`git.stale_imports`) and two imports never share one."""
    return f"{IMPORT_LABEL}{os.getpid()}-{threading.get_ident()}"


def default_remote(repo: Repo, remote: str | None) -> str:
    known = g.remotes(repo)
    if remote:
        if remote not in known and "/" not in remote and ":" not in remote:
            raise CampaignError(
                f"no remote named {remote!r}" + (f" (known: {', '.join(known)})" if known else ""),
                f"add it: git remote add {remote} URL",
            )
        return remote
    if len(known) == 1:
        return known[0]
    if "origin" in known:
        return "origin"
    raise CampaignError(
        "no remote to use" + (f" (several: {', '.join(known)})" if known else ""),
        "name one: git campaign push REMOTE (or `git remote add origin URL`)",
    )


@dataclass
class Comparison:
    """Where each ref of the campaign stands, here against there."""

    states: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)

    def refs_in(self, state: str) -> list[str]:
        return [ref for ref, value in self.states.items() if value == state]


def compare(repo: Repo, local: dict[str, str], remote: dict[str, str]) -> Comparison:
    """Classify every ref: same, ahead (only we have news), behind (only they do), diverged."""
    result = Comparison()
    pins: dict[int, str] = {}
    for refs in (remote, local):
        for ref, sha in refs.items():
            parsed = CampaignRef.from_ref(ref)
            if parsed is not None and parsed.kind == RefKind.REJECTED and parsed.round is not None:
                pins.setdefault(parsed.round, sha)
    for ref in sorted(set(local) | set(remote)):
        ours, theirs = local.get(ref), remote.get(ref)
        parsed = CampaignRef.from_ref(ref)
        if parsed is not None and parsed.kind == RefKind.REJECTED and ours and theirs and ours != theirs:
            result.conflicts.append(
                f"round {parsed.round} was rejected on both sides as different commits "
                f"({ours[:12]} here, {theirs[:12]} there): two people opened the same round number"
            )
            result.states[ref] = DIVERGED
            continue
        is_round = parsed is not None and parsed.kind == RefKind.ROUND and parsed.round is not None
        pinned = pins.get(parsed.round) if is_round and parsed and parsed.round is not None else None
        result.states[ref] = _relation(repo, ours, theirs, pinned)
    return result


def _relation(repo: Repo, ours: str | None, theirs: str | None, pinned: str | None) -> str:
    if ours == theirs:
        return SAME
    if theirs is None:
        return AHEAD
    if ours is None:
        return BEHIND
    # A REJECT resets the round branch to the pinned commit's parent: the reset is the newer state.
    if pinned is not None and theirs == pinned and g.is_ancestor(repo, ours, pinned):
        return AHEAD
    if pinned is not None and ours == pinned and g.is_ancestor(repo, theirs, pinned):
        return BEHIND
    if g.is_ancestor(repo, theirs, ours):
        return AHEAD
    if g.is_ancestor(repo, ours, theirs):
        return BEHIND
    return DIVERGED


# -- notes merges -----------------------------------------------------------------------------------


def merge_notes(repo: Repo, notes_ref: str, ours: str, theirs: str, source: str) -> tuple[str, list[str]]:
    """A notes commit with both sides as parents; returns it and what the merge had to decide."""
    mine, other = g.notes_at(repo, ours), g.notes_at(repo, theirs)
    merged = {**mine, **other}
    decisions = []
    for target in sorted(set(mine) & set(other)):
        if mine[target] == other[target]:
            continue
        if notes_ref in CSV_NOTES:
            merged[target] = other[target]
            decisions.append(
                f"{notes_ref} of {target[:12]} differs between the two sides: kept {source}'s (written "
                f"first; a CSV note is never replaced); yours stays in the notes history ({ours[:12]})"
            )
        else:
            stream = merge_streams(g.read_blob(repo, mine[target]), g.read_blob(repo, other[target]))
            merged[target] = g.write_blob(repo, stream)
            if conflicting_decisions(verdict.parse_stream(stream)):
                decisions.append(
                    f"verdict of {target[:12]}: the two sides decided differently; both are kept "
                    "(see `git campaign show N`)"
                )
    tree = g.notes_tree(repo, merged)
    message = f"Notes merged by 'git campaign' from {source}\n"
    return g.commit_tree_parents(repo, tree, [ours, theirs], message), decisions


def split_documents(stream: bytes) -> list[bytes]:
    """The YAML documents of a verdict stream, each byte for byte (each starts at a `---` line)."""
    return [piece for piece in _DOC_START.split(stream) if piece]


def merge_streams(ours: bytes, theirs: bytes) -> bytes:
    """Both streams' documents, nothing dropped, nothing reformatted; the same bytes whichever side
    merges: the common prefix, then the documents only one side has, in the order they were written."""
    if ours.startswith(theirs):
        return ours
    if theirs.startswith(ours):
        return theirs
    mine, other = split_documents(ours), split_documents(theirs)
    common = 0
    while common < min(len(mine), len(other)) and mine[common] == other[common]:
        common += 1
    rest = sorted(set(mine[common:]) | set(other[common:]), key=lambda doc: (_written(doc), doc))
    return b"".join(mine[:common] + rest)


def _written(document: bytes) -> str:
    """When a document of any campaign note (verdict, environment, profile) was written."""
    try:
        parsed = safe_yaml.load(document)
    except safe_yaml.UnsafeYAML:
        return ""
    return str(parsed.get("written", "")) if isinstance(parsed, dict) else ""


def conflicting_decisions(docs: list[VerdictDoc]) -> list[VerdictDoc]:
    """The VALIDATE decisions of one round when they disagree (it was measured in two clones)."""
    validations = [doc for doc in docs if doc.phase == Phase.VALIDATE and doc.decision]
    return validations if len({doc.decision for doc in validations}) > 1 else []


def remote_standing(repo: Repo, name: str) -> dict[str, dict[str, list[str]]]:
    """{remote: {ahead/behind/diverged: refs}} against each remote as of its last push or pull."""
    local = campaign_refs(repo, name)
    standing = {}
    for remote in g.remotes(repo):
        theirs = tracked_refs(repo, name, tracking_label(remote))
        if not theirs:
            continue
        comparison = compare(repo, local, theirs)
        standing[remote] = {state: comparison.refs_in(state) for state in (AHEAD, BEHIND, DIVERGED)}
    return standing


def describe_standing(remote: str, states: dict[str, list[str]]) -> str:
    if not any(states.values()):
        return f"{remote}: in sync (as of the last fetch, push or pull)"
    parts = [f"{state} on {len(refs)} ref(s)" for state, refs in states.items() if refs]
    todo = "git campaign pull, then push" if states[DIVERGED] or states[BEHIND] else "git campaign push"
    return f"{remote}: {', '.join(parts)} (as of the last fetch, push or pull); next: {todo}"


# -- bringing the other side's copy in (pull, import) ---------------------------------------------


@dataclass
class SyncResult:
    campaign: str
    source: str
    updated: list[str] = field(default_factory=list)  # "REF OLD..NEW" for every ref moved here or there
    merges: list[str] = field(default_factory=list)  # what a notes merge had to decide
    waiting: list[str] = field(default_factory=list)  # refs the other side is ahead on (push only)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def integrate(
    repo: Repo, name: str, theirs: dict[str, str], source: str, supersede: bool = False
) -> SyncResult:
    """Bring the refs `theirs` (already fetched) into this clone without losing anything of ours."""
    ours = campaign_refs(repo, name)
    for notes_ref in NOTES_REFS:
        g.has_notes(repo, notes_ref)  # a broken notes ref of ours stops here, named, before any move
    not_notes = [ref for ref in NOTES_REFS if ref in theirs and g.rev(repo, theirs[ref]) is None]
    if not_notes:
        raise CampaignError(
            f"{source}'s {', '.join(not_notes)} is not a notes commit; nothing was changed",
            f"have {source}'s notes ref put back by whoever pushed it (`git reflog show` on their side)",
        )
    main_ref = str(CampaignRef.main(name))
    if main_ref in theirs:
        _require_manifest(repo, name, theirs[main_ref], source)
    comparison = compare(repo, ours, theirs)
    problems = list(comparison.conflicts)
    superseded: list[str] = []
    for ref in comparison.refs_in(DIVERGED):
        if ref == main_ref and supersede:
            superseded = _own_acceptances(repo, name, ours[ref], theirs[ref])
        elif ref == main_ref:
            problems.append(
                f"{CampaignRef.main(name).branch} diverged: {source} accepted "
                f"{g.count_commits(repo, ours[ref], theirs[ref])} commit(s) this clone does not have, and "
                f"this clone accepted {g.count_commits(repo, theirs[ref], ours[ref])} that {source} does not;"
                " the accepted line is linear and cannot be merged (`git campaign pull --supersede` keeps "
                f"{source}'s line and marks yours superseded, to re-run on top of it)"
            )
        elif ref.startswith(HEADS):
            problems.append(
                f"{ref[len(HEADS) :]} is {ours[ref][:12]} here and {theirs[ref][:12]} on {source}: "
                "two people opened the same round number"
            )
    if problems:
        raise CampaignError(
            f"cannot bring campaign {name} from {source}; nothing was changed:\n  " + "\n  ".join(problems),
            "settle it with whoever pushed: keep one side (delete or rename yours with `git branch -m`, "
            f"re-run your round on top of {source}'s accepted head), then pull again",
        )
    result = SyncResult(name, source)
    if superseded:
        result.merges += _supersede(repo, name, superseded, theirs, source)
        ours = campaign_refs(repo, name)
        comparison = compare(repo, ours, theirs)
    behind = comparison.refs_in(BEHIND)
    checked_out = g.head_ref_name(repo)  # refused before anything moves, not halfway
    if any(ref == checked_out for ref in behind):
        g.require_clean(repo, f"move the checked-out {checked_out} to {source}'s")
    for notes_ref in NOTES_REFS:  # notes first: a ref never points at a commit without its notes
        state = comparison.states.get(notes_ref)
        if state == BEHIND:
            _move(repo, notes_ref, theirs[notes_ref], ours.get(notes_ref), source, result)
        elif state == DIVERGED:
            merged, decisions = merge_notes(repo, notes_ref, ours[notes_ref], theirs[notes_ref], source)
            _move(repo, notes_ref, merged, ours[notes_ref], source, result)
            result.merges += decisions
    for ref in behind:
        if ref.startswith(CampaignRef.rejected_prefix(name)):
            _move(repo, ref, theirs[ref], None, source, result)
    for ref in behind:
        if ref.startswith(HEADS):
            branch = ref[len(HEADS) :]
            g.move_branch(repo, branch, theirs[ref], ours.get(ref), f"campaign: pull from {source}")
            result.updated.append(f"{ref} {_short(ours.get(ref))}..{theirs[ref][:12]}")
    if name in campaigns(repo):
        configure_notes(repo)
    return result


def _require_manifest(repo: Repo, name: str, main: str, source: str) -> None:
    """The other side's accepted line must carry the campaign's manifest, or every command here
    would stop on it once it arrived."""
    try:
        Campaign(repo, name).manifest(main)
    except CampaignError as exc:
        raise CampaignError(
            f"{source}'s {CampaignRef.main(name).branch} ({main[:12]}) is not a campaign's accepted line: {exc.message};"
            " nothing was changed",
            f"bring the campaign from a clone where `git campaign status --campaign {name}` works",
        ) from exc


def _own_acceptances(repo: Repo, name: str, ours: str, theirs: str) -> list[str]:
    """The accepted rounds on this clone's main since it forked from the other side's (oldest first);
    anything else there (a report, a rollback commit) cannot be superseded automatically."""
    commits = g.first_parents_since(repo, g.merge_base(repo, ours, theirs), ours)
    notes = Campaign(repo, name).verdicts()
    for commit in commits:
        standing = verdict.standing(notes.get(commit, []))
        # A superseded one is what a supersede interrupted before main moved back left: go on.
        if not standing or (standing.decision not in ACCEPTED and not verdict.superseded(standing)):
            raise CampaignError(
                f"{commit[:12]} on this clone's {CampaignRef.main(name).branch} is not an accepted round; "
                "only accepted rounds can be superseded; nothing was changed",
                f"look at it with `git show {commit[:12]}`, and settle the two lines by hand",
            )
    return commits


def _supersede(
    repo: Repo, name: str, commits: list[str], their_refs: dict[str, str], source: str
) -> list[str]:
    """Keep `source`'s accepted line: each of this clone's own acceptances gets a verdict document
    (REJECT, superseded) and a rejected pin, and main goes back to where the lines forked; it was
    never published, so no one else's history changes. The pull then fast-forwards main.

    A round whose number `source` also uses for another commit (both clones opened round N) is
    kept under the next free number, so that it stays in sight beside theirs (log, status,
    report), instead of a pin that the other round's refs hide."""
    campaign = Campaign(repo, name)
    main_ref = campaign.main_ref
    ours, theirs = campaign.accepted_head(), their_refs[main_ref]
    if g.head_ref_name(repo) == main_ref:
        g.require_clean(repo, "move the checked-out accepted line")
    notes = campaign.verdicts()
    fork = g.parent(repo, commits[0])
    assert fork is not None
    numbers_there = _round_numbers(their_refs)
    taken = numbers_there | _round_numbers(campaign_refs(repo, name))
    lines = []
    for commit in commits:
        standing = verdict.standing(notes[commit])
        assert standing is not None and standing.round is not None  # `_own_acceptances` checked it
        accepted_as = next(
            (doc.round for doc in reversed(notes[commit]) if doc.decision in ACCEPTED and doc.round),
            standing.round,
        )
        number, kept_as = standing.round, ""
        if not verdict.superseded(standing):  # else an interrupted supersede noted it already
            if (
                number in numbers_there
                and their_refs.get(str(CampaignRef.round_branch(name, number))) != commit
            ):
                number = max(taken) + 1
                taken.add(number)
                kept_as = f", kept as round {number} ({source}'s round {accepted_as} is another commit)"
            verdict.append(
                repo,
                commit,
                VerdictDoc(
                    campaign=name,
                    round=number,
                    phase=Phase.OVERRIDE,
                    hypothesis=standing.hypothesis or "",
                    decision=Decision.REJECT,
                    previous_decision=standing.decision,
                    reasons=[C.REASON_SUPERSEDED],
                    notes=[
                        f"{source} accepted other rounds on the same head ({theirs[:12]}); re-run it on top"
                        + kept_as
                    ],
                    commit=commit,
                    incumbent=theirs,
                    layout=verdict.SUPERSEDE_LAYOUT,
                ),
            )
        if g.rev(repo, str(CampaignRef.rejected(name, number))) is None:
            g.update_ref(
                repo, str(CampaignRef.rejected(name, number)), commit, None, "campaign: pin superseded round"
            )
        started_from = g.parent(repo, commit)
        if started_from and g.rev(repo, campaign.round_ref(accepted_as)) == commit:  # as a REJECT resets it
            g.move_branch(
                repo,
                campaign.round_branch(accepted_as),
                started_from,
                commit,
                f"campaign: reset superseded round {accepted_as}",
            )
        lines.append(
            f"round {accepted_as} ({commit[:12]}) superseded by {source}'s line{kept_as}; re-run it on"
            f' top: git campaign round -m "..." && git cherry-pick {commit[:12]}'
        )
    g.move_branch(repo, campaign.main_branch, fork, ours, f"campaign: superseded by {source}")
    return lines


def _round_numbers(refs: dict[str, str]) -> set[int]:
    """The round numbers that refs (branches, pins) of one side use."""
    parsed = (CampaignRef.from_ref(ref) for ref in refs)
    return {ref.round for ref in parsed if ref is not None and ref.round is not None}


def _move(repo: Repo, ref: str, new: str, old: str | None, source: str, result: SyncResult) -> None:
    g.update_ref(repo, ref, new, old, f"campaign: pull from {source}")
    result.updated.append(f"{ref} {_short(old)}..{new[:12]}")


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "(new)"
