"""`git campaign calibrate` without a GPU: what it refuses, and that a failure records nothing.
(The measurement itself needs a GPU: BENCHMARKS.md has its figures and `benchmarks/gate_check.py`.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gitcampaign import constants as C
from gitcampaign.cli import main
from gitcampaign.commands.calibrate import calibrate
from gitcampaign.commands.init import init
from gitcampaign.commands.prepare import prepare
from gitcampaign.errors import CampaignError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project  # noqa: E402


def test_a_project_harness_is_not_calibrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    with pytest.raises(CampaignError, match="needs the campaign's own harness") as caught:
        calibrate(root, NAME)
    assert "do_bench" in caught.value.hint


@pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the no-GPU refusal")
def test_no_gpu_fails_through_the_cli_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options(op="gemm", quick_command=f"python {C.campaign_dir(NAME)}/{C.HARNESS_FILE}"))
    prepare(root, NAME, install_hooks=False)
    assert main(["-C", str(root), "calibrate", "--forward-only"]) == 1
    assert "no CUDA GPU is visible" in capsys.readouterr().err
    assert git(root, "for-each-ref", C.NOTES_ENVIRONMENT) == ""
