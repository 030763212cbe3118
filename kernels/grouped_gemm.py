"""Grouped GEMM for mixture-of-experts layers: rows of group g of `a` times expert weight `b[g]`ᵀ.

    out[rows of g] = a[rows of g] @ b[g]ᵀ      a: (ΣM) x K sorted by group, b: G x N x K
Forward and backward:
    dA[rows of g] = dout[rows of g] @ b[g]     (the forward kernel on the view bᵀ)
    dB[g]         = dout[rows of g]ᵀ @ a[rows of g]   (zero for an empty group)

Per-group row counts come from `group_sizes`, an int64 device tensor, and stay runtime values: no
group size is a compile-time constant, none is assumed a tile multiple or non-zero, and the forward
never reads them on the host (no `.item()`, no sync; see `_check_group_sum` for the one check that
would need the values).

Two kernel families. 16-bit operands that TMA can read (16-byte aligned base and non-unit strides,
a unit stride in one dimension; sm90+ or the interpreter) run the persistent TMA kernels; fp32 and
any other layout run the pointer kernels (the fallback).

Persistent forward/dA (`_grouped_matmul_nt_tma_kernel`): grid = min(#SMs, an upper bound of the
tiles from host-known numbers, (cdiv(ΣM, BLOCK_M) + G) * cdiv(N, BLOCK_N)). Each program loads all
G sizes once (G padded to G_POW2, a compile-time constant: the number of experts is fixed per
model; the sizes stay runtime values), takes the real tile count from the cumulative row tiles, and
walks a global tile index over every group's (row tile x column tile) space with stride #SMs
(`tl.range(..., flatten=True)`, so the next tile's loads overlap this tile's epilogue); tile order is
swizzled in GROUP_M-tall bands as in `kernels.gemm`. A tile's group is the number of groups whose
row tiles all come before it. Operands come through device-side tensor descriptors: `a` as
ΣM x K (rows past the group's end are read from the next group but reach only output rows the
masked store skips), `b` as G x N x K in 3-D (the dA view bᵀ as G x K x N over the same storage),
so column and K tails are zero-filled at each expert's end. The store is a masked pointer store:
rows past the group's end belong to the next group. EPILOGUE_SUBTILE stores two half-width tiles.
Pointers: a_ptr (ΣM x K, row stride stride_am, unit K stride), b_ptr (G x N x K with stride_bg and
the row stride stride_b_row of its 2-D per-expert matrix, unit last stride; B_K_MAJOR says whether
that matrix is N x K (forward) or K x N (dA)), c_ptr (ΣM x N, row stride stride_cm, unit column
stride), sizes_ptr.

Persistent dB (`_grouped_db_tma_kernel`): grid = min(#SMs, G * N tiles * K tiles); one global tile
index over (group, N tile, K tile), dealt round-robin, walked group by group: per group each program
makes descriptors of dout and `a` that end at the group's last row (TMA zero-fills the partial last
reduction step, so the next group's rows never enter the sum) and one of dB[g] (N x K, the store
clipped at the N and K tails), then reduces each of its tiles over the group's rows in BLOCK_M steps;
an empty group stores zeros. Pointers: dout_ptr (ΣM x N, row stride stride_dm), a_ptr (ΣM x K, row
stride stride_am), db_ptr (G x N x K, strides stride_bg, stride_bn, 1), sizes_ptr.
Device-side descriptors need global scratch: the launchers call `use_tma_scratch`.

Pointer forward/dA (`_grouped_matmul_nt_kernel`): the grid is the tile upper bound above, one
program a tile; each program finds its group as the persistent kernel does and programs past the
real tile count exit at once. Rows past the group's end are clamped to its last row so loads need no
mask (the store is masked); column and K tails are masked only when N or K is not a block multiple.
Grid: ((cdiv(ΣM, BLOCK_M) + G) * cdiv(N, BLOCK_N),).
Pointers (element strides, any layout):
    a_ptr      A, ΣM x K, (m, k) at m * stride_am + k * stride_ak
    b_ptr      B, G x N x K, (g, n, k) at g * stride_bg + n * stride_bn + k * stride_bk
    c_ptr      C, ΣM x N, (m, n) at m * stride_cm + n * stride_cn (every element written)
    sizes_ptr  G int64 row counts, in the order groups appear in A (negative counts read as 0)

Pointer dB (`_grouped_db_kernel`): one program per (N tile, K tile, group) reduces over that group's
rows in BLOCK_M steps, rows masked at the group's end (N and K tails masked when not a block
multiple); an empty group runs no step and stores zeros. Grid: (cdiv(N, BLOCK_N) * cdiv(K, BLOCK_K), G).
Pointers:
    dout_ptr   ΣM x N, (m, n) at m * stride_dm + n * stride_dn
    a_ptr      ΣM x K, (m, k) at m * stride_am + k * stride_ak
    db_ptr     G x N x K, (g, n, k) at g * stride_bg + n * stride_bn + k * stride_bk (every element written)
    sizes_ptr  G int64 row counts

Row offsets are int64 before they multiply a stride. Backend:
`KERNELS_GROUPED_GEMM_BACKEND=triton|torch` (torch = `torch._grouped_mm` on sm90 with bf16, else a
loop of matmuls). Pin one config with
`KERNELS_GROUPED_GEMM_CONFIG` (forward/dA kernels) and `KERNELS_GROUPED_GEMM_DB_CONFIG` (dB kernels);
EPILOGUE_SUBTILE=0|1 in a pinned config applies to the TMA kernels only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._common import (
    NAMESPACE,
    TMA_ONLY_KEYS,
    backend,
    capability,
    cdiv,
    input_precision,
    launch,
    next_power_of_2,
    num_sms,
    pick_configs,
    tile_pid,
    tma_addressable,
    tma_config,
    tma_supported,
    use_tma_scratch,
    without_keys,
)
from kernels._common import matmul_config as _config

BACKEND_ENV = "KERNELS_GROUPED_GEMM_BACKEND"
CONFIG_ENV = "KERNELS_GROUPED_GEMM_CONFIG"
DB_CONFIG_ENV = "KERNELS_GROUPED_GEMM_DB_CONFIG"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _hopper_configs() -> list[triton.Config]:
    """Forward/dA candidates for sm90; per-expert M is often ~1k rows, so mid-size tiles matter more."""
    return [
        # Large tiles for large experts: two warpgroups, 3-4 stages of 32-48 KiB operands.
        _config(128, 256, 64, 8, 3),
        _config(128, 128, 64, 8, 4),
        _config(128, 128, 64, 8, 3),
        # 64-row tiles: less padding in the last, partial tile of each group.
        _config(64, 128, 64, 4, 4),
        _config(64, 256, 64, 8, 3),
        _config(128, 64, 64, 4, 4),
    ]


def _hopper_db_configs() -> list[triton.Config]:
    """dB candidates: BLOCK_N x BLOCK_K output tiles; BLOCK_M is the step along the group's rows."""
    return [
        # Large output tiles, 64-row steps: 48 KiB of operands per stage, 3 stages fit.
        _config(64, 128, 256, 8, 3),
        _config(64, 256, 128, 8, 3),
        # Square tiles with deeper pipelining for long (hot-expert) reductions.
        _config(64, 128, 128, 8, 4),
        _config(64, 128, 128, 4, 4),
        # Small output tiles: enough programs when N x K per expert is small.
        _config(64, 64, 128, 4, 4),
    ]


# The interpreter runs one config (autotuning cannot time there); 64-wide tiles keep it fast.
_CPU_CONFIG = _config(64, 64, 64, 4, 1)


def _hopper_tma_configs() -> list[triton.Config]:
    """Persistent forward/dA candidates (operands 48 KiB a stage at 128x256x64: 3 stages + the
    epilogue fit 227 KiB)."""
    return [
        tma_config(128, 256, 64, 8, 3),
        tma_config(128, 256, 64, 8, 3, subtile=True),
        tma_config(256, 128, 64, 8, 3),
        tma_config(128, 128, 64, 8, 4),
        tma_config(128, 128, 64, 4, 4, subtile=True),
        # 64-row tiles waste less in each group's last, partial tile (skewed routings).
        tma_config(64, 256, 64, 4, 4),
    ]


def _hopper_tma_db_configs() -> list[triton.Config]:
    """Persistent dB candidates: BLOCK_N x BLOCK_K output tiles, BLOCK_M rows a reduction step."""
    return [
        tma_config(64, 128, 256, 8, 3),
        tma_config(64, 256, 128, 8, 3),
        tma_config(64, 128, 128, 8, 4),
        tma_config(64, 128, 128, 4, 4, subtile=True),
    ]


# The interpreter's TMA config splits the epilogue, so the CPU tests cover the subtile path; the
# plain path is covered by a test that swaps this list.
_CPU_TMA_CONFIG = tma_config(64, 64, 64, 4, 1, subtile=True)


@triton.autotune(
    configs=without_keys(pick_configs(_hopper_configs(), _CPU_CONFIG, CONFIG_ENV), TMA_ONLY_KEYS),
    key=["M_total", "N", "K", "G", "stride_ak", "stride_bk", "INPUT_PRECISION"],
)
@triton.heuristics(
    {
        "EVEN_N": lambda meta: meta["N"] % meta["BLOCK_N"] == 0,
        "EVEN_K": lambda meta: meta["K"] % meta["BLOCK_K"] == 0,
    }
)
@triton.jit
def _grouped_matmul_nt_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    sizes_ptr,
    M_total,
    N,
    K,
    G,
    stride_am,
    stride_ak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    G_POW2: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_pid(tl.program_id(0), tl.cdiv(M_total, BLOCK_M) + G, tl.cdiv(N, BLOCK_N), GROUP_M)

    # Find the group whose row tiles contain pid_m from one vector load of all G sizes (negative sizes
    # count as 0 and rows are clamped to M_total, so a wrong group_sizes cannot reach past ΣM rows).
    group_ids = tl.arange(0, G_POW2)
    sizes = tl.maximum(tl.load(sizes_ptr + group_ids, mask=group_ids < G, other=0), 0)
    tiles = tl.cdiv(sizes, BLOCK_M).to(tl.int32)
    tiles_end = tl.cumsum(tiles, 0)
    rows_end = tl.cumsum(sizes, 0)
    # Groups whose tiles all come before pid_m (empty groups included); G or more: past the last tile.
    group = tl.sum((tiles_end <= pid_m).to(tl.int32), 0)
    if group >= G:
        return
    in_group = group_ids == group
    group_size = tl.sum(tl.where(in_group, sizes, 0), 0)
    row_end = tl.sum(tl.where(in_group, rows_end, 0), 0)
    first_tile = tl.sum(tl.where(in_group, tiles_end - tiles, 0), 0)
    row_start = row_end - group_size + (pid_m - first_tile).to(tl.int64) * BLOCK_M
    row_end = tl.minimum(row_end, M_total)
    if row_start >= row_end:
        return

    rows = row_start + tl.arange(0, BLOCK_M)
    offs_m = tl.minimum(rows, row_end - 1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (
        b_ptr
        + group.to(tl.int64) * stride_bg
        + cols.to(tl.int64)[None, :] * stride_bn
        + offs_k[:, None] * stride_bk
    )
    # An EVEN_* mask is a constant True the compiler drops (see kernels.gemm: a mask or modulo on the
    # unit-stride dimension of bᵀ in the dA product would stop vectorised, pipelined loads).
    col_ok = (cols < N) | tl.full((BLOCK_N,), EVEN_N, tl.int1)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_ok = (offs_k < K - k * BLOCK_K) | tl.full((BLOCK_K,), EVEN_K, tl.int1)
        a_tile = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
        b_tile = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a_tile, b_tile, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < row_end) & col_ok[None, :])


@triton.autotune(
    configs=without_keys(pick_configs(_hopper_db_configs(), _CPU_CONFIG, DB_CONFIG_ENV), TMA_ONLY_KEYS),
    key=["M_total", "N", "K", "G", "stride_dm", "stride_am", "INPUT_PRECISION"],
)
@triton.heuristics(
    {
        "EVEN_N": lambda meta: meta["N"] % meta["BLOCK_N"] == 0,
        "EVEN_K": lambda meta: meta["K"] % meta["BLOCK_K"] == 0,
    }
)
@triton.jit
def _grouped_db_kernel(
    dout_ptr,
    a_ptr,
    db_ptr,
    sizes_ptr,
    M_total,
    N,
    K,
    G,
    stride_dm,
    stride_dn,
    stride_am,
    stride_ak,
    stride_bg,
    stride_bn,
    stride_bk,
    G_POW2: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    group = tl.program_id(1)
    # The output is N x K here, so N tiles play the role of row tiles.
    pid_n, pid_k = tile_pid(tl.program_id(0), tl.cdiv(N, BLOCK_N), tl.cdiv(K, BLOCK_K), GROUP_M)

    group_ids = tl.arange(0, G_POW2)
    sizes = tl.maximum(tl.load(sizes_ptr + group_ids, mask=group_ids < G, other=0), 0)
    group_base = tl.sum(tl.where(group_ids < group, sizes, 0), 0)
    size = tl.sum(tl.where(group_ids == group, sizes, 0), 0)
    # Clamped like the forward so a wrong group_sizes never reads past ΣM rows.
    group_end = tl.minimum(group_base + size, M_total)
    steps = tl.cdiv(tl.maximum(group_end - group_base, 0), BLOCK_M).to(tl.int32)

    cols_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cols_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    n_ok = (cols_n < N) | tl.full((BLOCK_N,), EVEN_N, tl.int1)
    k_ok = (cols_k < K) | tl.full((BLOCK_K,), EVEN_K, tl.int1)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for step in range(0, steps):
        rows = group_base + step * BLOCK_M + tl.arange(0, BLOCK_M)
        in_group = rows < group_end
        dout_t = tl.load(
            dout_ptr + rows[None, :] * stride_dm + cols_n.to(tl.int64)[:, None] * stride_dn,
            mask=in_group[None, :] & n_ok[:, None],
            other=0.0,
        )
        a_tile = tl.load(
            a_ptr + rows[:, None] * stride_am + cols_k.to(tl.int64)[None, :] * stride_ak,
            mask=in_group[:, None] & k_ok[None, :],
            other=0.0,
        )
        acc = tl.dot(dout_t, a_tile, acc, input_precision=INPUT_PRECISION)

    db_ptrs = (
        db_ptr
        + group.to(tl.int64) * stride_bg
        + cols_n.to(tl.int64)[:, None] * stride_bn
        + cols_k.to(tl.int64)[None, :] * stride_bk
    )
    tl.store(db_ptrs, acc.to(db_ptr.dtype.element_ty), mask=n_ok[:, None] & k_ok[None, :])


@triton.jit
def _store_tile(c_ptr, acc, rows, cols, row_end, N, stride_cm):
    """Masked store of an fp32 tile: rows at or past row_end belong to the next group."""
    mask = (rows[:, None] < row_end) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.autotune(
    configs=pick_configs(_hopper_tma_configs(), _CPU_TMA_CONFIG, CONFIG_ENV),
    key=["M_total", "N", "K", "G", "B_K_MAJOR"],
)
@triton.jit
def _grouped_matmul_nt_tma_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    sizes_ptr,
    M_total,
    N,
    K,
    G,
    stride_am,
    stride_bg,
    stride_b_row,
    stride_cm,
    G_POW2: tl.constexpr,
    NUM_SMS: tl.constexpr,
    B_K_MAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr = False,
):
    group_ids = tl.arange(0, G_POW2)
    sizes = tl.maximum(tl.load(sizes_ptr + group_ids, mask=group_ids < G, other=0), 0)
    tiles = tl.cdiv(sizes, BLOCK_M).to(tl.int32)
    tiles_end = tl.cumsum(tiles, 0)
    rows_end = tl.cumsum(sizes, 0)
    num_pid_m = tl.sum(tiles, 0)
    num_pid_n = tl.cdiv(N, BLOCK_N)

    # Rows past a group's end are read from the next group (or zero-filled past ΣM): they only reach
    # output rows of that tile the masked store skips. K tails are zero-filled in both operands.
    a_desc = tl.make_tensor_descriptor(a_ptr, [M_total, K], [stride_am, 1], [BLOCK_M, BLOCK_K])
    # b as G x rows x cols in 3-D, so a tile's column (forward) or K (dA) tail is zero-filled at the
    # expert's end instead of reading the next expert.
    if B_K_MAJOR:
        b_desc = tl.make_tensor_descriptor(
            b_ptr, [G, N, K], [stride_bg, stride_b_row, 1], [1, BLOCK_N, BLOCK_K]
        )
    else:
        b_desc = tl.make_tensor_descriptor(
            b_ptr, [G, K, N], [stride_bg, stride_b_row, 1], [1, BLOCK_K, BLOCK_N]
        )

    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        group = tl.sum((tiles_end <= pid_m).to(tl.int32), 0)
        in_group = group_ids == group
        row_end = tl.sum(tl.where(in_group, rows_end, 0), 0)
        first_tile = tl.sum(tl.where(in_group, tiles_end - tiles, 0), 0)
        row_start = row_end - tl.sum(tl.where(in_group, sizes, 0), 0) + (pid_m - first_tile) * BLOCK_M
        off_m = row_start.to(tl.int32)
        off_n = pid_n * BLOCK_N

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            off_k = k * BLOCK_K
            a_tile = a_desc.load([off_m, off_k])
            if B_K_MAJOR:
                b_tile = b_desc.load([group, off_n, off_k]).reshape(BLOCK_N, BLOCK_K).T
            else:
                b_tile = b_desc.load([group, off_k, off_n]).reshape(BLOCK_K, BLOCK_N)
            acc = tl.dot(a_tile, b_tile, acc)

        rows = row_start + tl.arange(0, BLOCK_M)
        row_end = tl.minimum(row_end, M_total)
        if EPILOGUE_SUBTILE:
            # Two half-width stores: half the registers and scratch for the layout conversion.
            acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)).permute(0, 2, 1)
            acc_lo, acc_hi = tl.split(acc)
            cols = off_n + tl.arange(0, BLOCK_N // 2)
            _store_tile(c_ptr, acc_lo, rows, cols, row_end, N, stride_cm)
            _store_tile(c_ptr, acc_hi, rows, cols + BLOCK_N // 2, row_end, N, stride_cm)
        else:
            _store_tile(c_ptr, acc, rows, off_n + tl.arange(0, BLOCK_N), row_end, N, stride_cm)


@triton.autotune(
    configs=pick_configs(_hopper_tma_db_configs(), _CPU_TMA_CONFIG, DB_CONFIG_ENV),
    key=["M_total", "N", "K", "G"],
)
@triton.jit
def _grouped_db_tma_kernel(
    dout_ptr,
    a_ptr,
    db_ptr,
    sizes_ptr,
    M_total,
    N,
    K,
    G,
    stride_dm,
    stride_am,
    stride_bg,
    stride_bn,
    G_POW2: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr = False,
):
    pid = tl.program_id(0)
    group_ids = tl.arange(0, G_POW2)
    sizes = tl.maximum(tl.load(sizes_ptr + group_ids, mask=group_ids < G, other=0), 0)
    rows_end = tl.minimum(tl.cumsum(sizes, 0), M_total)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_k = tl.cdiv(K, BLOCK_K)
    tiles = num_pid_n * num_pid_k

    # A `while`, not a `for`: the compiler flattens a loop nest of exactly two loops, here each
    # group's tile loop with its reduction loop (the next tile's loads overlap this tile's store).
    group = 0
    while group < G:
        row_end = tl.sum(tl.where(group_ids == group, rows_end, 0), 0)
        row_start = tl.sum(tl.where(group_ids == group - 1, rows_end, 0), 0)
        steps = tl.cdiv(tl.maximum(row_end - row_start, 0), BLOCK_M).to(tl.int32)
        # Descriptors ending at the group's last row: TMA zero-fills the partial last step, so the
        # next group's rows never enter the reduction. Made once a group (a global write + fence).
        rows = tl.maximum(row_end, 1).to(tl.int32)
        dout_desc = tl.make_tensor_descriptor(dout_ptr, [rows, N], [stride_dm, 1], [BLOCK_M, BLOCK_N])
        a_desc = tl.make_tensor_descriptor(a_ptr, [rows, K], [stride_am, 1], [BLOCK_M, BLOCK_K])
        db_desc = tl.make_tensor_descriptor(
            db_ptr + tl.cast(group, tl.int64) * stride_bg,
            [N, K],
            [stride_bn, 1],
            [BLOCK_N, BLOCK_K // 2 if EPILOGUE_SUBTILE else BLOCK_K],
        )
        # Tiles are dealt round-robin over all groups' (N tile, K tile) space, as one flat index.
        first = (pid - (group * tiles) % NUM_SMS + NUM_SMS) % NUM_SMS
        for tile in tl.range(first, tiles, NUM_SMS, flatten=True):
            pid_n, pid_k = tile_pid(tile, num_pid_n, num_pid_k, GROUP_M)
            off_n = pid_n * BLOCK_N
            off_k = pid_k * BLOCK_K
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            for step in range(0, steps):
                off_m = (row_start + step * BLOCK_M).to(tl.int32)
                dout_tile = dout_desc.load([off_m, off_n])
                a_tile = a_desc.load([off_m, off_k])
                acc = tl.dot(dout_tile.T, a_tile, acc)
            # The store is clipped at N and K by the descriptor; an empty group stores zeros.
            if EPILOGUE_SUBTILE:
                acc = tl.reshape(acc, (BLOCK_N, 2, BLOCK_K // 2)).permute(0, 2, 1)
                acc_lo, acc_hi = tl.split(acc)
                db_desc.store([off_n, off_k], acc_lo.to(db_ptr.dtype.element_ty))
                db_desc.store([off_n, off_k + BLOCK_K // 2], acc_hi.to(db_ptr.dtype.element_ty))
            else:
                db_desc.store([off_n, off_k], acc.to(db_ptr.dtype.element_ty))
        group += 1


def _check_inputs(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> None:
    """Raise ValueError naming the fix for anything checkable from metadata alone (no device sync)."""
    if a.dim() != 2 or b.dim() != 3:
        raise ValueError(
            f"grouped_gemm needs a: (ΣM) x K and b: G x N x K, got {tuple(a.shape)} and {tuple(b.shape)}; "
            "stack the expert weights with torch.stack"
        )
    if a.dtype != b.dtype:
        raise ValueError(f"grouped_gemm needs one dtype, got a: {a.dtype}, b: {b.dtype}; cast with .to()")
    if a.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"grouped_gemm supports {SUPPORTED_DTYPES}, got {a.dtype}; cast with .to(torch.bfloat16)"
        )
    if a.shape[1] != b.shape[2]:
        raise ValueError(
            f"grouped_gemm needs the same K in a ({tuple(a.shape)}) and b ({tuple(b.shape)}); "
            "pass expert weights in nn.Linear layout (G x out_features x in_features)"
        )
    if b.shape[0] == 0:
        raise ValueError("grouped_gemm needs at least one group; b has G = 0")
    if group_sizes.dim() != 1 or group_sizes.shape[0] != b.shape[0]:
        raise ValueError(
            f"group_sizes must be 1-D with one entry per group (G = {b.shape[0]}), got shape "
            f"{tuple(group_sizes.shape)}; build it with "
            "torch.bincount(expert_ids, minlength=G)"
        )
    if group_sizes.dtype != torch.int64:
        raise ValueError(f"group_sizes must be int64, got {group_sizes.dtype}; convert with .to(torch.int64)")
    if not (a.device == b.device == group_sizes.device):
        raise ValueError(
            f"grouped_gemm needs a, b and group_sizes on one device, got {a.device}, {b.device}, "
            f"{group_sizes.device}; move them with .to(device)"
        )


@triton.jit(debug=True)
def _check_sizes_kernel(sizes_ptr, G, M_total, G_POW2: tl.constexpr):
    """One program: every group size non-negative and their sum M_total. Compiled with debug=True,
    the one kernel whose device_assert Triton keeps: a failure stops the stream with a device-side
    assert, as torch._assert_async does, without a host sync."""
    groups = tl.arange(0, G_POW2)
    sizes = tl.load(sizes_ptr + groups, mask=groups < G, other=0)
    tl.device_assert(tl.min(sizes, 0) >= 0, "group_sizes must be non-negative")
    tl.device_assert(tl.sum(sizes, 0) == M_total, "group_sizes must sum to a.shape[0]")


def _check_group_sum(group_sizes: torch.Tensor, total_rows: int) -> None:
    """Check group_sizes is non-negative and sums to the rows of `a`.

    On the CPU the values are in host memory and a wrong sum raises ValueError. On a GPU reading them
    would stall the stream every call, so the check is `_check_sizes_kernel` (a device-side assert
    in one launch, no host sync); the kernels clamp rows to ΣM, so a wrong sum can never touch
    memory out of bounds.
    """
    if group_sizes.device.type == "cpu":
        if bool((group_sizes < 0).any()) or int(group_sizes.sum()) != total_rows:
            raise ValueError(
                f"group_sizes must be non-negative and sum to a.shape[0] = {total_rows}, got "
                f"{group_sizes.tolist()}; count rows per expert after sorting a by expert"
            )
        return
    groups = group_sizes.shape[0]
    launch(_check_sizes_kernel, (1,), group_sizes, groups, total_rows, G_POW2=next_power_of_2(groups))


# Interpreter programs: few, so that the CPU tests run several tiles per program.
INTERPRETER_PROGRAMS = 3


def _tma_usable(like: torch.Tensor, *operands: tuple[torch.Tensor, int]) -> bool:
    """Whether the TMA kernels can read these (tensor, unit-stride dim) operands of `like`'s dtype.

    See `tma_addressable` and `tma_supported`. fp32 stays on the pointer kernels: its tiles would
    need half the stages to fit shared memory.
    """
    return (
        like.dtype in (torch.bfloat16, torch.float16)
        and tma_supported(like.device)
        and all(tma_addressable(tensor, unit_dim) for tensor, unit_dim in operands)
    )


def _grouped_matmul_nt(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """out[rows of g] = a[rows of g] @ b[g]ᵀ for a: ΣM x K and b: G x N x K (any strides)."""
    m_total, k = a.shape
    groups, n, _ = b.shape
    out = torch.empty((m_total, n), dtype=a.dtype, device=a.device)
    if m_total == 0 or n == 0:
        return out
    if k == 0:
        return out.zero_()

    b_k_major = b.stride(2) == 1
    if _tma_usable(a, (a, 1), (b, 2 if b_k_major else 1)):
        use_tma_scratch(a.device)
        sms = num_sms(a.device, INTERPRETER_PROGRAMS)

        def persistent_grid(meta: dict[str, int]) -> tuple[int]:
            # An upper bound of the tiles from host-known numbers: each group wastes at most one row tile.
            bound = (cdiv(m_total, meta["BLOCK_M"]) + groups) * cdiv(n, meta["BLOCK_N"])
            return (min(sms, bound),)

        launch(
            _grouped_matmul_nt_tma_kernel,
            persistent_grid,
            a,
            b,
            out,
            group_sizes,
            m_total,
            n,
            k,
            groups,
            a.stride(0),
            b.stride(0),
            b.stride(1) if b_k_major else b.stride(2),
            out.stride(0),
            G_POW2=next_power_of_2(groups),
            NUM_SMS=sms,
            B_K_MAJOR=b_k_major,
        )
        return out

    def grid(meta: dict[str, int]) -> tuple[int]:
        return ((cdiv(m_total, meta["BLOCK_M"]) + groups) * cdiv(n, meta["BLOCK_N"]),)

    launch(
        _grouped_matmul_nt_kernel,
        grid,
        a,
        b,
        out,
        group_sizes,
        m_total,
        n,
        k,
        groups,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        b.stride(2),
        out.stride(0),
        out.stride(1),
        G_POW2=next_power_of_2(groups),
        INPUT_PRECISION=input_precision(a.dtype),
    )
    return out


def _grouped_db(grad_out: torch.Tensor, a: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """dB[g] = grad_out[rows of g]ᵀ @ a[rows of g] -> G x N x K, zeros for empty groups."""
    m_total, n = grad_out.shape
    k = a.shape[1]
    groups = group_sizes.shape[0]
    grad_b = torch.empty((groups, n, k), dtype=a.dtype, device=a.device)
    if n == 0 or k == 0:
        return grad_b
    if m_total == 0:
        return grad_b.zero_()

    if _tma_usable(a, (grad_out, 1), (a, 1), (grad_b, 2)):
        use_tma_scratch(a.device)
        sms = num_sms(a.device, INTERPRETER_PROGRAMS)

        def persistent_grid(meta: dict[str, int]) -> tuple[int]:
            tiles = cdiv(n, meta["BLOCK_N"]) * cdiv(k, meta["BLOCK_K"])
            return (min(sms, groups * tiles),)

        launch(
            _grouped_db_tma_kernel,
            persistent_grid,
            grad_out,
            a,
            grad_b,
            group_sizes,
            m_total,
            n,
            k,
            groups,
            grad_out.stride(0),
            a.stride(0),
            grad_b.stride(0),
            grad_b.stride(1),
            G_POW2=next_power_of_2(groups),
            NUM_SMS=sms,
        )
        return grad_b

    def grid(meta: dict[str, int]) -> tuple[int, int]:
        return (cdiv(n, meta["BLOCK_N"]) * cdiv(k, meta["BLOCK_K"]), groups)

    launch(
        _grouped_db_kernel,
        grid,
        grad_out,
        a,
        grad_b,
        group_sizes,
        m_total,
        n,
        k,
        groups,
        grad_out.stride(0),
        grad_out.stride(1),
        a.stride(0),
        a.stride(1),
        grad_b.stride(0),
        grad_b.stride(1),
        grad_b.stride(2),
        G_POW2=next_power_of_2(groups),
        INPUT_PRECISION=input_precision(a.dtype),
    )
    return grad_b


def _torch_grouped_mm_usable(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch._grouped_mm runs bf16 on sm90 with 16-byte aligned rows (K and N multiples of 8)."""
    return (
        hasattr(torch, "_grouped_mm")
        and a.is_cuda
        and a.dtype == torch.bfloat16
        and capability(a.device)[0] == 9
        and a.shape[1] % 8 == 0
        and b.shape[1] % 8 == 0
    )


def _torch_grouped_gemm(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The vendor reference: torch._grouped_mm where it runs, else one matmul per group."""
    if _torch_grouped_mm_usable(a, b):
        ends = torch.cumsum(group_sizes, 0, dtype=torch.int32)
        result: torch.Tensor = torch._grouped_mm(a, b.transpose(1, 2), offs=ends)
        return result
    # The loop needs the sizes on the host (one sync); it is the reference, not the hot path.
    chunks = a.split(group_sizes.tolist())
    return torch.cat([chunk @ b[g].T for g, chunk in enumerate(chunks)])


def _torch_grouped_db(grad_out: torch.Tensor, a: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The vendor reference of dB: torch._grouped_mm over the shared row dimension (the product
    its own backward makes for the weights) where it runs, else one matmul per group."""
    if _torch_grouped_mm_usable(a, grad_out):
        ends = torch.cumsum(group_sizes, 0, dtype=torch.int32)
        result: torch.Tensor = torch._grouped_mm(grad_out.t(), a, offs=ends)
        return result
    rows = group_sizes.tolist()
    return torch.stack([g.T @ x for g, x in zip(grad_out.split(rows), a.split(rows), strict=True)])


def _product(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The forward product on the backend KERNELS_GROUPED_GEMM_BACKEND names, read at every call."""
    if backend(BACKEND_ENV) == "torch":
        return _torch_grouped_gemm(a, b, group_sizes)
    return _grouped_matmul_nt(a, b, group_sizes)


def _forward(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The forward, which checks the sizes' values first: inside the op, where they exist."""
    _check_group_sum(group_sizes, a.shape[0])
    return _product(a, b, group_sizes)


def _db(grad_out: torch.Tensor, a: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    if backend(BACKEND_ENV) == "torch":
        return _torch_grouped_db(grad_out, a, group_sizes)
    return _grouped_db(grad_out, a, group_sizes)


def _backward(
    grad_out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    group_sizes: torch.Tensor,
    needs_input_grad: tuple[bool, ...],
    product: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    db: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
    """dA = the forward product with bᵀ; dB[g] = dout[rows of g]ᵀ @ a[rows of g]."""
    grad_out = grad_out.to(a.dtype)
    grad_a = product(grad_out, b.transpose(1, 2), group_sizes) if needs_input_grad[0] else None
    grad_b = db(grad_out, a, group_sizes) if needs_input_grad[1] else None
    return grad_a, grad_b, None


@torch.library.custom_op(f"{NAMESPACE}::grouped_gemm", mutates_args=())
def grouped_gemm_op(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """`grouped_gemm` as a custom op, the node torch.compile puts in its graph; inputs as
    `grouped_gemm` checks them (the sizes' values are checked here)."""
    return _forward(a, b, group_sizes)


@grouped_gemm_op.register_fake
def _grouped_gemm_fake(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op(f"{NAMESPACE}::grouped_gemm_db", mutates_args=())
def grouped_gemm_db_op(grad_out: torch.Tensor, a: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """dB of `grouped_gemm_op`: G x N x K, zeros for an empty group."""
    return _db(grad_out, a, group_sizes)


@grouped_gemm_db_op.register_fake
def _grouped_gemm_db_fake(grad_out: torch.Tensor, a: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    return a.new_empty((group_sizes.shape[0], grad_out.shape[1], a.shape[1]))


def _save_inputs(ctx: Any, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _grouped_gemm_op_backward(
    ctx: Any, grad_out: torch.Tensor
) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
    a, b, group_sizes = ctx.saved_tensors
    return _backward(grad_out, a, b, group_sizes, ctx.needs_input_grad, grouped_gemm_op, grouped_gemm_db_op)


grouped_gemm_op.register_autograd(_grouped_gemm_op_backward, setup_context=_save_inputs)


class _GroupedGemm(torch.autograd.Function):
    """The eager path: `grouped_gemm_op`'s forward and backward without the dispatcher."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b, group_sizes)
        return _forward(a, b, group_sizes)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        a, b, group_sizes = ctx.saved_tensors
        return _backward(grad_out, a, b, group_sizes, ctx.needs_input_grad, _product, _db)


def grouped_gemm(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Rows of group g of `a` times `b[g]`ᵀ; differentiable in `a` and `b`.

    a: (ΣM) x K with rows sorted by group; b: G x N x K (one nn.Linear weight per expert); group_sizes:
    G int64 row counts on the same device, any of them 0 or not a tile multiple. Returns (ΣM) x N in
    a's dtype (bf16, fp16 or fp32). The backend comes from `KERNELS_GROUPED_GEMM_BACKEND`. Under
    torch.compile this is the custom op `torch.ops.gitcampaign_kernels.grouped_gemm`; eagerly the
    same forward and backward run without the dispatcher (docs/kernels.md).
    """
    _check_inputs(a, b, group_sizes)
    if torch.compiler.is_compiling():
        return grouped_gemm_op(a, b, group_sizes)
    if not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return _forward(a, b, group_sizes)
    result: torch.Tensor = _GroupedGemm.apply(a, b, group_sizes)
    return result
