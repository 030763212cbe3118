"""`git campaign calibrate` without a GPU: what it refuses, and that a failure records nothing.
(The measurement itself needs a GPU: BENCHMARKS.md has its figures and `benchmarks/harness_check.py`.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import yaml

from gitcampaign import constants as C
from gitcampaign import measure
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


def test_the_rounds_reach_the_cross_check_and_its_records_the_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What calibrate does with the cross-check's answer (the measuring child needs a GPU; a fake
    one answers here): one child for both backends with --rounds, the table from its rounds, a
    warning per round whose harness did not pass, all in the environment note."""
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options(op="gemm", quick_command=f"python {C.campaign_dir(NAME)}/{C.HARNESS_FILE}"))
    prepare(root, NAME, install_hooks=False)
    calls: list[list[str]] = []

    def cross_check(command: str, cwd: Path, log: Path, timeout_s: float, what: str, args: list[str]) -> int:
        calls.append(args)
        out, rounds = Path(args[args.index("--out") + 1]), int(args[args.index("--rounds") + 1])

        def figures(ms: float) -> dict[str, dict[str, float]]:
            return {"forward": {"ms": ms, "sm_mhz": 1500.0, "power_w": 690.0}}

        record = {
            "label": "s",
            "backends": {"ours": "triton", "vendor": "torch"},
            "rounds": [
                {
                    "order": ["ours", "vendor"] if index % 2 == 0 else ["vendor", "ours"],
                    "check": {"ours": "PASS", "vendor": "FAIL" if index == 1 else "PASS"},
                    "harness": {"ours": figures(1.0 + index / 100), "vendor": figures(0.8 + index / 100)},
                    "back_to_back": {"ours": figures(1.0), "vendor": figures(0.8)},
                }
                for index in range(rounds)
            ],
        }
        out.mkdir(parents=True)
        (out / "crosscheck.json").write_text(json.dumps([record]))
        return 0

    monkeypatch.setattr(measure, "run_logged", cross_check)
    result = calibrate(root, NAME, forward_only=True, rounds=2)
    (args,) = calls
    assert args[args.index("--ours") + 1 : args.index("--ours") + 4] == ["triton", "--vendor", "torch"]
    assert "--forward-only" in args
    (row,) = result.rows
    assert row.harness_ratios == pytest.approx([0.8, 0.81 / 1.01])
    assert result.warnings == ["s torch round 2: the harness's Check is FAIL"]
    head = git(root, "rev-parse", f"campaign/{NAME}/main").strip()
    note = yaml.safe_load(git(root, "notes", "--ref", C.NOTES_ENVIRONMENT, "show", head))
    assert note["rounds"] == 2 and note["rows"][0]["harness_ratios"] == pytest.approx(row.harness_ratios)
    assert set(note["harness_clocks"]) == {"ours", "vendor"}
    with pytest.raises(CampaignError, match="at least one round"):
        calibrate(root, NAME, rounds=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the no-GPU refusal")
def test_peaks_without_a_gpu_record_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The measuring child runs for real: without a GPU it exits 2, and the error says what analyze
    falls back to; no environment note is written."""
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    assert main(["-C", str(root), "calibrate", "--peaks"]) == 1
    err = capsys.readouterr().err
    assert "no CUDA GPU is visible" in err and "datasheet, not measured" in err
    assert git(root, "for-each-ref", C.NOTES_ENVIRONMENT) == ""
    assert main(["-C", str(root), "calibrate", "--peaks", "--rounds", "2"]) == 2  # a usage error


def test_peaks_go_in_the_environment_note_and_become_the_ceilings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What calibrate --peaks does with the child's figures (it needs a GPU; a fake one answers):
    a `peaks` document on the accepted head, which roofline then prefers to the datasheet."""
    from gitcampaign import git as g
    from gitcampaign import roofline
    from gitcampaign.commands.calibrate import calibrate_peaks

    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    ceilings = {
        "bf16_gemm_tflops": 771.0,
        "fp8_gemm_tflops": 1402.0,
        "copy_gbs": 4210.0,
        "launch_floor_us": 2.1,
        "launch_host_us": 3.9,
    }

    def child(command: str, cwd: Path, log: Path, timeout_s: float, what: str, args: list[str]) -> int:
        assert command.endswith("-m gitcampaign.peaks")
        out = Path(args[args.index("--out") + 1])
        figures = {"bf16_gemm": {"rate": 771e12, "sm_mhz": 1335.0}, "fp8_gemm": {"rate": 1402e12}}
        out.write_text(
            json.dumps({"gpu": "NVIDIA H200", "uuid": "GPU-1234", "ceilings": ceilings, "figures": figures})
        )
        return 0

    monkeypatch.setattr(measure, "run_logged", child)
    result = calibrate_peaks(root, NAME)
    repo = g.open_repo(root)
    note = yaml.safe_load(git(root, "notes", "--ref", C.NOTES_ENVIRONMENT, "show", result.commit))
    assert (
        note["kind"] == roofline.PEAKS_KIND and note["ceilings"] == ceilings and note["gpu"] == "NVIDIA H200"
    )
    measured = roofline.ceilings_for(repo, "NVIDIA H200")
    assert (measured.source, measured.bf16_tflops, measured.copy_gbs) == (roofline.MEASURED, 771.0, 4210.0)
    # each GEMM peak with the SM clock it ran at, where NVML read one
    assert (measured.bf16_sm_mhz, measured.fp8_sm_mhz) == (1335.0, None)
    other = roofline.ceilings_for(repo, "NVIDIA H100 80GB HBM3")  # another model: its datasheet
    assert (other.source, other.bf16_tflops) == (roofline.DATASHEET, 989.0)
    assert roofline.ceilings_for(repo, "cpu").source == roofline.NOT_MEASURED
