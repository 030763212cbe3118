"""The training probe is a gate: a round whose gain does not transfer is REJECTED for `overfit`.

The fake project's harness reads SPEED from kernel.py; its fake probe reads PROBE_MS (step time)
and LOSS_DRIFT (added to the loss from step 2 on, as a cache serving stale data would) from the
same file, so each round chooses what the harness and the probe see.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
from git import Repo

from gitcampaign import constants as C
from gitcampaign import transfer, verdict
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project  # noqa: E402

from tests.commands.test_loop import NAME, options  # noqa: E402

PROBE = r"""
import argparse, json, os, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel
parser = argparse.ArgumentParser()
parser.add_argument("--json", required=True)
args = parser.parse_args()
drift = getattr(kernel, "LOSS_DRIFT", 0.0)
loss = [0.01 * 0.9**step + (drift if step >= 2 else 0.0) for step in range(6)]
ms = getattr(kernel, "PROBE_MS", 10.0)
if hasattr(kernel, "SLOW_FIRST_MS"):  # the first run of this tree only: a noisy host, once
    first = Path(os.environ["FAKE_PROBE_RUNS"]) / "slow-once"
    if not first.exists():
        first.write_text("")
        ms = kernel.SLOW_FIRST_MS
Path(args.json).write_text(json.dumps({
    "seed": 0, "median_ms": ms, "step_ms": [ms] * 6, "loss": loss, "out_ms": [0.5] * 6,
    "op_rel_error": 0.01, "loss_finite": True,
}))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_PROBE_RUNS", str(tmp_path))
    root = make_project(tmp_path / "proj")
    (root / "probe.py").write_text(PROBE)
    git(root, "add", "probe.py")
    git(root, "commit", "-q", "-m", "fake probe")
    monkeypatch.chdir(root)
    init(root, options(probe_command=f"{sys.executable} probe.py"))
    baseline(root, None)
    return root


def _probe_record(root: Path, commit: str) -> dict[str, Any]:
    doc = verdict.standing(verdict.read(Repo(root), commit))
    assert doc is not None and doc.probe is not None
    return doc.probe


def faster_round(root: Path, hypothesis: str, probe_lines: str) -> str:
    open_round(root, None, hypothesis)
    (root / "kernel.py").write_text(f"SPEED = 130\nCORRECT = True\nEDGE_CASES_OK = True\n{probe_lines}")
    git(root, "commit", "-q", "-am", f"Hypothesis: {hypothesis}\nChange: faster")
    return git(root, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize(
    ("probe_lines", "note"),
    [
        ("PROBE_MS = 11.0\n", "slower: the gain did not transfer"),
        ("LOSS_DRIFT = 0.01\n", "loss left the incumbent's trajectory: step 2"),
    ],
)
def test_a_gain_that_does_not_transfer_is_rejected(project: Path, probe_lines: str, note: str) -> None:
    main_before = git(project, "rev-parse", CampaignRef.main(NAME).branch).strip()
    commit = faster_round(project, "wins the harness only", probe_lines)
    result = validate(project, None)
    assert (result.decision, result.reasons, result.transfer) == (
        Decision.REJECT,
        [C.REASON_OVERFIT],
        "REJECT-as-overfit",
    )
    assert any(note in line for line in result.notes), result.notes
    # A slower probe is run again before it stands; a loss off the trajectory is deterministic.
    runs = 1 + transfer.CONFIRM_PAIRS if "PROBE_MS" in probe_lines else 1
    step_ms = _probe_record(project, result.commit)["step_ms"]
    assert all(len(side["block"]) == runs for side in step_ms.values()), step_ms
    assert any("confirmed on the fastest run of each side" in line for line in result.notes) == (runs > 1)
    assert git(project, "rev-parse", CampaignRef.main(NAME).branch).strip() == main_before
    assert git(project, "rev-parse", str(CampaignRef.rejected(NAME, 2))).strip() == commit


def test_a_gain_that_transfers_is_accepted(project: Path) -> None:
    """Within the tolerance (a loss drift far below what a 1% op error allows) and as fast: ACCEPT."""
    commit = faster_round(project, "really faster", "PROBE_MS = 9.0\nLOSS_DRIFT = 1e-6\n")
    result = validate(project, None)
    assert result.decision in ACCEPTED and result.transfer == "ACCEPT-as-real"
    assert git(project, "rev-parse", CampaignRef.main(NAME).branch).strip() == commit


def test_a_probe_slower_in_its_first_pair_only_is_cleared_by_the_confirmation(project: Path) -> None:
    """One noisy pair (the candidate's first step time 30% slow) does not reject a gain: the fastest
    run of each side over 1 + CONFIRM_PAIRS pairs decides, and the verdict says what the first pair
    read."""
    commit = faster_round(project, "faster, one noisy probe run", "PROBE_MS = 9.0\nSLOW_FIRST_MS = 13.0\n")
    result = validate(project, None)
    assert result.decision in ACCEPTED and result.transfer == "ACCEPT-as-real", result.notes
    assert _probe_record(project, commit)["step_ms"]["candidate"]["block"] == [13.0, 9.0, 9.0]
    assert any(
        "read the candidate slower (block 0.769" in n and "cleared on the fastest run" in n
        for n in result.notes
    )
    assert git(project, "rev-parse", CampaignRef.main(NAME).branch).strip() == commit


def _probe_runs(incumbent_ms: tuple[float, ...], candidate_ms: tuple[float, ...]) -> dict[str, list[dict]]:
    def record(ms: float) -> dict:
        return {"shapes": [{"label": "host", "median_ms": ms}]}

    return {
        C.INCUMBENT: [record(ms) for ms in incumbent_ms],
        C.CANDIDATE: [record(ms) for ms in candidate_ms],
    }


@pytest.mark.parametrize(
    ("incumbent_ms", "candidate_ms", "overfit"),
    [
        # An H100, 2026-12-06, 256 tokens (host-bound): the incumbent's own runs 8.3% apart; the
        # candidate's median 8% slower, its fastest run 1% slower.
        ((1.8217, 1.8723, 1.7211), (2.0297, 1.9791, 1.7376), False),
        # An H100, 2026-12-05, 1024 tokens: every candidate run slower than the incumbent's two fastest.
        ((0.758, 0.708, 0.700), (0.769, 0.757, 0.777), True),
        ((1.0, 1.0, 1.0), (1.0, math.nan, 1.0), True),  # a run without the shape does not transfer
    ],
)
def test_the_fastest_run_of_each_side_decides(
    incumbent_ms: tuple[float, ...], candidate_ms: tuple[float, ...], overfit: bool
) -> None:
    judged = transfer.judge(_probe_runs(incumbent_ms, candidate_ms))
    assert judged.overfit == overfit
    assert judged.record["step_ms"]["candidate"]["host"][:1] == [candidate_ms[0]]  # every run is kept
