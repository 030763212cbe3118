"""kernels.gemm against a float64 reference: output, dA and dB, edges, layouts, errors, backends.

On a CPU these run in Triton's interpreter with the 64x64x64 CPU config, so the shapes below are
chosen against that tile. bf16 runs only in the GPU-marked tests (the interpreter computes bf16 on
raw bits).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import gemm as gemm_module
from kernels.gemm import gemm
from tests.kernels.helpers import DEVICE, gpu, snr_db

# SNR floors (dB). fp16/bf16: docs/harness.md's 40 dB; rounding the output alone gives ~65 dB for fp16
# and ~50 dB for bf16, so 40 leaves room for fp32 accumulation order but catches any wrong tile.
# fp32: output rounding is ~140 dB; 100 dB still catches a single wrong element in these sizes.
SNR_FLOOR_DB = {torch.float16: 40.0, torch.bfloat16: 40.0, torch.float32: 100.0}


def reference_products(
    a: torch.Tensor, b: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """out = a bᵀ, dA = dout b, dB = doutᵀ a, all in float64 from the same (rounded) inputs."""
    a64, b64, g64 = a.double(), b.double(), grad_out.double()
    return a64 @ b64.T, g64 @ b64, g64.T @ a64


def run_gemm(
    a: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward and backward through gemm with a fresh random grad_out; returns out, dA, dB, grad_out."""
    a = a.detach().requires_grad_(True)
    b = b.detach().requires_grad_(True)
    out = gemm(a, b)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    assert a.grad is not None and b.grad is not None
    return out, a.grad, b.grad, grad_out


def assert_matches_reference(a: torch.Tensor, b: torch.Tensor) -> None:
    out, grad_a, grad_b, grad_out = run_gemm(a, b)
    ref_out, ref_da, ref_db = reference_products(a, b, grad_out)
    assert out.shape == ref_out.shape and out.dtype == a.dtype
    assert grad_a.shape == a.shape and grad_b.shape == b.shape
    floor = SNR_FLOOR_DB[a.dtype]
    for name, ref, got in (("out", ref_out, out), ("dA", ref_da, grad_a), ("dB", ref_db, grad_b)):
        snr = snr_db(ref, got)
        assert snr >= floor, (
            f"{name}: SNR {snr:.1f} dB < {floor} dB for {a.dtype} {tuple(a.shape)}x{tuple(b.shape)}"
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (128, 128, 128),  # every dimension a tile multiple: the mask-free (EVEN_*) path
        (129, 200, 300),  # M, N and K all off the 64 tile, K tail after several full K steps
        (1, 64, 192),  # M = 1 (a decode step): one row in a 64-row tile
        (96, 72, 40),  # K smaller than one BLOCK_K, N not a multiple of BLOCK_N
        (64, 256, 1),  # K = 1: the reduction is a single masked column
    ],
)
def test_matches_float64_reference(m: int, n: int, k: int, dtype: torch.dtype) -> None:
    torch.manual_seed(m * 1000 + n + k)
    assert_matches_reference(
        torch.randn(m, k, dtype=dtype, device=DEVICE), torch.randn(n, k, dtype=dtype, device=DEVICE)
    )


def test_every_output_element_is_written(nan_poisoned_empty: None) -> None:
    # Outputs start as NaN: a tile or edge the kernels skip (forward, dA or dB) fails the SNR floor.
    torch.manual_seed(1)
    assert_matches_reference(
        torch.randn(130, 70, dtype=torch.float16, device=DEVICE),
        torch.randn(100, 70, dtype=torch.float16, device=DEVICE),
    )


def strided(rows: int, cols: int, layout: str) -> torch.Tensor:
    """A rows x cols fp16 view: `row_major`, `transposed` (column-major storage) or `sliced`."""
    if layout == "transposed":
        return torch.randn(cols, rows, dtype=torch.float16, device=DEVICE).t()
    if layout == "sliced":
        return torch.randn(rows, 2 * cols, dtype=torch.float16, device=DEVICE)[:, ::2]
    return torch.randn(rows, cols, dtype=torch.float16, device=DEVICE)


@pytest.mark.parametrize(
    ("a_layout", "b_layout"),
    [
        ("transposed", "row_major"),  # unit stride along M: the layout of doutᵀ in dB
        ("row_major", "transposed"),  # unit stride along N: the layout of bᵀ in dA
        ("transposed", "transposed"),
        ("sliced", "sliced"),  # every other column of a wider tensor: no unit stride at all
    ],
)
def test_strided_inputs_need_no_copy(a_layout: str, b_layout: str) -> None:
    torch.manual_seed(2)
    a, b = strided(80, 136, a_layout), strided(96, 136, b_layout)
    assert not (a.is_contiguous() and b.is_contiguous())
    assert_matches_reference(a, b)


def misaligned(rows: int, cols: int) -> torch.Tensor:
    """A row-major fp16 view whose base sits 2 bytes past an aligned allocation (aligned strides)."""
    return torch.randn(rows * cols + 1, dtype=torch.float16, device=DEVICE)[1:].view(rows, cols)


def forbid(monkeypatch: pytest.MonkeyPatch, kernel_name: str) -> None:
    """Make launching gemm_module.<kernel_name> fail, to prove which path a case takes."""

    class Forbidden:
        def __getitem__(self, grid: object) -> None:
            raise AssertionError(f"{kernel_name} ran, but this case belongs to the other path")

    monkeypatch.setattr(gemm_module, kernel_name, Forbidden())


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (torch.empty(40, 24, dtype=torch.float16), False),  # row-major, 48-byte rows
        (torch.empty(24, 40, dtype=torch.float16).t(), True),  # column-major: the transposed descriptor
        (torch.empty(40, 300, dtype=torch.float16), None),  # 600-byte rows: not a multiple of 16
        (torch.empty(40, 48, dtype=torch.float16)[:, ::2], None),  # no unit stride
        (misaligned(40, 24), None),  # base 2 bytes past an aligned one
        (torch.empty(1, 24, dtype=torch.float16).expand(40, 24), None),  # stride 0 between rows
        (torch.empty(40, 24, dtype=torch.float32), False),  # fp32 reads fine; the launcher keeps it off
    ],
    ids=["row-major", "column-major", "odd-row-stride", "sliced", "misaligned-base", "expanded", "fp32"],
)
def test_tma_descriptor_choice(view: torch.Tensor, expected: bool | None) -> None:
    assert gemm_module._tma_transposed(view) is expected


@pytest.mark.parametrize("num_sms", [1, 2, 5])
def test_persistent_tma_path(num_sms: int, monkeypatch: pytest.MonkeyPatch, nan_poisoned_empty: None) -> None:
    # Forward, dA and dB are the (A_T, B_T) layouts (0, 0), (0, 1) and (1, 1), all on the TMA kernel:
    # M off the 64 tile (rows past M zero-filled, stores clipped), N and K off it too (K's last step
    # half zero-filled), and 9-12 tiles over 1, 2 or 5 programs, so each program walks several tiles
    # and the epilogue's own tile counter must follow the main loop's. NaN-filled outputs catch a
    # tile no program stores.
    monkeypatch.setattr(gemm_module, "_INTERPRETER_SMS", num_sms)
    forbid(monkeypatch, "_matmul_nt_pointer_kernel")
    torch.manual_seed(num_sms)
    assert_matches_reference(
        torch.randn(129, 136, dtype=torch.float16, device=DEVICE),
        torch.randn(200, 136, dtype=torch.float16, device=DEVICE),
    )


def test_tma_path_tiny_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every dimension far below one tile: a single program, loads mostly zero-fill, stores mostly clipped.
    forbid(monkeypatch, "_matmul_nt_pointer_kernel")
    torch.manual_seed(8)
    assert_matches_reference(
        torch.randn(1, 8, dtype=torch.float16, device=DEVICE),
        torch.randn(8, 8, dtype=torch.float16, device=DEVICE),
    )


@pytest.mark.parametrize(
    "case",
    [
        "fp32",  # stays on the pointer kernel's full-fp32 (ieee) dots
        "odd-row-stride",  # K = 100: 200-byte rows, not a multiple of 16
        "misaligned-base",  # aligned strides, but a base TMA cannot address
    ],
)
def test_fallback_to_pointer_kernel(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, "_matmul_nt_kernel")
    torch.manual_seed(9)
    if case == "fp32":
        a, b = torch.randn(70, 96, device=DEVICE), torch.randn(90, 96, device=DEVICE)
    elif case == "odd-row-stride":
        a = torch.randn(70, 100, dtype=torch.float16, device=DEVICE)
        b = torch.randn(90, 100, dtype=torch.float16, device=DEVICE)
    else:
        a, b = torch.randn(70, 96, dtype=torch.float16, device=DEVICE), misaligned(90, 96)
    out = gemm_module._matmul_nt(a, b)
    assert snr_db(a.double() @ b.double().T, out) >= SNR_FLOOR_DB[a.dtype]


PINNED_RUN = """
import torch
from kernels import gemm as g
assert g._matmul_nt_kernel.configs[0].kwargs["EPILOGUE_SUBTILE"] == 1
assert g._matmul_nt_kernel.configs[0].kwargs["BLOCK_N"] == 32
assert "EPILOGUE_SUBTILE" not in g._matmul_nt_pointer_kernel.configs[0].kwargs
torch.manual_seed(10)
device = "cuda" if torch.cuda.is_available() else "cpu"
for dtype in (torch.float16, torch.float32):  # the TMA kernel, then the pointer kernel
    a, b = torch.randn(70, 96, dtype=dtype, device=device), torch.randn(90, 96, dtype=dtype, device=device)
    error = (g._matmul_nt(a, b).double() - a.double() @ b.double().T).abs().max().item()
    assert error < 0.1, (dtype, error)
"""


def test_one_pinned_config_serves_both_kernels() -> None:
    # KERNELS_GEMM_CONFIG is read at import, hence a fresh interpreter; the pin carries the TMA-only
    # EPILOGUE_SUBTILE, which the pointer kernel would refuse as an unknown argument. The child runs
    # where this process runs (compiled on a GPU, Triton's interpreter otherwise: conftest.py).
    pin = "BLOCK_M=32,BLOCK_N=32,BLOCK_K=32,GROUP_M=2,EPILOGUE_SUBTILE=1,num_warps=4,num_stages=1"
    env = {**os.environ, "KERNELS_GEMM_CONFIG": pin}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", PINNED_RUN], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_expanded_grad_out() -> None:
    # out.sum().backward() hands backward a stride-0 grad_out; the kernel must read it as is.
    torch.manual_seed(3)
    a = torch.randn(70, 64, dtype=torch.float32, requires_grad=True, device=DEVICE)
    b = torch.randn(90, 64, dtype=torch.float32, requires_grad=True, device=DEVICE)
    gemm(a, b).sum().backward()
    assert a.grad is not None and b.grad is not None
    ones = torch.ones(70, 90, dtype=torch.float64, device=DEVICE)
    assert snr_db(ones @ b.double(), a.grad) >= SNR_FLOOR_DB[torch.float32]
    assert snr_db(ones.T @ a.double(), b.grad) >= SNR_FLOOR_DB[torch.float32]


@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (0, 64, 32),  # no rows (an empty micro-batch): empty out, dB = 0
        (16, 0, 32),  # no output features: empty out, dA = 0
        (16, 24, 0),  # no reduction: out is all zeros, grads are empty
    ],
)
def test_zero_size_dimensions(m: int, n: int, k: int) -> None:
    torch.manual_seed(4)
    a = torch.randn(m, k, requires_grad=True, device=DEVICE)
    b = torch.randn(n, k, requires_grad=True, device=DEVICE)
    out = gemm(a, b)
    assert out.shape == (m, n)
    assert torch.equal(out, torch.zeros(m, n, device=DEVICE))
    out.backward(torch.randn(m, n, device=DEVICE))
    assert a.grad is not None and b.grad is not None
    assert torch.equal(a.grad, torch.zeros(m, k, device=DEVICE)) and torch.equal(
        b.grad, torch.zeros(n, k, device=DEVICE)
    )


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (
            torch.randn(4, 8, dtype=torch.float16, device=DEVICE),
            torch.randn(4, 8, device=DEVICE),
            "one dtype",
        ),
        (torch.randint(0, 5, (4, 8), device=DEVICE), torch.randint(0, 5, (4, 8), device=DEVICE), "supports"),
        (torch.randn(2, 4, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE), "2-D"),
        (torch.randn(4, 8, device=DEVICE), torch.randn(8, device=DEVICE), "2-D"),
        (torch.randn(4, 8, device=DEVICE), torch.randn(8, 4, device=DEVICE), "same K"),
        (torch.randn(4, 8), torch.randn(4, 8, device="meta"), "one device"),
    ],
    ids=["dtype-mismatch", "integer-dtype", "a-3d", "b-1d", "k-mismatch", "device-mismatch"],
)
def test_bad_inputs_raise_value_error(a: torch.Tensor, b: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gemm(a, b)


def test_torch_backend_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(5)
    a = torch.randn(100, 80, dtype=torch.float32, device=DEVICE)
    b = torch.randn(120, 80, dtype=torch.float32, device=DEVICE)
    ours = run_gemm(a, b)
    monkeypatch.setenv("KERNELS_GEMM_BACKEND", "torch")
    theirs = run_gemm(a, b)
    ref_out, ref_da, ref_db = reference_products(a, b, ours[3])
    _, theirs_da, theirs_db = reference_products(a, b, theirs[3])
    # Same forward; the backward grad_outs differ (fresh random), so each is held to its own reference.
    assert snr_db(theirs[0], ours[0]) >= SNR_FLOOR_DB[torch.float32]
    assert snr_db(ref_out, theirs[0]) >= SNR_FLOOR_DB[torch.float32]
    assert snr_db(theirs_da, theirs[1]) >= SNR_FLOOR_DB[torch.float32]
    assert snr_db(theirs_db, theirs[2]) >= SNR_FLOOR_DB[torch.float32]
    assert snr_db(ref_da, ours[1]) >= SNR_FLOOR_DB[torch.float32]
    assert snr_db(ref_db, ours[2]) >= SNR_FLOOR_DB[torch.float32]


def test_unknown_backend_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELS_GEMM_BACKEND", "cublas")
    with pytest.raises(ValueError, match="KERNELS_GEMM_BACKEND"):
        gemm(torch.randn(4, 8, device=DEVICE), torch.randn(4, 8, device=DEVICE))


def test_cpu_config_is_one_64_tile() -> None:
    # The interpreter path relies on this constant (a demo edits it); the tests' shapes assume it.
    assert gemm_module._CPU_CONFIG.kwargs["BLOCK_K"] == 64


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (4096, 4096, 4096),  # square, every tile full
        (2048, 6144, 4096),  # Llama-8B qkv-like (N = 6144)
        (1000, 1000, 1000),  # nothing a multiple of the tile: TMA zero-fill and clipped stores
        (999, 1000, 1001),  # 2002-byte rows: the pointer kernel, masked and unvectorised
        (1, 4096, 1024),  # M = 1
    ],
)
def test_bf16_on_gpu(m: int, n: int, k: int) -> None:
    torch.manual_seed(6)
    a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
    assert_matches_reference(a, b)
    # cuBLAS holds to the same floor on the same inputs, so ours is compared like for like.
    assert snr_db(a.double() @ b.double().T, torch.nn.functional.linear(a, b)) >= SNR_FLOOR_DB[torch.bfloat16]


@gpu
@pytest.mark.gpu
def test_bf16_transposed_on_gpu() -> None:
    # The dA/dB layouts (unit stride on M or N) through the public function, at a real size.
    torch.manual_seed(7)
    a = torch.randn(2048, 4096, dtype=torch.bfloat16, device="cuda").t()
    b = torch.randn(1024, 2048, dtype=torch.bfloat16, device="cuda")
    assert_matches_reference(a, b)


@gpu
@pytest.mark.gpu
def test_gpu_device_mismatch() -> None:
    with pytest.raises(ValueError, match="one device"):
        gemm(torch.randn(4, 8, device="cuda"), torch.randn(4, 8))
