"""G1 (gitcampaign/lint/group_m.py): a per-group M as a compile-time constant, against its fixtures."""

from __future__ import annotations

import pytest

from gitcampaign.lint import lint_source
from gitcampaign.lint.group_m import GroupM
from tests.lint.cheats import cheats_of, check_cheat_blocks, check_fixture, fixtures_of


@pytest.mark.parametrize("fixture", fixtures_of(GroupM))
def test_fixture_findings_match_markers(fixture: str) -> None:
    check_fixture(fixture, GroupM)


@pytest.mark.parametrize("fixture", cheats_of(GroupM))
def test_each_cheat_blocks_under_its_rule(fixture: str) -> None:
    check_cheat_blocks(fixture)


@pytest.mark.parametrize(
    ("name", "flagged"),
    [
        ("M_PER_GROUP", True),
        ("tokens_per_expert", True),
        ("GROUP_M", False),  # the tutorial's tile-order swizzle
        ("GROUP_SIZE_M", False),
        ("BLOCK_M", False),  # a tile says how rows are walked
        ("EXPERT_ROWS_STRIDE", False),
        ("NUM_EXPERTS", False),  # a count of groups, not of rows in one
    ],
)
def test_only_a_per_group_row_count_is_flagged(name: str, flagged: bool) -> None:
    source = f"import triton\nimport triton.language as tl\n@triton.jit\ndef k(x, {name}: tl.constexpr):\n    pass\n"
    assert [f.rule for f in lint_source(source, "k.py")] == (["G1"] if flagged else [])


def test_a_plain_parameter_is_not_a_compile_time_constant() -> None:
    source = "import triton\n@triton.jit\ndef k(x, M_PER_GROUP):\n    pass\n"
    assert lint_source(source, "k.py") == []
