"""The verdict note: a YAML stream on the round commit, one document per event.

A re-measurement, an override or a resumed ref move adds a document; nothing is overwritten.
The last document carrying a `decision` is the round's standing decision.

Notes are plain git objects anyone can write, so a document is read in isolation (a malformed one
is skipped, never fatal to another campaign) and a decision counts only when it agrees with what
git records: the commit it names, that commit's parent (the incumbent) and tree, the CSV note blob
it was decided from, and the ratio its own samples give (`inconsistency`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml
from git import Repo

from gitcampaign import __version__, safe_yaml
from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.errors import CampaignError
from gitcampaign.vocabulary import ACCEPTED, Decision, Phase, StrEnum, escape_not_utf8


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


class _Dumper(yaml.SafeDumper):
    """The safe dumper, writing a `Decision` or `Phase` as the plain string it stands for."""


_Dumper.add_multi_representer(StrEnum, lambda dumper, member: dumper.represent_str(str(member)))


_DOCUMENT_START = re.compile(r"^---[ \t]*$", re.MULTILINE)
DECISIONS = tuple(Decision)


@dataclass(eq=False)
class VerdictDoc(Mapping[str, Any]):
    """One document of a verdict stream (the model is DVC's `SerializableExp`).

    The fields every reader relies on are typed; all the others (the measurement, gates, samples,
    and any field a later version adds) stay in `extra`, and `order` remembers the order they were
    written in, so `VerdictDoc.parse(text).to_yaml()` gives back the document it read. A document
    may lack any field but `campaign`: the first versions wrote fewer.

    It is also the read-only mapping it was written as (equal to that dict): fields without a type
    are read as `doc.get("ratio")`, and a document goes into JSON as `doc.to_mapping()`.
    """

    campaign: str
    round: int | None = None
    phase: Phase | str | None = None  # a phase this version does not know is kept, and decides nothing
    decision: Decision | None = None
    commit: str | None = None
    incumbent: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    order: tuple[str, ...] = ()

    TYPED = ("campaign", "round", "phase", "decision", "commit", "incumbent")

    @classmethod
    def from_mapping(cls, doc: object) -> VerdictDoc | None:
        """The document, or None when it is not one (`not_a_document` says why): a hand-broken
        document is skipped, never fatal."""
        if not_a_document(doc) is not None:
            return None
        assert isinstance(doc, dict)
        number, decision, phase = doc.get("round"), doc.get("decision"), doc.get("phase")
        known_phase = Phase(phase) if phase in tuple(Phase) else phase
        return cls(
            doc["campaign"],
            number,
            known_phase,
            Decision(decision) if decision is not None else None,
            doc.get("commit"),
            doc.get("incumbent"),
            {key: value for key, value in doc.items() if key not in cls.TYPED},
            tuple(doc),
        )

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> VerdictDoc:
        """A document a command writes, its fields in the order given (the order earlier versions
        wrote them in, so the note's bytes do not change); one that readers would skip is a bug."""
        doc = cls.from_mapping(dict(fields))
        if doc is None:
            raise ValueError(f"not a verdict document: {dict(fields)!r}")
        return doc

    @classmethod
    def parse(cls, text: str) -> VerdictDoc | None:
        try:
            return cls.from_mapping(safe_yaml.load(text))
        except safe_yaml.UnsafeYAML:
            return None

    def __getitem__(self, key: str) -> Any:
        if key not in self.TYPED:
            return self.extra[key]
        value = getattr(self, key)
        if value is None and key not in self.order:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_mapping())

    def __len__(self) -> int:
        return len(self.to_mapping())

    def to_mapping(self) -> dict[str, Any]:
        """The document as a mapping, in the order it was written (new fields last)."""
        typed = {key: getattr(self, key) for key in self.TYPED}
        present = {key: value for key, value in typed.items() if value is not None or key in self.order}
        merged = {**present, **self.extra}
        order = [key for key in self.order if key in merged] + [
            key for key in merged if key not in self.order
        ]
        return {key: merged[key] for key in order}

    def to_yaml(self) -> str:
        return yaml.dump(self.to_mapping(), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def _number(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _texts(value: object) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(item, str) for item in value))


def _numbers_by_name(value: object) -> bool:
    return value is None or (isinstance(value, dict) and all(map(_number, value.values())))


def _interval(value: object) -> bool:
    return value is None or (isinstance(value, list) and len(value) == 2 and all(map(_number, value)))


def _per_shape(value: object) -> bool:
    return value is None or (
        isinstance(value, dict)
        and all(
            isinstance(shape, dict)
            and _text(shape.get("check"))
            and all(_number(shape.get(key)) for key in ("ratio", "incumbent", "candidate", "value"))
            for shape in value.values()
        )
    )


def _mapping(value: object) -> bool:
    return value is None or isinstance(value, dict)


def _sequence(value: object) -> bool:
    return value is None or isinstance(value, list)


# The fields the readers use (lineage, status, show, report, a resumed validate), each with the
# shape it must have; a document with another is skipped like invalid YAML, never fatal to a reader.
_FIELDS = {
    "hypothesis": (_text, "a string"),
    "phase": (_text, "a string"),
    "commit": (_text, "a string"),
    "incumbent": (_text, "a string"),
    "measured_commit": (_text, "a string"),
    "transfer": (_text, "a string"),
    "written": (_text, "a string"),
    "reasons": (_texts, "a list of strings"),
    "notes": (_texts, "a list of strings"),
    "representative_shapes": (_texts, "a list of strings"),
    "ratio": (_number, "a number"),
    "ci": (_interval, "two numbers"),
    "aggregate": (_numbers_by_name, "numbers by name"),
    "shapes": (_per_shape, "a mapping of shapes to their figures"),
    "csv_note": (_mapping, "a mapping"),
    "gates": (_mapping, "a mapping"),
    "samples": (_sequence, "a list"),
}


def not_a_document(doc: object) -> str | None:
    """Why a parsed YAML value is not a verdict document (no campaign, a round that is not a
    number, a decision that is not a `Decision`, a field of another shape than readers expect), or
    None when it is one."""
    if not isinstance(doc, dict) or not isinstance(doc.get("campaign"), str):
        return "not a mapping with a `campaign` name"
    number, decision = doc.get("round"), doc.get("decision")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        return f"round {number!r} is not a number"
    if decision is not None and decision not in DECISIONS:
        return f"decision {decision!r} is not one of {', '.join(DECISIONS)}"
    for name, (fits, what) in _FIELDS.items():
        if not fits(doc.get(name)):
            return f"field {name!r} is not {what}: {str(doc[name])[:60]}"
    return None


def parse_stream(raw: bytes | None) -> list[VerdictDoc]:
    """The well-formed documents of a stream, each parsed alone: one hand-broken document (invalid
    YAML, a decision that is not one) is skipped without hiding the others."""
    return read_stream(raw)[0]


def read_stream(raw: bytes | None) -> tuple[list[VerdictDoc], list[str]]:
    """(the well-formed documents, why each other one was skipped: "document 2: ...")."""
    docs: list[VerdictDoc] = []
    skipped: list[str] = []
    if raw is None:
        return docs, skipped
    parts = [part for part in _DOCUMENT_START.split(raw.decode(errors="replace")) if part.strip()]
    if not parts:  # an emptied note is damage too: the round it decided would read as "empty"
        return docs, ["the note holds no document"]
    for number, part in enumerate(parts, start=1):
        try:
            parsed = safe_yaml.load(part)
        except safe_yaml.UnsafeYAML as exc:
            skipped.append(f"document {number}: {exc}")
            continue
        why = not_a_document(parsed)
        if why is not None:
            skipped.append(f"document {number}: {why}")
            continue
        doc = VerdictDoc.from_mapping(parsed)
        assert doc is not None
        docs.append(doc)
    return docs, skipped


def read_many(repo: Repo, blobs: dict[str, str]) -> tuple[dict[str, list[VerdictDoc]], dict[str, list[str]]]:
    """({commit: documents}, {commit: why documents of its note were skipped}) for {commit: note
    blob}, through a cache keyed by blob id.

    Blob ids name their content, so a cached entry can never be stale; it keeps `log` and `status`
    fast on campaigns with hundreds of rounds.
    """
    cache_path = g.common_dir(repo) / "campaign" / "verdict-cache-v3.json"
    try:
        cache: dict[str, dict[str, list[Any]]] = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    if not isinstance(cache, dict):  # a damaged cache is only slower: it is rebuilt
        cache = {}
    missing = {blob for blob in blobs.values() if not _cached(cache.get(blob))}
    for blob in missing:
        size = g.blob_size(repo, blob)
        docs: list[VerdictDoc]
        if size > g.MAX_NOTE_BYTES:
            docs, skipped = (
                [],
                [f"the note is {size} bytes, over the {g.MAX_NOTE_BYTES} a campaign note may hold"],
            )
        else:
            docs, skipped = read_stream(g.read_blob(repo, blob))
        cache[blob] = {"docs": [doc.to_mapping() for doc in docs], "skipped": skipped}
    if missing:
        live = set(blobs.values())
        cache = {blob: entry for blob, entry in cache.items() if blob in live}
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        # Per thread too: the MCP server's tools read lineages in threads of one process.
        scratch = cache_path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        scratch.write_text(json.dumps(cache))
        scratch.replace(cache_path)
    documents = {commit: _documents(cache[blob]["docs"]) for commit, blob in blobs.items()}
    skipped_by_commit = {
        commit: cache[blob]["skipped"] for commit, blob in blobs.items() if cache[blob]["skipped"]
    }
    return documents, skipped_by_commit


def _cached(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("docs"), list)
        and isinstance(entry.get("skipped"), list)
    )


def _documents(mappings: list[dict[str, Any]]) -> list[VerdictDoc]:
    """The cached mappings as documents (every one was a document when it was cached)."""
    return [doc for doc in map(VerdictDoc.from_mapping, mappings) if doc is not None]


Doc = TypeVar("Doc", bound=Mapping[str, Any])


def standing(docs: Sequence[Doc]) -> Doc | None:
    """The document whose decision currently stands (the last one with a decision)."""
    for doc in reversed(docs):
        if doc.get("decision"):
            return doc
    return None


def superseded(doc: Mapping[str, Any] | None) -> bool:
    """A standing decision that `pull --supersede` wrote: REJECT, because the other clone's line
    was kept. Until the pull has moved main back, only the pull finishes it (never a rollback)."""
    return (
        doc is not None
        and doc.get("decision") == Decision.REJECT
        and C.REASON_SUPERSEDED in (doc.get("reasons") or [])
    )


def read(repo: Repo, commit: str) -> list[VerdictDoc]:
    return parse_stream(g.read_note(repo, C.NOTES_VERDICT, commit))


def render(document: Mapping[str, Any]) -> bytes:
    """One YAML document of the stream, stamped with the format, tool version and time. A note is
    written only if it reads back: text that is not UTF-8 (a test's output, a hand-set branch
    description) is carried as `\\xNN` escapes, which YAML's own escapes could not load."""
    document = {"format": C.VERDICT_FORMAT, **document, "tool_version": __version__, "written": now()}
    text = yaml.dump(_utf8(document), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    try:
        safe_yaml.load(text)
    except safe_yaml.UnsafeYAML as exc:
        raise ValueError(f"a note document that would not read back ({exc}): {text[:200]!r}") from exc
    return b"---\n" + text.encode()


def _utf8(value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, StrEnum):
        return escape_not_utf8(value)
    if isinstance(value, Mapping):
        return {_utf8(key): _utf8(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_utf8(item) for item in value]
    return value


def append(repo: Repo, commit: str, document: Mapping[str, Any], notes_ref: str = C.NOTES_VERDICT) -> None:
    """Add one document to the commit's YAML stream in `notes_ref` (the verdict, or the environment
    note), keeping every earlier byte (read and write under the repository lock, so a concurrent
    writer cannot slip in between)."""
    with g.repo_lock(repo):
        existing = g.read_note(repo, notes_ref, commit)
        if existing is None:
            g.write_note(repo, notes_ref, commit, render(document))
        else:
            if not existing.endswith(b"\n"):
                existing += b"\n"  # a hand-edited note without a final newline must not glue onto ours
            g.write_note(repo, notes_ref, commit, existing + render(document), replace=True)


def write_csv_note(repo: Repo, notes_ref: str, commit: str, raw: bytes) -> dict[str, str]:
    """Attach the CSV byte for byte; returns {ref, blob} for the verdict to name.

    A CSV note that a verdict names is never replaced. One that no verdict names was left by a run
    killed before it decided: the new measurement replaces it (its bytes stay in the notes ref's
    history), so the note always agrees with the verdict decided from it."""
    with g.repo_lock(repo):
        blobs = g.note_blobs(repo, notes_ref)
        existing = blobs.get(commit)
        named = {
            doc.extra["csv_note"].get("blob")
            for doc in read(repo, commit)
            if isinstance(doc.get("csv_note"), dict)
        }
        if existing is not None and existing in named:
            raise CampaignError(
                f"{commit[:12]} already has the {notes_ref} note a verdict was decided from",
                "a CSV note a verdict names is never replaced; see it with `git campaign show`",
            )
        blob = g.write_note(repo, notes_ref, commit, raw, replace=existing is not None)
        return {"ref": notes_ref, "blob": blob}


@dataclass(frozen=True)
class CommitFacts:
    """What git records about an annotated commit, against which its verdicts are checked."""

    tree: str
    parent: str | None
    csv_blobs: dict[str, str]  # notes ref -> blob of this commit's CSV note


def commit_facts(repo: Repo, commits: list[str]) -> dict[str, CommitFacts]:
    """Tree, first parent and CSV note blobs of many commits, in a fixed number of git calls."""
    if not commits:
        return {}
    csv_notes = {ref: g.note_blobs(repo, ref) for ref in (C.NOTES_BENCH, C.NOTES_FULL)}
    return {
        sha: CommitFacts(
            tree,
            parents[0] if parents else None,
            {ref: blobs[sha] for ref, blobs in csv_notes.items() if sha in blobs},
        )
        for sha, (tree, parents) in g.trees_and_parents(repo, commits).items()
    }


def inconsistency(commit: str, doc: VerdictDoc, facts: CommitFacts | None) -> str | None:
    """Why `doc` cannot stand as a decision on `commit`, or None when git's records back it.

    Not a signature: whoever can write every note consistently can also move refs by hand. It
    stops a note copied by a rebase, a hand-written or edited verdict and a CSV from another run.
    """
    if facts is None:
        return "the commit is not in this repository"
    phase, decision = doc.phase, doc.decision
    if phase == Phase.BASELINE:
        return None if doc.get("measured_commit") == facts.parent else "not measured on this commit's parent"
    if doc.commit != commit:
        return f"it names commit {str(doc.commit)[:12]} (copied by a rebase or amend, or written by hand)"
    if phase == Phase.OVERRIDE and decision not in ACCEPTED:
        return None  # a manual rejection (or a superseded round) only pins; it never moves main forward
    if doc.incumbent != facts.parent:
        return "its incumbent is not the commit's parent"
    if phase == Phase.OVERRIDE:
        return None
    if phase != Phase.VALIDATE:
        return f"phase {phase!r} carries no round decision"
    if doc.get("tree") != facts.tree:
        return "its tree is not the commit's tree"
    if decision not in ACCEPTED:
        return None
    note = doc.get("csv_note")
    if not isinstance(note, dict) or facts.csv_blobs.get(str(note.get("ref"))) != note.get("blob"):
        return "the CSV note it names is not the one on the commit"
    return _samples_disagree(doc)


def _samples_disagree(doc: VerdictDoc) -> str | None:
    """An accepted decision must follow from its own paired samples (ratio, interval above 1)."""
    from gitcampaign.decision import PairSample, paired_stats

    rows = doc.get("samples") or []
    labels = sorted((doc.get("shapes") or {}).keys())
    try:
        samples = [PairSample(dict(r["incumbent"]), dict(r["candidate"]), int(r["session"])) for r in rows]
        stats = paired_stats(samples, labels) if samples and labels else None
    except (TypeError, KeyError, ValueError, ZeroDivisionError):
        stats = None
    if stats is None:
        return "an accepted decision without its paired samples"
    recorded = [doc.get("ratio"), *(doc.get("ci") or [None, None])]
    computed = [stats.ratio, *stats.ci]
    if not all(
        isinstance(r, (int, float)) and math.isclose(r, c, rel_tol=1e-6)
        for r, c in zip(recorded, computed, strict=True)
    ):
        return "its ratio and interval are not what its samples give"
    if not stats.ci[0] > 1.0:
        return "its samples do not show a gain (interval not above 1)"
    return None
