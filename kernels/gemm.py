"""Dense GEMM `gemm(a, b) = a @ b.T` in the `torch.nn.functional.linear` layout, forward and backward.

Algorithm: the classic tiled Triton matmul. Each program owns one BLOCK_M x BLOCK_N tile of the
output, walks K in BLOCK_K steps, accumulates in fp32 with `tl.dot` and casts once on store.
Programs are ordered in GROUP_M-tall column bands (swizzled tile order) so that tiles running at the
same time share rows of A and columns of B in L2.

One generic kernel computes C = A @ Bᵀ for any strides, so the three products of a training step
are the same kernel on views, with no copy:
    forward  out = a    @ bᵀ      A = a    (M x K)   B = b    (N x K)
    dA       da  = dout @ b       A = dout (M x N)   B = bᵀ   (K x N)
    dB       db  = doutᵀ @ a      A = doutᵀ (N x M)  B = aᵀ   (K x M)
Triton specialises integer arguments equal to 1 (and marks those divisible by 16), so a unit stride
along either dimension still gets vectorised, pipelined loads (checked by compiling all three layouts
for sm90); the autotune key includes the reduction strides so each layout is tuned on its own.

Grid: (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),), one program per output tile.

Pointer arguments of `_matmul_nt_kernel` (element strides, any layout):
    a_ptr  A, M x K, element (m, k) at m * stride_am + k * stride_ak
    b_ptr  B, N x K, element (n, k) at n * stride_bn + k * stride_bk
    c_ptr  C, M x N, element (m, n) at m * stride_cm + n * stride_cn (written, every element)

Edges: loads are masked on M, N and K only where that dimension is not a multiple of its block
(EVEN_* heuristics, decided at compile time), so the Llama shapes run mask-free loads; the store
is masked. Edges use masks rather than folding indices back with a modulo because a modulo hides the
contiguity of the unit-stride dimension of transposed operands, which stops vectorised, pipelined loads.
Row/column offsets are int64 before they multiply a stride, so M*K past 2**31 elements is safe.

Backend: `KERNELS_GEMM_BACKEND=triton|torch` (torch = `torch.nn.functional.linear`, cuBLAS on a GPU).
Pin one autotune config with `KERNELS_GEMM_CONFIG=BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,...`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._common import backend, input_precision, pick_configs, tile_pid
from kernels._common import matmul_config as _config

BACKEND_ENV = "KERNELS_GEMM_BACKEND"
CONFIG_ENV = "KERNELS_GEMM_CONFIG"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _hopper_configs() -> list[triton.Config]:
    """Autotune candidates for sm90 with 16-bit inputs (shared memory: 227 KiB per SM)."""
    return [
        # Large tiles: two warpgroups feed wgmma; 48 KiB of operands per stage, 3-4 stages fit.
        _config(128, 256, 64, 8, 3),
        _config(256, 128, 64, 8, 3),
        _config(128, 256, 64, 8, 4),
        _config(128, 128, 64, 8, 4),
        _config(128, 128, 64, 8, 3),
        # Medium tiles: more programs than SMs when M or N is a few thousand.
        _config(128, 128, 64, 4, 4),
        _config(64, 128, 64, 4, 4),
        _config(128, 64, 64, 4, 4),
        # Small M (decode-like, M <= 64): do not waste a 128-row tile on one row.
        _config(64, 64, 128, 4, 4),
    ]


# The interpreter runs one config (autotuning cannot time there); 64-wide tiles keep it fast.
_CPU_CONFIG = _config(64, 64, 64, 4, 1)


@triton.autotune(
    configs=pick_configs(_hopper_configs(), _CPU_CONFIG, CONFIG_ENV),
    key=["M", "N", "K", "stride_ak", "stride_bk", "INPUT_PRECISION"],
)
@triton.heuristics(
    {
        "EVEN_M": lambda meta: meta["M"] % meta["BLOCK_M"] == 0,
        "EVEN_N": lambda meta: meta["N"] % meta["BLOCK_N"] == 0,
        "EVEN_K": lambda meta: meta["K"] % meta["BLOCK_K"] == 0,
    }
)
@triton.jit
def _matmul_nt_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_pid(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + cols.to(tl.int64)[None, :] * stride_bn + offs_k[:, None] * stride_bk
    # Masks only where an edge can be: an EVEN_* dimension ORs its mask to a constant True that the
    # compiler drops, since a mask it cannot prove uniform over 16 bytes of the contiguous dimension
    # would stop vectorised, pipelined loads.
    row_ok = (rows < M) | tl.full((BLOCK_M,), EVEN_M, tl.int1)
    col_ok = (cols < N) | tl.full((BLOCK_N,), EVEN_N, tl.int1)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_ok = (offs_k < K - k * BLOCK_K) | tl.full((BLOCK_K,), EVEN_K, tl.int1)
        a_tile = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b_tile = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a_tile, b_tile, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


def _matmul_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M x K) @ b (N x K)ᵀ -> new contiguous M x N tensor of a's dtype; any strides, no copies."""
    _check_pair(a, b, "a", "b")
    m, k = a.shape
    n = b.shape[0]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    _matmul_nt_kernel[grid](
        a,
        b,
        out,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        INPUT_PRECISION=input_precision(a.dtype),
    )
    return out


def _check_pair(a: torch.Tensor, b: torch.Tensor, a_name: str, b_name: str) -> None:
    """Raise ValueError naming the fix when (a, b) cannot be multiplied as a @ bᵀ."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(
            f"gemm needs 2-D {a_name} (M x K) and {b_name} (N x K), got {tuple(a.shape)} and "
            f"{tuple(b.shape)}; flatten leading dimensions with .reshape(-1, K)"
        )
    if a.dtype != b.dtype:
        raise ValueError(
            f"gemm needs one dtype, got {a_name}: {a.dtype}, {b_name}: {b.dtype}; cast with .to()"
        )
    if a.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"gemm supports {SUPPORTED_DTYPES}, got {a.dtype}; cast with .to(torch.bfloat16)")
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"gemm needs {a_name} (M x K) and {b_name} (N x K) with the same K, got {tuple(a.shape)} and "
            f"{tuple(b.shape)}; pass the weight in nn.Linear layout (out_features x in_features)"
        )
    if a.device != b.device:
        raise ValueError(
            f"gemm needs both tensors on one device, got {a_name} on {a.device}, {b_name} on {b.device}; "
            "move them with .to(device)"
        )


class _Gemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _matmul_nt(a, b)

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        a, b = ctx.saved_tensors
        grad_out = grad_out.to(a.dtype)
        needs_a, needs_b = ctx.needs_input_grad
        grad_a = _matmul_nt(grad_out, b.t()) if needs_a else None
        grad_b = _matmul_nt(grad_out.t(), a.t()) if needs_b else None
        return grad_a, grad_b


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b.T` for a: M x K, b: N x K (bf16, fp16 or fp32, same device), differentiable in both.

    Inputs may be any strided views (transposes included). The backend comes from
    `KERNELS_GEMM_BACKEND` (`triton`, the default, or `torch` for the cuBLAS reference).
    """
    _check_pair(a, b, "a", "b")
    if backend(BACKEND_ENV) == "torch":
        return F.linear(a, b)
    result: torch.Tensor = _Gemm.apply(a, b)
    return result
