"""Reading Nsight Compute's raw CSV (gitcampaign/ncu.py).

The fixture tests/fixtures/ncu_raw_constructed.csv is CONSTRUCTED by hand from ncu's documented
`--csv --page raw --print-units base` layout, not captured: replace it with a capture from the H200
(`ncu --import REPORT.ncu-rep --csv --page raw --print-units base > ...` of a report that
`git campaign analyze --ncu` leaves in its run directory) and keep these assertions' structure.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gitcampaign import ncu

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ncu_raw_constructed.csv"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char *, 1>>(int, at::native::FillFunctor<c10::BFloat16>, std::array<char *, 1>)"
)


def test_the_raw_page_is_read_launch_by_launch() -> None:
    launches = ncu.parse_raw_csv(FIXTURE.read_text())
    assert [one.kernel for one in launches] == [ELEMENTWISE, "_gemm_kernel", "_gemm_kernel"]
    first_gemm = launches[1].values
    assert first_gemm[ncu.DURATION] == 1_812_544.0  # "1,812,544": a thousands separator
    assert first_gemm[ncu.SHARED_DYNAMIC] == 197_632.0
    assert set(first_gemm) == set(ncu.METRICS)  # the units line is not a launch, every metric read
    assert math.isnan(launches[0].values[ncu.LOCAL_STORES])  # "n/a"


def test_a_kernel_is_summarised_over_its_launches() -> None:
    kernels = ncu.by_kernel(ncu.parse_raw_csv(FIXTURE.read_text()))
    gemm = kernels["_gemm_kernel"]
    assert gemm["launches_measured"] == 2
    weights = (1_812_544.0, 1_796_320.0)
    assert gemm["sm_throughput_pct"] == pytest.approx((71.8 * weights[0] + 72.6 * weights[1]) / sum(weights))
    assert gemm["gpu_us_per_launch"] == pytest.approx(sum(weights) / 2 / 1e3)
    assert gemm["registers_per_thread"] == 168 and gemm["shared_mem_per_block_bytes"] == 197_632
    assert [reason for reason, _ in gemm["top_stalls"]] == ["long_scoreboard", "wait", "math_pipe_throttle"]
    assert gemm["local_memory_instructions_per_launch"] == 0
    fill = kernels[ncu.base_name(ELEMENTWISE)]
    assert fill["dram_throughput_pct"] == pytest.approx(88.9)
    assert fill["top_stalls"][0][0] == "long_scoreboard"


@pytest.mark.parametrize(
    ("printed", "base"),
    [
        ("_gemm_kernel", "_gemm_kernel"),  # Triton: a plain name
        (
            ELEMENTWISE,
            "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, std::array<char *, 1>>",
        ),
        ("void ns::k<(int)2>(float*)", "ns::k<(int)2>"),  # a parenthesised template argument stays
        ("ns::k<(int)2>", "ns::k<(int)2>"),  # ncu's function base without parameters
    ],
)
def test_base_names_match_across_profilers(printed: str, base: str) -> None:
    assert ncu.base_name(printed) == base


def test_output_without_a_report_reads_as_no_launch() -> None:
    assert ncu.parse_raw_csv("==PROF== Disconnected\n==ERROR== ERR_NVGPUCTRPERM\n") == []


def test_the_ncu_runs_attach_figures_to_the_profiles_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """analyze's ncu step with ncu itself faked: the profiling run writes a report for one shape and
    fails for the other (no access to the counters), and the import prints the fixture."""
    from gitcampaign import measure, profile
    from gitcampaign.commands.analyze import run_ncu
    from gitcampaign.progress import Progress
    from gitcampaign.shapes import shapes_from_data

    phase = {"calls": 1, "unit": "flop", "work": 1.0e12, "host_ms_per_call": 0.1, "gpu_ms_per_call": 1.8}
    kernels = [{"name": "_gemm_kernel", "launches": 1, "gpu_ms": 1.8, "share": 1.0}]
    data = {
        "format": 1,
        "op": "gemm",
        "device": "NVIDIA H200",
        "profiler": "torch.profiler",
        "shapes": [
            {"label": label, "phases": {"forward": {**phase, "kernels": kernels + extra}}}
            for label, extra in (
                ("big", [{"name": "_epilogue", "launches": 1, "gpu_ms": 0.0, "share": 0.0}]),
                ("small", []),
            )
        ],
    }
    harness_profile = profile.HarnessProfile.parse(data, "p.json")
    commands: list[str] = []

    def fake_run(
        command: str, cwd: Path, log: Path, timeout_s: float, what: str, env: object = None, args: object = ()
    ) -> int:
        commands.append(command)
        if command.startswith("ncu --import"):
            log.write_text(FIXTURE.read_text())
            return 0
        report = Path(command.split("--export ")[1].split()[0])
        if report.name.endswith("big"):
            report.with_name(report.name + ".ncu-rep").write_bytes(b"report")
            log.write_text("==PROF== Disconnected\n")
            return 0
        log.write_text(
            "==ERROR== ERR_NVGPUCTRPERM - no permission to access the GPU's performance counters\n"
        )
        return 1

    monkeypatch.setattr(measure, "run_logged", fake_run)
    monkeypatch.setattr(measure, "triton_cache_env", lambda tree: {})
    shapes = shapes_from_data(
        [{"label": "big", "M": 8, "N": 8, "K": 8}, {"label": "small", "M": 4, "N": 4, "K": 4}], "t"
    )

    class Manifest:
        quick_command = "python campaigns/c/quick_test_bench.py"
        harness_timeout_s = 60

    record = run_ncu(Manifest(), tmp_path, harness_profile, shapes, tmp_path, Progress.silent())  # type: ignore[arg-type]
    assert record["ran"] is True
    assert record["shapes"]["big"]["launches_measured"] == 3 and record["shapes"]["big"]["not_seen"] == [
        "_epilogue"
    ]
    assert (
        record["shapes"]["small"]["ran"] is False and "ERR_NVGPUCTRPERM" in record["shapes"]["small"]["why"]
    )
    assert commands[0].startswith("ncu --target-processes all --metrics ") and commands[0].endswith(
        Manifest.quick_command
    )
    big = harness_profile.shapes["big"]["forward"]
    assert big.kernels[0].ncu is not None and big.kernels[0].ncu["registers_per_thread"] == 168
    assert harness_profile.shapes["small"]["forward"].kernels[0].ncu is None
    assert big.ncu_throughput() == pytest.approx((72.2, 23.25), abs=0.01)
