"""Training-step probe: does a kernel's benchmark win survive a real optimiser step?

`git campaign prepare` copies this file into `campaigns/NAME/train_probe.py`, next to the quick
harness; VALIDATE runs it for the incumbent and the candidate, interleaved, and flags a candidate that
wins the quick harness but not this probe (gitcampaign's docs/design.md, the training probe):

    python campaigns/NAME/train_probe.py --op gemm --backend triton --json probe.json

It is self-contained on purpose (no `gitcampaign` import) and imports the kernels of ITS OWN
repository root (two levels up), so a run from a round's worktree measures that round's kernels.

What one step is, and why it resembles training rather than a benchmark:
- a small block built on the op, with weights that persist: compute-dtype nn.Parameters updated in
  place after each torch.optim.AdamW step on fp32 master copies (Megatron-style mixed precision), so
  the weights keep their identity while their `_version` moves, as under a real optimiser:
    dense ops   x -> op(x, W1) -> gelu -> op(h, W2) -> MSE loss
    grouped     a tiny MoE layer: rows gathered by expert, grouped_gemm up, gelu, grouped_gemm down,
                scattered back with the gate weights; the routing is fresh and skewed every step
                (random per-step expert popularity, so loads are uneven and an expert can be empty)
    quant       x -> quantise -> dequantise (straight-through gradient) -> linear -> gelu -> linear
- fresh activations every step, made before the step's clock starts; the target is a fixed teacher
  (the same block with its weights perturbed by 10%, computed in float32 with plain torch), so the
  loss is small and a block that computes something else on real data, even once, moves it far;
  gradients are set to None between steps (never accumulated);
- the clock covers forward, backward and the optimiser step: CUDA events on a GPU, perf_counter on
  the CPU; warm-up steps (compilation, autotuning) are not recorded;
- the loss must stay finite (exit 1 otherwise); VALIDATE compares the candidate's loss trajectory
  with the incumbent's on the same seed, within what the op's precision allows (`op_rel_error`, the
  relative output error its SNR threshold admits, and `out_ms`, the block output's mean square per
  step), so a cache that serves another step's data or stale weights shows up there.

Output (`--json PATH`): {"op", "backend", "size", "device", "dtype", "seed", "steps", "warmup",
"step_ms": [...], "median_ms", "clock": "cuda_events"|"perf_counter", "loss": [...], "out_ms": [...],
"op_rel_error", "loss_finite"}.
Exit codes: 0 finite loss, 1 non-finite loss, 3 usage error.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
EXIT_OK, EXIT_NOT_FINITE, EXIT_USAGE = 0, 1, 3
BACKENDS = ("triton", "torch")
# The quick harness's SNR thresholds (dB) for the op's output: bf16/fp16 40, fp8 e4m3 25.
SNR_DB = {"half": 40.0, "fp8": 25.0}
TEACHER_OFFSET = 0.1  # the teacher's weights differ from the block's first by 10% of their scale


@dataclass(frozen=True)
class OpSpec:
    kind: str  # "dense", "grouped" or "quant"
    modules: tuple[str, ...]  # kernel modules whose BACKEND_ENV the --backend sets
    granularity: str | None = None

    @property
    def rel_error(self) -> float:
        """The relative output error (rms) the op's SNR threshold admits: 10^(-SNR/20)."""
        snr = SNR_DB["fp8" if self.granularity is not None else "half"]
        return 10.0 ** (-snr / 20.0)


OPS = {
    "gemm": OpSpec("dense", ("kernels.gemm",)),
    "gemm_fp8_tensorwise": OpSpec("dense", ("kernels.gemm_fp8", "kernels.quant"), "tensorwise"),
    "gemm_fp8_rowwise": OpSpec("dense", ("kernels.gemm_fp8", "kernels.quant"), "rowwise"),
    "gemm_fp8_blockwise": OpSpec("dense", ("kernels.gemm_fp8", "kernels.quant"), "blockwise"),
    "grouped_gemm": OpSpec("grouped", ("kernels.grouped_gemm",)),
    "quantize_fp8_tensorwise": OpSpec("quant", ("kernels.quant",), "tensorwise"),
    "quantize_fp8_rowwise": OpSpec("quant", ("kernels.quant",), "rowwise"),
    "quantize_fp8_blockwise": OpSpec("quant", ("kernels.quant",), "blockwise"),
}


@dataclass(frozen=True)
class BlockSize:
    tokens: int
    d_model: int
    d_ff: int
    experts: int
    top_k: int


# small: CPU tests and Triton's interpreter (64-multiples suit its large tiles, one step < 1 s).
# real: a Llama-3-8B MLP (d_model 4096, d_ff 14336) on 8192 tokens; the MoE is Mixtral-shaped
# (8 experts, top-2), so the probe times the shapes the campaign's kernels are tuned for.
SIZES = {
    "small": BlockSize(tokens=64, d_model=64, d_ff=128, experts=4, top_k=2),
    "real": BlockSize(tokens=8192, d_model=4096, d_ff=14336, experts=8, top_k=2),
}


class UsageError(Exception):
    """A bad command line: exit 3 with the message."""


def load_kernels(spec: OpSpec, backend: str) -> dict[str, ModuleType]:
    """Import the op's kernel modules from this repository and select `backend` for each of them
    (their backend env vars are read at call time)."""
    if not __import__("torch").cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"  # before any @triton.jit kernel is defined
    sys.path.insert(0, str(REPO_ROOT))
    modules = {name: importlib.import_module(name) for name in spec.modules}
    for module in modules.values():
        os.environ[module.BACKEND_ENV] = backend
    return modules


# -- the blocks --------------------------------------------------------------------------------------


def _weight(rows: int, cols: int, dtype: Any, device: Any, generator: Any, experts: int = 0) -> Any:
    """A persistent weight in the F.linear layout (rows = out features), scaled 1/sqrt(fan_in)."""
    import torch

    shape = (experts, rows, cols) if experts else (rows, cols)
    init = torch.randn(shape, generator=generator, device=device, dtype=torch.float32) / math.sqrt(cols)
    return torch.nn.Parameter(init.to(dtype))


class Block:
    """One trainable block on the op; `inputs()` makes a step's fresh data, `loss(data)` runs it."""

    def __init__(
        self,
        spec: OpSpec,
        kernels: dict[str, ModuleType],
        size: BlockSize,
        device: Any,
        dtype: Any,
        seed: int,
    ):
        import torch

        self.spec, self.kernels, self.size, self.device, self.dtype = spec, kernels, size, device, dtype
        init = torch.Generator(device=device).manual_seed(seed)
        self.data_gen = torch.Generator(device=device).manual_seed(seed + 1)
        experts = size.experts if spec.kind == "grouped" else 0
        self.w1 = _weight(size.d_ff, size.d_model, dtype, device, init, experts)
        self.w2 = _weight(size.d_model, size.d_ff, dtype, device, init, experts)
        self.teacher = [
            w.detach().float()
            + TEACHER_OFFSET * torch.randn(w.shape, generator=init, device=device) / math.sqrt(w.shape[-1])
            for w in (self.w1, self.w2)
        ]
        self.last_out_ms = math.nan

    def parameters(self) -> list[Any]:
        return [self.w1, self.w2]

    def inputs(self) -> dict[str, Any]:
        import torch

        size, gen = self.size, self.data_gen
        x = torch.randn(size.tokens, size.d_model, generator=gen, device=self.device, dtype=torch.float32)
        data = {"x": x.to(self.dtype).requires_grad_(True)}
        if self.spec.kind == "grouped":
            data.update(self._routing())
        data["target"] = self._teacher(data["x"].detach().float(), data)
        return data

    def _teacher(self, x: Any, data: dict[str, Any]) -> Any:
        """The target: the block's function with the teacher's weights, float32, plain torch."""
        import torch
        import torch.nn.functional as F

        t1, t2 = self.teacher
        if self.spec.kind != "grouped":
            return F.linear(F.gelu(F.linear(x, t1)), t2)
        rows = x[data["token_of_row"]]
        expert_out = torch.empty_like(rows)
        start = 0
        for expert, count in enumerate(data["group_sizes"].tolist()):
            part = slice(start, start + count)
            expert_out[part] = F.linear(F.gelu(F.linear(rows[part], t1[expert])), t2[expert])
            start += count
        expert_out *= data["gate_of_row"].float()[:, None]
        return torch.zeros_like(x).index_add(0, data["token_of_row"], expert_out)

    def _routing(self) -> dict[str, Any]:
        """A fresh top-k routing: per-token logits plus a per-step expert popularity (std 2), so
        some experts are crowded and some nearly or entirely empty, as in early MoE training."""
        import torch

        size, gen = self.size, self.data_gen
        popularity = 2.0 * torch.randn(size.experts, generator=gen, device=self.device)
        logits = torch.randn(size.tokens, size.experts, generator=gen, device=self.device) + popularity
        top_logits, experts = logits.topk(size.top_k, dim=1)
        gates = torch.softmax(top_logits, dim=1).flatten()
        flat_experts = experts.flatten()
        order = torch.argsort(flat_experts, stable=True)
        return {
            "token_of_row": torch.div(order, size.top_k, rounding_mode="floor"),
            "gate_of_row": gates[order].to(self.dtype),
            "group_sizes": torch.bincount(flat_experts, minlength=size.experts).to(torch.int64),
        }

    def loss(self, data: dict[str, Any]) -> Any:
        import torch
        import torch.nn.functional as F

        x = data["x"]
        if self.spec.kind == "dense":
            out = self._dense(x)
        elif self.spec.kind == "quant":
            hidden = F.gelu(F.linear(self._quant_roundtrip(x), self.w1))
            out = F.linear(hidden, self.w2)
        else:
            grouped_gemm = self.kernels["kernels.grouped_gemm"].grouped_gemm
            rows = x[data["token_of_row"]]
            hidden = F.gelu(grouped_gemm(rows, self.w1, data["group_sizes"]))
            expert_out = grouped_gemm(hidden, self.w2, data["group_sizes"]) * data["gate_of_row"][:, None]
            out = torch.zeros_like(x).index_add(0, data["token_of_row"], expert_out)
        self.last_out_ms = out.detach().float().pow(2).mean()
        return F.mse_loss(out.float(), data["target"])

    def _dense(self, x: Any) -> Any:
        import torch.nn.functional as F

        if self.spec.granularity is None:
            gemm = self.kernels["kernels.gemm"].gemm
            return gemm(F.gelu(gemm(x, self.w1)), self.w2)
        gemm_fp8 = self.kernels["kernels.gemm_fp8"].gemm_fp8
        hidden = F.gelu(gemm_fp8(x, self.w1, self.spec.granularity))
        return gemm_fp8(hidden.to(self.dtype), self.w2, self.spec.granularity)

    def _quant_roundtrip(self, x: Any) -> Any:
        """Quantise and dequantise the activations; the gradient passes straight through."""
        import torch

        quant = self.kernels["kernels.quant"]
        q, scales = quant.quantize_fp8(x, self.spec.granularity)
        dequant = q.to(torch.float32) * quant.expand_scales(scales, self.spec.granularity, *x.shape)
        return x + (dequant.to(x.dtype) - x).detach()


# -- the loop ----------------------------------------------------------------------------------------


def run_probe(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    spec = OPS[args.op]
    kernels = load_kernels(spec, args.backend)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    # Triton's interpreter computes bf16 on raw bits, so the CPU runs fp16 (as the quick harness does).
    dtype = torch.bfloat16 if cuda else torch.float16
    args.size = args.size or ("real" if cuda else "small")
    block = Block(spec, kernels, SIZES[args.size], device, dtype, args.seed)
    # Mixed precision as Megatron does it: AdamW on fp32 master copies, the compute-dtype weights
    # updated in place from them after each step (same tensors, their `_version` moves).
    masters = [p.detach().float().requires_grad_(True) for p in block.parameters()]
    optimizer = torch.optim.AdamW(masters, lr=1e-3)
    clock: Callable[[Callable[[], Any]], tuple[Any, Callable[[], float]]] = (
        _cuda_clock if cuda else _host_clock
    )

    def step(data: dict[str, Any]) -> tuple[Any, Any]:
        loss = block.loss(data)
        loss.backward()
        for weight, master in zip(block.parameters(), masters, strict=True):
            master.grad, weight.grad = weight.grad.float(), None
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for weight, master in zip(block.parameters(), masters, strict=True):
                weight.copy_(master)
        return loss.detach(), block.last_out_ms

    for _ in range(args.warmup):
        step(block.inputs())
    timings, losses = [], []
    for _ in range(args.steps):
        data = block.inputs()
        loss_and_ms, elapsed_ms = clock(functools.partial(step, data))
        timings.append(elapsed_ms)
        losses.append(loss_and_ms)
    step_ms = [elapsed() for elapsed in timings]
    loss_values = [float(loss) for loss, _ in losses]
    return {
        "op": args.op,
        "backend": args.backend,
        "size": args.size,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "dtype": str(dtype).removeprefix("torch."),
        "seed": args.seed,
        "steps": args.steps,
        "warmup": args.warmup,
        "step_ms": step_ms,
        "median_ms": statistics.median(step_ms),
        "clock": "cuda_events" if cuda else "perf_counter",
        "loss": loss_values,
        "out_ms": [float(out_ms) for _, out_ms in losses],
        "op_rel_error": spec.rel_error,
        "loss_finite": all(math.isfinite(value) for value in loss_values),
    }


def _cuda_clock(work: Callable[[], Any]) -> tuple[Any, Callable[[], float]]:
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


def _host_clock(work: Callable[[], Any]) -> tuple[Any, Callable[[], float]]:
    start = time.perf_counter()
    result = work()
    elapsed_ms = (time.perf_counter() - start) * 1e3
    return result, lambda: elapsed_ms


# -- command line ------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(message)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", required=True, choices=sorted(OPS))
    parser.add_argument("--backend", default="triton", choices=BACKENDS)
    parser.add_argument("--steps", type=int, default=20, help="timed optimiser steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compile, autotune)")
    parser.add_argument("--size", choices=sorted(SIZES), help="default: real on a GPU, small without one")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights, activations and routing")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        raise UsageError(f"need --steps >= 1 and --warmup >= 0, got {args.steps} and {args.warmup}")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except UsageError as exc:
        print(f"train_probe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = run_probe(args)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"train_probe: {result['op']} ({result['backend']}, {result['size']}, {result['device']}): "
        f"median step {result['median_ms']:.3f} ms over {result['steps']} steps ({result['clock']}), "
        f"loss {result['loss'][0]:.4g} -> {result['loss'][-1]:.4g}"
    )
    if not result["loss_finite"]:
        print("train_probe: the loss is not finite: the op does not train", file=sys.stderr)
        return EXIT_NOT_FINITE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
