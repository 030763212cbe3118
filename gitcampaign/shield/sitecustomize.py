"""Loaded at start-up by every harness process gitcampaign runs (its folder is first on PYTHONPATH).

A harness puts its own folder, and usually the repository root, at the front of `sys.path`, so a
round could add `statistics.py` or `random.py` there and change what the harness computes without
touching a protected file. Here a finder placed before all others resolves every top-level
standard-library name from the standard library's own folders, whatever `sys.path` becomes later;
the project's own packages (`kernels`) still import from the round's worktree. A `sitecustomize`
of the environment (site-packages) still runs afterwards.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))
_BASES = tuple({os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)})
_STDLIB = [
    entry
    for entry in sys.path
    if entry
    and os.path.realpath(entry).startswith(_BASES)
    and "site-packages" not in entry
    and "dist-packages" not in entry
]


class StdlibFirst:
    """Top-level standard-library modules come from the standard library, never from sys.path[0]."""

    @classmethod
    def find_spec(
        cls, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is not None or name not in sys.stdlib_module_names:
            return None
        return importlib.machinery.PathFinder.find_spec(name, _STDLIB)


sys.meta_path.insert(0, StdlibFirst)


def _chain() -> None:
    """Run the environment's own sitecustomize, which this module's name hides."""
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages()]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [f for f in folders if f != _HERE])
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
