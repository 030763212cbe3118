"""The verdict note: a YAML stream on the round commit, one document per event, each a typed
`VerdictDoc` (the model is asv's `Results`: one class owns the on-disk schema, with its format
version, and every writer and reader goes through it).

A re-measurement, an override or a resumed ref move adds a document; nothing is overwritten.
The last document carrying a `decision` is the round's standing decision.

Notes are plain git objects anyone can write, so a document is read in isolation (a malformed one
is skipped, never fatal to another campaign) and a decision counts only when it agrees with what
git records: the commit it names, that commit's parent (the incumbent) and tree, the CSV note blob
it was decided from, and the ratio its own samples give (`inconsistency`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import yaml
from git import Repo

from gitcampaign import __version__, safe_yaml
from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.decision import PairSample, paired_stats
from gitcampaign.errors import CampaignError
from gitcampaign.vocabulary import ACCEPTED, Decision, Phase, StrEnum, escape_not_utf8

FORMAT = 1  # the `format` every document this version writes carries


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


class _Dumper(yaml.SafeDumper):
    """The safe dumper, writing a `Decision` or `Phase` as the plain string it stands for."""


_Dumper.add_multi_representer(StrEnum, lambda dumper, member: dumper.represent_str(str(member)))


_DOCUMENT_START = re.compile(r"^---[ \t]*$", re.MULTILINE)
DECISIONS = tuple(Decision)


# -- the shapes a field may have -------------------------------------------------------------------


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _interval(value: object) -> bool:
    return (
        isinstance(value, list) and len(value) == 2 and all(item is None or _number(item) for item in value)
    )


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class FieldType:
    """What a field holds in YAML (`fits`, said as `what` when it does not) and its typed value (`read`)."""

    fits: Callable[[object], bool]
    what: str
    read: Callable[[Any], Any] = _same


TEXT = FieldType(_text, "a string")
TEXTS = FieldType(_texts, "a list of strings")
NUMBER = FieldType(_number, "a number")
COUNT = FieldType(_count, "a whole number")
FLAG = FieldType(lambda value: isinstance(value, bool), "true or false")
MAPPING = FieldType(lambda value: isinstance(value, dict), "a mapping")
SEQUENCE = FieldType(lambda value: isinstance(value, list), "a list")
INTERVAL = FieldType(_interval, "two numbers")
DECISION = FieldType(lambda value: value in DECISIONS, f"one of {', '.join(DECISIONS)}", Decision)
# A phase this version does not know is kept, and decides nothing.
PHASE = FieldType(_text, "a string", lambda value: Phase(value) if value in tuple(Phase) else value)


@dataclass(frozen=True)
class Layout:
    """The keys of a document in the order they are written. A document read keeps its own; a
    new one gets its writer's, the order that writer has always used (so a new note reads as the
    earlier ones did); a key in `optional` is written only when it holds a value, the others
    always (as null when they hold none)."""

    keys: tuple[str, ...] = ()
    optional: frozenset[str] = frozenset()


R = TypeVar("R", bound="Record")


@dataclass(kw_only=True)
class Record:
    """A typed mapping of a note: the fields this version knows are attributes (their YAML shapes
    in `FIELDS`); any other field stays in `extra`, and `layout` keeps the written order, so
    `parse(text).to_yaml()` gives back the text it read. Subclasses declare the fields."""

    extra: dict[str, Any] = field(default_factory=dict)
    layout: Layout = field(default=Layout(), compare=False)  # how it is written, not what it says

    FIELDS: ClassVar[dict[str, FieldType]] = {}

    @classmethod
    def problem(cls, data: object) -> str | None:
        """Why `data` is not this record (a field of another shape than readers expect), or None."""
        if not isinstance(data, dict):
            return "not a mapping"
        for name, expected in cls.FIELDS.items():
            value = data.get(name)
            if value is not None and not expected.fits(value):
                return f"field {name!r} is not {expected.what}: {str(value)[:60]}"
        return None

    @classmethod
    def from_mapping(cls: type[R], data: object) -> R | None:
        """The record `data` holds, or None when it is not one (`problem` says why)."""
        if cls.problem(data) is not None:
            return None
        assert isinstance(data, dict)
        typed = {
            name: expected.read(data[name])
            for name, expected in cls.FIELDS.items()
            if data.get(name) is not None
        }
        extra = {key: value for key, value in data.items() if key not in cls.FIELDS}
        return cls(**typed, extra=extra, layout=Layout(tuple(data)))

    def to_mapping(self) -> dict[str, Any]:
        """The record as plain data, in its layout's order (fields set outside it after those, then
        the fields this version does not know)."""
        values = {name: getattr(self, name) for name in self.FIELDS}
        mapping: dict[str, Any] = {}
        for key in self.layout.keys:
            if key in values:
                if values[key] is not None or key not in self.layout.optional:
                    mapping[key] = _plain(values[key])
            elif key in self.extra:
                mapping[key] = self.extra[key]
        for key, value in values.items():
            if key not in mapping and key not in self.layout.keys and value is not None:
                mapping[key] = _plain(value)
        for key, value in self.extra.items():
            mapping.setdefault(key, value)
        return mapping


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_mapping()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _record(cls: type[Record], what: str) -> FieldType:
    return FieldType(lambda value: cls.problem(value) is None, what, cls.from_mapping)


def _records_by_name(cls: type[Record], what: str) -> FieldType:
    return FieldType(
        lambda value: isinstance(value, dict) and all(cls.problem(item) is None for item in value.values()),
        what,
        lambda value: {key: cls.from_mapping(item) for key, item in value.items()},
    )


@dataclass(kw_only=True)
class ShapeFigures(Record):
    """One shape of a document's `shapes`: a validation's check, paired ratio and both sides'
    medians; the baseline's check and value; the report's checks and figures at both ends."""

    check: str | None = None
    baseline_check: str | None = None
    final_check: str | None = None
    baseline: float | None = None
    final: float | None = None
    ratio: float | None = None
    candidate: float | None = None
    incumbent: float | None = None
    value: float | None = None
    share_of_limit: float | None = None
    sm_mhz: float | None = None  # the measured side's median SM clock (NVML), where recorded

    FIELDS: ClassVar[dict[str, FieldType]] = {
        "check": TEXT,
        "baseline_check": TEXT,
        "final_check": TEXT,
        "baseline": NUMBER,
        "final": NUMBER,
        "ratio": NUMBER,
        "candidate": NUMBER,
        "incumbent": NUMBER,
        "value": NUMBER,
        "share_of_limit": NUMBER,
        "sm_mhz": NUMBER,
    }

    @property
    def measured_ratio(self) -> float | None:
        """The shape's ratio where it is a finite number (None: not measured)."""
        return float(self.ratio) if self.ratio is not None and math.isfinite(self.ratio) else None


@dataclass(kw_only=True)
class CsvNote(Record):
    """The CSV note a verdict was decided from: its notes ref and blob id."""

    ref: str | None = None
    blob: str | None = None

    FIELDS: ClassVar[dict[str, FieldType]] = {"ref": TEXT, "blob": TEXT}


@dataclass(kw_only=True)
class GateFindings(Record):
    """The integrity and static gates' findings (gitcampaign.gates.gate_findings)."""

    protected_changed: list[str] | None = None
    static: list[str] | None = None
    suppressed: list[str] | None = None
    info: list[str] | None = None

    FIELDS: ClassVar[dict[str, FieldType]] = {
        "protected_changed": TEXTS,
        "static": TEXTS,
        "suppressed": TEXTS,
        "info": TEXTS,
    }


@dataclass(kw_only=True)
class StepRecord(Record):
    """One build or test run in one tree (gitcampaign.steps.Step), as the verdict records it."""

    what: str | None = None
    command: str | None = None
    passed: bool | None = None
    exit_code: int | None = None
    seconds: float | None = None
    log: str | None = None
    output: str | None = None
    cached_from: str | None = None

    FIELDS: ClassVar[dict[str, FieldType]] = {
        "what": TEXT,
        "command": TEXT,
        "passed": FLAG,
        "exit_code": COUNT,
        "seconds": NUMBER,
        "log": TEXT,
        "output": TEXT,
        "cached_from": TEXT,
    }


@dataclass(kw_only=True)
class Aggregate(Record):
    """The geometric mean of the primary metric over PASS shapes: a baseline's over every shape
    (`baseline`) and over the representative ones (`quick`); a validation's of each side."""

    baseline: float | None = None
    quick: float | None = None
    candidate: float | None = None
    incumbent: float | None = None

    FIELDS: ClassVar[dict[str, FieldType]] = {
        "baseline": NUMBER,
        "quick": NUMBER,
        "candidate": NUMBER,
        "incumbent": NUMBER,
    }


SHAPES = _records_by_name(ShapeFigures, "a mapping of shapes to their figures")
STEPS = _records_by_name(StepRecord, "a mapping of trees to their steps")


@dataclass(kw_only=True)
class VerdictDoc(Record):
    """One document of a verdict stream (or of the environment and profile notes, which share its
    stream: those carry a `kind`). Every field is typed; a document may lack any but `campaign`
    (the first versions wrote fewer), and the writers' layouts below give each kind of document
    the keys, in the order, that it has always had."""

    format: int | None = None
    campaign: str
    round: int | None = None
    phase: Phase | str | None = None
    kind: str | None = None  # an environment or profile document's (calibrate, analyze); no verdict has one
    hypothesis: str | None = None
    validation: str | None = None  # "quick" (the representative shapes) or "full"
    primary_metric: str | None = None
    decision: Decision | None = None
    override: bool | None = None
    previous_decision: str | None = None
    reasons: list[str] | None = None
    overrides: list[str] | None = None  # the REJECT reasons a manual accept overruled
    notes: list[str] | None = None
    commit: str | None = None
    incumbent: str | None = None
    gates: GateFindings | None = None
    noise_floor: dict[str, Any] | None = None
    build: dict[str, StepRecord] | None = None
    tests: StepRecord | None = None
    devices: dict[str, Any] | None = None
    sessions: int | None = None
    pairs: int | None = None
    aggregate: Aggregate | None = None
    representative_shapes: list[str] | None = None
    aa_samples: list[Any] | None = None
    samples: list[Any] | None = None
    probe: dict[str, Any] | None = None
    ratio: float | None = None
    ci: list[float | None] | None = None
    termination: list[str] | None = None
    baseline_commit: str | None = None
    final_commit: str | None = None
    shapes: dict[str, ShapeFigures] | None = None
    transfer: str | None = None
    environment: dict[str, Any] | None = None
    harness_sha256: dict[str, Any] | None = None
    csv_schema_sha256: str | None = None
    measured_commit: str | None = None
    tree: str | None = None
    acceptance: StepRecord | None = None
    final_diff: dict[str, Any] | None = None
    started: str | None = None
    finished: str | None = None
    device_seconds: float | None = None
    heat: dict[str, Any] | None = None
    csv_note: CsvNote | None = None
    tool_version: str | None = None
    written: str | None = None

    FIELDS: ClassVar[dict[str, FieldType]] = {
        "format": COUNT,
        "campaign": TEXT,
        "round": COUNT,
        "phase": PHASE,
        "kind": TEXT,
        "hypothesis": TEXT,
        "validation": TEXT,
        "primary_metric": TEXT,
        "decision": DECISION,
        "override": FLAG,
        "previous_decision": TEXT,
        "reasons": TEXTS,
        "overrides": TEXTS,
        "notes": TEXTS,
        "commit": TEXT,
        "incumbent": TEXT,
        "gates": _record(GateFindings, "the gates' findings"),
        "noise_floor": MAPPING,
        "build": STEPS,
        "tests": _record(StepRecord, "a step's record"),
        "devices": MAPPING,
        "sessions": COUNT,
        "pairs": COUNT,
        "aggregate": _record(Aggregate, "numbers by name"),
        "representative_shapes": TEXTS,
        "aa_samples": SEQUENCE,
        "samples": SEQUENCE,
        "probe": MAPPING,
        "ratio": NUMBER,
        "ci": INTERVAL,
        "termination": TEXTS,
        "baseline_commit": TEXT,
        "final_commit": TEXT,
        "shapes": SHAPES,
        "transfer": TEXT,
        "environment": MAPPING,
        "harness_sha256": MAPPING,
        "csv_schema_sha256": TEXT,
        "measured_commit": TEXT,
        "tree": TEXT,
        "acceptance": _record(StepRecord, "a step's record"),
        "final_diff": MAPPING,
        "started": TEXT,
        "finished": TEXT,
        "device_seconds": NUMBER,
        "heat": MAPPING,
        "csv_note": _record(CsvNote, "a CSV note's ref and blob"),
        "tool_version": TEXT,
        "written": TEXT,
    }

    @classmethod
    def problem(cls, data: object) -> str | None:
        if not isinstance(data, dict) or not isinstance(data.get("campaign"), str):
            return "not a mapping with a `campaign` name"
        return super().problem(data)

    @classmethod
    def parse(cls, text: str) -> VerdictDoc | None:
        try:
            return cls.from_mapping(safe_yaml.load(text))
        except safe_yaml.UnsafeYAML:
            return None

    def to_yaml(self) -> str:
        return yaml.dump(self.to_mapping(), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)

    def stamped(self) -> VerdictDoc:
        """The document as it is written: with the format (unless it has one), this tool's version
        and the time."""
        return dataclasses.replace(
            self,
            format=FORMAT if self.format is None else self.format,
            tool_version=__version__,
            written=now(),
        )

    @property
    def gpu(self) -> str:
        """The GPU it was measured on, as its environment fingerprint names it ("" where unrecorded)."""
        return str((self.environment or {}).get("gpu", ""))

    def pair_samples(self) -> list[PairSample] | None:
        """The paired samples it records (`samples`), or None where it records none that read."""
        try:
            return [
                PairSample(dict(row["incumbent"]), dict(row["candidate"]), int(row["session"]))
                for row in self.samples or []
            ] or None
        except (TypeError, KeyError, ValueError):
            return None


def _layout(keys: str, optional: str = "") -> Layout:
    """A writer's layout: `format` first, the tool's version and the time last (`stamped`)."""
    return Layout(("format", *keys.split(), "tool_version", "written"), frozenset(optional.split()))


# The writers' layouts (what each has always written, in its order).
VALIDATE_LAYOUT = _layout(
    "campaign round phase hypothesis validation primary_metric commit incumbent gates noise_floor build"
    " tests devices sessions pairs aggregate samples probe decision reasons notes ratio ci shapes transfer"
    " environment harness_sha256 csv_schema_sha256 tree started finished device_seconds heat csv_note",
    "build tests devices sessions pairs aggregate samples probe device_seconds heat csv_note",
)
REFUSED_LAYOUT = _layout("campaign round phase hypothesis decision reasons notes commit incumbent tree")
BASELINE_LAYOUT = _layout(
    "campaign round phase hypothesis decision reasons primary_metric aggregate representative_shapes"
    " noise_floor aa_samples shapes devices environment harness_sha256 csv_schema_sha256 measured_commit"
    " tree build tests device_seconds",
    "devices build tests device_seconds",
)
OVERRIDE_LAYOUT = _layout(
    "campaign round phase hypothesis decision override previous_decision reasons overrides notes commit"
    " incumbent ratio shapes",
    "overrides",
)
SUPERSEDE_LAYOUT = _layout(
    "campaign round phase hypothesis decision previous_decision reasons notes commit incumbent"
)
REPORT_LAYOUT = _layout(
    "campaign round phase primary_metric ratio ci termination baseline_commit final_commit shapes"
    " environment build acceptance final_diff device_seconds",
    "build",
)
REPORT_SHAPE_LAYOUT = Layout(
    ("baseline_check", "final_check", "baseline", "final", "ratio", "share_of_limit")
)


def not_a_document(doc: object) -> str | None:
    """Why a parsed YAML value is not a verdict document (no campaign, a round that is not a
    number, a decision that is not a `Decision`, a field of another shape than readers expect), or
    None when it is one."""
    return VerdictDoc.problem(doc)


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
    cache_path = g.common_dir(repo) / "campaign" / "verdict-cache-v4.json"
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


def standing(docs: Sequence[VerdictDoc]) -> VerdictDoc | None:
    """The document whose decision currently stands (the last one with a decision)."""
    return next((doc for doc in reversed(docs) if doc.decision), None)


def superseded(doc: VerdictDoc | None) -> bool:
    """A standing decision that `pull --supersede` wrote: REJECT, because the other clone's line
    was kept. Until the pull has moved main back, only the pull finishes it (never a rollback)."""
    return doc is not None and doc.decision == Decision.REJECT and C.REASON_SUPERSEDED in (doc.reasons or [])


def read(repo: Repo, commit: str) -> list[VerdictDoc]:
    return parse_stream(g.read_note(repo, C.NOTES_VERDICT, commit))


def render(document: VerdictDoc | Mapping[str, Any]) -> bytes:
    """One YAML document of the stream, stamped with the format, tool version and time (a verdict,
    or an environment or profile document given as a mapping). A note is written only if it reads
    back: text that is not UTF-8 (a test's output, a hand-set branch description) is carried as
    `\\xNN` escapes, which YAML's own escapes could not load."""
    if isinstance(document, VerdictDoc):
        stamped = document.stamped().to_mapping()
    else:
        stamped = _plain({"format": FORMAT, **document, "tool_version": __version__, "written": now()})
    text = yaml.dump(_utf8(stamped), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
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


def append(
    repo: Repo, commit: str, document: VerdictDoc | Mapping[str, Any], notes_ref: str = C.NOTES_VERDICT
) -> None:
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


def write_csv_note(repo: Repo, notes_ref: str, commit: str, raw: bytes) -> CsvNote:
    """Attach the CSV byte for byte; returns its ref and blob for the verdict to name.

    A CSV note that a verdict names is never replaced. One that no verdict names was left by a run
    killed before it decided: the new measurement replaces it (its bytes stay in the notes ref's
    history), so the note always agrees with the verdict decided from it."""
    with g.repo_lock(repo):
        blobs = g.note_blobs(repo, notes_ref)
        existing = blobs.get(commit)
        named = {doc.csv_note.blob for doc in read(repo, commit) if doc.csv_note is not None}
        if existing is not None and existing in named:
            raise CampaignError(
                f"{commit[:12]} already has the {notes_ref} note a verdict was decided from",
                "a CSV note a verdict names is never replaced; see it with `git campaign show`",
            )
        blob = g.write_note(repo, notes_ref, commit, raw, replace=existing is not None)
        return CsvNote(ref=notes_ref, blob=blob)


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
        return None if doc.measured_commit == facts.parent else "not measured on this commit's parent"
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
    if doc.tree != facts.tree:
        return "its tree is not the commit's tree"
    if decision not in ACCEPTED:
        return None
    if not names_its_csv(doc, facts):
        return "the CSV note it names is not the one on the commit"
    return _samples_disagree(doc)


def names_its_csv(doc: VerdictDoc, facts: CommitFacts) -> bool:
    """Whether the CSV note `doc` names is the one on its commit (what it was decided from)."""
    note = doc.csv_note
    return note is not None and note.blob is not None and facts.csv_blobs.get(str(note.ref)) == note.blob


def _samples_disagree(doc: VerdictDoc) -> str | None:
    """An accepted decision must follow from its own paired samples (ratio, interval above 1)."""
    samples = doc.pair_samples()
    labels = sorted(doc.shapes or {})
    try:
        stats = paired_stats(samples, labels) if samples and labels else None
    except (TypeError, KeyError, ValueError, ZeroDivisionError):
        stats = None
    if stats is None:
        return "an accepted decision without its paired samples"
    recorded = [doc.ratio, *(doc.ci or [None, None])]
    computed = [stats.ratio, *stats.ci]
    if not all(
        isinstance(r, (int, float)) and math.isclose(r, c, rel_tol=1e-6)
        for r, c in zip(recorded, computed, strict=True)
    ):
        return "its ratio and interval are not what its samples give"
    if not stats.ci[0] > 1.0:
        return "its samples do not show a gain (interval not above 1)"
    return None
