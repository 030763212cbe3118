"""What a campaign is in git, and how two copies of it are compared and merged (push, pull, import).

A campaign is its branches (`campaign/NAME/*`), its rejected pins (`refs/campaign/NAME/rejected/*`)
and the three notes refs. A remote's copy is fetched into `refs/campaign-remote/REMOTE/...` (a bundle
is fetched the same way), so every decision below is local: ancestry by exit code, never by stderr.

Rules that keep data from being lost:
- a branch only fast-forwards; the one exception is a round branch reset by a REJECT, recognised by
  its pin (the pinned commit was the round, the reset value is its parent);
- a pin is written once: two different pins for one round are a conflict, never a replacement;
- notes refs merge: a bench/full CSV is written once per commit (on a clash the side already
  published wins and the other stays in the notes history), verdict streams keep every document
  of both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.errors import CampaignError

TRACKING = "refs/campaign-remote"
NOTES_REFS = (C.NOTES_BENCH, C.NOTES_FULL, C.NOTES_VERDICT)
CSV_NOTES = (C.NOTES_BENCH, C.NOTES_FULL)

SAME, AHEAD, BEHIND, DIVERGED = "same", "ahead", "behind", "diverged"

_ROUND_REF = re.compile(r"refs/heads/campaign/[^/]+/round-(\d+)")
_PIN_REF = re.compile(r"refs/campaign/[^/]+/rejected/round-(\d+)")
_DOC_START = re.compile(rb"(?m)^(?=---$)")


def campaign_refs(repo: Repo, name: str) -> dict[str, str]:
    """{ref: object} of everything the campaign is, in this repository."""
    refs = g.refs_under(repo, f"refs/heads/campaign/{name}/")
    refs.update(g.refs_under(repo, f"refs/campaign/{name}/rejected/"))
    for notes_ref in NOTES_REFS:
        sha = g.rev(repo, notes_ref, peel="")
        if sha is not None:
            refs[notes_ref] = sha
    return refs


def refspecs(name: str, source: str) -> list[str]:
    """Fetch refspecs mirroring a remote's (or a bundle's) campaign into the tracking namespace."""
    base = f"{TRACKING}/{source}"
    return [
        f"+refs/heads/campaign/{name}/*:{base}/heads/campaign/{name}/*",
        f"+refs/campaign/{name}/rejected/*:{base}/campaign/{name}/rejected/*",
        f"+refs/notes/campaign/*:{base}/notes/campaign/*",
    ]


def tracked_refs(repo: Repo, name: str, source: str) -> dict[str, str]:
    """{ref as named on the other side: object} as of the last fetch from `source`."""
    prefix = f"{TRACKING}/{source}/"
    found = {}
    for sub in (f"heads/campaign/{name}/", f"campaign/{name}/rejected/", "notes/campaign/"):
        for ref, sha in g.refs_under(repo, prefix + sub).items():
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
            match = _PIN_REF.fullmatch(ref)
            if match:
                pins.setdefault(int(match.group(1)), sha)
    for ref in sorted(set(local) | set(remote)):
        ours, theirs = local.get(ref), remote.get(ref)
        pin = _PIN_REF.fullmatch(ref)
        if pin and ours and theirs and ours != theirs:
            result.conflicts.append(
                f"round {pin.group(1)} was rejected on both sides as different commits "
                f"({ours[:12]} here, {theirs[:12]} there): two people opened the same round number"
            )
            result.states[ref] = DIVERGED
            continue
        round_match = _ROUND_REF.fullmatch(ref)
        pinned = pins.get(int(round_match.group(1))) if round_match else None
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
    try:
        parsed = yaml.safe_load(document)
    except yaml.YAMLError:
        return ""
    return str(parsed.get("written", "")) if isinstance(parsed, dict) else ""


def conflicting_decisions(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The VALIDATE decisions of one round when they disagree (it was measured in two clones)."""
    validations = [doc for doc in docs if doc.get("phase") == verdict.PHASE_VALIDATE and doc.get("decision")]
    return validations if len({doc["decision"] for doc in validations}) > 1 else []


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
