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
dOut is quantised once for both products. Those fp8 copies are transposed by `_transpose_kernel`
(tiles through shared memory, so both the read and the write are coalesced).

Gradient format (GRAD_FP8_DTYPE): dOut is cast to e5m2 for tensorwise, because a single scale over
a whole gradient tensor must cover its full dynamic range, and e5m2 trades a mantissa bit for
~2^15 times the range (normals 2^-14..57344 against 2^-6..448): the hybrid recipe of Micikevicius et
al. 2022, Transformer Engine and torchao tensorwise. Its cost is a few dB of SNR on dA/dB (one
mantissa bit is 6 dB on dOut's own error; hence the harness's 20 dB threshold for e5m2);
e4m3 for rowwise and blockwise, whose per-row / per-1x128-block scales already track the range, so
the extra mantissa bit halves the rounding error (torchao rowwise, DeepSeek-V3). The other operand of
each backward product (a weight or an activation) stays e4m3.

Grid. `_gemm_fp8_tma_kernel` (wherever TMA can address x, y and out: 16-byte aligned bases and row
pitches, so K a multiple of 16 and N of 8 for bf16 out) is persistent: P = min(#SMs * OCCUPANCY,
tiles) programs, program p computing tiles p, p + P, ... in GROUP_M-grouped order
(`tl.range(flatten=True)` lets the software pipeline run across tile boundaries). x and y tiles
arrive by TMA from device-side descriptors, whose zero fill past M, N and K is neutral for the dot
(so edges need no masks), and the output leaves through one (stores clipped at M, N).
Tensorwise/rowwise accumulate in the tensor cores and scale once in the epilogue
(acc * sx[m] * sy[n]); blockwise steps K by BLOCK_K = 128 = the scale block and adds each step's
dot times sx[:, k] * sy[k] into the fp32 accumulator, sy being one scalar per tile and step for
128x128 weight blocks (BLOCK_N <= 128) and per column for 1x128 blocks; the next step's scales load
ahead of the dot's wait where registers allow.
Blockwise on an H100/H200 (sm_90) goes instead to `kernels._gluon_fp8` (same operands and grid
order, unless a tile is pinned in KERNELS_GEMM_FP8_CONFIG): a Gluon kernel warp-specialised by hand
into a TMA producer and two 64-row consumers tied only by mbarriers, so that one promotes while the
other's product runs on the tensor cores. It takes the 128x128 weight blocks (forward, dA) and the
dB product's 1x128 blocks where X's and Y's row counts are multiples of 4 (its TMA loads of the
scales' kb-major copies need 16-byte row pitches).
`_gemm_fp8_kernel` (the fallback for anything else): one program per BLOCK_M x BLOCK_N output tile,
a 1-D launch of cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs in the same grouped order.

Layouts (the pointer kernel uses int64 row offsets and wraps rows beyond M/N onto valid rows, never
stored; the TMA kernel clamps scale rows to M-1/N-1 and indexes scales in int32: a scale tensor
has M*K/128 elements, far below 2^31 for any x that fits in memory).
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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernels import _gluon_fp8, quant
from kernels._common import (
    NAMESPACE,
    TMA_ALIGN_BYTES,
    TMA_ONLY_KEYS,
    backend,
    cdiv,
    launch,
    pick_configs,
    pinned,
    tile_pid,
    tma_config,
    tma_supported,
    use_tma_scratch,
    without_keys,
)
from kernels._common import matmul_config as _config
from kernels._common import num_sms as device_sms

BACKEND_ENV = "KERNELS_GEMM_BACKEND"
CONFIG_ENV = "KERNELS_GEMM_FP8_CONFIG"
TRANSPOSE_CONFIG_ENV = "KERNELS_FP8_TRANSPOSE_CONFIG"

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
    """Pointer-kernel (fallback) tiles: BLOCK_K = 128 (a whole scale block, 128 bytes per row = one
    swizzle atom); 128x256 and 256x128 with 8 warps (two warpgroups) for large problems, 128x128 as
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


def _tma_config(
    bm: int, bn: int, warps: int, stages: int, subtile: bool, occupancy: int = 1
) -> triton.Config:
    config = tma_config(bm, bn, 128, warps, stages, subtile)
    config.kwargs["OCCUPANCY"] = occupancy
    return config


# Persistent TMA tiles, BLOCK_K = 128 (one scale block; 128 fp8 bytes = one 128-byte swizzle atom),
# and the scalings each serves: (BLOCK_M, BLOCK_N, warps, stages, EPILOGUE_SUBTILE, OCCUPANCY,
# scalings); OCCUPANCY is the number of persistent programs per SM.
# Shared memory per stage is (BLOCK_M + BLOCK_N) * 128 bytes plus the epilogue's bf16 buffer (halved
# by EPILOGUE_SUBTILE): 128x256 / 256x128 take 48 KiB a stage, 3 stages + 32 KiB = 176 KiB (208 KiB
# whole), 4 stages + 32 KiB = 224 KiB (ptxas: 229,408 of 232,448 bytes); 128x128 takes 32 KiB a
# stage, 4 stages + 32 KiB = 160 KiB.
# Blockwise holds the accumulator and the step's dot result at once (plus per-column scales for
# 1x128 y blocks), so only 128x128 on 8 warps (64 + 64 accumulator registers a thread) stays clear
# of spills there (checked with ptxas for sm_90a: 128x256 / 256x128 spill on 8 warps and 16 warps
# cap registers at 128); tensorwise/rowwise accumulate in place and take the large tiles.
# Both warpgroups of a program wait for each step's dot before promoting it (Triton synchronises
# them every step), so the tensor cores idle during the promotion; two one-warpgroup programs per SM
# (128x64 / 64x128 tiles, 166-247 registers and 89 KiB each: two fit in 64K registers and 227 KiB)
# interleave instead, one's dot running during the other's promotion, at the cost of more L2
# traffic per flop.
_TMA_TILES = (
    (128, 256, 8, 3, True, 1, (0, 1)),
    (128, 256, 8, 4, True, 1, (0, 1)),
    (256, 128, 8, 3, True, 1, (0, 1)),
    (128, 256, 8, 3, False, 1, (0, 1)),
    (128, 128, 8, 4, False, 1, (0, 1, 2)),
    (128, 128, 4, 4, True, 1, (0, 1)),
    (128, 128, 8, 3, True, 1, (2,)),
    (128, 64, 4, 3, False, 2, (2,)),
    (64, 128, 4, 3, False, 2, (2,)),
)


# The scalings each tile serves, by the tile's key (`_tile_key`).
_TMA_SERVES = {tuple(tile[:6]): tile[6] for tile in _TMA_TILES}


def _tma_configs() -> list[triton.Config]:
    return [_tma_config(*tile[:6]) for tile in _TMA_TILES]


def _tile_key(config: triton.Config) -> tuple[int, ...]:
    kw = config.kwargs
    return (
        kw["BLOCK_M"],
        kw["BLOCK_N"],
        config.num_warps,
        config.num_stages,
        kw.get("EPILOGUE_SUBTILE", 0),
        kw.get("OCCUPANCY", 1),
    )


def _prune_configs(configs: list[triton.Config], nargs: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """The configs of _TMA_TILES that serve this launch's SCALING (all of them when none does)."""
    kept = [c for c in configs if kwargs["SCALING"] in _TMA_SERVES.get(_tile_key(c), ())]
    return kept or configs


# 64x64 tiles keep every CPU test shape (<= 256) at a handful of interpreted programs.
_CPU_CONFIG = _config(64, 64, 128, 4, 3)
_CPU_TMA_CONFIG = _tma_config(64, 64, 4, 3, True)


def _pointer_configs() -> list[triton.Config]:
    """A pinned config written for the TMA kernel serves the pointer kernel without its TMA-only keys."""
    return without_keys(pick_configs(_configs(), _CPU_CONFIG, CONFIG_ENV), (*TMA_ONLY_KEYS, "OCCUPANCY"))


@triton.autotune(configs=_pointer_configs(), key=["M", "N", "K", "SCALING", "Y_GROUP_N"])
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


@triton.jit
def _block_scales(
    sx_ptr, sy_ptr, rows_x, rows_y, kb, n_block, stride_sxm, stride_sym,
    Y_GROUP_N: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """The 128-deep K block `kb`'s scales of a tile: sx per row (BLOCK_M) and sy as one scalar when the tile
    lies inside one Y_GROUP_N-row block of y (a 128x128 weight block, BLOCK_N <= 128), else per
    column (1x128 blocks, or two 128x128 blocks under a 256-wide tile). rows_* are clamped to valid
    rows: rows past M/N read a real scale and multiply TMA's zero fill."""
    sx = tl.load(sx_ptr + rows_x * stride_sxm + kb)
    if Y_GROUP_N % BLOCK_N == 0:
        sy = tl.load(sy_ptr + n_block * stride_sym + kb)
    else:
        sy = tl.load(sy_ptr + (rows_y // Y_GROUP_N) * stride_sym + kb)
    return sx, sy


@triton.autotune(
    configs=pick_configs(_tma_configs(), _CPU_TMA_CONFIG, CONFIG_ENV),
    key=["M", "N", "K", "SCALING", "Y_GROUP_N", "NUM_SMS"],
    prune_configs_by={"early_config_prune": _prune_configs},
)
@triton.jit
def _gemm_fp8_tma_kernel(
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
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr = 0,
    OCCUPANCY: tl.constexpr = 1,
):
    """C = (X * sx) @ (Y * sy).T, persistent: program p of P = NUM_SMS * OCCUPANCY computes tiles
    p, p + P, ...

    Operands come through TMA descriptors (zero fill past M, N and K, so edges need no masks and
    the zeros add nothing to a dot) and the output leaves through one (stores clipped at M, N).
    Tensorwise/rowwise accumulate in the tensor cores and scale once in the epilogue; blockwise adds
    each BLOCK_K-deep dot times its scales into the fp32 accumulator (BLOCK_K = 128 = the scale block
    in every shipped config; a pinned smaller one that divides 128 also works).
    """
    OUT_N: tl.constexpr = BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N
    x_desc = tl.make_tensor_descriptor(x_ptr, [M, K], [stride_xm, 1], [BLOCK_M, BLOCK_K])
    y_desc = tl.make_tensor_descriptor(y_ptr, [N, K], [stride_yn, 1], [BLOCK_N, BLOCK_K])
    out_desc = tl.make_tensor_descriptor(out_ptr, [M, N], [stride_om, 1], [BLOCK_M, OUT_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)

    # The epilogue recomputes its tile from its own counter, as Triton's persistent-matmul tutorial
    # does: the flattened loop then carries no tile offsets from the K loop into the epilogue.
    PROGRAMS: tl.constexpr = NUM_SMS * OCCUPANCY
    # Blockwise loads step k+1's scales during step k, except for per-column y scales under a
    # 128x128 tile: two copies of 128 column scales beside the accumulator and the step's dot
    # result spill there (ptxas, sm_90a), so those load their own step's scales.
    PREFETCH_SCALES: tl.constexpr = Y_GROUP_N % BLOCK_N == 0 or BLOCK_M * BLOCK_N <= 64 * 128
    tile_c = tl.program_id(0) - PROGRAMS
    for tile in tl.range(tl.program_id(0), num_tiles, PROGRAMS, flatten=True):
        pid_m, pid_n = tile_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if SCALING == 2:
            rows_x = tl.minimum(off_m + tl.arange(0, BLOCK_M), M - 1)
            rows_y = tl.minimum(off_n + tl.arange(0, BLOCK_N), N - 1)
            n_block = off_n // Y_GROUP_N
            sx, sy = _block_scales(
                sx_ptr, sy_ptr, rows_x, rows_y, 0, n_block, stride_sxm, stride_sym, Y_GROUP_N, BLOCK_N
            )
            for kt in range(k_tiles):
                x = x_desc.load([off_m, kt * BLOCK_K])
                y = y_desc.load([off_n, kt * BLOCK_K])
                # Next step's scales are loaded before this step's dot waits, so their latency
                # hides behind it (the last step reloads its own, a cached hit).
                scale_step = tl.minimum(kt + 1, k_tiles - 1) if PREFETCH_SCALES else kt
                sx_next, sy_next = _block_scales(
                    sx_ptr, sy_ptr, rows_x, rows_y, scale_step * BLOCK_K // 128, n_block,
                    stride_sxm, stride_sym, Y_GROUP_N, BLOCK_N,
                )  # fmt: skip
                if not PREFETCH_SCALES:
                    sx, sy = sx_next, sy_next
                if Y_GROUP_N % BLOCK_N == 0:
                    acc += tl.dot(x, y.T) * (sx * sy)[:, None]
                else:
                    acc += (tl.dot(x, y.T) * sx[:, None]) * sy[None, :]
                sx, sy = sx_next, sy_next
        else:
            for kt in range(k_tiles):
                x = x_desc.load([off_m, kt * BLOCK_K])
                y = y_desc.load([off_n, kt * BLOCK_K])
                acc = tl.dot(x, y.T, acc)

        tile_c += PROGRAMS
        pid_m, pid_n = tile_pid(tile_c, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if SCALING == 0:
            acc = acc * (tl.load(sx_ptr) * tl.load(sy_ptr))
        elif SCALING == 1:
            rows_x = tl.minimum(off_m + tl.arange(0, BLOCK_M), M - 1)
            rows_y = tl.minimum(off_n + tl.arange(0, BLOCK_N), N - 1)
            sx = tl.load(sx_ptr + rows_x * stride_sxm)
            sy = tl.load(sy_ptr + rows_y * stride_sym)
            acc = acc * sx[:, None] * sy[None, :]
        out = acc.to(out_ptr.dtype.element_ty)
        if EPILOGUE_SUBTILE:
            # Two half-width stores: half the epilogue's shared-memory buffer, left to the K stages.
            out0, out1 = tl.split(tl.permute(tl.reshape(out, (BLOCK_M, 2, OUT_N)), (0, 2, 1)))
            out_desc.store([off_m, off_n], out0)
            out_desc.store([off_m, off_n + OUT_N], out1)
        else:
            out_desc.store([off_m, off_n], out)


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


# The interpreter runs a persistent grid of this many programs, so tests see several tiles each.
_CPU_NUM_SMS = 4


def _matmul_triton(
    x: torch.Tensor,
    sx: torch.Tensor,
    y: torch.Tensor,
    sy: torch.Tensor,
    granularity: str,
    y_group_n: int,
    out_dtype: torch.dtype,
    num_sms: int | None = None,
) -> torch.Tensor:
    """(x * sx) @ (y * sy).T -> out_dtype, M x N: where TMA can address x, y and out, the Gluon
    warp-specialised kernel for blockwise on sm_90 (unless a tile is pinned in CONFIG_ENV: a pin
    asks for the Triton kernel) and the persistent TMA kernel otherwise; else the pointer kernel.
    num_sms (the persistent grid's width) defaults to the device's multiprocessor count."""
    _check_operands(x, sx, y, sy)
    m, k = x.shape
    n = y.shape[0]
    out = torch.empty((m, n), dtype=out_dtype, device=x.device)
    scaling = _SCALING_CODE[granularity]
    # x, y (checked contiguous, 1-byte elements) and out (new) are row-major: TMA takes them where
    # their bases and row pitches are 16-byte aligned.
    pitched = (x.stride(0) | y.stride(0) | x.data_ptr() | y.data_ptr()) % TMA_ALIGN_BYTES == 0
    if pitched and n * out.element_size() % TMA_ALIGN_BYTES == 0 and tma_supported(x.device):
        # Gluon takes the products with 128x128 weight blocks (forward, dA) and dB's per-column
        # scales where its TMA loads of them can (`_gluon_fp8.takes`).
        if (
            granularity == "blockwise"
            and _gluon_fp8.takes(x.device, y_group_n, m, n)
            and not pinned(CONFIG_ENV)
        ):
            return _gluon_fp8.matmul_blockwise(x, sx, y, sy, y_group_n, out, num_sms)
        use_tma_scratch(x.device)
        sms = num_sms or device_sms(x.device, _CPU_NUM_SMS)

        def persistent_grid(meta: dict[str, Any]) -> tuple[int]:
            tiles = cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"])
            return (min(sms * meta.get("OCCUPANCY", 1), tiles),)

        _check_block_k(_gemm_fp8_tma_kernel.configs, granularity)
        launch(
            _gemm_fp8_tma_kernel, persistent_grid,
            x, y, out, sx, sy, m, n, k, x.stride(0), y.stride(0), out.stride(0), sx.stride(0),
            sy.stride(0), SCALING=scaling, Y_GROUP_N=y_group_n, NUM_SMS=sms,
        )  # fmt: skip
        return out

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    _check_block_k(_gemm_fp8_kernel.configs, granularity)
    launch(
        _gemm_fp8_kernel, grid,
        x, y, out, sx, sy, m, n, k, x.stride(0), y.stride(0), out.stride(0), sx.stride(0), sy.stride(0),
        SCALING=scaling, Y_GROUP_N=y_group_n,
    )  # fmt: skip
    return out


def _check_block_k(configs: list[triton.Config], granularity: str) -> None:
    """Blockwise reads one scale per K tile, so a K tile may not straddle two 128-deep blocks."""
    if granularity == "blockwise" and any(128 % c.kwargs["BLOCK_K"] for c in configs):
        raise ValueError(f"blockwise needs BLOCK_K dividing 128 (one scale per K tile); fix {CONFIG_ENV}")


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


# What `_blockwise_scaled_mm_entry` found, by (y scaling, device index).
_SCALED_MM_ENTRIES: dict[tuple[str, int], str | None] = {}


def _blockwise_scaled_mm_entry(y_kind: str, device_index: int) -> str | None:
    """Which torch entry point computes the blockwise product on cuBLAS (12.9+, sm90), or None when
    this torch/cuBLAS cannot; probed once per device and y scaling."""
    key = (y_kind, device_index)
    if key not in _SCALED_MM_ENTRIES:
        _SCALED_MM_ENTRIES[key] = _probe_blockwise_scaled_mm(y_kind, device_index)
    return _SCALED_MM_ENTRIES[key]


def _probe_blockwise_scaled_mm(y_kind: str, device_index: int) -> str | None:
    """The probe of `_blockwise_scaled_mm_entry`: each entry's result is checked against the
    dequantised product, so an entry that accepts the call but scales differently is not used.
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


def _quantize_both(x: torch.Tensor, fp8_dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Blockwise codes and scales of x and of x.T (`_quantize` of each) on the chosen backend."""
    if backend(BACKEND_ENV) == "torch":
        return (*_quantize(x, "blockwise", fp8_dtype), *_quantize(x.t(), "blockwise", fp8_dtype))
    return quant.quantize_blockwise_both(x, fp8_dtype)


@triton.jit
def _transpose_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """y (C x R) = x.T for a contiguous R x C x: one BLOCK_R x BLOCK_C tile per program, read along
    x's rows and written along y's (the layout change goes through shared memory)."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows64, cols64 = rows.to(tl.int64), cols.to(tl.int64)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(x_ptr + rows64[:, None] * C + cols64[None, :], mask=mask)
    tl.store(y_ptr + cols64[:, None] * R + rows64[None, :], tl.trans(tile), mask=tl.trans(mask))


def _transpose_configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_R": r, "BLOCK_C": c}, num_warps=w)
        for r, c, w in ((64, 64, 4), (64, 128, 4), (128, 64, 4), (128, 128, 8), (128, 256, 8))
    ]


_transpose_kernel_tuned = triton.autotune(
    configs=pick_configs(
        _transpose_configs(), triton.Config({"BLOCK_R": 64, "BLOCK_C": 64}, num_warps=4), TRANSPOSE_CONFIG_ENV
    ),
    key=["R", "C"],
)(_transpose_kernel)


def _transposed(q: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp8 copy of x.T for quantisations that commute with transposition (tensorwise, 128x128).
    The torch backend copies with torch; ours with `_transpose_kernel` (a strided copy of 1-byte
    elements reads or writes a few bytes per memory transaction). The scales are at most one per
    128 x 128 block: torch copies them."""
    if backend(BACKEND_ENV) == "torch" or not q.is_contiguous():
        return q.t().contiguous(), scales.t().contiguous()
    rows, cols = q.shape
    bytes_t = torch.empty((cols, rows), dtype=torch.uint8, device=q.device)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (cdiv(rows, meta["BLOCK_R"]), cdiv(cols, meta["BLOCK_C"]))

    launch(_transpose_kernel_tuned, grid, q.view(torch.uint8), bytes_t, rows, cols)
    return bytes_t.view(q.dtype), scales.t().contiguous()


def _tensorwise(
    x: torch.Tensor, fp8_dtype: torch.dtype, transposed: bool
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Tensorwise codes of x, with those of x.T when `transposed` (else None), and their one scale:
    (q, q_t, scales). Our backend writes both layouts in one quantise pass (unit-stride rows); else
    quantisation, then a transpose."""
    if not transposed:
        q, scales = _quantize(x, "tensorwise", fp8_dtype)
        return q, None, scales
    if backend(BACKEND_ENV) != "torch" and (x.stride(1) == 1 or x.shape[1] == 1):
        return quant.quantize_tensorwise_transposed(x, fp8_dtype)
    q, scales = _quantize(x, "tensorwise", fp8_dtype)
    return q, _transposed(q, scales)[0], scales


def _rowwise(
    x: torch.Tensor, fp8_dtype: torch.dtype, column_amax: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Rowwise codes of x, with x's column maxima (the row maxima of x.T, for the backward's
    rowwise pass over x.T) where `column_amax` asks for them, else None. Our quantiser folds them
    into this pass where it can (see quant.quantize_rowwise_with_column_amax)."""
    if not column_amax:
        return (*_quantize(x, "rowwise", fp8_dtype), None)
    if backend(BACKEND_ENV) == "torch":
        return (*quant._quantize_torch(x, "rowwise", fp8_dtype), quant.column_amax_torch(x))
    return quant.quantize_rowwise_with_column_amax(x, fp8_dtype)


def _rowwise_t(
    x: torch.Tensor, amax_t: torch.Tensor | None, fp8_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rowwise codes of x.T: one pass from its row maxima where `_rowwise` found them."""
    if amax_t is None:
        return _quantize(x.t(), "rowwise", fp8_dtype)
    if backend(BACKEND_ENV) == "torch":
        return quant._quantize_torch(x.t(), "rowwise", fp8_dtype, amax_t)
    return quant.quantize_rowwise_given_amax(x.t(), amax_t, fp8_dtype)


# The training step of each granularity, in two halves that the custom ops and the eager path
# share. A forward returns out and the residuals its backward reads, None for one a gradient that
# is not wanted does not need; none of them is an input, since an op may not return an alias of
# one (`_Recipe.saved` names the inputs the backward takes). A backward returns (dA, dB), None
# for a gradient not wanted.
MaybeTensor = torch.Tensor | None


def _tensorwise_forward(
    a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool
) -> tuple[MaybeTensor, ...]:
    """out, the codes of a.T (dB's operand) and a's scale, the codes of b.T (dA's) and b's scale:
    a tensor-wide scale commutes with transposition, so the forward's quantise passes write both
    layouts."""
    qa, qa_t, sa = _tensorwise(a, OPERAND_FP8_DTYPE, transposed=need_grad_b)
    qb, qb_t, sb = _tensorwise(b, OPERAND_FP8_DTYPE, transposed=need_grad_a)
    return _product(qa, sa, qb, sb, "tensorwise", "tensorwise", torch.bfloat16), qa_t, sa, qb_t, sb


def _tensorwise_backward(
    grad_out: torch.Tensor,
    qa_t: torch.Tensor,
    sa: torch.Tensor,
    qb_t: torch.Tensor,
    sb: torch.Tensor,
    a_dtype: torch.dtype,
    b_dtype: torch.dtype,
    need_grad_a: bool,
    need_grad_b: bool,
) -> tuple[MaybeTensor, MaybeTensor]:
    """dA and dB from one quantisation of dOut into both layouts (one scale serves both)."""
    qg, qg_t, sg = _tensorwise(grad_out, GRAD_FP8_DTYPE["tensorwise"], transposed=need_grad_b)
    grad_a = _product(qg, sg, qb_t, sb, "tensorwise", "tensorwise", a_dtype) if need_grad_a else None
    grad_b = None
    if need_grad_b:
        assert qg_t is not None
        grad_b = _product(qg_t, sg, qa_t, sa, "tensorwise", "tensorwise", b_dtype)
    return grad_a, grad_b


def _rowwise_forward(
    a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool
) -> tuple[MaybeTensor, ...]:
    """out, a's column maxima (for dB) and b's (for dA): the backward quantises a.T and b.T along
    their rows afresh, in one pass each from these maxima."""
    qa, sa, amax_at = _rowwise(a, OPERAND_FP8_DTYPE, column_amax=need_grad_b)
    qb, sb, amax_bt = _rowwise(b, OPERAND_FP8_DTYPE, column_amax=need_grad_a)
    return _product(qa, sa, qb, sb, "rowwise", "rowwise", torch.bfloat16), amax_at, amax_bt


def _rowwise_backward(
    grad_out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    amax_at: torch.Tensor,
    amax_bt: torch.Tensor,
    a_dtype: torch.dtype,
    b_dtype: torch.dtype,
    need_grad_a: bool,
    need_grad_b: bool,
) -> tuple[MaybeTensor, MaybeTensor]:
    """dA from dOut's rows and b.T's; dB from dOut.T's and a.T's, dOut.T's maxima folded into dA's
    pass over dOut where both are wanted."""
    grad_dtype = GRAD_FP8_DTYPE["rowwise"]
    grad_a = grad_b = amax_gt = None
    if need_grad_a:
        qg, sg, amax_gt = _rowwise(grad_out, grad_dtype, column_amax=need_grad_b)
        q_bt, s_bt = _rowwise_t(b, amax_bt, OPERAND_FP8_DTYPE)
        grad_a = _product(qg, sg, q_bt, s_bt, "rowwise", "rowwise", a_dtype)
    if need_grad_b:
        qg_t, sg_t = _rowwise_t(grad_out, amax_gt, grad_dtype)
        q_at, s_at = _rowwise_t(a, amax_at, OPERAND_FP8_DTYPE)
        grad_b = _product(qg_t, sg_t, q_at, s_at, "rowwise", "rowwise", b_dtype)
    return grad_a, grad_b


def _blockwise_forward(
    a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool
) -> tuple[MaybeTensor, ...]:
    """out, b's 128x128 codes and scales (their transpose is dA's operand) and a.T's 1x128 codes and
    scales (dB's operand: 1x128 blocks along M do not commute with transposition, so a's own codes
    cannot serve), quantised in the same read of a as a's; the backward never reads a."""
    qa_t = sa_t = None
    if need_grad_b:
        qa, sa, qa_t, sa_t = _quantize_both(a, OPERAND_FP8_DTYPE)
    else:
        qa, sa = _quantize(a, "blockwise", OPERAND_FP8_DTYPE)
    qb, sb = _quantize(b, "block128", OPERAND_FP8_DTYPE)
    out = _product(qa, sa, qb, sb, "blockwise", "block128", torch.bfloat16)
    return (out, qb, sb, qa_t, sa_t) if need_grad_a else (out, None, None, qa_t, sa_t)


def _blockwise_backward(
    grad_out: torch.Tensor,
    qb: torch.Tensor,
    sb: torch.Tensor,
    qa_t: torch.Tensor,
    sa_t: torch.Tensor,
    a_dtype: torch.dtype,
    b_dtype: torch.dtype,
    need_grad_a: bool,
    need_grad_b: bool,
) -> tuple[MaybeTensor, MaybeTensor]:
    grad_dtype = GRAD_FP8_DTYPE["blockwise"]
    grad_a = grad_b = None
    if need_grad_a and need_grad_b:  # dOut's codes both ways from one read of it
        qg, sg, qg_t, sg_t = _quantize_both(grad_out, grad_dtype)
    elif need_grad_a:
        qg, sg = _quantize(grad_out, "blockwise", grad_dtype)
    elif need_grad_b:
        qg_t, sg_t = _quantize(grad_out.t(), "blockwise", grad_dtype)
    if need_grad_a:
        q_bt, s_bt = _transposed(qb, sb)
        grad_a = _product(qg, sg, q_bt, s_bt, "blockwise", "block128", a_dtype)
    if need_grad_b:
        grad_b = _product(qg_t, sg_t, qa_t, sa_t, "blockwise", "blockwise", b_dtype)
    return grad_a, grad_b


Tensors = tuple[torch.Tensor, ...]

# The custom ops: per granularity a forward (out and residuals) and a backward (dA, dB); the
# forward's autograd formula (`_register_autograd`) calls the backward op. Fakes give shapes only.
# An op's outputs are fixed, so where the step returns None the op returns an empty tensor
# (`_present`). fp8 residuals cross the op boundary as their bytes (uint8 views): they are the
# backward's private operands, and torch has no reductions over fp8 dtypes, which generic checks of
# an op's outputs run (torch.library.opcheck sums every output).


def _present(tensor: MaybeTensor, like: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`tensor` as an op output (fp8 as uint8), or an empty stand-in where the step returned None."""
    if tensor is None:
        return torch.empty(0, dtype=dtype, device=like.device)
    return tensor.view(torch.uint8) if tensor.dtype == OPERAND_FP8_DTYPE else tensor


def _codes(raw: torch.Tensor) -> torch.Tensor:
    return raw.view(OPERAND_FP8_DTYPE)


@torch.library.custom_op(f"{NAMESPACE}::gemm_fp8_tensorwise", mutates_args=())
def _tensorwise_op(
    a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    out, qa_t, sa, qb_t, sb = _tensorwise_forward(a, b, need_grad_a, need_grad_b)
    assert out is not None and sa is not None and sb is not None
    return out, _present(qa_t, a, torch.uint8), sa, _present(qb_t, a, torch.uint8), sb


@_tensorwise_op.register_fake
def _tensorwise_fake(a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool) -> Tensors:
    (m, k), n = a.shape, b.shape[0]
    qa_t = a.new_empty((k, m) if need_grad_b else (0,), dtype=torch.uint8)
    qb_t = a.new_empty((k, n) if need_grad_a else (0,), dtype=torch.uint8)
    scale_a, scale_b = (a.new_empty((1, 1), dtype=torch.float32) for _ in range(2))
    return a.new_empty((m, n), dtype=torch.bfloat16), qa_t, scale_a, qb_t, scale_b


@torch.library.custom_op(f"{NAMESPACE}::gemm_fp8_rowwise", mutates_args=())
def _rowwise_op(
    a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out, amax_at, amax_bt = _rowwise_forward(a, b, need_grad_a, need_grad_b)
    assert out is not None
    return out, _present(amax_at, a, torch.float32), _present(amax_bt, a, torch.float32)


@_rowwise_op.register_fake
def _rowwise_fake(a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool) -> Tensors:
    (m, k), n = a.shape, b.shape[0]
    amax_at = a.new_empty((k, 1) if need_grad_b else (0,), dtype=torch.float32)
    amax_bt = a.new_empty((k, 1) if need_grad_a else (0,), dtype=torch.float32)
    return a.new_empty((m, n), dtype=torch.bfloat16), amax_at, amax_bt


@torch.library.custom_op(f"{NAMESPACE}::gemm_fp8_blockwise", mutates_args=())
def _blockwise_op(
    a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    out, qb, sb, qa_t, sa_t = _blockwise_forward(a, b, need_grad_a, need_grad_b)
    assert out is not None
    return (
        out,
        _present(qb, a, torch.uint8),
        _present(sb, a, torch.float32),
        _present(qa_t, a, torch.uint8),
        _present(sa_t, a, torch.float32),
    )


@_blockwise_op.register_fake
def _blockwise_fake(a: torch.Tensor, b: torch.Tensor, need_grad_a: bool, need_grad_b: bool) -> Tensors:
    (m, k), n = a.shape, b.shape[0]

    def codes(rows: int, cols: int, kind: str, kept: bool) -> Tensors:  # fresh tensors: outputs never alias
        if not kept:
            return a.new_empty((0,), dtype=torch.uint8), a.new_empty((0,), dtype=torch.float32)
        scales = a.new_empty(quant._scale_shape(rows, cols, kind), dtype=torch.float32)
        return a.new_empty((rows, cols), dtype=torch.uint8), scales

    out = a.new_empty((m, n), dtype=torch.bfloat16)
    return out, *codes(n, k, "block128", need_grad_a), *codes(k, m, "blockwise", need_grad_b)


def _grads(
    grads: tuple[MaybeTensor, MaybeTensor], like: torch.Tensor, a_dtype: torch.dtype, b_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    return _present(grads[0], like, a_dtype), _present(grads[1], like, b_dtype)


def _grads_fake(
    grad_out: torch.Tensor, k: int, a_dtype: torch.dtype, b_dtype: torch.dtype, need_a: bool, need_b: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = grad_out.shape
    return (
        grad_out.new_empty((m, k) if need_a else (0,), dtype=a_dtype),
        grad_out.new_empty((n, k) if need_b else (0,), dtype=b_dtype),
    )


@torch.library.custom_op(f"{NAMESPACE}::gemm_fp8_tensorwise_backward", mutates_args=())
def _tensorwise_backward_op(
    grad_out: torch.Tensor,
    qa_t: torch.Tensor,
    sa: torch.Tensor,
    qb_t: torch.Tensor,
    sb: torch.Tensor,
    a_dtype: torch.dtype,
    b_dtype: torch.dtype,
    need_grad_a: bool,
    need_grad_b: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    grads = _tensorwise_backward(
        grad_out, _codes(qa_t), sa, _codes(qb_t), sb, a_dtype, b_dtype, need_grad_a, need_grad_b
    )
    return _grads(grads, grad_out, a_dtype, b_dtype)


@_tensorwise_backward_op.register_fake
def _tensorwise_backward_fake(
    grad_out: torch.Tensor, qa_t: torch.Tensor, sa: torch.Tensor, qb_t: torch.Tensor, sb: torch.Tensor,
    a_dtype: torch.dtype, b_dtype: torch.dtype, need_grad_a: bool, need_grad_b: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    k = qb_t.shape[0] if need_grad_a else qa_t.shape[0]
    return _grads_fake(grad_out, k, a_dtype, b_dtype, need_grad_a, need_grad_b)


@torch.library.custom_op(f"{NAMESPACE}::gemm_fp8_rowwise_backward", mutates_args=())
def _rowwise_backward_op(
    grad_out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    amax_at: torch.Tensor,
    amax_bt: torch.Tensor,
    a_dtype: torch.dtype,
    b_dtype: torch.dtype,
    need_grad_a: bool,
    need_grad_b: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    grads = _rowwise_backward(grad_out, a, b, amax_at, amax_bt, a_dtype, b_dtype, need_grad_a, need_grad_b)
    return _grads(grads, grad_out, a_dtype, b_dtype)


@_rowwise_backward_op.register_fake
def _rowwise_backward_fake(
    grad_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, amax_at: torch.Tensor, amax_bt: torch.Tensor,
    a_dtype: torch.dtype, b_dtype: torch.dtype, need_grad_a: bool, need_grad_b: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    return _grads_fake(grad_out, a.shape[1], a_dtype, b_dtype, need_grad_a, need_grad_b)


@torch.library.custom_op(f"{NAMESPACE}::gemm_fp8_blockwise_backward", mutates_args=())
def _blockwise_backward_op(
    grad_out: torch.Tensor,
    qb: torch.Tensor,
    sb: torch.Tensor,
    qa_t: torch.Tensor,
    sa_t: torch.Tensor,
    a_dtype: torch.dtype,
    b_dtype: torch.dtype,
    need_grad_a: bool,
    need_grad_b: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    grads = _blockwise_backward(
        grad_out, _codes(qb), sb, _codes(qa_t), sa_t, a_dtype, b_dtype, need_grad_a, need_grad_b
    )
    return _grads(grads, grad_out, a_dtype, b_dtype)


@_blockwise_backward_op.register_fake
def _blockwise_backward_fake(
    grad_out: torch.Tensor, qb: torch.Tensor, sb: torch.Tensor, qa_t: torch.Tensor, sa_t: torch.Tensor,
    a_dtype: torch.dtype, b_dtype: torch.dtype, need_grad_a: bool, need_grad_b: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    k = qb.shape[1] if need_grad_a else qa_t.shape[0]
    return _grads_fake(grad_out, k, a_dtype, b_dtype, need_grad_a, need_grad_b)


@dataclass(frozen=True)
class _Recipe:
    """One granularity's step: `forward(a, b, need_grad_a, need_grad_b)` -> (out, *residuals);
    `saved(a, b, residuals)` -> the tensors `backward` takes after dOut; `backward(grad_out,
    *saved, a_dtype, b_dtype, need_grad_a, need_grad_b)` -> (dA, dB); the ops of each half."""

    forward: Callable[..., tuple[MaybeTensor, ...]]
    saved: Callable[[torch.Tensor, torch.Tensor, tuple[Any, ...]], tuple[Any, ...]]
    backward: Callable[..., tuple[MaybeTensor, MaybeTensor]]
    forward_op: Any
    backward_op: Any


_RECIPES = {
    "tensorwise": _Recipe(
        _tensorwise_forward,
        lambda a, b, res: res,
        _tensorwise_backward,
        _tensorwise_op,
        _tensorwise_backward_op,
    ),
    "rowwise": _Recipe(
        _rowwise_forward, lambda a, b, res: (a, b, *res), _rowwise_backward, _rowwise_op, _rowwise_backward_op
    ),
    "blockwise": _Recipe(
        _blockwise_forward,
        lambda a, b, res: res,
        _blockwise_backward,
        _blockwise_op,
        _blockwise_backward_op,
    ),
}


def _register_autograd(recipe: _Recipe) -> None:
    """The forward op's autograd formula: save what `recipe.saved` names, call the backward op."""

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensors) -> None:
        a, b, need_grad_a, need_grad_b = inputs
        residuals = output[1:]
        ctx.mark_non_differentiable(*residuals)
        ctx.set_materialize_grads(False)  # the residuals get no gradient, not zeros
        ctx.save_for_backward(*recipe.saved(a, b, residuals))
        ctx.dtypes = (a.dtype, b.dtype)
        ctx.prepared = (need_grad_a, need_grad_b)

    def backward(ctx: Any, grad_out: MaybeTensor, *residual_grads: None) -> tuple[MaybeTensor, ...]:
        needs = ctx.needs_input_grad[:2]
        if any(need and not prepared for need, prepared in zip(needs, ctx.prepared, strict=True)):
            raise RuntimeError(
                f"{recipe.forward_op} ran with need_grad_a, need_grad_b = {ctx.prepared}, so it kept "
                f"nothing for a gradient that autograd now wants ({needs}); pass each input's "
                "requires_grad, as kernels.gemm_fp8.gemm_fp8 does"
            )
        if grad_out is None:
            return None, None, None, None
        grad_a, grad_b = recipe.backward_op(grad_out, *ctx.saved_tensors, *ctx.dtypes, *needs)
        return grad_a if needs[0] else None, grad_b if needs[1] else None, None, None

    recipe.forward_op.register_autograd(backward, setup_context=setup_context)


for _recipe in _RECIPES.values():
    _register_autograd(_recipe)


class _GemmFP8(torch.autograd.Function):
    """The eager path: a recipe's forward and backward without the dispatcher (see `gemm_fp8`)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, granularity: str) -> MaybeTensor:
        recipe = _RECIPES[granularity]
        out, *residuals = recipe.forward(a, b, *ctx.needs_input_grad[:2])
        ctx.save_for_backward(*recipe.saved(a, b, tuple(residuals)))
        ctx.recipe = recipe
        ctx.dtypes = (a.dtype, b.dtype)
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[MaybeTensor, ...]:
        grads = ctx.recipe.backward(grad_out, *ctx.saved_tensors, *ctx.dtypes, *ctx.needs_input_grad[:2])
        return (*grads, None)


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

    a: M x K activations, b: N x K weights (bf16; fp16/fp32 accepted), any M, N, K. Under
    torch.compile this is the custom op `torch.ops.gitcampaign_kernels.gemm_fp8_<granularity>`
    (its first output); eagerly the same steps run without the dispatcher (docs/kernels.md).
    """
    _check_inputs(a, b, granularity)
    recipe = _RECIPES[granularity]
    grad_enabled = torch.is_grad_enabled()
    if torch.compiler.is_compiling():
        need_grad_a, need_grad_b = grad_enabled and a.requires_grad, grad_enabled and b.requires_grad
        compiled: torch.Tensor = recipe.forward_op(a, b, need_grad_a, need_grad_b)[0]
        return compiled
    if grad_enabled and (a.requires_grad or b.requires_grad):
        out = _GemmFP8.apply(a, b, granularity)
    else:
        out = recipe.forward(a, b, False, False)[0]
    assert out is not None
    return out
