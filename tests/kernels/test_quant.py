"""kernels.quant: scale rule, group shapes, saturation, zero groups, bad inputs; bit-exact on a GPU.

On the CPU the kernels run in Triton's interpreter, whose float32 -> fp8 cast rounds wrongly in three
documented ways (a rounding carry into the next power of two returns half the value; ties round away
from zero; the largest subnormal/smallest normal boundary truncates). Tests there therefore (a) feed
inputs whose scaled values are exactly on the fp8 grid, where no rounding happens and the kernel must
match the reference bit for bit, and (b) on random inputs require exact scales and allow exactly those
cast deviations. The GPU tests demand bit-exactness everywhere.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton

from kernels import quant
from kernels.quant import quantize_fp8, quantize_fp8_reference
from tests.conftest import GPU_TEST_CONFIGS
from tests.kernels.helpers import DEVICE, gpu

E4M3 = torch.float8_e4m3fn
# The unmarked tests run wherever the suite runs: in the interpreter on a CPU, natively on a GPU.


def _on_grid_input(rows: int, cols: int, granularity: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """x = v * s with v random e4m3 values, one v = +-448 in every group and s a power of two per
    group: then amax = 448 s, scale = s and x * (1 / s) = v exactly, so no cast rounds."""
    group_cols = cols if granularity == "rowwise" else quant.BLOCK
    groups = math.ceil(cols / group_cols)
    v = (torch.randn(rows, cols) * 60).clamp(-440, 440).to(E4M3).to(torch.float32)
    for g in range(groups):
        hit = torch.randint(g * group_cols, min((g + 1) * group_cols, cols), (rows,))
        v[torch.arange(rows), hit] = torch.where(torch.rand(rows) < 0.5, -448.0, 448.0)
    scales = torch.exp2(torch.randint(-12, 6, (rows, groups)).float())
    x = v * scales.repeat_interleave(group_cols, dim=1)[:, :cols]
    return x.to(device=DEVICE, dtype=dtype), v, scales


@pytest.mark.parametrize("granularity", ["rowwise", "blockwise"])
@pytest.mark.parametrize(
    ("rows", "cols"),
    [
        (1, 100),  # M=1 and K < 128: one partial block
        (70, 300),  # K not a multiple of 128 (last block 44 wide); rows not a multiple of the tile
        (3, 9000),  # rowwise rows longer than MAX_BLOCK_C: the two-pass chunked path
    ],
)
def test_on_grid_inputs_quantise_exactly(granularity: str, rows: int, cols: int) -> None:
    """Group layout, masks and the scale rule, bit for bit, where the interpreter's cast is exact."""
    x, v, scales = _on_grid_input(rows, cols, granularity, torch.bfloat16)
    q, got_scales = quantize_fp8(x, granularity)
    assert q.dtype == E4M3 and q.shape == x.shape and q.is_contiguous()
    assert got_scales.dtype == torch.float32
    assert torch.equal(got_scales.cpu(), scales if granularity == "blockwise" else scales[:, :1])
    assert torch.equal(q.cpu().view(torch.uint8), v.to(E4M3).view(torch.uint8))


def _rows_of_mixed_magnitude(rows: int, cols: int) -> torch.Tensor:
    """Gaussian rows, each scaled by its own power of two in 2^-8..2^7; bf16 on a GPU (where every
    code must match bit for bit), float32 in the interpreter."""
    x = torch.randn(rows, cols, device=DEVICE) * torch.exp2(
        torch.randint(-8, 8, (rows, 1), device=DEVICE).float()
    )
    return x.to(torch.bfloat16) if DEVICE == "cuda" else x


def _config_id(config: triton.Config) -> str:
    return "-".join(f"{k}{v}" for k, v in config.kwargs.items()) + f"-w{config.num_warps}"


def _pin(monkeypatch: pytest.MonkeyPatch, kernel: str, config: triton.Config) -> None:
    """Make quant's autotuned `kernel` (`KERNEL_tuned`) launch with `config` alone."""
    monkeypatch.setattr(
        quant, f"{kernel}_tuned", triton.autotune(configs=[config], key=["R"])(getattr(quant, kernel))
    )


def _assert_matches_up_to_interpreter_casts(q: torch.Tensor, ref: torch.Tensor, scaled: torch.Tensor) -> None:
    """q equals the reference except where the interpreter's cast deviates in a documented way:
    either a neighbouring fp8 value of the exact scaled value (wrong rounding direction on a tie or
    at the subnormal boundary) or exactly half of a power-of-two reference (the lost carry)."""
    codes, ref_codes = q.view(torch.uint8), ref.view(torch.uint8)
    off = codes != ref_codes
    # The cast deviates on a few percent of random values (more where groups mix magnitudes and push
    # values into fp8's subnormals); most codes must still be exact.
    assert off.float().mean() < 0.25, "far more deviations than the interpreter's cast explains"
    got, want, exact = q[off].float(), ref[off].float(), scaled[off]
    neighbour = (codes[off].int() - ref_codes[off].int()).abs() == 1
    lo, hi = torch.minimum(got, want), torch.maximum(got, want)
    brackets = (lo <= exact) & (exact <= hi)
    mantissa_zero = torch.frexp(want)[0].abs() == 0.5
    lost_carry = (got * 2 == want) & mantissa_zero
    assert bool(((neighbour & brackets) | lost_carry).all())


@pytest.mark.parametrize(
    ("granularity", "fp8_dtype", "rows", "cols", "transposed"),
    [
        ("rowwise", E4M3, 33, 300, False),  # public rowwise, odd sizes
        ("blockwise", E4M3, 65, 257, False),  # one-element last block
        ("blockwise", torch.float8_e5m2, 40, 200, True),  # gradient format on a transposed view (dB)
        ("tensorwise", torch.float8_e5m2, 130, 300, True),  # global amax over several tiles
        ("tensorwise", E4M3, 130, 3000, False),  # unit stride: partials pass, tiles in reverse
        ("block128", E4M3, 130, 300, False),  # 128x128 weight blocks with partial edges
        ("rowwise", E4M3, 200, 3, True),  # column-wise scales of a weight (rowwise dA's b.T)
        ("rowwise", E4M3, 70, 3000, True),  # strided, split: two column runs, partial last chunk
        ("rowwise", torch.float8_e5m2, 33, 257, True),  # strided, split: one run, one-column tail
        ("rowwise", E4M3, 40, 2048, True),  # strided, split: exactly one full run
    ],
)
def test_random_inputs_match_reference(
    granularity: str, fp8_dtype: torch.dtype, rows: int, cols: int, transposed: bool
) -> None:
    """Every granularity the GEMM uses, incl. strided views: scales exact, q exact but for the cast."""
    x = torch.randn(cols, rows, device=DEVICE).t() if transposed else torch.randn(rows, cols, device=DEVICE)
    x = x * torch.exp2(torch.randint(-8, 8, (rows, 1), device=DEVICE).float())
    q, scales = quant._quantize_triton(x, granularity, fp8_dtype)
    ref_q, ref_scales = quant._quantize_torch(x, granularity, fp8_dtype)
    assert scales.shape == ref_scales.shape == quant._scale_shape(rows, cols, granularity)
    assert torch.equal(scales, ref_scales)
    scaled = x * quant.expand_scales(1.0 / ref_scales, granularity, rows, cols)
    _assert_matches_up_to_interpreter_casts(q, ref_q, scaled)


@pytest.mark.parametrize(
    "config",
    quant._tensorwise_configs(),
    ids=_config_id,
)
def test_every_tensorwise_config_matches_reference(
    monkeypatch: pytest.MonkeyPatch, config: triton.Config
) -> None:
    """Each GPU autotune config of the unit-stride tensorwise kernel, pinned: persistent grids (more
    tiles than the interpreter's INTERPRETER_SMS x PER_SM programs, split unevenly), one tile a
    program (PER_SM = 0), pipelined or not. 40 x 2500: partial row tile, partial 2048-wide column
    tile. On a GPU the input is bf16 and every code must match bit for bit."""
    _pin(monkeypatch, "_quant_tensorwise_kernel", config)
    x = _rows_of_mixed_magnitude(40, 2500)
    q, scales = quant._quantize_triton(x, "tensorwise", E4M3)
    ref_q, ref_scales = quant._quantize_torch(x, "tensorwise", E4M3)
    assert torch.equal(scales, ref_scales)
    if DEVICE == "cuda":
        assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    else:
        scaled = x * quant.expand_scales(1.0 / ref_scales, "tensorwise", *x.shape)
        _assert_matches_up_to_interpreter_casts(q, ref_q, scaled)


@pytest.mark.parametrize(
    "config",
    quant._tensorwise_configs(),
    ids=_config_id,
)
@pytest.mark.parametrize(
    ("fp8_dtype", "rows", "cols"),
    [(E4M3, 300, 200), (torch.float8_e5m2, 129, 1000), (E4M3, 1, 5)],  # partial tiles both ways
)
def test_tensorwise_transposed_is_one_quantisation_in_both_layouts(
    monkeypatch: pytest.MonkeyPatch, config: triton.Config, fp8_dtype: torch.dtype, rows: int, cols: int
) -> None:
    """quantize_tensorwise_transposed, each GPU autotune config pinned: its codes are the plain
    tensorwise pass's bit for bit, its transposed codes are their transpose, its scale the
    reference's; on a GPU (bf16) the codes are also the reference's bit for bit."""
    _pin(monkeypatch, "_quant_tensorwise_kernel", config)
    x = _rows_of_mixed_magnitude(rows, cols)
    q, q_t, scales = quant.quantize_tensorwise_transposed(x, fp8_dtype)
    plain_q, plain_scales = quant._quantize_triton(x, "tensorwise", fp8_dtype)
    ref_q, ref_scales = quant._quantize_torch(x, "tensorwise", fp8_dtype)
    assert q_t.shape == (cols, rows) and q_t.is_contiguous() and q_t.dtype == fp8_dtype
    assert torch.equal(scales, ref_scales) and torch.equal(plain_scales, ref_scales)
    assert torch.equal(q.view(torch.uint8), plain_q.view(torch.uint8))
    assert torch.equal(q_t.view(torch.uint8), q.view(torch.uint8).t())
    if DEVICE == "cuda":
        assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))


@pytest.mark.parametrize("config", quant._both_configs(), ids=_config_id)
@pytest.mark.parametrize(
    ("fp8_dtype", "rows", "cols"),
    [(E4M3, 300, 200), (torch.float8_e5m2, 129, 520), (E4M3, 1, 5)],  # partial tiles and groups
)
def test_blockwise_both_is_the_two_quantisations(
    monkeypatch: pytest.MonkeyPatch, config: triton.Config, fp8_dtype: torch.dtype, rows: int, cols: int
) -> None:
    """quantize_blockwise_both, each GPU autotune config pinned: its codes and scales of x and of x.T
    are the plain blockwise quantiser's of each, bit for bit; on a GPU also the reference's."""
    _pin(monkeypatch, "_quant_blockwise_both_kernel", config)
    x = _rows_of_mixed_magnitude(rows, cols)
    x = x.half() if DEVICE != "cuda" else x  # the fused kernel takes 16-bit rows; float32 takes two passes
    q, scales, q_t, scales_t = quant.quantize_blockwise_both(x, fp8_dtype)
    for got_q, got_s, view in ((q, scales, x), (q_t, scales_t, x.t())):
        plain_q, plain_s = quant._quantize_triton(view, "blockwise", fp8_dtype)
        assert got_q.shape == view.shape and got_q.is_contiguous() and got_q.dtype == fp8_dtype
        assert torch.equal(got_s, plain_s)
        assert torch.equal(got_q.view(torch.uint8), plain_q.view(torch.uint8))
        if DEVICE == "cuda":
            ref_q, ref_s = quant._quantize_torch(view, "blockwise", fp8_dtype)
            assert torch.equal(got_s, ref_s) and torch.equal(got_q.view(torch.uint8), ref_q.view(torch.uint8))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("config", quant._tensorwise_configs(), ids=_config_id)
@pytest.mark.parametrize(("rows", "cols"), [(80, 128), (64, 128), (300, 200)])
def test_gpu_tensorwise_transposed_from_float32(
    monkeypatch: pytest.MonkeyPatch, config: triton.Config, rows: int, cols: int
) -> None:
    """float32 input, each config of the fused pass pinned (the test above feeds the GPU bf16). On an
    H200 the fused pass wrote wrong codes of x.T from float32 tiles under the PER_SM = 0 configs at
    80 and 64 rows (the fp8 GEMM's tensorwise op then differed from run to run); float32 now takes
    the plain quantiser and a copy, and every config must give the reference's codes."""
    _pin(monkeypatch, "_quant_tensorwise_kernel", config)
    x = _rows_of_mixed_magnitude(rows, cols).float()
    q, q_t, scales = quant.quantize_tensorwise_transposed(x)
    again = quant.quantize_tensorwise_transposed(x)[1]
    ref_q, ref_scales = quant._quantize_torch(x, "tensorwise", E4M3)
    assert torch.equal(scales, ref_scales)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    assert torch.equal(q_t.view(torch.uint8), ref_q.view(torch.uint8).t())
    assert torch.equal(again.view(torch.uint8), q_t.view(torch.uint8))


def test_tensorwise_transposed_rejects_strided_rows_and_follows_the_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = torch.randn(40, 24, device=DEVICE)
    with pytest.raises(ValueError, match="unit-stride rows"):
        quant.quantize_tensorwise_transposed(x.t())
    monkeypatch.setenv(quant.BACKEND_ENV, "torch")
    q, q_t, scales = quant.quantize_tensorwise_transposed(x)
    ref_q, ref_scales = quant._quantize_torch(x, "tensorwise", E4M3)
    assert torch.equal(scales, ref_scales) and torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    assert torch.equal(q_t.view(torch.uint8), ref_q.view(torch.uint8).t())


@pytest.mark.parametrize("granularity", ["rowwise", "blockwise"])
def test_outlier_saturates_to_fp8_max(granularity: str) -> None:
    """476.1304931640625 * (1 / (476.13.../448)) is 448.00003 in float32, above FP8_MAX: the clamp
    path. The outlier must come out as exactly +-448 (not NaN, not 480) and set its group's scale.
    (Nothing can exceed FP8_MAX by more than rounding, so this is the only overflow there is.)"""
    outlier = 476.1304931640625
    x = torch.randn(4, 256, device=DEVICE)
    x[1, 5], x[2, 200] = outlier, -outlier
    scale = np.float32(outlier) / np.float32(448.0)  # IEEE float32 division, like the kernel's
    assert np.float32(outlier) * (np.float32(1.0) / scale) > np.float32(448.0)
    q, scales = quantize_fp8(x, granularity)
    assert q[1, 5].item() == 448.0 and q[2, 200].item() == -448.0
    col = 0 if granularity == "rowwise" else 1
    assert scales[2, col].item() == scale
    assert not torch.isnan(q.float()).any()


@pytest.mark.parametrize("granularity", ["rowwise", "blockwise"])
def test_zero_groups_get_eps_scale_and_zero_codes(granularity: str) -> None:
    """An all-zero row (and an all-zero 128-block) quantises to zeros with scale SCALE_EPS / 448."""
    x = torch.randn(5, 300, device=DEVICE) + 3.0
    x[2] = 0.0
    x[4, 128:256] = 0.0
    q, scales = quantize_fp8(x, granularity)
    eps_scale = float(np.float32(quant.SCALE_EPS) / np.float32(448.0))
    assert (q[2].float() == 0).all() and (scales[2] == eps_scale).all()
    if granularity == "blockwise":
        assert (q[4, 128:256].float() == 0).all() and scales[4, 1].item() == eps_scale
        assert (scales[4, [0, 2]] > eps_scale).all()
    assert (q[0].float() != 0).any() and (scales[0] > 1e-3).all()


def test_scale_shapes() -> None:
    """rowwise (M, 1); blockwise (M, ceil(K/128)) incl. the partial last block."""
    x = torch.randn(5, 300, device=DEVICE)
    assert quantize_fp8(x, "rowwise")[1].shape == (5, 1)
    assert quantize_fp8(x, "blockwise")[1].shape == (5, 3)


@pytest.mark.parametrize("granularity", quant.PUBLIC_GRANULARITIES)
def test_torch_backend_is_the_reference(monkeypatch: pytest.MonkeyPatch, granularity: str) -> None:
    """KERNELS_QUANT_BACKEND=torch routes quantize_fp8 to quantize_fp8_reference."""
    monkeypatch.setenv(quant.BACKEND_ENV, "torch")
    x = torch.randn(7, 200, device=DEVICE)
    q, scales = quantize_fp8(x, granularity)
    ref_q, ref_scales = quantize_fp8_reference(x, granularity)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8)) and torch.equal(scales, ref_scales)


@pytest.mark.parametrize(
    ("make_input", "granularity", "message"),
    [
        (lambda: torch.randn(8), "rowwise", "2-D"),
        (lambda: torch.randint(0, 5, (4, 8)), "rowwise", "torch.bfloat16"),
        (lambda: torch.randn(0, 8), "rowwise", "at least one element"),
        (lambda: torch.randn(4, 8), "columnwise", "rowwise, blockwise"),
        (lambda: torch.randn(4, 8), "block128", "rowwise, blockwise"),
    ],
)
def test_bad_inputs_raise_with_the_fix(make_input: object, granularity: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        quantize_fp8(make_input(), granularity)  # type: ignore[operator]


def test_unknown_backend_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(quant.BACKEND_ENV, "cuda")
    with pytest.raises(ValueError, match="triton, torch"):
        quantize_fp8(torch.randn(2, 8))


@pytest.mark.parametrize(
    "config",
    quant._colmax_configs(),
    ids=_config_id,
)
@pytest.mark.parametrize(
    ("fp8_dtype", "rows", "cols"),
    # more row groups than programs, split unevenly; fewer; one column; a non-power-of-two chunk
    [(E4M3, 300, 200), (torch.float8_e5m2, 70, 3000), (E4M3, 9, 1), (E4M3, 2, 1100)],
)
def test_rowwise_with_column_amax_is_one_quantisation_and_the_column_maxima(
    monkeypatch: pytest.MonkeyPatch, config: triton.Config, fp8_dtype: torch.dtype, rows: int, cols: int
) -> None:
    """quantize_rowwise_with_column_amax, each GPU autotune config pinned: its codes and scales are
    the plain rowwise pass's bit for bit and column_amax is each column's |x| maximum; from it,
    quantize_rowwise_given_amax(x.T) is the plain rowwise pass over x.T bit for bit (on a GPU, with
    bf16 input, both are also the reference's)."""
    _pin(monkeypatch, "_quant_rows_colmax_kernel", config)
    x = _rows_of_mixed_magnitude(rows, cols)
    q, scales, column_amax = quant.quantize_rowwise_with_column_amax(x, fp8_dtype)
    plain_q, plain_scales = quant._quantize_triton(x, "rowwise", fp8_dtype)
    assert column_amax is not None and column_amax.shape == (cols, 1)
    assert torch.equal(column_amax[:, 0], x.float().abs().amax(dim=0))
    assert torch.equal(scales, plain_scales)
    assert torch.equal(q.view(torch.uint8), plain_q.view(torch.uint8))
    q_t, scales_t = quant.quantize_rowwise_given_amax(x.t(), column_amax, fp8_dtype)
    plain_q_t, plain_scales_t = quant._quantize_triton(x.t(), "rowwise", fp8_dtype)
    assert torch.equal(scales_t, plain_scales_t)
    assert torch.equal(q_t.view(torch.uint8), plain_q_t.view(torch.uint8))
    if DEVICE == "cuda":
        for got, ref in ((q, quant._quantize_torch(x, "rowwise", fp8_dtype)[0]),
                         (q_t, quant._quantize_torch(x.t(), "rowwise", fp8_dtype)[0])):  # fmt: skip
            assert torch.equal(got.view(torch.uint8), ref.view(torch.uint8))


def test_column_amax_where_the_rowwise_pass_cannot_fold_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows longer than one chunk and strided rows (tall enough that a row of x.T takes two runs of
    chunks, then a reduction) quantise as quantize() does, and still return every column's maximum,
    from a pass of its own; so does the torch backend, whose given-amax pass uses the maxima it is handed (the
    reference's bits when they are right). A wrong row_amax is refused with the fix."""
    long_rows = torch.randn(3, quant.MAX_BLOCK_C + 1, device=DEVICE)
    tall_strided = torch.randn(24, quant.SPLIT_CHUNKS * quant.STRIDED_BLOCK_C + 5, device=DEVICE).t()
    for x in (long_rows, tall_strided):
        q, scales, column_amax = quant.quantize_rowwise_with_column_amax(x)
        plain_q, plain_scales = quant.quantize(x, "rowwise")
        assert torch.equal(scales, plain_scales)
        assert torch.equal(q.view(torch.uint8), plain_q.view(torch.uint8))
        assert column_amax.shape == (x.shape[1], 1)
        assert torch.equal(column_amax[:, 0], x.float().abs().amax(dim=0))
    x = torch.randn(40, 24, device=DEVICE)
    for row_amax in (torch.ones(40, 1, device=DEVICE), torch.ones(24, 1, device=DEVICE, dtype=torch.float64)):
        with pytest.raises(
            ValueError, match="the column_amax that quantize_rowwise_with_column_amax returned"
        ):
            quant.quantize_rowwise_given_amax(x.t(), row_amax)
    monkeypatch.setenv(quant.BACKEND_ENV, "torch")
    ref_q, ref_scales = quant._quantize_torch(x, "rowwise", E4M3)
    q, scales, column_amax = quant.quantize_rowwise_with_column_amax(x)
    assert torch.equal(scales, ref_scales) and torch.equal(q, ref_q)
    assert torch.equal(column_amax[:, 0], x.abs().amax(dim=0))
    ref_q_t, ref_scales_t = quant._quantize_torch(x.t(), "rowwise", E4M3)
    q_t, scales_t = quant.quantize_rowwise_given_amax(x.t(), column_amax)
    assert torch.equal(scales_t, ref_scales_t) and torch.equal(q_t, ref_q_t)
    doubled = quant.quantize_rowwise_given_amax(x.t(), 2 * column_amax)[1]
    assert torch.equal(doubled, 2 * ref_scales_t)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize(
    ("granularity", "fp8_dtype", "rows", "cols", "transposed"),
    [
        ("rowwise", E4M3, 4096, 4096, False),  # Llama-like hidden size
        ("rowwise", E4M3, 1000, 4100, False),  # odd K, not a multiple of 128 or of 16
        ("rowwise", E4M3, 3, 20000, False),  # the chunked two-pass path
        ("rowwise", E4M3, 1, 129, False),  # M=1
        ("blockwise", E4M3, 4096, 14336, False),  # Llama MLP width
        ("blockwise", E4M3, 777, 1000, False),  # partial last block, odd M
        ("blockwise", torch.float8_e5m2, 1000, 777, True),  # transposed gradient view
        ("tensorwise", torch.float8_e5m2, 2048, 3000, False),  # amax partials, reversed quant pass
        ("tensorwise", E4M3, 8192, 4096, False),  # the benchmark shape: many tiles a program
        ("tensorwise", E4M3, 2048, 3000, True),  # global amax via atomics (strided fallback)
        ("block128", E4M3, 1000, 4100, False),  # weight blocks with partial edges
        ("rowwise", E4M3, 4096, 1024, True),  # column scales of a weight
        ("rowwise", E4M3, 4096, 8192, True),  # a.T of the backward: four column runs
        ("rowwise", E4M3, 1000, 5000, True),  # odd sizes, partial run and chunk
    ],
)
def test_gpu_bit_exact_against_reference(
    granularity: str, fp8_dtype: torch.dtype, rows: int, cols: int, transposed: bool
) -> None:
    """On the GPU the Triton quantiser and the torch reference agree bit for bit (bf16 inputs)."""
    shape = (cols, rows) if transposed else (rows, cols)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 3
    x = x.t() if transposed else x
    x[0, 0] = 0.0
    q, scales = quant._quantize_triton(x, granularity, fp8_dtype)
    ref_q, ref_scales = quant._quantize_torch(x, granularity, fp8_dtype)
    assert torch.equal(scales, ref_scales)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("granularity", ["rowwise", "blockwise"])
def test_gpu_public_api_bit_exact(granularity: str) -> None:
    """quantize_fp8 vs quantize_fp8_reference on bf16 with a zero row and an outlier."""
    x = torch.randn(513, 4097, device="cuda", dtype=torch.bfloat16)
    x[7] = 0
    x[9, 3] = 476.0
    q, scales = quantize_fp8(x, granularity)
    ref_q, ref_scales = quantize_fp8_reference(x, granularity)
    assert torch.equal(scales, ref_scales)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize(("rows", "cols"), [(8192, 4096), (1000, 4100), (3, 8192), (5000, 1)])
def test_gpu_column_amax_path_bit_exact(rows: int, cols: int) -> None:
    """The fp8 GEMM's rowwise path (x with its column maxima, then x.T from them) against the torch
    reference on bf16 with a zero and an outlier, the tuned configs as the autotuner picks them."""
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) * 3
    x[0, 0] = 0.0
    x[-1, -1] = 476.0
    q, scales, column_amax = quant.quantize_rowwise_with_column_amax(x)
    ref_q, ref_scales = quant._quantize_torch(x, "rowwise", E4M3)
    assert column_amax is not None and torch.equal(column_amax[:, 0], x.float().abs().amax(dim=0))
    assert torch.equal(scales, ref_scales) and torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    q_t, scales_t = quant.quantize_rowwise_given_amax(x.t(), column_amax)
    ref_q_t, ref_scales_t = quant._quantize_torch(x.t(), "rowwise", E4M3)
    assert torch.equal(scales_t, ref_scales_t)
    assert torch.equal(q_t.view(torch.uint8), ref_q_t.view(torch.uint8))


PINNED_RUN = """
import torch
from kernels import quant
x = torch.randn(40, 300, device="cuda" if torch.cuda.is_available() else "cpu")
for granularity in ("rowwise", "tensorwise"):  # the 2-D quantiser, then the tensorwise one
    q, scales = quant._quantize_triton(x, granularity, torch.float8_e4m3fn)
    assert torch.equal(scales, quant._quantize_torch(x, granularity, torch.float8_e4m3fn)[1]), granularity
q, scales, column_amax = quant.quantize_rowwise_with_column_amax(x)  # the rowwise pass with column maxima
assert torch.equal(scales, quant._quantize_torch(x, "rowwise", torch.float8_e4m3fn)[1])
"""


@pytest.mark.parametrize(
    "pin", ["ELEMS=1024,PER_SM=1,STAGES=2,num_warps=4", GPU_TEST_CONFIGS[quant.CONFIG_ENV]]
)
def test_one_pinned_config_serves_every_quantiser(pin: str) -> None:
    # KERNELS_QUANT_CONFIG is read at import, hence a fresh interpreter. A pin written for the
    # tensorwise kernel carries PER_SM and STAGES, which the 2-D kernel does not take (a compiled
    # launch refuses unknown keys, so this fails on a GPU if they reach it; Triton's CPU interpreter
    # ignores them, so on the CPU it checks only that the pinned run quantises correctly); the GPU
    # tests' pin carries neither, so a kernel must not need them.
    env = {**os.environ, quant.CONFIG_ENV: pin}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", PINNED_RUN], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
