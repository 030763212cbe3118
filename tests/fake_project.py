"""A tiny campaign project for engine tests: a 'kernel' whose speed and correctness are constants,
behind a quick harness that speaks the real CLI and writes the frozen GEMM CSV (and, with
--profile, the profile file `analyze` reads: one fake kernel per forward, two per backward).

Metrics are deterministic (speed × a fixed per-shape factor), so decisions are exact; optional
multiplicative noise comes from BENCH_NOISE. Real kernels run in the demo and harness tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gitcampaign.constants import GEMM_HEADER

# CORRECT decides the harness's Check on the benchmark shapes; EDGE_CASES_OK the focused test
# (K tails, M = 1: the cases the benchmark shapes do not cover), so either gate can fail alone.
KERNEL = """SPEED = {speed}
CORRECT = {correct}
EDGE_CASES_OK = {edge_cases_ok}
"""

HARNESS_TEMPLATE = r"""
import argparse, json, os, random, statistics, sys, time
from pathlib import Path
import yaml
sys.path.insert(0, str(Path(__file__).resolve().parents[0]))
parser = argparse.ArgumentParser()
parser.add_argument("--summary-csv")
parser.add_argument("--shapes-file", required=True)
PROFILING_ARGUMENTS
args = parser.parse_args()
import importlib
kernel = importlib.import_module("kernel")
mode = os.environ.get("BENCH_MODE", "")
if mode == "crash":
    raise SystemExit("boom: the harness crashed")
if mode == "hang":
    time.sleep(600)
noise = float(os.environ.get("BENCH_NOISE", "0"))
sm_mhz = float(os.environ.get("BENCH_SM_MHZ", "0")) or None  # the GPU's SM clock, as NVML would read it
shapes = yaml.safe_load(Path(args.shapes_file).read_text())
if getattr(args, "profile", None):  # docs/analyze.md: the harness's --profile file, on the "CPU"
    calls = args.profile_calls
    def phase(work, ms, kernels):
        return {"calls": calls, "unit": "flop", "work": work, "host_ms_per_call": 0.002, "gpu_ms_per_call": ms,
                "sm_mhz": sm_mhz,
                "kernels": [{"name": name, "launches": calls, "gpu_ms": ms * share * calls, "share": share}
                            for name, share in kernels]}
    profiled = []
    for shape in shapes:
        flops = 2 * shape["M"] * shape["N"] * shape["K"]
        fwd_ms = flops / (kernel.SPEED * (1 + (shape["M"] % 7) / 10) * 1e9) * 1e3  # SPEED in GFLOP/s
        phases = {"forward": phase(flops, fwd_ms, [("fake_gemm_kernel", 1.0)])}
        if not args.forward_only:
            phases["backward"] = phase(2 * flops, 2 * fwd_ms, [("fake_gemm_da", 0.5), ("fake_gemm_db", 0.5)])
        profiled.append({"label": shape["label"], "phases": phases})
    document = {"format": 1, "op": "fake_gemm", "device": "cpu", "profiler": "torch.profiler", "shapes": profiled}
    Path(args.profile).write_text(json.dumps(document))
    sys.exit(0)
lines = ["HEADER"]
for shape in shapes:
    M, N, K = shape["M"], shape["N"], shape["K"]
    speed = statistics.fmean([kernel.SPEED * (1 + random.gauss(0, noise)) * (1 + (M % 7) / 10)])
    flops = 2 * M * N * K
    fwd_ms = flops / (speed * 1e9) if mode not in ("instant", "zero") else (1e-12 if mode == "instant" else 1.0)
    bwd_ms = 2 * fwd_ms
    if mode == "zero":  # a harness whose throughput column says 0 while its times are fine
        speed = 0.0
    check = "PASS" if kernel.CORRECT else "FAIL"
    snr = 60.0 if kernel.CORRECT else 3.0
    lines.append(f"{shape['label']},1,{M},{N},{K},{check},{speed:.6g},{speed*0.01:.6g},{speed:.6g},{speed*0.01:.6g},{fwd_ms:.6g},{bwd_ms:.6g},{snr},{snr},{snr}")
text = "\n".join(lines) + "\n"
if mode == "partial":
    text = text[: len(text) // 2]
if mode == "drift":
    text = text.replace("Check", "check", 1)
Path(args.summary_csv).write_text(text)
if sm_mhz:  # the harness's clock log beside the CSV: one window a shape and phase
    windows = [{"what": f"{shape['label']} {phase}", "sm_mhz": {"median": sm_mhz}}
               for shape in shapes for phase in ("forward", "backward")]
    Path(args.summary_csv).with_suffix(".clocks.json").write_text(json.dumps({"gpu": "fake", "windows": windows}))
sys.exit(0 if kernel.CORRECT else 1)
""".replace("HEADER", GEMM_HEADER)
PROFILING_ARGUMENTS = """parser.add_argument("--profile")
parser.add_argument("--profile-calls", type=int, default=3)
parser.add_argument("--forward-only", action="store_true")"""
HARNESS = HARNESS_TEMPLATE.replace("PROFILING_ARGUMENTS", PROFILING_ARGUMENTS)
# A harness written before `analyze` existed: `--profile` is an unrecognised argument.
HARNESS_BEFORE_PROFILING = HARNESS_TEMPLATE.replace("PROFILING_ARGUMENTS", "")

SHAPES = """- {label: s-small, M: 64, N: 64, K: 64}
- {label: s-mid, M: 128, N: 256, K: 128}
- {label: s-odd, M: 129, N: 200, K: 96}
- {label: s-large, M: 512, N: 512, K: 512}
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def make_project(root: Path, speed: float = 100.0) -> Path:
    """A committed repo with kernel.py, bench.py, a shape file and a test that checks CORRECT."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    (root / "kernel.py").write_text(KERNEL.format(speed=speed, correct=True, edge_cases_ok=True))
    (root / "bench.py").write_text(HARNESS)
    (root / "shapes.yaml").write_text(SHAPES)
    (root / "test_kernel.py").write_text("import kernel\nassert kernel.EDGE_CASES_OK, 'edge cases fail'\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "kernel project")
    return root


def init_args(name: str = "demo") -> list[str]:
    return [
        "init",
        name,
        "--op",
        "fake_gemm",
        "--metric",
        "step",
        "--shapes",
        "shapes.yaml",
        "--quick-command",
        f"{sys.executable} bench.py",
        "--test-command",
        f"{sys.executable} test_kernel.py",
        "--probe-command",
        "",
        "--kernel-source",
        "kernel.py",
        "--pairs",
        "2",
    ]


def set_kernel(root: Path, speed: float, correct: bool = True, edge_cases_ok: bool = True) -> None:
    (root / "kernel.py").write_text(KERNEL.format(speed=speed, correct=correct, edge_cases_ok=edge_cases_ok))
