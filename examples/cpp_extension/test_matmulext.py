"""Focused tests of the compiled matmul: the edge cases the benchmark shapes do not cover."""

from __future__ import annotations

import pytest
import torch
from matmulext import matmul


@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (1, 64, 64),  # M = 1: a single row
        (33, 17, 95),  # nothing a multiple of a vector width or a tile
        (64, 64, 1),  # K = 1: one rank-1 update
    ],
)
def test_matches_a_float64_reference(m: int, n: int, k: int) -> None:
    generator = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a = torch.randn(m, k, generator=generator)
    b = torch.randn(k, n, generator=generator)
    ref = a.double() @ b.double()
    error = (matmul(a, b).double() - ref).pow(2).sum()
    snr_db = 10 * torch.log10(ref.pow(2).sum() / error.clamp_min(1e-300))
    assert snr_db > 100  # float32 accumulation over K < 100 terms reaches about 130 dB


def test_rejects_shapes_that_do_not_chain() -> None:
    with pytest.raises(ValueError):
        matmul(torch.ones(2, 3), torch.ones(2, 3))
