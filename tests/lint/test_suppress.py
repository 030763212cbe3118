"""L0 and suppression comments (gitcampaign/lint/suppress.py)."""

from __future__ import annotations

from gitcampaign.lint import lint_source
from tests.lint.cheats import source


def test_suppression_with_reason_is_reported_not_blocking() -> None:
    findings = lint_source(source("suppressed.py.txt"), "suppressed.py")
    by_line = {(f.rule, f.line): f for f in findings}
    assert set(by_line) == {("W2", 7), ("W2", 11), ("L0", 11)}
    assert by_line[("W2", 7)].suppressed_reason == "test-only helper, never called by the op"
    assert not by_line[("W2", 7)].blocking
    # Without a reason the directive is itself a finding and suppresses nothing.
    assert by_line[("L0", 11)].blocking
    assert by_line[("W2", 11)].suppressed_reason is None


def test_suppression_must_name_the_rule_it_waives() -> None:
    text = "_c = {}\ndef f(a):\n    return _c[id(a)]  # campaign-lint: allow T1 -- wrong rule\n"
    findings = lint_source(text, "wrong.py")
    assert [(f.rule, f.blocking) for f in findings] == [("W2", True)]


def test_unknown_rule_is_l0_and_the_known_one_is_still_waived() -> None:
    text = "_c = {}\ndef f(a):\n    return _c[id(a)]  # campaign-lint: allow W2, X9 -- typo\n"
    findings = lint_source(text, "unknown.py")
    assert [(f.rule, f.blocking, f.suppressed_reason) for f in findings] == [
        ("L0", True, None),
        ("W2", False, "typo"),
    ]
    assert "X9" in findings[0].message


def test_directive_inside_a_string_does_not_suppress() -> None:
    text = '_c = {}\ndef f(a):\n    return _c[id(a)], "# campaign-lint: allow W2 -- not a comment"\n'
    assert [f.blocking for f in lint_source(text, "string.py")] == [True]
