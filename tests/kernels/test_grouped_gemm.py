"""kernels.grouped_gemm against a float64 per-group reference: output, dA, dB, skewed and empty groups,
layouts, errors, backends, and the group-size generator the harness uses.

On a CPU these run in Triton's interpreter with 64-wide tiles; group sizes below are chosen against
BLOCK_M = 64 (sizes of 1, 65, a group spanning several tiles, an empty group).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import kernels.grouped_gemm as gg
from gitcampaign.harness.contract import DISTRIBUTIONS
from gitcampaign.harness.routing import capacity_limited, make_group_sizes
from kernels.grouped_gemm import grouped_gemm
from tests.kernels.helpers import DEVICE, gpu, snr_db

ROOT = Path(__file__).resolve().parents[2]

# SNR floors (dB): fp16/bf16 per docs/harness.md (output rounding alone gives ~65 dB fp16, ~50 dB bf16);
# fp32 output rounding is ~140 dB, so 100 dB still catches one wrong element.
SNR_FLOOR_DB = {torch.float16: 40.0, torch.bfloat16: 40.0, torch.float32: 100.0}


def reference_products(
    a: torch.Tensor, b: torch.Tensor, sizes: list[int], grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """out, dA, dB in float64, one group at a time."""
    a_groups = a.detach().double().split(sizes)
    g_groups = grad_out.double().split(sizes)
    b64 = b.detach().double()
    out = torch.cat([rows @ b64[g].T for g, rows in enumerate(a_groups)])
    grad_a = torch.cat([rows @ b64[g] for g, rows in enumerate(g_groups)])
    grad_b = torch.stack([g_groups[g].T @ a_groups[g] for g in range(len(sizes))])
    return out, grad_a, grad_b


def run_grouped(
    a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward and backward with a fresh random grad_out; returns out, dA, dB, grad_out."""
    a = a.detach().requires_grad_(True)
    b = b.detach().requires_grad_(True)
    out = grouped_gemm(a, b, group_sizes)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    assert a.grad is not None and b.grad is not None
    return out, a.grad, b.grad, grad_out


def assert_matches_reference(a: torch.Tensor, b: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """Check out, dA and dB against float64; returns dB for further checks."""
    sizes = group_sizes.tolist()
    out, grad_a, grad_b, grad_out = run_grouped(a, b, group_sizes)
    ref_out, ref_da, ref_db = reference_products(a, b, sizes, grad_out)
    assert out.shape == ref_out.shape and grad_a.shape == a.shape and grad_b.shape == b.shape
    floor = SNR_FLOOR_DB[a.dtype]
    for name, ref, got in (("out", ref_out, out), ("dA", ref_da, grad_a), ("dB", ref_db, grad_b)):
        snr = snr_db(ref, got)
        assert snr >= floor, f"{name}: SNR {snr:.1f} dB < {floor} dB for sizes {sizes}"
    for g, size in enumerate(sizes):
        if size == 0:
            assert torch.equal(grad_b[g], torch.zeros_like(grad_b[g])), f"dB of empty group {g} is not zero"
    return grad_b


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_every_distribution_matches_reference(dist: str) -> None:
    # 200 rows over 4 experts: no distribution gives tile-multiple groups; N = 72 and K = 96 are off
    # the 64 tile too, so the column and K tails are exercised with every load pattern.
    generator = torch.Generator().manual_seed(11)
    group_sizes = make_group_sizes(dist, 200, 4, generator, device=DEVICE)
    torch.manual_seed(12)
    assert_matches_reference(
        torch.randn(200, 96, dtype=torch.float16, device=DEVICE),
        torch.randn(4, 72, 96, dtype=torch.float16, device=DEVICE),
        group_sizes,
    )


@pytest.mark.parametrize(
    "sizes",
    [
        [0, 65, 1, 134],  # empty first group, 65 = one tile + 1 row, a 1-row group, a 3-tile group
        [100, 0, 0, 28],  # two empty groups in the middle (tile schedule skips them)
        [0, 0, 0, 128],  # all rows in the last group, exactly two tiles
        [0, 0, 0, 0],  # no rows at all: empty output, dB all zero
    ],
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_hand_picked_group_sizes(sizes: list[int], dtype: torch.dtype, nan_poisoned_empty: None) -> None:
    # torch.empty is NaN-poisoned: every element of out, dA and dB (empty groups too) must be written.
    torch.manual_seed(13)
    total = sum(sizes)
    group_sizes = torch.tensor(sizes, dtype=torch.int64, device=DEVICE)
    grad_b = assert_matches_reference(
        torch.randn(total, 80, dtype=dtype, device=DEVICE),
        torch.randn(4, 136, 80, dtype=dtype, device=DEVICE),
        group_sizes,
    )
    assert not grad_b.isnan().any()


@pytest.mark.parametrize(
    ("a_transposed", "b_transposed"),
    [
        (True, False),  # a column-major: unit stride along the rows
        (False, True),  # each expert weight column-major (G x K x N storage): the dA layout of b
    ],
)
def test_strided_inputs(a_transposed: bool, b_transposed: bool) -> None:
    torch.manual_seed(14)
    a = (
        torch.randn(96, 150, dtype=torch.float16, device=DEVICE).t()
        if a_transposed
        else torch.randn(150, 96, dtype=torch.float16, device=DEVICE)
    )
    b = (
        torch.randn(3, 96, 70, dtype=torch.float16, device=DEVICE).transpose(1, 2)
        if b_transposed
        else torch.randn(3, 70, 96, dtype=torch.float16, device=DEVICE)
    )
    assert_matches_reference(a, b, torch.tensor([64, 0, 86], device=DEVICE))


def test_single_group_is_a_plain_gemm() -> None:
    # G = 1 (a dense layer as a grouped GEMM): the group lookup works on a 1-wide vector.
    torch.manual_seed(16)
    assert_matches_reference(
        torch.randn(130, 72, dtype=torch.float16, device=DEVICE),
        torch.randn(1, 100, 72, dtype=torch.float16, device=DEVICE),
        torch.tensor([130], device=DEVICE),
    )


def _inputs(total: int = 8, groups: int = 2, k: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(total, k, device=DEVICE), torch.randn(groups, 4, k, device=DEVICE)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("sizes-too-short", "one entry per group"),
        ("sizes-wrong-sum", "sum to"),
        ("sizes-negative", "non-negative"),
        ("sizes-int32", "int64"),
        ("sizes-2d", "one entry per group"),
        ("b-2d", "G x N x K"),
        ("k-mismatch", "same K"),
        ("dtype-mismatch", "one dtype"),
        ("integer-dtype", "supports"),
        ("no-groups", "at least one group"),
        ("device-mismatch", "one device"),
    ],
)
def test_bad_inputs_raise_value_error(case: str, message: str) -> None:
    a, b = _inputs()
    sizes = torch.tensor([3, 5], device=DEVICE)
    if case == "sizes-too-short":
        sizes = torch.tensor([8], device=DEVICE)
    elif case == "sizes-wrong-sum":
        sizes = torch.tensor([3, 4], device=DEVICE)
    elif case == "sizes-negative":
        sizes = torch.tensor([-1, 9], device=DEVICE)
    elif case == "sizes-int32":
        sizes = sizes.to(torch.int32)
    elif case == "sizes-2d":
        sizes = sizes[None, :]
    elif case == "b-2d":
        b = b[0]
    elif case == "k-mismatch":
        b = torch.randn(2, 4, 12, device=DEVICE)
    elif case == "dtype-mismatch":
        b = b.half()
    elif case == "integer-dtype":
        a, b = a.long(), b.long()
    elif case == "no-groups":
        b, sizes = torch.randn(0, 4, 16, device=DEVICE), torch.tensor([], dtype=torch.int64, device=DEVICE)
    elif case == "device-mismatch":
        sizes = sizes.to("meta")
    if case in ("sizes-wrong-sum", "sizes-negative"):
        # Checked where the values are host memory: on a GPU the check is a device-side assert (no
        # host sync), which ends the process's CUDA context rather than raising.
        a, b, sizes = a.cpu(), b.cpu(), sizes.cpu()
    with pytest.raises(ValueError, match=message):
        grouped_gemm(a, b, sizes)


def test_torch_backend_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(15)
    a, b = torch.randn(150, 64, device=DEVICE), torch.randn(3, 100, 64, device=DEVICE)
    group_sizes = torch.tensor([70, 0, 80], device=DEVICE)
    ours = run_grouped(a, b, group_sizes)
    monkeypatch.setenv("KERNELS_GROUPED_GEMM_BACKEND", "torch")
    theirs = run_grouped(a, b, group_sizes)
    floor = SNR_FLOOR_DB[torch.float32]
    assert snr_db(theirs[0], ours[0]) >= floor
    for grads in (ours, theirs):
        _, ref_da, ref_db = reference_products(a, b, [70, 0, 80], grads[3])
        assert snr_db(ref_da, grads[1]) >= floor and snr_db(ref_db, grads[2]) >= floor


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize(("total", "groups"), [(0, 4), (7, 8), (1000, 8), (32768, 32)])
def test_make_group_sizes_sums_exactly(dist: str, total: int, groups: int) -> None:
    # (7, 8): fewer rows than experts; (32768, 32): a DeepSeek-V3 rank at micro-batch 1.
    sizes = make_group_sizes(dist, total, groups, torch.Generator().manual_seed(16), device=DEVICE)
    assert sizes.dtype == torch.int64 and sizes.shape == (groups,)
    assert int(sizes.sum()) == total and bool((sizes >= 0).all())


def test_make_group_sizes_shapes_of_each_distribution() -> None:
    generator = torch.Generator().manual_seed(17)
    total, groups = 4096, 8
    uniform = make_group_sizes("uniform", total + 3, groups, generator, device=DEVICE)
    assert int(uniform.max() - uniform.min()) <= 1
    for _ in range(5):
        hot = make_group_sizes("hot_half", total, groups, generator, device=DEVICE)
        assert int(hot.max()) >= total / 2
        empty = make_group_sizes("empty_one", total, groups, generator, device=DEVICE)
        assert int((empty == 0).sum()) >= 1 and int(empty.sum()) == total
        for dist in ("top2_cf1.0", "top1_cf1.25"):
            # A random router is imbalanced, so the busiest expert is above the mean.
            assert (
                int(make_group_sizes(dist, total, groups, generator, device=DEVICE).max()) > total // groups
            )


def test_capacity_limit_caps_busy_experts() -> None:
    # Shares 0.5/0.3/0.1/0.1 over 4 experts at cf 1.0: the two busy ones are capped at the same
    # count and the others keep their routed ratio to it (0.1 / 0.25); the sum stays exact.
    sizes = capacity_limited(
        torch.tensor([0.5, 0.3, 0.1, 0.1], dtype=torch.float64, device=DEVICE), 7000, 1.0
    )
    assert sizes.tolist() == [2500, 2500, 1000, 1000]
    # At cf 1.25 only the 0.5 expert overflows its 0.3125 capacity.
    sizes = capacity_limited(
        torch.tensor([0.5, 0.3, 0.1, 0.1], dtype=torch.float64, device=DEVICE), 8125, 1.25
    )
    assert sizes.tolist() == [3125, 3000, 1000, 1000]


def test_make_group_sizes_is_random_per_call_and_reproducible() -> None:
    generator = torch.Generator().manual_seed(18)
    first = make_group_sizes("top1_cf1.25", 4096, 16, generator, device=DEVICE)
    second = make_group_sizes("top1_cf1.25", 4096, 16, generator, device=DEVICE)
    assert not torch.equal(first, second), "each repeat must get a fresh routing"
    again = make_group_sizes("top1_cf1.25", 4096, 16, torch.Generator().manual_seed(18), device=DEVICE)
    assert torch.equal(first, again), "the same seed must give the same routing"


@pytest.mark.parametrize(
    ("dist", "total", "groups", "message"),
    [
        ("zipf", 10, 2, "unknown distribution"),
        ("uniform", 10, 0, "groups >= 1"),
        ("uniform", -1, 2, "total >= 0"),
        ("empty_one", 10, 1, "at least 2 groups"),
    ],
)
def test_make_group_sizes_rejects(dist: str, total: int, groups: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_group_sizes(dist, total, groups, device=DEVICE)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_bf16_on_gpu(dist: str) -> None:
    # A Mixtral-like rank at a reduced size: 8 experts, 8192 routed rows, N = 2048, K = 1024.
    generator = torch.Generator().manual_seed(19)
    group_sizes = make_group_sizes(dist, 8192, 8, generator, device="cuda")
    torch.manual_seed(20)
    a = torch.randn(8192, 1024, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8, 2048, 1024, dtype=torch.bfloat16, device="cuda")
    assert_matches_reference(a, b, group_sizes)


@gpu
@pytest.mark.gpu
def test_bf16_odd_groups_on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # Group sizes off every tile, an empty expert, and the torch reference on the same inputs.
    torch.manual_seed(21)
    group_sizes = torch.tensor([0, 1, 127, 129, 1000, 3, 0, 2835], device="cuda")
    a = torch.randn(4095, 2048, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8, 1536, 2048, dtype=torch.bfloat16, device="cuda")
    ours = grouped_gemm(a, b, group_sizes)
    assert_matches_reference(a, b, group_sizes)
    monkeypatch.setenv("KERNELS_GROUPED_GEMM_BACKEND", "torch")
    theirs = grouped_gemm(a, b, group_sizes)
    ref_out, _, _ = reference_products(a, b, group_sizes.tolist(), torch.zeros_like(ours))
    assert snr_db(ref_out, theirs) >= SNR_FLOOR_DB[torch.bfloat16]
    assert snr_db(ref_out, ours) >= SNR_FLOOR_DB[torch.bfloat16]


class _Spy:
    """Stands in for a kernel in the module and records each launch by name."""

    def __init__(self, kernel: Any, name: str, launched: list[str]) -> None:
        self.kernel, self.name, self.launched = kernel, name, launched

    def __getitem__(self, grid: Any) -> Any:
        self.launched.append(self.name)
        return self.kernel[grid]


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the kernels launched by the test, in order."""
    names: list[str] = []
    for name in (
        "_grouped_matmul_nt_kernel",
        "_grouped_matmul_nt_tma_kernel",
        "_grouped_db_kernel",
        "_grouped_db_tma_kernel",
    ):
        monkeypatch.setattr(gg, name, _Spy(getattr(gg, name), name, names))
    return names


TMA_KERNELS = ["_grouped_matmul_nt_tma_kernel", "_grouped_matmul_nt_tma_kernel", "_grouped_db_tma_kernel"]
POINTER_KERNELS = ["_grouped_matmul_nt_kernel", "_grouped_matmul_nt_kernel", "_grouped_db_kernel"]
# The TMA kernels run in the interpreter and on sm90+; elsewhere every layout takes the pointer kernels.
needs_tma = pytest.mark.skipif(
    DEVICE == "cuda" and torch.cuda.get_device_capability()[0] < 9, reason="TMA needs sm90 or newer"
)


def pin_tma_config(monkeypatch: pytest.MonkeyPatch, subtile: bool) -> None:
    """One 64-wide config for both TMA kernels (on a GPU: one compile per test, not an autotune)."""
    for name in ("_grouped_matmul_nt_tma_kernel", "_grouped_db_tma_kernel"):
        kernel = getattr(gg, name)
        kernel = getattr(kernel, "kernel", kernel)  # under the launch spy
        monkeypatch.setattr(kernel, "configs", [gg.tma_config(64, 64, 64, 4, 2, subtile=subtile)])


@needs_tma
@pytest.mark.parametrize("programs", [1, 2, 5])
def test_persistent_kernels_run_many_tiles_per_program(
    programs: int, launched: list[str], monkeypatch: pytest.MonkeyPatch, nan_poisoned_empty: None
) -> None:
    # 1, 2 and 5 "SMs" over 7 row tiles x 3 column tiles (dA: x 2) and dB's 4 groups x 6 tiles: each
    # program walks several tiles across group boundaries, empty groups included.
    monkeypatch.setattr(gg, "num_sms", lambda device, interpreter_programs: programs)
    pin_tma_config(monkeypatch, subtile=True)
    torch.manual_seed(22)
    assert_matches_reference(
        torch.randn(395, 96, dtype=torch.float16, device=DEVICE),
        torch.randn(4, 136, 96, dtype=torch.float16, device=DEVICE),
        torch.tensor([0, 130, 65, 200], device=DEVICE),
    )
    assert launched == TMA_KERNELS


@needs_tma
def test_tma_kernels_without_epilogue_subtile(launched: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The interpreter's default TMA config splits the epilogue; this runs the one-store epilogue.
    pin_tma_config(monkeypatch, subtile=False)
    torch.manual_seed(23)
    assert_matches_reference(
        torch.randn(150, 72, dtype=torch.float16, device=DEVICE),
        torch.randn(3, 96, 72, dtype=torch.float16, device=DEVICE),
        torch.tensor([70, 0, 80], device=DEVICE),
    )
    assert launched == TMA_KERNELS


@needs_tma
@pytest.mark.parametrize(
    ("case", "kernels"),
    [
        ("contiguous", TMA_KERNELS),
        # Row stride 104 elements (16-byte aligned), K = 100: TMA zero-fills the K tail; dB (G x N x
        # 100, a 200-byte row stride) cannot be a TMA target and falls back.
        ("k-tail", TMA_KERNELS[:2] + POINTER_KERNELS[2:]),
        # Row stride 98 elements: 196 bytes, not 16-byte aligned.
        ("unaligned-rows", POINTER_KERNELS),
        # a one element into its storage: a 2-byte aligned base (dA reads only dout and b).
        ("unaligned-base", POINTER_KERNELS[:1] + TMA_KERNELS[1:2] + POINTER_KERNELS[2:]),
        ("fp32", POINTER_KERNELS),
    ],
)
def test_tma_path_or_fallback(
    case: str, kernels: list[str], launched: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pin_tma_config(monkeypatch, subtile=True)
    torch.manual_seed(24)
    dtype = torch.float32 if case == "fp32" else torch.float16
    width = {"k-tail": 104, "unaligned-rows": 98}.get(case, 96)
    k = 100 if case == "k-tail" else 96
    a = torch.randn(150, width, dtype=dtype, device=DEVICE)[:, :k]
    b = torch.randn(3, 72, width, dtype=dtype, device=DEVICE)[:, :, :k]
    if case == "unaligned-base":
        a = torch.randn(150 * 96 + 1, dtype=dtype, device=DEVICE)[1:].view(150, 96)
    assert_matches_reference(a, b, torch.tensor([64, 0, 86], device=DEVICE))
    assert launched == kernels


SM90_ASSERTS = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.grouped_gemm import _check_sizes_kernel as kernel
signature = {"sizes_ptr": "*i64", "G": "i32", "M_total": "i32", "G_POW2": "constexpr"}
compiled = triton.compile(
    ASTSource(kernel, signature, {"G_POW2": 8}), target=GPUTarget("cuda", 90, 32), options={"debug": kernel.debug}
)
print(compiled.asm["ptx"].count("__assertfail"))
"""


def test_device_size_check_keeps_its_asserts() -> None:
    """On a GPU the group sizes are checked by `_check_sizes_kernel`'s device_assert, which Triton
    drops unless the kernel is compiled with debug: compiled for sm_90 on the CPU (Triton's compiler
    and ptxas need no GPU; a fresh interpreter, as the interpreter's patches of triton.language
    break compiling) with the debug option its launch passes, its PTX still calls __assertfail."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", SM90_ASSERTS], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) >= 2
