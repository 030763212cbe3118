"""ruff, mypy and pytest never walk a campaign's frozen copies (`campaigns/NAME/quick_test_bench.py`,
`train_probe.py`): they live on the campaign's branches, which a checkout of one brings into the tree,
and they are frozen, so a finding there could never be fixed. Each tool runs with this repository's
pyproject.toml on a scratch tree that holds one such copy, broken for every tool."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# An unused import (ruff F401), a type error (mypy) and a failing test (pytest), in a frozen copy.
FROZEN = "import os\n\nx: int = 'not an int'\n\n\ndef test_frozen() -> None:\n    assert False\n"
OWN = "from __future__ import annotations\n\n\ndef test_own() -> None:\n    assert True\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "tests").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "pyproject.toml", root)
    (root / "tests" / "test_own.py").write_text(OWN)
    (root / "gitcampaign").mkdir()
    (root / "gitcampaign" / "__init__.py").write_text("")
    frozen = root / "campaigns" / "c"
    frozen.mkdir(parents=True)
    for name in ("quick_test_bench.py", "train_probe.py", "test_frozen.py"):
        (frozen / name).write_text(FROZEN)
    return root


def run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=tree, capture_output=True, text=True)


def test_ruff_skips_campaigns(tree: Path) -> None:
    assert run(tree, "ruff", "check", "--no-cache", ".").returncode == 0
    # A caller that names the file (pre-commit passes the staged paths) is excluded too.
    named = run(tree, "ruff", "check", "--no-cache", "campaigns/c/quick_test_bench.py")
    assert named.returncode == 0, named.stdout


def test_ruff_still_lints_the_rest(tree: Path) -> None:
    """The exclusion is not a blanket one: the same file outside campaigns/ is reported."""
    (tree / "gitcampaign" / "broken.py").write_text(FROZEN)
    assert run(tree, "ruff", "check", "--no-cache", ".").returncode == 1


def test_pytest_skips_campaigns(tree: Path) -> None:
    for args in ((), (".",)):
        done = run(tree, "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *args)
        assert done.returncode == 0, done.stdout
        assert "1 passed" in done.stdout


def test_mypy_skips_campaigns(tree: Path) -> None:
    done = run(tree, "mypy", "--no-incremental", ".")
    assert done.returncode == 0, done.stdout
