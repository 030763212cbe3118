"""Test-wide setup: Triton's interpreter without a GPU, a hermetic git, and a guard on the real repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# Must be set before any module defines a @triton.jit kernel.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

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
