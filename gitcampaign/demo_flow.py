"""`git campaign demo [DIR]`: the whole loop on a scratch repo holding a Triton GEMM.

init → prepare → baseline → three scripted rounds → report, then the lineage as `git log` shows it.
The scratch project is the demo's own package data (`gitcampaign/demo/`): a frozen starting kernel
with small tiles, its focused test, the CPU shapes, and the scripted rounds (`rounds.yaml`): one that
helps (bigger, autotuned tiles), one planted slower (tiny tiles), one planted wrong (the K loop skips
its last tile), committed past the hooks, that validate's test gate must reject before measuring it.
None of it follows the project's own kernels/gemm.py, so the demo keeps working while campaigns
change that file. On a CPU the harness runs Triton's interpreter on small shapes; on a GPU, one Llama
shape; two interleaved pairs per measurement on both. Like `loop`, it drives the verbs of `commands/`
from outside them.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.lineage import lineage_rows, log_table
from gitcampaign.progress import Progress
from gitcampaign.refs import CampaignRef

NAME = "gemm-demo"
DEMO_DATA = Path(__file__).resolve().parent / "demo"
PROJECT_DIRS = ("kernels", "tests")  # copied from DEMO_DATA into the scratch repo
CPU_SHAPES, GPU_SHAPES = "shapes-cpu.yaml", "shapes-gpu.yaml"


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


@dataclass(frozen=True)
class ScriptedRound:
    hypothesis: str
    change: str
    edits: tuple[Edit, ...]
    no_verify: bool = False  # commit past the hooks, to show that validate re-runs every gate


def scripted_rounds() -> tuple[ScriptedRound, ...]:
    """The rounds of `rounds.yaml`, in order."""
    entries = yaml.safe_load((DEMO_DATA / "rounds.yaml").read_text())
    return tuple(
        ScriptedRound(
            entry["hypothesis"],
            entry["change"],
            tuple(Edit(**edit) for edit in entry["edits"]),
            bool(entry.get("no_verify", False)),
        )
        for entry in entries
    )


def _has_cuda() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def apply_edits(root: Path, edits: tuple[Edit, ...]) -> None:
    for edit in edits:
        path = root / edit.file
        text = path.read_text()
        if text.count(edit.old) != 1:
            raise CampaignError(
                f"demo: {edit.file} does not contain {edit.old!r} exactly once",
                "a scripted round builds on the one before it; fix gitcampaign/demo/rounds.yaml",
            )
        path.write_text(text.replace(edit.old, edit.new))


def _git(root: Path, *args: str) -> str:
    return g.run_in(
        root,
        *args,
        hint="read the hook or git output above; the scratch repo is left as it was for inspection",
    )


def _scratch_repo(root: Path, gpu: bool) -> str:
    if root.exists() and any(root.iterdir()):
        raise CampaignError(f"demo directory {root} is not empty", "pass a new or empty directory, or none")
    for name in PROJECT_DIRS:
        shutil.copytree(DEMO_DATA / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "README.md").write_text("Scratch project of `git campaign demo`: a plain Triton GEMM.\n")
    shapes = GPU_SHAPES if gpu else CPU_SHAPES
    shutil.copy(DEMO_DATA / shapes, root / shapes)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", ".")
    _git(
        root,
        "-c",
        "user.name=gitcampaign demo",
        "-c",
        "user.email=demo@gitcampaign.invalid",
        "commit",
        "-q",
        "-m",
        "A plain Triton GEMM, small tiles",
    )
    return shapes


def demo(
    root: Path, rounds: int = 3, echo: Callable[[str], None] = print, progress: Progress | None = None
) -> None:
    progress = progress or Progress.silent()
    if importlib.util.find_spec("triton") is None:
        raise CampaignError("the demo needs triton", "pip install triton (the CPU interpreter is enough)")
    gpu = _has_cuda()
    root = root.resolve()
    echo(
        f"demo: scratch repo {root} ({'GPU, the Llama-3.1-8B QKV projection' if gpu else 'no GPU: Triton interpreter, small shapes'})"
    )
    shapes = _scratch_repo(root, gpu)
    identity = {"user.name": "gitcampaign demo", "user.email": "demo@gitcampaign.invalid"}
    for key, value in identity.items():
        _git(root, "config", key, value)
    repeats = "" if gpu else " --repeats 3"
    init(
        root,
        InitOptions(
            name=NAME,
            op="gemm",
            metric="step",
            shapes=str(root / shapes),
            test_command="python tests/check_gemm.py",
            quick_command=f"python campaigns/{NAME}/{C.HARNESS_FILE}{repeats}",
            pairs=2,
            max_iterations=rounds,
            timeout_s=1800,
        ),
    )
    echo("DEFINE_TARGET: campaign initialised (git campaign init)")
    prepared = prepare(root, NAME)
    echo("PREPARE_ENVIRONMENT: " + "; ".join(prepared.actions))
    result = baseline(root, NAME, progress=progress)
    echo(
        f"BASELINE: {result.aggregate:.4g} {C.METRIC_STEP}; representative {', '.join(result.representative)}; "
        f"noise floor {100 * result.noise.aggregate:.1f}%"
    )
    for number, scripted in enumerate(scripted_rounds()[:rounds], start=2):
        open_round(root, NAME, scripted.hypothesis)
        apply_edits(root, scripted.edits)
        message = f"{scripted.change}\n\nHypothesis: {scripted.hypothesis}\nChange: {scripted.change}\n"
        _git(root, "commit", "-q", "-a", *(["--no-verify"] if scripted.no_verify else []), "-m", message)
        if scripted.no_verify:
            echo(f"ROUND {number}: committed with --no-verify (the focused test fails on it)")
        outcome = validate(root, NAME, progress=progress)
        echo(
            f"ROUND {number}: {scripted.hypothesis}\n  -> {outcome.decision}"
            + (f" ({', '.join(outcome.reasons)})" if outcome.reasons else "")
            + (f", ratio {outcome.ratio:.3f}" if outcome.ratio == outcome.ratio else "")
        )
    final = report(root, NAME, progress=progress)
    echo(
        f"REPORT: {final.path} committed; final/baseline {final.ratio:.3f}x ({'; '.join(final.termination)})"
    )
    campaign = Campaign(g.open_repo(root), NAME)
    _, rows = lineage_rows(campaign)
    echo("\n" + log_table(rows, C.METRIC_STEP) + "\n")
    echo(_git(root, "log", "--no-notes", "--notes=campaign/bench", CampaignRef.main(NAME).branch))
    echo("rejected rounds, pinned under refs/campaign/:")
    pins = f"--glob={CampaignRef.rejected_prefix(NAME)}*"
    echo(_git(root, "log", "--no-walk", "--oneline", "--no-notes", pins))
    echo(
        f"explore: cd {root} && git log {CampaignRef.main(NAME).branch} && git campaign log && git campaign show 2"
    )
