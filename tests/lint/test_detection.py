"""D1 (gitcampaign/lint/detection.py): benchmark detection in op code, against its fixtures."""

from __future__ import annotations

import pytest

from gitcampaign.lint import HARNESS_NAMES, lint_source
from gitcampaign.lint.detection import Detection
from tests.lint.cheats import cheats_of, check_cheat_blocks, check_fixture, fixtures_of


@pytest.mark.parametrize("fixture", fixtures_of(Detection))
def test_fixture_findings_match_markers(fixture: str) -> None:
    check_fixture(fixture, Detection)


@pytest.mark.parametrize("fixture", cheats_of(Detection))
def test_each_cheat_blocks_under_its_rule(fixture: str) -> None:
    check_cheat_blocks(fixture)


@pytest.mark.parametrize("harness", HARNESS_NAMES)
def test_testing_for_a_harness_by_name_is_d1(harness: str) -> None:
    source = (
        f'import sys\ndef f(a):\n    if "{harness}" in sys.modules:\n        return a\n    return a * 2\n'
    )
    assert [(f.rule, f.line) for f in lint_source(source, "d.py")] == [("D1", 3)]


def test_naming_the_harness_outside_a_test_is_not_detection() -> None:
    source = f'HARNESS = "{HARNESS_NAMES[0]}.py"\n'
    assert lint_source(source, "d.py") == []
