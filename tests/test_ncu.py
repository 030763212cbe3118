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
