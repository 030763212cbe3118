"""The one reader of YAML that arrives as data (notes, the committed manifest): bounded, alias-free."""

from __future__ import annotations

import pytest

from gitcampaign import safe_yaml, verdict
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import parse_manifest


def test_a_plain_document_reads_as_yaml_does() -> None:
    text = "campaign: demo\nround: 2\nshapes: {s: {ratio: 1.5}}\nci: [1.0, 2.0]\n"
    assert safe_yaml.load(text) == {
        "campaign": "demo",
        "round": 2,
        "shapes": {"s": {"ratio": 1.5}},
        "ci": [1.0, 2.0],
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: &x [1, 2]\nb: *x\n", "YAML alias"),  # the smallest alias: refused, not expanded
        ("d: " + "[" * 40 + "]" * 40 + "\n", "nested deeper than 32"),
        ("xs: [" + ", ".join(["1"] * 300_000) + "]\n", "over 250000 YAML nodes"),
        ("a: [1\n", "not valid YAML"),
        ("x: " + "y" * (safe_yaml.MAX_BYTES + 1), "bytes, over the"),
        ("written: 2026-01-01\n", "holds a date value"),  # plain data only: JSON holds no date
        ("b: !!binary aGk=\n", "holds a bytes value"),
        ("1: one\n", "a mapping key is int 1"),
    ],
)
def test_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(safe_yaml.UnsafeYAML, match=why):
        safe_yaml.load(text)


def test_a_refused_verdict_document_is_skipped_and_said_why() -> None:
    stream = b"---\ncampaign: demo\nround: 2\n---\ncampaign: demo\na: &x [1]\nb: *x\n---\ndecision: 7\ncampaign: x\n"
    docs, skipped = verdict.read_stream(stream)
    assert [doc.round for doc in docs] == [2]
    assert skipped == [
        "document 2: it uses a YAML alias (*name), which campaign documents never contain",
        "document 3: field 'decision' is not one of BASELINE, ACCEPT, ACCEPT_WITH_NOTE, REJECT: 7",
    ]


def test_a_manifest_with_an_alias_is_refused_naming_it() -> None:
    with pytest.raises(CampaignError, match="m.yaml is not read: it uses a YAML alias"):
        parse_manifest("a: &x [1]\nb: *x\n", "m.yaml")
