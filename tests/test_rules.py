"""The rule book (gitcampaign/rules.py): every reason a REJECT can record is a rule there or a
person's (or a pull's) decision, each rule is applied where the book says, and accept and the MCP
server read the book instead of a list of their own (the report says it too:
tests/commands/test_gates.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitcampaign import constants as C
from gitcampaign import gates, rules

PACKAGE = Path(rules.__file__).resolve().parent
REASONS = {name: value for name, value in vars(C).items() if name.startswith("REASON_")}


def test_every_reason_is_a_rule_or_recorded_by_hand() -> None:
    book = [rule.reason for rule in rules.RULES]
    assert len(book) == len(set(book))
    assert set(book) | set(rules.RECORDED) == set(REASONS.values())
    assert set(rules.GATES) | set(rules.SPEED_RULES) == set(book)


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda rule: rule.reason)
def test_each_rule_is_applied_where_the_book_says(rule: rules.Rule) -> None:
    constant = next(name for name, value in REASONS.items() if value == rule.reason)
    assert f"C.{constant}" in (PACKAGE / f"{rule.module}.py").read_text()


def test_accept_and_the_mcp_server_read_the_book() -> None:
    assert gates.GATES is rules.GATES  # what accept refuses to overrule
    pytest.importorskip("mcp")
    from gitcampaign.mcp_server import INSTRUCTIONS

    assert rules.summary() in INSTRUCTIONS
    gates_part, speed_part = rules.summary().split("Speed rules")
    assert all(reason in gates_part and reason not in speed_part for reason in rules.GATES)
    assert all(reason in speed_part and reason not in gates_part for reason in rules.SPEED_RULES)


def test_the_book_states_the_limits_the_rules_apply() -> None:
    """The book's words carry numbers; they are the ones decision and transfer compare against."""
    from gitcampaign import decision, transfer

    checks = {rule.reason: rule.checks for rule in rules.RULES}
    assert f"less than {decision.REGRESSION_LIMIT:.0%} slower" in checks[C.REASON_SHAPE_REGRESSION]
    assert f"at most {transfer.OVERFIT_LIMIT:.0%} slower" in checks[C.REASON_OVERFIT]
