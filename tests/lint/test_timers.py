"""T1 (gitcampaign/lint/timers.py): a monkeypatched clock or event, against its fixtures."""

from __future__ import annotations

import pytest

from gitcampaign.lint import lint_source
from gitcampaign.lint.timers import Timers
from tests.lint.cheats import cheats_of, check_cheat_blocks, check_fixture, fixtures_of


@pytest.mark.parametrize("fixture", fixtures_of(Timers))
def test_fixture_findings_match_markers(fixture: str) -> None:
    check_fixture(fixture, Timers)


@pytest.mark.parametrize("fixture", cheats_of(Timers))
def test_each_cheat_blocks_under_its_rule(fixture: str) -> None:
    check_cheat_blocks(fixture)


@pytest.mark.parametrize(
    "patch",
    [
        "time.perf_counter = lambda: 0.0",
        "clock = time\nclock.perf_counter = lambda: 0.0",  # through a module alias
        'setattr(time, "perf_counter", lambda: 0.0)',
        'setattr(time, "perf_" + "counter", lambda: 0.0)',  # a computed name on a clock's owner
        'vars(time)["perf_counter"] = lambda: 0.0',
    ],
)
def test_each_spelling_of_a_patched_clock_is_t1(patch: str) -> None:
    findings = lint_source(f"import time\n{patch}\n", "patch.py")
    assert [f.rule for f in findings] == ["T1"]


def test_reading_the_clock_is_not_a_patch() -> None:
    source = "import time\nstart = time.perf_counter()\nelapsed = time.perf_counter() - start\n"
    assert lint_source(source, "read.py") == []
