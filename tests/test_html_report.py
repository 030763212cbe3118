"""`git campaign report --html`, opened in a real headless Chromium: the lineage rows and the images
render (the page is self-contained: the browser runs with networking off)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch_campaign import with_rounds  # noqa: E402

from gitcampaign.cli import main  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
    "--disable-component-update",
    "--disable-background-networking",  # the machine has no network; Chromium would retry forever
]


@pytest.fixture
def page_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    with_rounds(root)
    out = tmp_path / "review" / "campaign.html"
    assert main(["-C", str(root), "report", "--html", "-o", str(out)]) == 0
    return out


def test_page_content(page_file: Path) -> None:
    html = page_file.read_text()
    assert html.count('<tr class="lineage') == 4
    assert "http://" not in html and "https://" not in html  # nothing to fetch
    for text in ("bigger tiles", "smaller tiles", "a friendlier harness", "harness_changed", "kernel.py"):
        assert text in html, text
    assert 'id="round-3"' in html and "-13.64%" in html  # per-shape deltas of the rejected round


@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="needs Debian's chromium (CI installs it)"
)
def test_page_renders_in_headless_chromium(page_file: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    assert CHROMIUM is not None, "CI must install chromium (.ci/run)"
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            rows = page.locator("#lineage tbody tr")
            assert rows.count() == 4
            assert [rows.nth(i).locator("td.status").inner_text() for i in range(4)] == [
                "baseline",
                "accepted",
                "rejected",
                "rejected",
            ]
            assert rows.nth(1).bounding_box()["height"] > 0  # laid out, not hidden
            images = page.evaluate(
                "[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])"
            )
            assert len(images) == 5  # the campaign figure and one per representative shape
            assert all(done and width > 400 and height > 200 for done, width, height in images)
            assert page.locator("section.round").count() == 3
        finally:
            browser.close()
