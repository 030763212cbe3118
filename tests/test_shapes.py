"""Shape files and presets: what a campaign measures, with errors that say which shape is wrong."""

from __future__ import annotations

import pytest
import yaml

from gitcampaign.errors import CampaignError
from gitcampaign.shapes import Shape, dump_shapes, preset, preset_names, shapes_from_data


def test_a_shape_file_round_trips() -> None:
    shapes = [Shape("a", M=64, K=32, N=16), Shape("b", B=2, M=8, N=8, K=8, dist="uniform", min_snr_db=45.0)]
    assert shapes_from_data(yaml.safe_load(dump_shapes(shapes)), "file") == shapes
    assert list(shapes[1].to_dict()) == ["label", "B", "M", "N", "K", "dist", "min_snr_db"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "non-empty"),
        ([{"label": "a", "M": 0}], "M = 0 is not a positive integer"),
        ([{"label": "a", "M": [1]}], "must hold a number"),
        ([{"label": "a", "M": 1, "K": 1}, {"label": "a", "M": 2, "K": 2}], "duplicate labels"),
    ],
)
def test_bad_shape_files_say_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(CampaignError, match=message):
        shapes_from_data(data, "file")


def test_every_preset_builds_distinct_labels() -> None:
    for name in preset_names():
        shapes = preset(name)
        assert shapes and len({s.label for s in shapes}) == len(shapes), name


def test_presets_join_with_commas_and_keep_their_micro_batch_lists() -> None:
    joined = preset("llama3.1-8b:mbs=1,2,llama3.1-70b:mbs=1")
    assert [s.label for s in joined] == [s.label for s in preset("llama3.1-8b:mbs=1,2")] + [
        s.label for s in preset("llama3.1-70b:mbs=1")
    ]
    with pytest.raises(CampaignError, match="more than once"):
        preset("llama3.1-8b:mbs=1,llama3.1-8b:mbs=1")


def test_an_ops_shapes_are_checked_against_its_spec() -> None:
    """Without a spec (a user's own harness) any scalar fields go; with one, its fields exactly."""
    from gitcampaign.harness.ops import spec_of

    gemm = spec_of("gemm")[1]  # type: ignore[index]
    with pytest.raises(CampaignError, match="has no 'K', which op gemm needs") as raised:
        shapes_from_data([{"label": "a", "M": 1, "N": 1}], "file", gemm)
    assert "label, B, M, N, K" in raised.value.hint
    (shape,) = shapes_from_data([{"label": "a", "M": 1, "N": 2, "K": 3}], "file", gemm)
    assert shape.to_dict() == {"label": "a", "B": 1, "M": 1, "N": 2, "K": 3}
