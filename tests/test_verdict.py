"""The verdict stream: VerdictDoc reads every document the tool ever wrote (the fixture campaign's
notes, made before VerdictDoc existed), keeps what it does not know, and the string enums write the
same bytes the plain strings did."""

from __future__ import annotations

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
    texts = fixture_documents(tmp_path / "old")
    phases = set()
    for text in texts:
        doc = VerdictDoc.parse(text)
        assert doc is not None, text
        assert doc.to_mapping() == yaml.safe_load(text)
        assert list(doc.to_mapping()) == list(yaml.safe_load(text))  # the order it was written in
        assert yaml.safe_load(doc.to_yaml()) == yaml.safe_load(text)
        phases.add(doc.phase)
    assert phases == {Phase.BASELINE, Phase.VALIDATE, Phase.OVERRIDE}  # the fixture has each kind


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
    assert verdict.parse_stream(f"---\n{text}---\ncampaign: demo\n".encode()) == [{"campaign": "demo"}]


def test_enums_write_the_strings_they_stand_for() -> None:
    typed = {"phase": Phase.VALIDATE, "decision": Decision.ACCEPT, "statuses": [Status.OPEN]}
    plain = {"phase": "VALIDATE", "decision": "ACCEPT", "statuses": ["open"]}
    assert verdict.render(typed).split(b"written:")[0] == verdict.render(plain).split(b"written:")[0]
    assert json.dumps(typed) == json.dumps(plain)
    assert f"{Decision.REJECT}" == "REJECT" and Decision.ACCEPT_WITH_NOTE.accepted


def test_standing_is_the_last_document_with_a_decision() -> None:
    docs = [
        {"campaign": "d", "decision": "REJECT"},
        {"campaign": "d", "decision": "ACCEPT"},
        {"campaign": "d"},
    ]
    assert verdict.standing(docs) == docs[1]
    assert verdict.standing([{"campaign": "d"}]) is None


def test_a_written_document_keeps_the_bytes_of_the_mapping_it_was_built_from() -> None:
    fields = {
        "campaign": "d",
        "round": None,  # a report names no round, and says so
        "phase": Phase.OVERRIDE,
        "hypothesis": "h",
        "decision": Decision.REJECT,
        "previous_decision": None,
        "commit": "c" * 40,
        "incumbent": "i" * 40,
        "ratio": None,
    }
    doc = VerdictDoc.of(fields)
    assert doc == fields and list(doc) == list(fields) and doc.decision is Decision.REJECT
    assert verdict.render(doc).split(b"written:")[0] == verdict.render(fields).split(b"written:")[0]
    with pytest.raises(ValueError):
        VerdictDoc.of({"campaign": "d", "decision": "MAYBE"})
