"""What the kernel tests share: the device, the GPU marker and SNR in float64 (docs/harness.md)."""

from __future__ import annotations

import pytest
import torch

# Tensors live where the kernels run: the GPU when there is one (compiled kernels), else the CPU
# (Triton's interpreter). A CPU tensor handed to a compiled kernel cannot be read.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def snr_db(reference: torch.Tensor, result: torch.Tensor) -> float:
    """10·log10(‖ref‖² / ‖ref − out‖²) in float64; NaN anywhere gives NaN, which fails every floor."""
    reference = reference.detach().double()
    noise = (reference - result.detach().double()).square().sum()
    signal = reference.square().sum()
    if noise == 0:
        return float("inf")
    return float(10 * torch.log10(signal / noise))
