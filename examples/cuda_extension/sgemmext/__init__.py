"""`sgemm(a, b)` = a @ b through the CUDA kernel (float32, on the GPU)."""

from __future__ import annotations

import torch

from sgemmext import _C


def sgemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype != torch.float32 or b.dtype != torch.float32 or not (a.is_cuda and b.is_cuda):
        raise ValueError("sgemm takes float32 CUDA tensors")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"sgemm: shapes {tuple(a.shape)} and {tuple(b.shape)} do not chain")
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    stream = torch.cuda.current_stream(a.device).cuda_stream
    _C.sgemm(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.shape[0], b.shape[1], a.shape[1], stream)
    return out
