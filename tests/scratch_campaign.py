"""A campaign on the fake CPU project with a baseline and decided rounds, for the review tools' tests
(plots, the HTML page, the MCP server): built through the same command functions as the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

from fake_project import git, make_project, set_kernel

from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate

NAME = "demo"


def init_options(**overrides: object) -> InitOptions:
    base = dict(
        name=NAME,
        op="fake_gemm",
        metric="step",
        shapes="shapes.yaml",
        quick_command=f"{sys.executable} bench.py",
        test_command=f"{sys.executable} test_kernel.py",
        probe_command="",
        kernel_source="kernel.py",
        pairs=2,
        max_iterations=5,
    )
    base.update(overrides)
    return InitOptions(**base)  # type: ignore[arg-type]


def with_baseline(root: Path) -> Path:
    """The fake project with an initialised campaign and its baseline (cwd must be `root`)."""
    make_project(root)
    init(root, init_options())
    baseline(root, None)
    return root


def commit_round(root: Path, hypothesis: str, speed: float) -> str:
    open_round(root, None, hypothesis)
    set_kernel(root, speed)
    git(root, "commit", "-q", "-am", f"Hypothesis: {hypothesis}\nChange: speed {speed}")
    return git(root, "rev-parse", "HEAD").strip()


def with_rounds(root: Path) -> Path:
    """Baseline, then: accepted (+10%), rejected (slower), rejected by a gate (harness edited)."""
    with_baseline(root)
    commit_round(root, "bigger tiles", 110)
    validate(root, None)
    commit_round(root, "smaller tiles", 95)
    validate(root, None)
    open_round(root, None, "a friendlier harness")
    (root / "bench.py").write_text((root / "bench.py").read_text().replace("speed = ", "speed = 2 * "))
    git(root, "commit", "-q", "-am", "Hypothesis: harness\nChange: harness")
    validate(root, None)
    return root
