"""Names the tests, hooks and users depend on (docs/design.md): refs, notes, files, CSV headers."""

from __future__ import annotations

# The harness owns its contract (docs/harness.md) and is read here, never copied: from the shipped
# ops' specs, their CSV headers (byte for byte; any drift stops a command), read without torch.
from gitcampaign.harness.ops import registry

GEMM_HEADER = registry()["gemm"][1].header()  # the handoff spec's GEMM-class schema
QUANT_HEADER = registry()["quantize_fp8_rowwise"][1].header()

CAMPAIGNS_DIR = "campaigns"


def campaign_dir(campaign: str) -> str:
    """The campaign's folder in the repository (its manifest, frozen harness and report)."""
    return f"{CAMPAIGNS_DIR}/{campaign}"


MANIFEST_FILE = "manifest.yaml"
BUNDLE_FILE = "lineage.bundle"  # the campaign's lineage as `export` writes it by default
HARNESS_FILE = "quick_test_bench.py"  # the frozen harness (and training probe) of a campaign
OP_SPEC_FILE = "op_spec.py"  # the op spec the frozen harness measures, beside it
SHAPES_FILE = "shapes.yaml"  # init's copy of a --shapes file, for the benchmark command
REPORT_FILE = "REPORT.md"
REPORT_PLOT_FILE = "REPORT.svg"

NOTES_BENCH = "refs/notes/campaign/bench"
NOTES_FULL = "refs/notes/campaign/full"
NOTES_VERDICT = "refs/notes/campaign/verdict"
# `calibrate` appends here (on the accepted head): harness vs an outside clock, with the environment.
NOTES_ENVIRONMENT = "refs/notes/campaign/environment"
# `analyze` appends here (on the analysed commit): per-kernel profile, roofline shares, the bound.
NOTES_PROFILE = "refs/notes/campaign/profile"
NOTES_GLOB = "refs/notes/campaign/*"

# The two sides of a measurement: their worktrees, and the keys of a verdict's `build` and
# `aggregate` and of its paired samples.
INCUMBENT = "incumbent"
CANDIDATE = "candidate"


CHECK_PASS = "PASS"
CHECK_FAIL = "FAIL"
CHECK_ERROR = "ERROR"

METRIC_FORWARD = "Forward TFLOPS"
METRIC_STEP = "Combined Step TFLOPS"
METRIC_GBS = "Forward GB/s"
METRIC_BWD_GBS = "Backward GB/s"
METRIC_ALIASES = {
    "forward": METRIC_FORWARD,
    "step": METRIC_STEP,
    "gbs": METRIC_GBS,
    "bwd-gbs": METRIC_BWD_GBS,
}

REASON_CHECK_FAILED = "check_failed"
REASON_STATIC_CHECK = "static_check"
REASON_HARNESS_CHANGED = "harness_changed"
REASON_SHAPE_REGRESSION = "shape_regression"
REASON_NOT_FASTER = "not_faster"
REASON_WITHIN_NOISE = "within_noise"
REASON_OVERFIT = "overfit"  # the gain does not transfer to the training-step probe
REASON_MANUAL = "manual_override"
REASON_BUILD_FAILED = "build_failed"
REASON_TESTS_FAILED = "tests_failed"
REASON_SUPERSEDED = "superseded"  # accepted here while a teammate accepted another round on the same head
REASON_OUTRUN = (
    "outrun"  # a heat's candidate that another measured faster in the screen (docs/design.md, Heats)
)

# Where a campaign measures: a checkout of the whole commit, or a minimal copy of its workspace paths.
EXECUTION_REPO = "repo"
EXECUTION_WORKSPACE = "workspace"
