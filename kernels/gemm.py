"""Dense GEMM `gemm(a, b) = a @ b.T` in the `torch.nn.functional.linear` layout, forward and backward.

One product C = A @ Bᵀ (M x N, reduction K) serves the three products of a training step, on views
with no copy:
    forward  out = a    @ bᵀ      A = a    (M x K)   B = b    (N x K)
    dA       da  = dout @ b       A = dout (M x N)   B = bᵀ   (K x N)
    dB       db  = doutᵀ @ a      A = doutᵀ (N x M)  B = aᵀ   (K x M)

Main path (`_matmul_nt_kernel`, 16-bit inputs): a persistent matmul that reads A and B through TMA
tensor descriptors built on the device. The grid is min(#SMs, #tiles) programs; program p walks the
output tiles p, p + #SMs, ... in GROUP_M-swizzled order (`tile_pid`, so tiles running at the same
time share rows of A and columns of B in L2) in one `tl.range(..., flatten=True)` loop, which lets
the compiler pipeline the next tile's loads under the current tile's last steps and epilogue. Each
tile accumulates BLOCK_K steps in fp32 with `tl.dot` and stores through a C descriptor, cast once;
EPILOGUE_SUBTILE stores the tile as two BLOCK_N/2 halves, halving the staging shared memory.
TMA zero-fills loads outside the tensor and clips stores, so edges need no masks.

Layouts: a descriptor needs a unit last stride, so each operand's descriptor is chosen from its
view's strides (constexpr A_T / B_T, part of the autotune key so each layout tunes on its own):
    A (M x K)  stride(1) == 1: descriptor over [M, K], load [BLOCK_M, BLOCK_K]          (A_T = 0)
               stride(0) == 1: the transpose of a row-major K x M tensor: descriptor over
                               [K, M], load [BLOCK_K, BLOCK_M], `.T` in shared memory    (A_T = 1)
    B (N x K)  stride(1) == 1: descriptor over [N, K], load [BLOCK_N, BLOCK_K], `.T`     (B_T = 0)
               stride(0) == 1: descriptor over [K, N], load [BLOCK_K, BLOCK_N] as is     (B_T = 1)
The forward is (0, 0), dA is (0, 1), dB is (1, 1); a transposed `a` handed to the forward gives
(1, 0). wgmma reads either major order from shared memory, so a `.T` is a view of the staged tile,
not a data movement.

Arguments of `_matmul_nt_kernel`: a_ptr / b_ptr / c_ptr base pointers; stride_a, stride_b, stride_c
the one non-unit element stride of each (the row stride of the descriptor's [rows, cols] view above,
C being a new row-major M x N tensor); NUM_SMS the persistent grid size.

Fallback (`_matmul_nt_pointer_kernel`): where TMA cannot read a view — fp32 inputs (kept on full-fp32
`ieee` dots), a base pointer not 16-byte aligned, a non-unit stride that is not a positive multiple
of 16 bytes (N not a multiple of 8 for the output), or no unit stride at all (a strided slice, an
expanded grad_out) — the classic tiled pointer kernel runs: one program per output tile, element
(m, k) of A at m * stride_am + k * stride_ak (likewise B and C), int64 offsets, loads masked only on
the dimensions that are not a multiple of their block (EVEN_* heuristics), store masked.

Backend: `KERNELS_GEMM_BACKEND=triton|torch` (torch = `torch.nn.functional.linear`, cuBLAS on a GPU).
Pin one autotune config for both kernels with
`KERNELS_GEMM_CONFIG=BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,EPILOGUE_SUBTILE=1,num_warps=8,...`
(the pointer kernel ignores EPILOGUE_SUBTILE).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._common import (
    NAMESPACE,
    TMA_ALIGN_BYTES,
    TMA_ONLY_KEYS,
    backend,
    cdiv,
    input_precision,
    launch,
    num_sms,
    pick_configs,
    tile_pid,
    tma_config,
    tma_supported,
    use_tma_scratch,
    without_keys,
)
from kernels._common import matmul_config as _config

BACKEND_ENV = "KERNELS_GEMM_BACKEND"
CONFIG_ENV = "KERNELS_GEMM_CONFIG"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _tma_configs() -> list[triton.Config]:
    """Autotune candidates of the TMA kernel on sm90 (227 KiB shared memory per SM)."""
    return [
        # Two warpgroups on a 128x256 tile, the best operand reuse per loaded byte: 48 KiB of
        # operands per stage x 3, plus a 32 KiB (half) or 64 KiB (whole) staged C tile; the half
        # tile makes room for a 4th stage (224 KiB compiled for sm90, under the 227 KiB limit).
        tma_config(128, 256, 64, 8, 3, subtile=True),
        tma_config(128, 256, 64, 8, 3, subtile=False),
        tma_config(128, 256, 64, 8, 4, subtile=True),
        # The same tile the other way round: for dB (unit stride on M) the long side follows A.
        tma_config(256, 128, 64, 8, 3, subtile=True),
        # 128x128: twice the tiles, for the shapes where 128x256 leaves SMs idle in the last wave.
        tma_config(128, 128, 64, 8, 4, subtile=False),
        tma_config(128, 128, 64, 4, 4, subtile=True),
    ]


def _pointer_configs() -> list[triton.Config]:
    """Autotune candidates of the pointer kernel on sm90 with 16-bit inputs."""
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


# The interpreter runs one config (autotuning cannot time there); 64-wide tiles keep it fast, and
# the TMA kernel's half-tile epilogue runs there because it is the one with more to get wrong.
_CPU_CONFIG = tma_config(64, 64, 64, 4, 1, subtile=True)
# Persistent programs in the interpreter: few, so each walks several tiles as on a GPU.
_INTERPRETER_SMS = 3


@triton.autotune(
    configs=pick_configs(_tma_configs(), _CPU_CONFIG, CONFIG_ENV),
    key=["M", "N", "K", "A_T", "B_T"],
)
@triton.jit
def _matmul_nt_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_a,
    stride_b,
    stride_c,
    A_T: tl.constexpr,
    B_T: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr = 0,
):
    if A_T:
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, M], [stride_a, 1], [BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_a, 1], [BLOCK_M, BLOCK_K])
    if B_T:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [stride_b, 1], [BLOCK_K, BLOCK_N])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_b, 1], [BLOCK_N, BLOCK_K])
    C_BLOCK_N: tl.constexpr = BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [stride_c, 1], [BLOCK_M, C_BLOCK_N])

    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # The epilogue recomputes its tile from its own counter rather than reusing the loop's pid_m /
    # pid_n: in the flattened loop the next tile's prologue is already under way by then.
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k_tile in range(k_tiles):
            offs_k = k_tile * BLOCK_K
            a_tile = a_desc.load([offs_k, offs_m]).T if A_T else a_desc.load([offs_m, offs_k])
            b_tile = b_desc.load([offs_k, offs_n]) if B_T else b_desc.load([offs_n, offs_k]).T
            acc = tl.dot(a_tile, b_tile, acc)

        tile_id_c += NUM_SMS
        pid_m, pid_n = tile_pid(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_cm = pid_m * BLOCK_M
        offs_cn = pid_n * BLOCK_N
        if EPILOGUE_SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([offs_cm, offs_cn], left.to(c_ptr.dtype.element_ty))
            c_desc.store([offs_cm, offs_cn + BLOCK_N // 2], right.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([offs_cm, offs_cn], acc.to(c_ptr.dtype.element_ty))


@triton.autotune(
    configs=without_keys(pick_configs(_pointer_configs(), _CPU_CONFIG, CONFIG_ENV), TMA_ONLY_KEYS),
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
def _matmul_nt_pointer_kernel(
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


def _tma_transposed(view: torch.Tensor) -> bool | None:
    """How a TMA descriptor reads a 2-D view: False over [rows, cols] (unit stride on dim 1), True
    over [cols, rows] (unit stride on dim 0, the transpose of a row-major tensor), None if it cannot
    (base or the other stride not 16-byte aligned, or no unit stride)."""
    rows_stride, cols_stride = view.stride()
    if view.data_ptr() % TMA_ALIGN_BYTES:
        return None
    size = view.element_size()
    if cols_stride == 1 and rows_stride > 0 and rows_stride * size % TMA_ALIGN_BYTES == 0:
        return False
    if rows_stride == 1 and cols_stride > 0 and cols_stride * size % TMA_ALIGN_BYTES == 0:
        return True
    return None


def _matmul_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M x K) @ b (N x K)ᵀ -> new contiguous M x N tensor of a's dtype; any strides, no copies.
    The caller has checked the pair (`_check_pair`)."""
    m, k = a.shape
    n = b.shape[0]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()

    # out is new and row-major: a TMA descriptor takes it where its rows are 16-byte pitched.
    tma = (
        a.dtype != torch.float32 and n * out.element_size() % TMA_ALIGN_BYTES == 0 and tma_supported(a.device)
    )
    a_t, b_t = (_tma_transposed(a), _tma_transposed(b)) if tma else (None, None)
    if a_t is not None and b_t is not None:
        use_tma_scratch(a.device)
        sms = num_sms(a.device, _INTERPRETER_SMS)

        def persistent_grid(meta: dict[str, int]) -> tuple[int]:
            tiles = cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"])
            return (min(sms, tiles),)

        launch(
            _matmul_nt_kernel,
            persistent_grid,
            a,
            b,
            out,
            m,
            n,
            k,
            a.stride(1) if a_t else a.stride(0),
            b.stride(1) if b_t else b.stride(0),
            out.stride(0),
            A_T=a_t,
            B_T=b_t,
            NUM_SMS=sms,
        )
        return out

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    launch(
        _matmul_nt_pointer_kernel,
        grid,
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


def _forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ bᵀ on the backend KERNELS_GEMM_BACKEND names, read at every call (inside the op, so that
    a compiled graph still follows it)."""
    if backend(BACKEND_ENV) == "torch":
        return F.linear(a, b)
    return _matmul_nt(a, b)


def _backward(
    grad_out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    needs_input_grad: tuple[bool, ...],
    product: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """dA = dout @ b and dB = doutᵀ @ a, each the forward product on transposed views."""
    grad_out = grad_out.to(a.dtype)
    grad_a = product(grad_out, b.t()) if needs_input_grad[0] else None
    grad_b = product(grad_out.t(), a.t()) if needs_input_grad[1] else None
    return grad_a, grad_b


@torch.library.custom_op(f"{NAMESPACE}::gemm", mutates_args=())
def gemm_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`gemm` as a custom op, the node torch.compile puts in its graph; inputs as `gemm` checks them."""
    return _forward(a, b)


@gemm_op.register_fake
def _gemm_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[0]))


def _save_inputs(ctx: Any, inputs: tuple[torch.Tensor, torch.Tensor], output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _gemm_op_backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    a, b = ctx.saved_tensors
    return _backward(grad_out, a, b, ctx.needs_input_grad, gemm_op)


gemm_op.register_autograd(_gemm_op_backward, setup_context=_save_inputs)


class _Gemm(torch.autograd.Function):
    """The eager path: `gemm_op`'s forward and backward without the dispatcher (see `gemm`)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _forward(a, b)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        a, b = ctx.saved_tensors
        return _backward(grad_out, a, b, ctx.needs_input_grad, _forward)


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b.T` for a: M x K, b: N x K (bf16, fp16 or fp32, same device), differentiable in both.

    Inputs may be any strided views (transposes included). The backend comes from
    `KERNELS_GEMM_BACKEND` (`triton`, the default, or `torch` for the cuBLAS reference).
    Under torch.compile this is the custom op `torch.ops.gitcampaign_kernels.gemm`; eagerly the
    same forward and backward run without the dispatcher's round trips (docs/kernels.md).
    """
    _check_pair(a, b, "a", "b")
    if torch.compiler.is_compiling():
        return gemm_op(a, b)
    if not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return _forward(a, b)
    result: torch.Tensor = _Gemm.apply(a, b)
    return result
