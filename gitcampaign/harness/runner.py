"""One shape of one op: warm up, time each phase back to back, then check the timed calls and fresh
calls against the harness's reference; the CSV row and why it failed."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitcampaign.harness.checks import Failures, Seal, checked_call, judge, plain_tensor_reasons, synchronize
from gitcampaign.harness.clock import Clock, Timing, configs_compiled_together, measure
from gitcampaign.harness.contract import ERROR, FAIL, PASS, UNITS, Shape
from gitcampaign.harness.inputs import Bank, Draw, Inputs, normal
from gitcampaign.harness.spec import Op


@dataclass
class Run:
    """Everything a shape run needs besides the shape itself."""

    op: Op
    device: Any
    dtype: Any
    clock: Clock
    repeats: int
    iters: int
    forward_only: bool
    seed: int
    peaks: dict[str, float] | None
    gpu_name: str
    seal: Seal | None = None
    warm_up_s: float = 0.0  # spent in untimed first calls (compilation, autotuning), all shapes so far
    tuning_s: float = 0.0  # of which the autotuner spent timing configs

    @property
    def phases(self) -> tuple[str, ...]:
        return self.op.info.phases[:1] if self.forward_only else self.op.info.phases


def row_cells(op: Op, shape: Shape, check: str, figures: dict[str, Any] | None = None) -> list[object]:
    """The CSV row in the header's column order; figures missing (a phase not run, an ERROR) are NaN."""
    figures = figures or {}
    info = op.info
    metrics: list[object] = []
    for phase in info.phases:
        metrics += [figures.get(f"{phase} metric", math.nan), figures.get(f"{phase} stddev", math.nan)]
    times = [figures.get(f"{phase} ms", math.nan) for phase in info.phases]
    checks = [figures.get(check_spec.column, math.nan) for check_spec in info.checks]
    return [shape.label, *(shape[name] for name in info.columns), check, *metrics, *times, *checks]


class Calls:
    """Calls of the op on one shape: inputs from the bank (timed) or drawn now (checks), and the
    backward of a forward as a zero-argument callable."""

    def __init__(self, run: Run, shape: Shape, generator: Any) -> None:
        backward = "backward" in run.phases
        self.run, self.shape, self.op = run, shape, run.op
        self.bank = Bank(generator, run.device, run.clock.l2_bytes)
        self.timed_draw = Draw(generator, run.device, run.dtype, backward, self.bank)
        self.fresh_draw = Draw(generator, run.device, run.dtype, backward)
        self.fields = dict(shape)

    def timed_inputs(self) -> Inputs:
        return self.timed_draw.inputs(self.op.spec_module, self.fields)

    def fresh_inputs(self) -> Inputs:
        return self.fresh_draw.inputs(self.op.spec_module, self.fields)

    def grad_outs(self, outputs: dict[str, Any], timed: bool) -> dict[str, Any]:
        """An upstream gradient for every output that requires grad, from the bank or drawn now."""
        return {
            name: (
                self.bank.take(tuple(out.shape), out.dtype)
                if timed
                else normal(tuple(out.shape), self.fresh_draw.generator, self.run.device, out.dtype)
            )
            for name, out in outputs.items()
            if out.requires_grad
        }

    def backward_call(self, inputs: Inputs, timed: bool = True) -> Callable[[], Any]:
        """The backward of one forward (the forward is not timed), as a zero-argument callable."""
        import torch

        outputs = self.op.named(self.op.provider(inputs)())
        grad_outs = self.grad_outs(outputs, timed)
        targets = [outputs[name] for name in grad_outs]
        leaves = list(inputs.differentiable().values())
        return lambda: torch.autograd.grad(targets, leaves, list(grad_outs.values()))


def run_shape(run: Run, shape: Shape, index: int, failures: Failures) -> list[object]:
    """One shape: the row; why it failed goes into `failures` (nothing when it passed), check by
    check, so that what was found before an exception is still reported."""
    import torch

    op = run.op
    generator = torch.Generator(device=run.device).manual_seed(run.seed + 1000 * index)
    calls = Calls(run, shape, generator)
    op.sampler.take()
    warm_up(run, calls)
    figures: dict[str, Any] = {}
    timings = time_phases(run, shape, calls, figures)
    failures.reasons += timed_call_reasons(run, shape)
    check_accuracy(run, shape, calls, figures, failures)
    check_plausibility(run, timings, failures)
    timer_reasons(run, failures)
    return row_cells(op, shape, FAIL if failures.reasons else PASS, figures)


def error_cells(op: Op, shape: Shape) -> list[object]:
    return row_cells(op, shape, ERROR)


def warm_up(run: Run, calls: Calls) -> None:
    """The shape's first calls (compilation and autotuning, forward and backward), never timed; its
    seconds go to the log."""
    began = run.clock.perf_counter()
    with configs_compiled_together(run.device, run.clock.perf_counter) as tuning:
        inputs = calls.fresh_inputs()
        if "backward" in run.phases:
            calls.backward_call(inputs, timed=False)()
        else:
            run.op.provider(inputs)()
    synchronize(run.device)
    run.warm_up_s += run.clock.perf_counter() - began
    run.tuning_s += tuning.seconds


def time_phases(run: Run, shape: Shape, calls: Calls, figures: dict[str, Any]) -> dict[str, Timing]:
    """Each phase's throughput on fresh inputs for every call, into `figures`."""
    op = run.op
    work = op.work(shape, run.dtype)
    scale = UNITS[op.info.unit]
    prepares: dict[str, Callable[[], Callable[[], Any]]] = {
        "forward": lambda: op.provider(calls.timed_inputs()),
        "backward": lambda: calls.backward_call(calls.timed_inputs()),
    }
    timings = {}
    for phase in run.phases:
        timing = measure(
            run.clock,
            calls.bank,
            prepares[phase],
            run.repeats,
            run.iters,
            work[phase],
            scale,
            f"{shape.label} {phase}",
        )
        figures[f"{phase} metric"], figures[f"{phase} stddev"] = timing.metric, timing.stddev
        figures[f"{phase} ms"] = timing.median_ms
        timings[phase] = timing
    return timings


def timed_call_reasons(run: Run, shape: Shape) -> list[str]:
    """Check calls the timed loop made, on their own fresh inputs, with the reference computed only
    now. The checked path (poisoned outputs, deterministic mode, a second run) is visible to an op
    that looks for it; these calls are not, so an op that behaves only when checked, a CUDA graph
    replayed without its inputs or a cache that skips work is wrong here."""
    op = run.op
    for provider in op.sampler.take():
        reasons = plain_tensor_reasons("timed call", provider.result)
        if reasons:
            return reasons
        outputs = op.named(provider.result)
        reference = op.reference(provider.inputs)
        for check in op.info.checks:
            if check.on_gradient:
                continue
            got, want = [outputs[name] for name in check.of], [reference[name] for name in check.of]
            threshold = op.threshold(check, got[0], shape)
            value, failed = judge(check, got, want, threshold, run.device.type == "cuda")
            if failed:
                return [f"timed call: {reason} (on its own inputs)" for reason in failed]
        del reference
    return []


def check_accuracy(run: Run, shape: Shape, calls: Calls, figures: dict[str, Any], failures: Failures) -> None:
    """Correctness on fresh inputs, after timing: the checked calls (poisoned outputs, input
    mutation, determinism, the identity flip), then every check column against the reference."""
    import torch

    op = run.op
    inputs = calls.fresh_inputs()
    activations = inputs.activations()
    provider = op.provider(inputs)
    first = op.named(provider())  # sizes the poisoned blocks; the checked calls below are judged
    out_bytes = [out.numel() * out.element_size() for out in first.values()]
    del first
    result = checked_call("forward", provider, inputs.tensors(), activations, out_bytes, run.device, failures)
    outputs = op.named(result)
    candidate = {name: out.detach() for name, out in outputs.items()}
    grad_outs = calls.grad_outs(outputs, timed=False) if "backward" in run.phases else None
    if grad_outs is not None:
        leaves = inputs.differentiable()

        def backward() -> Any:
            again = op.named(op.provider(inputs)())
            return torch.autograd.grad(
                [again[name] for name in grad_outs], list(leaves.values()), list(grad_outs.values())
            )

        grads = checked_call(
            "backward",
            backward,
            [*inputs.tensors(), *grad_outs.values()],
            [*activations, *grad_outs.values()],
            [leaf.numel() * leaf.element_size() for leaf in leaves.values()],
            run.device,
            failures,
        )
        candidate.update({f"{name}.grad": grad for name, grad in zip(leaves, grads, strict=True)})
    reference = op.reference(inputs, grad_outs)
    for check in op.info.checks:
        if check.on_gradient and grad_outs is None:
            continue  # --forward-only: the gradient columns stay NaN
        missing = [name for name in check.of if name not in candidate or name not in reference]
        if missing:
            failures.reasons.append(f"{check.column}: no {', '.join(missing)} (not differentiable?)")
            continue
        got, want = [candidate[name] for name in check.of], [reference[name] for name in check.of]
        value, failed = judge(check, got, want, op.threshold(check, got[0], shape), run.device.type == "cuda")
        figures[check.column] = value
        failures.reasons += failed


def check_plausibility(run: Run, timings: dict[str, Timing], failures: Failures) -> None:
    """No repeat may beat the GPU's datasheet peak (when it is known)."""
    if run.peaks is None:
        return
    info = run.op.info
    key = "hbm" if info.unit == "GB/s" else info.peak
    peak = run.peaks[key]
    for phase, timing in timings.items():
        fastest = max(timing.per_repeat_metric)
        if fastest > peak:
            failures.reasons.append(
                f"implausible: {phase} {fastest:.4g} {info.unit} exceeds the {run.gpu_name} {key} peak of {peak:g}"
            )


def timer_reasons(run: Run, failures: Failures) -> None:
    replaced = run.clock.replaced()
    if replaced:
        failures.reasons.append(f"timer replaced: {', '.join(replaced)}")
    broken = run.seal.broken() if run.seal is not None else []
    if broken:
        failures.reasons.append(f"harness or torch rebound: {', '.join(broken[:8])}")
