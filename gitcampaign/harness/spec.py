"""An op spec, loaded and bound: its declarations, its functions, its variant and its kernel module.

A spec is a Python file that declares an op to the harness (gitcampaign's docs/op-spec.md): literal
declarations (NAME, MODULE, FIELDS, OUTPUTS, CHECKS, UNIT, ...) and four functions, `inputs(shape,
draw)`, `candidate(kernel, **inputs)`, `reference(**inputs)` and `work(shape, dtype)`. It needs
nothing from gitcampaign, so the frozen copy measures the same way whatever tool is installed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from gitcampaign.harness.checks import as_tuple, default_threshold
from gitcampaign.harness.contract import (
    SNR_THRESHOLDS_DB,
    VENDOR_BACKEND,
    CheckSpec,
    Shape,
    SpecInfo,
    UsageError,
    spec_info,
)
from gitcampaign.harness.inputs import Inputs

SPEC_FUNCTIONS = ("inputs", "candidate", "reference", "work")
SAMPLED_CALLS = 3  # timed calls checked per shape, drawn at random from all of them


def load_spec_module(path: Path) -> ModuleType:
    """The spec file as a module of its own (imported once per process: its functions are sealed)."""
    name = "gitcampaign_op_spec_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        raise UsageError(f"no op spec at {path}")
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise UsageError(f"cannot import the op spec {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


class CallSampler:
    """Keeps SAMPLED_CALLS providers drawn uniformly from all called for one shape (reservoir
    sampling, seeded from the OS's entropy). A draw is a few hundred nanoseconds of host time after
    the op returned, while the GPU still runs it (the timed loop keeps the host ahead)."""

    def __init__(self) -> None:
        self.made = 0
        self.kept: list[Provider] = []
        self.random = random.Random(os.urandom(16))

    def offer(self, provider: Provider) -> None:
        self.made += 1
        if len(self.kept) < SAMPLED_CALLS:
            self.kept.append(provider)
        else:
            slot = self.random.randrange(self.made)
            if slot < SAMPLED_CALLS:
                self.kept[slot] = provider

    def take(self) -> list[Provider]:
        """The sample so far; sampling starts afresh (a shape starts with `take()` too, so the
        previous shape's checked calls never count as this shape's timed ones)."""
        kept, self.kept, self.made = self.kept, [], 0
        return kept


class Provider:
    """One call of the op on one set of inputs. Warm-up, timed loop and checks all reach the op
    through this one frame, so the op cannot tell them apart by its caller, and a sample of the
    calls keeps inputs and result, so the checks can look at calls that were timed."""

    __slots__ = ("call", "inputs", "result", "sampler")

    def __init__(self, call: Callable[[], Any], inputs: Inputs, sampler: CallSampler) -> None:
        self.call, self.inputs, self.sampler = call, inputs, sampler
        self.result: Any = None

    def __call__(self) -> Any:
        self.result = self.call()
        self.sampler.offer(self)
        return self.result


class Op:
    """One op of a spec (a spec with VARIANTS declares several: NAME_VARIANT), ready to measure."""

    def __init__(self, module: ModuleType, op_name: str, source: str) -> None:
        self.spec_module = module
        self.info: SpecInfo = spec_info(vars(module), source)
        if op_name not in self.info.op_names:
            raise UsageError(
                f"OP = {op_name!r} is not declared by {source} (it declares {', '.join(self.info.op_names)})"
            )
        missing = [name for name in SPEC_FUNCTIONS if not callable(getattr(module, name, None))]
        if missing:
            raise UsageError(
                f"{source} defines no {', '.join(missing)}() (see gitcampaign's docs/op-spec.md)"
            )
        self.name = op_name
        setattr(module, "VARIANT", self.info.variant_of(op_name))  # noqa: B010 (read by the spec; before the seal)
        self.sampler = CallSampler()
        self.kernel: ModuleType | None = None
        self.backend = ""

    def load_kernel(self, backend: str, cuda: bool, root: Path) -> None:
        """Import the kernel module from `root` (the measured tree) with `backend` selected: the
        module's backend variable, or the spec's `vendor` function for the vendor backend."""
        self.backend = backend
        if self.info.backend_env:
            os.environ[self.info.backend_env] = backend
        elif backend == VENDOR_BACKEND and not callable(getattr(self.spec_module, "vendor", None)):
            raise UsageError(f"backend {backend!r} runs the spec's vendor(), and {self.name}'s spec has none")
        if not cuda:
            os.environ["TRITON_INTERPRET"] = "1"  # before any @triton.jit kernel is defined
        sys.path.insert(0, str(root))
        self.kernel = importlib.import_module(self.info.module)

    @property
    def uses_vendor(self) -> bool:
        return not self.info.backend_env and self.backend == VENDOR_BACKEND

    def call(self, inputs: Inputs) -> Any:
        if self.uses_vendor:
            return self.spec_module.vendor(**inputs.values)
        return self.spec_module.candidate(self.kernel, **inputs.values)

    def provider(self, inputs: Inputs) -> Provider:
        """The op as a zero-argument callable on `inputs`, so that nothing but the op is ever timed."""
        return Provider(lambda: self.call(inputs), inputs, self.sampler)

    def named(self, result: Any) -> dict[str, Any]:
        outputs = as_tuple(result)
        if len(outputs) != len(self.info.outputs):
            raise TypeError(
                f"{self.name} returned {len(outputs)} outputs, its spec declares {len(self.info.outputs)} "
                f"({', '.join(self.info.outputs)})"
            )
        return dict(zip(self.info.outputs, outputs, strict=True))

    def reference(self, inputs: Inputs, grad_outs: dict[str, Any] | None = None) -> dict[str, Any]:
        """The spec's reference on the same inputs (in float64 unless it declares REFERENCE_DTYPE
        "input"), computed by the harness; with `grad_outs` (output name -> upstream gradient) also
        the gradient of every differentiable input, as `NAME.grad`, by autograd through it."""
        import torch

        wide = self.info.reference_dtype == "float64"
        values: dict[str, Any] = {}
        leaves: dict[str, Any] = {}
        for name, value in inputs.values.items():
            if isinstance(value, torch.Tensor):
                copy = value.detach()
                copy = copy.double() if wide and copy.is_floating_point() else copy.clone()
                if grad_outs is not None and value.requires_grad:
                    leaves[name] = copy.requires_grad_()
                values[name] = copy
            else:
                values[name] = value
        with torch.set_grad_enabled(grad_outs is not None):
            outputs = self.named(self.spec_module.reference(**values))
        found = {name: output.detach() for name, output in outputs.items()}
        if grad_outs:
            targets = [outputs[name] for name in grad_outs]
            upstream = [grad.detach().double() if wide else grad.detach() for grad in grad_outs.values()]
            grads = torch.autograd.grad(targets, list(leaves.values()), upstream, allow_unused=True)
            for (name, leaf), grad in zip(leaves.items(), grads, strict=True):
                found[f"{name}.grad"] = torch.zeros_like(leaf) if grad is None else grad
        return found

    def work(self, shape: Shape, dtype: Any) -> dict[str, float]:
        """FLOPs or bytes per call, by phase, as the spec counts them."""
        work = self.spec_module.work(dict(shape), dtype)
        phases = self.info.phases
        if not isinstance(work, dict) or any(
            not isinstance(work.get(phase), (int, float))
            or not math.isfinite(work[phase])
            or work[phase] <= 0
            for phase in phases
        ):
            raise ValueError(
                f"the spec's work() must give a positive number for each of {', '.join(phases)}: {work!r}"
            )
        return {phase: float(work[phase]) for phase in phases}

    def threshold(self, check: CheckSpec, tensor: Any, shape: Shape) -> float:
        """The least SNR a check accepts: the spec's min_db, else what its thresholds() hook gives
        for the check's column (dB, or a dtype whose threshold applies), else the default for the
        dtype of `tensor`, the candidate's output or gradient; a shape's min_snr_db may raise it."""
        value: Any = check.min_db
        hook = getattr(self.spec_module, "thresholds", None)
        if value is None and callable(hook):
            value = hook(self.kernel, dict(shape)).get(check.column)
        if value is None:
            value = default_threshold(tensor)
        elif not isinstance(value, (int, float)):  # a dtype (or its name): that dtype's threshold
            value = SNR_THRESHOLDS_DB[str(value).removeprefix("torch.")]
        floor = shape.get("min_snr_db")
        return max(float(value), float(floor)) if isinstance(floor, (int, float)) else float(value)
