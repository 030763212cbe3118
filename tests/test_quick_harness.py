"""The quick harness (issues 3-5, 35): CSV schema, exit codes, and the dynamic anti-cheat checks.

Most tests run the harness the way a campaign does: the frozen single file `prepare` builds, in
`campaigns/x/quick_test_bench.py` of a scratch repository root with the op spec beside it, as a
subprocess. The kernels there are either the real ones (a symlink) or a planted `kernels` package
whose gemm misbehaves in a way chosen by the shape's K, so one run exercises every check.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from gitcampaign import constants
from gitcampaign.harness.build import PLACEHOLDERS, source
from gitcampaign.harness.contract import CheckSpec
from gitcampaign.harness.ops import registry
from gitcampaign.progress import FIRST_CALLS
from gitcampaign.shapes import dump_shapes, preset
from tests.conftest import GPU_TEST_CONFIGS
from tests.harness_build import frozen_module, spec_module, write_harness

qtb = frozen_module()
REPO_ROOT = Path(__file__).resolve().parents[1]
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the CPU/interpreter behaviour")

# The planted gemm: its behaviour is chosen by K so that a single run covers every check.
FAKE_GEMM = '''
"""A planted kernel for the harness tests: a @ b.T, misbehaving as the shape's K selects."""
import os
import time

import torch

_calls = []

if os.environ.get("FAKE_PATCH_TIMER_AT_IMPORT"):
    time.perf_counter = lambda: 0.0


def gemm(a, b):
    k = a.shape[1]
    if k == 65:  # wrong result: 10% off is about 20 dB
        return (a @ b.T) * 1.1
    if k == 66:  # mutates an input
        with torch.no_grad():
            a[0, 0] += 1
        return a @ b.T
    if k == 67:  # leaves the second half of the output unwritten
        full = a @ b.T
        out = torch.empty_like(full)
        half = full.shape[0] // 2
        out[:half] = full[:half]
        return out
    if k == 68:  # nondeterministic as a race is: one element alternates between two values
        _calls.append(k)
        noise = torch.zeros_like(a @ b.T)
        noise.view(-1)[0] = len(_calls) % 2  # an error of 1 in one element keeps SNR above 40 dB
        return a @ b.T + noise
    if k == 69:
        raise RuntimeError("planted failure")
    if k == 71:  # off by 0.5%: 46 dB, which fp16/bf16 outputs pass (40 dB) and fp32 ones would not (60)
        return (a @ b.T) * 1.005
    if k == 70:  # replaces the host timer from inside the op
        time.perf_counter = lambda: 0.0
    return a @ b.T
'''

# Rows of the planted run: (label, K, expected Check, text expected on stderr). Order matters:
# the timer patch (K=70) outlives its call, so it comes last.
PLANTED = [
    ("honest", 64, "PASS", None),
    ("tightened", 64, "FAIL", "below the 200 dB threshold"),  # min_snr_db only tightens; 200 is unreachable
    ("wrong", 65, "FAIL", "out_snr = "),
    ("mutates", 66, "FAIL", "the op modified its inputs"),
    ("unwritten", 67, "FAIL", "out_snr = nan"),
    ("nondeterministic", 68, "FAIL", "two runs on the same inputs differ"),
    ("at-46db", 71, "PASS", None),  # judged by the output's dtype, not the float64 reference's
    ("raises", 69, "ERROR", "planted failure"),
    ("timer", 70, "FAIL", "timer replaced: time.perf_counter"),
]


def harness_repo(root: Path, op: str, backend: str, kernels: str | dict[str, str] = "real") -> Path:
    """A repository root holding the frozen harness and op spec and either the real kernels or
    planted files."""
    harness = write_harness(root, op, backend)
    if kernels == "real":
        (root / "kernels").symlink_to(REPO_ROOT / "kernels")
    else:
        (root / "kernels").mkdir()
        (root / "kernels" / "__init__.py").write_text("")
        for name, source in kernels.items():
            (root / "kernels" / name).write_text(source)
    return harness


def gemm_profile(
    tmp_path: Path, backend: str, shape: str, calls: int, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The gemm harness's `--profile` file for one shape (a YAML mapping), `calls` calls a phase."""
    import json

    harness = harness_repo(tmp_path / "repo", "gemm", backend)
    (tmp_path / "repo" / "s.yaml").write_text(f"- {shape}\n")
    out = tmp_path / "repo" / "profile.json"
    process = subprocess.run(
        [sys.executable, str(harness), "--profile", str(out), "--shapes-file", "s.yaml"]
        + ["--profile-calls", str(calls)],
        cwd=tmp_path / "repo",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("KERNELS_")},
            **(env or {}),
            "PYTHONPATH": str(REPO_ROOT),
        },
    )
    assert process.returncode == 0, process.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def run_harness(
    harness: Path, shapes: list[dict[str, object]] | None, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], str | None]:
    """Run the harness on `shapes`; returns the process and the CSV text (None if none was written)."""
    work = harness.parents[2]
    csv_path = work / "out.csv"
    shape_args: list[str] = []
    if shapes is not None:
        shapes_path = work / "shapes.yaml"
        shapes_path.write_text(yaml.safe_dump(shapes, sort_keys=False))
        shape_args = ["--shapes-file", str(shapes_path)]
    child_env = {key: value for key, value in os.environ.items() if not key.startswith("KERNELS_")}
    # This checkout first on the path, whatever else is installed (the harness imports no gitcampaign).
    child_env["PYTHONPATH"] = str(REPO_ROOT)
    child_env.update(env or {})
    process = subprocess.run(
        [sys.executable, str(harness), "--summary-csv", str(csv_path), *shape_args, *args],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=120,
        check=False,
    )
    return process, csv_path.read_text() if csv_path.exists() else None


def rows(csv_text: str) -> list[dict[str, str]]:
    header, *lines = csv_text.splitlines()
    return [dict(zip(header.split(","), line.split(","), strict=True)) for line in lines]


def tiny_shapes(name: str) -> list[dict[str, object]]:
    return yaml.safe_load(dump_shapes(preset(name)))


# ------------------------------------------------------------------------------------------------
# Schema and pure functions (in process)
# ------------------------------------------------------------------------------------------------


def test_the_shipped_specs_write_the_handoff_headers_byte_for_byte() -> None:
    gemm = (
        "label,B,M,N,K,Check,Forward TFLOPS,Forward TFLOPS_stddev,Backward TFLOPS,Backward TFLOPS_stddev,"
        "Forward Time (ms),Backward Time (ms),out_snr,da_snr,db_snr"
    )
    quant = "label,M,K,Check,Forward GB/s,Forward GB/s_stddev,Forward Time (ms),mismatch_frac"
    headers = {op: info.header() for op, (_, info) in registry().items()}
    assert headers == {op: quant if op.startswith("quantize") else gemm for op in headers}
    assert (gemm, quant) == (constants.GEMM_HEADER, constants.QUANT_HEADER)


def test_the_frozen_file_is_self_contained_and_byte_stable() -> None:
    text = source()
    assert text == source()  # the same package builds the same file
    for line in PLACEHOLDERS.values():
        assert text.count(line) == 1
    assert "import gitcampaign" not in text and "from gitcampaign" not in text
    compile(text, "quick_test_bench.py", "exec")


def test_snr_is_nan_for_nan_and_exact_for_a_known_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks that do not divide the 4096 elements: the chunked sums must still cover every element.
    monkeypatch.setattr(qtb, "SNR_CHUNK", 1000)
    generator = torch.Generator().manual_seed(1)
    reference = torch.randn(64, 64, generator=generator, dtype=torch.float64)
    # An error of exactly 1% of the signal in norm is 40 dB.
    assert qtb.snr_db(reference, reference * 1.01) == pytest.approx(40.0, abs=1e-9)
    poisoned = reference.clone()
    poisoned[3, 5] = math.nan
    assert math.isnan(qtb.snr_db(reference, poisoned))
    assert qtb.snr_db(reference, reference.clone()) == math.inf
    assert math.isnan(qtb.snr_db(reference, reference[:32]))


def test_population_stddev_and_median_of_the_per_repeat_metric() -> None:
    # 1e12 FLOPs in 1 s and in 0.5 s: 1 and 2 TFLOPS; population stddev 0.5, median 1.5.
    timing = qtb.Timing([1000.0, 500.0], work=1e12, scale=1e12)
    assert timing.per_repeat_metric == [1.0, 2.0]
    assert timing.stddev == pytest.approx(0.5)
    assert timing.metric == pytest.approx(1.5)
    assert timing.median_ms == pytest.approx(750.0)


def test_cells_keep_six_digits_and_write_nan() -> None:
    assert qtb.csv_line(["s", 1, 2, 3, 4, "ERROR", 123.4567891, math.nan]) == "s,1,2,3,4,ERROR,123.457,nan\n"


def test_interpreter_quant_rule_forgives_only_the_interpreter_rounding_faults() -> None:
    e4m3 = torch.float8_e4m3fn
    scales = torch.tensor([[0.5]])
    # Codes as bit patterns: 0x70 = 128, 0x6F = 120 (one step), 0x68 = 64 (the lost carry of 128),
    # 0x08 = 2**-6 and 0x04 = its lost-carry half in the subnormals.
    reference = torch.tensor([[0x70, 0x30, 0x08, 0xB0]], dtype=torch.uint8).view(e4m3)
    forgiven = torch.tensor([[0x68, 0x31, 0x04, 0xAF]], dtype=torch.uint8).view(e4m3)
    exact = CheckSpec("mismatch_frac", ("codes", "scales"), "exact")

    def reasons(codes: torch.Tensor, scale: torch.Tensor, cuda: bool = False) -> list[str]:
        return qtb.judge(exact, [codes, scale], [reference, scales], 0.0, cuda)[1]

    assert reasons(forgiven, scales) == []
    assert reasons(forgiven, scales, cuda=True)  # the GPU's rule is bit for bit
    two_steps = torch.tensor([[0x70, 0x32, 0x08, 0xB0]], dtype=torch.uint8).view(e4m3)
    assert reasons(two_steps, scales)
    sign_flip = torch.tensor([[0x70, 0xB0, 0x08, 0xB0]], dtype=torch.uint8).view(e4m3)
    assert reasons(sign_flip, scales)
    # Scales involve no fp8 cast: bit for bit everywhere.
    assert reasons(reference, torch.tensor([[0.5000001]]))
    # The reported share counts codes and scales: 4 codes wrong of 4 codes + 1 scale.
    assert qtb.mismatch_fraction([forgiven, scales], [reference, scales]) == pytest.approx(4 / 5)


# ------------------------------------------------------------------------------------------------
# The harness as a campaign runs it
# ------------------------------------------------------------------------------------------------


def test_placeholders_left_in_are_refused(tmp_path: Path) -> None:
    harness = tmp_path / "repo" / "campaigns" / "x" / "quick_test_bench.py"
    harness.parent.mkdir(parents=True)
    harness.write_text(source())
    process, csv_text = run_harness(harness, [{"label": "s", "M": 8, "N": 8, "K": 8}])
    assert process.returncode == 3
    assert "placeholders" in process.stderr and "git campaign prepare" in process.stderr
    assert csv_text is None


@pytest.mark.parametrize(
    ("shapes", "args", "message"),
    [
        ([{"label": "s", "M": 8, "N": 8, "K": 8}], ["--repeats", "0"], "--repeats must be at least 1"),
        ([{"label": "s", "M": 8, "N": 8, "K": 8}], ["--window-s", "-1"], "--window-s must be between"),
        (None, [], "--shapes-file"),  # required argument missing: 3, not argparse's 2
        ([{"label": "s", "M": 8, "N": 8, "K": 8, "min_snr_db": 10}], [], "may only tighten"),
        ([{"label": "s", "M": 8, "K": 8}], [], "has no 'N'"),
        ([{"label": "s", "M": 8, "N": 8, "K": 8, "bogus": 1}], [], "that op gemm does not declare"),
        ([{"label": "a b", "M": 8, "N": 8, "K": 8}], [], "CSV cell"),
    ],
)
def test_usage_errors_exit_3(
    tmp_path: Path, shapes: list[dict[str, object]] | None, args: list[str], message: str
) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm", "torch", {"gemm.py": FAKE_GEMM})
    process, csv_text = run_harness(harness, shapes, *args)
    assert process.returncode == 3, process.stderr
    assert message in process.stderr
    assert csv_text is None


@CPU_ONLY
def test_fp8_with_the_torch_backend_needs_a_gpu(tmp_path: Path) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm_fp8_rowwise", "torch", {"gemm.py": FAKE_GEMM})
    process, csv_text = run_harness(harness, [{"label": "s", "M": 8, "N": 8, "K": 8}])
    assert process.returncode == 2
    assert "needs a CUDA GPU" in process.stderr
    assert csv_text is None


def test_planted_kernels_fail_each_check_with_its_reason(tmp_path: Path) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", {"gemm.py": FAKE_GEMM})
    shapes: list[dict[str, object]] = [
        {"label": label, "M": 32, "N": 32, "K": k} for label, k, _, _ in PLANTED
    ]
    shapes[1]["min_snr_db"] = 200.0
    process, csv_text = run_harness(harness, shapes, "--repeats", "2")
    assert process.returncode == 1, process.stderr
    assert csv_text is not None and csv_text.startswith(constants.GEMM_HEADER + "\n")
    table = rows(csv_text)
    assert [row["label"] for row in table] == [label for label, _, _, _ in PLANTED]
    for row, (label, _, check, reason) in zip(table, PLANTED, strict=True):
        assert row["Check"] == check, (label, process.stderr)
        if reason is not None:
            assert any(label in line and reason in line for line in process.stderr.splitlines()) or (
                check == "ERROR" and f"{label}: ERROR" in process.stderr and reason in process.stderr
            ), (label, process.stderr)
    # Each shape's time line, which validate's time-left estimate reads its compile seconds from.
    assert len(FIRST_CALLS.findall(process.stderr)) == len(PLANTED), process.stderr
    honest, errored = table[0], table[PLANTED.index(("raises", 69, "ERROR", "planted failure"))]
    assert all(math.isfinite(float(honest[column])) for column in ("out_snr", "da_snr", "db_snr"))
    assert all(errored[column] == "nan" for column in constants.GEMM_HEADER.split(",")[6:])


def test_timer_replaced_at_import_fails_every_shape(tmp_path: Path) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", {"gemm.py": FAKE_GEMM})
    shapes = [{"label": "a", "M": 16, "N": 16, "K": 64}, {"label": "b", "M": 16, "N": 24, "K": 64}]
    process, csv_text = run_harness(harness, shapes, env={"FAKE_PATCH_TIMER_AT_IMPORT": "1"})
    assert process.returncode == 1
    assert csv_text is not None and [row["Check"] for row in rows(csv_text)] == ["FAIL", "FAIL"]
    assert "timer replaced when the kernels were imported: time.perf_counter" in process.stderr


def test_forward_only_writes_nan_backward_columns(tmp_path: Path) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", {"gemm.py": FAKE_GEMM})
    process, csv_text = run_harness(harness, [{"label": "s", "M": 48, "N": 40, "K": 64}], "--forward-only")
    assert process.returncode == 0, process.stderr
    assert csv_text is not None
    (row,) = rows(csv_text)
    assert row["Check"] == "PASS"
    for column in ("Backward TFLOPS", "Backward TFLOPS_stddev", "Backward Time (ms)", "da_snr", "db_snr"):
        assert row[column] == "nan"
    assert float(row["Forward TFLOPS"]) > 0 and float(row["out_snr"]) >= 40.0


@CPU_ONLY
def test_real_triton_gemm_on_the_tiny_preset(tmp_path: Path) -> None:
    """The real kernel in Triton's interpreter: every tiny shape PASS, sane figures, input order kept."""
    harness = harness_repo(tmp_path / "repo", "gemm", "triton")
    shapes = tiny_shapes("tiny")
    process, csv_text = run_harness(harness, shapes, "--repeats", "1")
    assert process.returncode == 0, process.stderr
    assert "Triton interpreter" in process.stderr and "clock: time.perf_counter" in process.stderr
    assert csv_text is not None and csv_text.split("\n", 1)[0] == constants.GEMM_HEADER
    table = rows(csv_text)
    assert [row["label"] for row in table] == [shape["label"] for shape in shapes]
    for row, shape in zip(table, shapes, strict=True):
        assert row["Check"] == "PASS"
        assert (row["B"], row["M"], row["N"], row["K"]) == (
            "1",
            str(shape["M"]),
            str(shape["N"]),
            str(shape["K"]),
        )
        # fp16 with fp32 accumulation sits near 70 dB; the interpreter is far below 1 TFLOPS.
        for column in ("out_snr", "da_snr", "db_snr"):
            assert 40.0 <= float(row[column]) < 120.0
        for column in ("Forward TFLOPS", "Backward TFLOPS"):
            assert 0.0 < float(row[column]) < 1.0
        # The ms columns are what Combined Step TFLOPS = 6MNK / (fwd + bwd) needs.
        step_ms = float(row["Forward Time (ms)"]) + float(row["Backward Time (ms)"])
        assert 6.0 * shape["M"] * shape["N"] * shape["K"] / (step_ms * 1e-3) / 1e12 < 1.0


@CPU_ONLY
@pytest.mark.parametrize("op", ["quantize_fp8_blockwise", "quantize_fp8_tensorwise"])
def test_real_quantisation(tmp_path: Path, op: str) -> None:
    """Quantisation checked under the announced CPU rule (tensorwise: one scale for the tensor)."""
    quant = harness_repo(tmp_path / "q", op, "triton")
    process, csv_text = run_harness(quant, tiny_shapes("tiny-quant"), "--repeats", "1")
    assert process.returncode == 0, process.stderr
    assert "forgive the interpreter's fp32->fp8 rounding faults" in process.stderr
    assert csv_text is not None and csv_text.split("\n", 1)[0] == constants.QUANT_HEADER
    for row in rows(csv_text):
        assert row["Check"] == "PASS" and float(row["Forward GB/s"]) > 0
        # The interpreter's rounding faults touch a few percent of the codes, never most of them.
        assert 0.0 <= float(row["mismatch_frac"]) < 0.1


@CPU_ONLY
def test_real_grouped_gemm(tmp_path: Path) -> None:
    """Grouped GEMM with skewed and empty groups."""
    grouped = harness_repo(tmp_path / "g", "grouped_gemm", "torch")
    shapes = tiny_shapes("tiny-grouped")
    process, csv_text = run_harness(grouped, shapes, "--repeats", "1")
    assert process.returncode == 0, process.stderr
    assert csv_text is not None
    table = rows(csv_text)
    assert [(row["label"], row["B"], row["Check"]) for row in table] == [
        (shape["label"], str(shape["B"]), "PASS") for shape in shapes
    ]


@CPU_ONLY
def test_full_bench_runs_both_providers_on_the_cpu(tmp_path: Path) -> None:
    shapes_path = tmp_path / "shapes.yaml"
    shapes_path.write_text(textwrap.dedent("- {label: odd, M: 65, N: 72, K: 64}\n"))
    csv_path = tmp_path / "full.csv"
    process = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "benchmarks" / "full_bench.py"),
            "--op",
            "gemm",
            "--shapes",
            str(shapes_path),
            "--csv",
            str(csv_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={key: value for key, value in os.environ.items() if not key.startswith("KERNELS_")},
    )
    assert process.returncode == 0, process.stderr
    table = rows(csv_path.read_text())
    assert [(row["label"], row["provider"]) for row in table] == [("odd", "triton"), ("odd", "torch")]
    for row in table:
        assert float(row["out_snr"]) >= 40.0 and float(row["db_snr"]) >= 40.0
        # Combined step TFLOPS = 6MNK / step time, consistent with the two time columns.
        step_ms = float(row["Forward Time (ms)"]) + float(row["Backward Time (ms)"])
        assert float(row["Combined Step TFLOPS"]) == pytest.approx(6 * 65 * 72 * 64 / step_ms / 1e9, rel=1e-4)
    assert "geomean" in process.stdout and "speedup" in process.stdout


# ------------------------------------------------------------------------------------------------
# On a GPU (the lead's H200): the CUDA paths that the CPU cannot reach
# ------------------------------------------------------------------------------------------------

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# A forbidden cache (docs/harness.md: an identity-keyed cache must FAIL): keyed on the operands'
# addresses and versions, it answers from memory whenever the allocator reuses an address.
FAKE_POINTER_CACHE = """
import torch

_by_address = {}


def gemm(a, b):
    key = (a.data_ptr(), b.data_ptr(), a._version, b._version, tuple(a.shape), tuple(b.shape))
    if key not in _by_address:
        _by_address[key] = (a @ b.T).detach()
    return _by_address[key] + 0 * (a[:, :1] @ b[:, :1].T)
"""


# A kernel that pays 30 ms for inputs it has not seen, keyed on tensor identity (the object kept
# alive, so an id is never recycled) and on the address and version of the data.
FAKE_IDENTITY_CACHE = """
import time

_seen = {}


def gemm(a, b):
    keys = [("id", id(a), id(b)), ("ptr", a.data_ptr(), b.data_ptr(), a._version, b._version)]
    if not any(key in _seen for key in keys):
        time.sleep(0.03)
    for key in keys:
        _seen[key] = (a, b)
    return a @ b.T
"""


@CPU_ONLY
def test_an_identity_cache_gains_nothing_in_the_timed_calls(tmp_path: Path) -> None:
    """Every timed call gets inputs the op has never seen: a cache keyed on identity, address or
    version never hits, so the figure includes the miss cost on every call."""
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", {"gemm.py": FAKE_IDENTITY_CACHE})
    process, csv_text = run_harness(
        harness, [{"label": "cached", "M": 64, "N": 64, "K": 64}], "--repeats", "4", "--forward-only"
    )
    assert csv_text is not None, process.stderr
    assert float(rows(csv_text)[0]["Forward Time (ms)"]) >= 30.0, csv_text


def test_clock_drift_is_judged_on_thirds_not_on_the_swings() -> None:
    """Under the power limit the clock hunts; only a drift between the window's start and end warns."""
    hunting = [(1500.0 + (150.0 if i % 2 else -150.0), 690.0, 60.0) for i in range(30)]
    drifting = [(1600.0 - 10.0 * i, 690.0, 60.0) for i in range(30)]
    window = qtb.Window("x forward", 100, 2, 600.0, 1.0, True, hunting)
    assert window.clock_moved < qtb.CLOCK_MOVED_WARN
    window.samples = drifting
    assert window.clock_moved > qtb.CLOCK_MOVED_WARN
    assert window.summary()["sm_mhz"] == {"min": 1310.0, "median": 1455.0, "max": 1600.0}
    window.samples = []
    assert window.clock_moved == 0.0 and "no clock record" in window.describe()


def test_a_window_says_when_the_host_cannot_keep_up() -> None:
    """The harness times GPU work with the launch hidden; its log says when launching a call takes
    the host longer than the GPU takes to run it (a step that does not run ahead pays the host's)."""
    host_bound = qtb.Window("x backward", 100, 2, 600.0, 1.0, True, [], 2.0, host_ms=1.7, gpu_ms=1.03)
    assert host_bound.host_bound
    assert "a call: host 1.700 ms to launch, GPU 1.030 ms" in host_bound.describe()
    assert host_bound.summary()["host_ms"] == 1.7 and host_bound.summary()["gpu_ms"] == 1.03
    assert not qtb.Window("x forward", 100, 2, 600.0, 1.0, True, [], 2.0, host_ms=0.05, gpu_ms=1.0).host_bound
    covered = qtb.Window("x", 100, 2, 600.0, 1.0, True, [], 2.0, host_ms=1.7, gpu_ms=1.03, covered=100)
    assert "100 of the timed calls after a spin" in covered.describe() and covered.summary()["covered"] == 100


class FakeEnd:
    """A CUDA end event the test completes by hand."""

    def __init__(self) -> None:
        self.done = False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True


def run_cover(cover: qtb.Cover, ends: list[FakeEnd], finish_previous: bool = False) -> list[bool]:
    """Launch one call per event (whether it got a spin); with `finish_previous` the GPU finishes
    each call while the next one launches, else none finishes."""
    spins = []
    for index, end in enumerate(ends):
        spins.append(cover.needed())
        cover.launched(end)
        if finish_previous and index:
            ends[index - 1].done = True
    return spins


def test_the_launch_cover_spins_until_enough_is_queued() -> None:
    """A spin goes before a call whenever the calls queued ahead of it cannot hide its launch; not only
    when the GPU has caught up (a host-bound op's calls would then hold part of their own launch)."""
    # GPU-bound (the GEMM backward: 3.2 ms on the GPU, 1.5 ms to launch): spins for the first two
    # calls only (the call at the head is taken as almost done); two queued ahead cover a launch.
    cover = qtb.Cover(launch_s=1.5e-3, call_s=3.2e-3)
    assert cover.cycles == int(3e-3 * qtb.SPIN_CYCLES_PER_S)
    assert run_cover(cover, [FakeEnd() for _ in range(5)]) == [True, True, False, False, False]
    assert cover.covered == 2
    # Host-bound (0.36 ms to launch a 0.26 ms call): the GPU is never far enough ahead, every call
    # gets a spin, even while the previous call still runs.
    cover = qtb.Cover(launch_s=0.36e-3, call_s=0.26e-3)
    spins = run_cover(cover, [FakeEnd() for _ in range(4)], finish_previous=True)
    assert spins == [True] * 4 and cover.covered == 4 and len(cover.pending) == 2
    # Four calls queued ahead (three whole, the head nearly done) hide the launch: no spin.
    cover = qtb.Cover(launch_s=0.36e-3, call_s=0.26e-3)
    assert run_cover(cover, [FakeEnd() for _ in range(6)]) == [True, True, True, True, False, False]
    # The spin has bounds: a hiccup in the probes cannot stall the GPU for long.
    assert qtb.Cover(launch_s=1.0, call_s=1e-3).cover_s == qtb.MAX_COVER_S
    assert qtb.Cover(launch_s=1e-6, call_s=1e-6).cover_s == qtb.MIN_COVER_S


class FakeKernel:
    """What Triton's autotuner wraps: records each run (the config, and whether it only compiled)."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, bool]] = []
        self.fn = lambda x, B: None  # the autotuner looks for the Python function underneath

    def run(self, *args: object, grid: object, warmup: bool, B: int, **kwargs: object) -> None:
        self.runs.append((B, warmup))


def test_the_warm_up_compiles_every_config_before_the_autotuner_times_them() -> None:
    """On a GPU the first call of a shape compiles all of an autotuned kernel's configs at once, then
    Triton times them as it always does: the same winner, from Triton's own timings. A key whose
    tuning is known compiles nothing more; elsewhere, and once the first call is done, the autotuner
    is Triton's own."""
    from triton import Config
    from triton.runtime.autotuner import Autotuner

    original = Autotuner._bench
    fake = FakeKernel()
    timings = {1: 3.0, 2: 1.0, 3: 2.0}  # ms a call, by config: 2 wins

    def bench(call: object, quantiles: object) -> list[float]:
        call()  # type: ignore[operator]
        return [timings[fake.runs[-1][0]]] * 3

    tuner = Autotuner(fake, ["x"], [Config({"B": b}) for b in timings], ["x"], None, None, do_bench=bench)
    with qtb.configs_compiled_together(torch.device("cuda"), time.perf_counter):
        assert Autotuner._bench is not original
        tuner.run(7, grid=(1,), warmup=False)
        compiled, timed = fake.runs[:3], fake.runs[3:]
        assert sorted(compiled) == [(1, True), (2, True), (3, True)]
        assert timed == [(1, False), (2, False), (3, False), (2, False)]  # benchmarked, then launched with 2
        fake.runs.clear()
        tuner.run(7, grid=(1,), warmup=False)  # the key's tuning is known: nothing compiled, 2 launched
        assert fake.runs == [(2, False)]
    assert Autotuner._bench is original
    with qtb.configs_compiled_together(torch.device("cpu"), time.perf_counter):
        assert Autotuner._bench is original


def test_the_warm_up_times_configs_briefly_unless_the_kernel_brings_its_benchmark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In the warm-up the autotuner times each config with do_bench at TUNING_WARMUP_MS and
    TUNING_REP_MS, and the winner is still the fastest by that median; the seconds spent are counted.
    Outside the warm-up the tuner's benchmark is Triton's own again, and a kernel that set its own
    (`do_bench=`) keeps it inside too."""
    import triton.testing
    from triton import Config
    from triton.runtime.autotuner import Autotuner

    fake = FakeKernel()
    timings = {1: 3.0, 2: 1.0, 3: 2.0}
    asked: list[dict[str, object]] = []

    def do_bench(call: Callable[[], object], **kwargs: object) -> list[float]:
        call()
        asked.append(kwargs)
        return [timings[fake.runs[-1][0]]] * 3

    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    tuner = Autotuner(fake, ["x"], [Config({"B": b}) for b in timings], ["x"], None, None)
    with qtb.configs_compiled_together(torch.device("cuda"), time.perf_counter) as tuning:
        tuner.run(7, grid=(1,), warmup=False)
    brief = {"warmup": qtb.TUNING_WARMUP_MS, "rep": qtb.TUNING_REP_MS, "quantiles": (0.5, 0.2, 0.8)}
    assert asked == [brief] * 3
    assert fake.runs[-1] == (2, False) and tuning.seconds > 0
    assert "do_bench" not in tuner.__dict__  # Triton's default benchmark once the warm-up is over

    own: list[int] = []

    def kernels_bench(call: Callable[[], object], quantiles: object) -> list[float]:
        call()
        own.append(fake.runs[-1][0])
        return [timings[fake.runs[-1][0]]] * 3

    asked.clear()
    tuner = Autotuner(
        fake, ["x"], [Config({"B": b}) for b in timings], ["x"], None, None, do_bench=kernels_bench
    )
    with qtb.configs_compiled_together(torch.device("cuda"), time.perf_counter):
        tuner.run(8, grid=(1,), warmup=False)
    assert own == [1, 2, 3] and asked == []


def test_the_host_stays_at_most_queue_s_ahead() -> None:
    """The host waits for the oldest calls to end once more than queue_s is queued, so its time tracks
    the GPU's (a pre-roll or window sized in host time is that long on the GPU too), and keeps enough
    queued that no launch is left uncovered."""
    # 1 ms calls, 20 ms bound: 21 queued (the head and 20 whole calls), the older ones waited for.
    cover = qtb.Cover(launch_s=0.1e-3, call_s=1e-3, queue_s=0.02)
    ends = [FakeEnd() for _ in range(100)]
    spins = run_cover(cover, ends)
    assert len(cover.pending) == 21 and all(end.done for end in ends[:79]) and not ends[79].done
    assert spins[:2] == [True, True] and cover.covered == 2  # the first two: nothing queued behind the head
    # Calls longer than the bound: one still queued behind the head, so the next launch is covered.
    cover = qtb.Cover(launch_s=0.1e-3, call_s=0.05, queue_s=0.02)
    ends = [FakeEnd() for _ in range(5)]
    assert run_cover(cover, ends) == [True, True, False, False, False] and len(cover.pending) == 2
    # The bound is at least twice the cover; 0 leaves the queue unbounded (the launch queue's depth).
    assert qtb.Cover(launch_s=4e-3, call_s=1e-3, queue_s=1e-3).queue_s == 2 * qtb.MAX_COVER_S
    cover = qtb.Cover(launch_s=0.1e-3, call_s=1e-3, queue_s=0)
    run_cover(cover, ends := [FakeEnd() for _ in range(100)])
    assert len(cover.pending) == 100 and not any(end.done for end in ends)


@GPU
@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "torch"])
@pytest.mark.parametrize(
    ("op", "preset_name"),
    [
        ("gemm", "tiny"),
        ("gemm_fp8_tensorwise", "tiny"),
        ("gemm_fp8_rowwise", "tiny"),
        ("gemm_fp8_blockwise", "tiny"),
        ("grouped_gemm", "tiny-grouped"),
        ("quantize_fp8_tensorwise", "tiny-quant"),
        ("quantize_fp8_rowwise", "tiny-quant"),
        ("quantize_fp8_blockwise", "tiny-quant"),
    ],
)
def test_every_op_passes_on_the_gpu(tmp_path: Path, op: str, preset_name: str, backend: str) -> None:
    """Events, L2 flush, allocator poisoning, bf16 and exact quantisation on real hardware."""
    harness = harness_repo(tmp_path / "repo", op, backend)
    shapes = tiny_shapes(preset_name)
    # No pre-roll, short windows, one pinned config per kernel: this test is about the checks;
    # BENCHMARKS.md is about the timing, and autotuning every config on each tiny shape took up to
    # 111 s of the 120 s limit per op (H200, cold Triton cache, 2026-11-30).
    process, csv_text = run_harness(
        harness,
        shapes,
        *("--repeats", "3", "--iters-per-repeat", "2", "--preroll-s", "0", "--window-s", "0"),
        env=GPU_TEST_CONFIGS,
    )
    assert process.returncode == 0, process.stderr
    assert "clock: CUDA events" in process.stderr
    assert csv_text is not None
    table = rows(csv_text)
    assert [row["label"] for row in table] == [shape["label"] for shape in shapes]
    for row in table:
        assert row["Check"] == "PASS"
        if op.startswith("quantize"):
            assert float(row["mismatch_frac"]) == 0.0 and 0.0 < float(row["Forward GB/s"]) < 4800.0
        else:
            assert (
                0.0 < float(row["Forward TFLOPS"]) < 1979.0 and 0.0 < float(row["Backward TFLOPS"]) < 1979.0
            )


@GPU
@pytest.mark.gpu
def test_an_address_keyed_cache_fails_on_the_gpu(tmp_path: Path) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", {"gemm.py": FAKE_POINTER_CACHE})
    process, csv_text = run_harness(
        harness, [{"label": "cached", "M": 512, "N": 512, "K": 512}], "--repeats", "3"
    )
    assert process.returncode == 1, process.stderr
    assert csv_text is not None and rows(csv_text)[0]["Check"] == "FAIL"
    # Which metric shows the stale answer depends on where the allocator puts the checked inputs;
    # the backward of this fake is wrong whatever the address.
    assert re.search(r"cached: FAIL: (out|da|db)_snr", process.stderr), process.stderr


@GPU
@pytest.mark.gpu
def test_the_gpu_profile_lists_the_kernels_alone(tmp_path: Path) -> None:
    """`--profile` on the GPU: each phase's kernels are what its calls launched, a whole number of
    launches a call, and their times add up to the phase's GPU time. On 2026-12-06 torch.profiler's
    step range was listed as a kernel (one over 20 calls) and doubled a forward's GPU time."""
    from gitcampaign.harness.profile import STEP_RANGE

    record = gemm_profile(tmp_path, "triton", "{label: s, M: 1024, N: 1024, K: 512}", 8, GPU_TEST_CONFIGS)
    (shape,) = record["shapes"]
    for name, phase in shape["phases"].items():
        kernels = phase["kernels"]
        assert kernels and not [k for k in kernels if k["name"].startswith(STEP_RANGE)], (name, kernels)
        assert sum(kernel["launches"] for kernel in kernels) % phase["calls"] == 0, (name, kernels)
        total_ms = sum(kernel["gpu_ms"] for kernel in kernels)
        assert total_ms / phase["calls"] == pytest.approx(phase["gpu_ms_per_call"]), name


@pytest.mark.parametrize("granularity", ["tensorwise", "rowwise", "blockwise"])
@pytest.mark.parametrize(("rows", "cols"), [(3, 128), (5, 300), (1, 1)])  # whole blocks, a K tail, a 1x1
def test_own_quant_reference_matches_the_kernel_reference(granularity: str, rows: int, cols: int) -> None:
    """The harness keeps its own copy of the quantisation rule (a round cannot edit what judges it);
    it must stay bit-identical to the documented rule in kernels/quant.py."""
    import torch

    from kernels.quant import quantize_fp8_reference

    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows * 31 + cols)) * 7
    if rows > 1:
        x[1] = 0  # an all-zero row takes the eps scale
    ours = spec_module(f"quantize_fp8_{granularity}").reference(x)
    kernel_ref = quantize_fp8_reference(x, granularity)
    assert torch.equal(ours[0].view(torch.uint8), kernel_ref[0].view(torch.uint8))
    assert torch.equal(ours[1], kernel_ref[1])


def test_the_profile_times_the_host_with_no_profiler_attached() -> None:
    """The host's time a call comes from calls issued with torch.profiler off: here a call that
    costs 20 ms only while a profiler records reads under 10 ms, and the kernels, and the SM clock
    they are held at, still come from the profiled calls."""
    import time
    from types import SimpleNamespace

    import torch

    from gitcampaign.harness.profile import profile_phase

    profiled = []

    def call() -> None:
        recording = torch._C._autograd._profiler_enabled()
        profiled.append(recording)
        if recording:
            time.sleep(0.02)
        torch.ones(4).sum()

    class Monitor:  # as GpuMonitor: samples (MHz, W, C) while the block runs, and one at its end
        @contextlib.contextmanager
        def recording(self) -> Iterator[list[tuple[float, float, float]]]:
            samples = [(1480.0, 690.0, 60.0)]
            yield samples
            recorded.append(list(profiled))
            samples += [(1500.0, 700.0, 61.0), (1520.0, 700.0, 61.0)]

    recorded: list[list[bool]] = []
    run = SimpleNamespace(
        op=SimpleNamespace(provider=lambda inputs: call, info=SimpleNamespace(unit="TFLOPS")),
        device=torch.device("cpu"),
        clock=SimpleNamespace(monitor=Monitor()),
    )
    calls = SimpleNamespace(timed_inputs=lambda: None)
    phase = profile_phase(run, calls, "forward", 3, 1.0)  # type: ignore[arg-type]
    assert profiled == [False] * 3 + [True] * 3
    assert phase["host_ms_per_call"] < 10
    assert phase["kernels"] and phase["calls"] == 3
    # The clock of the profiled calls, whose kernels' times the phase reports: recorded around them
    # alone, not around the unprofiled calls before them.
    assert recorded == [[False] * 3 + [True] * 3] and phase["sm_mhz"] == 1500.0


def test_the_profile_counts_kernels_not_the_ranges_around_them() -> None:
    """On the GPU, CUPTI draws torch.profiler's step range and `record_function` ranges on the
    device's timeline beside the kernels; a kernel is what ran, a range is not. On 2026-12-06 the
    step's range was counted and doubled each forward's GPU time (a bf16 GEMM at 0.46 of its peak)."""
    from types import SimpleNamespace

    import torch

    from gitcampaign.harness.profile import tally

    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    def event(name: str, device: object, us: float, annotation: bool = False) -> SimpleNamespace:
        return SimpleNamespace(
            name=name,
            device_type=device,
            is_user_annotation=annotation,
            device_time_total=us,
            cpu_time_total=us,
            cpu_parent=None,
        )

    events = [
        event("ProfilerStep*", cuda, 600.0),  # left out by its name, whatever CUPTI flags it as
        event("ProfilerStep#1", cpu, 900.0, annotation=True),
        event("my_range", cuda, 300.0, annotation=True),
        event("_matmul_kernel", cuda, 300.0),
        event("_matmul_kernel", cuda, 300.0),
        event("aten::mm", cpu, 50.0),
    ]
    assert tally(events, cuda=True) == {"_matmul_kernel": {"launches": 2, "us": 600.0}}
    on_cpu = [item for item in events if item.device_type == cpu]  # a CPU run records no kernels
    assert tally(on_cpu, cuda=False) == {"aten::mm": {"launches": 1, "us": 50.0}}


def test_a_backward_profile_holds_the_backward_alone() -> None:
    """A backward's call is prepared (its forward run) before the profiler starts, so the forward's
    kernels (here its operator) stay out of the backward's breakdown. They were in it until
    2026-12-06: a blockwise fp8 backward read 12 launches and 0.44 of the fp8 peak with its
    forward's 3 launches and time counted in."""
    from types import SimpleNamespace

    import torch

    from gitcampaign.harness.profile import profile_phase

    forwards = []

    def backward_call(inputs: object) -> object:
        forwards.append(torch._C._autograd._profiler_enabled())
        torch.ones(8).cumsum(0)  # the forward
        return lambda: torch.ones(4).sum()

    run = SimpleNamespace(
        op=SimpleNamespace(info=SimpleNamespace(unit="TFLOPS")),
        device=torch.device("cpu"),
        clock=SimpleNamespace(),  # the CPU's clock: no NVML monitor
    )
    calls = SimpleNamespace(timed_inputs=lambda: None, backward_call=backward_call)
    phase = profile_phase(run, calls, "backward", 3, 1.0)  # type: ignore[arg-type]
    names = [kernel["name"] for kernel in phase["kernels"]]
    assert forwards == [False] * 6 and phase["sm_mhz"] is None  # no clock read on the CPU
    assert "aten::sum" in names and not any("cumsum" in name for name in names)


def test_the_profile_mode_writes_the_breakdown_analyze_reads(tmp_path: Path) -> None:
    """`--profile`: per shape and phase, the calls on the harness's own inputs under torch.profiler
    (CPU operators here), with the work per call and the host's time to issue one."""
    record = gemm_profile(tmp_path, "torch", "{label: s, M: 64, N: 48, K: 32}", 4)
    assert (record["format"], record["op"], record["device"], record["peak"]) == (1, "gemm", "cpu", "bf16")
    (shape,) = record["shapes"]
    assert shape["label"] == "s" and set(shape["phases"]) == {"forward", "backward"}
    forward = shape["phases"]["forward"]
    assert (forward["calls"], forward["unit"], forward["work"]) == (4, "flop", 2.0 * 64 * 48 * 32)
    assert forward["host_ms_per_call"] > 0 and forward["gpu_ms_per_call"] > 0
    assert forward["kernels"] and sum(kernel["share"] for kernel in forward["kernels"]) == pytest.approx(1.0)
    assert forward["kernels"][0]["launches"] >= 4  # a top-level operation of each of the 4 calls
