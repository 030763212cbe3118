"""The README's first command: the whole loop on a scratch repo, on the CPU (Triton's interpreter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.demo_flow import (
    DEMO_DATA,
    GPU_SHAPES,
    NAME,
    PROJECT_DIRS,
    apply_edits,
    demo,
    scripted_rounds,
)
from gitcampaign.refs import CampaignRef
from gitcampaign.shapes import preset
from gitcampaign.vocabulary import ACCEPTED, Decision


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_demo_runs_the_whole_loop(tmp_path: Path) -> None:
    lines: list[str] = []
    root = tmp_path / "demo"
    demo(root, echo=lines.append)
    output = "\n".join(lines)
    decisions = {}
    for number in (2, 3, 4):
        commit = (
            git(root, "rev-parse", str(CampaignRef.rejected(NAME, number)))
            if number > 2
            else git(root, "rev-parse", CampaignRef.round_branch(NAME, number).branch)
        )
        docs = list(yaml.safe_load_all(git(root, "notes", "--ref", C.NOTES_VERDICT, "show", commit.strip())))
        decisions[number] = (docs[-1]["decision"], docs[-1]["reasons"], docs[-1].get("transfer"))
    assert decisions[2][0] in ACCEPTED  # bigger tiles help
    assert decisions[2][2] is not None  # the training probe ran on the accepted round
    assert decisions[3][:2] == (Decision.REJECT, [C.REASON_SHAPE_REGRESSION])  # planted slower
    assert decisions[4][:2] == (Decision.REJECT, [C.REASON_TESTS_FAILED])  # planted wrong: K tails
    main_log = git(root, "log", "--format=%s", CampaignRef.main(NAME).branch)
    assert main_log.splitlines()[0] == f"campaign {NAME}: report"
    assert "Notes (campaign/bench)" in output  # the printed lineage carries the CSV notes
    report = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "T3 max iterations" in report and "planted: wrong" in report
    assert (root / ".git" / "hooks" / "commit-msg").exists()
    assert git(root, "status", "--porcelain", "--untracked-files=no") == ""


def test_the_demo_project_is_its_own_frozen_data(tmp_path: Path) -> None:
    """The scripted rounds apply, in order, to the frozen starting kernel (not to kernels/gemm.py,
    which campaigns change); its focused test passes at the start and catches the planted-wrong
    round, which is therefore the one committed past the hooks."""
    for name in PROJECT_DIRS:
        shutil.copytree(DEMO_DATA / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    # No PYTHONPATH: the check must import the scratch checkout's kernels, not an installed copy.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "tests/check_gemm.py"], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    assert check().returncode == 0, check().stderr
    rounds = scripted_rounds()
    assert len(rounds) == 3 and [r.no_verify for r in rounds] == [False, False, True]
    for scripted in rounds:
        apply_edits(tmp_path, scripted.edits)
    failed = check()
    assert failed.returncode != 0 and "SNR" in failed.stderr
    kernel = (tmp_path / "kernels" / "gemm.py").read_text()
    assert "tl.cdiv(K, BLOCK_K) - 1)" in kernel and "_config(32, 32, 32, 2, 1)" in kernel


def test_the_gpu_demo_shapes_are_the_presets_own() -> None:
    """On a GPU the demo measures one shape of the Llama-3.1-8B preset, exactly as the preset has it."""
    shapes = yaml.safe_load((DEMO_DATA / GPU_SHAPES).read_text())
    by_label = {shape.label: shape for shape in preset("llama3.1-8b:mbs=1")}
    assert len(shapes) == 1
    for entry in shapes:
        reference = by_label[entry["label"]]
        assert (entry["M"], entry["N"], entry["K"]) == (reference.M, reference.N, reference.K)
