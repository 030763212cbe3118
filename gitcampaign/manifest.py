"""The campaign manifest (`campaigns/NAME/manifest.yaml`, docs/design.md).

The loop's fields, all present, plus what BASELINE freezes: the CSV header and its sha256, the
protected paths with their sha256, the noise floor and the representative shapes.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import yaml

from gitcampaign import constants as C
from gitcampaign import safe_yaml
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.shapes import Shape, shapes_from_data

MANIFEST_FORMAT = 1


@dataclass
class NoiseFloor:
    """Half-width of the A/A ratio interval measured at BASELINE, as a fraction (0.01 = 1%)."""

    aggregate: float
    shapes: dict[str, float]


@dataclass
class Manifest:
    name: str
    target_op: str
    target_backend: str
    target_lang: str
    target_gpu: str
    execution_mode: str
    project_skill: str
    performance_target: dict[str, float]
    primary_metric: str
    target_shapes: list[dict[str, Any]]
    kernel_source: str
    test_command: str
    benchmark_command: str
    quick_command: str
    probe_command: str
    representative_shapes: list[str]
    git_commit: str
    git_branch: str
    max_iterations: int
    created: str
    min_gain: float = 0.01
    pairs: int = 3
    harness_timeout_s: int = 1800
    # Optional, so campaigns written before them still read: build each measured tree, and the
    # acceptance suite REPORT runs; in workspace mode, the paths the minimal copy holds.
    build_command: str = ""
    acceptance_command: str = ""
    workspace: list[str] = field(default_factory=list)
    csv_header: str | None = None
    csv_header_sha256: str | None = None
    protected_paths: dict[str, str | None] = field(default_factory=dict)
    noise_floor: NoiseFloor | None = None
    executor: dict[str, Any] | None = None  # where the harness runs (gitcampaign.executor)
    op_spec: str = ""  # a user's op spec (its repository path) that prepare freezes beside the harness
    format: int = MANIFEST_FORMAT

    @property
    def path(self) -> str:
        return f"{C.campaign_dir(self.name)}/{C.MANIFEST_FILE}"

    def shapes(self) -> list[Shape]:
        return shapes_from_data(self.target_shapes, f"{self.path}: target_shapes")

    @property
    def harness_file(self) -> str | None:
        """The tool's own harness, copied into the campaign, where `quick_command` runs it; None for a
        project's own `--quick-command` harness."""
        builtin = f"{C.campaign_dir(self.name)}/{C.HARNESS_FILE}"
        return builtin if self.quick_command.split()[:2] == ["python", builtin] else None

    def header_hint(self) -> str:
        """How to get the CSV header the baseline froze back, for this campaign's harness."""
        main = CampaignRef.main(self.name).branch
        if self.harness_file:
            return (
                f"restore the harness (`git checkout {main} -- {self.harness_file}`); the schema never"
                " changes within a campaign"
            )
        return (
            f"the CSV comes from the campaign's own harness, `{self.quick_command}`: make it write the"
            f" header the baseline froze again (its files as on {main}); the schema never changes within"
            " a campaign"
        )

    def representative(self) -> list[Shape]:
        by_label = {shape.label: shape for shape in self.shapes()}
        return [by_label[label] for label in self.representative_shapes]

    def to_yaml(self) -> bytes:
        return yaml.safe_dump(asdict(self), sort_keys=False, width=120).encode()


def sha256_bytes(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "target_op": str,
    "target_backend": str,
    "target_lang": str,
    "target_gpu": str,
    "execution_mode": str,
    "project_skill": str,
    "performance_target": dict,
    "primary_metric": str,
    "target_shapes": list,
    "kernel_source": str,
    "test_command": str,
    "benchmark_command": str,
    "quick_command": str,
    "probe_command": str,
    "representative_shapes": list,
    "git_commit": str,
    "git_branch": str,
    "max_iterations": int,
    "created": str,
    "min_gain": (int, float),
    "pairs": int,
    "harness_timeout_s": int,
    "build_command": str,
    "acceptance_command": str,
    "workspace": list,
    "csv_header": (str, type(None)),
    "csv_header_sha256": (str, type(None)),
    "protected_paths": dict,
    "noise_floor": (dict, type(None)),
    "executor": (dict, type(None)),
    "op_spec": str,
    "format": int,
}


# What a hand edit may set: a harness process, pairs and iterations a person could wait for.
BOUNDS: dict[str, tuple[float, float]] = {
    "pairs": (1, 50),
    "max_iterations": (1, 10_000),
    "harness_timeout_s": (1, 7 * 24 * 3600),
    "min_gain": (0.0, 1.0),
}
# The shell commands a campaign runs: frozen at BASELINE, and run only once this clone approved them
# (gitcampaign/trust.py).
COMMAND_FIELDS = (
    "build_command",
    "test_command",
    "quick_command",
    "probe_command",
    "benchmark_command",
    "acceptance_command",
)
# performance_target: what T1 (speedup, value) and T2 (efficiency of peak) compare against.
TARGET_KEYS = ("speedup", "value", "efficiency", "peak")


def check_pairs(pairs: int | None) -> None:
    """Interleaved pairs asked for on the command line or by the MCP tool (None: the manifest's)."""
    low, high = BOUNDS["pairs"]
    if pairs is not None and (isinstance(pairs, bool) or not low <= pairs <= high):
        raise CampaignError(
            f"pairs = {pairs!r} is outside [{low:g}, {high:g}]",
            f"pass --pairs from {low:g} to {high:g} (the MCP validate tool's pairs likewise), or leave it"
            " out for the manifest's",
        )


def check_target(target: dict[str, Any], source: str, hint: str) -> None:
    """Known keys, positive finite numbers, an efficiency (a fraction) with the peak it is of."""
    unknown = sorted(str(key) for key in target if key not in TARGET_KEYS)
    if unknown:
        raise CampaignError(
            f"{source}: performance_target: unknown key(s) {', '.join(unknown)} (known: {', '.join(TARGET_KEYS)})",
            hint,
        )
    for key, value in target.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CampaignError(
                f"{source}: performance_target: {key} is {type(value).__name__}, expected a number", hint
            )
        if not 0 < value < float("inf"):
            raise CampaignError(
                f"{source}: performance_target: {key} = {value!r} must be a finite number above 0", hint
            )
    # efficiency with peak: of the aggregate; alone: every shape of its own limit (the ceilings)
    if target.get("efficiency", 0) > 1:
        raise CampaignError(
            f"{source}: performance_target: efficiency = {target['efficiency']!r} is outside (0, 1]", hint
        )


# Fixed at BASELINE: every later decision is measured and compared against these. The commands are
# among them: a commit on the accepted line that sets `test_command: 'true'` would let the next
# broken round through.
FROZEN = (
    "name",
    "target_op",
    "primary_metric",
    "target_shapes",
    "representative_shapes",
    "csv_header",
    "csv_header_sha256",
    "protected_paths",
    "noise_floor",
    *COMMAND_FIELDS,
)


def frozen_changes(baseline: Manifest, current: Manifest) -> list[str]:
    """The frozen fields that differ from the manifest the baseline committed."""
    return [name for name in FROZEN if getattr(baseline, name) != getattr(current, name)]


def parse_manifest(text: bytes | str, source: str) -> Manifest:
    """Parse and validate; every error names the field and how to fix it."""
    hint = f"fix {source} by hand, or restore it with `git checkout -- {source}`"
    try:
        data = safe_yaml.load(text)  # a pulled or imported manifest is data from anyone
    except safe_yaml.UnsafeYAML as exc:
        raise CampaignError(f"{source} is not read: {exc}", hint) from exc
    if not isinstance(data, dict):
        raise CampaignError(f"{source} is not a YAML mapping", hint)
    names = {f.name for f in fields(Manifest)}
    missing = [name for name in _TYPES if name not in data and _required(name)]
    if missing:
        raise CampaignError(f"{source}: missing field(s) {', '.join(missing)}", hint)
    unknown = sorted(set(data) - names)
    if unknown:
        raise CampaignError(f"{source}: unknown field(s) {', '.join(unknown)}", hint)
    for name, expected in _TYPES.items():
        if name in data and (not isinstance(data[name], expected) or isinstance(data[name], bool)):
            raise CampaignError(
                f"{source}: field {name!r} is {type(data[name]).__name__}, expected {_type_name(expected)}",
                hint,
            )
    if data["format"] != MANIFEST_FORMAT:
        raise CampaignError(
            f"{source}: format {data['format']} is not {MANIFEST_FORMAT}", "upgrade gitcampaign"
        )
    if data["primary_metric"] not in (C.METRIC_FORWARD, C.METRIC_STEP, C.METRIC_GBS, C.METRIC_BWD_GBS):
        raise CampaignError(f"{source}: primary_metric {data['primary_metric']!r} is unknown", hint)
    if data["execution_mode"] not in (C.EXECUTION_REPO, C.EXECUTION_WORKSPACE):
        raise CampaignError(
            f"{source}: execution_mode {data['execution_mode']!r} is not repo or workspace", hint
        )
    if not all(isinstance(path, str) and path for path in data.get("workspace", [])):
        raise CampaignError(f"{source}: workspace must be a list of repository paths", hint)
    if (data["execution_mode"] == C.EXECUTION_WORKSPACE) != bool(data.get("workspace")):
        raise CampaignError(
            f"{source}: workspace paths are given exactly when execution_mode is workspace", hint
        )
    check_target(data["performance_target"], source, hint)
    for name, (low, high) in BOUNDS.items():
        value = data.get(name)
        if value is not None and not low <= value <= high:
            raise CampaignError(f"{source}: {name} = {value!r} is outside [{low}, {high}]", hint)
    header, digest = data.get("csv_header"), data.get("csv_header_sha256")
    if (header is None) != (digest is None) or (
        header is not None and sha256_bytes(header.encode()) != digest
    ):
        raise CampaignError(
            f"{source}: csv_header does not match csv_header_sha256 (the header frozen at BASELINE was edited)",
            hint,
        )
    noise = data.get("noise_floor")
    if noise is not None:
        if not isinstance(noise.get("aggregate"), (int, float)) or not isinstance(noise.get("shapes"), dict):
            raise CampaignError(f"{source}: noise_floor needs aggregate (number) and shapes (mapping)", hint)
        data["noise_floor"] = NoiseFloor(float(noise["aggregate"]), dict(noise["shapes"]))
    manifest = Manifest(**data)
    labels = {shape.label for shape in manifest.shapes()}
    stray = [label for label in manifest.representative_shapes if label not in labels]
    if stray:
        raise CampaignError(f"{source}: representative_shapes {stray} are not in target_shapes", hint)
    return manifest


def _required(name: str) -> bool:
    return name not in (
        "min_gain",
        "pairs",
        "harness_timeout_s",
        "build_command",
        "acceptance_command",
        "workspace",
        "csv_header",
        "csv_header_sha256",
        "protected_paths",
        "noise_floor",
        "executor",
        "op_spec",
        "format",
    )


def _type_name(expected: type | tuple[type, ...]) -> str:
    kinds = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join("null" if kind is type(None) else kind.__name__ for kind in kinds)


def normalise_metric(text: str) -> str:
    """The handoff spec's metric names (case-insensitive) or their short aliases."""
    lowered = text.strip().lower()
    if lowered in C.METRIC_ALIASES:
        return C.METRIC_ALIASES[lowered]
    for metric in C.METRIC_ALIASES.values():
        if metric.lower() == lowered:
            return metric
    names = ", ".join(f'"{m}"' for m in C.METRIC_ALIASES.values())
    raise CampaignError(f"unknown metric {text!r}", f"use one of {names} or {', '.join(C.METRIC_ALIASES)}")
