"""Every script under benchmarks/ still runs (issue 36: bookkeeping.py broke on main and nothing saw
it). A script that can run on the CPU runs at a tiny size; a GPU-only one parses its arguments (its
imports load, its options exist); a shell script parses and names only files that exist. A new
script must be added to one of the lists below, or the first test fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO_ROOT / "benchmarks"
CHEATS = Path(__file__).parent / "cheats"

# Scripts whose CPU run here is tiny (seconds); `slow` ones take tens of seconds in the interpreter.
# best_vendor.py, host_cost.py and train_step.py run their --smoke modes in
# tests/test_benchmark_scripts.py; vendor.py is their library of the vendor's paths.
CPU_RUNS = (
    "best_vendor.py",
    "bookkeeping.py",
    "lint_corpus.py",
    "full_bench.py",
    "dev/layer_dev.py",
    "heat_cost.py",
    "host_cost.py",
    "train_step.py",
    "vendor.py",
)
GPU_ONLY = (
    "harness_check.py",
    "dev/agreement_dev.py",
    "dev/compile_dev.py",
    "dev/fp8_dev.py",
    "dev/fp8_host_profile_dev.py",
    "dev/gemm_dev.py",
    "dev/grouped_dev.py",
    "dev/host_profile_dev.py",
    "dev/quant_dev.py",
    "dev/sass_dev.py",  # compiles for sm_90 without a GPU: tests/test_sm90_compile.py runs it
    "dev/vendor_compile_dev.py",
)
SHELL = (
    "campaign_session.sh",  # its lanes run on the CPU in tests/test_campaign_session.py
    "cuda_example.sh",
    "gpu_loop_timing.sh",
    "h200_session.sh",
    "harness_session.sh",
    "multi_gpu_timing.sh",
    "rmsnorm_example.sh",
)


def script(name: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_every_script_is_covered() -> None:
    found = {path.relative_to(BENCHMARKS).as_posix() for path in BENCHMARKS.rglob("*.py")}
    assert found == set(CPU_RUNS) | set(GPU_ONLY)
    assert {path.name for path in BENCHMARKS.glob("*.sh")} == set(SHELL)


def test_bookkeeping_builds_and_times_a_small_campaign() -> None:
    done = script("bookkeeping.py", "--rounds", "3", "--repeats", "1")
    assert done.returncode == 0, done.stderr
    assert "built 3 rounds" in done.stdout
    assert "lineage read in-process (4 rows)" in done.stdout  # the baseline and three rounds
    for verb in ("status", "log", "log --json", "show 1", "status --json"):
        assert f"git campaign {verb} " in done.stdout, verb


def test_lint_corpus_counts_judged_findings(tmp_path: Path) -> None:
    project = tmp_path / "corpus" / "proj"
    project.mkdir(parents=True)
    (project / "cache.py").write_text((CHEATS / "w2_id_activation_cache.py.txt").read_text())
    (project / "clean.py").write_text("def op(a, b):\n    return a @ b.t()\n")
    listed = script("lint_corpus.py", str(tmp_path / "corpus"), "--list")
    assert listed.returncode == 0, listed.stderr
    lines = [line for line in listed.stdout.splitlines() if line.startswith("proj: cache.py:")]
    assert lines and all(": W2 " in line for line in lines)
    judgments = tmp_path / "judgments.csv"
    rows = [line.split(":")[2] for line in lines]
    judgments.write_text(
        "project,path,line,rule,verdict,why\n"
        + "".join(f"proj,cache.py,{row},W2,true,an activation cache\n" for row in rows)
    )
    judged = script("lint_corpus.py", str(tmp_path / "corpus"), "--judgments", str(judgments))
    assert judged.returncode == 0, judged.stderr
    assert f"| proj | 2 | {len(rows)} | {len(rows)} | 0 | 0 |" in judged.stdout
    assert "precision: 100" in judged.stdout


def test_heat_cost_runs_a_heat_and_a_single_validate_on_the_fake_project(tmp_path: Path) -> None:
    """The GPU measurement's every step on the fake CPU project: init, baseline, a heat of four,
    one loser made again alone on the new head, the figures, the lineage bundle."""
    from fake_project import init_args, make_project

    def pin(speed: str, old: str = "SPEED = 100.0") -> dict[str, str]:
        return {"hypothesis": f"speed {speed}", "file": "kernel.py", "old": old, "new": f"SPEED = {speed}"}

    plan = {
        "name": "demo",
        "init": init_args()[2:],
        "candidates": [pin("110.0"), pin("90.0"), pin("120.0"), pin("105.0")],
        "single": [pin("126.0", old="SPEED = 120.0")],
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    project = make_project(tmp_path / "fake")
    done = script(
        "heat_cost.py",
        str(tmp_path / "out"),
        "--project",
        str(project),
        "--plan",
        str(tmp_path / "plan.json"),
    )
    assert done.returncode == 0, done.stderr
    assert (
        "heat of 4 on the CPU: round 2 REJECT outrun, round 3 REJECT shape_regression, round 4 ACCEPT"
        in done.stdout
    )
    figures = json.loads((tmp_path / "out" / "heat_cost.json").read_text())
    assert figures["heat"]["result"]["accepted"] == 4 and figures["single"]["round"] == 6
    assert figures["single"]["result"]["decision"] == "ACCEPT"  # 126 over the heat's 120
    for key in ("wall_s", "device_s", "measurement_s"):
        assert figures["heat"][key] > 0 and figures["single"][key] > 0 and figures["ratios"][key] > 0
    # The screen (five runs) and one confirmation session (two pairs) against one session: 9 runs to 4.
    assert figures["heat"]["phases"].keys() >= {"heat screen", "measurement session 1"}
    assert (tmp_path / "out" / "lineage.bundle").stat().st_size > 0
    assert "outrun" in (tmp_path / "out" / "rejected.txt").read_text()


def test_heat_cost_validates_alone_the_candidate_the_heat_confirmed(tmp_path: Path) -> None:
    """The single validate runs the path the heat's confirmation ran: the confirmed candidate where
    the heat accepted none; where it accepted one, the first loser whose change still applies."""
    sys.path.insert(0, str(BENCHMARKS))
    from heat_cost import alone

    def pin(hypothesis: str, old: str, new: str) -> dict[str, str]:
        return {"hypothesis": hypothesis, "file": "k.py", "old": old, "new": new}

    plan = {
        "candidates": [
            pin("a", "A = 1 ", "A = 2 "),
            pin("b", "B = 1 ", "B = 2 "),
            pin("c", "A = 1 ", "A = 3 "),
        ]
    }
    (tmp_path / "k.py").write_text("A = 1 \nB = 1 \n")
    assert alone(plan, {"accepted": None, "confirmed": 4}, tmp_path)["hypothesis"] == "c"
    assert alone(plan, {"accepted": None, "confirmed": None}, tmp_path)["hypothesis"] == "a"
    (tmp_path / "k.py").write_text("A = 2 \nB = 1 \n")  # round 2 accepted: its line changed
    assert alone(plan, {"accepted": 2, "confirmed": 2}, tmp_path)["hypothesis"] == "b"


@pytest.mark.slow
def test_full_bench_on_one_tiny_shape(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("- {label: t, M: 64, N: 64, K: 64}\n")
    out = tmp_path / "full.csv"
    done = script("full_bench.py", "--op", "gemm", "--shapes", str(shapes), "--csv", str(out))
    assert done.returncode == 0, done.stderr
    assert "geomean" in done.stdout
    header, row = out.read_text().splitlines()[:2]
    assert header.startswith("label,") and row.startswith("t,")


@pytest.mark.slow
def test_layer_dev_smoke_run_on_the_cpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("on a GPU the tiny model is not the CPU smoke run")
    done = script("dev/layer_dev.py", "--model", "tiny", "--steps", "1", "--granularities", "tensorwise")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^bf16 +[\d.]+", done.stdout, re.MULTILINE) and "tensorwise" in done.stdout


@pytest.mark.parametrize("name", GPU_ONLY)
def test_gpu_scripts_parse_their_arguments(name: str) -> None:
    done = script(name, "--help", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ")


@pytest.mark.parametrize("name", SHELL)
def test_shell_scripts_parse_and_name_files_that_exist(name: str) -> None:
    path = BENCHMARKS / name
    parsed = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert parsed.returncode == 0, parsed.stderr
    named = set(
        re.findall(
            r"\b((?:benchmarks|examples|gitcampaign|tests)/[\w./-]*\.(?:py|sh|yaml))", path.read_text()
        )
    )
    missing = sorted(relative for relative in named if not (REPO_ROOT / relative).exists())
    assert not missing, f"{name} names files that do not exist: {missing}"


@pytest.mark.parametrize("example", ["cuda_example.sh", "rmsnorm_example.sh"])
def test_a_gpu_example_stops_at_once_without_a_gpu(tmp_path: Path, example: str) -> None:
    if torch.cuda.is_available():
        pytest.skip("needs a machine without a GPU")
    done = subprocess.run(
        ["bash", str(BENCHMARKS / example), str(tmp_path / "out")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "needs a CUDA build of torch" in done.stdout, done.stdout + done.stderr
    assert not list((tmp_path / "out").iterdir())  # nothing built, nothing measured


def test_the_plans_candidates_come_back_as_branches(tmp_path: Path) -> None:
    """benchmarks/plans/dogfood-3/branches.sh makes each patch's branch in a clone of this repository
    (one commit with Hypothesis:/Change: lines on the base the patch names, as `round --from` takes
    it), leaves the checkout alone, and keeps a branch that exists."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    env = {**os.environ, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"}
    run = ["bash", str(BENCHMARKS / "plans" / "dogfood-3" / "branches.sh")]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True, check=True).stdout

    head = git("rev-parse", "HEAD")
    made = subprocess.run(run, cwd=clone, env=env, capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    patches = sorted((BENCHMARKS / "plans" / "dogfood-3").glob("*.patch"))
    assert patches and len(made.stdout.splitlines()) == len(patches)
    for patch in patches:
        branch = f"cand/{patch.stem}"
        base = re.search(r"^base-commit: (\w+)$", patch.read_text(), re.MULTILINE)
        assert base and git("rev-parse", f"{branch}~1").strip() == base[1]
        message = git("log", "-1", "--format=%B", branch)
        assert "\nHypothesis: " in message and "\nChange: " in message, branch
        assert git("diff", "--stat", f"{branch}~1", branch).strip(), branch
    assert git("rev-parse", "HEAD") == head and not git("status", "--porcelain")
    again = subprocess.run(run, cwd=clone, env=env, capture_output=True, text=True, check=True)
    assert again.stdout.count("kept as it is") == len(patches)
