"""RMSNorm in Triton, forward and backward: y = x / sqrt(mean(x²) + eps) * weight, over the last
dimension of x (M×N rows), weight of N; fp32 arithmetic, outputs in x's dtype.

Grid: forward, one program per tile of ROWS_PER_PROGRAM whole rows: it loads the weight once,
normalises its rows and stores y and the per-row 1/rms (kept for the backward). Backward, one
program per BWD_TILES_PER_PROGRAM such tiles, walked in turn: dx for their rows, and a dweight
partial summed over them in fp32; the partials (one row of N per program) are summed by torch (no
atomics, so the result is deterministic).

A campaign optimises this file (`examples/rmsnorm/README.md`); `rmsnorm_spec.py` declares it to the
harness and `test_rmsnorm.py` is its focused test.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

ROWS_PER_PROGRAM = 1  # rows of a program's tile (the weight is loaded once per tile)
BWD_TILES_PER_PROGRAM = 1  # tiles one backward program walks, summing its dweight partial over them
NUM_WARPS = 4  # warps per program (the row's elements are spread over their threads)


@triton.jit
def _rmsnorm_fwd(X, W, Y, RSTD, M, N, stride_x, stride_y, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_mask, col_mask = rows < M, cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    x = tl.load(X + rows.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(
        tl.float32
    )
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows.to(tl.int64)[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=row_mask)


@triton.jit
def _rmsnorm_bwd(
    DY,
    X,
    W,
    RSTD,
    DX,
    DW_PARTIAL,
    M,
    N,
    stride_x,
    stride_dy,
    stride_dx,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TILES: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    for tile in range(TILES):
        rows = (pid * TILES + tile) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows.to(tl.int64)[:, None]
        x = tl.load(X + offsets * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + offsets * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
        xhat = x * rstd[:, None]
        wdy = w[None, :] * dy
        dx = (wdy - xhat * (tl.sum(xhat * wdy, axis=1) / N)[:, None]) * rstd[:, None]
        tl.store(DX + offsets * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)
    tl.store(DW_PARTIAL + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


def _bwd_tiles(m: int, device: torch.device) -> int:
    """Row tiles one backward program walks (its dweight partial sums over all of them)."""
    return BWD_TILES_PER_PROGRAM


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dim() != 2 or weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(
            f"rmsnorm needs x of M×N and weight of N, got {tuple(x.shape)} and {tuple(weight.shape)}"
        )
    if x.dtype != weight.dtype or not x.dtype.is_floating_point:
        raise ValueError(f"x and weight must share one floating dtype, got {x.dtype} and {weight.dtype}")


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:  # type: ignore[override]
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        rstd = torch.empty(m, dtype=torch.float32, device=x.device)
        block_n = triton.next_power_of_2(n)
        grid = (triton.cdiv(m, ROWS_PER_PROGRAM),)
        _rmsnorm_fwd[grid](
            x,
            weight,
            y,
            rstd,
            m,
            n,
            x.stride(0),
            y.stride(0),
            eps,
            BLOCK_M=ROWS_PER_PROGRAM,
            BLOCK_N=block_n,
            num_warps=NUM_WARPS,
        )
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:  # type: ignore[override]
        x, weight, rstd = ctx.saved_tensors
        dy = dy.contiguous()
        m, n = x.shape
        tiles = _bwd_tiles(m, x.device)
        programs = triton.cdiv(m, ROWS_PER_PROGRAM * tiles)
        dx = torch.empty_like(x)
        dw_partial = torch.empty(programs, n, dtype=torch.float32, device=x.device)
        _rmsnorm_bwd[(programs,)](
            dy,
            x,
            weight,
            rstd,
            dx,
            dw_partial,
            m,
            n,
            x.stride(0),
            dy.stride(0),
            dx.stride(0),
            BLOCK_M=ROWS_PER_PROGRAM,
            BLOCK_N=triton.next_power_of_2(n),
            TILES=tiles,
            num_warps=NUM_WARPS,
        )
        return dx, dw_partial.sum(0).to(weight.dtype), None


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of the rows of x (M×N) with weight (N); differentiable in x and weight."""
    _check(x, weight)
    return _RMSNorm.apply(x, weight, eps)
