"""The training probe: does a kernel's benchmark win survive real optimiser steps?

Built from the op spec's declaration of parameters and activations, so every spec'd op gets it:
- parameters persist across steps: compute-dtype tensors updated in place after each AdamW step on
  fp32 master copies (Megatron-style mixed precision), so they keep their identity while their
  `_version` moves, as under a real optimiser, at a rate that covers half the way to the teacher;
- activations (and the MoE routing) are drawn fresh every step, before the step's clock starts;
- the loss is the mean square error of the op's outputs against a fixed teacher: the harness's
  reference with the parameters perturbed by 10% of their scale, so a kernel that computes something
  else on real data (a cache that serves another step's inputs or stale weights), even once, moves it;
- the clock covers forward, backward and the optimiser step (CUDA events, or perf_counter on the
  CPU); warm-up steps are not recorded. Small shapes (the spec's PROBE_SHAPES) are where launching
  costs the host more than the GPU's work: a round that adds host time per call shows there.

VALIDATE runs it for incumbent and candidate on the same seed and compares each shape's step time
and loss trajectory (the relative output error the op's checks admit bounds how far the losses may
differ: `op_rel_error`, with `out_ms`, the outputs' mean square per step).
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from gitcampaign.harness.contract import Shape
from gitcampaign.harness.inputs import PARAMETER, Draw, Inputs
from gitcampaign.harness.spec import Op

TEACHER_OFFSET = 0.1  # the teacher's parameters differ from the start's by 10% of their scale
# Each parameter's learning rate lets the run cover about half of the teacher's offset: the loss
# then falls well beyond what the op's precision can move it, so a kernel that keeps serving the
# starting weights (a weight cache that ignores `_version`) leaves the trajectory within the run.
LEARNED_FRACTION = 0.5


def rms_of(tensor: Any) -> float:
    """A parameter's scale (1 for an all-zero one)."""
    return float(tensor.detach().float().pow(2).mean().sqrt()) or 1.0


def as_float(tensor: Any) -> Any:
    return tensor.detach().float() if not tensor.requires_grad else tensor.float()


class ProbeShape:
    """One shape's persistent parameters, their fp32 masters and optimiser, and the teacher."""

    def __init__(self, op: Op, shape: Shape, device: Any, dtype: Any, seed: int, steps: int) -> None:
        import torch

        self.op, self.fields = op, dict(shape)
        generator = torch.Generator(device=device).manual_seed(seed)
        self.draw = Draw(generator, device, dtype, op.info.backward)
        start = self.draw.inputs(op.spec_module, self.fields)
        self.parameters = {
            name: start.values[name] for name, role in start.roles.items() if role == PARAMETER
        }
        trainable = [p for p in self.parameters.values() if p.requires_grad]
        self.masters = [p.detach().float().requires_grad_() for p in trainable]
        groups = [
            {"params": [m], "lr": LEARNED_FRACTION * TEACHER_OFFSET * rms_of(m) / steps} for m in self.masters
        ]
        self.optimizer = torch.optim.AdamW(groups) if groups else None
        self.teacher = {}
        for name, parameter in self.parameters.items():
            value = parameter.detach()
            if value.is_floating_point():
                noise = torch.randn(value.shape, generator=generator, device=device, dtype=torch.float32)
                value = (value.float() + TEACHER_OFFSET * rms_of(value) * noise).to(value.dtype)
            self.teacher[name] = value

    def data(self) -> tuple[Inputs, dict[str, Any]]:
        """A step's fresh activations with the persistent parameters, and the teacher's outputs."""
        fresh = self.draw.inputs(self.op.spec_module, self.fields)
        values = {**fresh.values, **self.parameters}
        teacher = Inputs({**fresh.values, **self.teacher}, fresh.roles)
        target = self.op.reference(teacher)
        return Inputs(values, fresh.roles), target

    def step(self, inputs: Inputs, target: dict[str, Any]) -> tuple[Any, Any]:
        import torch

        outputs = self.op.named(self.op.call(inputs))
        loss = sum(
            ((as_float(out) - target[name].float()) ** 2).mean()
            for name, out in outputs.items()
            if out.dtype.is_floating_point
        )
        out_ms = sum(
            out.detach().float().pow(2).mean() for out in outputs.values() if out.dtype.is_floating_point
        )
        if self.optimizer is not None and isinstance(loss, torch.Tensor) and loss.requires_grad:
            loss.backward()
            trainable = [p for p in self.parameters.values() if p.requires_grad]
            for weight, master in zip(trainable, self.masters, strict=True):
                master.grad = torch.zeros_like(master) if weight.grad is None else weight.grad.float()
                weight.grad = None
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                for weight, master in zip(trainable, self.masters, strict=True):
                    weight.copy_(master)
        return torch.as_tensor(loss).detach(), torch.as_tensor(out_ms).detach()


def rel_error(op: Op, shape: Shape, outputs: dict[str, Any], reference: dict[str, Any]) -> float:
    """The largest relative (rms) output error the op's forward checks admit: 10^(-SNR/20) for an
    SNR check, rtol + atol / rms(ref) for a tolerance, 0 for an exact one."""
    errors = [0.0]
    for check in op.info.checks:
        if check.on_gradient:
            continue
        got, want = outputs[check.of[0]], reference[check.of[0]]
        if check.rule == "snr":
            errors.append(10.0 ** (-op.threshold(check, got, shape) / 20.0))
        elif check.rule == "close":
            rms = float(want.double().pow(2).mean().sqrt()) if want.numel() else 0.0
            errors.append(check.rtol + (check.atol / rms if rms > 0 else 0.0))
    return max(errors)


def probe_shape(
    op: Op, shape: Shape, device: Any, dtype: Any, seed: int, steps: int, warmup: int
) -> dict[str, Any]:
    state = ProbeShape(op, shape, device, dtype, seed, steps)
    clock: Callable[[Callable[[], Any]], tuple[Any, Callable[[], float]]] = (
        cuda_clock if device.type == "cuda" else host_clock
    )
    for _ in range(warmup):
        state.step(*state.data())
    pending, error = [], 0.0
    for index in range(steps):
        inputs, target = state.data()
        if index == 0:
            error = rel_error(op, shape, op.named(op.call(inputs)), target)
        result, elapsed = clock(functools.partial(state.step, inputs, target))
        pending.append((result, elapsed))
    step_ms = [elapsed() for _, elapsed in pending]
    return {
        "label": shape.label,
        "step_ms": step_ms,
        "median_ms": statistics.median(step_ms),
        "loss": [float(loss) for (loss, _), _ in pending],
        "out_ms": [float(out_ms) for (_, out_ms), _ in pending],
        "op_rel_error": error,
    }


def run_probe(
    op: Op, shapes: list[Shape], device: Any, dtype: Any, seed: int, steps: int, warmup: int
) -> dict[str, Any]:
    """Every shape in turn; the JSON record VALIDATE compares."""
    import torch

    results = [
        probe_shape(op, shape, device, dtype, seed + 1000 * index, steps, warmup)
        for index, shape in enumerate(shapes)
    ]
    losses = [value for result in results for value in result["loss"]]
    return {
        "format": 2,
        "op": op.name,
        "backend": op.backend,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": str(dtype).removeprefix("torch."),
        "seed": seed,
        "steps": steps,
        "warmup": warmup,
        "clock": "cuda_events" if device.type == "cuda" else "perf_counter",
        "layers": 1,
        "shapes": results,
        "median_ms": sum(result["median_ms"] for result in results),
        "op_rel_error": max(result["op_rel_error"] for result in results),
        "loss_finite": all(math.isfinite(value) for value in losses),
    }


def cuda_clock(work: Callable[[], Any]) -> tuple[Any, Callable[[], float]]:
    """Run `work` between two CUDA events; the elapsed time is read later, without a sync per step."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    result = work()
    end.record()

    def elapsed() -> float:
        end.synchronize()
        return float(start.elapsed_time(end))

    return result, elapsed


def host_clock(work: Callable[[], Any]) -> tuple[Any, Callable[[], float]]:
    start = time.perf_counter()
    result = work()
    elapsed_ms = (time.perf_counter() - start) * 1e3
    return result, lambda: elapsed_ms
