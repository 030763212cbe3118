"""Shapes split across GPUs (a fake nvidia-smi), and shards run through submitit's local executor."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign import executor as ex
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.shapes import Shape
from gitcampaign.vocabulary import ACCEPTED

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands.test_loop import NAME, commit_round, options  # noqa: E402
from fake_project import HARNESS, git, make_project, set_kernel  # noqa: E402

FAKE_SMI = """#!/bin/sh
# nvidia-smi --query-gpu=index,name | -i N --query-gpu=name, from FAKE_GPU_MODELS="model0,model1,..."
index=""
[ "$1" = "-i" ] && index="$2"
echo "$FAKE_GPU_MODELS" | tr ',' '\\n' | awk -v want="$index" -v all="$*" '
  want == "" && all ~ /index,name/ { print NR-1 ", " $0; next }
  want == "" || want == NR-1 { print $0 }'
"""

# The fake harness, plus: which device it was given, and a way to end its own submitit job the way
# Slurm ends one (SIGUSR2: preempted; SIGKILL: cancelled).
DEVICE_AWARE_HARNESS = HARNESS.replace(
    "Path(args.summary_csv).write_text(text)",
    """Path(args.summary_csv + ".device").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
if mode.startswith("signal-job-"):
    import signal
    pid = os.getpid()
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if b"submitit" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, getattr(signal, mode[len("signal-job-"):]))
            time.sleep(30)
Path(args.summary_csv).write_text(text)""",
)


@pytest.fixture
def gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two H200s behind a fake nvidia-smi on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_MODELS", "NVIDIA H200,NVIDIA H200")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    (root / "bench.py").write_text(DEVICE_AWARE_HARNESS)
    git(root, "commit", "-q", "-am", "harness reports its device")
    monkeypatch.chdir(root)
    init(root, options())
    return root


def run_dirs(root: Path) -> list[Path]:
    return sorted((root / ".git" / "campaign" / "runs" / NAME).iterdir())


def test_split_shapes_balances_work_and_keeps_order() -> None:
    shapes = [Shape(f"s{i}", M=m, K=64, N=64) for i, m in enumerate([512, 64, 256, 128, 64])]
    shards = ex.split_shapes(shapes, 2)
    assert [[s.label for s in shard] for shard in shards] == [["s0"], ["s1", "s2", "s3", "s4"]]
    assert ex.split_shapes(shapes[:1], 4) == [[shapes[0]]]  # no empty shard gets a GPU
    with pytest.raises(CampaignError, match="distinct GPU indices"):
        ex.parse_gpus("0,0")


def test_validate_on_two_gpus_pairs_each_shape_on_one_gpu_and_records_it(project: Path, gpus: None) -> None:
    baseline(project, None, gpus="0,1")
    head = g.rev(g.open_repo(project), f"refs/heads/{CampaignRef.main(NAME).branch}")
    assert head is not None
    base_doc = verdict.read(g.open_repo(project), head)[0]
    assert base_doc.devices is not None and set(base_doc.devices["full"]) == {
        "s-small",
        "s-mid",
        "s-odd",
        "s-large",
    }
    full_csv = g.read_note(g.open_repo(project), C.NOTES_FULL, head)
    assert full_csv is not None
    assert [line.split(",")[0] for line in full_csv.decode().splitlines()] == [
        "label", "s-small", "s-mid", "s-odd", "s-large"
    ]  # fmt: skip

    commit = commit_round(project, "bigger tiles", 120)
    result = validate(project, None, probe=False, gpus="0,1")
    assert result.decision in ACCEPTED
    doc = verdict.read(g.open_repo(project), commit)[-1]
    devices = doc.devices or {}
    assert set(devices) == set(result.shapes)
    assert {d["gpu"] for d in devices.values()} == {"0", "1"}
    assert {d["model"] for d in devices.values()} == {"NVIDIA H200"}
    latest = run_dirs(project)[-1]
    for shard in ("0", "1"):  # every harness process of a shard saw only its own GPU
        seen = {p.read_text() for p in latest.glob(f"s1/gpu{shard}/*.device")}
        assert seen == {shard}
    labels = {p.stem.split(".")[0] for p in latest.glob("s1/gpu0/*.csv")}
    assert labels  # the shard wrote its own CSVs


def test_a_mixed_gpu_set_is_refused_before_anything_runs(
    project: Path, gpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline(project, None)
    commit = commit_round(project, "bigger tiles", 120)
    monkeypatch.setenv("FAKE_GPU_MODELS", "NVIDIA H200,NVIDIA A100-SXM4-80GB")
    with pytest.raises(CampaignError, match="not all the same model"):
        validate(project, None, probe=False, gpus="0,1")
    with pytest.raises(CampaignError, match="no GPU 7"):
        validate(project, None, probe=False, gpus="0,7")
    assert verdict.read(g.open_repo(project), commit) == []


def test_local_executor_end_to_end(project: Path, gpus: None) -> None:
    baseline(project, None)
    commit_round(project, "bigger tiles", 120)
    result = validate(project, None, probe=False, gpus="0,1", executor="local")
    assert result.decision in ACCEPTED
    doc = verdict.read(g.open_repo(project), result.commit)[-1]
    assert doc.devices and all(
        record["job"] for record in doc.devices.values()
    )  # each shard was a submitit job


@pytest.mark.parametrize("signal_name", ["SIGUSR2", "SIGKILL"])  # preempted, cancelled
def test_a_preempted_or_cancelled_job_is_an_error_and_nothing_is_recorded(
    project: Path, monkeypatch: pytest.MonkeyPatch, signal_name: str
) -> None:
    baseline(project, None)
    commit = commit_round(project, "bigger tiles", 120)
    before = g.refs_under(g.open_repo(project), "refs/")
    monkeypatch.setenv("BENCH_MODE", f"signal-job-{signal_name}")
    with pytest.raises(CampaignError, match="ended without a result") as failed:
        validate(project, None, probe=False, executor="local")
    assert "nothing was recorded" in failed.value.message
    assert verdict.read(g.open_repo(project), commit) == []
    assert g.refs_under(g.open_repo(project), "refs/") == before


def test_manifest_executor_is_checked(project: Path) -> None:
    with pytest.raises(CampaignError, match="executor.kind"):
        ex.ExecutorConfig.parse({"kind": "kubernetes"}, "m.yaml")
    with pytest.raises(CampaignError, match="unknown field"):
        ex.ExecutorConfig.parse({"partitions": "gpu"}, "m.yaml")
    config = ex.ExecutorConfig.parse(
        yaml.safe_load("kind: slurm\npartition: gpu\ngres: gpu:h200:1\ntime_limit: 30\naccount: kern"),
        "m.yaml",
    )
    assert config.kind == ex.SLURM and config.time_limit == 30
    plan = ex.make_plan(g.open_repo(project), NAME, {"kind": "slurm"}, "0,1", None)
    assert [d.gpu for d in plan.devices] == [None, None]  # Slurm hands each job its GPU
    assert ex.ShardTask({}, None, 1, project, True).checkpoint() is None  # type: ignore[arg-type]


FAKE_SLURM = {
    # sbatch keeps the script it was given and queues "job 4242"; sacct then reports it CANCELLED
    # (what `scancel` or a preemption without requeue leaves); scancel accepts anything.
    "sbatch": 'cp "$1" "$FAKE_SLURM_DIR/job.sbatch"\necho "Submitted batch job 4242"\n',
    "sacct": 'printf "JobID|State|NodeList\\n4242|CANCELLED by 0|node7\\n"\n',
    "scancel": "exit 0\n",
    "srun": "exit 0\n",  # never run here: the sbatch script would call it on the node
}


def test_slurm_jobs_carry_the_manifest_fields_and_a_cancelled_one_records_nothing(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline(project, None)
    commit_round(project, "bigger tiles", 120)
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    for name, body in FAKE_SLURM.items():
        script = bin_dir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(tmp_path))
    manifest_path = project / f"campaigns/{NAME}/manifest.yaml"
    manifest = yaml.safe_load(manifest_path.read_text())
    manifest["executor"] = {
        "kind": "slurm",
        "partition": "h200",
        "gres": "gpu:h200:1",
        "time_limit": 30,
        "account": "kern",
    }
    git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
    manifest_path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    git(project, "commit", "-q", "-am", "run the shards on Slurm")
    git(
        project, "rebase", "-q", CampaignRef.main(NAME).branch, CampaignRef.round_branch(NAME, 2).branch
    )  # the round on the new head
    commit = git(project, "rev-parse", "HEAD").strip()
    before = g.refs_under(g.open_repo(project), "refs/")
    with pytest.raises(CampaignError, match="state CANCELLED") as failed:
        validate(project, None, probe=False)
    assert "nothing was recorded" in failed.value.message
    script = (tmp_path / "job.sbatch").read_text()
    for line in ("--partition=h200", "--gres=gpu:h200:1", "--time=30", "--account=kern", "--nodes=1"):
        assert f"#SBATCH {line}" in script
    assert verdict.read(g.open_repo(project), commit) == []
    assert g.refs_under(g.open_repo(project), "refs/") == before


def test_a_heat_on_two_gpus_screens_each_shard_against_an_incumbent_of_its_own(
    project: Path, gpus: None
) -> None:
    from gitcampaign.commands.round import open_round
    from gitcampaign.commands.validate import validate_heat

    baseline(project, None)
    for speed in (110, 120):
        open_round(project, None, f"speed {speed}", heat=True)
        set_kernel(project, speed)
        git(project, "commit", "-q", "-am", f"Hypothesis: speed {speed}\nChange: speed {speed}")
    result = validate_heat(project, None, probe=False, gpus="0,1")
    assert result.accepted == 3 and [r.reasons for r in result.rounds] == [[C.REASON_OUTRUN], []]
    screen = [path for path in run_dirs(project) if path.name.startswith("heat-")][-1] / "screen"
    for shard in ("0", "1"):  # each GPU ran the whole sweep on its shapes: the incumbent and both candidates
        runs = {path.name.removesuffix(".csv") for path in (screen / f"gpu{shard}").glob("*.csv")}
        assert runs == {"sweep0-incumbent", "sweep0-round-2", "sweep0-round-3"}
        assert {path.read_text() for path in (screen / f"gpu{shard}").glob("*.device")} == {shard}
    loser = verdict.read(
        g.open_repo(project), git(project, "rev-parse", str(CampaignRef.rejected(NAME, 2))).strip()
    )[-1]
    assert loser.devices and {record["gpu"] for record in loser.devices.values()} == {"0", "1"}
    assert set(loser.devices) == set(loser.shapes or {})
