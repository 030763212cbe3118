"""Build, test and acceptance steps around a measurement, for kernels that compile (C++/CUDA/HIP).

- Every measured tree runs the manifest's `build_command` in itself before its first measurement
  and before the tests. The tool puts the tree's root first on PYTHONPATH for every command it runs
  there, and after each build checks that the Python extension modules the build wrote are the ones
  that tree imports: an in-place build (`python setup.py build_ext --inplace`) passes; a build that
  installs into site-packages (shared by every tree), leaves its modules where the tree's root does
  not import them, or is shadowed by an editable install's import hook, is refused.
- Builds are reused across rounds: the untracked files a build wrote are kept under the common git
  dir, keyed by the blob ids of the sources (the campaign's own folder aside), the build command,
  the toolchain and the tree's path. A changed source changes the key and rebuilds; an unchanged
  incumbent or the A/A pair of the baseline restores its outputs instead. The path is part of the
  key because outputs may name their directory (an RPATH would load the other tree's library).
- `validate` builds the candidate, runs `test_command` there, then builds the incumbent: a broken
  candidate is REJECT `build_failed` or `tests_failed` before any measurement, with the log tail in
  the verdict. `validate --heat` builds its candidates one after another, then runs the test
  suites of those that built at once. The baseline runs the tests too: a campaign cannot start from
  a red state.
- `report` runs the `acceptance_command` on the final accepted head and states whether the diff
  since the campaign's start holds only the accepted rounds' changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import envinfo
from gitcampaign import git as g
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import Manifest
from gitcampaign.measure import LoggedRun, compiled_env, run_logged_together, tail, worktrees
from gitcampaign.verdict import StepRecord

TAIL_LINES = 40
ERROR_LINES = 10
_ERROR = re.compile(r"\berror\b|\bFAILED\b", re.IGNORECASE)
CACHE_ENTRIES = 8  # per campaign: the incumbent, the A/A pair and a few recent candidates
CACHE_MAX_BYTES = 2 << 30  # larger outputs are rebuilt rather than copied
# Variables that change what a compiler produces: part of the build cache key.
BUILD_ENV_KEYS = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_FLAGS", "TORCH_CUDA_ARCH_LIST")
TOOLCHAIN = ("cc", "c++", "gcc", "g++", "clang++", "nvcc", "hipcc", "ninja", "cmake")
ACCEPTANCE = "acceptance"

_IMPORT_PROBE = r"""
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
        found[name] = spec.origin if spec else None
    except Exception as exc:
        found[name] = f"error {exc.__class__.__name__}: {exc}"
print(json.dumps(found))
"""


@dataclass
class Step:
    """One build, test or acceptance run in one tree, as the verdict records it."""

    what: str
    command: str
    passed: bool
    exit_code: int | None  # None: stopped at the timeout, or refused after it ran
    seconds: float
    log: str
    output: str = ""  # the log's tail when the step failed
    cached_from: str | None = None  # a restored build: when it was built, and in how many seconds

    def record(self) -> StepRecord:
        """The step as a verdict records it (an empty output and unknown values left out)."""
        return StepRecord(**{key: value for key, value in asdict(self).items() if value not in ("", None)})

    def failure_notes(self) -> list[str]:
        """A headline and the lines to read first (the first errors, else the last lines); the
        verdict's step entry keeps the longer excerpt."""
        code = "timed out or refused" if self.exit_code is None else f"exit {self.exit_code}"
        lines = self.output.splitlines()
        shown = lines[: lines.index("...")] if "..." in lines else lines[-ERROR_LINES:]
        return [f"{self.what} failed ({code}, {self.seconds:.1f} s): {self.command}", *shown]


def run_step(
    what: str, command: str, tree: Path, log_path: Path, timeout_s: float, env: dict[str, str] | None = None
) -> Step:
    """Run one step with its output in `log_path`, which ends with the step's time and exit code."""
    return run_steps_together(what, command, {what: (tree, log_path, env or {})}, timeout_s)[what]


def run_steps_together(
    what: str, command: str, places: dict[str, tuple[Path, Path, dict[str, str]]], timeout_s: float
) -> dict[str, Step]:
    """`run_step` in several trees at once: `places` maps a role to its (tree, log path, env)."""
    runs = [
        LoggedRun(command, tree, log_path, what, {**build_env(tree), **env})
        for tree, log_path, env in places.values()
    ]
    steps = {}
    ended = run_logged_together(runs, timeout_s)
    for (role, (_, log_path, _)), (code, seconds) in zip(places.items(), ended, strict=True):
        passed = code == 0
        stopped = f"the {what} did not finish within {timeout_s:g} s and was stopped" if code is None else ""
        output = "" if passed else "\n".join(filter(None, [failure_excerpt(log_path), stopped]))
        with open(log_path, "a") as log:
            log.write(
                f"\n[gitcampaign] {what}: {'passed' if passed else 'FAILED'} in {seconds:.1f} s (exit {code})\n"
            )
        steps[role] = Step(what, command, passed, code, round(seconds, 3), str(log_path), output)
    return steps


def failure_excerpt(log_path: Path) -> str:
    """The log's last lines, after its first error lines when those scrolled out of the tail: a
    compiler's first error is what to read, and build tools end with their own traceback."""
    last = tail(log_path, TAIL_LINES)
    lines = log_path.read_text(errors="replace").splitlines()[:-TAIL_LINES]
    first = [line for line in lines if _ERROR.search(line)][:ERROR_LINES]
    return "\n".join([*first, "...", last]) if first else last


def build_env(tree: Path) -> dict[str, str]:
    """ccache, when the build command uses it, shares one cache across trees: paths under the tree
    hash as relative ones, so the incumbent and the candidate hit each other's objects."""
    env = {"CCACHE_BASEDIR": str(tree), "CCACHE_NOHASHDIR": "1"}
    return {key: value for key, value in env.items() if key not in os.environ}


# -- build ------------------------------------------------------------------------------------------


def build(
    repo: Repo,
    manifest: Manifest,
    tree: Path,
    commit: str,
    log_path: Path,
    timeout_s: float,
    whole: bool = False,
) -> Step | None:
    """Build `tree` (a copy of `commit`: its workspace in workspace mode unless `whole`), or restore
    the outputs of an identical earlier build."""
    if not manifest.build_command:
        return None
    sources = None if whole else manifest.workspace or None
    entry = cache_root(repo, manifest.name) / cache_key(repo, manifest, commit, tree, sources)
    record_path = entry / "record.json"
    if record_path.exists():
        started = time.monotonic()
        record = json.loads(record_path.read_text())
        _copy_tree(entry / "files", tree)
        os.utime(record_path)  # most recently used: pruned last
        step = Step(
            "build",
            manifest.build_command,
            True,
            0,
            round(time.monotonic() - started, 3),
            str(log_path),
            cached_from=f"{record['built']}, built in {record['seconds']:.1f} s from the same sources",
        )
        log_path.write_text(f"[gitcampaign] build restored from {entry} ({step.cached_from})\n")
        outputs = list(record["outputs"])
    else:
        before, site_before = _snapshot(tree), _site_state()
        step = run_step("build", manifest.build_command, tree, log_path, timeout_s)
        if not step.passed:
            return step
        outputs = sorted(path for path, stamp in _snapshot(tree).items() if before.get(path) != stamp)
        site_after = _site_state()
        installed = sorted(
            path for path in {*site_before, *site_after} if site_before.get(path) != site_after.get(path)
        )
        if installed:
            return _refuse(
                step,
                f"the build installed into the shared environment ({', '.join(installed[:3])}): every tree"
                " would import the last one installed. Build in place (`python setup.py build_ext --inplace`),"
                " not with `pip install`",
            )
    problem = import_problem(tree, outputs, timeout_s)
    if problem:
        return _refuse(step, problem)
    if step.cached_from is None:
        _store(entry, tree, outputs, step)
    return step


def _refuse(step: Step, problem: str) -> Step:
    """A build that ran but would not be measured as built: failed, with the reason in its log."""
    step.passed, step.exit_code, step.output = False, None, problem
    with open(step.log, "a") as log:
        log.write(f"[gitcampaign] build refused: {problem}\n")
    return step


def site_dirs() -> list[Path]:
    paths = sysconfig.get_paths()
    return sorted({Path(paths["purelib"]), Path(paths["platlib"])})


def _site_state() -> dict[str, int]:
    """The names in site-packages, with the times of what an install writes there (`.pth` files,
    `*.dist-info`, `*.egg-link`): a `pip install` from a tree changes them, importing does not."""
    state = {}
    for folder in site_dirs():
        for entry in os.scandir(folder) if folder.is_dir() else ():
            if entry.name == "__pycache__":  # a first import writes it; no install needed
                continue
            written = entry.name.endswith((".pth", ".egg-link", ".dist-info", ".egg-info"))
            state[entry.path] = entry.stat(follow_symlinks=False).st_mtime_ns if written else 0
    return state


def cache_root(repo: Repo, campaign: str) -> Path:
    return g.common_dir(repo) / "campaign" / "build-cache" / campaign


def cache_key(repo: Repo, manifest: Manifest, commit: str, tree: Path, paths: list[str] | None = None) -> str:
    """Sources (blob ids of the files under `paths`, all by default, the campaign's own folder
    aside), build command, toolchain and tree path."""
    folder = C.campaign_dir(manifest.name) + "/"
    sources = [
        line
        for line in g.tree_listing(repo, commit, paths).splitlines()
        if not line.split("\t", 1)[-1].startswith(folder)
    ]
    toolchain = {}
    for name in TOOLCHAIN:
        found = shutil.which(name)
        if found:
            real = os.path.realpath(found)
            toolchain[name] = f"{real} {os.stat(real).st_mtime_ns}"
    fingerprint = envinfo.fingerprint()
    identity = {
        "sources": sources,
        "command": manifest.build_command,
        "tree": str(tree),
        "python": sys.executable,
        "versions": {key: fingerprint.get(key) for key in ("python", "torch", "cuda", "triton")},
        "env": {key: os.environ.get(key, "") for key in BUILD_ENV_KEYS},
        "toolchain": toolchain,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def _snapshot(tree: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime)} of every file under `tree` but git's own."""
    stamps = {}
    for folder, dirs, files in os.walk(tree):
        dirs[:] = [name for name in dirs if name != ".git"]
        for name in files:
            if name == ".git":
                continue
            path = Path(folder) / name
            stat = path.lstat()
            stamps[path.relative_to(tree).as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return stamps


def _copy_tree(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)


def _store(entry: Path, tree: Path, outputs: list[str], step: Step) -> None:
    """Keep the build's outputs for the next identical build; written aside, then renamed in."""
    if sum((tree / path).lstat().st_size for path in outputs) > CACHE_MAX_BYTES:
        return
    staging = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "files").mkdir(parents=True)
    for path in outputs:
        target = staging / "files" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / path, target, follow_symlinks=False)
    record = {"built": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": step.seconds, "outputs": outputs}
    (staging / "record.json").write_text(json.dumps(record))
    shutil.rmtree(entry, ignore_errors=True)
    staging.rename(entry)
    entries = sorted(
        (path for path in entry.parent.iterdir() if (path / "record.json").exists()),
        key=lambda path: (path / "record.json").stat().st_mtime,
    )
    for stale in entries[:-CACHE_ENTRIES]:
        shutil.rmtree(stale, ignore_errors=True)


def import_problem(tree: Path, outputs: list[str], timeout_s: float) -> str | None:
    """Why the tree would not import the extension modules its build wrote (None: it does)."""
    built = [path for path in outputs if path.endswith(tuple(EXTENSION_SUFFIXES))]
    if not built:
        return None  # no Python extension: the harness runs what the build wrote, by its path
    modules = {}
    for path in built:
        *folders, filename = path.split("/")
        suffix = max((s for s in EXTENSION_SUFFIXES if filename.endswith(s)), key=len)
        parts = [*folders, filename[: -len(suffix)]]
        if all(part.isidentifier() for part in parts):
            modules[".".join(parts)] = path
    if not modules:
        return (
            f"the build wrote extension modules ({', '.join(built[:3])}) that the tree's root does not import:"
            " the harness would load some other copy. Build in place (`python setup.py build_ext --inplace`)"
        )
    probe = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, *modules],
        cwd=tree,
        env=envinfo.tool_env(tree),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    try:
        origins: dict[str, str | None] = json.loads(probe.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return f"the import check of {', '.join(modules)} failed: {probe.stderr.strip()[-2000:]}"
    wrong = [
        f"{name} imports from {origins.get(name)}, not from {path}"
        for name, path in modules.items()
        if not origins.get(name) or not _same_file(str(origins[name]), tree / path)
    ]
    if wrong:
        return (
            "; ".join(wrong)
            + ": something ahead of PYTHONPATH (an editable install's import hook, a sitecustomize) shadows"
            " this tree's build. Uninstall that copy (`pip uninstall PKG`) or use an environment without it"
        )
    return None


def _same_file(origin: str, path: Path) -> bool:
    try:
        return Path(origin).resolve() == path.resolve()
    except OSError:
        return False


# -- the steps each command runs ----------------------------------------------------------------------


@dataclass
class Readiness:
    """What ran before a measurement: the verdict's `build` (by role) and `tests`, and the step
    that failed (gitcampaign.gates says which gate that is)."""

    build: dict[str, StepRecord] = field(default_factory=dict)
    tests: StepRecord | None = None
    failed: Step | None = None
    seconds: float = 0.0  # the steps' own time


def prepare_round(
    repo: Repo,
    manifest: Manifest,
    trees: dict[str, Path],
    commits: dict[str, str],
    scratch: Path,
    timeout_s: float,
) -> Readiness:
    """Candidate build, candidate tests, incumbent build: a broken candidate costs one build."""
    candidate = {C.CANDIDATE: (trees[C.CANDIDATE], commits[C.CANDIDATE])}
    ready = prepare_candidates(repo, manifest, candidate, scratch, timeout_s)[C.CANDIDATE]
    if ready.failed is None:
        incumbent = prepare_incumbent(
            repo, manifest, trees[C.INCUMBENT], commits[C.INCUMBENT], scratch, timeout_s
        )
        if incumbent is not None:
            ready.build[C.INCUMBENT] = incumbent.record()
    return ready


def prepare_candidates(
    repo: Repo, manifest: Manifest, candidates: dict[str, tuple[Path, str]], scratch: Path, timeout_s: float
) -> dict[str, Readiness]:
    """Each candidate's build, one after another (a build's check of site-packages must see its own
    installs alone), then the tests of those that built, all at once: the trees are independent, and
    a heat's candidates wait on the slowest suite instead of the sum. Logs are named by role; each
    Readiness keeps its seconds (build and tests)."""
    ready = {role: Readiness() for role in candidates}
    testing = {}
    for role, (tree, commit) in candidates.items():
        built = build(repo, manifest, tree, commit, scratch / f"build-{role}.log", timeout_s)
        if built is not None:
            ready[role].build[C.CANDIDATE] = built.record()
            ready[role].seconds += built.seconds
            if not built.passed:
                ready[role].failed = built
                continue
        testing[role] = (tree, scratch / f"tests-{role}.log", compiled_env(tree))
    if manifest.test_command and testing:
        for role, tests in run_steps_together("tests", manifest.test_command, testing, timeout_s).items():
            ready[role].tests = tests.record()
            ready[role].seconds += tests.seconds
            if not tests.passed:
                ready[role].failed = tests
    return ready


def prepare_incumbent(
    repo: Repo, manifest: Manifest, tree: Path, commit: str, scratch: Path, timeout_s: float
) -> Step | None:
    """The incumbent's build, or an error: it built when it was accepted, so a failure is the machine's."""
    incumbent = build(repo, manifest, tree, commit, scratch / "build-incumbent.log", timeout_s)
    if incumbent is not None:
        _require(incumbent, f"the incumbent {commit[:12]}")
    return incumbent


def prepare_baseline(
    repo: Repo, manifest: Manifest, trees: dict[str, Path], commit: str, scratch: Path, timeout_s: float
) -> Readiness:
    """Both A/A trees built and the tests green, or an error: a campaign cannot start from a red state."""
    ready = Readiness(build_all(repo, manifest, trees, dict.fromkeys(trees, commit), scratch, timeout_s))
    tests = run_tests(manifest, trees[C.INCUMBENT], scratch / "tests-baseline.log", timeout_s)
    if tests is not None:
        _require(tests, f"the campaign's start {commit[:12]}")
        ready.tests = tests.record()
    return ready


def build_all(
    repo: Repo,
    manifest: Manifest,
    trees: dict[str, Path],
    commits: dict[str, str],
    scratch: Path,
    timeout_s: float,
    whole: bool = False,
) -> dict[str, StepRecord]:
    """Every tree built (an error if one fails: these commits built before); the verdict's `build`
    (empty without a build command)."""
    built = {}
    for role, tree in trees.items():
        step = build(repo, manifest, tree, commits[role], scratch / f"build-{role}.log", timeout_s, whole)
        if step is not None:
            _require(step, f"{role} {commits[role][:12]}")
            built[role] = step.record()
    return built


def run_tests(manifest: Manifest, tree: Path, log_path: Path, timeout_s: float) -> Step | None:
    """The tree's tests, compiling into the Triton cache its measured processes use (compiled_env)."""
    if not manifest.test_command:
        return None
    return run_step("tests", manifest.test_command, tree, log_path, timeout_s, compiled_env(tree))


def acceptance(
    repo: Repo, manifest: Manifest, head: str, head_tree: Path, scratch: Path, timeout_s: float
) -> Step | None:
    """The acceptance suite on the final accepted head: in its measured tree, or in workspace mode
    in a checkout of the whole repository (built first), since the suite covers the whole project."""
    if not manifest.acceptance_command:
        return None
    if not manifest.workspace:
        return run_step(
            ACCEPTANCE, manifest.acceptance_command, head_tree, scratch / "acceptance.log", timeout_s
        )
    with worktrees(repo, manifest.name, {ACCEPTANCE: head}) as full:
        build_all(repo, manifest, full, {ACCEPTANCE: head}, scratch, timeout_s, whole=True)
        return run_step(
            ACCEPTANCE, manifest.acceptance_command, full[ACCEPTANCE], scratch / "acceptance.log", timeout_s
        )


def _require(step: Step, what: str) -> None:
    if not step.passed:
        raise CampaignError(
            f"{what} failed its {step.what} in {Path(step.log).parent}; nothing was recorded\n"
            + "\n".join(step.failure_notes()),
            f"run `{step.command}` by hand in a checkout of that commit, fix the project or the environment,"
            " then run the command again",
        )


def measured_paths(manifest: Manifest) -> list[str] | None:
    """Workspace mode: the workspace paths and the campaign's folder; repo mode: None (everything)."""
    return sorted({*manifest.workspace, C.campaign_dir(manifest.name)}) if manifest.workspace else None


def outside_workspace(manifest: Manifest, changed: list[str]) -> list[str]:
    """The paths a round changed (`changed`) that the workspace copy does not hold: its measurement
    would miss them."""
    if not manifest.workspace:
        return []
    held = measured_paths(manifest) or []
    return [
        path
        for path in changed
        if not any(path == root or path.startswith(root.rstrip("/") + "/") for root in held)
    ]


# -- the final diff ---------------------------------------------------------------------------------


@dataclass
class FinalDiff:
    """The accepted line from the campaign's start to its head, commit by commit."""

    start: str
    head: str
    files: list[str]  # changed since the start, the campaign's own folder aside
    rounds: list[int]  # accepted rounds on the line
    rollbacks: list[str]  # commits restoring the tree before a rolled-back round
    foreign: list[str]  # "sha subject" of commits that are none of the above

    @property
    def clean(self) -> bool:
        return not self.foreign

    @property
    def unchanged(self) -> bool:
        """Whether the head holds the start's project: no file changed outside the campaign's folder."""
        return self.clean and not self.files

    def statement(self, campaign: str) -> str:
        span = f"`{self.start[:12]}..{self.head[:12]}`"
        if not self.clean:
            return (
                f"The final diff {span} is NOT only the accepted rounds' changes: "
                + "; ".join(self.foreign)
                + " did not go through a round."
            )
        listed = ", ".join(f"`{path}`" for path in self.files[:12]) + (" ..." if len(self.files) > 12 else "")
        return (
            f"The final diff {span} holds only the accepted rounds' changes: {len(self.files)} file(s) outside "
            f"`{C.campaign_dir(campaign)}/`"
            + (f" ({listed})" if self.files else "")
            + f", from accepted round(s) {', '.join(map(str, self.rounds)) or 'none'}"
            + (f" and {len(self.rollbacks)} rollback commit(s)" if self.rollbacks else "")
            + "; every other commit on the line touches only the campaign's folder."
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "clean": self.clean}


def final_diff(
    repo: Repo, campaign: str, start: str, head: str, accepted: dict[str, int], rejected: set[str]
) -> FinalDiff:
    """Classify every commit between the start and the head: campaign bookkeeping (only the
    campaign's folder), an accepted round, a round rolled back by the commit right after it, that
    rollback (the tree before the round again), or foreign."""
    folder = C.campaign_dir(campaign) + "/"
    chain = g.first_parent_chain(repo, head)
    line = chain[chain.index(start) + 1 :] if start in chain else chain

    def rolls_back(commit: str) -> bool:
        parent = g.parent(repo, commit)
        return parent in rejected and _tree(repo, commit) == _tree(repo, f"{parent}^")

    rounds, rollbacks, foreign = [], [], []
    for index, commit in enumerate(line):
        parent = g.parent(repo, commit)
        touched = g.changed_paths(repo, parent, commit) if parent else []
        bookkeeping = all(path.startswith(folder) for path in touched)
        undone = commit in rejected and index + 1 < len(line) and rolls_back(line[index + 1])
        if commit in accepted:
            rounds.append(accepted[commit])
        elif bookkeeping or undone:
            continue
        elif rolls_back(commit):
            rollbacks.append(commit)
        else:
            foreign.append(f"{commit[:12]} {g.commit_message(repo, commit).splitlines()[0]}")
    files = [path for path in g.changed_paths(repo, start, head) if not path.startswith(folder)]
    return FinalDiff(start, head, files, sorted(rounds), rollbacks, foreign)


def _tree(repo: Repo, commit: str) -> str | None:
    return g.rev(repo, commit, peel="^{tree}")


def report_section(suite: Step | None, diff: FinalDiff, campaign: str, command: str = "") -> list[str]:
    """REPORT.md's acceptance section: the suite's outcome on the final head, and the final diff."""
    if suite is None and command and diff.unchanged:
        outcome = [
            f"- Acceptance suite `{command}`: not run: the final head changes no file outside "
            f"`{C.campaign_dir(campaign)}/`, so it would test the start's code, not the campaign's."
        ]
    elif suite is None:
        outcome = ["- Acceptance suite: none configured (`git campaign init --acceptance-command`)."]
    elif suite.passed:
        outcome = [
            f"- Acceptance suite `{suite.command}`: **passed** on the final head ({suite.seconds:.1f} s)."
        ]
    else:
        # A fence longer than any backtick run in the output: no line of it can close the block.
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", suite.output)), default=0))
        outcome = [
            f"- Acceptance suite `{suite.command}`: **FAILED** on the final head "
            f"(exit {suite.exit_code}); recorded with `report --record-failures`. Last lines:",
            "",
            fence,
            *suite.output.splitlines(),
            fence,
        ]
    return ["", "## Acceptance", "", *outcome, f"- {diff.statement(campaign)}", ""]
