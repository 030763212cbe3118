"""kernels._common: the tile order every matmul kernel shares, against a plain-Python reference."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels._common import tile_pid
from tests.kernels.helpers import DEVICE


@triton.jit
def _tile_order_kernel(out_ptr, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = tile_pid(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def reference_order(num_pid_m: int, num_pid_n: int, group_size_m: int) -> list[tuple[int, int]]:
    """Bands of `group_size_m` row tiles top to bottom; in each band, column by column, rows down."""
    order = []
    for first in range(0, num_pid_m, group_size_m):
        for n in range(num_pid_n):
            order += [(m, n) for m in range(first, min(first + group_size_m, num_pid_m))]
    return order


# One tile, a single partial band, exact bands, a short last band, group size 1 (row-major).
@pytest.mark.parametrize(
    ("num_pid_m", "num_pid_n", "group_size_m"), [(1, 1, 8), (3, 5, 8), (8, 3, 4), (11, 4, 4), (5, 3, 1)]
)
def test_tile_pid_matches_reference_order(num_pid_m: int, num_pid_n: int, group_size_m: int) -> None:
    programs = num_pid_m * num_pid_n
    out = torch.full((programs, 2), -1, dtype=torch.int32, device=DEVICE)
    _tile_order_kernel[(programs,)](out, num_pid_m, num_pid_n, GROUP_SIZE_M=group_size_m)
    assert [tuple(pair) for pair in out.tolist()] == reference_order(num_pid_m, num_pid_n, group_size_m)
