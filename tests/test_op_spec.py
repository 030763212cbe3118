"""Op specs (docs/op-spec.md): the declarations the tool reads without running a spec, the errors a
bad one gets, and the one registry of shipped ops that every consumer reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gitcampaign.harness.contract import Shape, UsageError, parse_shapes, spec_info, spec_literals
from gitcampaign.harness.ops import SPEC_DIR, registry
from tests.harness_build import spec_module

REPO_ROOT = Path(__file__).resolve().parents[1]
GOOD = """
NAME = "scale"
MODULE = "scale"
FIELDS = {"M": "int", "alpha": {"type": "float", "default": 2.0}, "mode": {"type": "str", "column": False}}
OUTPUTS = ("out",)
CHECKS = {"out_snr": {"of": "out"}, "dx_close": {"of": "x.grad", "rule": "close", "rtol": 1e-2}}
UNIT = "GB/s"
BACKWARD = True
"""


def info_of(text: str):  # type: ignore[no-untyped-def]
    return spec_info(spec_literals(text, "spec.py"), "spec.py")


def test_a_spec_is_read_without_running_it() -> None:
    info = info_of(GOOD + "\nimport no_such_module\nraise SystemExit('never run')\n")
    assert (info.name, info.unit, info.backward, info.metric) == ("scale", "GB/s", True, "Forward GB/s")
    assert info.columns == ("M", "alpha")  # `mode` is a field, not a column
    assert info.header() == (
        "label,M,alpha,Check,Forward GB/s,Forward GB/s_stddev,Backward GB/s,Backward GB/s_stddev,"
        "Forward Time (ms),Backward Time (ms),out_snr,dx_close"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('UNIT = "GB/s"', 'UNIT = "GFLOPS"'), "UNIT must be one of"),
        (("CHECKS = {", "CHECKS = {} or {"), "must be a literal"),
        (('"of": "out"}', '"of": "output"}'), "'output', which is not in OUTPUTS"),
        (("BACKWARD = True", "BACKWARD = False"), "compares x.grad, but BACKWARD is not True"),
        (('"rtol": 1e-2', '"bogus": 1'), "unknown options ['bogus']"),
        (('"M": "int"', '"M": "integer"'), "type must be one of"),
        (('NAME = "scale"', 'NAME = "Scale!"'), "NAME must be a non-empty string matching"),
        (('"M": "int",', '"M": "int", "out_snr": "int",'), "share a name"),
        (('OUTPUTS = ("out",)', 'METRIC = "Forward TFLOPS"\nOUTPUTS = ("out",)'), "METRIC 'Forward TFLOPS'"),
    ],
)
def test_a_bad_declaration_names_itself(change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(UsageError, match="docs/op-spec.md") as raised:
        info_of(GOOD.replace(old, new, 1))
    assert message in str(raised.value)


def test_shapes_are_checked_against_the_declared_fields() -> None:
    info = info_of(GOOD)
    (shape,) = parse_shapes([{"label": "a", "M": 8, "mode": "x"}], "shapes.yaml", info)
    assert shape == Shape("a", {"M": 8, "alpha": 2.0, "mode": "x"})  # the default filled in
    assert (shape["alpha"], shape.M) == (2.0, 8)
    with pytest.raises(UsageError, match=r"has no 'mode', which op scale needs"):
        parse_shapes([{"label": "a", "M": 8}], "shapes.yaml", info)
    with pytest.raises(UsageError, match=r"fields \['N'\] that op scale does not declare"):
        parse_shapes([{"label": "a", "M": 8, "N": 2, "mode": "x"}], "shapes.yaml", info)
    with pytest.raises(UsageError, match="alpha = 'big' is not a finite number"):
        parse_shapes([{"label": "a", "M": 8, "alpha": "big", "mode": "x"}], "shapes.yaml", info)
    with pytest.raises(UsageError, match="may only tighten"):
        parse_shapes([{"label": "a", "M": 8, "mode": "x", "min_snr_db": 5}], "shapes.yaml", info)


def test_every_shipped_spec_is_all_literals_and_functions() -> None:
    """What the tool reads statically is what the harness runs: no declaration computed at import."""
    for op, (path, info) in registry().items():
        module = spec_module(op)
        literals = spec_literals(path.read_text(), str(path))
        declared = {
            name: value for name, value in vars(module).items() if name.isupper() and name != "VARIANT"
        }
        assert declared == {name: value for name, value in literals.items() if name != "VARIANT"}, op
        assert spec_info(vars(module), str(path)) == info
        for function in ("inputs", "candidate", "reference", "work"):
            assert callable(getattr(module, function)), (op, function)


def _literal_op_lists(path: Path, names: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            elements = node.keys if isinstance(node, ast.Dict) else node.elts
            named = [e.value for e in elements if isinstance(e, ast.Constant) and e.value in names]
            if len(named) >= 2:
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {named}")
    return found


def test_no_consumer_keeps_a_list_of_ops_of_its_own() -> None:
    """The registry (one spec file an op) is the only list: the harness, the probe, crosscheck, the
    shape presets, the CLI and the benchmarks read it. A literal naming two ops elsewhere is a list
    that would go stale when an op is added."""
    names = set(registry())
    # Not consumers: benchmarks/dev/ (developer scripts written for particular kernels), and the
    # benchmarks of the kernel library's public functions, each against its own vendor path.
    per_kernel = {REPO_ROOT / "benchmarks" / name for name in ("host_cost.py", "train_step.py", "vendor.py")}
    sources = [
        path
        for folder in ("gitcampaign", "benchmarks")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if SPEC_DIR not in path.parents
        and REPO_ROOT / "benchmarks" / "dev" not in path.parents
        and path not in per_kernel
    ]
    assert [hit for path in sources for hit in _literal_op_lists(path, names)] == []


def test_adding_an_op_is_one_spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new spec file in the registry's folder is an op of the harness, the CLI and init."""
    import gitcampaign.harness.ops as ops

    folder = tmp_path / "ops"
    folder.mkdir()
    for path in SPEC_DIR.glob("*.py"):
        (folder / path.name).write_text(path.read_text())
    (folder / "scale.py").write_text(GOOD)
    monkeypatch.setattr(ops, "SPEC_DIR", folder)
    ops.registry.cache_clear()
    try:
        assert "scale" in ops.op_names() and ops.spec_of("scale")[1].header().startswith("label,M,alpha,")  # type: ignore[index]
    finally:
        ops.registry.cache_clear()
