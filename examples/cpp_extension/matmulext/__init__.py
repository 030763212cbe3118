"""`matmul(a, b)` = a @ b through the compiled kernel (CPU, float32)."""

from __future__ import annotations

import torch

from matmulext import _C


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype != torch.float32 or b.dtype != torch.float32 or a.device.type != "cpu":
        raise ValueError("matmul takes float32 CPU tensors")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not chain")
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32)
    _C.matmul(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.shape[0], b.shape[1], a.shape[1])
    return out
