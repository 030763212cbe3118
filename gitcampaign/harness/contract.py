"""What the harness and the tool agree on: the op spec's declarations, the shape record, the CSV.

Standard library only at module level: `gitcampaign` reads the contract from here (the CSV header
of an op, its shape fields, the SNR thresholds) without importing torch, and reads a user's op spec
without running it (`spec_literals` evaluates only its literal assignments).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"
EXIT_OK, EXIT_FAILED, EXIT_NO_GPU, EXIT_USAGE = 0, 1, 2, 3
CLOCK_LOG_SUFFIX = ".clocks.json"  # beside --summary-csv: SM clock, power, temperature per timed window
# The backend that runs the vendor library's path: a kernel module's torch backend, or a spec's
# `vendor` function (gitcampaign's docs/op-spec.md).
VENDOR_BACKEND = "torch"

# Minimum SNR (dB) of a checked tensor by its dtype; a spec or a shape's min_snr_db may only raise
# them. float32 is checked at 60 dB (a relative error of 1e-3): fp32 accumulation lands far above it.
SNR_THRESHOLDS_DB = {
    "float8_e4m3fn": 25.0,
    "float8_e5m2": 20.0,
    "bfloat16": 40.0,
    "float16": 40.0,
    "float32": 60.0,
}

# Dense datasheet peaks (TFLOP/s for bf16/fp16 and fp8 tensor cores, GB/s of HBM), matched on the
# device name; the first entry whose words all occur in the name wins. A figure above one is a FAIL.
PEAKS: tuple[tuple[tuple[str, ...], dict[str, float]], ...] = (
    (("H200",), {"bf16": 989.0, "fp8": 1979.0, "hbm": 4800.0}),
    (("H100", "PCIe"), {"bf16": 756.0, "fp8": 1513.0, "hbm": 2000.0}),
    (("H100",), {"bf16": 989.0, "fp8": 1979.0, "hbm": 3350.0}),
)

# MoE token distributions over the experts of one rank (the `routing` field type); skewed loads
# are representative. The routing is the judge's: a round may edit kernels, not what it is measured on.
DISTRIBUTIONS = ("uniform", "top2_cf1.0", "top1_cf1.25", "hot_half", "empty_one")
SKEWED_DISTRIBUTIONS = ("top2_cf1.0", "top1_cf1.25", "hot_half", "empty_one")

UNITS = {"TFLOPS": 1e12, "GB/s": 1e9}  # metric = work per call / seconds / scale
PHASES = ("forward", "backward")
RULES = ("snr", "exact", "close")
FIELD_TYPES = ("int", "float", "str", "bool", "routing")
REFERENCE_DTYPES = ("float64", "input")
LABEL_RE = re.compile(r"[A-Za-z0-9_.+-]+")
NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
# Set on every shape of every op: tightens the SNR thresholds, never loosens them.
MIN_SNR_FIELD = "min_snr_db"


class UsageError(Exception):
    """A bad command line, shape file, op spec or placeholder: exit 3 with the message."""


# ---------------------------------------------------------------------------------------------
# The op spec's declarations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    """One shape field: its type, its default (None: required), whether it is a CSV column, the
    values it may take, and the least an integer may be."""

    name: str
    type: str
    default: object = None
    column: bool = True
    choices: tuple[object, ...] = ()
    minimum: int = 1


@dataclass(frozen=True)
class CheckSpec:
    """One correctness column: what it compares (outputs by name, or `INPUT.grad`), by which rule."""

    column: str
    of: tuple[str, ...]
    rule: str = "snr"
    min_db: float | str | None = (
        None  # snr: dB, or a dtype name of SNR_THRESHOLDS_DB; None: the tensor's dtype
    )
    atol: float = 0.0  # close: |out - ref| <= atol + rtol * |ref| everywhere
    rtol: float = 0.0

    @property
    def on_gradient(self) -> bool:
        return any(name.endswith(".grad") for name in self.of)


@dataclass(frozen=True)
class SpecInfo:
    """Everything an op spec declares as literals: all the tool ever reads of it."""

    name: str
    module: str
    fields: tuple[FieldSpec, ...]
    outputs: tuple[str, ...]
    checks: tuple[CheckSpec, ...]
    unit: str
    backward: bool = False
    metric: str = ""
    variants: tuple[str, ...] = ()
    backend_env: str | None = None
    dtype: tuple[tuple[str, str], ...] = (("cuda", "bfloat16"), ("cpu", "float16"))
    reference_dtype: str = "float64"
    peak: str = "bf16"
    kernel_source: str = ""
    tests: str = ""  # the op's focused tests, a pytest target (init's default test command)
    probe_shapes: tuple[Mapping[str, object], ...] = ()
    cuda_only_backends: tuple[str, ...] = ()

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(f"{self.name}_{variant}" for variant in self.variants) or (self.name,)

    def variant_of(self, op: str) -> str | None:
        """The variant an op name selects (None for an op without variants)."""
        if not self.variants:
            return None
        return op.removeprefix(f"{self.name}_")

    @property
    def phases(self) -> tuple[str, ...]:
        return PHASES if self.backward else PHASES[:1]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(field.name for field in self.fields if field.column)

    def header(self) -> str:
        """label, the shape columns, Check, per phase the metric and its _stddev, per phase its
        time, then the correctness columns (the handoff spec's order for GEMMs)."""
        metrics = [f"{phase.capitalize()} {self.unit}" for phase in self.phases]
        return ",".join(
            ["label", *self.columns, "Check"]
            + [name for metric in metrics for name in (metric, f"{metric}_stddev")]
            + [f"{phase.capitalize()} Time (ms)" for phase in self.phases]
            + [check.column for check in self.checks]
        )

    def dtype_for(self, device_type: str) -> str:
        return dict(self.dtype).get(device_type, dict(self.dtype)["cuda"])


def _fail(source: str, message: str) -> UsageError:
    return UsageError(f"{source}: {message} (see gitcampaign's docs/op-spec.md)")


def _text(value: object, what: str, source: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.fullmatch(value)):
        raise _fail(
            source, f"{what} must be a non-empty string" + (f" matching {pattern.pattern}" if pattern else "")
        )
    return value


def _strings(value: object, what: str, source: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) and item for item in value):
        raise _fail(source, f"{what} must be a list of names")
    return tuple(value)


def _field(name: object, declared: object, source: str) -> FieldSpec:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise _fail(source, f"FIELDS key {name!r} is not an identifier")
    if name in ("label", MIN_SNR_FIELD, "Check"):
        raise _fail(source, f"FIELDS may not declare {name!r}: the harness owns it")
    options = {"type": declared} if isinstance(declared, str) else declared
    if not isinstance(options, dict) or options.get("type") not in FIELD_TYPES:
        raise _fail(source, f"field {name!r}: type must be one of {', '.join(FIELD_TYPES)}")
    unknown = sorted(set(options) - {"type", "default", "column", "choices", "min"})
    if unknown:
        raise _fail(source, f"field {name!r}: unknown options {unknown}")
    kind = options["type"]
    choices = tuple(options.get("choices", DISTRIBUTIONS if kind == "routing" else ()))
    minimum = options.get("min", 1)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 0:
        raise _fail(source, f"field {name!r}: min must be a non-negative integer")
    field = FieldSpec(name, kind, options.get("default"), bool(options.get("column", True)), choices, minimum)
    if field.default is not None:
        field_value(field, field.default, f"{source}: field {name!r} default")
    return field


def _check(column: object, declared: object, source: str) -> CheckSpec:
    if not isinstance(column, str) or not LABEL_RE.fullmatch(column):
        raise _fail(source, f"CHECKS key {column!r} is not a CSV column name")
    if not isinstance(declared, dict) or "of" not in declared:
        raise _fail(source, f"check {column!r} needs 'of': the output (or INPUT.grad) it compares")
    unknown = sorted(set(declared) - {"of", "rule", "min_db", "atol", "rtol"})
    if unknown:
        raise _fail(source, f"check {column!r}: unknown options {unknown}")
    rule = declared.get("rule", "snr")
    if rule not in RULES:
        raise _fail(source, f"check {column!r}: rule must be one of {', '.join(RULES)}")
    min_db = declared.get("min_db")
    if isinstance(min_db, str) and min_db not in SNR_THRESHOLDS_DB:
        raise _fail(
            source,
            f"check {column!r}: min_db {min_db!r} is neither dB nor one of {', '.join(SNR_THRESHOLDS_DB)}",
        )
    numbers = {
        key: declared[key]
        for key in ("min_db", "atol", "rtol")
        if key in declared and not isinstance(declared[key], str)
    }
    for key, value in numbers.items():
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
        ):
            raise _fail(source, f"check {column!r}: {key} must be a non-negative number")
    if rule == "close" and not ("atol" in numbers or "rtol" in numbers):
        raise _fail(source, f"check {column!r}: rule 'close' needs atol and/or rtol")
    return CheckSpec(
        column,
        _strings(declared["of"], f"check {column!r}: of", source),
        rule,
        min_db if isinstance(min_db, str) else float(numbers["min_db"]) if "min_db" in numbers else None,
        float(numbers.get("atol", 0.0)),
        float(numbers.get("rtol", 0.0)),
    )


def spec_info(names: Mapping[str, Any], source: str) -> SpecInfo:
    """Validate an op spec's declarations (its module namespace, or its literals read by
    `spec_literals`); UsageError names the declaration and the fix."""
    for required in ("NAME", "MODULE", "FIELDS", "OUTPUTS", "CHECKS", "UNIT"):
        if required not in names:
            raise _fail(source, f"no {required} declared")
    fields_declared, checks_declared = names["FIELDS"], names["CHECKS"]
    if not isinstance(fields_declared, dict) or not fields_declared:
        raise _fail(source, "FIELDS must be a non-empty mapping of field name to type")
    if not isinstance(checks_declared, dict) or not checks_declared:
        raise _fail(
            source,
            "CHECKS must be a non-empty mapping of CSV column to rule: an op nobody checks measures nothing",
        )
    unit = names["UNIT"]
    if unit not in UNITS:
        raise _fail(source, f"UNIT must be one of {', '.join(UNITS)}")
    backward = names.get("BACKWARD", False)
    if not isinstance(backward, bool):
        raise _fail(source, "BACKWARD must be True or False")
    fields = tuple(_field(name, declared, source) for name, declared in fields_declared.items())
    outputs = _strings(names["OUTPUTS"], "OUTPUTS", source)
    checks = tuple(_check(column, declared, source) for column, declared in checks_declared.items())
    dtype = names.get("DTYPE", {"cuda": "bfloat16", "cpu": "float16"})
    if isinstance(dtype, str):
        dtype = {"cuda": dtype, "cpu": dtype}
    if (
        not isinstance(dtype, dict)
        or "cuda" not in dtype
        or not all(isinstance(value, str) for value in dtype.values())
    ):
        raise _fail(source, "DTYPE must be a dtype name or a mapping {'cuda': ..., 'cpu': ...}")
    columns = [field.name for field in fields if field.column]
    metric = names.get("METRIC", f"Forward {unit}")
    allowed = metrics_of(unit, backward, columns)
    if metric not in allowed:
        raise _fail(source, f"METRIC {metric!r} is not one its CSV gives ({', '.join(allowed)})")
    probe_shapes = names.get("PROBE_SHAPES", [])
    if not isinstance(probe_shapes, list) or not all(isinstance(entry, dict) for entry in probe_shapes):
        raise _fail(source, "PROBE_SHAPES must be a list of shape mappings")
    info = SpecInfo(
        name=_text(names["NAME"], "NAME", source, NAME_RE),
        module=_text(names["MODULE"], "MODULE", source, re.compile(r"[A-Za-z_][\w.]*")),
        fields=fields,
        outputs=outputs,
        checks=checks,
        unit=unit,
        backward=backward,
        metric=metric,
        variants=_strings(names.get("VARIANTS", ()), "VARIANTS", source),
        backend_env=names.get("BACKEND_ENV"),
        dtype=tuple(dtype.items()),
        reference_dtype=names.get("REFERENCE_DTYPE", "float64"),
        peak=names.get("PEAK", "bf16"),
        kernel_source=names.get("KERNEL_SOURCE", ""),
        tests=names.get("TESTS", ""),
        probe_shapes=tuple(probe_shapes),
        cuda_only_backends=_strings(names.get("CUDA_ONLY_BACKENDS", ()), "CUDA_ONLY_BACKENDS", source),
    )
    if info.reference_dtype not in REFERENCE_DTYPES:
        raise _fail(source, f"REFERENCE_DTYPE must be one of {', '.join(REFERENCE_DTYPES)}")
    if info.peak not in ("bf16", "fp8"):
        raise _fail(
            source, "PEAK must be 'bf16' or 'fp8' (the tensor-core peak a TFLOPS figure may not exceed)"
        )
    for text, what in (
        (info.backend_env, "BACKEND_ENV"),
        (info.kernel_source, "KERNEL_SOURCE"),
        (info.tests, "TESTS"),
    ):
        if text is not None and not isinstance(text, str):
            raise _fail(source, f"{what} must be a string")
    header = info.header().split(",")
    if len(set(header)) != len(header):
        raise _fail(source, "a shape field and a check column share a name: every CSV column needs its own")
    for check in info.checks:
        for name in check.of:
            if name.endswith(".grad") and not info.backward:
                raise _fail(source, f"check {check.column!r} compares {name}, but BACKWARD is not True")
            if not name.endswith(".grad") and name not in outputs:
                raise _fail(source, f"check {check.column!r} compares {name!r}, which is not in OUTPUTS")
        if check.rule != "exact" and len(check.of) != 1:
            raise _fail(source, f"check {check.column!r}: rule {check.rule!r} compares one tensor")
    for probe_shape in info.probe_shapes:
        parse_shapes([probe_shape], f"{source}: PROBE_SHAPES", info)
    return info


def metrics_of(unit: str, backward: bool, columns: list[str] | tuple[str, ...]) -> list[str]:
    """The primary metrics an op's CSV gives: its per-phase figures, and the derived
    Combined Step TFLOPS where it has both phases and M, N, K columns (the 6MNK formula)."""
    phases = PHASES if backward else PHASES[:1]
    metrics = [f"{phase.capitalize()} {unit}" for phase in phases]
    metrics = [metric for metric in metrics if metric in ("Forward TFLOPS", "Forward GB/s", "Backward GB/s")]
    if backward and unit == "TFLOPS" and {"M", "N", "K"} <= set(columns):
        metrics.append("Combined Step TFLOPS")
    return metrics


def spec_literals(text: str, source: str) -> dict[str, Any]:
    """The top-level `NAME = <literal>` assignments of an op spec's source, evaluated without
    running it (what the tool needs to know of a user's spec before any of it runs)."""
    try:
        tree = ast.parse(text, filename=source)
    except SyntaxError as exc:
        raise UsageError(f"{source} is not valid Python: {exc}") from exc
    literals: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        if target.isupper():
            try:
                literals[target] = ast.literal_eval(value)
            except ValueError as exc:
                raise _fail(source, f"{target} must be a literal (strings, numbers, lists, dicts)") from exc
    return literals


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------


class Shape(Mapping[str, object]):
    """One entry of a shape file: a label and its fields, in the file's order. Reads as a mapping
    (`shape["M"]`) and, for the names an op declares, as attributes (`shape.M`; None when absent)."""

    __slots__ = ("label", "_values")

    def __init__(self, label: str, values: Mapping[str, object] | None = None, **fields: object) -> None:
        self.label = label
        self._values = {
            **(values or {}),
            **{name: value for name, value in fields.items() if value is not None},
        }

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._values.get(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and (self.label, self._values) == (other.label, other._values)

    def __hash__(self) -> int:
        return hash((self.label, tuple(self._values.items())))

    def __repr__(self) -> str:
        return f"Shape({self.label!r}, {self._values!r})"

    def work(self) -> int:
        """A size proxy for ordering shapes: the product of the integer sizes."""
        sizes = [
            value for value in self._values.values() if isinstance(value, int) and not isinstance(value, bool)
        ]
        return math.prod(sizes)

    def to_dict(self) -> dict[str, object]:
        """The shape-file mapping: label first, then the fields in their order."""
        return {"label": self.label, **self._values}


def field_value(field: FieldSpec, value: object, where: str) -> object:
    """`value` checked against the field's type; UsageError names the place and the field."""
    kind = field.type
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool) and value >= field.minimum,
        "float": isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "routing": value in DISTRIBUTIONS,
    }[kind]
    if not ok:
        expected = {
            "int": "a positive integer" if field.minimum == 1 else f"an integer >= {field.minimum}",
            "float": "a finite number",
            "str": "a string",
            "bool": "true or false",
            "routing": f"one of {', '.join(DISTRIBUTIONS)}",
        }[kind]
        raise UsageError(f"{where}: {field.name} = {value!r} is not {expected}")
    if field.choices and value not in field.choices:
        raise UsageError(
            f"{where}: {field.name} = {value!r} is not one of {', '.join(map(str, field.choices))}"
        )
    return float(value) if kind == "float" else value  # type: ignore[arg-type]


def parse_shapes(data: object, source: str, info: SpecInfo | None = None) -> list[Shape]:
    """The shape list as records, checked as every reader checks it: a list of mappings with a
    unique label a CSV cell can carry, and a numeric min_snr_db. With the op's declarations, every
    field is one it declares, of its type, and the required ones are there (defaults filled in);
    without them (the tool, for any op), scalar values only. UsageError names the entry and field."""
    if not isinstance(data, list) or not data:
        raise UsageError(f"{source}: expected a non-empty YAML list of shapes")
    declared = {field.name: field for field in info.fields} if info is not None else None
    shapes: list[Shape] = []
    for index, entry in enumerate(data):
        where = f"{source}: shape #{index + 1}"
        if not isinstance(entry, dict):
            raise UsageError(f"{where} is not a mapping")
        if entry.get("label") is None:
            raise UsageError(f"{where} has no 'label'")
        label = str(entry["label"])
        if not LABEL_RE.fullmatch(label):
            raise UsageError(f"{where}: label {label!r} has characters a CSV cell cannot carry")
        where = f"{source}: shape {label!r}"
        values: dict[str, object] = {}
        min_snr = entry.get(MIN_SNR_FIELD)
        if min_snr is not None and (
            not isinstance(min_snr, (int, float)) or isinstance(min_snr, bool) or not math.isfinite(min_snr)
        ):
            raise UsageError(f"{where}: {MIN_SNR_FIELD} = {min_snr!r} is not a number")
        given = {name: value for name, value in entry.items() if name not in ("label", MIN_SNR_FIELD)}
        if declared is None:
            for name, value in given.items():
                if not isinstance(name, str) or not isinstance(value, (int, float, str, bool)):
                    raise UsageError(f"{where}: field {name!r} must hold a number, a string or a boolean")
                if (
                    isinstance(value, int)
                    and not isinstance(value, bool)
                    and value < 1
                    and name != "min_snr_db"
                ):
                    raise UsageError(f"{where}: {name} = {value!r} is not a positive integer")
            values.update(given)
        else:
            assert info is not None
            unknown = sorted(set(given) - set(declared))
            if unknown:
                raise UsageError(
                    f"{where} has fields {unknown} that op {info.name} does not declare; it takes "
                    f"{', '.join(declared)} (and label, {MIN_SNR_FIELD})"
                )
            for name, field in declared.items():
                if name not in given and field.default is None:
                    raise UsageError(f"{where} has no {name!r}, which op {info.name} needs")
                values[name] = field_value(field, given.get(name, field.default), where)
        if min_snr is not None:
            if min_snr < min(SNR_THRESHOLDS_DB.values()):
                raise UsageError(f"{where}: {MIN_SNR_FIELD} may only tighten the default thresholds")
            if info is not None and not any(check.rule == "snr" for check in info.checks):
                raise UsageError(
                    f"{where}: {MIN_SNR_FIELD} does not apply to op {info.name}, which has no SNR check"
                )
            values[MIN_SNR_FIELD] = float(min_snr)
        shapes.append(Shape(label, values))
    labels = [shape.label for shape in shapes]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise UsageError(f"{source}: duplicate labels {duplicated}")
    return shapes


# ---------------------------------------------------------------------------------------------
# CSV cells
# ---------------------------------------------------------------------------------------------


def format_cell(value: object) -> str:
    """Six significant digits keep sub-percent differences visible; NaN/inf as `nan`/`inf`."""
    if isinstance(value, float):
        return format(value, ".6g")
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def csv_line(cells: list[object]) -> str:
    return ",".join(format_cell(value) for value in cells) + "\n"
