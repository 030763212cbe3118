"""A Llama-3.1-8B decoder layer's training step with bf16 linears and with kernels.gemm_fp8's.

    python benchmarks/dev/layer_dev.py [--model 8b|tiny] [--steps 20] [--granularities tensorwise,rowwise]

Does a real layer step hide the host's time to launch the fp8 ops? Under `do_bench` a single fp8
linear's step is host-bound on the smaller projections (qkv, o: ~1.1-1.7 ms of host time against
0.7-1.0 ms of GPU), while in training the host runs ahead through the whole layer. One step here is
forward and backward of one layer on 8192 tokens (RMSNorm, fused QKV projection, causal GQA
attention through F.scaled_dot_product_attention, output projection, RMSNorm, fused gate/up
projection, SwiGLU, down projection, two residuals; no rotary embedding), every linear either
F.linear in bf16 or gemm_fp8 at one granularity. Per variant:
- step ms: steps run back to back between two CUDA events (no L2 flush: consecutive steps as in
  training); the GPU's idle gaps count;
- GPU ms: the kernels' own time per step (torch.profiler), what the GPU needs;
- host ms: the host's time to launch one step while a GPU spin keeps it from waiting;
- idle: step ms - GPU ms, the launches a step did not hide;
- speed: bf16's step ms / this one's.
`--model tiny` runs the same code on small sizes (the CPU, through Triton's interpreter: a smoke run).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fp8_dev import host_ms, kernel_times  # noqa: E402  (this folder: the script's own path entry)

from kernels import gemm_fp8 as fp8  # noqa: E402


@dataclass(frozen=True)
class Model:
    tokens: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


MODELS = {
    "8b": Model(tokens=8192, hidden=4096, heads=32, kv_heads=8, intermediate=14336),
    "tiny": Model(tokens=128, hidden=128, heads=4, kv_heads=2, intermediate=256),
}


class Layer:
    """One decoder layer's weights, and its forward with a given linear."""

    def __init__(self, model: Model, device: torch.device, dtype: torch.dtype) -> None:
        generator = torch.Generator(device=device).manual_seed(0)
        kv = model.kv_heads * model.head_dim

        def weight(n: int, k: int) -> torch.Tensor:
            w = torch.randn(n, k, generator=generator, device=device, dtype=torch.float32) / math.sqrt(k)
            return w.to(dtype).requires_grad_()

        self.model = model
        self.norms = [
            torch.ones(model.hidden, device=device, dtype=dtype, requires_grad=True) for _ in range(2)
        ]
        self.qkv = weight(model.hidden + 2 * kv, model.hidden)
        self.o = weight(model.hidden, model.hidden)
        self.gate_up = weight(2 * model.intermediate, model.hidden)
        self.down = weight(model.hidden, model.intermediate)

    def parameters(self) -> list[torch.Tensor]:
        return [*self.norms, self.qkv, self.o, self.gate_up, self.down]

    def forward(
        self, x: torch.Tensor, linear: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        m = self.model
        h = F.rms_norm(x, (m.hidden,), self.norms[0], eps=1e-5)
        q, k, v = linear(h, self.qkv).split(
            [m.hidden, m.kv_heads * m.head_dim, m.kv_heads * m.head_dim], dim=-1
        )
        q = q.view(1, m.tokens, m.heads, m.head_dim).transpose(1, 2)
        k, v = (t.view(1, m.tokens, m.kv_heads, m.head_dim).transpose(1, 2) for t in (k, v))
        group = m.heads // m.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + linear(attention.transpose(1, 2).reshape(m.tokens, m.hidden), self.o)
        h = F.rms_norm(x, (m.hidden,), self.norms[1], eps=1e-5)
        gate, up = linear(h, self.gate_up).chunk(2, dim=-1)
        return x + linear(F.silu(gate) * up, self.down)


def bf16_linear(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(a, w)


def fp8_linear(granularity: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def linear(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return fp8.gemm_fp8(a.to(w.dtype).contiguous(), w, granularity)  # gemm_fp8 returns bf16

    return linear


def make_step(
    layer: Layer, linear: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
) -> Callable[[], object]:
    m = layer.model
    generator = torch.Generator(device=layer.qkv.device).manual_seed(1)
    x = torch.randn(m.tokens, m.hidden, generator=generator, device=layer.qkv.device, dtype=layer.qkv.dtype)
    x.requires_grad_()
    grad = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    inputs = [x, *layer.parameters()]
    return lambda: torch.autograd.grad(layer.forward(x, linear), inputs, grad)


def step_ms(step: Callable[[], object], steps: int) -> float:
    """Milliseconds a step, `steps` of them back to back between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="8b")
    parser.add_argument("--steps", type=int, default=20, help="steps per measurement (host: a quarter)")
    parser.add_argument("--granularities", default=",".join(fp8.GRANULARITIES))
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float16  # bf16 is wrong in Triton's interpreter
    model = MODELS[args.model]
    versions = f"torch {torch.__version__}, triton {__import__('triton').__version__}"
    where = torch.cuda.get_device_name() if cuda else "CPU (Triton interpreter)"
    print(f"layer_dev {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {where}, {versions}")
    print(f"model {args.model}: {model}; one step = forward + backward of one layer")
    layer = Layer(model, device, dtype)
    variants = {"bf16": bf16_linear} | {g: fp8_linear(g) for g in args.granularities.split(",") if g}
    print(f"{'linears':<12}{'step ms':>9}{'GPU ms':>9}{'host ms':>9}{'idle':>8}{'speed':>7}", flush=True)
    baseline = math.nan
    for name, linear in variants.items():
        step = make_step(layer, linear)
        for _ in range(3):  # compilation, autotuning
            step()
        if not cuda:
            began = time.perf_counter()
            step()
            print(
                f"{name:<12}{(time.perf_counter() - began) * 1e3:9.1f}  (CPU: wall ms of one step)",
                flush=True,
            )
            continue
        wall = step_ms(step, args.steps)
        busy = sum(ms for ms, _ in kernel_times(step, args.steps).values())
        host = host_ms(step, max(1, args.steps // 4))  # few steps: their launches fit in the queue
        baseline = wall if name == "bf16" else baseline
        print(
            f"{name:<12}{wall:9.3f}{busy:9.3f}{host:9.3f}{wall - busy:8.3f}{baseline / wall:7.2f}", flush=True
        )


if __name__ == "__main__":
    main()
