"""benchmarks/campaign_session.sh: lanes that outlast the command that started them, collected by a
later `--attach`, with what each lane did by then (the GPU runs this repository's campaigns that way)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "campaign_session.sh"

PLAN = """
lane0() {
  gc --help
  timed first sh -c 'for i in $(seq 600); do [ -e "$LANE_LOG/../../release" ] && break; sleep 0.1; done'
  timed second sh -c 'echo "lane 0 was here" >"$LANE_LOG/own.txt"; echo printed'
  timed scratch sh -c 'c="$LANE_LOG/demo/.git/campaign/triton-cache"; mkdir -p "$c"; echo kernel >"$c/k.cubin"'
  from_tree tree xfer/main sh -c 'ls gitcampaign/cli.py; echo "${PYTHONPATH%%:*}"'
  timed good echo "3 passed in 0.1s"
  timed bad sh -c 'echo "1 failed, 2 passed in 0.1s"'
  timed silent true
  for name in good bad silent; do passed $name && echo "$name" >>"$LANE_LOG/passed.txt"; done
}
lane1() {
  timed only true
}
"""

# Each lane notes its GPU and when it ran.
ORDER = """
lane0() {
  timed gpu sh -c 'echo "$CUDA_VISIBLE_DEVICES $(date +%s.%N)"; sleep 2; date +%s.%N'
}
lane1() {
  timed gpu sh -c 'echo "$CUDA_VISIBLE_DEVICES $(date +%s.%N)"'
}
"""


def run(
    *args: str, root: Path, call_s: int, cwd: Path, gpus: int = 2, validate_s: int = 330
) -> subprocess.CompletedProcess[str]:
    # A lane's budget far above what its steps take, even on a loaded 2-core machine (with 60 s, a
    # slow run skipped its last steps as over budget).
    env = {**os.environ, "SESSION_ROOT": str(root), "CALL_S": str(call_s), "LANE_S": "600", "GPUS": str(gpus)}
    env["VALIDATE_S"] = str(validate_s)
    env["REPO_BUNDLE"] = str(cwd.parent / "repo.bundle")
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=call_s + 120
    )


def project(tmp_path: Path, tool: bool = True) -> Path:
    """tmp_path/repo.bundle of a repository on branch main (what the lanes clone) holding the tool,
    or (tool=False) a README only; tmp_path/plan.sh the PLAN above."""
    repo = tmp_path / "project"
    if tool:
        shutil.copytree(
            REPO_ROOT / "gitcampaign", repo / "gitcampaign", ignore=shutil.ignore_patterns("__pycache__")
        )
    else:
        repo.mkdir()
        (repo / "README.md").write_text("no tool here\n")
    for command in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "tool"],
        ["git", "bundle", "create", "-q", str(tmp_path / "repo.bundle"), "--branches"],
    ):
        subprocess.run(command, cwd=repo, check=True, capture_output=True)
    (tmp_path / "plan.sh").write_text(PLAN)
    return repo


def members(archive: Path) -> dict[str, str]:
    with tarfile.open(archive) as tar:
        return {
            m.name: tar.extractfile(m).read().decode(errors="replace")  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_lanes_outlast_the_command_and_attach_collects_them(tmp_path: Path) -> None:
    repo = project(tmp_path)
    root = tmp_path / "machine"
    root.mkdir()
    first = run(str(tmp_path / "plan.sh"), str(tmp_path / "out1"), root=root, call_s=0, cwd=repo)
    assert first.returncode == 0, first.stderr
    # returned with lane 0 busy: its first step waits for the file made here (at most a minute)
    assert "still running" in first.stdout and "--attach" in first.stdout
    assert {"lane0.tgz", "lane1.tgz"} <= {path.name for path in (tmp_path / "out1").iterdir()}
    (root / "release").touch()

    # waits for them (as long as they take: on a loaded 2-core machine that has passed a minute)
    second = run("--attach", str(tmp_path / "out2"), root=root, call_s=300, cwd=repo)
    assert second.returncode == 0, second.stderr
    assert "all lanes done" in second.stdout
    lane0 = members(tmp_path / "out2" / "lane0.tgz")
    assert lane0["log/own.txt"] == "lane 0 was here\n"  # $LANE_LOG comes back
    assert lane0["log/second.txt"] == "printed\n"
    assert not [name for name in lane0 if "triton-cache" in name]  # a scratch repo's caches stay behind
    assert "Usage: " in lane0["log/1.out"]  # `gc`: the tool, run from main's copy in the lane's clone
    steps = lane0["log/steps.txt"]
    assert "first: sh -c for i" in steps and "first exit 0" in steps and "second exit 0" in steps
    assert "only exit 0" in members(tmp_path / "out2" / "lane1.tgz")["log/steps.txt"]
    # from_tree: the command ran in a copy of the branch's tree, that copy first on PYTHONPATH
    assert lane0["log/tree.txt"] == f"gitcampaign/cli.py\n{root}/campaign-lane0/trees/tree\n"
    assert not [name for name in lane0 if "/trees/" in name]  # the copies stay behind
    # passed: a pytest summary with no failure or error; no summary (a hang cut by its timeout) is not
    assert lane0["log/passed.txt"] == "good\n"


def test_a_bundle_without_main_is_refused_before_any_lane_starts(tmp_path: Path) -> None:
    repo = project(tmp_path)
    subprocess.run(["git", "branch", "-qm", "main", "other"], cwd=repo, check=True)
    subprocess.run(
        ["git", "bundle", "create", "-q", str(tmp_path / "repo.bundle"), "--branches"], cwd=repo, check=True
    )
    root = tmp_path / "machine"
    root.mkdir()
    refused = run(str(tmp_path / "plan.sh"), str(tmp_path / "out"), root=root, call_s=5, cwd=repo)
    assert refused.returncode == 2, refused.stdout
    assert "not a bundle with a branch main" in refused.stderr and "git bundle create" in refused.stderr
    assert not list(root.iterdir())  # nothing started


def test_a_lane_that_ends_before_its_first_step_says_why(tmp_path: Path) -> None:
    """A bundle whose main has no tool: the lane stops while setting up, and the command shows its error."""
    repo = project(tmp_path, tool=False)
    root = tmp_path / "machine"
    root.mkdir()
    done = run(str(tmp_path / "plan.sh"), str(tmp_path / "out"), root=root, call_s=60, cwd=repo)
    assert done.returncode == 0 and "all lanes done" in done.stdout, done.stderr
    assert "lane0 ended before its first step:" in done.stdout
    assert "gitcampaign" in done.stdout.split("lane0 ended before its first step:")[1]  # git archive's error


def test_a_validate_starts_only_with_enough_budget_left(tmp_path: Path) -> None:
    """A validate cut short by the lane's budget loses its measured sessions with the machine: the
    lane skips it below VALIDATE_S and goes on with the steps that fit."""
    repo = project(tmp_path)
    (tmp_path / "plan.sh").write_text("lane0() {\n  gc -c demo validate --pairs 2\n  gc --help\n}\n")
    root = tmp_path / "machine"
    root.mkdir()
    done = run(
        str(tmp_path / "plan.sh"),
        str(tmp_path / "out"),
        root=root,
        call_s=300,
        cwd=repo,
        gpus=1,
        validate_s=10000,
    )
    assert done.returncode == 0 and "all lanes done" in done.stdout, done.stderr
    lane0 = members(tmp_path / "out" / "lane0.tgz")
    assert (
        "a validate wants VALIDATE_S=10000): git campaign -c demo validate --pairs 2"
        in lane0["log/steps.txt"]
    )
    assert "log/1.out" not in lane0 and "Usage: " in lane0["log/2.out"]


def test_attach_without_a_session_and_usage(tmp_path: Path) -> None:
    lost = run("--attach", str(tmp_path / "out"), root=tmp_path, call_s=1, cwd=tmp_path)
    assert lost.returncode == 3 and "no campaign session on this machine" in lost.stderr
    usage = run(root=tmp_path, call_s=1, cwd=tmp_path)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_lanes_that_share_a_gpu_run_one_after_the_other(tmp_path: Path) -> None:
    """A plan of two lanes on a machine of one GPU: both on GPU 0, lane 1 after lane 0 is done; on two
    GPUs each lane has its own, at once."""
    repo = project(tmp_path)
    (tmp_path / "plan.sh").write_text(ORDER)
    for gpus in (1, 2):
        root = tmp_path / f"machine{gpus}"
        root.mkdir()
        out = tmp_path / f"out{gpus}"
        done = run(str(tmp_path / "plan.sh"), str(out), root=root, call_s=60, cwd=repo, gpus=gpus)
        assert done.returncode == 0 and "all lanes done" in done.stdout, done.stderr
        first = members(out / "lane0.tgz")["log/gpu.txt"].split()
        second = members(out / "lane1.tgz")["log/gpu.txt"].split()
        assert (first[0], second[0]) == (("0", "0") if gpus == 1 else ("0", "1"))
        after = float(second[1]) >= float(first[2])  # lane 1 began after lane 0's end
        assert after == (gpus == 1), (first, second)


def test_a_step_keeps_the_campaigns_it_moved_and_its_own(tmp_path: Path) -> None:
    """After a step the lane exports (and logs) each campaign whose own refs moved, and the campaign
    the step named; not the others, whose notes refs it shares."""
    repo = project(tmp_path)
    (tmp_path / "plan.sh").write_text(
        """
lane0() {
  git branch campaign/x/main main && git branch campaign/y/main main
  gc --help                                   # both new: kept
  rm "$LANE_LOG"/*-log.txt
  git notes add -m shared main                # a notes ref moves; no campaign's own refs do
  gc --help
  ls "$LANE_LOG" | grep -c -- -log.txt >"$LANE_LOG/after-help.txt"
  gc -c y --help                              # y named: kept again
  git branch campaign/x/round-2 main          # x moved
  gc --help
  ls "$LANE_LOG" | grep -- -log.txt >"$LANE_LOG/after-named.txt"
}
"""
    )
    root = tmp_path / "machine"
    root.mkdir()
    done = run(str(tmp_path / "plan.sh"), str(tmp_path / "out"), root=root, call_s=300, cwd=repo, gpus=1)
    assert done.returncode == 0 and "all lanes done" in done.stdout, done.stderr
    lane0 = members(tmp_path / "out" / "lane0.tgz")
    assert lane0["log/after-help.txt"] == "0\n"
    assert lane0["log/after-named.txt"] == "x-log.txt\ny-log.txt\n"


STAGES = """
lane0() {
  say() { echo "$1 $(stage "$1")" >>"$LANE_LOG/stages.txt"; }
  say nothing
  say demo                                     # imported from the tree: baselined, not profiled
  git branch campaign/other/main main          # a branch without a manifest: its status fails
  say other
  git notes --ref refs/notes/campaign/verdict add -m "x" "$(git hash-object -w /dev/null)"
  say demo                                     # status warns of a note on no commit: the stage stands
  gc -c demo round -m "bigger tiles"
  say demo                                     # a round open
  sed -i 's/SPEED = 100.0/SPEED = 130.0/' kernel.py
  git commit -qam $'Hypothesis: bigger tiles\\nChange: speed 130'
  gc -c demo validate --no-probe
  say demo
  gc -c demo report --force
  say demo
}
"""


def test_stage_says_what_a_kept_campaign_needs_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan run again in a later session goes on where the last stopped: `stage` reads the lane's
    clone, the campaigns kept in the tree imported into it."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT / "tests" / "commands"))
    from fake_project import git, make_project
    from test_loop import NAME, options

    from gitcampaign.commands.baseline import baseline
    from gitcampaign.commands.bundle import export
    from gitcampaign.commands.init import init

    repo = make_project(tmp_path / "project")
    shutil.copytree(
        REPO_ROOT / "gitcampaign", repo / "gitcampaign", ignore=shutil.ignore_patterns("__pycache__")
    )
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "the tool")
    monkeypatch.chdir(repo)
    init(repo, options())
    baseline(repo, None)
    git(repo, "checkout", "-q", "main")
    export(repo, NAME, repo / "campaigns" / NAME / "lineage.bundle")
    git(repo, "add", "campaigns")
    git(repo, "commit", "-qm", "the campaign, kept")
    git(repo, "bundle", "create", "-q", str(tmp_path / "repo.bundle"), "main")
    (tmp_path / "plan.sh").write_text(STAGES)
    root = tmp_path / "machine"
    root.mkdir()
    done = run(str(tmp_path / "plan.sh"), str(tmp_path / "out"), root=root, call_s=600, cwd=repo, gpus=1)
    assert done.returncode == 0 and "all lanes done" in done.stdout, done.stderr
    lines = members(tmp_path / "out" / "lane0.tgz")["log/stages.txt"].splitlines()
    assert lines[:2] == ["nothing init", f"{NAME} analyze"]
    assert lines[2].startswith("other unknown: git campaign status: ") and "manifest" in lines[2], lines
    assert lines[3:] == [f"{NAME} analyze", f"{NAME} validate", f"{NAME} report", f"{NAME} done"], lines
