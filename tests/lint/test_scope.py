"""Scope inference (gitcampaign/lint/scope.py): what a name is decides, never what it is called."""

from __future__ import annotations

import ast

import pytest

from gitcampaign.lint.names import Names
from gitcampaign.lint.scope import OTHER, TENSOR, Inference, Scope


def _scopes(source: str) -> tuple[Inference, dict[str, Scope]]:
    """Inference for `source`, and the scope of each top-level function (module scope as parent)."""
    tree = ast.parse(source)
    inference = Inference(Names(tree, frozenset()))
    module = inference.build(tree, None, [])
    scopes: dict[str, Scope] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            scopes[node.name] = inference.function_scope(node, module)
        elif isinstance(node, ast.ClassDef):
            owner = inference.class_scope(node, module)
            for method in node.body:
                if isinstance(method, ast.FunctionDef):
                    scopes[f"{node.name}.{method.name}"] = inference.function_scope(method, owner)
    return inference, scopes


KINDS = """import torch
def f(a: torch.Tensor, n: int, scale=1.0, maybe=None, raw=None):
    b = a.contiguous()
    rows = a.shape[0]
    M, K = a.shape
    ratio = float(scale)
    big = rows > 4
    ptr = raw.data_ptr()
    out = a @ b
    x = torch.empty(M, K)
"""


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("a", TENSOR),  # annotated
        ("b", TENSOR),  # a tensor method's result
        ("out", TENSOR),  # a matmul
        ("x", TENSOR),  # a public torch function
        ("raw", TENSOR),  # used as only a tensor is (`.data_ptr()`)
        ("n", OTHER),  # annotated otherwise
        ("scale", OTHER),  # a constant default
        ("rows", OTHER),  # `x.shape[0]`
        ("M", OTHER),  # unpacked from a shape
        ("ratio", OTHER),  # float()
        ("big", OTHER),  # a comparison
        ("maybe", None),  # `=None` is an optional tensor as often as not
    ],
)
def test_kind_of_each_name(name: str, kind: str | None) -> None:
    _, scopes = _scopes(KINDS)
    assert scopes["f"].kind(name) == kind


WEIGHTS = """import torch
class Linear(torch.nn.Module):
    def __init__(self, w):
        self.w = w
        self.bias = torch.nn.Parameter(torch.zeros(4))
    def forward(self, x):
        self.saved = x
        w = self.w
        return x
def g(p: torch.nn.Parameter, q: torch.Tensor):
    return p
"""


def test_a_weight_is_module_state_or_a_parameter_never_a_name() -> None:
    inference, scopes = _scopes(WEIGHTS)
    forward, g = scopes["Linear.forward"], scopes["g"]

    def is_weight(text: str, scope: Scope) -> bool:
        return inference.is_weight(ast.parse(text, mode="eval").body, scope)

    assert is_weight("self.w", forward)  # set up at construction
    assert is_weight("self.bias", forward)
    assert not is_weight("self.saved", forward)  # written per call: an activation stash
    assert is_weight("w", forward)  # bound to module state
    assert not is_weight("x", forward)
    assert is_weight("p", g)  # annotated nn.Parameter
    assert not is_weight("q", g)
    assert not is_weight("self.w", scopes["g"])  # outside any class, `self.w` is nobody's state


def test_dicts_are_known_by_construction_or_annotation() -> None:
    source = "from collections import OrderedDict\n_a = {}\n_b = OrderedDict()\n_c: dict[int, int] = make()\n_d = make()\n"
    tree = ast.parse(source)
    module = Inference(Names(tree, frozenset())).build(tree, None, [])
    assert [module.is_dict(name) for name in ("_a", "_b", "_c", "_d")] == [True, True, True, False]
