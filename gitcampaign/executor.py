"""Where the quick harness runs: this machine's GPUs, or a cluster's through submitit.

The shapes are split into shards, one per GPU. A shard is measured exactly as one GPU always was:
its own interleaved candidate/incumbent sequence (B A A B ...), so both sides of every per-shape
ratio come from the same GPU and drift cancels in the pairs as before. The shard CSVs are then
joined row by row (every line byte for byte as a harness wrote it) and decided on as one.

Executors:
- `direct` (default): processes started from this one. One shard runs in this process, as it always
  did; several run side by side, one child per GPU, each harness with CUDA_VISIBLE_DEVICES set.
- `local`: submitit's local executor, one job per shard (what CI runs end to end on the CPU).
- `slurm`: submitit on Slurm, one job per shard on one node holding its GPU (`gres`), the worktrees
  and scratch on the shared file system the repository lives on. A job that is cancelled, preempted
  or timed out is an error and nothing is recorded: a shard's pairs are all or nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
from concurrent.futures import ProcessPoolExecutor  # campaign-lint: allow S1 -- shards, not op work
from dataclasses import dataclass, field
from multiprocessing import get_context  # campaign-lint: allow S1 -- shards, not op work
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.errors import CampaignError
from gitcampaign.measure import HarnessJob, PairResult, heat_sweeps, interleaved, run_quick
from gitcampaign.progress import Progress
from gitcampaign.results import BenchTable, parse_csv
from gitcampaign.shapes import Shape

DIRECT, LOCAL, SLURM = "direct", "local", "slurm"
KINDS = (DIRECT, LOCAL, SLURM)
_FIELDS = {"kind": str, "partition": str, "gres": str, "time_limit": int, "account": str}


@dataclass(frozen=True)
class ExecutorConfig:
    """The manifest's `executor:` mapping (every field optional)."""

    kind: str = DIRECT
    partition: str | None = None
    gres: str = "gpu:1"  # one GPU per job, held by the job alone
    time_limit: int | None = None  # minutes; default: every harness run of the shard at its timeout
    account: str | None = None

    @classmethod
    def parse(cls, data: dict[str, Any] | None, source: str) -> ExecutorConfig:
        hint = f"fix `executor:` in {source}: kind (direct|local|slurm), partition, gres, time_limit, account"
        data = data or {}
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise CampaignError(f"{source}: executor has unknown field(s) {', '.join(unknown)}", hint)
        for name, value in data.items():
            if not isinstance(value, _FIELDS[name]) or isinstance(value, bool):
                raise CampaignError(f"{source}: executor.{name} must be a {_FIELDS[name].__name__}", hint)
        if data.get("kind", DIRECT) not in KINDS:
            raise CampaignError(f"{source}: executor.kind {data['kind']!r} is not one of {KINDS}", hint)
        if data.get("time_limit", 1) < 1:
            raise CampaignError(f"{source}: executor.time_limit is in minutes and must be at least 1", hint)
        return cls(**data)


@dataclass(frozen=True)
class Device:
    shard: str  # the --gpus entry, or "default" when the shapes are not split
    gpu: str | None  # exported as CUDA_VISIBLE_DEVICES; None leaves it to the system (Slurm sets it)
    model: str | None  # known up front on this machine; reported by the job on a cluster


@dataclass(frozen=True)
class Plan:
    config: ExecutorConfig
    devices: list[Device]
    folder: Path  # submitit's job files and logs

    @property
    def trivial(self) -> bool:
        """Today's path exactly: one shard, in this process, on the default device."""
        return self.config.kind == DIRECT and len(self.devices) == 1 and self.devices[0].gpu is None


def make_plan(
    repo: Repo, campaign: str, manifest_executor: dict[str, Any] | None, gpus: str | None, kind: str | None
) -> Plan:
    """Check the GPUs and the executor before anything runs (a mixed set is refused here)."""
    config = ExecutorConfig.parse(manifest_executor, f"campaigns/{campaign}/manifest.yaml")
    if kind is not None:
        config = dataclasses.replace(config, kind=kind)
    folder = g.common_dir(repo) / "campaign" / "submitit" / campaign
    shards = parse_gpus(gpus) if gpus else []
    if config.kind == SLURM:  # the node's GPU is Slurm's to pick; the entries only count the shards
        devices = [Device(shard, None, None) for shard in shards or ["default"]]
    elif shards:
        models = gpu_models()
        missing = [shard for shard in shards if shard not in models]
        if missing:
            raise CampaignError(
                f"no GPU {', '.join(missing)} on this machine (nvidia-smi lists {', '.join(models) or 'none'})",
                "pick indices from `nvidia-smi -L` for --gpus",
            )
        devices = [Device(shard, shard, models[shard]) for shard in shards]
        require_one_model(devices)
    else:
        devices = [Device("default", None, None)]
    return Plan(config, devices, folder)


def parse_gpus(text: str) -> list[str]:
    shards = [part.strip() for part in text.split(",") if part.strip()]
    if not shards or not all(part.isdigit() for part in shards) or len(set(shards)) != len(shards):
        raise CampaignError(
            f"--gpus {text!r} is not a list of distinct GPU indices", "write it as --gpus 0,1,2,3"
        )
    return shards


def gpu_models() -> dict[str, str]:
    """{index: model} as nvidia-smi numbers them (CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA agree)."""
    if shutil.which("nvidia-smi") is None:
        raise CampaignError(
            "--gpus needs nvidia-smi, which is not on PATH", "run on the GPU machine, or drop --gpus"
        )
    done = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise CampaignError(f"nvidia-smi failed: {done.stderr.strip()}", "check the driver with `nvidia-smi`")
    pairs = (line.split(",", 1) for line in done.stdout.splitlines() if "," in line)
    return {index.strip(): name.strip() for index, name in pairs}


def require_one_model(devices: list[Device]) -> None:
    models = {device.model for device in devices}
    if len(models) > 1:
        listing = ", ".join(f"GPU {device.shard}: {device.model}" for device in devices)
        raise CampaignError(
            f"the GPUs are not all the same model ({listing}); per-shape ratios from different models "
            "do not form one measurement",
            "pick GPUs of one model with --gpus (or pin the model in executor.gres, e.g. gpu:h200:1)",
        )


def split_shapes(shapes: list[Shape], count: int) -> list[list[Shape]]:
    """`count` shards of about equal work (largest first onto the lightest shard), each in the
    original order; empty shards are dropped."""
    loads = [0] * count
    owner: dict[str, int] = {}
    for shape in sorted(shapes, key=lambda s: (-s.work(), s.label)):
        lightest = loads.index(min(loads))
        owner[shape.label] = lightest
        loads[lightest] += max(shape.work(), 1)
    shards = [[shape for shape in shapes if owner[shape.label] == index] for index in range(count)]
    return [shard for shard in shards if shard]


# -- one shard, wherever it runs ---------------------------------------------------------------------


@dataclass
class ShardOutcome:
    pairs: list[PairResult]
    host: str
    model: str
    job_id: str = ""
    error: tuple[str, str] | None = None  # a CampaignError's message and hint, carried home


@dataclass
class ShardTask:
    """What one GPU runs: an interleaved sequence (`pairs`), one run of the incumbent (`pairs` 0),
    or a heat's screen (`sweeps`: every candidate of `worktrees` against one incumbent)."""

    worktrees: dict[str, Path]
    job: HarnessJob
    pairs: int
    scratch: Path
    stop_on_failure: bool
    sweeps: int = 0

    def run(self, progress: Progress | None = None) -> list[PairResult]:
        if self.sweeps:
            return heat_sweeps(self.worktrees, self.job, self.sweeps, self.scratch, progress)
        if self.pairs == 0:
            table = run_quick(
                self.worktrees[C.INCUMBENT], self.job, self.scratch / "full.csv", progress, "baseline commit"
            )
            return [PairResult(table, None)]
        return interleaved(self.worktrees, self.job, self.pairs, self.scratch, self.stop_on_failure, progress)

    def __call__(self) -> ShardOutcome:
        """In a child or a job: errors come home as data, so the caller raises them as they were."""
        host, model = socket.gethostname(), model_here()
        try:
            results = self.run()
        except CampaignError as exc:
            return ShardOutcome([], host, model, error=(exc.message, exc.hint))
        return ShardOutcome(results, host, model, os.environ.get("SLURM_JOB_ID", ""))

    def checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """submitit asks this on preemption; None means: do not requeue (a rerun shard would mix
        half a sequence from one GPU with another)."""
        return None


def model_here() -> str:
    """The model of the GPU this process was given (a job on a node reports its own)."""
    if shutil.which("nvidia-smi") is None:
        return "none (CPU)"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    select = ["-i", visible] if visible and "," not in visible else []
    done = subprocess.run(
        ["nvidia-smi", *select, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    )
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else "unknown"


# -- running the shards -------------------------------------------------------------------------------


@dataclass
class Measured:
    pairs: list[PairResult]
    devices: dict[str, dict[str, str]] = field(default_factory=dict)  # {shape label: where it ran}


def measure(
    plan: Plan | None,
    trees: dict[str, Path],
    job: HarnessJob,
    pairs: int,
    scratch: Path,
    stop_on_failure: bool = True,
    progress: Progress | None = None,
    sweeps: int = 0,
) -> Measured:
    """`interleaved` over the plan's shards (`pairs` 0: one run of the incumbent worktree; `sweeps`:
    a heat's screen, `heat_sweeps`, each shard with its own incumbent runs). `progress` follows each
    run in this process; shards in other processes report per phase only."""
    if plan is None or plan.trivial:
        return Measured(ShardTask(trees, job, pairs, scratch, stop_on_failure, sweeps).run(progress))
    shards = split_shapes(job.shapes, len(plan.devices))
    tasks = [
        ShardTask(
            trees,
            _on_device(job, shard, device),
            pairs,
            scratch / f"gpu{device.shard}",
            stop_on_failure,
            sweeps,
        )
        for shard, device in zip(shards, plan.devices, strict=False)
    ]
    outcomes = _run(plan, tasks, runs=sweeps * len(trees) if sweeps else max(2 * pairs, 1))
    for outcome in outcomes:
        if outcome.error is not None:
            raise CampaignError(*outcome.error)
    used = plan.devices[: len(tasks)]
    reported = [dataclasses.replace(d, model=d.model or o.model) for d, o in zip(used, outcomes, strict=True)]
    require_one_model(reported)
    devices = {
        shape.label: _where(device, outcome)
        for task, device, outcome in zip(tasks, reported, outcomes, strict=True)
        for shape in task.job.shapes
    }
    return Measured(_join(outcomes, job), devices)


def _on_device(job: HarnessJob, shapes: list[Shape], device: Device) -> HarnessJob:
    command = job.command
    if device.gpu is not None:  # `export` so that a compound quick command sees it in every part
        command = (
            f"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={shlex.quote(device.gpu)}; {command}"
        )
    return dataclasses.replace(job, command=command, shapes=shapes)


def _where(device: Device, outcome: ShardOutcome) -> dict[str, str]:
    record = {"shard": device.shard, "model": device.model or outcome.model, "host": outcome.host}
    if device.gpu is not None:
        record["gpu"] = device.gpu
    if outcome.job_id:
        record["job"] = outcome.job_id
    return record


def _run(plan: Plan, tasks: list[ShardTask], runs: int) -> list[ShardOutcome]:
    if plan.config.kind == DIRECT:
        # Children in our process group: ^C reaches them, and each stops its harness on the way out.
        with ProcessPoolExecutor(len(tasks), mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(task) for task in tasks]
            return [future.result() for future in futures]
    return _submitit(plan, tasks, runs)


def _submitit(plan: Plan, tasks: list[ShardTask], runs: int) -> list[ShardOutcome]:
    try:
        import submitit
    except ImportError as exc:
        raise CampaignError(
            f"--executor {plan.config.kind} needs submitit", 'install it: pip install "gitcampaign[cluster]"'
        ) from exc
    config = plan.config
    minutes = config.time_limit or max(1, math.ceil(runs * tasks[0].job.timeout_s / 60))
    executor: Any
    if config.kind == LOCAL:
        executor = submitit.LocalExecutor(folder=plan.folder / "%j")
        executor.update_parameters(timeout_min=minutes)
    else:
        if shutil.which("srun") is None or shutil.which("sbatch") is None:
            raise CampaignError(
                "--executor slurm needs Slurm's sbatch and srun on PATH, and they are not here",
                "run the command on a login node of the cluster (or use --executor direct on a GPU node)",
            )
        executor = submitit.SlurmExecutor(folder=plan.folder / "%j")
        parameters: dict[str, Any] = {"nodes": 1, "ntasks_per_node": 1, "gres": config.gres, "time": minutes}
        parameters.update(
            {k: v for k, v in (("partition", config.partition), ("account", config.account)) if v}
        )
        executor.update_parameters(job_name="gitcampaign-shard", **parameters)
    jobs = [executor.submit(task) for task in tasks]
    try:
        return [_result(job, plan, device.shard) for job, device in zip(jobs, plan.devices, strict=False)]
    except BaseException:
        for job in jobs:
            job.cancel(check=False)
        raise


def _result(job: Any, plan: Plan, shard: str) -> ShardOutcome:
    try:
        outcome: ShardOutcome = job.result()
    except Exception as exc:  # submitit's UncompletedJobError / FailedJobError, whatever the cause
        reason = _reason(exc)
        raise CampaignError(
            f"the {plan.config.kind} job {job.job_id} (shard {shard}) ended without a result, state "
            f"{job.state}: {reason}\nA cancelled, preempted or timed-out shard voids the measurement; "
            f"nothing was recorded. Job logs: {plan.folder / str(job.job_id)}",
            "run the command again (raise executor.time_limit in the manifest if it timed out)",
        ) from exc
    outcome.job_id = outcome.job_id or str(job.job_id)
    return outcome


def _reason(exc: Exception) -> str:
    """The line of a submitit error that says why: the job's own exception, else its summary."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"[\w.]+(Error|Exception|Interrupt)\b", line)]
    return raised[-1] if raised else " ".join(lines[:2]) or type(exc).__name__


def _join(outcomes: list[ShardOutcome], job: HarnessJob) -> list[PairResult]:
    """One pair list over all shards: pair i joins every shard's pair i, of the same role (a shard
    stopped by a failed Check ends the list there, with that failure in its last candidate)."""
    count = min(len(outcome.pairs) for outcome in outcomes)
    joined = []
    for index in range(count):
        candidates = [outcome.pairs[index].candidate for outcome in outcomes]
        incumbents = [outcome.pairs[index].incumbent for outcome in outcomes]
        incumbent = None if any(t is None for t in incumbents) else join_tables(incumbents, job)  # type: ignore[arg-type]
        joined.append(PairResult(join_tables(candidates, job), incumbent, outcomes[0].pairs[index].role))
    return joined


def join_tables(tables: list[BenchTable], job: HarnessJob) -> BenchTable:
    """The shard CSVs as one: the shared header, then each shape's line in target order."""
    first = tables[0].raw.splitlines(keepends=True)[0]
    lines: dict[str, bytes] = {}
    for table in tables:
        if table.header != tables[0].header:
            raise CampaignError(
                f"the shards wrote different CSV headers:\n  {tables[0].header}\n  {table.header}",
                "every GPU must run the same harness; check the worktrees and the environment",
            )
        for row, line in zip(table.rows, table.raw.splitlines(keepends=True)[1:], strict=True):
            lines[row.label] = line
    labels = [shape.label for shape in job.shapes]
    raw = first + b"".join(lines[label] for label in labels)
    return parse_csv(raw, "the joined shard CSVs", labels, job.frozen_header, job.header_hint)
