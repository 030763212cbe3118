"""G1: a per-group M as a compile-time constant of a kernel."""

from __future__ import annotations

import ast
import re

from gitcampaign.lint.names import FunctionNode, annotation_names
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.walk import Family

RULES = (
    Rule(
        "G1",
        "per-group M as a compile-time constant",
        (
            "a `tl.constexpr` kernel parameter that is a per-group (per-expert) M: a name with a group or "
            "expert token and a row-count token (`m`, `rows`, `tokens`), e.g. `M_PER_GROUP`, `GROUP_M_SIZE`, "
            "`tokens_per_expert`. Tile parameters (`block`/`tile`), widths and strides, and the tile-order "
            "swizzles `GROUP_M`, `GROUP_SIZE_*` are fine. A constexpr per-group M compiles one kernel per "
            "routing, which in training changes every step."
        ),
    ),
)

GROUP_TOKENS = frozenset({"group", "groups", "expert", "experts"})
ROW_TOKENS = frozenset({"m", "rows", "row", "tokens", "token"})
# A tile, a vector width or a stride says how rows are walked, not how many a group has.
NOT_A_COUNT_TOKENS = frozenset({"block", "tile", "width", "stride", "load", "vec", "bits", "chunk", "pad"})
# Tile-order swizzles (the Triton tutorial's GROUP_SIZE_M): how many tile rows share a column band.
TILE_SWIZZLE_RE = re.compile(r"^(group_[mn]|group_size_\w+)$")


class GroupM(Family):
    RULES = RULES

    def definition(self, func: FunctionNode, params: list[ast.arg]) -> None:
        for arg in params:
            if "constexpr" not in annotation_names(arg.annotation):
                continue
            tokens = set(arg.arg.lower().split("_"))
            if tokens & NOT_A_COUNT_TOKENS or TILE_SWIZZLE_RE.match(arg.arg.lower()):
                continue
            if tokens & GROUP_TOKENS and tokens & ROW_TOKENS:
                self.context.report(
                    "G1",
                    arg,
                    f"`{arg.arg}` in kernel `{func.name}` makes the per-group M a compile-time constant: "
                    "training routes tokens differently every step, so every step recompiles (or the "
                    "kernel is only right for the benchmark's group sizes)",
                )
