"""The front page: short, its two commands the ones CI runs, and every page of docs/ one link away."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
MAX_LINES = 150  # about two screens


def links(path: Path) -> set[Path]:
    """The local files a Markdown file links to, resolved."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    return {(path.parent / target).resolve() for target in targets if "://" not in target}


def test_the_readme_fits_two_screens() -> None:
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_the_readme_runs_what_ci_runs() -> None:
    text = README.read_text()
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "git campaign demo" in text
    test_command = "python -m pytest -q -n auto"
    assert f"\n{test_command}\n" in text and f"\n{test_command}\n" in ci


def test_every_page_is_one_link_from_the_readme() -> None:
    linked = links(README)
    pages = [*(REPO_ROOT / "docs").glob("*.md"), REPO_ROOT / "BENCHMARKS.md"]
    pages += [REPO_ROOT / "campaigns" / "README.md", REPO_ROOT / "docs" / "benchmarks" / "README.md"]
    assert [page.name for page in pages if page.resolve() not in linked] == []


def test_the_session_index_lists_every_session() -> None:
    index = REPO_ROOT / "docs" / "benchmarks" / "README.md"
    sessions = {path.resolve() for path in index.parent.glob("*.md")} - {index.resolve()}
    assert sessions and sessions <= links(index)
