"""What the rule-family tests share: the fixtures of tests/cheats/ (data, not code), read per family.

A trailing `# expect: ID [ID...]` marks each line of a fixture where a finding of that rule must
appear; no other line may carry a finding. A cheat fixture is named by the rule that catches it
(`w2_*.py.txt`); an honest look-alike (`honest_*.py.txt`, code that must pass) belongs to the
families whose false alarm on real kernel code it records, listed here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gitcampaign.lint import Finding, lint_source
from gitcampaign.lint.caches import Caches
from gitcampaign.lint.detection import Detection
from gitcampaign.lint.fallback import Fallback
from gitcampaign.lint.group_m import GroupM
from gitcampaign.lint.side_work import SideWork
from gitcampaign.lint.timers import Timers
from gitcampaign.lint.walk import Family, walk

CHEATS = Path(__file__).resolve().parents[1] / "cheats"
EXPECT_RE = re.compile(r"#\s*expect:\s*(?P<rules>[A-Z0-9 ]+)$")

HONEST: dict[type[Family], list[str]] = {
    Caches: [
        "honest_config_dict.py.txt",
        "honest_descriptor_cache.py.txt",
        "honest_key_helper_metadata.py.txt",
        "honest_key_named_functions.py.txt",
        "honest_lru_cache_scalars.py.txt",
        "honest_tensor_looking_names.py.txt",
        "honest_w1_weight_cache.py.txt",
    ],
    GroupM: ["honest_constexpr_rows.py.txt", "honest_triton_matmul.py.txt"],
    Timers: ["honest_reraise_and_timing.py.txt"],
    SideWork: ["honest_joined_side_stream.py.txt"],
    Fallback: ["honest_reraise_and_timing.py.txt"],
    Detection: [],
}


def source(fixture: str) -> str:
    return (CHEATS / fixture).read_text()


def expected(text: str) -> set[tuple[str, int]]:
    """(rule, line) of every `# expect:` marker."""
    marked = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT_RE.search(line)
        if match:
            marked.update((rule, number) for rule in match["rules"].split())
    return marked


def found(findings: list[Finding]) -> set[tuple[str, int]]:
    return {(f.rule, f.line) for f in findings}


def rule_ids(family: type[Family]) -> set[str]:
    return {rule.id for rule in family.RULES}


def cheats_of(family: type[Family]) -> list[str]:
    """The cheat fixtures named by one of the family's rules."""
    ids = {rule.lower() for rule in rule_ids(family)}
    return sorted(p.name for p in CHEATS.glob("*.py.txt") if p.name.split("_", 1)[0] in ids)


def fixtures_of(family: type[Family]) -> list[str]:
    return cheats_of(family) + HONEST[family]


def check_fixture(fixture: str, family: type[Family]) -> None:
    """The family's visitor alone reports exactly the markers of its rules, and the whole check
    exactly all markers (no other family raises a false alarm on the fixture)."""
    text = source(fixture)
    alone = {(rule, line) for rule, line, _ in walk(ast.parse(text), fixture, [family])}
    assert alone == {(rule, line) for rule, line in expected(text) if rule in rule_ids(family)}
    assert found(lint_source(text, fixture)) == expected(text)


def check_cheat_blocks(fixture: str) -> None:
    """A planted cheat is found, only under the rule it is named by, and every finding blocks."""
    rule = fixture.split("_", 1)[0].upper()
    findings = lint_source(source(fixture), fixture)
    assert findings, f"{fixture} planted a cheat and nothing was found"
    assert {f.rule for f in findings} == {rule}
    assert all(f.blocking for f in findings)
