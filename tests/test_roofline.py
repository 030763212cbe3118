"""Ceilings, shares and bounds (gitcampaign/roofline.py) and the profile's findings per shape
(gitcampaign/profile.py), on hand-made profiles whose answers are worked out in the comments."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from git import Repo

from gitcampaign import profile, roofline
from gitcampaign.errors import CampaignError

REPO_ROOT = Path(__file__).resolve().parents[1]
H200_MEASURED = roofline.Ceilings(roofline.MEASURED, "NVIDIA H200", 760.0, 1400.0, 4000.0, 2.5)


def harness_file(**forward: Any) -> dict[str, Any]:
    """A --profile file of one shape whose forward is given (unit, work, ms, kernels...)."""
    phase = {
        "calls": 10,
        "unit": "byte",
        "work": 2.0e8,
        "host_ms_per_call": 0.02,
        "gpu_ms_per_call": 0.1,
        "kernels": [{"name": "_quant_kernel", "launches": 30, "gpu_ms": 1.0, "share": 1.0}],
    }
    phase.update(forward)
    return {
        "format": 1,
        "op": "quantize_fp8_rowwise",
        "device": "NVIDIA H200",
        "profiler": "torch.profiler",
        "shapes": [{"label": "q", "phases": {"forward": phase}}],
    }


def verdict_of(data: dict[str, Any], ceilings: roofline.Ceilings = H200_MEASURED) -> dict[str, Any]:
    return profile.findings(profile.HarnessProfile.parse(data, "profile.json"), ceilings)["q"]


def test_a_memory_bound_phase_is_placed_against_the_copy_bandwidth() -> None:
    # 2e8 bytes in 0.1 ms = 2e12 B/s = 0.5 of 4000 GB/s; 30 launches over 10 calls = 3 per call.
    found = verdict_of(harness_file())
    assert found["forward"]["share_of_limit"] == pytest.approx(0.5)
    assert found["forward"]["bound"] == roofline.MEMORY and not found["forward"]["host_bound"]
    assert found["verdict"] == "memory-bound at 0.50 of copy; 3 launches; host 0.02 ms <= GPU 0.1 ms per call"


def test_the_profilers_step_range_is_not_read_as_a_kernel() -> None:
    # The harnesses frozen on 2026-12-06 listed torch.profiler's step range on the GPU (one launch
    # over the 10 calls, as long as the kernels together) and counted it in the phase's GPU time:
    # read as the first test's profile, 0.5 of copy, not 0.25.
    step = {"name": "ProfilerStep*", "launches": 1, "gpu_ms": 1.0, "share": 0.5}
    quant = {"name": "_quant_kernel", "launches": 30, "gpu_ms": 1.0, "share": 0.5}
    found = verdict_of(harness_file(gpu_ms_per_call=0.2, kernels=[step, quant]))
    assert found["verdict"] == verdict_of(harness_file())["verdict"]
    assert [(kernel["name"], kernel["share"]) for kernel in found["forward"]["kernels"]] == [
        ("_quant_kernel", 1.0)
    ]
    with pytest.raises(CampaignError, match="no kernel recorded on the GPU for q forward"):
        profile.HarnessProfile.parse(harness_file(kernels=[step]), "p.json")


def test_the_host_leads_when_it_issues_slower_than_the_gpu_runs() -> None:
    # The issue's finding: the host takes 0.6 ms to launch what the GPU runs in 0.4 ms.
    found = verdict_of(harness_file(host_ms_per_call=0.6, gpu_ms_per_call=0.4))
    assert found["forward"]["host_bound"]
    assert found["verdict"].startswith("host-bound; on the GPU memory-bound at 0.12 of copy; 3 launches")
    assert found["verdict"].endswith("host 0.6 ms > GPU 0.4 ms per call")


def test_kernels_shorter_than_the_launch_floor_are_launch_bound() -> None:
    # 3 launches x 2.5 us = 7.5 us; a 12 us call is under twice that.
    found = verdict_of(harness_file(work=1.0e6, gpu_ms_per_call=0.012, host_ms_per_call=0.004))
    assert found["forward"]["bound"] == roofline.LAUNCH
    assert "launch floors" in found["forward"]["bound_because"]


def test_ncu_decides_compute_or_memory_for_a_gemm() -> None:
    # A GEMM's work is in FLOPs: 2*4096^3 in 0.25 ms = 549.8 TFLOP/s = 0.72 of 760; ncu says DRAM > SM.
    data = harness_file(unit="flop", work=2.0 * 4096**3, gpu_ms_per_call=0.25, host_ms_per_call=0.01)
    data["op"] = "gemm"
    data["shapes"][0]["phases"]["forward"]["kernels"] = [
        {"name": "_gemm_kernel", "launches": 10, "gpu_ms": 2.5, "share": 1.0}
    ]
    parsed = profile.HarnessProfile.parse(data, "p.json")
    profile.attach_ncu(
        parsed, "q", {"_gemm_kernel": {"sm_throughput_pct": 31.0, "dram_throughput_pct": 82.0}}
    )
    found = profile.findings(parsed, H200_MEASURED)["q"]["forward"]
    assert found["share_of_limit"] == pytest.approx(2.0 * 4096**3 / 0.25e-3 / 760e12)
    assert (found["bound"], found["limit"]) == (roofline.MEMORY, "bf16 GEMM peak")
    assert found["bound_because"] == "ncu: SM 31%, DRAM 82% of peak"
    assert found["kernels"][0]["ncu"]["dram_throughput_pct"] == 82.0
    fp8 = profile.HarnessProfile.parse({**data, "op": "gemm_fp8_blockwise"}, "p.json")
    assert profile.findings(fp8, H200_MEASURED)["q"]["forward"]["limit"] == "fp8 GEMM peak"


def test_a_gemm_peak_is_held_at_the_sm_clock_the_phase_ran_at() -> None:
    # The 12-06 H100 case: cuBLAS's 8192^3 at 629 TFLOP/s at 1335 MHz (calibrate --peaks); a GEMM
    # phase of 2*8192*4096*4096 FLOPs in 0.4 ms = 687.2 TFLOP/s, 1.09 of 629, ran at 1500 MHz, where
    # the same tensor cores do 629 * 1500 / 1335 = 706.7: 0.972 of that.
    h100 = roofline.Ceilings(
        roofline.MEASURED, "NVIDIA H100 80GB HBM3", 629.0, 1273.0, 3015.0, 4.7, "", 1335.0
    )
    work = 2.0 * 8192 * 4096 * 4096
    data = harness_file(unit="flop", work=work, gpu_ms_per_call=0.4, host_ms_per_call=0.01, sm_mhz=1500.0)
    data["op"] = "gemm"
    found = verdict_of(data, h100)
    assert found["forward"]["limit"] == "bf16 GEMM peak at 1500 MHz"
    assert found["forward"]["limit_per_s"] == pytest.approx(629e12 * 1500 / 1335)
    assert found["forward"]["share_of_limit"] == pytest.approx(work / 0.4e-3 / (629e12 * 1500 / 1335))
    assert found["forward"]["sm_mhz"] == 1500.0
    assert "compute-bound at 0.97 of bf16 GEMM peak at 1500 MHz" in found["verdict"]
    # no clock on either side: the peak as measured; the copy is not the SM clock's
    assert verdict_of(data, H200_MEASURED)["forward"]["limit"] == "bf16 GEMM peak"
    del data["shapes"][0]["phases"]["forward"]["sm_mhz"]
    assert verdict_of(data, h100)["forward"]["share_of_limit"] == pytest.approx(work / 0.4e-3 / 629e12)
    assert verdict_of(harness_file(sm_mhz=1500.0), h100)["forward"]["limit"] == "copy"


def test_without_ceilings_the_share_says_why() -> None:
    found = verdict_of(harness_file(), roofline.Ceilings(roofline.NOT_MEASURED, "NVIDIA X1"))
    assert found["forward"]["share_of_limit"] is None
    assert "(share of the limit not measured: no ceilings for NVIDIA H200)" in found["verdict"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(format=2), "format is 2"),
        (lambda d: d["shapes"][0]["phases"]["forward"].update(calls=0), "calls is 0"),
        (
            lambda d: d["shapes"][0]["phases"]["forward"].update(gpu_ms_per_call=float("nan")),
            "gpu_ms_per_call is nan",
        ),
        (lambda d: d["shapes"][0]["phases"].update(sideways={}), "phases must be forward"),
        (lambda d: d["shapes"][0]["phases"]["forward"]["kernels"][0].update(share=1.5), "share is 1.5"),
        (lambda d: d.update(shapes=[]), "shapes is not a non-empty list"),
        (lambda d: d["shapes"][0]["phases"]["forward"].update(sm_mhz=0), "sm_mhz is 0"),
        (
            lambda d: d["shapes"][0]["phases"]["forward"].update(kernels=[]),
            "no kernel recorded on the GPU for q",
        ),
    ],
)
def test_a_malformed_profile_names_the_field(change: Any, field: str) -> None:
    data = copy.deepcopy(harness_file())
    change(data)
    with pytest.raises(CampaignError, match="nothing was recorded") as caught:
        profile.HarnessProfile.parse(data, "p.json")
    assert field in caught.value.message


@pytest.mark.parametrize(
    ("gpu", "bf16", "memory"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0, 3350.0),  # the SXM part's name
        ("NVIDIA H100 PCIe", 756.0, 2000.0),
        ("NVIDIA H100 NVL", 835.0, 3900.0),
        ("NVIDIA H200", 989.0, 4800.0),
        ("NVIDIA A100-SXM4-80GB", 312.0, 2039.0),
        ("NVIDIA A100 80GB PCIe", 312.0, 1935.0),
        ("NVIDIA A100-SXM4-40GB", 312.0, 1555.0),
        ("NVIDIA B200", 2250.0, 8000.0),
    ],
)
def test_the_datasheet_knows_the_usual_parts(gpu: str, bf16: float, memory: float) -> None:
    sheet = roofline.datasheet(gpu)
    assert sheet is not None and (sheet.source, sheet.bf16_tflops, sheet.copy_gbs) == (
        roofline.DATASHEET,
        bf16,
        memory,
    )


def test_the_datasheet_does_not_guess() -> None:
    assert roofline.datasheet("NVIDIA GH200 480GB") is None  # not an H200
    assert roofline.datasheet("NVIDIA GeForce RTX 4090") is None
    assert roofline.datasheet("NVIDIA A100-SXM4-80GB").limit("flop", "gemm_fp8_rowwise") is None  # type: ignore[union-attr]


def test_a_gate_figure_as_a_share_of_its_limit() -> None:
    assert roofline.metric_share(570.0, "Combined Step TFLOPS", "gemm", H200_MEASURED) == pytest.approx(0.75)
    assert roofline.metric_share(
        700.0, "Forward TFLOPS", "gemm_fp8_tensorwise", H200_MEASURED
    ) == pytest.approx(0.5)
    assert roofline.metric_share(
        3000.0, "Forward GB/s", "quantize_fp8_rowwise", H200_MEASURED
    ) == pytest.approx(0.75)
    cpu = roofline.Ceilings(roofline.NOT_MEASURED, "cpu")
    assert roofline.metric_share(1.0, "Forward TFLOPS", "gemm", cpu) is None
    assert roofline.share_text(None) == "not measured"


def test_the_report_says_where_a_share_reads_above_its_ceiling() -> None:
    """The report's share column gets the caveat analyze warns with: a final figure over 1.02 of the
    ceiling (an H100's bf16 GEMM at 1.08 of `calibrate --peaks` on 12-06) is not past the hardware."""
    from types import SimpleNamespace

    from gitcampaign.commands.report import _limit_note

    manifest = SimpleNamespace(primary_metric="Combined Step TFLOPS", target_op="gemm")
    within = _limit_note(H200_MEASURED, manifest, None, {"qkv": 1.02, "o": None})  # type: ignore[arg-type]
    above = _limit_note(H200_MEASURED, manifest, None, {"qkv": 1.08, "o": 0.97})  # type: ignore[arg-type]
    assert within.startswith("Share of the limit: the final figure over the bf16 GEMM peak")
    assert "above" not in within
    assert above.startswith(within[:-1]) and " Shares above the measured ceiling (qkv 1.08): " in above


def test_float32_flops_have_no_ceiling_and_the_verdict_says_why() -> None:
    """A float32 CUDA-core GEMM held against the bf16 tensor-core peak would read ~0.01 of it: no
    share at all is the true answer, and bytes keep the copy bandwidth whatever the dtype."""
    assert roofline.metric_share(9.0, "Forward TFLOPS", "sgemm", H200_MEASURED, "float32") is None
    assert roofline.metric_share(9.0, "Forward TFLOPS", "sgemm", H200_MEASURED, "bfloat16") == pytest.approx(
        9.0 / 760.0
    )
    assert roofline.metric_share(
        3000.0, "Forward GB/s", "rmsnorm", H200_MEASURED, "float32"
    ) == pytest.approx(0.75)
    data = harness_file(unit="flop", work=1.0e9)
    found = profile.findings(profile.HarnessProfile.parse(data, "profile.json"), H200_MEASURED, "float32")[
        "q"
    ]
    assert found["forward"]["share_of_limit"] is None
    assert "not measured: the op computes in float32; the ceilings are bf16 and fp8" in found["verdict"]


def test_the_dtype_comes_from_the_campaigns_frozen_op_spec(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path)
    spec = tmp_path / "campaigns" / "s" / "op_spec.py"
    spec.parent.mkdir(parents=True)
    spec.write_text((REPO_ROOT / "examples" / "cuda_extension" / "sgemm_spec.py").read_text())
    repo.index.add([str(spec)])
    commit = repo.index.commit("spec").hexsha
    assert roofline.spec_dtype(repo, "s", commit) == "float32"
    assert roofline.spec_dtype(repo, "other", commit) is None  # no spec frozen: the op's name decides
    spec.write_text("NAME = 'broken'\nDTYPE = 3\n")
    repo.index.add([str(spec)])
    assert roofline.spec_dtype(repo, "s", repo.index.commit("broken").hexsha) is None
