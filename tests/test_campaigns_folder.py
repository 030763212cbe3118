"""This repository's own campaigns, as main keeps them: per campaign its manifest, its report (REPORT.md
and REPORT.svg, once reported) and its lineage bundle. The frozen harness and probe live on the
campaign's branches, which the bundle carries; every bundle is checked against its manifest here, the
index (campaigns/README.md) against the reports, and a campaign is continued from a clone of main after
`git campaign import`."""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.commands.bundle import import_bundle
from gitcampaign.commands.round import open_round
from gitcampaign.commands.status import status

REPO_ROOT = Path(__file__).resolve().parents[1]
CAMPAIGNS = REPO_ROOT / C.CAMPAIGNS_DIR
NAMES = sorted(path.name for path in CAMPAIGNS.iterdir() if path.is_dir())
ON_MAIN = {C.MANIFEST_FILE, C.REPORT_FILE, C.REPORT_PLOT_FILE, C.BUNDLE_FILE}
INDEX = CAMPAIGNS / "README.md"
COMMANDS = ("test_command", "benchmark_command", "quick_command", "probe_command", "acceptance_command")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def manifest(name: str) -> dict:
    return yaml.safe_load((CAMPAIGNS / name / C.MANIFEST_FILE).read_text())


def frozen_paths(name: str) -> set[str]:
    """What the campaign froze in its own folder: the protected paths there, and every path there
    that its commands name (a copied `--shapes` file is named by the benchmark command only)."""
    fields = manifest(name)
    folder = f"{C.campaign_dir(name)}/"
    named = {
        word for key in COMMANDS for word in shlex.split(fields.get(key) or "") if word.startswith(folder)
    }
    return named | {path for path in fields["protected_paths"] if path.startswith(folder)}


def bundled_main(tmp_path: Path, name: str) -> tuple[Path, str]:
    """A scratch repository holding the bundle's campaign/NAME/main, and that ref. It borrows this
    repository's objects: a bundle leaves out the project history its campaign started from."""
    scratch = tmp_path / "scratch"
    git(tmp_path, "init", "-q", str(scratch))
    common = Path(git(REPO_ROOT, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    (scratch / ".git" / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    ref = f"refs/bundled/{name}"
    bundle = CAMPAIGNS / name / C.BUNDLE_FILE
    fetched = subprocess.run(
        ["git", "-C", str(scratch), "fetch", "-q", str(bundle), f"refs/heads/campaign/{name}/main:{ref}"],
        capture_output=True,
        text=True,
    )
    assert fetched.returncode == 0, (
        f"{bundle} does not restore campaign/{name}/main here (a shallow clone lacks the history it "
        f"starts from): {fetched.stderr}"
    )
    return scratch, ref


def blob(scratch: Path, ref: str, path: str) -> bytes:
    shown = subprocess.run(["git", "-C", str(scratch), "show", f"{ref}:{path}"], capture_output=True)
    assert shown.returncode == 0, f"{path} is not on the bundle's main branch"
    return shown.stdout


def test_every_campaign_has_a_bundle() -> None:
    assert NAMES
    for name in NAMES:
        assert (CAMPAIGNS / name / C.BUNDLE_FILE).is_file(), name
        assert (CAMPAIGNS / name / C.MANIFEST_FILE).is_file(), name


@pytest.mark.parametrize("name", NAMES)
def test_the_bundle_holds_what_the_campaign_froze(tmp_path: Path, name: str) -> None:
    scratch, ref = bundled_main(tmp_path, name)
    protected = manifest(name)["protected_paths"]
    frozen = frozen_paths(name)
    # The harness, and the probe its commands run: the harness's own (`--train-probe`) since op specs,
    # a train_probe.py of its own before.
    assert f"{C.campaign_dir(name)}/{C.HARNESS_FILE}" in frozen
    assert shlex.split(manifest(name)["probe_command"])[1] in frozen
    for path in sorted(frozen):
        content = blob(scratch, ref, path)
        if path in protected:
            assert sha256(content) == protected[path], f"{path} in the bundle is not the one frozen"
    # What main keeps of the campaign is the bundle's own copy.
    for kept in sorted((CAMPAIGNS / name).iterdir()):
        if kept.name != C.BUNDLE_FILE:
            path = f"{C.campaign_dir(name)}/{kept.name}"
            assert blob(scratch, ref, path) == kept.read_bytes(), f"{path} on main differs from the bundle's"


@pytest.mark.parametrize("name", NAMES)
def test_main_keeps_only_the_record(name: str) -> None:
    kept = {path.name for path in (CAMPAIGNS / name).iterdir()}
    assert kept <= ON_MAIN, f"{name}: {sorted(kept - ON_MAIN)} belong on the campaign's branch"


def index_rows() -> dict[str, list[str]]:
    """The rows of campaigns/README.md's table, by campaign: its cells after the first."""
    rows = {}
    for line in INDEX.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        named = re.fullmatch(r"\[([\w.-]+)\]\(\1/REPORT\.md\)|([a-z][\w.-]*)", cells[0])
        if line.startswith("|") and named and cells[0] != "campaign":
            rows[named[1] or named[2]] = cells[1:]
    return rows


def report_cells(name: str) -> list[str]:
    """What REPORT.md says, as the index's cells: op, metric, accepted, rejected, ratio, date."""
    text = (CAMPAIGNS / name / C.REPORT_FILE).read_text()
    op = re.search(r"^- Op: `([^`]+)`", text, re.M)
    metric = re.search(r"primary metric: \*\*(.+?)\*\*", text)
    rounds = re.search(r"^\d+ rounds?: (\d+) accepted, (\d+) (?:rolled back|rejected)\.", text, re.M)
    # A report of one pair has no interval: it printed "[0.000, -]" until 2026-12-06, then says so.
    ratio = re.search(
        r"final/baseline: \*\*([\d.]+x)\*\*, (?:95% CI (\[[\d.]+, [\d.]+\])|95% CI \[0\.000, -\]|no 95%)",
        text,
    )
    date = re.search(r"^- Date: (\d{4}-\d{2}-\d{2})", text, re.M)
    assert op and metric and rounds and ratio and date, f"{name}/REPORT.md: a field the index reads is gone"
    interval = ratio[2] or "(one pair, no interval)"
    return [f"`{op[1]}`", metric[1], rounds[1], rounds[2], f"{ratio[1]} {interval}", date[1]]


def test_the_index_lists_every_campaign_as_its_report_says() -> None:
    rows = index_rows()
    assert sorted(rows) == NAMES
    for name, cells in rows.items():
        if (CAMPAIGNS / name / C.REPORT_FILE).is_file():
            assert cells == report_cells(name), name
        else:
            fields = manifest(name)
            assert cells[:2] == [f"`{fields['target_op']}`", fields["primary_metric"]], name
            assert cells[4] == "not reported", name


def test_a_campaign_continues_from_main_after_import(tmp_path: Path) -> None:
    """A clone of main has the campaign's record and bundle only; importing the bundle brings back its
    lineage, and the next round opens on the accepted head with the frozen harness in the tree."""
    name = "gemm-bf16"
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(REPO_ROOT), str(clone))
    git(clone, "checkout", "-q", "-B", "main", git(REPO_ROOT, "rev-parse", "HEAD").strip())
    harness = f"{C.campaign_dir(name)}/{C.HARNESS_FILE}"

    import_bundle(clone, clone / C.campaign_dir(name) / C.BUNDLE_FILE)
    before = status(clone, name)
    assert before.baseline and before.rounds["accepted"] >= 1
    assert before.speedup is not None and before.speedup > 1

    opened = open_round(clone, name, "a next round, opened from main")
    assert opened.base == before.accepted_head
    assert git(clone, "symbolic-ref", "--short", "HEAD").strip() == opened.branch
    assert sha256((clone / harness).read_bytes()) == manifest(name)["protected_paths"][harness]
    after = status(clone, name)
    assert after.head_branch == opened.branch and after.rounds["empty"] == 1
