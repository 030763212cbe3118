"""Cheats the lint cannot see are caught by the quick harness at run time.

Each `tests/cheats/harness_*.py.txt` is a planted `gemm` named by the harness check that catches it;
its docstring's `caught:` line is the text that check prints. All of them run in one harness process
(one shape each, selected by K; an honest shape first), since starting the harness is what costs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gitcampaign.lint import lint_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_quick_harness import harness_repo, rows, run_harness  # noqa: E402

CHEATS = Path(__file__).parent / "cheats"
# The seal cheat rebinds torch for the rest of the process, so it runs last.
FIXTURES = sorted(p.stem.removesuffix(".py") for p in CHEATS.glob("harness_*.py.txt"))
FIXTURES.sort(key=lambda name: name.startswith("harness_seal"))

DISPATCH = """
import importlib

CHEATS = {cheats!r}


def gemm(a, b):
    if a.shape[1] == 64:
        return a @ b.T
    return importlib.import_module("kernels." + CHEATS[a.shape[1] - 65]).gemm(a, b)
"""


def caught_text(name: str) -> str:
    match = re.search(r"^caught: (.+)$", (CHEATS / f"{name}.py.txt").read_text(), re.MULTILINE)
    assert match, f"{name} must say which harness check catches it (a `caught:` line)"
    return match[1].strip().removesuffix('"""').strip()


def test_every_harness_cheat_passes_the_lint() -> None:
    """The point of these: a static rule can be renamed around, so the run-time check is the gate."""
    for name in FIXTURES:
        findings = lint_source((CHEATS / f"{name}.py.txt").read_text(), name)
        assert not [f for f in findings if f.blocking], name


def test_every_harness_cheat_fails_its_check(tmp_path: Path) -> None:
    kernels = {f"{name}.py": (CHEATS / f"{name}.py.txt").read_text() for name in FIXTURES}
    kernels["gemm.py"] = DISPATCH.format(cheats=FIXTURES)
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", kernels)
    shapes: list[dict[str, object]] = [{"label": "honest", "M": 32, "N": 24, "K": 64}]
    shapes += [{"label": name, "M": 32, "N": 24, "K": 65 + i} for i, name in enumerate(FIXTURES)]
    process, csv_text = run_harness(harness, shapes, "--repeats", "2")
    assert csv_text is not None, process.stderr
    checks = {row["label"]: row["Check"] for row in rows(csv_text)}
    assert checks.pop("honest") == "PASS", process.stderr
    assert checks == {name: "FAIL" for name in FIXTURES}, process.stderr
    for name in FIXTURES:
        text = caught_text(name)
        assert any(f"{name}: FAIL: " in line and text in line for line in process.stderr.splitlines()), (
            name,
            text,
            process.stderr,
        )
