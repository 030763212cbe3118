"""FP8 GEMM, out = a @ b.T in bf16, quantising its operands inside; forward and backward in fp8.

Algorithm. Every product here is ``C[m, n] = sum_r X[m, r] * Y[n, r]`` with both fp8 operands
contiguous along the reduction dimension r (the layout Hopper's fp8 wgmma wants for both operands):

- forward  out = a @ b.T:     X = a   (M x K),  Y = b   (N x K)
- backward dA  = dOut @ b:    X = dOut (M x N), Y = b.T (K x N)   (reduction over N)
- backward dB  = dOut.T @ a:  X = dOut.T (N x M), Y = a.T (K x M) (reduction over M)

Each operand is quantised along its product's reduction dimension (kernels.quant.quantize, which
takes transposed views directly). Scalings, for X and Y:

- tensorwise: one scale per tensor for both; the epilogue multiplies by sx * sy.
- rowwise: a scale per row of X and per row of Y (for the forward: per token and per output channel);
  the epilogue multiplies by sx[m] * sy[n].
- blockwise (DeepSeek-V3): X in 1x128 blocks along r; Y in 128x128 blocks when it is a weight
  (b, b.T) and in 1x128 blocks when it is an activation (a.T in dB). Scales change along r, so the
  K loop keeps an fp32 accumulator and adds each 128-deep partial product times
  sx[:, kb] * sy[:, kb] (the "promotion" that also sidesteps the limited-precision fp8 accumulation).

Where quantising twice gives identical bits, the backward reuses the forward's work: tensorwise and
128x128 quantisation commute with transposition, so b.T's fp8 copy is qb transposed, and tensorwise
dOut is quantised once for both products.

Gradient format (GRAD_FP8_DTYPE): dOut is cast to e5m2 for tensorwise, because a single scale over
a whole gradient tensor must cover its full dynamic range, and e5m2 trades a mantissa bit for
~2^15 times the range (normals 2^-14..57344 against 2^-6..448): the hybrid recipe of Micikevicius et
al. 2022, Transformer Engine and torchao tensorwise. Its cost is a few dB of SNR on dA/dB (one
mantissa bit is 6 dB on dOut's own error; hence the harness's 20 dB threshold for e5m2);
e4m3 for rowwise and blockwise, whose per-row / per-1x128-block scales already track the range, so
the extra mantissa bit halves the rounding error (torchao rowwise, DeepSeek-V3). The other operand of
each backward product (a weight or an activation) stays e4m3.

Grid. `_gemm_fp8_kernel`: one program per BLOCK_M x BLOCK_N output tile, a 1-D launch of
cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs grouped GROUP_M tile-rows at a time so that the programs
running together share X rows and Y columns in L2.

Pointer layouts (int64 row offsets; rows beyond M/N are wrapped onto valid rows and never stored).
- x: M x K fp8, row-major. y: N x K fp8, row-major. out: M x N, row-major, bf16 (fp16/fp32 for
  gradients of fp16/fp32 inputs).
- sx: fp32; tensorwise (1, 1); rowwise (M, 1); blockwise (M, ceil(K/128)), row stride stride_sxm.
- sy: fp32; tensorwise (1, 1); rowwise (N, 1); blockwise (ceil(N/Y_GROUP_N), ceil(K/128)),
  Y_GROUP_N = 128 for a weight's 128x128 blocks and 1 for 1x128 blocks; row stride stride_sym.

The `torch` backend (KERNELS_GEMM_BACKEND=torch) is the vendor reference, fed by the torch
quantiser (bit-identical to ours on a GPU): torch._scaled_mm (cuBLAS fp8) for tensorwise and
rowwise; for blockwise cuBLAS block scaling (F.scaled_mm or torch._scaled_mm with 1x128/128x128
scales) where a runtime probe shows this torch build computes it correctly, else dequantise + bf16
matmul. `reference_kind(granularity)` says which one runs.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton
import triton.language as tl

from kernels import quant
from kernels._common import backend, pick_configs, tile_pid
from kernels._common import matmul_config as _config

BACKEND_ENV = "KERNELS_GEMM_BACKEND"
CONFIG_ENV = "KERNELS_GEMM_FP8_CONFIG"

GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
GRAD_FP8_DTYPE: dict[str, torch.dtype] = {
    "tensorwise": torch.float8_e5m2,
    "rowwise": torch.float8_e4m3fn,
    "blockwise": torch.float8_e4m3fn,
}
OPERAND_FP8_DTYPE = torch.float8_e4m3fn
# Quantiser granularity (kernels.quant) of the activation-like operand X and of a weight operand Y.
_X_KIND = {"tensorwise": "tensorwise", "rowwise": "rowwise", "blockwise": "blockwise"}
_W_KIND = {"tensorwise": "tensorwise", "rowwise": "rowwise", "blockwise": "block128"}
_SCALING_CODE = {"tensorwise": 0, "rowwise": 1, "blockwise": 2}
INPUT_DTYPES = quant.INPUT_DTYPES


def _configs() -> list[triton.Config]:
    """Hopper fp8 tiles: BLOCK_K = 128 (a whole scale block, 128 bytes per row = one swizzle atom);
    128x256 and 256x128 with 8 warps (two warpgroups) for large problems, 128x128 with 3-4 stages as
    the middle ground, 64-row tiles for small M (decode-like) so that more SMs get work."""
    shapes = [
        (128, 256, 8, 3),
        (256, 128, 8, 3),
        (128, 128, 8, 4),
        (128, 128, 4, 4),
        (64, 256, 4, 4),
        (64, 128, 4, 4),
    ]
    return [_config(bm, bn, 128, warps, stages) for bm, bn, warps, stages in shapes]


# 64x64 tiles keep every CPU test shape (<= 256) at a handful of interpreted programs.
_CPU_CONFIG = _config(64, 64, 128, 4, 3)


@triton.autotune(
    configs=pick_configs(_configs(), _CPU_CONFIG, CONFIG_ENV),
    key=["M", "N", "K", "SCALING", "Y_GROUP_N"],
)
@triton.jit
def _gemm_fp8_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    sx_ptr,
    sy_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_yn,
    stride_om,
    stride_sxm,
    stride_sym,
    SCALING: tl.constexpr,
    Y_GROUP_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """C = (X * sx) @ (Y * sy).T for one output tile; SCALING 0 tensor, 1 row, 2 block."""
    pid_m, pid_n = tile_pid(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Wrapped rows read valid memory without a mask; their results are masked out on store.
    rows_x = (offs_m % M).to(tl.int64)
    rows_y = (offs_n % N).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows_x[:, None] * stride_xm + offs_k[None, :]
    y_ptrs = y_ptr + rows_y[None, :] * stride_yn + offs_k[:, None]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kt * BLOCK_K
        x = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        y = tl.load(y_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if SCALING == 2:
            kb = (kt * BLOCK_K) // 128
            sx = tl.load(sx_ptr + rows_x * stride_sxm + kb)
            sy = tl.load(sy_ptr + (rows_y // Y_GROUP_N) * stride_sym + kb)
            acc += tl.dot(x, y) * (sx[:, None] * sy[None, :])
        else:
            acc = tl.dot(x, y, acc)
        x_ptrs += BLOCK_K
        y_ptrs += BLOCK_K

    if SCALING == 0:
        acc = acc * (tl.load(sx_ptr) * tl.load(sy_ptr))
    elif SCALING == 1:
        sx = tl.load(sx_ptr + rows_x * stride_sxm)
        sy = tl.load(sy_ptr + rows_y * stride_sym)
        acc = acc * (sx[:, None] * sy[None, :])

    out_ptrs = out_ptr + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _check_operands(x: torch.Tensor, sx: torch.Tensor, y: torch.Tensor, sy: torch.Tensor) -> None:
    """The kernel's contract on quantised operands (they come from kernels.quant, so a failure here
    is a bug in this module, still reported as ValueError with the fix)."""
    for name, op in (("x", x), ("y", y)):
        if op.dtype not in quant.FP8_MAX or op.dim() != 2 or not op.is_contiguous():
            raise ValueError(
                f"{name} must be a contiguous 2-D fp8 tensor; quantise it with kernels.quant.quantize"
            )
    for name, scales in (("sx", sx), ("sy", sy)):
        if scales.dtype != torch.float32 or scales.dim() != 2 or not scales.is_contiguous():
            raise ValueError(f"{name} must be contiguous 2-D float32 scales from kernels.quant.quantize")
    if x.shape[1] != y.shape[1] or x.device != y.device:
        raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must share K and device")


def _matmul_triton(
    x: torch.Tensor,
    sx: torch.Tensor,
    y: torch.Tensor,
    sy: torch.Tensor,
    granularity: str,
    y_group_n: int,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """Launch `_gemm_fp8_kernel`: (x * sx) @ (y * sy).T -> out_dtype, M x N."""
    _check_operands(x, sx, y, sy)
    if granularity == "blockwise" and any(128 % c.kwargs["BLOCK_K"] for c in _gemm_fp8_kernel.configs):
        raise ValueError(f"blockwise needs BLOCK_K dividing 128 (one scale per K tile); fix {CONFIG_ENV}")
    m, k = x.shape
    n = y.shape[0]
    out = torch.empty((m, n), dtype=out_dtype, device=x.device)

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    _gemm_fp8_kernel[grid](
        x, y, out, sx, sy, m, n, k, x.stride(0), y.stride(0), out.stride(0), sx.stride(0), sy.stride(0),
        SCALING=_SCALING_CODE[granularity], Y_GROUP_N=y_group_n,
    )  # fmt: skip
    return out


def _dequantise(q: torch.Tensor, scales: torch.Tensor, kind: str) -> torch.Tensor:
    """q * scales broadcast over each group, in float32."""
    rows, cols = q.shape
    return q.to(torch.float32) * quant.expand_scales(scales, kind, rows, cols)


def _dequantised_matmul(
    x: torch.Tensor, sx: torch.Tensor, x_kind: str, y: torch.Tensor, sy: torch.Tensor, y_kind: str
) -> torch.Tensor:
    """Reference for what cuBLAS cannot take: dequantise to bf16, bf16 matmul (fp32 accumulation)."""
    xd = _dequantise(x, sx, x_kind).to(torch.bfloat16)
    yd = _dequantise(y, sy, y_kind).to(torch.bfloat16)
    return xd @ yd.t()


def _cublas_block_scales(
    sx: torch.Tensor, sy: torch.Tensor, y_kind: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Our scales in the layouts cuBLAS block scaling takes (as PyTorch's own blockwise tests build
    them): 1x128 scales (rows, K/128) outer-dim-major (stride(0) == 1); 128x128 scales with the
    K-block dim padded to a multiple of 4 and transposed to (K/128 padded, N/128)."""
    scale_x = sx.t().contiguous().t()
    if y_kind == "block128":
        k_blocks = sy.shape[1]
        scale_y = torch.nn.functional.pad(sy, (0, -k_blocks % 4)).t()
    else:
        scale_y = sy.t().contiguous().t()
    return scale_x, scale_y


def _scaled_mm_blockwise(
    x: torch.Tensor, sx: torch.Tensor, y: torch.Tensor, sy: torch.Tensor, y_kind: str, entry: str
) -> torch.Tensor:
    """cuBLAS fp8 with 1x128 scales on x and 128x128 (or 1x128) scales on y, through `entry`:
    'F.scaled_mm' (explicit scaling recipes, torch >= 2.10) or 'torch._scaled_mm' (infers them)."""
    scale_x, scale_y = _cublas_block_scales(sx, sy, y_kind)
    if entry == "F.scaled_mm":
        recipes = torch.nn.functional.ScalingType
        recipe_y = recipes.BlockWise128x128 if y_kind == "block128" else recipes.BlockWise1x128
        return torch.nn.functional.scaled_mm(
            x, y.t(), scale_x, recipes.BlockWise1x128, scale_y, recipe_y, output_dtype=torch.bfloat16
        )
    return torch._scaled_mm(x, y.t(), scale_a=scale_x, scale_b=scale_y, out_dtype=torch.bfloat16)


@functools.cache
def _blockwise_scaled_mm_entry(y_kind: str, device_index: int) -> str | None:
    """Probe once per device and y scaling: which torch entry point computes the blockwise product
    on cuBLAS (12.9+, sm90), or None when this torch/cuBLAS cannot. The result is checked against
    the dequantised product, so an entry that accepts the call but scales differently is not used.
    K = 640 (5 K blocks) exercises the padding of 128x128 scales."""
    device = torch.device("cuda", device_index)
    generator = torch.Generator(device=device).manual_seed(0)
    m, n, k = 256, 256, 640
    a = torch.randn(m, k, device=device, generator=generator)
    b = torch.randn(n, k, device=device, generator=generator)
    x, sx = quant._quantize_torch(a, "blockwise", OPERAND_FP8_DTYPE)
    y, sy = quant._quantize_torch(b, y_kind, OPERAND_FP8_DTYPE)
    expected = _dequantise(x, sx, "blockwise") @ _dequantise(y, sy, y_kind).t()
    entries = (
        ("F.scaled_mm", "torch._scaled_mm")
        if hasattr(torch.nn.functional, "scaled_mm")
        else ("torch._scaled_mm",)
    )
    for entry in entries:
        try:
            got = _scaled_mm_blockwise(x, sx, y, sy, y_kind, entry).to(torch.float32)
        except (RuntimeError, ValueError, NotImplementedError, TypeError):
            continue
        if torch.linalg.vector_norm(got - expected) <= 1e-2 * torch.linalg.vector_norm(expected):
            return entry
    return None


REFERENCE_SCALED_MM = "torch._scaled_mm"
REFERENCE_BLOCK_SCALED = "cuBLAS block scaling via "
REFERENCE_DEQUANTISED = "dequantise + bf16 matmul"


def reference_kind(granularity: str, device: torch.device | None = None) -> str:
    """What the torch backend runs for a granularity on this machine (for reports and benchmarks).

    'torch._scaled_mm' (cuBLAS fp8) for tensorwise and rowwise on CUDA; for blockwise
    'cuBLAS block scaling via F.scaled_mm' (or via torch._scaled_mm) where a one-off probe finds
    that this torch/cuBLAS computes 1x128 x 128x128 and 1x128 x 1x128 products correctly, else
    'dequantise + bf16 matmul' (also the answer without CUDA). Shapes cuBLAS rejects (K or N not a
    multiple of 16; for blockwise M, N, K not multiples of 128) use the dequantised product per call.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(
            f"granularity={granularity!r} is not supported; use one of {', '.join(GRANULARITIES)}"
        )
    if not torch.cuda.is_available():
        return REFERENCE_DEQUANTISED
    device = device or torch.device("cuda", torch.cuda.current_device())
    if granularity == "blockwise":
        index = device.index if device.index is not None else torch.cuda.current_device()
        entries = [_blockwise_scaled_mm_entry(kind, index) for kind in ("block128", "blockwise")]
        if entries[0] is None or entries[1] is None:
            return REFERENCE_DEQUANTISED
        return REFERENCE_BLOCK_SCALED + entries[0]
    return REFERENCE_SCALED_MM


def _matmul_torch(
    x: torch.Tensor,
    sx: torch.Tensor,
    y: torch.Tensor,
    sy: torch.Tensor,
    granularity: str,
    y_kind: str,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """The vendor reference for one product; see reference_kind."""
    x_kind = _X_KIND[granularity]
    m, k = x.shape
    n = y.shape[0]
    fits = x.is_cuda and k % 16 == 0 and n % 16 == 0
    if fits and granularity == "tensorwise":
        out = torch._scaled_mm(
            x,
            y.t(),
            scale_a=sx.reshape(()),
            scale_b=sy.reshape(()),
            out_dtype=torch.bfloat16,
            use_fast_accum=True,
        )
    elif fits and granularity == "rowwise":
        out = torch._scaled_mm(
            x, y.t(), scale_a=sx, scale_b=sy.reshape(1, n), out_dtype=torch.bfloat16, use_fast_accum=True
        )
    elif fits and k % 128 == 0 and n % 128 == 0 and m % 128 == 0:
        entry = _blockwise_scaled_mm_entry(y_kind, x.device.index or 0)
        if entry is None:
            out = _dequantised_matmul(x, sx, x_kind, y, sy, y_kind)
        else:
            out = _scaled_mm_blockwise(x, sx, y, sy, y_kind, entry)
    else:
        out = _dequantised_matmul(x, sx, x_kind, y, sy, y_kind)
    return out.to(out_dtype)


def _product(
    x: torch.Tensor,
    sx: torch.Tensor,
    y: torch.Tensor,
    sy: torch.Tensor,
    granularity: str,
    y_kind: str,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """(x * sx) @ (y * sy).T on the chosen backend."""
    if backend(BACKEND_ENV) == "torch":
        return _matmul_torch(x, sx, y, sy, granularity, y_kind, out_dtype)
    y_group_n = quant.BLOCK if y_kind == "block128" else 1
    return _matmul_triton(x, sx, y, sy, granularity, y_group_n, out_dtype)


def _quantize(x: torch.Tensor, kind: str, fp8_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The torch backend is the whole vendor path (torch quantiser + cuBLAS); the triton backend uses
    kernels.quant, whose own backend variable can swap in the reference quantiser."""
    if backend(BACKEND_ENV) == "torch":
        return quant._quantize_torch(x, kind, fp8_dtype)
    return quant.quantize(x, kind, fp8_dtype)


def _transposed(q: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp8 copy of x.T for quantisations that commute with transposition (tensorwise, 128x128)."""
    return q.t().contiguous(), scales.t().contiguous()


class _GemmFP8(torch.autograd.Function):
    """out = a @ b.T with fp8 operands; the backward quantises along each product's reduction dim.

    Saved for the backward, only what it reads: tensorwise the fp8 operands (their transposes are
    the backward's operands); rowwise a and b (column scales need a fresh pass); blockwise a (1x128
    along M needs a fresh pass) and b's 128x128 fp8 copy (its transpose serves dA).
    """

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, a: torch.Tensor, b: torch.Tensor, granularity: str
    ) -> torch.Tensor:
        qa, sa = _quantize(a, _X_KIND[granularity], OPERAND_FP8_DTYPE)
        qb, sb = _quantize(b, _W_KIND[granularity], OPERAND_FP8_DTYPE)
        out = _product(qa, sa, qb, sb, granularity, _W_KIND[granularity], torch.bfloat16)
        if granularity == "tensorwise":
            ctx.save_for_backward(qa, sa, qb, sb)
        elif granularity == "rowwise":
            ctx.save_for_backward(a, b)
        else:
            ctx.save_for_backward(a, qb, sb)
        ctx.granularity = granularity  # type: ignore[attr-defined]
        ctx.dtypes = (a.dtype, b.dtype)  # type: ignore[attr-defined]
        return out

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        granularity: str = ctx.granularity  # type: ignore[attr-defined]
        a_dtype, b_dtype = ctx.dtypes  # type: ignore[attr-defined]
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]  # type: ignore[attr-defined]
        grad_dtype = GRAD_FP8_DTYPE[granularity]
        x_kind, w_kind = _X_KIND[granularity], _W_KIND[granularity]
        grad_a = grad_b = None

        if granularity == "tensorwise":
            qa, sa, qb, sb = saved
            # One tensor-wide scale serves both products: quantise dOut once.
            qg, sg = _quantize(grad_out, x_kind, grad_dtype)
            if need_a:
                q_bt, s_bt = _transposed(qb, sb)
                grad_a = _product(qg, sg, q_bt, s_bt, granularity, w_kind, a_dtype)
            if need_b:
                qg_t, sg_t = _transposed(qg, sg)
                q_at, s_at = _transposed(qa, sa)
                grad_b = _product(qg_t, sg_t, q_at, s_at, granularity, x_kind, b_dtype)
            return grad_a, grad_b, None

        if need_a:
            qg, sg = _quantize(grad_out, x_kind, grad_dtype)
            if granularity == "rowwise":
                q_bt, s_bt = _quantize(saved[1].t(), w_kind, OPERAND_FP8_DTYPE)
            else:
                q_bt, s_bt = _transposed(saved[1], saved[2])
            grad_a = _product(qg, sg, q_bt, s_bt, granularity, w_kind, a_dtype)
        if need_b:
            qg_t, sg_t = _quantize(grad_out.t(), x_kind, grad_dtype)
            q_at, s_at = _quantize(saved[0].t(), x_kind, OPERAND_FP8_DTYPE)
            grad_b = _product(qg_t, sg_t, q_at, s_at, granularity, x_kind, b_dtype)
        return grad_a, grad_b, None


def _check_inputs(a: torch.Tensor, b: torch.Tensor, granularity: str) -> None:
    """Reject inputs gemm_fp8 does not handle, naming the fix."""
    if granularity not in GRANULARITIES:
        raise ValueError(
            f"granularity={granularity!r} is not supported; use one of {', '.join(GRANULARITIES)}"
        )
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(
                f"{name} must be a 2-D tensor, got {shape}; flatten leading dims with .reshape(-1, K)"
            )
        if t.dtype not in INPUT_DTYPES:
            raise ValueError(
                f"{name} has dtype {t.dtype}; convert it to torch.bfloat16 (fp16/fp32 also accepted)"
            )
        if 0 in t.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}; gemm_fp8 needs non-empty operands")
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: K must match; "
            "b is N x K (the F.linear weight layout)"
        )
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}; move both to one device")
    if a.dtype != b.dtype:
        raise ValueError(f"a is {a.dtype} and b is {b.dtype}; cast both to torch.bfloat16")


def gemm_fp8(a: torch.Tensor, b: torch.Tensor, granularity: str = "tensorwise") -> torch.Tensor:
    """bf16 a @ b.T computed in fp8 (e4m3 operands, GRAD_FP8_DTYPE gradients), differentiable.

    a: M x K activations, b: N x K weights (bf16; fp16/fp32 accepted), any M, N, K.
    """
    _check_inputs(a, b, granularity)
    out: torch.Tensor = _GemmFP8.apply(a, b, granularity)
    return out
