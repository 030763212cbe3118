"""The vendor paths the benchmarks hold our kernels against (benchmarks/host_cost.py,
benchmarks/train_step.py, benchmarks/best_vendor.py), each the straightforward torch composition of
the same computation:

- bf16 GEMM: `torch.nn.functional.linear` (cuBLAS), torch's own autograd;
- fp8 GEMM: `ScaledMMLinear`, torch's reference quantiser (kernels.quant's float32 steps in torch,
  eager or torch.compile'd) feeding `torch._scaled_mm` (cuBLAS fp8) for the forward and both
  backward products, each operand quantised along its product's reduction dimension as ours are,
  with the same formats (e4m3 operands, GRAD_FP8_DTYPE gradients); blockwise takes cuBLAS block
  scaling where this torch build computes it (kernels.gemm_fp8.reference_kind says), else a
  dequantised bf16 matmul;
  under torch.compile it is one custom op (`gitcampaign_vendor::scaled_mm_linear`, its backward
  another), as ours are;
- grouped GEMM: `torch._grouped_mm` (CUTLASS) where it runs (bf16 on sm90), with torch's own
  autograd; elsewhere (the CPU smoke runs) one matmul per group.

`Products` holds the fp8 GEMM's three products on pre-quantised operands, each as our kernel alone
and as the torch backend's product (benchmarks/best_vendor.py, benchmarks/dev/fp8_dev.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from kernels import gemm_fp8, grouped_gemm, quant

Quantise = Callable[[torch.Tensor, str, torch.dtype], tuple[torch.Tensor, torch.Tensor]]


# One quantiser per compile backend, made once: torch.compile'd functions keep their compiled code.
_QUANTISERS: dict[str | None, Quantise] = {None: quant._quantize_torch}


def reference_quantiser(compile_backend: str | None) -> Quantise:
    """kernels.quant's torch reference quantiser: eager (None), or compiled by torch.compile with
    `compile_backend` (Inductor fuses its dozen elementwise and reduction steps into a kernel or two)."""
    if compile_backend not in _QUANTISERS:
        _QUANTISERS[compile_backend] = torch.compile(
            quant._quantize_torch, backend=compile_backend, dynamic=False
        )
    return _QUANTISERS[compile_backend]


class ScaledMMLinear(torch.autograd.Function):
    """out = a @ b.T in fp8 through torch._scaled_mm: the forward quantises a (activation kind)
    and b (weight kind); the backward quantises dOut, b.T, dOut.T and a.T afresh for dA and dB.
    The quantiser is `reference_quantiser(compile_backend)`."""

    @staticmethod
    def forward(
        ctx: Any, a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None
    ) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        ctx.granularity, ctx.compile_backend = granularity, compile_backend
        return _forward(a, b, granularity, compile_backend)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        return (*_backward(grad_out, a, b, ctx.granularity, ctx.compile_backend), None, None)


def _forward(a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None) -> torch.Tensor:
    """a @ b.T in fp8: a quantised as an activation, b as a weight."""
    quantise = reference_quantiser(compile_backend)
    x_kind, w_kind = gemm_fp8._X_KIND[granularity], gemm_fp8._W_KIND[granularity]
    qa, sa = quantise(a, x_kind, gemm_fp8.OPERAND_FP8_DTYPE)
    qb, sb = quantise(b, w_kind, gemm_fp8.OPERAND_FP8_DTYPE)
    return gemm_fp8._matmul_torch(qa, sa, qb, sb, granularity, w_kind, torch.bfloat16)


def _backward(
    grad_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """dA and dB, each operand quantised afresh along its product's reduction dimension."""
    quantise = reference_quantiser(compile_backend)
    x_kind, w_kind = gemm_fp8._X_KIND[granularity], gemm_fp8._W_KIND[granularity]
    grad_dtype, operand_dtype = gemm_fp8.GRAD_FP8_DTYPE[granularity], gemm_fp8.OPERAND_FP8_DTYPE
    qg, sg = quantise(grad_out, x_kind, grad_dtype)
    q_bt, s_bt = quantise(b.t(), w_kind, operand_dtype)
    grad_a = gemm_fp8._matmul_torch(qg, sg, q_bt, s_bt, granularity, w_kind, a.dtype)
    qg_t, sg_t = quantise(grad_out.t(), x_kind, grad_dtype)
    q_at, s_at = quantise(a.t(), x_kind, operand_dtype)
    grad_b = gemm_fp8._matmul_torch(qg_t, sg_t, q_at, s_at, granularity, x_kind, b.dtype)
    return grad_a, grad_b


def scaled_mm_linear(
    a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None
) -> torch.Tensor:
    """`ScaledMMLinear`; under torch.compile the custom op `gitcampaign_vendor::scaled_mm_linear`,
    opaque as ours are (its quantiser still compiled on its own). Traced into the graph instead,
    on CUDA with torch 2.11 (aot_eager and Inductor alike), its forward was right and both its
    gradients came out all zeros (2026-12-05, H100): a vendor that skips its backward is no vendor."""
    if torch.compiler.is_compiling():
        return scaled_mm_linear_op(a, b, granularity, compile_backend)
    out: torch.Tensor = ScaledMMLinear.apply(a, b, granularity, compile_backend)
    return out


@torch.library.custom_op("gitcampaign_vendor::scaled_mm_linear", mutates_args=())
def scaled_mm_linear_op(
    a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None
) -> torch.Tensor:
    return _forward(a, b, granularity, compile_backend)


@scaled_mm_linear_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


@torch.library.custom_op("gitcampaign_vendor::scaled_mm_linear_backward", mutates_args=())
def scaled_mm_linear_backward(
    grad_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None
) -> tuple[torch.Tensor, torch.Tensor]:
    return _backward(grad_out, a, b, granularity, compile_backend)


@scaled_mm_linear_backward.register_fake
def _(
    grad_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, granularity: str, compile_backend: str | None
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(a), torch.empty_like(b)


def _save(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    a, b, ctx.granularity, ctx.compile_backend = inputs
    ctx.save_for_backward(a, b)


def _op_backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    a, b = ctx.saved_tensors
    grad_a, grad_b = scaled_mm_linear_backward(grad_out, a, b, ctx.granularity, ctx.compile_backend)
    return grad_a, grad_b, None, None


scaled_mm_linear_op.register_autograd(_op_backward, setup_context=_save)


class Products:
    """The three products of one layer and granularity on pre-quantised operands, as the op runs them:
    forward (a, b), dA (dOut, b.T), dB (dOut.T, a.T), each (x, sx, y, sy, y_kind); `ours` is the GEMM
    kernel alone, `vendor` the torch backend's product (`gemm_fp8.reference_kind` says which)."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor, granularity: str) -> None:
        x_kind, w_kind = gemm_fp8._X_KIND[granularity], gemm_fp8._W_KIND[granularity]
        grad_dtype = gemm_fp8.GRAD_FP8_DTYPE[granularity]
        e4m3 = gemm_fp8.OPERAND_FP8_DTYPE
        self.granularity = granularity
        self.items = {
            "fwd": (*quant.quantize(a, x_kind, e4m3), *quant.quantize(b, w_kind, e4m3), w_kind),
            "dA": (*quant.quantize(grad, x_kind, grad_dtype), *quant.quantize(b.t(), w_kind, e4m3), w_kind),
            "dB": (
                *quant.quantize(grad.t(), x_kind, grad_dtype),
                *quant.quantize(a.t(), x_kind, e4m3),
                x_kind,
            ),
        }

    def ours(self, product: str) -> Callable[[], Any]:
        x, sx, y, sy, y_kind = self.items[product]
        y_group_n = quant.BLOCK if y_kind == "block128" else 1
        return functools.partial(
            gemm_fp8._matmul_triton, x, sx, y, sy, self.granularity, y_group_n, torch.bfloat16
        )

    def vendor(self, product: str) -> Callable[[], Any]:
        x, sx, y, sy, y_kind = self.items[product]
        return functools.partial(
            gemm_fp8._matmul_torch, x, sx, y, sy, self.granularity, y_kind, torch.bfloat16
        )


def grouped_mm(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Rows of group g of a times b[g].T (b: G x N x K)."""
    if grouped_gemm._torch_grouped_mm_usable(a, b):
        ends = torch.cumsum(group_sizes, 0, dtype=torch.int32)
        out: torch.Tensor = torch._grouped_mm(a, b.transpose(1, 2), offs=ends)
        return out
    chunks = a.split(group_sizes.tolist())
    return torch.cat([chunk @ b[g].T for g, chunk in enumerate(chunks)])
