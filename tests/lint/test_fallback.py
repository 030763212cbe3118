"""F1 (gitcampaign/lint/fallback.py): a fallback to the reference implementation, against its fixtures."""

from __future__ import annotations

import pytest

from gitcampaign.lint import lint_source
from gitcampaign.lint.fallback import Fallback
from tests.lint.cheats import cheats_of, check_cheat_blocks, check_fixture, fixtures_of


@pytest.mark.parametrize("fixture", fixtures_of(Fallback))
def test_fixture_findings_match_markers(fixture: str) -> None:
    check_fixture(fixture, Fallback)


@pytest.mark.parametrize("fixture", cheats_of(Fallback))
def test_each_cheat_blocks_under_its_rule(fixture: str) -> None:
    check_cheat_blocks(fixture)


def test_a_handler_that_re_raises_may_call_anything() -> None:
    source = "import torch\ndef f(a, b):\n    try:\n        return g(a, b)\n    except RuntimeError:\n        torch.matmul(a, b)\n        raise\n"
    assert lint_source(source, "f.py") == []
    falls_back = source.replace("        raise\n", "        return a\n")
    assert [(f.rule, f.line) for f in lint_source(falls_back, "f.py")] == [("F1", 5)]
