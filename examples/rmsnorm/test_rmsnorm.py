"""rmsnorm.py against a float64 reference: forward and both gradients, at shapes that stress the
edges (N not a power of two, one row, rows not a multiple of the rows per program)."""

from __future__ import annotations

import math
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # before the kernel is imported

from rmsnorm import rmsnorm  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# The interpreter computes bf16 on raw bits: fp16 on the CPU, bf16 on a GPU, both checked at
# 40 dB (fp32 arithmetic, one rounding of the output lands near 60).
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16
MIN_SNR_DB = 40.0


def snr_db(reference: torch.Tensor, value: torch.Tensor) -> float:
    error = (reference - value.double()).pow(2).sum().item()
    return math.inf if error == 0 else 10 * math.log10(reference.pow(2).sum().item() / error)


@pytest.mark.parametrize(
    ("m", "n"),
    [
        (37, 256),  # rows not a multiple of any power-of-two rows per program
        (1, 1000),  # one row; N not a power of two (the block is masked)
        (128, 64),  # many short rows
    ],
)
def test_forward_and_backward_match_float64(m: int, n: int) -> None:
    generator = torch.Generator(device=DEVICE).manual_seed(m * 1000 + n)
    x = torch.randn(m, n, generator=generator, device=DEVICE).to(DTYPE).requires_grad_()
    weight = (1 + 0.1 * torch.randn(n, generator=generator, device=DEVICE)).to(DTYPE).requires_grad_()
    dy = torch.randn(m, n, generator=generator, device=DEVICE).to(DTYPE)
    y = rmsnorm(x, weight, 1e-6)
    dx, dw = torch.autograd.grad(y, (x, weight), dy)
    x64, w64 = x.detach().double().requires_grad_(), weight.detach().double().requires_grad_()
    y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64
    dx64, dw64 = torch.autograd.grad(y64, (x64, w64), dy.double())
    assert y.dtype == DTYPE and dx.dtype == DTYPE and dw.dtype == DTYPE
    for ours, reference in ((y, y64), (dx, dx64), (dw, dw64)):
        assert snr_db(reference.detach(), ours.detach()) >= MIN_SNR_DB


def test_bad_inputs_are_refused() -> None:
    x = torch.randn(4, 8, device=DEVICE, dtype=DTYPE)
    with pytest.raises(ValueError, match="weight of N"):
        rmsnorm(x, torch.ones(7, device=DEVICE, dtype=DTYPE))
    with pytest.raises(ValueError, match="one floating dtype"):
        rmsnorm(x, torch.ones(8, device=DEVICE, dtype=torch.float32))
