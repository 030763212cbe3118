"""A campaign on the fake CPU project with a baseline and decided rounds, for the review tools' tests
(plots, the HTML page, the MCP server): built through the same command functions as the CLI."""

from __future__ import annotations

from pathlib import Path

from commands.test_loop import NAME, commit_round, options
from fake_project import git, make_project

from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate

__all__ = ["NAME", "commit_round", "init_options", "with_baseline", "with_rounds"]


def init_options(**overrides: object) -> InitOptions:
    """The loop tests' campaign, with room for more rounds."""
    return options(**{"max_iterations": 5, **overrides})


def with_baseline(root: Path) -> Path:
    """The fake project with an initialised campaign and its baseline (cwd must be `root`)."""
    make_project(root)
    init(root, init_options())
    baseline(root, None)
    return root


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
