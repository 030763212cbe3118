"""The frozen harness as campaigns get it, for tests: the single file `prepare` writes (imported as
a module, or written into a scratch repository with its op spec beside it)."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from gitcampaign import constants as C
from gitcampaign.harness.build import frozen_harness, source
from gitcampaign.harness.ops import spec_of

REPO_ROOT = Path(__file__).resolve().parents[1]


def frozen_module() -> ModuleType:
    """The built file imported as a module of its own (what crosscheck and calibrate import)."""
    name = "frozen_quick_test_bench"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(tempfile.mkdtemp(prefix="qtb-")) / "campaigns" / "x" / C.HARNESS_FILE
    path.parent.mkdir(parents=True)
    path.write_text(source())
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_harness(
    root: Path, op: str, backend: str, spec_text: str | None = None, campaign: str = "x"
) -> Path:
    """campaigns/CAMPAIGN/quick_test_bench.py and op_spec.py under `root`, as prepare writes them
    (the shipped op's spec unless `spec_text` is given)."""
    folder = root / "campaigns" / campaign
    folder.mkdir(parents=True, exist_ok=True)
    harness = folder / C.HARNESS_FILE
    harness.write_bytes(frozen_harness(op, backend))
    found = spec_of(op)
    (folder / C.OP_SPEC_FILE).write_text(spec_text if spec_text is not None else found[0].read_text())  # type: ignore[index]
    return harness


def spec_module(op: str) -> ModuleType:
    """A shipped op's spec imported on its own, its VARIANT set as the harness sets it."""
    found = spec_of(op)
    assert found is not None
    path, info = found
    spec = importlib.util.spec_from_file_location(f"spec_under_test_{op}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.VARIANT = info.variant_of(op)
    return module
