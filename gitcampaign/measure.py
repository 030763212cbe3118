"""Running the quick harness: one process per measurement, candidate and incumbent interleaved
from their own git worktrees (B A A B ...) so that drift between runs cancels in the pairs."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.decision import PairSample
from gitcampaign.envinfo import tool_env
from gitcampaign.errors import CampaignError
from gitcampaign.process import (
    RUN_TOKEN_ENV,
    die_with_parent,
    kill_group,
    register,
    signals_deferred,
    wait,
    wait_all,
)
from gitcampaign.progress import Progress
from gitcampaign.results import BenchTable, parse_csv
from gitcampaign.shapes import Shape, dump_shapes

SHIELD_DIR = Path(__file__).resolve().parent / "shield"


@dataclass(frozen=True)
class HarnessJob:
    command: str
    shapes: list[Shape]
    timeout_s: float
    frozen_header: str | None
    header_hint: str = ""  # how to get the frozen header back: `Manifest.header_hint()`

    def labels(self) -> list[str]:
        return [shape.label for shape in self.shapes]


def run_quick(
    worktree: Path,
    job: HarnessJob,
    out_csv: Path,
    progress: Progress | None = None,
    what: str = "harness run",
) -> BenchTable:
    """Run `quick_command --summary-csv PATH --shapes-file PATH.yaml` in `worktree`, read its CSV;
    `progress` hears of the run as `what` ("pair 2/3, candidate")."""
    run = quick_run(worktree, job, out_csv)
    with InTurn([run]) as turns:
        return quick_table(turns, run, job, progress, what)


def quick_run(worktree: Path, job: HarnessJob, out_csv: Path) -> LoggedRun:
    """The harness run that writes `out_csv`, its shape file written beside it."""
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    shapes_file = out_csv.with_suffix(".shapes.yaml")
    shapes_file.write_text(dump_shapes(job.shapes))
    out_csv.unlink(missing_ok=True)
    args = ("--summary-csv", str(out_csv), "--shapes-file", str(shapes_file))
    return LoggedRun(
        job.command, worktree, out_csv.with_suffix(".log"), "quick command", triton_cache_env(worktree), args
    )


def quick_table(
    turns: InTurn,
    run: LoggedRun,
    job: HarnessJob,
    progress: Progress | None,
    what: str,
) -> BenchTable:
    """Take `run`'s turn (see InTurn) and read the CSV it wrote."""
    out_csv = Path(run.args[1])
    command = " ".join([job.command, *run.args])  # shown, never run
    labels = [shape.label for shape in job.shapes]
    with (progress or Progress.silent()).harness_run(what, labels, run.log_path):
        code = turns.run(run, job.timeout_s)
    if code not in (0, 1):
        meaning = "no GPU for a GPU-only op" if code == 2 else "it crashed"
        raise CampaignError(
            f"the quick command exited {code} in {run.cwd} ({meaning}); nothing was recorded\n"
            f"command: {command}\nlast lines of {run.log_path}:\n{tail(run.log_path)}",
            "run that command by hand, fix the harness or the kernel, then run the campaign command again",
        )
    if not out_csv.exists():
        raise CampaignError(
            f"the quick command exited {code} without writing {out_csv}; nothing was recorded\n{tail(run.log_path)}",
            "the harness must write --summary-csv; run it by hand to see why",
        )
    return parse_csv(out_csv.read_bytes(), str(out_csv), labels, job.frozen_header, job.header_hint)


def triton_cache_env(worktree: Path) -> dict[str, str]:
    """Triton's compiled kernels and autotune results, shared by every process that measures the
    tree checked out in `worktree`.

    One cache directory per content of the tree outside `campaigns/` (whose manifest and report are
    bookkeeping, not code): the processes of one side of a validation, and the incumbent across
    validations, reuse what the first compiled and tuned, while a candidate that changed any file
    gets a directory of its own, never the incumbent's tuning (each side's runs start with the other
    side's compiled kernels only: seed_triton_cache). Triton's own keys (the
    @triton.jit source, the config list, the tuning key) would miss a change outside the jitted
    function, such as a launcher's grid or a heuristic, and reuse timings that no longer hold.
    """
    repo = g.open_repo(worktree)  # in workspace mode: the repository the copy lives under
    if (worktree / ".git").exists():  # a checkout: its commit's tree ids name the code
        code = {name: sha for name, sha in g.top_level_entries(repo, "HEAD").items()}
    else:  # a workspace copy (plain files, no HEAD of its own): their contents name the code
        code = {
            str(path.relative_to(worktree)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in worktree.rglob("*")
            if path.is_file()
        }
    code = {name: sha for name, sha in code.items() if name.split("/")[0] != C.CAMPAIGNS_DIR}
    key = hashlib.sha256(repr(sorted(code.items())).encode()).hexdigest()[:40]
    cache = g.common_dir(repo).resolve() / "campaign" / "triton-cache" / key
    return {"TRITON_CACHE_DIR": str(cache), "TRITON_CACHE_AUTOTUNING": "1"}


def compiled_env(worktree: Path) -> dict[str, str]:
    """The tree's Triton cache for a step that runs its kernels without timing them for keeps (the
    tests, before the measurement): what it compiles spares the tree's first measured process those
    compiles, and no autotune result timed under a parallel test run is kept."""
    return {**triton_cache_env(worktree), "TRITON_CACHE_AUTOTUNING": "0"}


def bytecode_env(worktree: Path) -> dict[str, str]:
    """Where the environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE) and the installed
    torch has none (an image with read-only packages installed without it), the tool's children
    write theirs to the repository's `campaign/python-cache`: otherwise every harness, probe and
    test process compiles torch's and triton's sources again (a third of a short harness process's
    time on the GPU machine's image). Python checks a cached module against its source's size and time, as
    in `__pycache__`; the scripts run as `python FILE` (the harness, the probe) are compiled from
    source each time. Elsewhere the environment is left as it is: a prefix would make Python pass
    over the bytecode the packages already have."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return {}
    if not _torch_lacks_bytecode():
        return {}
    cache = g.common_dir(g.open_repo(worktree)).resolve() / "campaign" / "python-cache"
    return {"PYTHONPYCACHEPREFIX": str(cache), "PYTHONDONTWRITEBYTECODE": ""}


@functools.cache
def _torch_lacks_bytecode() -> bool:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or spec.origin is None:
        return False
    return not Path(importlib.util.cache_from_source(spec.origin)).exists()


def seed_triton_cache(source_tree: Path, target_tree: Path) -> int:
    """Add the compiled kernels of `source_tree`'s Triton cache to `target_tree`'s, never its
    autotune results; returns how many kernels were added. Before each run of a measurement, a side
    takes the other side's (interleaved), so a kernel is compiled once per validation.

    Triton keys a compiled kernel on its jitted source (with the jitted functions it calls), its
    specialisation and its compile options, so a kernel the round changed finds none of the other
    side's entries and is compiled afresh, while the kernels it left alone skip compilation in the
    first process of whichever side runs second. An autotune result (`*.autotune.json`) is keyed
    on less (see triton_cache_env): those entries stay behind, and each side tunes on its own code.
    Entries are hard links where the file system allows (Triton replaces files, never writes into
    them), each entry copied under a temporary name and renamed, so a reader never sees half.
    """
    source = Path(triton_cache_env(source_tree)["TRITON_CACHE_DIR"])
    target = Path(triton_cache_env(target_tree)["TRITON_CACHE_DIR"])
    if source == target or not source.is_dir():
        return 0
    target.mkdir(parents=True, exist_ok=True)
    added = 0
    for entry in sorted(source.iterdir()):
        files = list(entry.iterdir()) if entry.is_dir() and not entry.name.startswith(".") else []
        if (
            not files
            or any(f.name.endswith(".autotune.json") for f in files)
            or (target / entry.name).exists()
        ):
            continue
        staging = target / f".{entry.name}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            shutil.copytree(entry, staging, copy_function=os.link)
        except OSError:  # another file system, or no hard links: copy
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(entry, staging)
        try:
            staging.rename(target / entry.name)
            added += 1
        except OSError:  # another process put it there first
            shutil.rmtree(staging, ignore_errors=True)
    return added


def run_logged(
    command: str,
    cwd: Path,
    log_path: Path,
    timeout_s: float,
    what: str,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> int:
    """Run the manifest's shell `command` with `args` appended, its output in `log_path` (`env` on
    top of the tool's environment, whose PYTHONPATH puts `cwd` first: see tool_env).

    The arguments reach the command as "$@" of `sh -c`, never as shell text, so a path holding
    spaces, `;` or `$(...)` stays one argument. The process gets its own group (a hang is killed
    with all its children), dies with this process on Linux (PR_SET_PDEATHSIG), and is registered
    so that the next command stops it if this one was killed before it could. The shell `exec`s a
    simple command (`python campaigns/NAME/quick_test_bench.py`), so that the harness itself is the
    process that dies with this one (dash forks even the last command of `-c`); a compound one's
    children outlive a kill until the next command's sweep.
    """
    run = LoggedRun(command, cwd, log_path, what, env, tuple(args))
    with InTurn([run]) as turns:
        return turns.run(run, timeout_s)


def run_logged_together(runs: Sequence[LoggedRun], timeout_s: float) -> list[tuple[int | None, float]]:
    """`runs` started at once, each supervised as run_logged's, and waited on together: each one's
    exit code (None: stopped at `timeout_s`) and its seconds. For independent steps in separate
    trees (a heat's candidates' tests); measured runs never share the machine."""
    launches: list[Launch] = []
    try:
        for run in runs:
            with signals_deferred():  # a ^C or SIGTERM lands once the launch is on record
                launches.append(_start(run))
        g.fault_point("measure:runs-started")
        return wait_all([launch.process for launch in launches], timeout_s)
    finally:
        for launch in launches:
            _stop(launch)


@dataclass(frozen=True)
class LoggedRun:
    """A command of run_logged's, with what it needs to run."""

    command: str
    cwd: Path
    log_path: Path
    what: str
    env: dict[str, str] | None = None
    args: tuple[str, ...] = ()


# `python SCRIPT.py ARGS` started ahead of its turn runs as `python -c TURN_WAIT MODULES SCRIPT.py ARGS`.
# It sets sys.path as `python SCRIPT.py` has it before it imports anything (the round's tree never
# comes before the shield), imports MODULES (torch where the script imports it; the import makes no
# CUDA context), then waits for "go" on its stdin before it runs the script as `python SCRIPT.py`
# would (sys.path, argv but for an absolute argv[0], an absolute __file__, __main__; stdin from
# /dev/null). Without "go" (the tool died, or cancelled the run) it exits without running the
# script: nothing measures unsupervised.
TURN_WAIT = """\
import os, sys
preload, sys.argv = sys.argv[1], sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
import importlib, runpy
for name in filter(None, preload.split(",")):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
if sys.stdin.readline() != "go\\n":
    sys.exit("gitcampaign: cancelled before its turn")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
runpy.run_path(os.path.abspath(sys.argv[0]), run_name="__main__")
"""
PYTHON = re.compile(r"python[0-9.]*")
IMPORTS_TORCH = re.compile(r"^\s*(import|from)\s+torch\b", re.MULTILINE)


def waiting_argv(command: str, cwd: Path) -> list[str] | None:
    """The argv that starts `command` ahead of its turn, waiting for it (TURN_WAIT), where it is
    `python SCRIPT.py [ARGS]`; None for any other command, which starts only in its turn."""
    words = shlex.split(command) if _simple(command) else []
    if len(words) < 2 or not PYTHON.fullmatch(Path(words[0]).name) or not words[1].endswith(".py"):
        return None
    try:
        preload = "torch" if IMPORTS_TORCH.search((cwd / words[1]).read_text(errors="replace")) else ""
    except OSError:
        return None  # no such script here: the plain command says so in its log
    return [words[0], "-c", TURN_WAIT, preload, *words[1:]]


@dataclass
class Launch:
    """A started LoggedRun: its process (with a stdin pipe when started ahead of its turn) and registry entry."""

    run: LoggedRun
    process: subprocess.Popen[bytes]
    registry: Path | None


class InTurn:
    """`runs`, one at a time in their order. While one runs, the next starts where it is a Python
    script (waiting_argv): it makes its interpreter and imports torch, then waits for its turn, so its
    start-up (about a tenth of a harness process on the GPU machine) overlaps the run
    before it instead of following it, without touching the GPU. A run still waiting when the turns
    end (an error, an early stop) is stopped. `ahead=False` starts each run in its turn: for runs
    that time the host (the training probe), whose first run would share the CPU with that start-up.
    """

    def __init__(self, runs: Sequence[LoggedRun], ahead: bool = True) -> None:
        self.next = {
            run.log_path: after for run, after in zip(runs, runs[1:], strict=False) if ahead
        }  # the last has none
        self.waiting: dict[Path, Launch] = {}
        self.started: list[Launch] = []  # recorded as each starts, until stopped: what __exit__ stops

    def __enter__(self) -> InTurn:
        return self

    def __exit__(self, *exc: object) -> None:
        for launch in self.started:
            _stop(launch)
        for launch in self.waiting.values():
            if not launch.run.log_path.stat().st_size:  # it never ran: no empty log of a run to puzzle over
                launch.run.log_path.unlink()
        self.started.clear()
        self.waiting.clear()

    def _launch(self, run: LoggedRun, ahead: list[str] | None = None) -> Launch:
        with signals_deferred():  # a ^C or SIGTERM lands once the launch is on record
            launch = _start(run, ahead)
            self.started.append(launch)
        return launch

    def run(self, run: LoggedRun, timeout_s: float) -> int:
        """Run `run` (started ahead, or now) to its end, its exit code; start the next ahead of its turn."""
        launch = self.waiting.pop(run.log_path, None) or self._launch(run)
        try:
            if launch.process.stdin is not None:  # started ahead and waiting: its turn
                with contextlib.suppress(BrokenPipeError):  # it died waiting: its exit code tells
                    launch.process.stdin.write(b"go\n")
                    launch.process.stdin.close()
            following = self.next.get(run.log_path)
            ahead = waiting_argv(following.command, following.cwd) if following is not None else None
            if following is not None and ahead is not None:
                self.waiting[following.log_path] = self._launch(following, ahead)
            g.fault_point("measure:harness-started")
            return wait(launch.process, timeout_s)
        except subprocess.TimeoutExpired:
            _stop(launch)
            raise CampaignError(
                f"the {run.what} did not finish within {timeout_s:g} s and was stopped; nothing was recorded\n"
                f"command: {' '.join([run.command, *run.args])}\nlast lines of {run.log_path}:\n{tail(run.log_path)}",
                "find the hang by running it by hand, or raise harness_timeout_s in the manifest (--timeout)",
            ) from None
        finally:
            _stop(launch)  # children the command left behind after it exited, or all of it on an error
            self.started.remove(launch)  # its group id may be reused once it is gone


def _start(run: LoggedRun, ahead: list[str] | None = None) -> Launch:
    """Start `run` through the shell, or where `ahead` (waiting_argv) is given, ahead of its turn."""
    token = secrets.token_hex(8)
    env = {**tool_env(run.cwd), **bytecode_env(run.cwd), **(run.env or {}), RUN_TOKEN_ENV: token}
    # Standard-library names resolve to the standard library first (gitcampaign/shield): a round
    # cannot change what the harness computes by adding `statistics.py` on its import path.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SHIELD_DIR), env.get("PYTHONPATH")]))
    exec_ = "exec " if _simple(run.command) else ""
    argv = [*ahead, *run.args] if ahead else ["/bin/sh", "-c", f'{exec_}{run.command} "$@"', "sh", *run.args]
    with open(run.log_path, "wb") as log:
        process = subprocess.Popen(
            argv,
            cwd=run.cwd,
            stdin=subprocess.PIPE if ahead else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
    launch = Launch(run, process, None)
    try:  # from here on, a signal (^C, SIGTERM) anywhere still stops the harness
        launch.registry = register(g.procs_dir(g.open_repo(run.cwd)), process.pid, token)
    except BaseException:
        _stop(launch)
        raise
    return launch


def _stop(launch: Launch) -> None:
    """Kill what is left of the run's process group, reap it, drop its registry entry."""
    kill_group(launch.process.pid)
    launch.process.wait()
    if launch.process.stdin is not None:
        launch.process.stdin.close()
    if launch.registry is not None:
        launch.registry.unlink(missing_ok=True)


SHELL_SYNTAX = frozenset(";&|<>()$`\\\n*?[]{}~#=!")  # beyond words and quotes: not a simple command


def _simple(command: str) -> bool:
    """A command of plain words (quotes allowed): `exec` can replace the shell with it."""
    return bool(command.strip()) and not SHELL_SYNTAX.intersection(command)


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class PairResult:
    candidate: BenchTable
    incumbent: BenchTable | None  # None when the candidate failed Check before the incumbent ran
    role: str = C.CANDIDATE  # whose pair: a heat's screen pairs each candidate's run (its worktree's role)


def pair_order(pairs: int) -> list[tuple[int, str]]:
    """(pair index, role) of each run in turn: B A A B ..., so that drift cancels in the pairs."""
    return [
        (index, role)
        for index in range(pairs)
        for role in ((C.CANDIDATE, C.INCUMBENT) if index % 2 == 0 else (C.INCUMBENT, C.CANDIDATE))
    ]


def interleaved(
    worktrees: dict[str, Path],
    job: HarnessJob,
    pairs: int,
    scratch: Path,
    stop_on_failure: bool,
    progress: Progress | None = None,
) -> list[PairResult]:
    """`pairs` pairs of processes, alternating which side goes first (B A A B ...).

    With `stop_on_failure`, a candidate run with any row other than PASS ends the measurement:
    the Check gate rejects whatever the speed, so more runs would only cost time.
    """
    order = pair_order(pairs)
    runs = [quick_run(worktrees[role], job, scratch / f"pair{index}-{role}.csv") for index, role in order]
    results: list[PairResult] = []
    tables: dict[str, BenchTable] = {}
    with InTurn(runs) as turns:
        for (index, role), run in zip(order, runs, strict=True):
            other = C.INCUMBENT if role == C.CANDIDATE else C.CANDIDATE
            if other in worktrees:  # the kernels the round left alone, compiled by either side first
                seed_triton_cache(worktrees[other], worktrees[role])
            tables[role] = quick_table(turns, run, job, progress, f"pair {index + 1}/{pairs}, {role}")
            if stop_on_failure and role == C.CANDIDATE and not all(row.passed for row in tables[role].rows):
                return [*results, PairResult(tables[C.CANDIDATE], tables.get(C.INCUMBENT))]
            if len(tables) == 2:
                results.append(PairResult(tables[C.CANDIDATE], tables[C.INCUMBENT]))
                tables = {}
    return results


def heat_order(candidates: list[str], sweeps: int) -> list[tuple[int, str]]:
    """(sweep, role) of each run of a heat's screen: each sweep runs every candidate once and the
    incumbent once, in the middle; the candidates' order turns by one place each sweep and every
    other sweep runs backwards, so that over the sweeps each candidate runs before and after the
    incumbent alike, near it and far from it."""
    order = []
    for sweep in range(sweeps):
        turn = sweep % len(candidates)
        turned = candidates[turn:] + candidates[:turn]
        middle = len(turned) // 2
        roles = [*turned[:middle], C.INCUMBENT, *turned[middle:]]
        order += [(sweep, role) for role in (reversed(roles) if sweep % 2 else roles)]
    return order


def heat_sweeps(
    worktrees: dict[str, Path],
    job: HarnessJob,
    sweeps: int,
    scratch: Path,
    progress: Progress | None = None,
) -> list[PairResult]:
    """A heat's screen: `sweeps` sweeps of heat_order over the incumbent and every candidate (every
    role of `worktrees` but C.INCUMBENT), one process each. Each candidate's run is paired with the
    incumbent's run of its sweep, so N candidates cost N + 1 runs a sweep instead of 2N: the pairs,
    sweep by sweep and in the candidates' order, each with its role."""
    candidates = [role for role in worktrees if role != C.INCUMBENT]
    order = heat_order(candidates, sweeps)
    runs = [quick_run(worktrees[role], job, scratch / f"sweep{sweep}-{role}.csv") for sweep, role in order]
    tables: dict[tuple[int, str], BenchTable] = {}
    with InTurn(runs) as turns:
        for (sweep, role), run in zip(order, runs, strict=True):
            for other in worktrees:  # kernels a candidate left alone: compiled once, by whichever ran first
                if other != role:
                    seed_triton_cache(worktrees[other], worktrees[role])
            what = f"sweep {sweep + 1}/{sweeps}, {role}"
            tables[(sweep, role)] = quick_table(turns, run, job, progress, what)
    return [
        PairResult(tables[(sweep, role)], tables[(sweep, C.INCUMBENT)], role)
        for sweep in range(sweeps)
        for role in candidates
    ]


@contextmanager
def worktrees(
    repo: Repo, campaign: str, commits: dict[str, str], only: list[str] | None = None
) -> Iterator[dict[str, Path]]:
    """One detached worktree per role, under the common git dir; removed afterwards. With `only`
    (workspace mode), a minimal copy of those paths instead of a checkout of the whole commit."""
    base = g.common_dir(repo) / "campaign" / "worktrees" / campaign
    paths = {role: base / role for role in commits}
    try:
        for role, commit in commits.items():
            if only:
                g.export_paths(repo, commit, only, paths[role])
            else:
                g.add_worktree(repo, paths[role], commit)
        yield paths
    finally:
        for path in paths.values():
            g.remove_worktree(repo, path)


def run_dir(repo: Repo, campaign: str, label: str) -> Path:
    """Where this run's CSVs and logs stay for inspection."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = g.common_dir(repo) / "campaign" / "runs" / campaign / f"{label}-{stamp}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def samples(pairs: list[PairResult], metric: str, labels: list[str], session: int) -> list[PairSample]:
    """Primary metric per shape for every complete pair."""
    return [
        PairSample(
            incumbent={label: pair.incumbent.by_label()[label].metric(metric) for label in labels},
            candidate={label: pair.candidate.by_label()[label].metric(metric) for label in labels},
            session=session,
        )
        for pair in pairs
        if pair.incumbent is not None
    ]
