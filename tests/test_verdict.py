"""The verdict stream: VerdictDoc reads every document the tool ever wrote (the fixture campaign's
notes, made before VerdictDoc existed), keeps what it does not know, and the string enums write the
same bytes the plain strings did."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from fixture_campaign import restore

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.verdict import VerdictDoc
from gitcampaign.vocabulary import Decision, Phase, Status


def fixture_documents(root: Path) -> list[str]:
    repo = g.open_repo(restore(root))
    texts = []
    for blob in g.note_blobs(repo, C.NOTES_VERDICT).values():
        raw = g.read_blob(repo, blob).decode()
        texts += [part for part in raw.split("---\n") if part.strip()]
    return texts


def test_every_existing_document_round_trips(tmp_path: Path) -> None:
    """Notes written before VerdictDoc (and before its typed fields) parse, and serialise back to
    the very bytes they were read from."""
    texts = fixture_documents(tmp_path / "old")
    phases = set()
    for text in texts:
        doc = VerdictDoc.parse(text)
        assert doc is not None, text
        assert doc.to_mapping() == yaml.safe_load(text)
        assert list(doc.to_mapping()) == list(yaml.safe_load(text))  # the order it was written in
        assert doc.to_yaml() == text  # byte for byte
        phases.add(doc.phase)
    assert phases == {Phase.BASELINE, Phase.VALIDATE, Phase.OVERRIDE}  # the fixture has each kind


def test_the_writers_layouts_order_keys_as_the_notes_written_before(tmp_path: Path) -> None:
    """Each kind of document the fixture holds has its keys in the order of one of the layouts
    this version writes that kind with, and no key outside it: a new note reads as the old ones."""
    layouts = {
        Phase.BASELINE: [verdict.BASELINE_LAYOUT],
        Phase.VALIDATE: [verdict.VALIDATE_LAYOUT, verdict.REFUSED_LAYOUT],
        Phase.OVERRIDE: [verdict.OVERRIDE_LAYOUT, verdict.SUPERSEDE_LAYOUT],
    }
    for text in fixture_documents(tmp_path / "old"):
        doc = VerdictDoc.parse(text)
        assert doc is not None and isinstance(doc.phase, Phase)
        keys = list(yaml.safe_load(text))
        assert any([key for key in layout.keys if key in keys] == keys for layout in layouts[doc.phase]), keys


def test_a_new_document_is_written_in_its_writers_layout() -> None:
    """Keys in the layout's order, wherever the writer set them; an optional key left unset is
    not written, any other is (as null); a field outside the layout comes after it."""
    doc = VerdictDoc(campaign="d", phase=Phase.VALIDATE, started="t0", layout=verdict.VALIDATE_LAYOUT)
    doc.decision, doc.commit, doc.transfer = Decision.ACCEPT, "c" * 40, None
    doc.csv_note = verdict.CsvNote(ref=C.NOTES_BENCH, blob="b" * 40)
    doc.shapes = {"s": verdict.ShapeFigures(check="PASS", ratio=1.1, candidate=2.2, incumbent=2.0)}
    doc.termination = ["T4"]  # a report's field, outside this layout
    mapping = doc.stamped().to_mapping()
    assert list(mapping)[:5] == ["format", "campaign", "round", "phase", "hypothesis"]
    assert mapping["transfer"] is None and "heat" not in mapping and "device_seconds" not in mapping
    assert list(mapping).index("started") > list(mapping).index("tree")  # stamped when it closes
    assert list(mapping)[-4:] == ["csv_note", "tool_version", "written", "termination"]
    assert mapping["shapes"] == {"s": {"check": "PASS", "ratio": 1.1, "candidate": 2.2, "incumbent": 2.0}}
    again = VerdictDoc.parse(verdict.render(doc).decode().removeprefix("---\n"))
    assert again is not None and again.to_mapping() == {**mapping, "written": again.written}
    assert (again.decision, again.csv_note, again.format) == (Decision.ACCEPT, doc.csv_note, verdict.FORMAT)


@pytest.mark.parametrize(
    "record",
    [
        VerdictDoc,
        verdict.ShapeFigures,
        verdict.Aggregate,
        verdict.CsvNote,
        verdict.GateFindings,
        verdict.StepRecord,
    ],
)
def test_every_typed_field_has_its_yaml_type(record: type[verdict.Record]) -> None:
    declared = {item.name for item in dataclasses.fields(record)} - {"extra", "layout"}
    assert declared == set(record.FIELDS)


def test_unknown_and_missing_fields_are_kept_and_tolerated() -> None:
    doc = VerdictDoc.parse("campaign: demo\nfuture_field: {a: 1}\nphase: LATER\n")
    assert doc is not None
    assert (doc.round, doc.decision, doc.commit) == (None, None, None)
    assert doc.phase == "LATER" and not isinstance(doc.phase, Phase)  # kept, decides nothing
    assert doc.to_mapping() == {"campaign": "demo", "future_field": {"a": 1}, "phase": "LATER"}


@pytest.mark.parametrize(
    "text",
    [
        "round: 2\n",  # no campaign
        "campaign: demo\nround: two\n",
        "campaign: demo\nround: true\n",
        "campaign: demo\ndecision: MAYBE\n",
        "[not, a, mapping]\n",
        "campaign: [unclosed\n",
    ],
)
def test_malformed_documents_are_not_documents(text: str) -> None:
    assert VerdictDoc.parse(text) is None
    found = verdict.parse_stream(f"---\n{text}---\ncampaign: demo\n".encode())
    assert [doc.to_mapping() for doc in found] == [{"campaign": "demo"}]


def test_enums_write_the_strings_they_stand_for() -> None:
    typed = {"phase": Phase.VALIDATE, "decision": Decision.ACCEPT, "statuses": [Status.OPEN]}
    plain = {"phase": "VALIDATE", "decision": "ACCEPT", "statuses": ["open"]}
    assert verdict.render(typed).split(b"written:")[0] == verdict.render(plain).split(b"written:")[0]
    assert json.dumps(typed) == json.dumps(plain)
    assert f"{Decision.REJECT}" == "REJECT" and Decision.ACCEPT_WITH_NOTE.accepted


def test_standing_is_the_last_document_with_a_decision() -> None:
    docs = [
        VerdictDoc(campaign="d", decision=Decision.REJECT),
        VerdictDoc(campaign="d", decision=Decision.ACCEPT),
        VerdictDoc(campaign="d"),
    ]
    assert verdict.standing(docs) is docs[1]
    assert verdict.standing([VerdictDoc(campaign="d")]) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("shapes", {"s": {"ratio": "fast"}}),
        ("csv_note", {"ref": 3}),
        ("gates", {"static": "W2"}),
        ("tests", {"passed": "yes"}),
        ("build", {"candidate": {"exit_code": 1.5}}),
        ("aggregate", {"quick": "x"}),
        ("device_seconds", True),
        ("override", "yes"),
    ],
)
def test_a_typed_field_of_another_shape_makes_no_document(field: str, value: object) -> None:
    """A reader never meets a field of a shape its type does not allow: the document is skipped,
    with the field named."""
    text = yaml.safe_dump({"campaign": "d", field: value})
    assert VerdictDoc.parse(text) is None
    docs, skipped = verdict.read_stream(f"---\n{text}".encode())
    assert docs == [] and f"field {field!r}" in skipped[0]


def test_every_record_types_each_of_its_fields_and_no_other() -> None:
    """A record's FIELDS names exactly its dataclass fields: one added to either alone would be read
    into `extra` untyped, or typed and never set."""
    records = [
        cls for cls in vars(verdict).values() if isinstance(cls, type) and issubclass(cls, verdict.Record)
    ]
    assert len(records) > 5
    for record in records:
        declared = {f.name for f in dataclasses.fields(record)} - {"extra", "layout"}
        assert set(record.FIELDS) == declared, record.__name__
