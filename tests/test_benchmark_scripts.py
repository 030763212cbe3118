"""benchmarks/train_step.py, benchmarks/host_cost.py and benchmarks/best_vendor.py run end to end in
their --smoke modes (CPU, Triton's interpreter, tiny sizes): every size, provider and mode of the
training step, every op of the host-cost table, eager and compiled, every side of each op family
against the vendor's best path, with the report's header (device, versions, date,
command). The GPU figures themselves are BENCHMARKS.md's, each with its command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NUMBER = r"[0-9][0-9,]*\.?[0-9]*"


def _run(script: str, *args: str) -> str:
    return _python(str(ROOT / "benchmarks" / script), *args, "--smoke")


def _python(*args: str) -> str:
    """`python ARGS` from the repository root in the interpreter, no kernel pins; its stdout."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KERNELS_")}
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**env, "TRITON_INTERPRET": "1"},
        cwd=ROOT,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _header_is_complete(report: str, script: str) -> None:
    assert re.search(r"torch \S+, triton \S+", report)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", report)
    assert re.search(rf"command: \S*python\S* \S*benchmarks/{script} .*--smoke", report)


def test_train_step_smoke_runs_every_case() -> None:
    report = _run("train_step.py")
    _header_is_complete(report, "train_step.py")
    rows = {
        (size, provider, mode)
        for size, provider, mode in re.findall(
            # fp8 rows read "disagree" here: the interpreter rounds fp32 -> fp8 casts its own way
            rf"^(\S+)\s+(bf16|fp8-\w+)\s+(eager|compiled)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+(?:{NUMBER}|disagree)\s+\S+$",
            report,
            re.MULTILINE,
        )
    }
    dense = {(size, provider, mode) for size in ("llama3.1-8b", "1b")
             for provider in ("bf16", "fp8-tensorwise", "fp8-rowwise", "fp8-blockwise")
             for mode in ("eager", "compiled")}  # fmt: skip
    assert rows == dense | {("mixtral", "bf16", "eager"), ("mixtral", "bf16", "compiled")}
    assert re.search(r"mixtral rows per expert \(top-2 of \d+ tokens\): \[[\d, ]+\]", report)


def test_a_step_the_two_sides_compute_differently_gets_no_speedup() -> None:
    """The compiled fp8 vendor once skipped its backward (all-zero gradients) and read 1.33x faster:
    a row whose sides disagree prints its times and SNR, and no speedup."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from train_step import Result

    agreeing = Result("1b", "fp8-tensorwise", "compiled", 3.6, 3.9, 46.5, 8192).cells()
    apart = Result("1b", "fp8-tensorwise", "compiled", 3.613, 2.813, float("-inf"), 8192).cells()
    assert agreeing[7] == "1.083" and apart[7] == "disagree"
    assert apart[3] == "3.613" and apart[5] == "2.813" and apart[8] == "-inf"


def test_host_cost_smoke_runs_every_op() -> None:
    report = _run("host_cost.py")
    _header_is_complete(report, "host_cost.py")
    rows = re.findall(
        rf"^(\S+)\s+(forward|forward\+backward)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}",
        report,
        re.MULTILINE,
    )
    ops = ["gemm", "gemm_fp8-tensorwise", "gemm_fp8-rowwise", "gemm_fp8-blockwise", "grouped_gemm"]
    expected = {(op, direction) for op in ops for direction in ("forward", "forward+backward")}
    expected |= {(f"quantize_fp8-{g}", "forward") for g in ("tensorwise", "rowwise", "blockwise")}
    assert set(rows) == expected


def test_best_vendor_smoke_times_every_side_of_every_family() -> None:
    """Each family's sides and speedups, a line a shape, geomeans; blockwise also its kernels alone."""
    sides = {
        "gemm": ["ours_fwd", "cublas_fwd", "ours_step", "cublas_step"],
        "fp8": ["ours_step", "best_step", "cublas_bf16_step"],
        "grouped": ["ours_step", "grouped_mm_step", "dense_step"],
    }
    speedups = {
        "gemm": ["fwd", "step", "bwd"],
        "fp8": ["vs cuBLAS bf16", "vs best fp8"],
        "grouped": ["vs dense", "vs _grouped_mm"],
    }
    for op, names in sides.items():
        report = _run("best_vendor.py", "--op", op)
        _header_is_complete(report, "best_vendor.py")
        timed = rf"^  \S+ +{' '.join(rf'{name} {NUMBER}' for name in names)}  ours {NUMBER} TFLOP/s step  "
        lines = re.findall(timed + ".*$", report, re.MULTILINE)
        groups = ["tensorwise", "rowwise", "blockwise"] if op == "fp8" else [op]
        assert len(lines) == 2 * len(groups), report  # two smoke shapes a group
        for line in lines:
            for title in speedups[op]:
                # the smoke's single wall-clock call can read a step under its forward
                value = rf"(?:{NUMBER}|unresolved \(a step <= its forward\))" if title == "bwd" else NUMBER
                assert re.search(rf"  {re.escape(title)} {value}", line), (title, line)
        kernels = [line for line in lines if "kernel fwd" in line]
        assert len(kernels) == (2 if op == "fp8" else 0)
        for line in kernels:
            for product in ("fwd", "dA", "dB"):
                assert re.search(rf"kernel {product} {NUMBER}/{NUMBER}={NUMBER}", line), (product, line)
        assert report.count("  geomean: ") == len(groups)


def test_a_backward_is_a_figure_only_where_both_steps_outlast_their_forwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bwd = (cuBLAS step - forward) / (ours step - forward); a step no longer than its forward
    leaves no backward time to divide (the CI smoke once printed "bwd -0.313")."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import best_vendor

    def row(ours_fwd: float, ours_step: float, cublas_fwd: float, cublas_step: float) -> dict[str, float]:
        return {
            "ours_fwd": ours_fwd,
            "ours_step": ours_step,
            "cublas_fwd": cublas_fwd,
            "cublas_step": cublas_step,
        }

    assert best_vendor.backward_speedup(row(1.0, 3.0, 1.0, 3.2)) == "1.100"
    for noisy in (row(1.0, 3.0, 20.0, 0.4), row(2.0, 2.0, 1.0, 3.0)):
        assert best_vendor.backward_speedup(noisy) == "unresolved (a step <= its forward)"


def test_best_vendor_names_the_sides_the_host_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A side whose host takes 0.9 of its figure or more to issue a call is named host-bound (12-06:
    the blockwise o step read 1.308 ms where its host took 1.17 ms a call); the others are not."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import best_vendor

    row = {
        "shape": "o",
        "ours_step": 1.308,
        "ours_step_host": 1.2,
        "best_step": 1.791,
        "best_step_host": 1.05,
        "cublas_bf16_step": 1.2,
        "cublas_bf16_step_host": 0.1,
    }
    assert best_vendor.host_bound(row) == "  host-bound (ms to issue a call): ours_step 1.200"
    assert best_vendor.host_bound({**row, "best_step_host": 1.65}) == (
        "  host-bound (ms to issue a call): ours_step 1.200, best_step 1.650"
    )
    assert best_vendor.host_bound({**row, "ours_step_host": 1.1}) == ""
    monkeypatch.setattr(best_vendor, "RUN", best_vendor.Setting(smoke=True))  # the CPU: no synchronising
    calls: list[int] = []
    assert best_vendor.host_ms(lambda: calls.append(1)) >= 0 and len(calls) == 5


def test_best_vendor_keeps_the_clock_each_side_was_timed_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the GPU each do_bench runs under the harness's NVML sampler; the last line gives the
    spread of the sides' median clocks (faked here: no GPU)."""
    import contextlib

    import triton.testing

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import best_vendor

    clocks = iter([[1400.0, 1500.0, 1480.0], [1755.0], []])

    class Monitor:
        unavailable = ""

        @contextlib.contextmanager
        def recording(self) -> Iterator[list[tuple[float, float, float]]]:
            yield [(clock, 700.0, 60.0) for clock in next(clocks)]

    monkeypatch.setattr(best_vendor, "monitor", Monitor)
    monkeypatch.setattr(best_vendor, "SM_MHZ", [])
    monkeypatch.setattr(triton.testing, "do_bench", lambda call, warmup, rep: 0.25)
    assert best_vendor.clock_line() == "SM clock while timing: not read (no samples)"
    assert [best_vendor.ms(lambda: None) for _ in range(3)] == [0.25] * 3
    assert best_vendor.SM_MHZ == [1480.0, 1755.0]  # a side without samples adds no clock
    assert best_vendor.clock_line() == (
        "SM clock while timing, the median of each of 2 timed sides: 1480-1755 MHz, median 1618 (NVML)"
    )


VENDOR_UNDER_COMPILE = """
import sys
import torch
sys.path[:0] = ["benchmarks", "."]
import vendor

torch.manual_seed(0)
a = torch.randn(64, 64).to(torch.bfloat16).requires_grad_()
b = (torch.randn(32, 64) / 8).to(torch.bfloat16).requires_grad_()
grad = torch.randn(64, 32).to(torch.bfloat16)
graphs = []

def capture(graph, example_inputs):
    graphs.append(str(graph.code))
    return graph

def step(linear):
    a.grad = b.grad = None
    out = linear(a, b, "tensorwise", None)
    out.backward(grad)
    return [out.detach(), a.grad, b.grad]

eager = step(vendor.scaled_mm_linear)
compiled = step(torch.compile(vendor.scaled_mm_linear, backend=capture, fullgraph=True))
assert all(torch.equal(x, y) and y.abs().sum() > 0 for x, y in zip(eager, compiled)), "compiled differs"
assert any("gitcampaign_vendor.scaled_mm_linear" in code for code in graphs), graphs
torch.library.opcheck(vendor.scaled_mm_linear_op, (a.detach(), b.detach(), "tensorwise", None))
print("ok")
"""


def test_the_fp8_vendor_enters_a_compiled_graph_as_one_op_with_its_gradients() -> None:
    """Traced into a compiled layer on CUDA (torch 2.11), the vendor's fp8 linear gave all-zero
    gradients; it now enters as a custom op, so a compiled layer runs the eager forward and
    backward: the same output and gradients, nonzero, and an opaque node in the graph."""
    assert _python("-c", VENDOR_UNDER_COMPILE).strip().endswith("ok")
