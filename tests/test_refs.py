"""CampaignRef: every campaign ref is built and parsed by one type, and the two agree."""

from __future__ import annotations

import pytest

from gitcampaign.refs import CampaignRef, RefKind


@pytest.mark.parametrize(
    ("ref", "full", "branch"),
    [
        (CampaignRef.main("demo"), "refs/heads/campaign/demo/main", "campaign/demo/main"),
        (CampaignRef.round_branch("demo", 12), "refs/heads/campaign/demo/round-12", "campaign/demo/round-12"),
        (CampaignRef.rejected("a.b-c", 3), "refs/campaign/a.b-c/rejected/round-3", None),
        (CampaignRef.heat("demo", 4), "refs/campaign/demo/heat/round-4", None),
    ],
)
def test_built_refs_parse_back(ref: CampaignRef, full: str, branch: str | None) -> None:
    assert str(ref) == full
    assert CampaignRef.from_ref(full) == ref
    if branch is None:
        with pytest.raises(ValueError):
            _ = ref.branch
    else:
        assert ref.branch == branch
        assert CampaignRef.from_ref(branch) == ref  # the short name reads back the same


@pytest.mark.parametrize(
    "name",
    [
        "main",
        "refs/heads/main",
        "campaign/demo",  # the namespace alone
        "refs/heads/campaign/demo/scratch",  # a branch in the namespace that is no campaign ref
        "refs/heads/campaign/demo/round-x",
        "refs/heads/campaign/demo/round-",
        "refs/heads/campaign/demo/sub/round-2",  # nested: never a round of `demo`
        "refs/campaign/demo/main",  # main is a branch, not under refs/campaign
        "refs/campaign/demo/pinned/round-2",
        "refs/notes/campaign/verdict",
        # Round 1 is the baseline, a leading zero a second name, 10^20 no number the tool gives
        # (a pull brought such branches into the lineage, and the next round opened as 10^20 + 1).
        "refs/heads/campaign/demo/round-0",
        "refs/heads/campaign/demo/round-1",
        "refs/heads/campaign/demo/round-02",
        "refs/campaign/demo/rejected/round-1",
        "refs/heads/campaign/demo/round-99999999999999999999",
    ],
)
def test_other_refs_are_not_campaign_refs(name: str) -> None:
    assert CampaignRef.from_ref(name) is None


def test_owner_is_the_campaign_whose_namespace_holds_a_branch() -> None:
    assert CampaignRef.owner("campaign/demo/scratch") == "demo"
    assert CampaignRef.owner("refs/heads/campaign/demo/round-2") == "demo"
    assert CampaignRef.owner("refs/heads/feature/x") is None
    assert CampaignRef.owner("campaign") is None


def test_prefixes_match_what_the_refs_start_with() -> None:
    assert str(CampaignRef.round_branch("d", 2)).startswith(CampaignRef.branches_prefix("d"))
    assert str(CampaignRef.main("d")).startswith(CampaignRef.branches_prefix())
    assert str(CampaignRef.rejected("d", 2)).startswith(CampaignRef.rejected_prefix("d"))
    assert CampaignRef.from_ref(str(CampaignRef.rejected("d", 2))).kind == RefKind.REJECTED  # type: ignore[union-attr]
    assert str(CampaignRef.heat("d", 2)).startswith(CampaignRef.heat_prefix("d"))
    assert CampaignRef.from_ref(str(CampaignRef.heat("d", 2))).kind == RefKind.HEAT  # type: ignore[union-attr]
