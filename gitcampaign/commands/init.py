"""DEFINE_TARGET: `git campaign init NAME` writes the manifest on a new `campaign/NAME/main`."""

from __future__ import annotations

import importlib.util
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import trust
from gitcampaign.campaign import Campaign, check_name, configure_notes
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import Manifest, check_target, normalise_metric
from gitcampaign.ops import OPS, OpInfo
from gitcampaign.refs import CampaignRef
from gitcampaign.shapes import dump_shapes, is_shape_file, load_shapes
from gitcampaign.verdict import now


@dataclass
class InitOptions:
    name: str
    op: str
    backend: str = "triton"
    metric: str | None = None
    shapes: str = "tiny"
    test_command: str | None = None
    quick_command: str | None = None
    benchmark_command: str | None = None
    probe_command: str | None = None
    kernel_source: str | None = None
    protect: tuple[str, ...] = ()
    max_iterations: int = 20
    target: tuple[str, ...] = ()
    gpu: str = "NVIDIA H200"
    pairs: int = 3
    min_gain: float = 0.01
    timeout_s: int = 1800
    build_command: str = ""
    acceptance_command: str | None = None  # None: the project's full test suite (see default_acceptance)
    execution_mode: str = C.EXECUTION_REPO
    workspace: tuple[str, ...] = ()


@dataclass
class InitResult:
    campaign: str
    commit: str  # the commit on the new accepted line that holds the manifest
    main_branch: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _parse_target(items: tuple[str, ...]) -> dict[str, float]:
    target: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in ("speedup", "value", "efficiency", "peak"):
            raise CampaignError(
                f"--target {item!r} is not KEY=NUMBER",
                "use speedup=1.2, value=800 or efficiency=0.8 with peak=989",
            )
        try:
            target[key] = float(value)
        except ValueError as exc:
            raise CampaignError(
                f"--target {item!r}: {value!r} is not a number", "write e.g. speedup=1.2"
            ) from exc
    if "efficiency" in target and "peak" not in target:
        raise CampaignError(
            "--target efficiency needs the hardware peak", "add --target peak=989 (TFLOP/s or GB/s)"
        )
    check_target(target, "--target", "use speedup=1.2, value=800 or efficiency=0.8 with peak=989")
    return target


def _metrics_for(info: OpInfo) -> list[str]:
    """The primary metrics an op's CSV can give: the ones its header has, plus the derived
    Combined Step TFLOPS where it has forward and backward times."""
    columns = info.header.split(",")
    metrics = [m for m in (C.METRIC_FORWARD, C.METRIC_GBS, C.METRIC_BWD_GBS) if m in columns]
    if "Forward Time (ms)" in columns and "Backward Time (ms)" in columns and "N" in columns:
        metrics.append(C.METRIC_STEP)
    return metrics


def protected_paths(
    repo_root: Path, commands: list[str], harness: str | None, extra: tuple[str, ...]
) -> list[str]:
    """The harness, the op's tests, every repo file the test and quick commands name, and --protect."""
    paths = [harness] if harness else []
    for command in commands:
        for token in shlex.split(command):
            candidate = Path(token)
            if not candidate.is_absolute() and (repo_root / candidate).is_file():
                paths.append(candidate.as_posix())
    for item in extra:
        if not (repo_root / item).exists():
            raise CampaignError(
                f"--protect {item}: no such file in the repository", "pass a path relative to its root"
            )
        paths.append(Path(item).as_posix())
    return sorted(set(paths))


PYTEST_CONFIGS = (
    ("pytest.ini", ""),
    ("pyproject.toml", "[tool.pytest"),
    ("setup.cfg", "[tool:pytest]"),
    ("tox.ini", "[pytest]"),
)


# On a GPU a round's tests compile its kernels cold, one core a process: on a 16-core H200 machine
# 8 processes took the grouped GEMM's tests from 40 s to 22 s and every kernel test from 180 s to
# 48 s; 16 took the fp8 GEMM's from 40.7 s to 36.6 s in pytest (cold Triton cache, 2026-12-01).
# Bounded: a node of 128 cores would otherwise start a CUDA context a core on one GPU.
MAX_TEST_PROCESSES = 16


def pytest_command(target: str = "") -> str:
    """`python -m pytest -q [TARGET]`, spread over up to MAX_TEST_PROCESSES processes where
    pytest-xdist is installed."""
    parallel = f" -n auto --maxprocesses {MAX_TEST_PROCESSES}" if importlib.util.find_spec("xdist") else ""
    return f"python -m pytest -q{parallel}" + (f" {target}" if target else "")


def _test_command(root: Path, given: str | None, op: str, info: OpInfo | None) -> str:
    """The focused test command: as given ('' for none), else the op's own tests, which must exist
    (a default naming a missing file would fail the baseline as "no tests ran")."""
    if given is not None:
        return given
    if info is None:
        return ""
    if not (root / info.test_file).is_file():
        raise CampaignError(
            f"the default test command of op {op!r} runs {info.test_file}, which this repository does not have",
            '--test-command CMD names your focused tests; --test-command "" records that the campaign has none',
        )
    return pytest_command(info.test_file)


def default_acceptance(repo_root: Path, test_command: str) -> str:
    """The project's full test suite: pytest when the project configures it or keeps test_*.py files
    under tests/ or test/; otherwise the focused test command, the only suite known."""
    for name, marker in PYTEST_CONFIGS:
        path = repo_root / name
        if path.is_file() and marker in path.read_text(errors="replace"):
            return pytest_command()
    if any(any((repo_root / folder).glob("**/test_*.py")) for folder in ("tests", "test")):
        return pytest_command()
    return test_command


def workspace_paths(repo_root: Path, mode: str, given: tuple[str, ...], commands: list[str]) -> list[str]:
    """Workspace mode: the given paths plus every repository file the commands name, all committed."""
    if mode not in (C.EXECUTION_REPO, C.EXECUTION_WORKSPACE):
        raise CampaignError(f"--execution-mode {mode!r} is not repo or workspace", "pick one of the two")
    if mode == C.EXECUTION_REPO:
        if given:
            raise CampaignError(
                "--workspace needs --execution-mode workspace", "add --execution-mode workspace"
            )
        return []
    if not given:
        raise CampaignError(
            "workspace mode needs the paths of the minimal copy",
            "list the kernel sources, the harness and the build files: --workspace src/kernel --workspace setup.py",
        )
    for path in given:
        if not (repo_root / path).exists() or Path(path).is_absolute():
            raise CampaignError(
                f"--workspace {path}: no such path in the repository", "pass paths relative to its root"
            )
    return protected_paths(repo_root, commands, None, tuple(path.rstrip("/") for path in given))


def init(repo_path: Path, options: InitOptions) -> InitResult:
    """Create the campaign; returns the commit that holds the manifest."""
    check_name(options.name)
    repo = g.open_repo(repo_path)
    name = check_name(options.name, repo)
    root = g.root(repo)
    g.require_clean(repo, "start a campaign")
    head = g.rev(repo, "HEAD")
    if head is None:
        raise CampaignError("the repository has no commit yet", "commit the kernel first, then run init")
    on = CampaignRef.from_ref(g.current_branch(repo) or "")
    if on is not None:
        raise CampaignError(
            f"HEAD is on {on.branch}, a branch of campaign {on.campaign}: a campaign started there would "
            f"carry {on.campaign}'s own commits (its manifest and bookkeeping, and any round not merged)",
            "check out the branch to start from (`git checkout main`, after merging what was accepted), "
            "then run init again",
        )
    main_ref = str(CampaignRef.main(name))
    if g.rev(repo, main_ref) is not None:
        raise CampaignError(
            f"campaign {name} already exists", f"pick another name, or `git checkout {C.main_branch(name)}`"
        )
    info = OPS.get(options.op)
    folder = C.campaign_dir(name)
    builtin = f"{folder}/{C.HARNESS_FILE}"
    if options.quick_command is None and info is None:
        raise CampaignError(
            f"no built-in harness for op {options.op!r}",
            f"use one of {', '.join(OPS)}, or drive your own harness with --quick-command",
        )
    metric = (
        normalise_metric(options.metric)
        if options.metric
        else (info.default_metric if info else C.METRIC_FORWARD)
    )
    if info is not None and metric not in _metrics_for(info):
        raise CampaignError(
            f"metric {metric!r} does not fit op {options.op!r} (its harness reports {', '.join(_metrics_for(info))})",
            f"pass --metric with one of those, or drop --metric for the op's default ({info.default_metric!r})",
        )
    shapes = load_shapes(options.shapes)
    forward_only = " --forward-only" if metric == C.METRIC_FORWARD else ""
    quick_command = options.quick_command or f"python {builtin}{forward_only}"
    # The built-in harness (copied by prepare) may be given extra flags; anything else is the user's own.
    harness = builtin if quick_command.split()[:2] == ["python", builtin] else None
    if harness and info is not None and not (root / info.kernel_source).is_file():
        raise CampaignError(
            f"the built-in harness of op {options.op!r} measures {info.kernel_source}, which this repository"
            " does not have (it imports the op from the project, as in gitcampaign's own kernels/)",
            "run init in a project that has it, or drive your own harness: --quick-command 'python my_bench.py'"
            " (docs/harness.md says what it must write)",
        )
    test_command = _test_command(root, options.test_command, options.op, info)
    probe = options.probe_command
    if probe is None:
        probe = (
            f"python {folder}/train_probe.py --op {options.op} --backend {options.backend}" if harness else ""
        )
    # A shape file may live anywhere (outside the repository, on this machine only): the campaign
    # keeps its own copy, so that the benchmark command runs in any clone.
    shape_copy = f"{folder}/{C.SHAPES_FILE}" if is_shape_file(options.shapes) else None
    benchmark_command = options.benchmark_command or (
        f"python benchmarks/full_bench.py --op {options.op} --shapes {shape_copy or options.shapes}"
        if info
        else ""
    )
    acceptance_command = (
        default_acceptance(root, test_command)
        if options.acceptance_command is None
        else options.acceptance_command
    )
    workspace = workspace_paths(
        root,
        options.execution_mode,
        options.workspace,
        [options.build_command, test_command, quick_command, acceptance_command],
    )
    protected = protected_paths(
        root, [test_command, quick_command, acceptance_command], harness, options.protect
    )
    if probe.startswith(f"python {folder}/train_probe.py"):
        protected = sorted({*protected, f"{folder}/train_probe.py"})
    manifest = Manifest(
        name=name,
        target_op=options.op,
        target_backend=options.backend,
        target_lang="triton" if options.backend == "triton" else options.backend,
        target_gpu=options.gpu,
        execution_mode=options.execution_mode,
        project_skill="gitcampaign",
        performance_target=_parse_target(options.target),
        primary_metric=metric,
        target_shapes=[shape.to_dict() for shape in shapes],
        kernel_source=options.kernel_source or (info.kernel_source if info else ""),
        test_command=test_command,
        benchmark_command=benchmark_command,
        quick_command=quick_command,
        probe_command=probe,
        representative_shapes=[],
        git_commit=head,
        git_branch=g.current_branch(repo) or "(detached)",
        max_iterations=options.max_iterations,
        created=now(),
        min_gain=options.min_gain,
        pairs=options.pairs,
        harness_timeout_s=options.timeout_s,
        build_command=options.build_command,
        acceptance_command=acceptance_command,
        workspace=workspace,
        protected_paths={path: None for path in protected},
    )
    commit = g.commit_files(
        repo,
        C.main_branch(name),
        {
            manifest.path: manifest.to_yaml(),
            **({shape_copy: dump_shapes(shapes).encode()} if shape_copy else {}),
        },
        f"campaign {name}: define target\n\nop {options.op}, backend {options.backend}, metric {metric}, "
        f"{len(shapes)} target shapes ({options.shapes})\n",
        create_from=head,
    )
    # The campaign this clone made runs its commands: the person who named them approved them.
    trust.approve(Campaign(repo, name))
    g.checkout(repo, C.main_branch(name))
    configure_notes(repo)
    return InitResult(name, commit, CampaignRef.main(name).branch)
