"""Target shapes: model presets and the YAML shape-file format shared by `init` and the harness.

A shape file is a YAML list of mappings: a `label` and the fields the op's spec declares. For the
shipped ops: `M`, `N`, `K` for GEMMs; grouped ops add `B` (groups, the experts on one EP rank) and
`dist` (how tokens spread over them); quantisation ops use `M`, `K`. For GEMM-class ops `M` is the
total number of rows (summed over groups), so FLOPs = 2·M·N·K.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from gitcampaign.errors import CampaignError

# The harness owns the shape record and the MoE routing distributions (docs/harness.md); the
# presets build its Shape and the tool only names the distributions.
from gitcampaign.harness.contract import (
    DISTRIBUTIONS,
    SKEWED_DISTRIBUTIONS,
    Shape,
    SpecInfo,
    UsageError,
    parse_shapes,
)

__all__ = ["DISTRIBUTIONS", "SKEWED_DISTRIBUTIONS", "Shape", "dump_shapes", "load_shapes", "preset"]


@dataclass(frozen=True)
class _Dense:
    seq: int
    hidden: int
    linears: tuple[tuple[str, int, int], ...]  # (name, N, K) in nn.Linear layout


def _llama_like(seq: int, hidden: int, heads: int, kv_heads: int, head_dim: int, ffn: int) -> _Dense:
    return _Dense(
        seq,
        hidden,
        (
            ("qkv", (heads + 2 * kv_heads) * head_dim, hidden),
            ("o", hidden, heads * head_dim),
            ("gate_up", 2 * ffn, hidden),
            ("down", hidden, ffn),
        ),
    )


_DENSE_MODELS = {
    "llama3.1-8b": _llama_like(8192, 4096, 32, 8, 128, 14336),
    "llama3.1-70b": _llama_like(8192, 8192, 64, 8, 128, 28672),
    "qwen2.5-7b": _llama_like(4096, 3584, 28, 4, 128, 18944),
    "qwen2.5-72b": _llama_like(4096, 8192, 64, 8, 128, 29568),
    "mistral-7b": _llama_like(4096, 4096, 32, 8, 128, 14336),
    # DeepSeek-V3's dense layers: MLA projections and the dense MLP of its first three layers.
    "deepseek-v3-dense": _Dense(
        4096,
        7168,
        (
            ("q_a", 1536, 7168),
            ("kv_a", 576, 7168),
            ("q_b", 24576, 1536),
            ("kv_b", 32768, 512),
            ("o", 7168, 16384),
            ("gate_up", 36864, 7168),
            ("down", 7168, 18432),
        ),
    ),
}


@dataclass(frozen=True)
class _Moe:
    seq: int
    top_k: int
    experts_per_rank: int
    hidden: int
    expert_ffn: int


_MOE_MODELS = {
    "deepseek-v3-moe": _Moe(4096, 8, 32, 7168, 2048),  # 256 experts over EP=8
    "qwen3-30b-a3b": _Moe(4096, 8, 16, 2048, 768),  # 128 experts over EP=8
    "qwen3-235b-a22b": _Moe(4096, 8, 16, 4096, 1536),  # 128 experts over EP=8
    "mixtral-8x7b": _Moe(4096, 2, 8, 4096, 14336),  # 8 experts, no EP
}

_MBS = (1, 2, 4)

# Small shapes for the CPU (Triton's interpreter runs about 1 GFLOP/s): odd sizes on purpose.
_TINY_GEMM = [
    Shape("tiny-256", M=256, N=256, K=256),
    Shape("tiny-odd", M=129, N=200, K=96),
    Shape("tiny-wide", M=64, N=384, K=128),
    Shape("tiny-deep", M=128, N=128, K=384),
    Shape("tiny-row", M=1, N=256, K=192),
]
_TINY_GROUPED = [
    Shape("tiny-uniform", M=256, N=128, K=128, B=4, dist="uniform"),
    Shape("tiny-hot", M=256, N=128, K=128, B=4, dist="hot_half"),
    Shape("tiny-empty", M=200, N=96, K=128, B=4, dist="empty_one"),
    Shape("tiny-top1", M=192, N=128, K=64, B=4, dist="top1_cf1.25"),
]
_TINY_QUANT = [
    Shape("tiny-q-256", M=256, K=512),
    Shape("tiny-q-odd", M=77, K=384),
    Shape("tiny-q-row", M=1, K=1024),
    Shape("tiny-q-tall", M=512, K=256),
]


def _dense_preset(model: str, mbs_list: tuple[int, ...]) -> list[Shape]:
    spec = _DENSE_MODELS[model]
    return [
        Shape(f"{model}-{name}-mbs{mbs}", M=spec.seq * mbs, N=n, K=k)
        for mbs in mbs_list
        for name, n, k in spec.linears
    ]


def _moe_preset(model: str, mbs_list: tuple[int, ...]) -> list[Shape]:
    spec = _MOE_MODELS[model]
    linears = (("gate_up", 2 * spec.expert_ffn, spec.hidden), ("down", spec.hidden, spec.expert_ffn))
    return [
        Shape(
            f"{model}-{name}-mbs{mbs}-{dist}",
            M=spec.seq * mbs * spec.top_k,
            N=n,
            K=k,
            B=spec.experts_per_rank,
            dist=dist,
        )
        for mbs in mbs_list
        for name, n, k in linears
        for dist in DISTRIBUTIONS
    ]


def _quant_preset(model: str, mbs_list: tuple[int, ...]) -> list[Shape]:
    spec = _DENSE_MODELS[model]
    widths = sorted({k for _, _, k in spec.linears})
    return [Shape(f"{model}-act{k}-mbs{mbs}", M=spec.seq * mbs, K=k) for mbs in mbs_list for k in widths]


def preset_names() -> list[str]:
    names = ["tiny", "tiny-grouped", "tiny-quant"]
    names += sorted(_DENSE_MODELS) + sorted(_MOE_MODELS) + [f"{m}-quant" for m in sorted(_DENSE_MODELS)]
    return names


def preset(spec: str) -> list[Shape]:
    """A preset by name; `NAME:mbs=1` (or `mbs=1,2`) keeps only those micro-batch sizes. Several
    presets join with commas (`llama3.1-8b:mbs=1,llama3.1-70b:mbs=1`): a bare number after a comma
    continues the micro-batch list before it."""
    parts: list[str] = []
    for item in spec.split(","):
        if item.strip().isdigit() and parts:
            parts[-1] += "," + item.strip()
        else:
            parts.append(item.strip())
    if len(parts) == 1:
        return _one_preset(parts[0])
    shapes = [shape for part in parts for shape in _one_preset(part)]
    labels = [shape.label for shape in shapes]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise CampaignError(
            f"shape presets {spec!r} name {', '.join(repeated)} more than once",
            "list each preset (and micro-batch size) once",
        )
    return shapes


def _one_preset(spec: str) -> list[Shape]:
    name, _, option = spec.partition(":")
    mbs_list: tuple[int, ...] = _MBS
    if option:
        match = re.fullmatch(r"mbs=(\d+(?:,\d+)*)", option)
        if not match:
            raise CampaignError(
                f"shape preset option {option!r} is not understood", "write it as NAME:mbs=1,2"
            )
        mbs_list = tuple(int(part) for part in match.group(1).split(","))
    if name == "tiny":
        return list(_TINY_GEMM)
    if name == "tiny-grouped":
        return list(_TINY_GROUPED)
    if name == "tiny-quant":
        return list(_TINY_QUANT)
    if name in _DENSE_MODELS:
        return _dense_preset(name, mbs_list)
    if name in _MOE_MODELS:
        return _moe_preset(name, mbs_list)
    if name.endswith("-quant") and name[: -len("-quant")] in _DENSE_MODELS:
        return _quant_preset(name[: -len("-quant")], mbs_list)
    raise CampaignError(
        f"{spec!r} is neither a shape preset nor a YAML file",
        f"use one of {', '.join(preset_names())}, or a path to a YAML list of shapes (docs/op-spec.md, Shapes)",
    )


def shapes_from_data(data: object, source: str, info: SpecInfo | None = None) -> list[Shape]:
    """Validate a parsed shape list as the harness does (its `parse_shapes`): with the op's spec,
    every field it declares, of its type (defaults filled in); without one (a user's own harness),
    a label and scalar fields, integer sizes of at least 1 (a shape with no work has no time and no
    throughput; an empty expert is a group of 0 rows inside B, not a shape of M = 0)."""
    try:
        return parse_shapes(data, source, info)
    except UsageError as exc:
        fields = (
            ", ".join(["label", *(field.name for field in info.fields)])
            if info
            else "label and your harness's fields"
        )
        raise CampaignError(
            str(exc),
            f"fix the shape list: a YAML list of mappings with {fields} (docs/op-spec.md, Shapes)",
        ) from exc


def is_shape_file(spec: str) -> bool:
    """Whether `spec` names a YAML shape file rather than a preset."""
    path = Path(spec)
    return path.suffix in (".yaml", ".yml") or path.exists()


def load_shapes(spec: str, info: SpecInfo | None = None) -> list[Shape]:
    """`spec` is a preset name or a path to a YAML shape file; checked against the op's fields."""
    path = Path(spec)
    if is_shape_file(spec):
        if not path.is_file():
            raise CampaignError(
                f"shape file {spec} does not exist", "pass a preset name or an existing YAML file"
            )
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise CampaignError(f"shape file {spec} is not valid YAML: {exc}", "fix the YAML syntax") from exc
        shapes = shapes_from_data(data, spec, info)
    else:
        shapes = preset(spec)
        shapes = (
            shapes if info is None else shapes_from_data([shape.to_dict() for shape in shapes], spec, info)
        )
    for shape in shapes:
        _require_fit(shape, spec)
    return shapes


# No single GPU holds half a TiB (the largest hold 192-288 GB); a shape whose operands alone need
# more can only ever be an ERROR row.
MAX_SHAPE_BYTES = 512 * 2**30


def _require_fit(shape: Shape, source: str) -> None:
    """Refuse a GEMM-family shape (M and K sizes: the shipped ops') whose operands and output need
    more memory than any GPU has, counted at two bytes an element (bf16; the harness's references
    and gradients need several times more). Other ops' fields mean what their specs say."""
    if not isinstance(shape.M, int) or not isinstance(shape.K, int):
        return
    n, groups = shape.N or 0, shape.B or 1
    elements = shape.M * shape.K + groups * n * shape.K + shape.M * (n or shape.K)
    if 2 * elements > MAX_SHAPE_BYTES:
        raise CampaignError(
            f"{source}: shape {shape.label} needs at least {2 * elements / 1e9:.0f} GB for its operands and"
            f" output alone (M={shape.M}, N={shape.N}, K={shape.K}), more than any GPU holds: every run of it"
            " would be an ERROR row",
            f"fix the shapes ({source}): M, N and K count elements, not bytes",
        )


def dump_shapes(shapes: list[Shape]) -> str:
    return yaml.safe_dump([shape.to_dict() for shape in shapes], sort_keys=False)
