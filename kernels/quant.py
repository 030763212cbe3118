"""FP8 quantisation: one scale per group, saturating round-to-nearest-even casts.

Algorithm. A 2-D input `x` (R rows, C columns; the reduction dimension of the GEMM that will consume
it is C) is split into groups, each sharing one float32 scale:

- ``rowwise``    one group per row, scales (R, 1);
- ``blockwise``  1x128 blocks along C, scales (R, ceil(C/128)); the last block of a row may be partial;
- ``tensorwise`` one group for the whole tensor, scales (1, 1);
- ``block128``   (private, for gemm_fp8 weights) 128x128 blocks, scales (ceil(R/128), ceil(C/128)).

For a group with absolute maximum ``amax`` the kernel computes, in float32 and in this order::

    scale = max(amax, SCALE_EPS) / FP8_MAX        # IEEE division (tl.math.div_rn), dequant scale
    inv   = 1.0 / scale                           # IEEE division, once per group
    q     = fp8(clamp(x_fp32 * inv, -FP8_MAX, FP8_MAX))   # round-to-nearest-even

so ``x ~= q * scale``. FP8_MAX is 448 for e4m3 and 57344 for e5m2; SCALE_EPS = 1e-12. The group
maximum itself often lands just above FP8_MAX (``476.13 * (1 / (476.13 / 448))`` is 448.00003 in
float32); round-to-nearest-even still gives 448 there, and the clamp makes saturation explicit
rather than dependent on each cast's out-of-range rule (NaN for torch's e4m3fn cast, saturation for
the GPU's satfinite cvt), at one min/max per element. An all-zero group gets
``scale = SCALE_EPS / FP8_MAX`` (finite, positive) and ``q = 0``, so it dequantises to exact zeros
and the reciprocal never overflows; SCALE_EPS also keeps denormal group maxima (whose handling
differs between flush-to-zero and IEEE paths) out of the scale. NaN/Inf inputs are outside the
contract.

`quantize_fp8_reference` performs the identical float32 operations in torch (tensor-by-tensor IEEE
divisions, a multiplication, clamp, RNE cast), so on a GPU the Triton backend is bit-exact against
it (Triton lowers the cast to `cvt.rn.satfinite.e4m3x2.f32` / `.e5m2x2` on sm_89+). Triton's CPU
interpreter casts float32 to fp8 wrongly in three ways: a rounding carry into the next power of two
returns half the value, ties round away from zero, and the subnormal/normal boundary truncates;
the CPU tests allow exactly those deviations and nothing else.

Grid. `_quant_kernel`: axis 0 over row tiles of BLOCK_R rows, axis 1 over column groups of GROUP_C
columns (128, or the whole row for rowwise). A program reads its tile once when the group fits in one
chunk of BLOCK_C columns (rowwise rows up to 8192 columns, every 1x128 block), else it reads the group
twice (amax pass, quantise pass; for contiguous rows the second read is mostly served from L2). For
a transposed view chunks are 256 columns wide so that a program spans enough memory-contiguous
rows. With a precomputed amax (strided tensorwise, after `_amax_kernel`, whose grid is the same
tiling) it is a single elementwise pass. Rowwise on a strided view whose rows are longer than one
chunk (the transposed operands of the fp8 GEMM's backward: a.T, b.T, dOut.T) is two 2-D launches
instead: `_row_amax_partials_kernel` writes each row's maximum over runs of SPLIT_CHUNKS chunks,
and `_row_quant_partials_kernel` quantises 32 x 256 tiles, each reducing its rows' partials first;
a view of a few thousand rows then keeps every SM busy, where one program per 16-64 rows walked
each row's whole length twice. Where the rows' maxima are already known, that view is one launch:
`quantize_rowwise_with_column_amax` (unit-stride rows up to MAX_BLOCK_C columns, the fp8 GEMM's a, b
and dOut) folds every column's |x| maximum into the rowwise pass it makes anyway
(`_quant_rows_colmax_kernel`: persistent, two programs a SM, each writing one partial maximum a
column; `_row_amax_partials_kernel` reduces those 2 x SMs rows of partials), and
`quantize_rowwise_given_amax` quantises x.T from them, so the backward's amax passes over a.T, b.T and
dOut.T (a full strided read each) disappear.

Tensorwise on unit-stride rows (the common case) is two launches that never sync the host:
`_amax_partials_kernel` (persistent, one partial maximum per program into a scratch vector: no
zero-filled buffer, no atomics) and `_quant_tensorwise_kernel`, whose programs reduce the few hundred
partials themselves and walk the tiles in reverse in a software-pipelined persistent loop, so that
the tiles the amax pass read last are still in L2 when read again. `quantize_tensorwise_transposed`
has that quantise pass also write the codes of x.T (128-column tiles, each stored twice), for the
fp8 GEMM whose backward reads both layouts.

Pointer layouts.
- x: R x C, any strides (stride_xr, stride_xc): a transposed view quantises along the other dim;
  `_amax_partials_kernel` and `_quant_tensorwise_kernel` take unit column stride and stride_xr only.
- q: R x C, contiguous (row-major), the fp8 type of the requested format.
- scales: float32, (R, G) or (ceil(R/128), G) or (1, 1), contiguous; G = number of column groups.
- partials (`_quant_tensorwise_kernel`): float32[P], one |x| maximum per amax-pass program.
- amax (tensorwise, `_quant_kernel`): float32[1], zero-initialised, reduced with atomic max.
- partials (strided rowwise): float32, R x SPLITS, row-major, one |x| maximum per row and column run.
- colmax (`_quant_rows_colmax_kernel`): float32, P x C, row-major, program p's |x| maximum a column.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._common import (
    NAMESPACE,
    backend,
    cdiv,
    launch,
    next_power_of_2,
    num_sms,
    pick_configs,
    without_keys,
)

BACKEND_ENV = "KERNELS_QUANT_BACKEND"
CONFIG_ENV = "KERNELS_QUANT_CONFIG"
# Pins `_quant_blockwise_both_kernel` alone: its only key is BLOCK_C (128 or 256).
BOTH_CONFIG_ENV = "KERNELS_QUANT_BOTH_CONFIG"

SCALE_EPS = 1e-12
BLOCK = 128
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
PUBLIC_GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
GRANULARITIES = ("tensorwise", "rowwise", "blockwise", "block128")
INPUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# The widest chunk of a row held in registers at once; longer rows are read in chunks.
MAX_BLOCK_C = 8192
# For a transposed view (rows contiguous in memory) narrow chunks leave room for >= 16 rows per
# program, i.e. >= 32 contiguous bytes per memory transaction instead of 2-8.
STRIDED_BLOCK_C = 256
# Column width of a tensorwise tile: a 4 KB contiguous run of bf16 per row, so that a row of 14336
# splits into 7 tiles with no padded lanes.
TILE_C = 2048
# ... and of one that also writes the transposed codes: 128 columns, so that a tile of 4-16K
# elements has 32-128 rows, a run of 32-128 bytes in each row of the transposed copy.
TRANSPOSED_TILE_C = 128
# The tensorwise amax pass: 8192-element tiles, 8 warps, 2 programs per SM (512 threads, room for
# 128 registers a thread, so every program is resident and the persistent split stays even), 3
# stages: two tiles in flight a program, 64 KB a SM for a pass that only reads.
AMAX_ELEMS, AMAX_WARPS, AMAX_PER_SM, AMAX_STAGES = 8192, 8, 2, 3
# Blockwise (1x128) on contiguous rows: a tile spans up to 8 blocks of each row (2 KB of bf16 a row
# read in one run, 8 scales a row stored side by side) instead of one 256-byte block.
BLOCKWISE_BLOCK_C = 1024
# Rowwise on a strided view (a transposed operand of the fp8 GEMM's backward): 32 x 256 tiles (a
# 64-byte run of each memory row per column of the tile), and the amax pass split into runs of 4
# chunks (1024 columns), 3 chunks in flight (software-pipelined loads), so that a view of a few
# thousand rows spreads over every SM with enough loads in flight (8 chunks, one at a time, read at
# ~2 TB/s on an H200; the fastest of quant_dev.py --split-variants).
SPLIT_BLOCK_R, SPLIT_CHUNKS, SPLIT_STAGES = 32, 4, 3
# `_quant_rows_colmax_kernel`: programs a SM, so its column partials are 2 x SMs rows (4.3 MB for
# 4096 columns on an H200, against 64 MB of bf16 in an 8192-row x).
COLMAX_PER_SM = 2
# The interpreter has no SMs: a small odd stand-in makes its persistent loops run several tiles per
# program, unevenly, as on a GPU.
INTERPRETER_SMS = 3


def _configs() -> list[triton.Config]:
    """Elements per program x warps: 4-16K elements (8-32 KB of bf16) per program keeps enough bytes
    in flight per SM to saturate HBM; warps are chosen so a thread holds 32-64 fp32 values, enough
    for 16-byte vector loads without spilling registers."""
    return [
        triton.Config({"ELEMS": elems}, num_warps=warps)
        for elems, warps in ((4096, 4), (8192, 4), (8192, 8), (16384, 8), (16384, 16))
    ]


def _tensorwise_configs() -> list[triton.Config]:
    """Tile elements x warps x programs per SM x pipeline stages for `_quant_tensorwise_kernel`.

    Persistent configs keep PER_SM x num_warps at 16 warps (512 threads a SM: up to 128 registers a
    thread) so that every program is resident at once and the tiles split evenly; STAGES = 2 has the
    loop issue the next tile's loads (cp.async into shared memory) before scaling the current one,
    which keeps ~32-64 KB a SM in flight, what HBM needs at ~1 us latency (STAGES = 3: two tiles
    ahead, for when one is not enough). The PER_SM = 0 configs are the plain grid (one tile per
    program, the hardware scheduler balancing) as a fallback the autotuner can still pick."""
    return [
        triton.Config({"ELEMS": elems, "PER_SM": per_sm, "STAGES": stages}, num_warps=warps)
        for elems, warps, per_sm, stages in (
            (8192, 8, 2, 2),
            (16384, 16, 1, 2),
            (4096, 4, 4, 2),
            (8192, 8, 2, 3),
            (8192, 8, 0, 1),
            (16384, 16, 0, 1),
        )
    ]


def _colmax_configs() -> list[triton.Config]:
    """Row-group elements x warps x pipeline stages for `_quant_rows_colmax_kernel`, whose grid is
    fixed at COLMAX_PER_SM programs a SM (so that the number of column partials does not depend on
    the config): 8 warps (16 a SM, 128 registers a thread) or 4, one or two groups ahead."""
    return [
        triton.Config({"ELEMS": elems, "STAGES": stages}, num_warps=warps)
        for elems, warps, stages in ((8192, 8, 2), (16384, 8, 2), (8192, 8, 3), (4096, 4, 2), (16384, 8, 1))
    ]


def _both_configs() -> list[triton.Config]:
    """Tile columns x warps for `_quant_blockwise_both_kernel`: a 128 x 128 tile (16K elements, 32-64
    fp32 values a thread at 8-16 warps, for the tile, its codes and the transposed codes) or a
    128 x 256 one (two groups of each row a program, half the programs)."""
    return [
        triton.Config({"BLOCK_C": block_c}, num_warps=warps)
        for block_c, warps in ((128, 8), (128, 16), (256, 16), (128, 4))
    ]


# The interpreter runs one program at a time: the largest tile means the fewest Python-level programs.
_CPU_CONFIG = triton.Config({"ELEMS": 16384}, num_warps=4)
# Small tiles in the interpreter, so that its few "SMs" each loop over several tiles.
_CPU_TENSORWISE_CONFIG = triton.Config({"ELEMS": 1024, "PER_SM": 1, "STAGES": 2}, num_warps=4)
_CPU_BOTH_CONFIG = triton.Config({"BLOCK_C": 256}, num_warps=4)
_CPU_COLMAX_CONFIG = triton.Config({"ELEMS": 1024, "STAGES": 2}, num_warps=4)


@triton.jit
def _scale_and_inverse(amax, FP8_MAX: tl.constexpr, EPS: tl.constexpr):
    """The documented scale rule; IEEE divisions (not Triton's default approximate `/` for fp32) so
    that torch's tensor-by-tensor division reproduces it bit for bit."""
    scale = tl.math.div_rn(tl.maximum(amax, EPS), FP8_MAX)
    inv = tl.math.div_rn(tl.full(scale.shape, 1.0, tl.float32), scale)
    return scale, inv


@triton.jit
def _quantize_tile(x, inv, FP8_MAX: tl.constexpr):
    """Scale and saturate; the caller's cast to fp8 rounds to nearest even."""
    return tl.clamp(x * inv, -FP8_MAX, FP8_MAX)


@triton.jit
def _partials_max(partial_ptr, num_partials, PARTIALS: tl.constexpr):
    """The tensor's |x| maximum from the amax pass's per-program partials (max is exact in any order)."""
    lanes = tl.arange(0, PARTIALS)
    return tl.max(tl.load(partial_ptr + lanes, mask=lanes < num_partials, other=0.0), axis=0)


@triton.jit
def _amax_partials_kernel(
    x_ptr,
    partial_ptr,
    R,
    C,
    stride_xr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Persistent |x| maximum over unit-stride rows: each program folds its tiles into registers and
    writes one partial, so no zero-initialised buffer (one more launch) and no atomics are needed.
    evict_last keeps the lines in L2 for the quantiser, which walks the tiles in reverse."""
    num_cb = tl.cdiv(C, BLOCK_C)
    num_tiles = tl.cdiv(R, BLOCK_R) * num_cb
    running = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), num_stages=STAGES):
        rb = tile // num_cb
        rows = rb * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = (tile - rb * num_cb) * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        x = tl.load(
            x_ptr + rows.to(tl.int64)[:, None] * stride_xr + cols[None, :],
            mask=mask,
            other=0.0,
            eviction_policy="evict_last",
        )
        running = tl.maximum(running, tl.abs(x.to(tl.float32)))
    tl.store(partial_ptr + tl.program_id(0), tl.max(tl.max(running, axis=1), axis=0))


@triton.jit
def _quant_tensorwise_kernel(
    x_ptr,
    q_ptr,
    qt_ptr,
    s_ptr,
    partial_ptr,
    R,
    C,
    stride_xr,
    num_partials,
    FP8_MAX: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_C: tl.constexpr,
    PARTIALS: tl.constexpr,
    ELEMS: tl.constexpr,
    PER_SM: tl.constexpr = 0,
    STAGES: tl.constexpr = 1,
    TRANSPOSED: tl.constexpr = False,
):
    """Quantise unit-stride rows with one scale, from the amax pass's partials: BLOCK_R x BLOCK_C
    tiles in a grid-stride loop (PER_SM only sizes the grid), in reverse order (see
    `_amax_partials_kernel`); program 0 stores the scale. TRANSPOSED also writes each tile's codes
    into qt (C x R, contiguous), the fp8 copy of x.T that the GEMM's backward reads."""
    BLOCK_R: tl.constexpr = (ELEMS + BLOCK_C - 1) // BLOCK_C
    num_cb = tl.cdiv(C, BLOCK_C)
    num_tiles = tl.cdiv(R, BLOCK_R) * num_cb
    scale, inv = _scale_and_inverse(_partials_max(partial_ptr, num_partials, PARTIALS), FP8_MAX, EPS)
    if tl.program_id(0) == 0:
        tl.store(s_ptr, scale)
    for step in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), num_stages=STAGES):
        tile = num_tiles - 1 - step
        rb = tile // num_cb
        rows = rb * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = (tile - rb * num_cb) * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        x = tl.load(
            x_ptr + rows.to(tl.int64)[:, None] * stride_xr + cols[None, :],
            mask=mask,
            other=0.0,
            eviction_policy="evict_first",
        ).to(tl.float32)
        q = _quantize_tile(x, inv, FP8_MAX).to(q_ptr.dtype.element_ty)
        tl.store(q_ptr + rows.to(tl.int64)[:, None] * C + cols[None, :], q, mask=mask)
        if TRANSPOSED:  # the layout change on bytes, as in gemm_fp8's transpose kernel
            q_t = tl.trans(q.to(tl.uint8, bitcast=True)).to(qt_ptr.dtype.element_ty, bitcast=True)
            tl.store(qt_ptr + cols.to(tl.int64)[:, None] * R + rows[None, :], q_t, mask=tl.trans(mask))


@triton.jit
def _amax_kernel(
    x_ptr,
    amax_ptr,
    R,
    C,
    stride_xr,
    stride_xc,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Tensor-wide |x| maximum: each program reduces one tile and folds it in with an atomic max."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    offsets = rows.to(tl.int64)[:, None] * stride_xr + cols.to(tl.int64)[None, :] * stride_xc
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.atomic_max(amax_ptr, tl.max(tl.max(tl.abs(x), axis=1), axis=0))


@triton.jit
def _row_amax_partials_kernel(
    x_ptr,
    partial_ptr,
    R,
    C,
    stride_xr,
    stride_xc,
    SPLITS,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
    SPLIT_CHUNKS: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Rowwise |x| maxima of a strided view in pieces: program (r, s) folds rows r*BLOCK_R.. over
    the s-th run of SPLIT_CHUNKS column chunks (STAGES of them in flight) and writes one partial a
    row into partials[R, SPLITS]."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * stride_xr
    first = tl.program_id(1) * SPLIT_CHUNKS * BLOCK_C
    running = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for c in tl.range(0, SPLIT_CHUNKS, num_stages=STAGES):
        cols = first + c * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        x = tl.load(x_rows + cols.to(tl.int64)[None, :] * stride_xc, mask=mask, other=0.0)
        running = tl.maximum(running, tl.abs(x.to(tl.float32)))
    tl.store(
        partial_ptr + rows.to(tl.int64) * SPLITS + tl.program_id(1), tl.max(running, axis=1), mask=rows < R
    )


@triton.jit
def _row_quant_partials_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    partial_ptr,
    R,
    C,
    stride_xr,
    stride_xc,
    SPLITS,
    FP8_MAX: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
):
    """Quantise one BLOCK_R x BLOCK_C tile of a strided view rowwise, each row's scale from its
    SPLITS partial maxima (max is exact in any order, so the scale is the one-pass kernel's); the
    tiles of column 0 store the scales."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    row_mask = rows < R
    rows64 = rows.to(tl.int64)
    splits = tl.arange(0, SPLITS_POW2)
    partials = tl.load(
        partial_ptr + rows64[:, None] * SPLITS + splits[None, :],
        mask=row_mask[:, None] & (splits[None, :] < SPLITS),
        other=0.0,
    )
    scale, inv = _scale_and_inverse(tl.max(partials, axis=1), FP8_MAX, EPS)
    mask = row_mask[:, None] & (cols[None, :] < C)
    x = tl.load(
        x_ptr + rows64[:, None] * stride_xr + cols.to(tl.int64)[None, :] * stride_xc, mask=mask, other=0.0
    )
    q = _quantize_tile(x.to(tl.float32), inv[:, None], FP8_MAX)
    tl.store(q_ptr + rows64[:, None] * C + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + rows64, scale, mask=row_mask & (tl.program_id(1) == 0))


@triton.jit
def _quant_rows_colmax_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    colmax_ptr,
    R,
    C,
    stride_xr,
    FP8_MAX: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_C: tl.constexpr,
    ELEMS: tl.constexpr,
    STAGES: tl.constexpr = 1,
):
    """Rowwise quantisation of unit-stride rows that fit one BLOCK_C chunk, which also folds every
    column's |x| maximum: program p quantises row groups p, p + P, ... (BLOCK_R rows each, STAGES
    loads in flight) and stores its running column maxima into colmax[p, :] at the end."""
    BLOCK_R: tl.constexpr = (ELEMS + BLOCK_C - 1) // BLOCK_C
    cols = tl.arange(0, BLOCK_C)
    col_mask = cols < C
    running = tl.zeros([BLOCK_C], tl.float32)
    for group in tl.range(tl.program_id(0), tl.cdiv(R, BLOCK_R), tl.num_programs(0), num_stages=STAGES):
        rows = group * BLOCK_R + tl.arange(0, BLOCK_R)
        rows64 = rows.to(tl.int64)
        mask = (rows[:, None] < R) & col_mask[None, :]
        x = tl.load(x_ptr + rows64[:, None] * stride_xr + cols[None, :], mask=mask, other=0.0)
        x = x.to(tl.float32)
        scale, inv = _scale_and_inverse(tl.max(tl.abs(x), axis=1), FP8_MAX, EPS)
        q = _quantize_tile(x, inv[:, None], FP8_MAX)
        tl.store(q_ptr + rows64[:, None] * C + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
        tl.store(s_ptr + rows64, scale, mask=rows < R)
        running = tl.maximum(running, tl.max(tl.abs(x), axis=0))
    tl.store(colmax_ptr + tl.program_id(0).to(tl.int64) * C + cols, running, mask=col_mask)


@triton.jit
def _quant_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    amax_ptr,
    R,
    C,
    stride_xr,
    stride_xc,
    stride_sr,
    FP8_MAX: tl.constexpr,
    EPS: tl.constexpr,
    GROUP_C: tl.constexpr,
    BLOCK_C: tl.constexpr,
    GROUP_R: tl.constexpr,
    GIVEN_AMAX: tl.constexpr,
    ELEMS: tl.constexpr,
):
    """Quantise a BLOCK_R x GROUP_C tile; GROUP_R = 1 (a scale per row) or BLOCK_R (one per tile).
    With GROUP_R = 1 and BLOCK_C a multiple of GROUP_C (1x128 blocks), the tile is BLOCK_R x BLOCK_C:
    BLOCK_C // GROUP_C groups of each row at once, scales (BLOCK_R, GROUPS)."""
    BLOCK_R: tl.constexpr = (ELEMS + BLOCK_C - 1) // BLOCK_C
    NUM_CHUNKS: tl.constexpr = (GROUP_C + BLOCK_C - 1) // BLOCK_C
    GROUPS: tl.constexpr = BLOCK_C // GROUP_C if GROUP_R == 1 and BLOCK_C > GROUP_C else 1
    tl.static_assert(GROUPS == 1 or BLOCK_C % GROUP_C == 0)
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * stride_xr
    q_rows = q_ptr + rows.to(tl.int64)[:, None] * C
    col0 = pid_c * GROUP_C * GROUPS
    chunk = tl.arange(0, BLOCK_C)

    if GROUPS > 1:
        cols = col0 + chunk
        mask = row_mask[:, None] & (cols[None, :] < C)
        x = tl.load(x_rows + cols.to(tl.int64)[None, :] * stride_xc, mask=mask, other=0.0)
        x = tl.reshape(x.to(tl.float32), (BLOCK_R, GROUPS, GROUP_C))
        scale, inv = _scale_and_inverse(tl.max(tl.abs(x), axis=2), FP8_MAX, EPS)
        q = tl.reshape(_quantize_tile(x, inv[:, :, None], FP8_MAX), (BLOCK_R, BLOCK_C))
        tl.store(q_rows + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    elif NUM_CHUNKS == 1:
        cols = col0 + chunk
        mask = row_mask[:, None] & (cols[None, :] < C)
        x = tl.load(x_rows + cols.to(tl.int64)[None, :] * stride_xc, mask=mask, other=0.0)
        x = x.to(tl.float32)
        if GIVEN_AMAX:
            amax = tl.load(amax_ptr + tl.zeros([BLOCK_R], tl.int32))
        elif GROUP_R == 1:
            amax = tl.max(tl.abs(x), axis=1)
        else:
            amax = tl.zeros([BLOCK_R], tl.float32) + tl.max(tl.max(tl.abs(x), axis=1), axis=0)
        scale, inv = _scale_and_inverse(amax, FP8_MAX, EPS)
        q = _quantize_tile(x, inv[:, None], FP8_MAX)
        tl.store(q_rows + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    else:
        if GIVEN_AMAX:
            amax = tl.load(amax_ptr + tl.zeros([BLOCK_R], tl.int32))
        else:
            running = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
            for c in range(0, NUM_CHUNKS):
                cols = col0 + c * BLOCK_C + chunk
                mask = row_mask[:, None] & (cols[None, :] < C)
                x = tl.load(x_rows + cols.to(tl.int64)[None, :] * stride_xc, mask=mask, other=0.0)
                running = tl.maximum(running, tl.abs(x.to(tl.float32)))
            amax = tl.max(running, axis=1)
            if GROUP_R != 1:
                amax = tl.zeros([BLOCK_R], tl.float32) + tl.max(amax, axis=0)
        scale, inv = _scale_and_inverse(amax, FP8_MAX, EPS)
        for c in range(0, NUM_CHUNKS):
            cols = col0 + c * BLOCK_C + chunk
            mask = row_mask[:, None] & (cols[None, :] < C)
            x = tl.load(x_rows + cols.to(tl.int64)[None, :] * stride_xc, mask=mask, other=0.0)
            q = _quantize_tile(x.to(tl.float32), inv[:, None], FP8_MAX)
            tl.store(q_rows + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)

    if GROUPS > 1:
        groups = pid_c * GROUPS + tl.arange(0, GROUPS)
        s_ptrs = s_ptr + rows.to(tl.int64)[:, None] * stride_sr + groups[None, :]
        tl.store(s_ptrs, scale, mask=row_mask[:, None] & (groups[None, :] < tl.cdiv(C, GROUP_C)))
    elif GIVEN_AMAX:
        # One scale for the whole tensor: the first program writes it.
        first = (pid_r == 0) & (pid_c == 0)
        tl.store(s_ptr + tl.arange(0, BLOCK_R), scale, mask=(tl.arange(0, BLOCK_R) == 0) & first)
    elif GROUP_R == 1:
        tl.store(s_ptr + rows.to(tl.int64) * stride_sr + pid_c, scale, mask=row_mask)
    else:
        lane = tl.arange(0, BLOCK_R)
        tl.store(s_ptr + pid_r.to(tl.int64) * stride_sr + pid_c + lane, scale, mask=lane == 0)


@triton.jit
def _quant_blockwise_both_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    qt_ptr,
    st_ptr,
    R,
    C,
    stride_xr,
    FP8_MAX: tl.constexpr,
    EPS: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """1x128 blocks of x and of x.T from one read of x (unit-stride rows). A 128 x BLOCK_C tile holds
    BLOCK_C // 128 whole groups of each of its rows, and, for each of its columns, one whole group of
    that row of x.T (its 128 rows). Writes q (R x C) with s (R, ceil(C/128)) and qt (C x R, the codes
    of x.T) with st (C, ceil(R/128)); each group's arithmetic is `_quant_kernel`'s."""
    GROUP: tl.constexpr = 128
    GROUPS: tl.constexpr = BLOCK_C // GROUP
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = pid_r * GROUP + tl.arange(0, GROUP)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * stride_xr + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)

    tiles = tl.reshape(x, (GROUP, GROUPS, GROUP))
    scale, inv = _scale_and_inverse(tl.max(tl.abs(tiles), axis=2), FP8_MAX, EPS)
    q = tl.reshape(_quantize_tile(tiles, inv[:, :, None], FP8_MAX), (GROUP, BLOCK_C))
    tl.store(q_ptr + rows.to(tl.int64)[:, None] * C + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    col_groups = tl.cdiv(C, GROUP)
    groups = pid_c * GROUPS + tl.arange(0, GROUPS)
    s_mask = (rows[:, None] < R) & (groups[None, :] < col_groups)
    tl.store(s_ptr + rows.to(tl.int64)[:, None] * col_groups + groups[None, :], scale, mask=s_mask)

    scale_t, inv_t = _scale_and_inverse(tl.max(tl.abs(x), axis=0), FP8_MAX, EPS)
    q_t = _quantize_tile(x, inv_t[None, :], FP8_MAX).to(qt_ptr.dtype.element_ty)
    q_t = tl.trans(q_t.to(tl.uint8, bitcast=True)).to(qt_ptr.dtype.element_ty, bitcast=True)
    tl.store(qt_ptr + cols.to(tl.int64)[:, None] * R + rows[None, :], q_t, mask=tl.trans(mask))
    tl.store(st_ptr + cols.to(tl.int64) * tl.cdiv(R, GROUP) + pid_r, scale_t, mask=cols < C)


_quant_kernel_tuned = triton.autotune(
    # One pinned KERNELS_QUANT_CONFIG serves both quantisers: this one ignores the tensorwise keys.
    configs=without_keys(pick_configs(_configs(), _CPU_CONFIG, CONFIG_ENV), ("PER_SM", "STAGES")),
    key=["R", "C", "GROUP_C", "BLOCK_C", "FP8_MAX"],
)(_quant_kernel)
_quant_rows_colmax_kernel_tuned = triton.autotune(
    # Its grid is fixed (COLMAX_PER_SM), so a pinned tensorwise config's PER_SM is dropped here.
    configs=without_keys(pick_configs(_colmax_configs(), _CPU_COLMAX_CONFIG, CONFIG_ENV), ("PER_SM",)),
    key=["R", "C", "BLOCK_C", "FP8_MAX"],
)(_quant_rows_colmax_kernel)
_quant_tensorwise_kernel_tuned = triton.autotune(
    configs=pick_configs(_tensorwise_configs(), _CPU_TENSORWISE_CONFIG, CONFIG_ENV),
    key=["R", "C", "BLOCK_C", "FP8_MAX", "TRANSPOSED"],
)(_quant_tensorwise_kernel)
_quant_blockwise_both_kernel_tuned = triton.autotune(
    configs=pick_configs(_both_configs(), _CPU_BOTH_CONFIG, BOTH_CONFIG_ENV),
    key=["R", "C", "FP8_MAX"],
)(_quant_blockwise_both_kernel)


def _check_input(x: torch.Tensor, granularity: str, fp8_dtype: torch.dtype) -> None:
    """Reject inputs the kernels do not handle, naming the fix."""
    if granularity not in GRANULARITIES:
        raise ValueError(
            f"granularity={granularity!r} is not supported; use one of {', '.join(PUBLIC_GRANULARITIES)}"
        )
    if fp8_dtype not in FP8_MAX:
        raise ValueError(
            f"fp8_dtype={fp8_dtype} is not an fp8 format; use torch.float8_e4m3fn or torch.float8_e5m2"
        )
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a 2-D (rows x K) tensor, got {shape}; reshape it with x.reshape(-1, K)")
    if x.dtype not in INPUT_DTYPES:
        raise ValueError(
            f"x has dtype {x.dtype}; convert it to torch.bfloat16 (fp16 and fp32 are also accepted)"
        )
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}; quantise a tensor with at least one element")


def _scale_shape(rows: int, cols: int, granularity: str) -> tuple[int, int]:
    """Shape of the float32 scales for an R x C input."""
    groups = -(-cols // BLOCK)  # integer ceil, so that the fake op's symbolic sizes work too
    return {
        "tensorwise": (1, 1),
        "rowwise": (rows, 1),
        "blockwise": (rows, groups),
        "block128": (-(-rows // BLOCK), groups),
    }[granularity]


def _tensorwise_grid(rows: int, cols: int, block_c: int, sms: int) -> Callable[[dict[str, int]], tuple[int]]:
    """Programs of `_quant_tensorwise_kernel`: PER_SM a SM, or one a tile (PER_SM = 0), never more
    than tiles."""

    def grid(meta: dict[str, int]) -> tuple[int]:
        tiles = cdiv(rows, cdiv(meta["ELEMS"], block_c)) * cdiv(cols, block_c)
        per_sm = meta.get("PER_SM", 0)
        return (min(tiles, sms * per_sm) if per_sm else tiles,)

    return grid


def _quantize_tensorwise(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, fp8_max: float, q_t: torch.Tensor | None = None
) -> None:
    """Tensorwise on unit-stride rows: two launches, no zero-filled buffer, no atomics, no host sync;
    with `q_t`, the quantise pass also writes the codes of x.T there."""
    rows, cols = x.shape
    sms = num_sms(x.device, INTERPRETER_SMS)
    block_c = min(next_power_of_2(cols), TILE_C)
    block_r = max(1, AMAX_ELEMS // block_c)
    tiles = cdiv(rows, block_r) * cdiv(cols, block_c)
    num_partials = min(tiles, sms * AMAX_PER_SM)
    partials = torch.empty(num_partials, dtype=torch.float32, device=x.device)
    launch(
        _amax_partials_kernel, (num_partials,),
        x, partials, rows, cols, x.stride(0),
        BLOCK_R=block_r, BLOCK_C=block_c, STAGES=AMAX_STAGES, num_warps=AMAX_WARPS,
    )  # fmt: skip
    if q_t is not None:
        block_c = min(next_power_of_2(cols), TRANSPOSED_TILE_C)
    launch(
        _quant_tensorwise_kernel_tuned, _tensorwise_grid(rows, cols, block_c, sms),
        x, q, q if q_t is None else q_t, scales, partials, rows, cols, x.stride(0), num_partials,
        FP8_MAX=fp8_max, EPS=SCALE_EPS, BLOCK_C=block_c, PARTIALS=next_power_of_2(num_partials),
        TRANSPOSED=q_t is not None,
    )  # fmt: skip


def _row_maxima(x: torch.Tensor, split_chunks: int | None = None) -> torch.Tensor:
    """|x| maxima of a strided view's rows over runs of `split_chunks` (default SPLIT_CHUNKS, read
    at the call) column chunks: float32 (R, SPLITS), one launch."""
    rows, cols = x.shape
    split_chunks = split_chunks or SPLIT_CHUNKS
    splits = cdiv(cols, split_chunks * STRIDED_BLOCK_C)
    partials = torch.empty((rows, splits), dtype=torch.float32, device=x.device)
    launch(
        _row_amax_partials_kernel, (cdiv(rows, SPLIT_BLOCK_R), splits),
        x, partials, rows, cols, x.stride(0), x.stride(1), splits,
        BLOCK_R=SPLIT_BLOCK_R, BLOCK_C=STRIDED_BLOCK_C, SPLIT_CHUNKS=split_chunks, STAGES=SPLIT_STAGES,
        num_warps=4,
    )  # fmt: skip
    return partials


def _quantize_rows_from_partials(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, partials: torch.Tensor, fp8_max: float
) -> None:
    """Rowwise on a strided view whose rows' maxima are known in pieces (partials: R x SPLITS): a 2-D
    grid of 32 x 256 tiles that each reduce their rows' partials (one launch, all SMs busy)."""
    rows, cols = x.shape
    splits = partials.shape[1]
    launch(
        _row_quant_partials_kernel, (cdiv(rows, SPLIT_BLOCK_R), cdiv(cols, STRIDED_BLOCK_C)),
        x, q, scales, partials, rows, cols, x.stride(0), x.stride(1), splits,
        FP8_MAX=fp8_max, EPS=SCALE_EPS, BLOCK_R=SPLIT_BLOCK_R, BLOCK_C=STRIDED_BLOCK_C,
        SPLITS_POW2=next_power_of_2(splits), num_warps=4,
    )  # fmt: skip


def _quantize_triton(
    x: torch.Tensor, granularity: str, fp8_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the quantiser for any of the four granularities; see the module docstring for layouts."""
    rows, cols = x.shape
    q = torch.empty((rows, cols), dtype=fp8_dtype, device=x.device)
    scales = torch.empty(_scale_shape(rows, cols, granularity), dtype=torch.float32, device=x.device)
    fp8_max = FP8_MAX[fp8_dtype]
    common = dict(FP8_MAX=fp8_max, EPS=SCALE_EPS)
    unit_stride = x.stride(1) == 1 or cols == 1
    if granularity == "tensorwise" and unit_stride:
        _quantize_tensorwise(x, q, scales, fp8_max)
    elif granularity == "rowwise" and not unit_stride and cols > STRIDED_BLOCK_C:
        _quantize_rows_from_partials(x, q, scales, _row_maxima(x), fp8_max)
    elif granularity in ("rowwise", "blockwise"):
        group_c = cols if granularity == "rowwise" else BLOCK
        if granularity == "blockwise" and unit_stride:  # several 1x128 blocks of each row a tile
            block_c = max(BLOCK, min(next_power_of_2(cols), BLOCKWISE_BLOCK_C))
        else:
            block_c = min(next_power_of_2(group_c), MAX_BLOCK_C if unit_stride else STRIDED_BLOCK_C)

        def grid(meta: dict[str, int]) -> tuple[int, int]:
            return (
                cdiv(rows, cdiv(meta["ELEMS"], block_c)),
                cdiv(cols, max(group_c, block_c)),
            )

        launch(

            _quant_kernel_tuned, grid,
            x, q, scales, scales, rows, cols, x.stride(0), x.stride(1), scales.stride(0),
            GROUP_C=group_c, BLOCK_C=block_c, GROUP_R=1, GIVEN_AMAX=False, **common,
        )  # fmt: skip
    elif granularity == "block128":
        grid_2d = (cdiv(rows, BLOCK), cdiv(cols, BLOCK))
        launch(
            _quant_kernel, grid_2d,
            x, q, scales, scales, rows, cols, x.stride(0), x.stride(1), scales.stride(0),
            GROUP_C=BLOCK, BLOCK_C=BLOCK, GROUP_R=BLOCK, GIVEN_AMAX=False, ELEMS=BLOCK * BLOCK,
            num_warps=8, **common,
        )  # fmt: skip
    else:
        amax = torch.zeros(1, dtype=torch.float32, device=x.device)
        tile_r, tile_c = 32, 256
        grid_2d = (cdiv(rows, tile_r), cdiv(cols, tile_c))
        launch(
            _amax_kernel,
            grid_2d,
            x,
            amax,
            rows,
            cols,
            x.stride(0),
            x.stride(1),
            BLOCK_R=tile_r,
            BLOCK_C=tile_c,
            num_warps=8,
        )
        launch(
            _quant_kernel, grid_2d,
            x, q, scales, amax, rows, cols, x.stride(0), x.stride(1), scales.stride(0),
            GROUP_C=tile_c, BLOCK_C=tile_c, GROUP_R=tile_r, GIVEN_AMAX=True, ELEMS=tile_r * tile_c,
            num_warps=8, **common,
        )  # fmt: skip
    return q, scales


def _group_amax(x32: torch.Tensor, granularity: str) -> torch.Tensor:
    """|x| maximum of every group, shaped like the scales (max is exact, so any order agrees)."""
    rows, cols = x32.shape
    if granularity == "tensorwise":
        return x32.abs().amax().reshape(1, 1)
    if granularity == "rowwise":
        return x32.abs().amax(dim=1, keepdim=True)
    groups = math.ceil(cols / BLOCK)
    padded = torch.nn.functional.pad(x32.abs(), (0, groups * BLOCK - cols))
    if granularity == "blockwise":
        return padded.reshape(rows, groups, BLOCK).amax(dim=2)
    row_blocks = math.ceil(rows / BLOCK)
    padded = torch.nn.functional.pad(padded, (0, 0, 0, row_blocks * BLOCK - rows))
    return padded.reshape(row_blocks, BLOCK, groups, BLOCK).amax(dim=(1, 3))


def group_shape(granularity: str, rows: int, cols: int) -> tuple[int, int]:
    """Rows x columns of x that share one scale."""
    return {
        "tensorwise": (rows, cols),
        "rowwise": (1, cols),
        "blockwise": (1, BLOCK),
        "block128": (BLOCK, BLOCK),
    }[granularity]


def expand_scales(scales: torch.Tensor, granularity: str, rows: int, cols: int) -> torch.Tensor:
    """Broadcast group scales back to an R x C tensor (for dequantising: x ~= q * expanded)."""
    group_rows, group_cols = group_shape(granularity, rows, cols)
    full = scales.repeat_interleave(group_rows, dim=0).repeat_interleave(group_cols, dim=1)
    return full[:rows, :cols]


def _quantize_torch(
    x: torch.Tensor, granularity: str, fp8_dtype: torch.dtype, group_amax: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 operations of the Triton kernel, in the same order, in torch; `group_amax`, where
    given, is every group's |x| maximum, shaped like the scales (max is exact: the same bits)."""
    fp8_max = FP8_MAX[fp8_dtype]
    x32 = x.to(torch.float32)
    if group_amax is None:
        group_amax = _group_amax(x32, granularity)
    amax = group_amax.clamp_min(SCALE_EPS)
    # Tensor-by-tensor divisions: on CUDA, torch turns `tensor / python_scalar` into a multiply by
    # the scalar's reciprocal, which is not the kernel's IEEE division.
    scales = amax / torch.full_like(amax, fp8_max)
    inv = torch.ones_like(scales) / scales
    rows, cols = x.shape
    scaled = x32 * expand_scales(inv, granularity, rows, cols)
    q = scaled.clamp(-fp8_max, fp8_max).to(fp8_dtype).contiguous()
    return q, scales


def _quantize(x: torch.Tensor, granularity: str, fp8_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """`quantize` for checked inputs: the backend KERNELS_QUANT_BACKEND names, read at every call."""
    if backend(BACKEND_ENV) == "torch":
        return _quantize_torch(x, granularity, fp8_dtype)
    return _quantize_triton(x, granularity, fp8_dtype)


def quantize(
    x: torch.Tensor, granularity: str, fp8_dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise the rows of a 2-D view (any strides) with any of the four granularities, on the
    backend KERNELS_QUANT_BACKEND picks. gemm_fp8 calls this for its operands and gradients."""
    _check_input(x, granularity, fp8_dtype)
    return _quantize(x, granularity, fp8_dtype)


def quantize_tensorwise_transposed(
    x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tensorwise codes of x and of x.T (both contiguous) with their one scale: (q, q_t, scales).
    One amax pass and one quantise pass that stores each tile twice, where quantising and then
    transposing would read the codes back and write them again in a third launch. x needs unit-stride
    rows (the layout of an activation, a weight or an output gradient)."""
    _check_input(x, "tensorwise", fp8_dtype)
    if x.stride(1) != 1 and x.shape[1] != 1:
        raise ValueError(
            f"x has strides {tuple(x.stride())}; quantize_tensorwise_transposed needs unit-stride rows "
            "(pass x.contiguous(), or quantize() a transposed view)"
        )
    if backend(BACKEND_ENV) == "torch" or x.dtype == torch.float32:
        # float32: on an H200 (triton 3.6.0) the fused pass wrote wrong codes of x.T from float32
        # tiles under its one-tile-a-program configs (PER_SM = 0) at 64 and 80 rows of 128, where the
        # fp8 GEMM's op tests with bf16 operands pass. It takes the plain quantiser and a copy instead.
        q, scales = _quantize(x, "tensorwise", fp8_dtype)
        return q, q.t().contiguous(), scales
    rows, cols = x.shape
    q = torch.empty((rows, cols), dtype=fp8_dtype, device=x.device)
    q_t = torch.empty((cols, rows), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((1, 1), dtype=torch.float32, device=x.device)
    _quantize_tensorwise(x, q, scales, FP8_MAX[fp8_dtype], q_t)
    return q, q_t, scales


def quantize_blockwise_both(
    x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Blockwise (1x128) codes and scales of x and of x.T: (q, scales, q_t, scales_t), as
    `quantize(x, "blockwise")` and `quantize(x.t(), "blockwise")` give them, from one read of x
    where those two read it twice (the second time along its columns). The fp8 GEMM's backward
    quantises its output gradient both ways. Unit-stride rows of bf16 or fp16 take the fused kernel;
    other views, float32 (see `quantize_tensorwise_transposed`) and the torch backend take the two
    quantisers."""
    _check_input(x, "blockwise", fp8_dtype)
    rows, cols = x.shape
    if backend(BACKEND_ENV) == "torch" or x.dtype == torch.float32 or x.stride(1) != 1:
        return (*_quantize(x, "blockwise", fp8_dtype), *_quantize(x.t(), "blockwise", fp8_dtype))
    q = torch.empty((rows, cols), dtype=fp8_dtype, device=x.device)
    q_t = torch.empty((cols, rows), dtype=fp8_dtype, device=x.device)
    scales = torch.empty(_scale_shape(rows, cols, "blockwise"), dtype=torch.float32, device=x.device)
    scales_t = torch.empty(_scale_shape(cols, rows, "blockwise"), dtype=torch.float32, device=x.device)

    def grid(meta: dict[str, int]) -> tuple[int, int]:
        return (cdiv(rows, BLOCK), cdiv(cols, meta["BLOCK_C"]))

    launch(
        _quant_blockwise_both_kernel_tuned, grid,
        x, q, scales, q_t, scales_t, rows, cols, x.stride(0),
        FP8_MAX=FP8_MAX[fp8_dtype], EPS=SCALE_EPS,
    )  # fmt: skip
    return q, scales, q_t, scales_t


def column_amax_torch(x: torch.Tensor) -> torch.Tensor:
    """Every column's |x| maximum, float32 (C, 1), in torch (max is exact: the kernels' bits)."""
    return x.abs().amax(dim=0).to(torch.float32).reshape(-1, 1)


def _column_amax(x: torch.Tensor) -> torch.Tensor:
    """Every column's |x| maximum, float32 (C, 1): the row maxima of x.T in runs of chunks, then,
    where a row took several runs, one more launch that reduces them."""
    partials = _row_maxima(x.t())
    splits = partials.shape[1]
    return partials if splits == 1 else _row_maxima(partials, cdiv(splits, STRIDED_BLOCK_C))


def quantize_rowwise_with_column_amax(
    x: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rowwise codes and scales of x with every column's |x| maximum: (q, scales, column_amax),
    column_amax float32 (C, 1), the row maxima of x.T for `quantize_rowwise_given_amax(x.t(), ...)`.
    On unit-stride rows up to MAX_BLOCK_C columns the maxima are folded into the rowwise pass (two
    launches: the pass, then a reduction of its per-program partials); elsewhere (longer or strided
    rows) the rowwise pass runs as in quantize() and the maxima take a pass over x.T of their own,
    the one its quantisation would otherwise make; the torch backend computes them in torch."""
    _check_input(x, "rowwise", fp8_dtype)
    rows, cols = x.shape
    if backend(BACKEND_ENV) == "torch":
        return (*_quantize_torch(x, "rowwise", fp8_dtype), column_amax_torch(x))
    if x.stride(1) != 1 or cols > MAX_BLOCK_C:
        return (*_quantize_triton(x, "rowwise", fp8_dtype), _column_amax(x))
    q = torch.empty((rows, cols), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    # A fixed number of programs (not one per config's row group), so that the partials' count does
    # not depend on the autotuner's pick; a program without a row group stores zeros, which no
    # maximum sees.
    programs = min(rows, num_sms(x.device, INTERPRETER_SMS) * COLMAX_PER_SM)
    colmax = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    launch(
        _quant_rows_colmax_kernel_tuned, (programs,),
        x, q, scales, colmax, rows, cols, x.stride(0),
        FP8_MAX=FP8_MAX[fp8_dtype], EPS=SCALE_EPS, BLOCK_C=next_power_of_2(cols),
    )  # fmt: skip
    # One run of chunks spans every program's partial, so the reduction leaves one maximum a column.
    return q, scales, _row_maxima(colmax.t(), cdiv(programs, STRIDED_BLOCK_C))


def quantize_rowwise_given_amax(
    x: torch.Tensor, row_amax: torch.Tensor, fp8_dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rowwise codes and scales of a 2-D view (any strides) whose rows' |x| maxima are known
    (row_amax: float32 (R, 1), e.g. the column_amax of `quantize_rowwise_with_column_amax` for
    x = that tensor's .t()): one pass, without the amax pass of its own. The result is
    `quantize(x, "rowwise")`'s when row_amax holds x's maxima, on either backend."""
    _check_input(x, "rowwise", fp8_dtype)
    rows, cols = x.shape
    if row_amax.shape != (rows, 1) or row_amax.dtype != torch.float32 or row_amax.device != x.device:
        raise ValueError(
            f"row_amax is {row_amax.dtype} {tuple(row_amax.shape)} on {row_amax.device}; pass float32 "
            f"({rows}, 1) on {x.device}: the column_amax that quantize_rowwise_with_column_amax returned"
        )
    if backend(BACKEND_ENV) == "torch":
        return _quantize_torch(x, "rowwise", fp8_dtype, row_amax)
    q = torch.empty((rows, cols), dtype=fp8_dtype, device=x.device)
    scales = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    _quantize_rows_from_partials(x, q, scales, row_amax.contiguous(), FP8_MAX[fp8_dtype])
    return q, scales


def _check_public(granularity: str) -> None:
    if granularity not in PUBLIC_GRANULARITIES:
        raise ValueError(
            f"granularity={granularity!r} is not supported; use one of {', '.join(PUBLIC_GRANULARITIES)}"
        )


@torch.library.custom_op(f"{NAMESPACE}::quantize_fp8", mutates_args=())
def quantize_fp8_op(x: torch.Tensor, granularity: str) -> tuple[torch.Tensor, torch.Tensor]:
    """`quantize_fp8` as a custom op, the node torch.compile puts in its graph; inputs as
    `quantize_fp8` checks them."""
    return _quantize(x, granularity, torch.float8_e4m3fn)


@quantize_fp8_op.register_fake
def _quantize_fp8_fake(x: torch.Tensor, granularity: str) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = x.shape
    q = x.new_empty((rows, cols), dtype=torch.float8_e4m3fn)
    return q, x.new_empty(_scale_shape(rows, cols, granularity), dtype=torch.float32)


def _quantize_fp8_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, ...]) -> None:
    # Quantisation is a rounding step with no useful gradient.
    ctx.mark_non_differentiable(*output)


def _quantize_fp8_backward(ctx: Any, grad_q: torch.Tensor, grad_scales: torch.Tensor) -> tuple[None, None]:
    return None, None


quantize_fp8_op.register_autograd(_quantize_fp8_backward, setup_context=_quantize_fp8_setup)


def quantize_fp8(x: torch.Tensor, granularity: str = "rowwise") -> tuple[torch.Tensor, torch.Tensor]:
    """x (M x K, bf16/fp16/fp32) -> (q: float8_e4m3fn M x K, scales: float32), x ~= q * scales.

    tensorwise: scales (1, 1); rowwise: scales (M, 1); blockwise: 1x128 blocks along K, scales
    (M, ceil(K/128)). Neither output carries a gradient. Under torch.compile this is the custom op
    `torch.ops.gitcampaign_kernels.quantize_fp8`.
    """
    _check_public(granularity)
    _check_input(x, granularity, torch.float8_e4m3fn)
    if torch.compiler.is_compiling():
        return quantize_fp8_op(x, granularity)
    return _quantize(x.detach(), granularity, torch.float8_e4m3fn)


def quantize_fp8_reference(
    x: torch.Tensor, granularity: str = "rowwise"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The torch backend of quantize_fp8: same float32 operations, so bit-exact on a GPU."""
    _check_public(granularity)
    _check_input(x, granularity, torch.float8_e4m3fn)
    return _quantize_torch(x, granularity, torch.float8_e4m3fn)
