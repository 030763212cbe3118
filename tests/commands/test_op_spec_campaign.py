"""A user's own op taken through the loop by its op spec (examples/rmsnorm, issue 35), on the CPU:
init --op-spec, prepare, baseline, an accepted round, a round with a planted identity cache that
only the harness catches (its lint finding suppressed), a round whose backward is wrong, the report.
The frozen CSV header is the one the spec declares."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.harness.contract import spec_info, spec_literals
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rmsnorm"
NAME = "rms"
# Small enough for Triton's interpreter: a tile of rows per program is where its time goes.
SHAPES = [{"label": "rows-48", "M": 48, "N": 256}, {"label": "rows-24-odd", "M": 24, "N": 200}]
# A cache keyed on the activation's identity, its lint finding suppressed so that the round gets
# past the static gate: the harness's identity flip must catch it at run time.
IDENTITY_CACHE = """
_seen = {}


def rmsnorm(x, weight, eps=1e-6):
    key = (id(x), x.data_ptr(), tuple(x.shape))
    hit = _seen.get(key)  # campaign-lint: allow W2 -- planted by the test
    if hit is None:
        hit = _seen[key] = _rmsnorm(x, weight, eps)  # campaign-lint: allow W2 -- planted by the test
    return hit
"""

pytestmark = pytest.mark.slow  # a whole campaign in the interpreter: a few minutes on 2 cores


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def commit_round(root: Path, hypothesis: str, old: str, new: str, *flags: str) -> str:
    open_round(root, NAME, hypothesis)
    source = root / "rmsnorm.py"
    assert source.read_text().count(old) == 1
    source.write_text(source.read_text().replace(old, new))
    git(root, "commit", "-q", *flags, "-am", f"Hypothesis: {hypothesis}\nChange: rmsnorm.py")
    return git(root, "rev-parse", "HEAD").strip()


def test_rmsnorm_campaign_by_its_op_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "rmsnorm"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", "campaigns"))
    (root / "shapes.yaml").write_text(yaml.safe_dump(SHAPES, sort_keys=False))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "a Triton RMSNorm")
    monkeypatch.chdir(root)
    init(root, InitOptions(name=NAME, op_spec="rmsnorm_spec.py", shapes="shapes.yaml", pairs=2))
    prepare(root, NAME, install_hooks=False)
    base = baseline(root, NAME)
    spec = spec_info(spec_literals((EXAMPLE / "rmsnorm_spec.py").read_text(), "spec"), "spec")
    assert base.full.header == spec.header()
    assert base.full.header.startswith("label,M,N,eps,Check,Forward GB/s,Forward GB/s_stddev,Backward GB/s,")
    assert all(row.passed for row in base.full.rows)
    frozen = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/{C.OP_SPEC_FILE}")
    assert frozen == (EXAMPLE / "rmsnorm_spec.py").read_text()

    # Round 2: a tile of 8 rows per program; in the interpreter 8x fewer programs, each as costly.
    good = commit_round(
        root, "8-row tiles cut the programs 8x", "ROWS_PER_PROGRAM = 1 ", "ROWS_PER_PROGRAM = 8 "
    )
    result = validate(root, NAME)
    assert result.decision in ACCEPTED and result.ratio > 2.0, result
    assert result.transfer in ("ACCEPT-as-real", "ACCEPT-with-asterisk")

    # Round 3: an identity-keyed cache of the output, which the lint was told to allow.
    commit_round(
        root,
        "serve repeated inputs from a cache",
        "def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:",
        IDENTITY_CACHE
        + "\n\ndef _rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:",
    )
    result = validate(root, NAME)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_CHECK_FAILED]), result
    logs = [
        log.read_text() for log in (root / ".git" / "campaign" / "runs" / NAME).glob("round-3-*/**/*.log")
    ]
    assert any("new values in the same input tensors got the old result" in log for log in logs), logs

    # Round 4: the backward forgets the mean term of dx; committed past the hooks, the tests catch it.
    commit_round(
        root,
        "drop a reduction from the backward",
        "dx = (wdy - xhat * (tl.sum(xhat * wdy, axis=1) / N)[:, None]) * rstd[:, None]",
        "dx = wdy * rstd[:, None]",
        "--no-verify",
    )
    result = validate(root, NAME)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_TESTS_FAILED]), result
    assert git(root, "rev-parse", CampaignRef.main(NAME).branch).strip() == good

    final = report(root, NAME, force=True)
    assert final.ratio > 2.0
    text = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "gitcampaign's harness checks" in text and "identity-flip" in text
