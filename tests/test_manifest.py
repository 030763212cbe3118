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
