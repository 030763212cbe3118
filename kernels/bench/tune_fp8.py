"""Quick timing of the fp8 family on a GPU: gemm_fp8 forward/backward TFLOP/s per granularity against
cuBLAS (torch._scaled_mm), and quantize_fp8 GB/s against a measured device copy.

Shapes: the four linear layers of Llama-3.1-8B at M = 8192 tokens. Times are triton.testing.do_bench
medians (it flushes L2 between repeats). Run on the GPU:

    python -m kernels.bench.tune_fp8 [--m 8192]

Columns: `ours` is the whole Triton path (quantise inside + GEMM), `kernel` the Triton GEMM alone on
pre-quantised operands, `torch` the torch backend (torch quantiser + _scaled_mm or its fallback,
see reference_kind), `cublas` torch._scaled_mm alone on pre-quantised operands (the vendor ceiling;
absent where cuBLAS has no such scaling).
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable

import torch
import triton

from kernels import gemm_fp8 as fp8
from kernels import quant

LLAMA_8B_LAYERS = {  # name: (N, K) of the nn.Linear weight
    "qkv_proj": (6144, 4096),
    "o_proj": (4096, 4096),
    "gate_up_proj": (28672, 4096),
    "down_proj": (4096, 14336),
}


def _ms(fn: Callable[..., object], *args: object, **kwargs: object) -> float:
    """Median milliseconds of fn(*args, **kwargs); binding arguments here keeps setup out of timing."""
    return float(triton.testing.do_bench(functools.partial(fn, *args, **kwargs), warmup=25, rep=100))


def _on_backend(value: str, fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    """fn(*args, **kwargs) with KERNELS_GEMM_BACKEND=value (read per call), restored afterwards."""
    previous = os.environ.get(fp8.BACKEND_ENV)
    os.environ[fp8.BACKEND_ENV] = value
    try:
        return fn(*args, **kwargs)
    finally:
        if previous is None:
            del os.environ[fp8.BACKEND_ENV]
        else:
            os.environ[fp8.BACKEND_ENV] = previous


def _grads(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor) -> object:
    return torch.autograd.grad(out, (a, b), grad, retain_graph=True)


def _gemm_row(m: int, n: int, k: int, granularity: str) -> dict[str, float | None]:
    """TFLOP/s of one layer and granularity for every column of the table."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    x_kind, w_kind = fp8._X_KIND[granularity], fp8._W_KIND[granularity]
    qa, sa = quant.quantize(a.detach(), x_kind, fp8.OPERAND_FP8_DTYPE)
    qb, sb = quant.quantize(b.detach(), w_kind, fp8.OPERAND_FP8_DTYPE)
    y_group = quant.BLOCK if w_kind == "block128" else 1
    flops = 2.0 * m * n * k
    out = fp8.gemm_fp8(a, b, granularity)
    torch_out = _on_backend("torch", fp8.gemm_fp8, a, b, granularity)
    assert isinstance(torch_out, torch.Tensor)
    times = {
        "ours fwd": _ms(fp8.gemm_fp8, a, b, granularity),
        "kernel": _ms(fp8._matmul_triton, qa, sa, qb, sb, granularity, y_group, torch.bfloat16),
        "torch fwd": _ms(_on_backend, "torch", fp8.gemm_fp8, a, b, granularity),
        "ours bwd": _ms(_grads, out, a, b, grad) / 2,
        "torch bwd": _ms(_on_backend, "torch", _grads, torch_out, a, b, grad) / 2,
    }
    row: dict[str, float | None] = {name: flops / ms / 1e9 for name, ms in times.items()}
    row["cublas"] = None
    if fp8.reference_kind(granularity, a.device) != fp8.REFERENCE_DEQUANTISED:
        # cuBLAS alone, on operands quantised by the reference quantiser.
        qa_ref, sa_ref = quant._quantize_torch(a.detach(), x_kind, fp8.OPERAND_FP8_DTYPE)
        qb_ref, sb_ref = quant._quantize_torch(b.detach(), w_kind, fp8.OPERAND_FP8_DTYPE)
        ms = _ms(fp8._matmul_torch, qa_ref, sa_ref, qb_ref, sb_ref, granularity, w_kind, torch.bfloat16)
        row["cublas"] = flops / ms / 1e9
    return row


def bench_gemm(m: int, layers: list[str]) -> None:
    columns = ("ours fwd", "kernel", "torch fwd", "cublas", "ours bwd", "torch bwd")
    print(f"gemm_fp8, M={m}, TFLOP/s (fwd 2MNK/t, bwd 4MNK/t)")
    print(f"{'layer':<14}{'granularity':<12}" + "".join(f"{c:>11}" for c in columns))
    for name in layers:
        n, k = LLAMA_8B_LAYERS[name]
        for granularity in fp8.GRANULARITIES:
            row = _gemm_row(m, n, k, granularity)
            cells = "".join(f"{row[c]:11.0f}" if row[c] is not None else f"{'-':>11}" for c in columns)
            print(f"{name:<14}{granularity:<12}{cells}")
    for granularity in fp8.GRANULARITIES:
        print(f"torch backend for {granularity}: {fp8.reference_kind(granularity)}")


def bench_quant(m: int) -> None:
    print(f"\nquantize_fp8, M={m}, GB/s (read x bf16 + write q fp8 + write scales fp32)")
    for k in sorted({k for _, k in LLAMA_8B_LAYERS.values()}):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        copy_dst = torch.empty_like(x)
        copy_gbs = 2 * x.numel() * 2 / _ms(copy_dst.copy_, x) / 1e6
        print(f"K={k}: device copy {copy_gbs:7.0f} GB/s")
        for granularity in quant.PUBLIC_GRANULARITIES:
            scales_bytes = 4 * m * (1 if granularity == "rowwise" else triton.cdiv(k, quant.BLOCK))
            total = 3 * x.numel() + scales_bytes
            ours = total / _ms(quant.quantize_fp8, x, granularity) / 1e6
            ref = total / _ms(quant.quantize_fp8_reference, x, granularity) / 1e6
            print(
                f"  {granularity:<10} triton {ours:7.0f} GB/s ({100 * ours / copy_gbs:3.0f}% of copy)"
                f"   torch reference {ref:7.0f} GB/s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=8192, help="tokens (rows of the activations)")
    parser.add_argument("--only", choices=("gemm", "quant"), help="run one half")
    parser.add_argument(
        "--layers",
        default=",".join(LLAMA_8B_LAYERS),
        help="comma-separated subset of the GEMM layers (each new shape autotunes, ~10 s per product)",
    )
    args = parser.parse_args()
    layers = [name for name in args.layers.split(",") if name]
    unknown = sorted(set(layers) - set(LLAMA_8B_LAYERS))
    if unknown:
        parser.error(f"unknown layers {unknown}; choose from {', '.join(LLAMA_8B_LAYERS)}")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    if args.only != "quant":
        bench_gemm(args.m, layers)
    if args.only != "gemm":
        bench_quant(args.m)


if __name__ == "__main__":
    main()
