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
from gitcampaign.harness.contract import SpecInfo, UsageError, metrics_of, spec_info, spec_literals
from gitcampaign.harness.ops import op_names, spec_of
from gitcampaign.manifest import Manifest, check_target, normalise_metric
from gitcampaign.refs import CampaignRef
from gitcampaign.shapes import dump_shapes, is_shape_file, load_shapes
from gitcampaign.verdict import now


@dataclass
class InitOptions:
    name: str
    op: str | None = None
    op_spec: str | None = None  # a user's op spec, a path in the repository
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
                "use speedup=1.2, value=800, efficiency=0.9 (every representative shape at 0.9 of its"
                " limit) or efficiency=0.8 with peak=989 (the aggregate over that peak)",
            )
        try:
            target[key] = float(value)
        except ValueError as exc:
            raise CampaignError(
                f"--target {item!r}: {value!r} is not a number", "write e.g. speedup=1.2"
            ) from exc
    check_target(
        target, "--target", "use speedup=1.2, value=800, or efficiency=0.9 (with peak=989 for an aggregate)"
    )
    return target


@dataclass(frozen=True)
class TargetOp:
    """The op a campaign measures: its name, its spec's declarations and where the spec comes from
    (a path in the repository for a user's spec, None for a shipped op's; no spec at all for a
    label driven by the user's own --quick-command)."""

    name: str
    info: SpecInfo | None = None
    spec_path: str | None = None

    @property
    def metrics(self) -> list[str]:
        return metrics_of(self.info.unit, self.info.backward, self.info.columns) if self.info else []


def target_op(repo_root: Path, options: InitOptions, spec: tuple[str, bytes] | None) -> TargetOp:
    """The op of the op spec (its repository path and committed text) or of --op; CampaignError
    names the problem and the fix."""
    if spec is not None:
        relative, text = spec
        try:
            info = spec_info(spec_literals(text.decode(errors="replace"), relative), relative)
        except UsageError as exc:
            raise CampaignError(
                str(exc), "fix the op spec (docs/op-spec.md lists every declaration)"
            ) from exc
        op = options.op or (info.op_names[0] if len(info.op_names) == 1 else None)
        if op not in info.op_names:
            raise CampaignError(
                f"op spec {relative} declares {', '.join(info.op_names)}"
                + (f", not {options.op!r}" if options.op else ": pick one"),
                f"pass --op with one of {', '.join(info.op_names)}",
            )
        return TargetOp(op, info, relative)
    if not options.op:
        raise CampaignError("no op given", "pass --op with a shipped op, or --op-spec with your op spec")
    found = spec_of(options.op)
    if found is None:
        if options.quick_command is None:
            raise CampaignError(
                f"no built-in harness for op {options.op!r}",
                f"use one of {', '.join(op_names())}, spec your op with --op-spec (docs/op-spec.md), "
                "or drive your own harness with --quick-command",
            )
        return TargetOp(options.op)
    info = found[1]
    if (
        options.quick_command is None
        and info.kernel_source
        and not (repo_root / info.kernel_source).is_file()
    ):
        raise CampaignError(
            f"op {options.op} measures {info.module} ({info.kernel_source}), which this repository does not have",
            "run init in a repository with that kernel, spec your own op with --op-spec (docs/op-spec.md), or"
            " drive your own harness with --quick-command",
        )
    return TargetOp(options.op, info)


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


# On a GPU a round's tests compile its kernels cold, one core a process: spread over the cores they
# take a quarter of the time (docs/compiled-kernels.md). Bounded: a node of 128 cores would
# otherwise start a CUDA context a core on one GPU.
MAX_TEST_PROCESSES = 16


def pytest_command(target: str = "") -> str:
    """`python -m pytest -q [TARGET]`, spread over up to MAX_TEST_PROCESSES processes where
    pytest-xdist is installed."""
    parallel = f" -n auto --maxprocesses {MAX_TEST_PROCESSES}" if importlib.util.find_spec("xdist") else ""
    return f"python -m pytest -q{parallel}" + (f" {target}" if target else "")


def _test_command(root: Path, given: str | None, op: str, info: SpecInfo | None) -> str:
    """The focused test command: as given ('' for none), else the op's own tests (its spec's TESTS),
    which must exist (a default naming a missing file would fail the baseline as "no tests ran")."""
    if given is not None:
        return given
    if info is None or not info.tests:
        return ""
    if not (root / info.tests).exists():
        raise CampaignError(
            f"the default test command of op {op!r} runs {info.tests}, which this repository does not have",
            '--test-command CMD names your focused tests; --test-command "" records that the campaign has none',
        )
    return pytest_command(info.tests)


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
            f"campaign {name} already exists",
            f"pick another name, or `git checkout {CampaignRef.main(name).branch}`",
        )
    folder = C.campaign_dir(name)
    op = target_op(root, options, committed_spec(repo, head, options.op_spec) if options.op_spec else None)
    info = op.info
    builtin = f"{folder}/{C.HARNESS_FILE}"
    if options.metric:
        metric = normalise_metric(options.metric)
    elif info is not None:
        metric = info.metric
    else:
        metric = C.METRIC_FORWARD
    if info is not None and metric not in op.metrics:
        raise CampaignError(
            f"metric {metric!r} does not fit op {op.name!r} (its harness reports {', '.join(op.metrics)})",
            f"pass --metric with one of those, or drop --metric for the op's default ({info.metric!r})",
        )
    quick_command = options.quick_command
    if quick_command is None:
        assert info is not None
        forward_only = " --forward-only" if info.backward and metric == C.METRIC_FORWARD else ""
        quick_command = f"python {builtin}{forward_only}"
    # The built-in harness (copied by prepare) may be given extra flags; anything else is the user's own.
    harness = builtin if quick_command.split()[:2] == ["python", builtin] else None
    shapes = load_shapes(options.shapes, info if harness else None)
    test_command = _test_command(root, options.test_command, op.name, info)
    probe = options.probe_command
    if probe is None:
        probe = f"python {builtin} --train-probe" if info is not None and (harness or op.spec_path) else ""
    # A shape file may live anywhere (outside the repository, on this machine only): the campaign
    # keeps its own copy, so that the benchmark command runs in any clone.
    shape_copy = f"{folder}/{C.SHAPES_FILE}" if is_shape_file(options.shapes) else None
    benchmark_command = options.benchmark_command or (
        f"python benchmarks/full_bench.py --op {op.name} --shapes {shape_copy or options.shapes}"
        if info is not None and op.spec_path is None
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
    if probe.startswith(f"python {builtin}"):
        protected = sorted({*protected, builtin})
    if builtin in protected:  # the frozen harness measures the op spec beside it
        protected = sorted({*protected, f"{folder}/{C.OP_SPEC_FILE}"})
    manifest = Manifest(
        name=name,
        target_op=op.name,
        target_backend=options.backend,
        target_lang="triton" if options.backend == "triton" else options.backend,
        target_gpu=options.gpu,
        execution_mode=options.execution_mode,
        project_skill="gitcampaign",
        performance_target=_parse_target(options.target),
        primary_metric=metric,
        target_shapes=[shape.to_dict() for shape in shapes],
        kernel_source=options.kernel_source or (info.kernel_source if info else ""),
        op_spec=op.spec_path or "",
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
        CampaignRef.main(name).branch,
        {
            manifest.path: manifest.to_yaml(),
            **({shape_copy: dump_shapes(shapes).encode()} if shape_copy else {}),
        },
        f"campaign {name}: define target\n\nop {op.name}, backend {options.backend}, metric {metric}, "
        f"{len(shapes)} target shapes ({options.shapes})\n",
        create_from=head,
    )
    # The campaign this clone made runs its commands: the person who named them approved them.
    trust.approve(Campaign(repo, name))
    g.checkout(repo, CampaignRef.main(name).branch)
    configure_notes(repo)
    return InitResult(name, commit, CampaignRef.main(name).branch)


def committed_spec(repo: Any, head: str, path: str) -> tuple[str, bytes]:
    """The op spec's repository path and its text at HEAD (what prepare will copy)."""
    root = g.root(repo)
    given = Path(path)
    try:
        relative = (given.resolve().relative_to(root.resolve()) if given.is_absolute() else given).as_posix()
    except ValueError as exc:
        raise CampaignError(
            f"--op-spec {path} is outside the repository", "keep the op spec in the repository"
        ) from exc
    text = g.read_file_at(repo, head, relative)
    if text is None:
        raise CampaignError(
            f"--op-spec {path}: no such file committed at HEAD",
            "commit the op spec (a Python file in the repository; docs/op-spec.md), then run init again",
        )
    return relative, text
