"""The training probe (the frozen harness's `--train-probe`), built from each op spec's parameters
and activations, on the CPU: every shipped op trains, the same seed gives the same trajectory, and
the comparison VALIDATE makes catches what only training shows.

In-process runs use this repository's kernels (`--root`, `--op-spec`: the package's own options);
one subprocess run proves the frozen file stands alone, as `prepare` writes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import yaml

from gitcampaign.harness.ops import spec_of
from gitcampaign.transfer import loss_divergence, per_shape
from tests.harness_build import frozen_module, write_harness

REPO_ROOT = Path(__file__).resolve().parents[1]
BACKEND_ENVS = ("KERNELS_GEMM_BACKEND", "KERNELS_GROUPED_GEMM_BACKEND", "KERNELS_QUANT_BACKEND")
SHAPES = {
    "gemm": {"label": "s", "M": 64, "N": 64, "K": 64},
    "grouped_gemm": {"label": "s", "B": 4, "M": 96, "N": 64, "K": 64, "dist": "hot_half"},
    "quantize_fp8": {"label": "s", "M": 64, "K": 256},
}


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The frozen harness; the backend variables and sys.path it sets are restored after the test."""
    for name in BACKEND_ENVS:
        monkeypatch.setenv(name, os.environ.get(name, "triton"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    return frozen_module()


def shape_of(op: str) -> dict[str, Any]:
    return next(shape for prefix, shape in SHAPES.items() if op.startswith(prefix))


def run(harness: ModuleType, tmp_path: Path, op: str, backend: str, *args: str) -> tuple[int, dict[str, Any]]:
    out, shapes = tmp_path / f"{op}-{backend}.json", tmp_path / "shapes.yaml"
    shapes.write_text(yaml.safe_dump([shape_of(op)]))
    found = spec_of(op)
    assert found is not None
    code = harness.main(
        ["--train-probe", "--json", str(out), "--shapes-file", str(shapes), "--op", op, "--backend", backend]
        + ["--op-spec", str(found[0]), "--root", str(REPO_ROOT), *args]
    )
    return code, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.parametrize(
    ("op", "backend"),
    [
        ("gemm", "torch"),
        ("gemm_fp8_rowwise", "triton"),  # torch's fp8 path needs CUDA; the interpreter runs ours
        ("grouped_gemm", "torch"),
        ("quantize_fp8_blockwise", "torch"),
    ],
)
def test_every_op_trains_and_reports(harness: ModuleType, tmp_path: Path, op: str, backend: str) -> None:
    code, result = run(harness, tmp_path, op, backend, "--steps", "3", "--warmup", "1")
    assert code == 0
    assert (result["op"], result["backend"], result["clock"], result["layers"]) == (
        op,
        backend,
        "perf_counter",
        1,
    )
    # The shape asked for (on a GPU, then the spec's small shape where the host's launch cost shows).
    assert [shape["label"] for shape in result["shapes"]] == ["s"]
    for shape in result["shapes"]:
        assert len(shape["step_ms"]) == 3 and all(ms > 0 for ms in shape["step_ms"])
        assert len(shape["loss"]) == 3 and len(shape["out_ms"]) == 3
        # The target is a teacher 10% away: the loss is small against the output's own scale.
        assert 0.0 <= shape["loss"][0] < 0.1 * shape["out_ms"][0]
    assert result["loss_finite"]
    if op.startswith("quantize"):
        assert result["op_rel_error"] == 0.0  # exact: the losses of two honest kernels are equal
    else:
        assert 0.0 < result["op_rel_error"] < 0.1
        # Fresh activations every step: consecutive losses are never bit-identical.
        assert len(set(result["shapes"][0]["loss"])) == 3


def test_triton_and_torch_train_alike_from_the_same_seed(harness: ModuleType, tmp_path: Path) -> None:
    """The comparison VALIDATE relies on: same seed, same data, same trajectory up to rounding."""
    steps = ("--steps", "3", "--warmup", "1")
    _, torch_run = run(harness, tmp_path, "gemm", "torch", *steps)
    _, triton_run = run(harness, tmp_path, "gemm", "triton", *steps)
    _, other_seed = run(harness, tmp_path, "gemm", "torch", "--seed", "1", *steps)
    incumbent, candidate = per_shape(torch_run), per_shape(triton_run)
    assert all(loss_divergence(incumbent[label], candidate[label]) is None for label in incumbent)
    assert loss_divergence(incumbent["s"], per_shape(other_seed)["s"]) is not None


def test_non_finite_loss_fails(harness: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernels.gemm

    real_gemm = kernels.gemm.gemm
    monkeypatch.setattr(kernels.gemm, "gemm", lambda a, b: real_gemm(a, b) * float("nan"))
    code, result = run(harness, tmp_path, "gemm", "torch", "--steps", "2", "--warmup", "0")
    assert code == 1
    assert result["loss_finite"] is False


def test_parameters_persist_and_activations_and_routing_are_fresh(harness: ModuleType) -> None:
    """The expert weights are the same tensors every step, updated in place (their version moves);
    the rows and the routing are drawn anew, skewed as the shape's distribution says."""
    found = spec_of("grouped_gemm")
    assert found is not None
    op = harness.Op(harness.load_spec_module(found[0]), "grouped_gemm", str(found[0]))
    op.load_kernel("torch", False, REPO_ROOT)
    shape = harness.parse_shapes([SHAPES["grouped_gemm"]], "test", op.info)[0]
    state = harness.ProbeShape(op, shape, torch.device("cpu"), torch.float32, seed=0, steps=4)
    weight = state.parameters["b"]
    steps = [state.data() for _ in range(4)]
    for inputs, _ in steps:
        assert inputs.values["b"] is weight
        sizes = inputs.values["group_sizes"]
        assert int(sizes.sum()) == 96 and int(sizes.max()) == 48  # hot_half: one expert, half the rows
    assert len({tuple(inputs.values["group_sizes"].tolist()) for inputs, _ in steps}) > 1
    assert not torch.equal(steps[0][0].values["a"], steps[1][0].values["a"])
    version = weight._version
    state.step(*steps[0])
    assert weight._version > version


def test_usage_errors_exit_3(harness: ModuleType, tmp_path: Path) -> None:
    shapes = tmp_path / "s.yaml"
    shapes.write_text(yaml.safe_dump([SHAPES["gemm"]]))
    assert (
        harness.main(["--train-probe", "--json", "x.json", "--shapes-file", str(shapes), "--steps", "0"]) == 3
    )
    assert harness.main(["--train-probe", "--shapes-file", str(shapes)]) == 3  # no --json


def test_the_frozen_probe_stands_alone(tmp_path: Path) -> None:
    """As `prepare` writes it: campaigns/NAME/quick_test_bench.py with op_spec.py beside it, kernels
    two levels up, no gitcampaign importable."""
    root = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    script = write_harness(root, "gemm", "torch", campaign="demo")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump([SHAPES["gemm"]]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path / "blocker")  # a `gitcampaign` that cannot be imported
    (tmp_path / "blocker" / "gitcampaign").mkdir(parents=True)
    (tmp_path / "blocker" / "gitcampaign" / "__init__.py").write_text("raise ImportError('not here')\n")
    completed = subprocess.run(
        [sys.executable, str(script), "--train-probe", "--json", "out/probe.json", "--shapes-file", "s.yaml"]
        + ["--steps", "2", "--warmup", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert result["steps"] == 2 and result["loss_finite"]
    assert not re.search(r"^\s*(import|from)\s+gitcampaign", script.read_text(), re.MULTILINE)


def test_loss_trajectory_catches_what_only_training_shows(
    harness: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VALIDATE's comparison: a stale weight cache (keyed without `_version`) and an output served
    from the previous step leave the incumbent's trajectory; a 5% error (the harness's to catch) and
    the honest Triton kernel against torch stay within the precision's tolerance."""
    import kernels.gemm

    steps = ("--steps", "8", "--warmup", "1")
    _, incumbent = run(harness, tmp_path, "gemm", "torch", *steps)
    real_gemm = kernels.gemm.gemm
    stale_weights: dict[int, torch.Tensor] = {}
    previous: dict[tuple[int, ...], torch.Tensor] = {}

    def stale_weight_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return real_gemm(a, stale_weights.setdefault(id(b), b.detach().clone()) + 0 * b)

    def previous_output_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = real_gemm(a, b)
        served = previous.get((*a.shape, *b.shape), out.detach())
        previous[(*a.shape, *b.shape)] = out.detach()
        return served + 0 * out

    def diverged(candidate: dict[str, Any]) -> bool:
        return loss_divergence(per_shape(incumbent)["s"], per_shape(candidate)["s"]) is not None

    for cheat in (stale_weight_gemm, previous_output_gemm):
        monkeypatch.setattr(kernels.gemm, "gemm", cheat)
        assert diverged(run(harness, tmp_path, "gemm", "torch", *steps)[1]), cheat.__name__
    monkeypatch.setattr(kernels.gemm, "gemm", lambda a, b: real_gemm(a, b) * 1.05)
    assert not diverged(run(harness, tmp_path, "gemm", "torch", *steps)[1])
    monkeypatch.setattr(kernels.gemm, "gemm", real_gemm)
    assert not diverged(run(harness, tmp_path, "gemm", "triton", *steps)[1])
