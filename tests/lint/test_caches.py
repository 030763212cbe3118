"""W1, W2, W3 (gitcampaign/lint/caches.py): caches keyed on a tensor, against their fixtures."""

from __future__ import annotations

import pytest

from gitcampaign.lint import lint_source
from gitcampaign.lint.caches import Caches
from tests.lint.cheats import cheats_of, check_cheat_blocks, check_fixture, fixtures_of


@pytest.mark.parametrize("fixture", fixtures_of(Caches))
def test_fixture_findings_match_markers(fixture: str) -> None:
    check_fixture(fixture, Caches)


@pytest.mark.parametrize("fixture", cheats_of(Caches))
def test_each_cheat_blocks_under_its_rule(fixture: str) -> None:
    check_cheat_blocks(fixture)


def test_weight_cache_with_version_is_w1_and_without_is_w2() -> None:
    """The one difference between the allowed weight cache and a stale one is `weight._version`."""
    allowed = "import torch\n_c = {}\ndef f(weight: torch.nn.Parameter):\n    return _c[(id(weight), weight._version)]\n"
    stale = "import torch\n_c = {}\ndef f(weight: torch.nn.Parameter):\n    return _c[(id(weight), weight.shape)]\n"
    activation = "import torch\n_c = {}\ndef f(a):\n    return _c[(id(a), a._version)]\n"
    assert [(f.rule, f.blocking) for f in lint_source(allowed, "allowed.py")] == [("W1", False)]
    assert [(f.rule, f.blocking) for f in lint_source(stale, "stale.py")] == [("W2", True)]
    assert [(f.rule, f.blocking) for f in lint_source(activation, "activation.py")] == [("W2", True)]


def test_version_of_another_tensor_does_not_make_a_weight_cache() -> None:
    """`_version` must belong to the same weight whose id is in the key."""
    source = "_c = {}\ndef f(weight, w2):\n    return _c[(id(weight), w2._version)]\n"
    assert {f.rule for f in lint_source(source, "mixed.py")} == {"W2"}


def test_descriptor_key_is_a_result_cache_once_a_tensor_is_stored_under_it() -> None:
    """`data_ptr` with the tensor's shape and strides describes live memory; storing a computed
    tensor under that key makes it a cache of results, keyed on an address."""
    descriptor = "_d = {}\ndef f(t):\n    key = (t.data_ptr(), t.shape, t.stride())\n    return _d.get(key)\n"
    results = descriptor.replace("    return _d.get(key)\n", "    _d[key] = t.float()\n    return _d[key]\n")
    assert lint_source(descriptor, "descriptor.py") == []
    assert {(f.rule, f.line) for f in lint_source(results, "results.py")} == {("W2", 4), ("W2", 5)}
