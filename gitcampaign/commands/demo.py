"""`git campaign demo [DIR]`: the whole loop on a scratch repo holding our GEMM kernel.

init → prepare → baseline → three scripted rounds → report, then the lineage as `git log` shows it.
The rounds are real edits of `kernels/gemm.py`: one that helps (bigger, autotuned tiles), one
planted slower (tiny tiles), one planted wrong (the K loop skips its last tile) that validate's test
gate must reject before measuring it. On a CPU the harness runs Triton's interpreter on small
shapes; on a GPU, Llama shapes.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import kernels
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

NAME = "gemm-demo"
KERNEL = "kernels/gemm.py"

# The starting point: one small tile everywhere, so there is something to win.
_ORIGINAL_CPU = "_CPU_CONFIG = _config(64, 64, 64, 4, 1)"
_ORIGINAL_CONFIGS = "configs=pick_configs(_hopper_configs(), _CPU_CONFIG, CONFIG_ENV),"
_SMALL_CPU = "_CPU_CONFIG = _config(32, 32, 32, 4, 1)"
_SMALL_CONFIGS = "configs=pick_configs([_config(64, 64, 32, 4, 2)], _CPU_CONFIG, CONFIG_ENV),"
_TINY_CPU = "_CPU_CONFIG = _config(32, 32, 32, 2, 1)"
_TINY_CONFIGS = "configs=pick_configs([_config(32, 32, 32, 2, 1)], _CPU_CONFIG, CONFIG_ENV),"
_K_LOOP = "for k in range(0, tl.cdiv(K, BLOCK_K)):"
_K_LOOP_SHORT = "for k in range(0, tl.cdiv(K, BLOCK_K) - 1):"

# Small odd shapes for the interpreter (~1 GFLOP/s): K=96 is not a multiple of 64, M=1 is a row.
DEMO_SHAPES_CPU = """- {label: sq-128, M: 128, N: 128, K: 128}
- {label: odd-96, M: 96, N: 160, K: 96}
- {label: wide-64, M: 64, N: 256, K: 128}
- {label: row-1, M: 1, N: 128, K: 192}
"""

CHECK_SCRIPT = '''"""Focused correctness check of kernels.gemm (the campaign's test command; the pre-commit hook runs it)."""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
from kernels.gemm import gemm  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float16  # bf16 is wrong in the interpreter
generator = torch.Generator(device).manual_seed(0)
for m, n, k in [(64, 96, 160), (1, 64, 64), (130, 70, 200)]:  # K tails, M=1, ragged edges
    a = torch.randn(m, k, device=device, dtype=dtype, generator=generator, requires_grad=True)
    b = torch.randn(n, k, device=device, dtype=dtype, generator=generator, requires_grad=True)
    out = gemm(a, b)
    ref = a.double() @ b.double().T
    snr = 10 * torch.log10(ref.pow(2).sum() / (ref - out.double()).pow(2).sum())
    assert snr > 40, f"gemm {m}x{n}x{k}: SNR {snr:.1f} dB < 40 dB"
print("gemm check: PASS")
'''


@dataclass(frozen=True)
class ScriptedRound:
    hypothesis: str
    change: str
    edits: tuple[tuple[str, str], ...]


ROUNDS = (
    ScriptedRound(
        "Bigger tiles with the autotuned Hopper config list amortise loads over more MMA work",
        "restore 64-wide CPU tiles and the full sm90 autotune list",
        ((_SMALL_CPU, _ORIGINAL_CPU), (_SMALL_CONFIGS, _ORIGINAL_CONFIGS)),
    ),
    ScriptedRound(
        "Small tiles raise occupancy (planted: slower)",
        "32-wide CPU tiles, one 32x32 GPU config",
        ((_ORIGINAL_CPU, _TINY_CPU), (_ORIGINAL_CONFIGS, _TINY_CONFIGS)),
    ),
    ScriptedRound(
        "Skip the K tail: fewer loads per tile (planted: wrong)",
        "the K loop stops one tile early",
        ((_K_LOOP, _K_LOOP_SHORT),),
    ),
)


def _has_cuda() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def _edit(path: Path, edits: tuple[tuple[str, str], ...]) -> None:
    text = path.read_text()
    for old, new in edits:
        if text.count(old) != 1:
            raise CampaignError(
                f"demo: {path.name} no longer contains {old!r} once", "update gitcampaign/commands/demo.py"
            )
        text = text.replace(old, new)
    path.write_text(text)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CampaignError(
            f"demo: `git {' '.join(args[:2])}` failed in {root}:\n{done.stdout}{done.stderr}",
            "read the hook or git output above; the scratch repo is left as it was for inspection",
        )
    return done.stdout


def _scratch_repo(root: Path, gpu: bool) -> str:
    if root.exists() and any(root.iterdir()):
        raise CampaignError(f"demo directory {root} is not empty", "pass a new or empty directory, or none")
    source = Path(kernels.__file__).parent
    (root / "kernels").mkdir(parents=True)
    for name in ("__init__.py", "_common.py", "gemm.py"):
        shutil.copy(source / name, root / "kernels" / name)
    _edit(root / KERNEL, ((_ORIGINAL_CPU, _SMALL_CPU), (_ORIGINAL_CONFIGS, _SMALL_CONFIGS)))
    (root / "tests").mkdir()
    (root / "tests" / "check_gemm.py").write_text(CHECK_SCRIPT)
    (root / "README.md").write_text("Scratch project of `git campaign demo`: a plain Triton GEMM.\n")
    shapes = "llama3.1-8b:mbs=1"
    if not gpu:
        (root / "demo_shapes.yaml").write_text(DEMO_SHAPES_CPU)
        shapes = "demo_shapes.yaml"
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


def demo(root: Path, rounds: int = 3, echo: Callable[[str], None] = print) -> None:
    if importlib.util.find_spec("triton") is None:
        raise CampaignError("the demo needs triton", "pip install triton (the CPU interpreter is enough)")
    gpu = _has_cuda()
    root = root.resolve()
    echo(
        f"demo: scratch repo {root} ({'GPU, Llama-3.1-8B shapes' if gpu else 'no GPU: Triton interpreter, small shapes'})"
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
            shapes=str(root / shapes) if not gpu else shapes,
            test_command="python tests/check_gemm.py",
            quick_command=f"python campaigns/{NAME}/{C.HARNESS_FILE}{repeats}",
            pairs=3 if gpu else 2,
            max_iterations=rounds,
            timeout_s=1800,
        ),
    )
    echo("DEFINE_TARGET: campaign initialised (git campaign init)")
    prepared = prepare(root, NAME)
    echo("PREPARE_ENVIRONMENT: " + "; ".join(prepared.actions))
    result = baseline(root, NAME)
    echo(
        f"BASELINE: {result.aggregate:.4g} {C.METRIC_STEP}; representative {', '.join(result.representative)}; "
        f"noise floor {100 * result.noise.aggregate:.1f}%"
    )
    for number, scripted in enumerate(ROUNDS[:rounds], start=2):
        open_round(root, NAME, scripted.hypothesis)
        _edit(root / KERNEL, scripted.edits)
        _git(
            root,
            "commit",
            "-q",
            "-am",
            f"{scripted.change}\n\nHypothesis: {scripted.hypothesis}\nChange: {scripted.change}\n",
        )
        outcome = validate(root, NAME)
        echo(
            f"ROUND {number}: {scripted.hypothesis}\n  -> {outcome.decision}"
            + (f" ({', '.join(outcome.reasons)})" if outcome.reasons else "")
            + (f", ratio {outcome.ratio:.3f}" if outcome.ratio == outcome.ratio else "")
        )
    final = report(root, NAME)
    echo(
        f"REPORT: {final.path} committed; final/baseline {final.ratio:.3f}x ({'; '.join(final.termination)})"
    )
    campaign = Campaign(g.open_repo(root), NAME)
    _, rows = lineage_rows(campaign)
    echo("\n" + log_table(rows, C.METRIC_STEP) + "\n")
    echo(_git(root, "log", "--no-notes", "--notes=campaign/bench", C.main_branch(NAME)))
    echo("rejected rounds, pinned under refs/campaign/:")
    echo(_git(root, "log", "--no-walk", "--oneline", "--no-notes", f"--glob=refs/campaign/{NAME}/rejected/*"))
    echo(f"explore: cd {root} && git log {C.main_branch(NAME)} && git campaign log && git campaign show 2")
