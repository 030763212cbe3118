"""Every tile the TMA kernels' autotuners may pick compiles for the H100/H200 (sm_90), checked on the CPU:
Triton's compiler and its bundled ptxas need no GPU (benchmarks/dev/sass_dev.py). A tile the
compiler rejects otherwise shows up only in a GPU validation, as every shape of the harness ERROR
(a lagged-promotion round did, 2026-11-30: an assertion in triton 3.6's software pipeliner). Not in
tests/kernels, the campaigns' acceptance suite on the GPU, where the harness compiles them anyway."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import GPU_TEST_CONFIGS

ROOT = Path(__file__).resolve().parents[1]


RUNS = [
    ["--kernel", "gemm_fp8", "--granularity", "tensorwise"],
    ["--kernel", "gemm_fp8", "--granularity", "rowwise"],
    ["--kernel", "gemm_fp8", "--granularity", "blockwise"],
    ["--kernel", "gemm_fp8", "--granularity", "blockwise", "--const", "Y_GROUP_N=1"],
    ["--kernel", "gemm"],
    ["--kernel", "grouped"],
    ["--kernel", "grouped_db"],
    ["--kernel", "gluon_fp8"],
    ["--kernel", "gluon_fp8", "--const", "Y_GROUP_N=1"],
]
# The GPU tests' pinned tiles (conftest), compiled once for each argument a tiny test or a one-program
# launch sets to 1, which Triton compiles as a constant 1: a stream-K candidate compiled at every
# shipped tile and failed in the GPU tests on exactly these (2026-11-30, TritonGPUCoalesce on K = 1
# and NUM_SMS = 1), found only by a GPU validation.
TINY_RUNS = [
    ["--kernel", kernel, "--config", GPU_TEST_CONFIGS[variable], "--one", f"NUM_SMS,{sizes}", *extra]
    for kernel, variable, sizes, extra in (
        ("gemm", "KERNELS_GEMM_CONFIG", "M,N,K", []),
        ("gemm", "KERNELS_GEMM_CONFIG", "K", ["--const", "A_T=1"]),
        ("gemm_fp8", "KERNELS_GEMM_FP8_CONFIG", "M,N,K", ["--granularity", "tensorwise"]),
        ("gemm_fp8", "KERNELS_GEMM_FP8_CONFIG", "M,N,K", ["--granularity", "blockwise"]),
        ("grouped", "KERNELS_GROUPED_GEMM_CONFIG", "M_total,N,K", []),
        ("grouped_db", "KERNELS_GROUPED_GEMM_DB_CONFIG", "M_total,N,K", []),
    )
]


@pytest.fixture(scope="module")
def compiled() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every run's output, the runs side by side (compiling is CPU-bound: one per core)."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "benchmarks/dev/sass_dev.py"), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )

    runs = RUNS + TINY_RUNS
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip((" ".join(args) for args in runs), pool.map(run, runs), strict=True))


@pytest.mark.parametrize("run", [" ".join(args) for args in RUNS])
def test_every_shipped_tile_compiles_for_sm90(
    run: str, compiled: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    process = compiled[run]
    assert process.returncode == 0, process.stderr[-3000:]
    assert "does not compile" not in process.stdout, process.stdout
    found = re.findall(r"^  (\d+) registers, (\d+) bytes spilled", process.stdout, re.M)
    tiles = re.findall(r"^BLOCK_M=", process.stdout, re.M)
    assert tiles and len(found) == len(tiles), process.stdout
    # Every tile's loop holds the tensor-core products (the SASS was read, not an empty kernel).
    assert process.stdout.count("loop: ") == len(tiles) and "loop: no MMA" not in process.stdout


@pytest.mark.parametrize("run", [" ".join(args) for args in TINY_RUNS])
def test_the_gpu_tests_tiles_compile_with_arguments_of_one(
    run: str, compiled: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    process = compiled[run]
    assert process.returncode == 0, process.stderr[-3000:]
    assert "does not compile" not in process.stdout, process.stdout
    ones = run.split("--one ")[1].split()[0].split(",")
    compiled_as = re.findall(r"^BLOCK_M=.* \((\w+) = 1\)\n  \d+ registers", process.stdout, re.M)
    assert compiled_as == ones, process.stdout


def test_the_grouped_tiles_compile_as_launched(compiled: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """The grouped forward stores through a pointer store masked at each group's end; compiled as the
    launcher compiles it (pointers, sizes and strides marked as dividing by 16) that store is
    vectorised and no shipped tile spills. Compiled without the marks, the 128x256 tiles spill 328-988
    bytes at 255 registers: a figure of a kernel that never runs (2026-11-30)."""
    spilled = re.findall(r"^  \d+ registers, (\d+) bytes spilled", compiled["--kernel grouped"].stdout, re.M)
    assert spilled and all(int(bytes_) == 0 for bytes_ in spilled), compiled["--kernel grouped"].stdout


@pytest.mark.parametrize("y_group_n", ["128", "1"])
def test_the_gluon_kernel_keeps_its_accumulator_in_registers(
    y_group_n: str, compiled: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    """kernels/_gluon_fp8.py at the tile it ships for every out dtype: no spills (the per-column y
    scales of Y_GROUP_N = 1 spilled 28 bytes while LLVM hoisted their 64-bit addresses; the 128 x 256
    tile's two accumulators spilled 644 while LLVM sank a promotion below the next wgmma), the
    partitions' register split (160 a consumer of three, 240 of two, 24 for the producer), shared
    memory under the 227 KiB a block may take, and one wgmma loop per consumer that waits for each
    half's product (WAIT 0x0: never a wgmma left in flight across a promotion, which makes ptxas
    serialise them)."""
    run = "--kernel gluon_fp8" + ("" if y_group_n == "128" else " --const Y_GROUP_N=1")
    stdout = compiled[run].stdout
    tiles = re.findall(
        r"^BLOCK_M=(\d+),BLOCK_N=(\d+),.*\n  \d+ registers, (\d+) bytes spilled, (\d+) B shared, "
        r"setmaxnreg (.*)\n  loop: (.*)$",
        stdout,
        re.M,
    )
    assert len(tiles) == 3, stdout  # bf16, fp16, fp32 out
    # Three consumers for the weight blocks' 16-bit outs, two (128 x 256) for the column scales'.
    assert {(int(m), int(n)) for m, n, *_ in tiles[:2]} == {(192, 128) if y_group_n == "128" else (128, 256)}
    for block_m, block_n, spilled, shared, setmaxnreg, loop in tiles:
        consumers, halves = int(block_m) // 64, int(block_n) // 128
        assert int(spilled) == 0 and int(shared) <= 227 * 1024, stdout
        assert f"inc {160 if consumers == 3 else 240}" in setmaxnreg and "dec 24" in setmaxnreg, stdout
        loops = loop.split(" || ")
        assert len(loops) == consumers, stdout
        for each in loops:
            mmas = sum(int(count or 1) for count in re.findall(r"MMA(?:x(\d+))?", each))
            assert mmas == 4 * halves and each.count("WAIT 0x0") == halves and "WAIT 0x1" not in each, stdout
