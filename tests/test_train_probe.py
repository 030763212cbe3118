"""The training-step probe on the CPU: the torch backend at the `small` size (fast), one Triton run.

The probe is a template run as a script, so it is loaded from its file; running it in-process uses
this repository's kernels, and one subprocess run proves the copied script stands alone.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPO_ROOT / "gitcampaign" / "templates" / "train_probe.py"
BACKEND_ENVS = ("KERNELS_GEMM_BACKEND", "KERNELS_GROUPED_GEMM_BACKEND", "KERNELS_QUANT_BACKEND")
SMALL = ["--size", "small", "--steps", "3", "--warmup", "1"]


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The probe module; the backend env vars it sets are restored after the test."""
    for name in BACKEND_ENVS:
        monkeypatch.setenv(name, os.environ.get(name, "triton"))
    spec = importlib.util.spec_from_file_location("train_probe_under_test", TEMPLATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run(probe: ModuleType, tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "probe.json"
    code = probe.main([*args, "--json", str(out)])
    return code, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.parametrize(
    "op",
    [
        "gemm",
        "gemm_fp8_tensorwise",
        "gemm_fp8_rowwise",
        "gemm_fp8_blockwise",
        "grouped_gemm",
        "quantize_fp8_tensorwise",
        "quantize_fp8_rowwise",
        "quantize_fp8_blockwise",
    ],
)
def test_every_op_trains_and_reports(probe: ModuleType, tmp_path: Path, op: str) -> None:
    code, result = run(probe, tmp_path, "--op", op, "--backend", "torch", *SMALL)
    assert code == 0
    assert (result["op"], result["backend"], result["clock"]) == (op, "torch", "perf_counter")
    assert len(result["step_ms"]) == 3 and all(ms > 0 for ms in result["step_ms"])
    assert result["median_ms"] == statistics.median(result["step_ms"])
    assert len(result["loss"]) == 3 and result["loss_finite"]
    # The target is a teacher 10% away from the block: the loss starts small against the output's
    # own scale, so a block that does not compute what it should is far off.
    assert 0.0 < result["loss"][0] < 0.1 * result["out_ms"][0]
    assert len(result["out_ms"]) == 3 and 0.0 < result["op_rel_error"] < 0.1
    # Fresh inputs every step: consecutive losses are never bit-identical.
    assert len(set(result["loss"])) == 3


def test_triton_and_torch_train_alike_from_the_same_seed(probe: ModuleType, tmp_path: Path) -> None:
    """The comparison VALIDATE relies on: same seed, same data, same trajectory up to rounding.
    fp16 compute with fp32 accumulation on 64-wide reductions differs by ~1e-3 relative per step."""
    _, torch_run = run(probe, tmp_path, "--op", "gemm", "--backend", "torch", *SMALL)
    _, triton_run = run(probe, tmp_path, "--op", "gemm", "--backend", "triton", *SMALL)
    _, other_seed = run(probe, tmp_path, "--op", "gemm", "--backend", "torch", "--seed", "1", *SMALL)
    for mine, reference in zip(triton_run["loss"], torch_run["loss"], strict=True):
        assert math.isclose(mine, reference, rel_tol=1e-2)
    assert not math.isclose(other_seed["loss"][0], torch_run["loss"][0], rel_tol=1e-2)


def test_non_finite_loss_fails(probe: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernels.gemm

    real_gemm = kernels.gemm.gemm
    monkeypatch.setattr(kernels.gemm, "gemm", lambda a, b: real_gemm(a, b) * float("nan"))
    code, result = run(probe, tmp_path, "--op", "gemm", "--backend", "torch", *SMALL)
    assert code == 1
    assert result["loss_finite"] is False


def test_routing_is_fresh_and_skewed(probe: ModuleType) -> None:
    """Every step routes anew, every token to top_k experts, with uneven loads (what a constexpr
    per-group M or a tile-divisibility assumption would get wrong)."""
    spec = probe.OPS["grouped_gemm"]
    size = probe.SIZES["small"]
    block = probe.Block(spec, {}, size, torch.device("cpu"), torch.float32, seed=0)
    routings = [block._routing() for _ in range(4)]
    for routing in routings:
        sizes = routing["group_sizes"]
        assert int(sizes.sum()) == size.tokens * size.top_k
        assert sizes.max() > sizes.float().mean()  # skewed, not uniform
        counts = torch.bincount(routing["token_of_row"], minlength=size.tokens)
        assert torch.equal(counts, torch.full_like(counts, size.top_k))
    assert not all(torch.equal(routings[0]["group_sizes"], r["group_sizes"]) for r in routings[1:])


def test_usage_errors_exit_3(probe: ModuleType) -> None:
    assert probe.main(["--op", "gemm", "--steps", "0"]) == 3
    assert probe.main(["--op", "no_such_op"]) == 3


def test_copied_probe_stands_alone(tmp_path: Path) -> None:
    """As `prepare` installs it: campaigns/NAME/train_probe.py, kernels two levels up, no gitcampaign."""
    root = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    script = root / "campaigns" / "demo" / "train_probe.py"
    script.parent.mkdir(parents=True)
    shutil.copy(TEMPLATE, script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    completed = subprocess.run(
        [
            sys.executable,
            str(script),
            "--op",
            "gemm",
            "--backend",
            "torch",
            "--size",
            "small",
            "--steps",
            "2",
            "--warmup",
            "0",
            "--json",
            "out/probe.json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert result["steps"] == 2 and result["loss_finite"]
    assert not re.search(r"^\s*(import|from)\s+gitcampaign", TEMPLATE.read_text(), re.MULTILINE)


def test_loss_trajectory_catches_what_only_training_shows(
    probe: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VALIDATE's comparison: a stale weight cache (keyed without `_version`) and an output served
    from the previous step leave the incumbent's trajectory; a 5% error (the harness's to catch) and
    the honest Triton kernel against torch stay within the precision's tolerance."""
    import kernels.gemm
    from gitcampaign.commands.validate import loss_divergence

    steps = ["--size", "small", "--steps", "8", "--warmup", "1"]
    _, incumbent = run(probe, tmp_path, "--op", "gemm", "--backend", "torch", *steps)
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

    for cheat in (stale_weight_gemm, previous_output_gemm):
        monkeypatch.setattr(kernels.gemm, "gemm", cheat)
        _, candidate = run(probe, tmp_path, "--op", "gemm", "--backend", "torch", *steps)
        assert loss_divergence(incumbent, candidate), cheat.__name__
    monkeypatch.setattr(kernels.gemm, "gemm", lambda a, b: real_gemm(a, b) * 1.05)
    _, off = run(probe, tmp_path, "--op", "gemm", "--backend", "torch", *steps)
    assert loss_divergence(incumbent, off) is None
    monkeypatch.setattr(kernels.gemm, "gemm", real_gemm)
    _, honest = run(probe, tmp_path, "--op", "gemm", "--backend", "triton", *steps)
    assert loss_divergence(incumbent, honest) is None
