"""The ops the tool ships, one op spec a file: the one registry the harness, the training probe,
`crosscheck`, the shape presets and the CLI all read. Adding an op kind is one spec file here
(plus its kernel and tests); nothing else keeps a list of ops."""

from __future__ import annotations

import functools
from pathlib import Path

from gitcampaign.harness.contract import SpecInfo, spec_info, spec_literals

SPEC_DIR = Path(__file__).resolve().parent


@functools.cache
def registry() -> dict[str, tuple[Path, SpecInfo]]:
    """Op name -> (its spec file, its declarations), read without running any spec."""
    ops: dict[str, tuple[Path, SpecInfo]] = {}
    for path in sorted(SPEC_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        info = spec_info(spec_literals(path.read_text(), str(path)), str(path))
        for op in info.op_names:
            if op in ops:
                raise RuntimeError(f"op {op} is declared by both {ops[op][0].name} and {path.name}")
            ops[op] = (path, info)
    return ops


def op_names() -> list[str]:
    return list(registry())


def spec_of(op: str) -> tuple[Path, SpecInfo] | None:
    return registry().get(op)
