"""End to end on the CPU: a round that cheats at run time passes the lint and is REJECTED by validate.

A scratch campaign on the real quick harness (copied by `prepare`, as a user gets it) over a
pure-torch `kernels/gemm.py`, so the interpreter costs nothing. Each round swaps in one planted
cheat from tests/cheats/harness_*.py.txt: the gates find nothing static, the harness's run-time
checks fail the candidate, and validate rejects it for `check_failed`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git  # noqa: E402

NAME = "cheats"
CHEATS = Path(__file__).resolve().parents[1] / "cheats"
HONEST = "def gemm(a, b):\n    return a @ b.T\n"
SHAPES = "- {label: s-32, M: 32, N: 24, K: 64}\n- {label: s-48, M: 48, N: 40, K: 32}\n"


@pytest.fixture
def campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("")
    (root / "kernels" / "gemm.py").write_text(HONEST)
    (root / "shapes.yaml").write_text(SHAPES)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "a torch gemm")
    monkeypatch.chdir(root)
    harness = f"campaigns/{NAME}/{C.HARNESS_FILE}"
    init(
        root,
        InitOptions(
            name=NAME,
            op="gemm",
            metric="step",
            shapes="shapes.yaml",
            test_command=f"{sys.executable} -c pass",
            quick_command=f"python {harness} --repeats 2",  # `prepare` copies the harness for this form
            probe_command="",
            kernel_source="kernels/gemm.py",
            pairs=1,
            max_iterations=5,
        ),
    )
    prepare(root, NAME, install_hooks=False)
    baseline(root, NAME)
    return root


@pytest.mark.slow
def test_runtime_cheats_pass_the_lint_and_are_rejected(campaign: Path) -> None:
    main_head = git(campaign, "rev-parse", CampaignRef.main(NAME).branch).strip()
    for fixture in (
        "harness_plain_tensor_lazy_output",
        "harness_reference_after_candidate_scavenger",
        "harness_timed_call_benchmark_detector",
    ):
        open_round(campaign, NAME, f"planted: {fixture}")
        (campaign / "kernels" / "gemm.py").write_text((CHEATS / f"{fixture}.py.txt").read_text())
        git(campaign, "commit", "-q", "-am", f"Hypothesis: {fixture}\nChange: planted")
        commit = git(campaign, "rev-parse", "HEAD").strip()
        result = validate(campaign, NAME)
        assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_CHECK_FAILED]), fixture
        verdict = list(yaml.safe_load_all(git(campaign, "notes", "--ref", C.NOTES_VERDICT, "show", commit)))[
            -1
        ]
        assert verdict["gates"]["static"] == [], f"{fixture}: the lint was meant to pass it"
        assert git(campaign, "rev-parse", CampaignRef.main(NAME).branch).strip() == main_head
