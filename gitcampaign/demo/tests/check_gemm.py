"""Focused correctness check of kernels.gemm: the demo campaign's test command (the pre-commit hook
runs it). It imports the kernels of its own checkout, whatever else is installed."""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
from kernels.gemm import gemm  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float16  # bf16 is wrong in the interpreter
generator = torch.Generator(device).manual_seed(0)
for m, n, k in [(64, 96, 160), (1, 64, 64), (130, 70, 200)]:  # K tails, M=1, ragged edges
    a = torch.randn(m, k, device=device, dtype=dtype, generator=generator, requires_grad=True)
    b = torch.randn(n, k, device=device, dtype=dtype, generator=generator, requires_grad=True)
    out = gemm(a, b)
    ref = a.double() @ b.double().T
    snr = 10 * torch.log10(ref.pow(2).sum() / (ref - out.double()).pow(2).sum())
    assert snr > 40, f"gemm {m}x{n}x{k}: SNR {snr:.1f} dB < 40 dB"
print("gemm check: PASS")
