"""The transfer gate sees the host (issue 38): a round that wins the quick harness's figure but adds
host time to every call is REJECTed by the training probe, which times whole steps as a training
loop pays them. Here the quick harness is the fake project's (its figure comes from SPEED) and the
probe is the frozen harness's own, built from an op spec of the project's matmul."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gitcampaign import constants as C
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.vocabulary import Decision

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project  # noqa: E402

NAME = "host"
MATMUL = """
import time

HOST_DELAY = {delay}


def matmul(a, b):
    # The host's work per call, what a GPU-time figure does not show: a busy wait, not a sleep, since
    # on a loaded machine the scheduler runs a process that slept ahead of one that computes.
    end = time.perf_counter() + HOST_DELAY
    while time.perf_counter() < end:
        pass
    return a @ b.T
"""
SPEC = """
NAME = "matmul"
MODULE = "kernel"
FIELDS = {"M": "int", "N": "int", "K": "int"}
OUTPUTS = ("out",)
CHECKS = {"out_snr": {"of": "out"}, "da_snr": {"of": "a.grad"}, "db_snr": {"of": "b.grad"}}
UNIT = "TFLOPS"
BACKWARD = True
DTYPE = "float32"


def inputs(shape, draw):
    return {"a": draw.activation(shape["M"], shape["K"]), "b": draw.parameter(shape["N"], shape["K"])}


def candidate(kernel, a, b):
    return kernel.matmul(a, b)


def reference(a, b):
    return a @ b.T


def work(shape, dtype):
    mnk = float(shape["M"]) * shape["N"] * shape["K"]
    return {"forward": 2 * mnk, "backward": 4 * mnk}
"""


def kernel_source(speed: float, delay: float) -> str:
    return f"SPEED = {speed}\nCORRECT = True\nEDGE_CASES_OK = True\n" + MATMUL.format(delay=delay)


@pytest.mark.slow
def test_a_per_call_host_delay_is_rejected_by_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "proj")
    (root / "kernel.py").write_text(kernel_source(100, 0.0))
    (root / "matmul_spec.py").write_text(SPEC)
    (root / "shapes.yaml").write_text(
        "- {label: a, M: 64, N: 64, K: 64}\n- {label: b, M: 96, N: 64, K: 32}\n"
    )
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "a matmul and its spec")
    monkeypatch.chdir(root)
    init(
        root,
        InitOptions(
            name=NAME,
            op_spec="matmul_spec.py",
            metric="step",
            shapes="shapes.yaml",
            quick_command=f"{sys.executable} bench.py",
            test_command=f"{sys.executable} test_kernel.py",
            pairs=2,
        ),
    )
    prepare(root, NAME, install_hooks=False)
    baseline(root, NAME)

    open_round(root, NAME, "a faster kernel that spends 100 ms on the host per call")
    (root / "kernel.py").write_text(kernel_source(130, 0.1))
    git(root, "commit", "-q", "-am", "Hypothesis: faster on the GPU\nChange: kernel.py")
    result = validate(root, NAME)
    # The quick harness alone saw a 30% gain and no failed check; the probe saw the host's time.
    assert result.ratio > 1.2
    assert (result.decision, result.reasons, result.transfer) == (
        Decision.REJECT,
        [C.REASON_OVERFIT],
        "REJECT-as-overfit",
    )
    assert any("slower" in note and "did not transfer" in note for note in result.notes), result.notes
