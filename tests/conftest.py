"""Test-wide setup: Triton's interpreter without a GPU, a hermetic git, and a guard on the real repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# On a GPU, each distinct shape of the kernel tests (chosen for the interpreter) would autotune every
# config of its kernel: minutes of compiling and timing in every test run, the campaigns' test gate
# included. The tests check results, not the tuner, so each kernel runs one pinned config unless the
# variable is set already; the quick harness checks the tuned configs on every measured shape.
GPU_TEST_CONFIGS = {
    "KERNELS_GEMM_CONFIG": "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3",
    "KERNELS_GROUPED_GEMM_CONFIG": "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3",
    "KERNELS_GROUPED_GEMM_DB_CONFIG": "BLOCK_M=64,BLOCK_N=128,BLOCK_K=128,GROUP_M=8,num_warps=8,num_stages=3",
    "KERNELS_GEMM_FP8_CONFIG": "BLOCK_M=128,BLOCK_N=128,BLOCK_K=128,GROUP_M=8,num_warps=8,num_stages=3",
    "KERNELS_QUANT_CONFIG": "ELEMS=8192,num_warps=8",
}

# Must be set before any module defines a @triton.jit kernel.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
else:
    for variable, config in GPU_TEST_CONFIGS.items():
        os.environ.setdefault(variable, config)

REPO_ROOT = Path(__file__).resolve().parents[1]
# The shared test helpers (fake_project, fixture_campaign, ...) import by bare name, whichever
# test file is collected first or alone.
sys.path.insert(0, str(Path(__file__).resolve().parent))

HERMETIC_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Campaign Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.invalid",
    "GIT_COMMITTER_NAME": "Campaign Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
}


def _repo_state() -> str:
    """Refs and status of the developer's own checkout, to prove tests never touched it."""
    refs = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return refs


@pytest.fixture(autouse=True)
def hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test gets a fixed git identity, no user config, and a HOME inside its tmp dir."""
    for key, value in HERMETIC_GIT_ENV.items():
        monkeypatch.setenv(key, value)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture(autouse=True, scope="session")
def guard_developer_repo() -> object:
    """Fail the run if any test moved a ref of the repository the tests live in."""
    before = _repo_state()
    yield
    assert _repo_state() == before, "a test changed refs of the developer's own repository"
