"""The manifest: a campaign's committed configuration, parsed with errors that name the field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fixture_campaign import NAME, restore

from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import frozen_changes, parse_manifest


def test_an_old_manifest_parses_and_round_trips(tmp_path: Path) -> None:
    manifest = Campaign(g.open_repo(restore(tmp_path / "old")), NAME).manifest()
    assert manifest.name == NAME and manifest.csv_header is not None and manifest.noise_floor is not None
    assert [s.label for s in manifest.representative()] == manifest.representative_shapes
    assert parse_manifest(manifest.to_yaml(), "again") == manifest
    assert frozen_changes(manifest, manifest) == []
    assert frozen_changes(manifest, replace(manifest, primary_metric="Forward TFLOPS")) == ["primary_metric"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed\n", "not valid YAML"),
        ("- a list\n", "not a YAML mapping"),
        ("name: x\n", "missing field"),
    ],
)
def test_broken_manifests_name_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(CampaignError, match=message) as broken:
        parse_manifest(text, "campaigns/x/manifest.yaml")
    assert "campaigns/x/manifest.yaml" in str(broken.value)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"speedpu": 1.2}, r"performance_target: unknown key\(s\) speedpu"),
        ({"speedup": "fast"}, "performance_target: speedup is str, expected a number"),
        ({"speedup": True}, "performance_target: speedup is bool, expected a number"),
        ({"speedup": -1.0}, "performance_target: speedup = -1.0 must be a finite number above 0"),
        ({"efficiency": 1.5, "peak": 989}, "performance_target: efficiency = 1.5 is outside"),
    ],
)
def test_a_performance_target_is_validated(tmp_path: Path, target: dict[str, object], message: str) -> None:
    manifest = Campaign(g.open_repo(restore(tmp_path / "old")), NAME).manifest()
    with pytest.raises(CampaignError, match=message) as refused:
        parse_manifest(replace(manifest, performance_target=target).to_yaml(), "campaigns/demo/manifest.yaml")  # type: ignore[arg-type]
    assert "campaigns/demo/manifest.yaml" in refused.value.hint
    good = {"speedup": 1.2, "value": 800, "efficiency": 0.8, "peak": 989}
    assert (
        parse_manifest(replace(manifest, performance_target=good).to_yaml(), "x").performance_target == good
    )


def test_the_header_hint_names_the_campaigns_own_harness(tmp_path: Path) -> None:
    manifest = Campaign(g.open_repo(restore(tmp_path / "old")), NAME).manifest()
    builtin = replace(manifest, quick_command=f"python campaigns/{NAME}/quick_test_bench.py --forward-only")
    assert builtin.harness_file == f"campaigns/{NAME}/quick_test_bench.py"
    assert (
        f"git checkout campaign/{NAME}/main -- campaigns/{NAME}/quick_test_bench.py" in builtin.header_hint()
    )
    own = replace(manifest, quick_command="python my_bench.py --fast")
    assert own.harness_file is None and "`python my_bench.py --fast`" in own.header_hint()
    assert "quick_test_bench" not in own.header_hint()
