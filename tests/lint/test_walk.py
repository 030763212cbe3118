"""The walk (gitcampaign/lint/walk.py): device code is skipped, scopes follow functions and classes."""

from __future__ import annotations

from gitcampaign.lint import lint_source

CACHE_IN_KERNEL = """import triton
import triton.language as tl
_c = {}
@triton.jit
def kernel(x_ptr, M_PER_GROUP: tl.constexpr):
    _c[id(x_ptr)] = 1
def host(a):
    return _c[id(a)]
"""


def test_device_code_gets_only_g1_and_host_code_every_rule() -> None:
    findings = lint_source(CACHE_IN_KERNEL, "k.py")
    assert [(f.rule, f.line) for f in findings] == [("G1", 5), ("W2", 8)]


def test_a_torch_or_functools_decorator_is_not_device_code() -> None:
    source = "import torch\n_c = {}\n@torch.compile\ndef f(a):\n    return _c[id(a)]\n"
    assert [f.rule for f in lint_source(source, "f.py")] == ["W2"]


def test_a_lambda_parameter_is_a_key_not_a_tensor() -> None:
    source = "_c = {}\ndef f(d):\n    return sorted(d, key=lambda x: _c[x])\n"
    assert lint_source(source, "f.py") == []
