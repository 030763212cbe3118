"""S1 (gitcampaign/lint/side_work.py): work hidden off the timed stream, against its fixtures."""

from __future__ import annotations

import pytest

from gitcampaign.lint import lint_source
from gitcampaign.lint.side_work import SideWork
from tests.lint.cheats import cheats_of, check_cheat_blocks, check_fixture, fixtures_of


@pytest.mark.parametrize("fixture", fixtures_of(SideWork))
def test_fixture_findings_match_markers(fixture: str) -> None:
    check_fixture(fixture, SideWork)


@pytest.mark.parametrize("fixture", cheats_of(SideWork))
def test_each_cheat_blocks_under_its_rule(fixture: str) -> None:
    check_cheat_blocks(fixture)


UNJOINED = """import torch
def f(a):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        b = a * 2
    return b
"""


def test_a_side_stream_is_fine_only_once_joined_back() -> None:
    assert [(f.rule, f.line) for f in lint_source(UNJOINED, "s.py")] == [("S1", 4)]
    joined = UNJOINED.replace(
        "    return b\n", "    torch.cuda.current_stream().wait_stream(side)\n    return b\n"
    )
    assert lint_source(joined, "s.py") == []


def test_a_join_in_the_enclosing_function_counts() -> None:
    nested = """import torch
def outer(a):
    side = torch.cuda.Stream()
    def inner():
        with torch.cuda.stream(side):
            return a * 2
    b = inner()
    torch.cuda.synchronize()
    return b
"""
    assert lint_source(nested, "s.py") == []
    assert [f.rule for f in lint_source(nested.replace("    torch.cuda.synchronize()\n", ""), "s.py")] == [
        "S1"
    ]
