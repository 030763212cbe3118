"""`init --op-spec` and the shipped ops' specs at DEFINE_TARGET (issue 35): what the spec sets in
the manifest, and the errors that name the real cause (a missing field, a metric the CSV does not
give, a spec not committed) before anything runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from gitcampaign import constants as C
from gitcampaign.campaign import opened
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.prepare import prepare
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.results import require_metric

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rmsnorm"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "rms"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    monkeypatch.chdir(root)
    return root


def test_the_spec_fills_the_manifest_and_prepare_freezes_it_beside_the_harness(project: Path) -> None:
    init(project, InitOptions(name="rms", op_spec="rmsnorm_spec.py", shapes="shapes.yaml"))
    manifest = opened(project, "rms").manifest()
    assert (manifest.target_op, manifest.op_spec, manifest.kernel_source) == (
        "rmsnorm",
        "rmsnorm_spec.py",
        "rmsnorm.py",
    )
    assert manifest.primary_metric == "Forward GB/s" and "test_rmsnorm.py" in manifest.test_command
    assert manifest.quick_command == "python campaigns/rms/quick_test_bench.py"
    assert manifest.probe_command == "python campaigns/rms/quick_test_bench.py --train-probe"
    assert set(manifest.protected_paths) >= {"campaigns/rms/quick_test_bench.py", "campaigns/rms/op_spec.py"}
    assert manifest.target_shapes[0] == {"label": "rows-64", "M": 64, "N": 512, "eps": 1e-6}  # default filled
    prepare(project, "rms", install_hooks=False)
    spec = git(project, "show", f"{CampaignRef.main('rms').branch}:campaigns/rms/{C.OP_SPEC_FILE}")
    assert spec == (EXAMPLE / "rmsnorm_spec.py").read_text()
    harness = git(project, "show", f"{CampaignRef.main('rms').branch}:campaigns/rms/{C.HARNESS_FILE}")
    assert 'OP = "rmsnorm"' in harness and "import gitcampaign" not in harness


@pytest.mark.parametrize(
    ("options", "setup", "message", "hint"),
    [
        ({"shapes": "bad.yaml"}, "- {label: a, M: 8}\n", "has no 'N', which op rmsnorm needs", "M, N, eps"),
        (
            {"shapes": "bad.yaml"},
            "- {label: a, M: 8, N: 8, K: 8}\n",
            "that op rmsnorm does not declare",
            "M, N, eps",
        ),
        ({"metric": "step"}, None, "metric 'Combined Step TFLOPS' does not fit op 'rmsnorm'", "Forward GB/s"),
        ({"op_spec": "nowhere.py"}, None, "no such file committed at HEAD", "commit the op spec"),
        ({"op": "layernorm"}, None, "declares rmsnorm, not 'layernorm'", "--op with one of rmsnorm"),
    ],
)
def test_bad_input_names_the_cause_and_the_fix(
    project: Path, options: dict[str, str], setup: str | None, message: str, hint: str
) -> None:
    if setup is not None:
        (project / "bad.yaml").write_text(setup)
    given = {"name": "rms", "op_spec": "rmsnorm_spec.py", "shapes": "shapes.yaml", **options}
    with pytest.raises(CampaignError) as raised:
        init(project, InitOptions(**given))  # type: ignore[arg-type]
    assert message in str(raised.value) and hint in raised.value.hint
    assert git(project, "branch", "--list", "campaign/*") == ""  # nothing was created


def test_a_broken_spec_is_refused_with_its_declaration(project: Path) -> None:
    spec = project / "rmsnorm_spec.py"
    spec.write_text(spec.read_text().replace('UNIT = "GB/s"', 'UNIT = "GB per s"'))
    git(project, "commit", "-qam", "typo")
    with pytest.raises(CampaignError, match="UNIT must be one of") as raised:
        init(project, InitOptions(name="rms", op_spec="rmsnorm_spec.py", shapes="shapes.yaml"))
    assert "docs/op-spec.md" in raised.value.hint


def test_a_metric_the_csv_lacks_is_named_at_baseline() -> None:
    """A user's own harness and the default metric: the real cause, not "no shape passes Check"."""
    header = "label,M,N,Check,Forward GB/s,Forward GB/s_stddev,Forward Time (ms),out_snr"
    require_metric(header, "Forward GB/s", "baseline")
    with pytest.raises(CampaignError, match="has no 'Forward TFLOPS' column") as raised:
        require_metric(header, "Forward TFLOPS", "baseline")
    assert "--metric" in raised.value.hint and "'Forward GB/s'" in raised.value.hint
    with pytest.raises(CampaignError, match="'K'"):
        require_metric(header, "Combined Step TFLOPS", "baseline")


def test_a_shipped_op_needs_its_kernel_in_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("no kernels here\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    monkeypatch.chdir(root)
    with pytest.raises(CampaignError, match=r"kernels/gemm.py\), which this repository does not have"):
        init(root, InitOptions(name="g", op="gemm"))
