"""Focused tests of the CUDA sgemm: the edge cases the benchmark shapes do not cover."""

from __future__ import annotations

import pytest
import torch
from sgemmext import sgemm

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (1, 64, 64),  # M = 1: a single row
        (33, 17, 95),  # nothing a multiple of a tile: every edge masked
        (64, 64, 1),  # K = 1: one rank-1 update
        (129, 257, 1000),  # K tail after 31 full 32-wide tiles
    ],
)
def test_matches_a_float64_reference(m: int, n: int, k: int) -> None:
    generator = torch.Generator("cuda").manual_seed(m * 1000 + n * 10 + k)
    a = torch.randn(m, k, device="cuda", generator=generator)
    b = torch.randn(k, n, device="cuda", generator=generator)
    ref = a.double() @ b.double()
    error = (sgemm(a, b).double() - ref).pow(2).sum()
    snr_db = 10 * torch.log10(ref.pow(2).sum() / error.clamp_min(1e-300))
    assert snr_db > 80  # float32 sums over K <= 1000 reach about 115 dB; a skipped K tile, under 30


def test_rejects_shapes_that_do_not_chain() -> None:
    with pytest.raises(ValueError):
        sgemm(torch.ones(2, 3, device="cuda"), torch.ones(2, 3, device="cuda"))
