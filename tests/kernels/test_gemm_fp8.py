"""kernels.gemm_fp8: the GEMM kernel against the dequantised product, end-to-end SNR of out/dA/dB
against float64, backend agreement, input checks.

SNR thresholds (dB of signal power over error power): 25 for e4m3 (3 mantissa bits: each quantised
operand alone gives ~31 dB on Gaussian data, two operands ~28 dB) and 20 for e5m2 gradients (2
mantissa bits: ~26 dB alone, ~25 dB with an e4m3 partner); GRAD_FP8_DTYPE says which applies to
dA/dB. On the CPU the interpreter's float32 -> fp8 cast rounds wrongly on a few percent of values
(see test_quant.py), which would cost SNR that a GPU does not lose, so the CPU end-to-end tests
quantise with the reference (KERNELS_QUANT_BACKEND=torch) and the GEMM kernel runs in Triton; the
GPU tests run the whole Triton path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from kernels import _gluon_fp8, quant
from kernels import gemm_fp8 as module
from kernels._common import parse_config
from kernels.gemm_fp8 import GRAD_FP8_DTYPE, gemm_fp8
from tests.conftest import GPU_TEST_CONFIGS
from tests.kernels.helpers import DEVICE, gpu, snr_db

# The interpreter itself warns on `range(tl.cdiv(K, BLOCK_K))` under NumPy >= 1.25; not our code.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
SNR_DB = {torch.float8_e4m3fn: 25.0, torch.float8_e5m2: 20.0}
# The unmarked tests run wherever the suite runs: in the interpreter on a CPU, natively on a GPU.


def _run(a: torch.Tensor, b: torch.Tensor, granularity: str) -> tuple[torch.Tensor, ...]:
    """Forward and backward through gemm_fp8 with a fresh random upstream gradient."""
    a = a.detach().requires_grad_()
    b = b.detach().requires_grad_()
    out = gemm_fp8(a, b, granularity)
    grad_out = torch.randn_like(out, dtype=torch.float32).to(out.dtype)
    out.backward(grad_out)
    assert a.grad is not None and b.grad is not None
    return out, a.grad, b.grad, grad_out


def _assert_snr(a: torch.Tensor, b: torch.Tensor, granularity: str) -> None:
    out, grad_a, grad_b, grad_out = _run(a, b, granularity)
    a64, b64, g64 = a.double(), b.double(), grad_out.double()
    grad_threshold = SNR_DB[GRAD_FP8_DTYPE[granularity]]
    assert out.dtype == torch.bfloat16 and out.shape == (a.shape[0], b.shape[0])
    assert grad_a.dtype == a.dtype and grad_b.dtype == b.dtype
    assert snr_db(a64 @ b64.t(), out) >= 25.0
    assert snr_db(g64 @ b64, grad_a) >= grad_threshold
    assert snr_db(g64.t() @ a64, grad_b) >= grad_threshold


# (M, N, K) on the CPU; the interpreter's speed keeps these <= 256 with 64x64x128 tiles.
CPU_SHAPES = [
    (1, 64, 100),  # M=1 and K < 128: one partial K block, wrapped rows in the tile
    (200, 136, 300),  # nothing a multiple of 64 or 128: edge masks on M, N, K and partial 128-blocks
    (192, 144, 272),  # TMA path in all three products (K, N, M multiples of 16), with partial tiles
    (256, 256, 256),  # aligned: several K iterations, full 128x128 weight blocks
]


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize(("m", "n", "k"), CPU_SHAPES)
def test_snr_against_float64(
    launches: dict[str, _LaunchSpy], monkeypatch: pytest.MonkeyPatch, granularity: str, m: int, n: int, k: int
) -> None:
    """out, dA and dB of the Triton GEMM (reference quantiser, see module doc) vs float64."""
    monkeypatch.setenv(quant.BACKEND_ENV, "torch")
    _assert_snr(torch.randn(m, k, device=DEVICE), torch.randn(n, k, device=DEVICE), granularity)
    if all(size % 16 == 0 for size in (m, n, k)):  # every operand of the three products is TMA-aligned
        assert launches["pointer"].grids == [] and len(launches["tma"].grids) == 3


def _dequantised64(q: torch.Tensor, scales: torch.Tensor, kind: str) -> torch.Tensor:
    rows, cols = q.shape
    return q.double() * quant.expand_scales(scales, kind, rows, cols).double()


def _assert_close_to_exact(got: torch.Tensor, want: torch.Tensor) -> None:
    """fp8 x fp8 products are exact in fp32, so the interpreter's result is the dequantised product
    up to fp32 summation order (relative 1e-6); any scale-indexing or masking bug is O(1). Hopper's
    fp8 tensor cores accumulate with ~14 mantissa bits inside a dot (DeepSeek-V3, section 3.3.2),
    so on a GPU the bound is 2^-14 per addition growing as sqrt(K): 2e-3 over these K <= 300."""
    tolerance = 2e-3 if got.is_cuda else 1e-6
    error = torch.linalg.vector_norm(got.double() - want)
    assert error <= tolerance * torch.linalg.vector_norm(want)


class _LaunchSpy:
    """Stands in for a kernel object: records each launch's grid size, then launches the real one."""

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel
        self.grids: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.kernel, name)

    def __getitem__(self, grid: Callable[[dict[str, Any]], tuple[int]]) -> object:
        def recorded(meta: dict[str, Any]) -> tuple[int]:
            size = grid(meta)
            self.grids.append(size[0])
            return size

        return self.kernel[recorded]  # type: ignore[index]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> dict[str, _LaunchSpy]:
    """Spies on both kernels, so a test can say which one ran (and with how many programs)."""
    spies = {
        "tma": _LaunchSpy(module._gemm_fp8_tma_kernel),
        "pointer": _LaunchSpy(module._gemm_fp8_kernel),
    }
    monkeypatch.setattr(module, "_gemm_fp8_tma_kernel", spies["tma"])
    monkeypatch.setattr(module, "_gemm_fp8_kernel", spies["pointer"])
    return spies


def _kernel_case(
    granularity: str, y_kind: str, m: int, n: int, k: int, **options: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """(kernel's fp32 output, exact dequantised product) for random operands of one product."""
    x, sx = quant._quantize_torch(
        torch.randn(m, k, device=DEVICE), module._X_KIND[granularity], torch.float8_e4m3fn
    )
    y, sy = quant._quantize_torch(torch.randn(n, k, device=DEVICE), y_kind, torch.float8_e4m3fn)
    y_group_n = quant.BLOCK if y_kind == "block128" else 1
    got = module._matmul_triton(x, sx, y, sy, granularity, y_group_n, torch.float32, **options)  # type: ignore[arg-type]
    want = _dequantised64(x, sx, module._X_KIND[granularity]) @ _dequantised64(y, sy, y_kind).t()
    return got, want


@pytest.mark.parametrize(
    ("granularity", "y_kind", "m", "n", "k", "path"),
    [
        # K a multiple of 16 (16-byte fp8 rows): the TMA kernel, with M, N and K edges.
        ("tensorwise", "tensorwise", 200, 136, 272, "tma"),
        ("rowwise", "rowwise", 130, 72, 208, "tma"),  # per-row/per-column epilogue scales
        ("blockwise", "block128", 70, 200, 272, "tma"),  # 128x128 y scales; partial last K block
        ("blockwise", "blockwise", 65, 136, 400, "tma"),  # 1x128 y scales (the dB product)
        ("tensorwise", "tensorwise", 1, 64, 128, "tma"),  # one row: TMA zero fill does the edge
        # K not a multiple of 16: TMA cannot address the rows, the pointer kernel runs.
        ("tensorwise", "tensorwise", 70, 136, 300, "pointer"),
        ("rowwise", "rowwise", 130, 70, 200, "pointer"),
        ("blockwise", "block128", 70, 200, 300, "pointer"),
        ("blockwise", "blockwise", 65, 130, 260, "pointer"),
    ],
)
def test_kernel_equals_dequantised_product(
    launches: dict[str, _LaunchSpy], granularity: str, y_kind: str, m: int, n: int, k: int, path: str
) -> None:
    """With fp32 output the kernel is the exact dequantised product up to fp32 summation order:
    fp8 x fp8 products are exact in fp32, so any scale indexing or masking bug shows at ~1e-6."""
    got, want = _kernel_case(granularity, y_kind, m, n, k)
    _assert_close_to_exact(got, want)
    assert [name for name, spy in launches.items() if spy.grids] == [path]


@pytest.mark.parametrize(("granularity", "y_kind"), [("rowwise", "rowwise"), ("blockwise", "block128")])
@pytest.mark.parametrize("num_sms", [1, 3, 64])
def test_persistent_programs_cover_every_tile(
    monkeypatch: pytest.MonkeyPatch,
    launches: dict[str, _LaunchSpy],
    granularity: str,
    y_kind: str,
    num_sms: int,
) -> None:
    """200 x 136 is 4 x 3 tiles of 64: one program walks all 12, three walk 4 each, and a grid
    wider than the tiles shrinks to 12 programs of one tile."""
    monkeypatch.setattr(launches["tma"].kernel, "configs", [module._CPU_TMA_CONFIG])
    got, want = _kernel_case(granularity, y_kind, 200, 136, 256, num_sms=num_sms)
    _assert_close_to_exact(got, want)
    assert launches["tma"].grids == [min(num_sms, 12)]


@pytest.mark.parametrize(
    "config",
    [
        "BLOCK_M=64,BLOCK_N=256,BLOCK_K=128,GROUP_M=8,EPILOGUE_SUBTILE=1,num_warps=4,num_stages=3",
        "BLOCK_M=64,BLOCK_N=128,BLOCK_K=128,GROUP_M=2,EPILOGUE_SUBTILE=0,OCCUPANCY=2,num_warps=4,num_stages=3",
        "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=3",
    ],
)
@pytest.mark.parametrize(("granularity", "y_kind"), [("blockwise", "block128"), ("rowwise", "rowwise")])
def test_tma_tile_shapes(
    launches: dict[str, _LaunchSpy],
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    granularity: str,
    y_kind: str,
) -> None:
    """A 256-wide tile spans two 128x128 weight blocks (per-column scales gathered from the block
    scales), a 128-wide one a single block (one scale), no subtiling, two programs per "SM", and
    BLOCK_K = 64 (two K steps per scale block); N = 264 leaves a partial last tile in each."""
    pinned = parse_config(config)
    monkeypatch.setattr(launches["tma"].kernel, "configs", [pinned])
    got, want = _kernel_case(granularity, y_kind, 72, 264, 384, num_sms=2)
    _assert_close_to_exact(got, want)
    tiles = -(-72 // pinned.kwargs["BLOCK_M"]) * -(-264 // pinned.kwargs["BLOCK_N"])
    assert launches["tma"].grids == [min(2 * pinned.kwargs.get("OCCUPANCY", 1), tiles)]
    assert launches["pointer"].grids == []


def test_misaligned_operand_falls_back(launches: dict[str, _LaunchSpy]) -> None:
    """An fp8 operand starting 1 byte into its storage cannot be a TMA base: the pointer kernel."""
    x, sx = quant._quantize_torch(torch.randn(64, 128, device=DEVICE), "rowwise", torch.float8_e4m3fn)
    y, sy = quant._quantize_torch(torch.randn(64, 128, device=DEVICE), "rowwise", torch.float8_e4m3fn)
    storage = torch.empty(64 * 128 + 1, dtype=x.dtype, device=DEVICE)
    shifted = storage[1:].view(64, 128)
    shifted.copy_(x)
    got = module._matmul_triton(shifted, sx, y, sy, "rowwise", 1, torch.float32)
    _assert_close_to_exact(got, _dequantised64(x, sx, "rowwise") @ _dequantised64(y, sy, "rowwise").t())
    assert launches["tma"].grids == [] and launches["pointer"].grids


@pytest.fixture
def gluon_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Spies on the Gluon kernel's launcher (`_matmul_triton` calls it through the module): the
    Y_GROUP_N of each call, then the real launch."""
    calls: list[int] = []
    launch = _gluon_fp8.matmul_blockwise

    def recorded(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(args[4])
        return launch(*args, **kwargs)

    monkeypatch.setattr(_gluon_fp8, "matmul_blockwise", recorded)
    return calls


@pytest.mark.parametrize(
    ("granularity", "y_kind", "m", "k", "pinned", "runs_on", "path"),
    [
        ("blockwise", "block128", 64, 128, False, True, "gluon"),  # weight blocks: Y_GROUP_N = 128
        ("blockwise", "blockwise", 64, 128, False, True, "gluon"),  # the dB product (Y_GROUP_N = 1)
        ("blockwise", "blockwise", 66, 128, False, True, "tma"),  # dB, X's scale rows not 16-byte pitched
        ("blockwise", "block128", 64, 128, True, True, "tma"),  # a pinned tile asks for the Triton kernel
        ("rowwise", "rowwise", 64, 128, False, True, "tma"),  # only blockwise has a Gluon kernel
        ("blockwise", "block128", 64, 128, False, False, "tma"),  # not sm_90, or the interpreter
        ("blockwise", "block128", 64, 100, False, True, "pointer"),  # TMA cannot address 100-byte rows
    ],
)
def test_blockwise_dispatch_to_gluon(
    monkeypatch: pytest.MonkeyPatch,
    launches: dict[str, _LaunchSpy],
    granularity: str,
    y_kind: str,
    m: int,
    k: int,
    pinned: bool,
    runs_on: bool,
    path: str,
) -> None:
    """Which kernel `_matmul_triton` picks, decided without running Gluon (which needs an H100/H200):
    `runs_on` is set by hand and the Gluon launcher replaced by a recorder."""
    calls: list[int] = []

    def gluon(x: torch.Tensor, sx: torch.Tensor, y: torch.Tensor, sy: torch.Tensor, y_group_n: int,
              out: torch.Tensor, num_sms: int | None = None) -> torch.Tensor:  # fmt: skip
        calls.append(y_group_n)
        return out.zero_()

    monkeypatch.setattr(_gluon_fp8, "runs_on", lambda device: runs_on)
    monkeypatch.setattr(_gluon_fp8, "matmul_blockwise", gluon)
    if pinned:
        monkeypatch.setenv(module.CONFIG_ENV, GPU_TEST_CONFIGS[module.CONFIG_ENV])
    else:
        monkeypatch.delenv(module.CONFIG_ENV, raising=False)
    x, sx = quant._quantize_torch(
        torch.randn(m, k, device=DEVICE), module._X_KIND[granularity], torch.float8_e4m3fn
    )
    y, sy = quant._quantize_torch(torch.randn(64, k, device=DEVICE), y_kind, torch.float8_e4m3fn)
    y_group_n = quant.BLOCK if y_kind == "block128" else 1
    module._matmul_triton(x, sx, y, sy, granularity, y_group_n, torch.bfloat16)
    assert calls == ([y_group_n] if path == "gluon" else [])
    assert [name for name, spy in launches.items() if spy.grids] == ([] if path == "gluon" else [path])


@pytest.mark.parametrize(("rows", "kb"), [(256, 1), (64, 2), (1000, 9)])
def test_kb_major_scale_copies_have_row_pitches(rows: int, kb: int) -> None:
    """The Gluon kernel's TMA loads of dB's scales need each K block's row `rows` floats apart, even
    for one K block (`.t().contiguous()` leaves a one-row tensor's stride at 1, refused by TMA)."""
    scales = torch.rand(rows, kb, device=DEVICE)
    copy = _gluon_fp8._kb_major(scales)
    assert copy.stride() == (rows, 1) and torch.equal(copy, scales.t())


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_kernel_takes_e5m2_gradients(granularity: str) -> None:
    """The backward's e5m2 x e4m3 product (tensorwise dA) is exact too."""
    x, sx = quant._quantize_torch(
        torch.randn(64, 256, device=DEVICE), module._X_KIND[granularity], torch.float8_e5m2
    )
    y, sy = quant._quantize_torch(
        torch.randn(96, 256, device=DEVICE), module._W_KIND[granularity], torch.float8_e4m3fn
    )
    y_group_n = quant.BLOCK if granularity == "blockwise" else 1
    got = module._matmul_triton(x, sx, y, sy, granularity, y_group_n, torch.float32)
    want = (
        _dequantised64(x, sx, module._X_KIND[granularity])
        @ _dequantised64(y, sy, module._W_KIND[granularity]).t()
    )
    _assert_close_to_exact(got, want)


def _assert_backends_agree(
    monkeypatch: pytest.MonkeyPatch, a: torch.Tensor, b: torch.Tensor, granularity: str, floor_db: float
) -> None:
    """out, dA and dB of the triton backend against the torch backend, same seed for grad_out."""
    torch.manual_seed(0)
    ours = _run(a, b, granularity)
    monkeypatch.setenv(module.BACKEND_ENV, "torch")
    torch.manual_seed(0)
    theirs = _run(a, b, granularity)
    for mine, ref in zip(ours[:3], theirs[:3], strict=True):
        assert snr_db(ref, mine) >= floor_db


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_torch_backend_agrees(monkeypatch: pytest.MonkeyPatch, granularity: str) -> None:
    """Both backends quantise identically here; the products differ only by bf16 rounding of the
    dequantised operands in the reference (2^-9 relative), far above 40 dB."""
    monkeypatch.setenv(quant.BACKEND_ENV, "torch")
    a, b = torch.randn(96, 200, device=DEVICE), torch.randn(80, 200, device=DEVICE)
    _assert_backends_agree(monkeypatch, a, b, granularity, floor_db=40.0)


# A single tile, partial tiles on either side, one row, one column: moving fp8 bytes is exact.
@pytest.mark.parametrize(("rows", "cols"), [(64, 64), (70, 130), (130, 70), (1, 300), (257, 1)])
@pytest.mark.parametrize("fp8_dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_transpose_is_exact(rows: int, cols: int, fp8_dtype: torch.dtype) -> None:
    q = (torch.randn(rows, cols, device=DEVICE) * 100).to(fp8_dtype)
    scales = torch.rand(2, 3, device=DEVICE)
    q_t, s_t = module._transposed(q, scales)
    assert q_t.dtype == fp8_dtype and q_t.shape == (cols, rows) and q_t.is_contiguous()
    assert torch.equal(q_t.view(torch.uint8), q.t().contiguous().view(torch.uint8))
    assert torch.equal(s_t, scales.t())


@pytest.mark.parametrize("config", module._transpose_configs(), ids=str)
def test_every_transpose_config(config: Any) -> None:
    """The autotuner may pick any of them; each one, launched as pinned, moves every byte."""
    rows, cols = 300, 200  # partial tiles in both directions for every tile size
    q = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, device=DEVICE)
    q_t = torch.empty((cols, rows), dtype=torch.uint8, device=DEVICE)
    grid = (-(-rows // config.kwargs["BLOCK_R"]), -(-cols // config.kwargs["BLOCK_C"]))
    module._transpose_kernel[grid](q, q_t, rows, cols, **config.kwargs, num_warps=config.num_warps)
    assert torch.equal(q_t, q.t())


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_only_requested_gradients(monkeypatch: pytest.MonkeyPatch, granularity: str) -> None:
    """A frozen weight gets no gradient and the input still gets the right one; `.sum()` hands the
    backward a stride-0 (expanded) dOut, which the quantiser must read as it is."""
    monkeypatch.setenv(quant.BACKEND_ENV, "torch")
    a = torch.randn(64, 128, device=DEVICE, requires_grad=True)
    b = torch.randn(80, 128, device=DEVICE)
    gemm_fp8(a, b, granularity).sum().backward()
    assert b.grad is None and a.grad is not None
    want = torch.ones(64, 80, dtype=torch.float64, device=DEVICE) @ b.double()
    assert snr_db(want, a.grad) >= SNR_DB[GRAD_FP8_DTYPE[granularity]]


@pytest.mark.parametrize(("grad_a", "grad_b"), [(True, True), (True, False), (False, True)])
def test_rowwise_backward_quantises_transposes_from_known_maxima(
    monkeypatch: pytest.MonkeyPatch, grad_a: bool, grad_b: bool
) -> None:
    """With our quantiser, the rowwise step's passes over a.T, b.T and dOut.T take their row maxima
    from the rowwise passes over a, b and dOut wherever both layouts are wanted (the row-maxima
    kernel then only reduces those passes' per-program partials), and every product still gets what
    a fresh rowwise pass gives, bit for bit. M and N > 256, so a fresh pass over a.T, b.T or dOut.T
    would run the row-maxima kernel over the whole view."""
    products: list[tuple[torch.Tensor, ...]] = []
    product = module._product
    monkeypatch.setattr(module, "_product", lambda *args: products.append(args[:4]) or product(*args))
    maxima_of: list[tuple[int, int]] = []
    row_maxima = quant._row_maxima
    monkeypatch.setattr(
        quant, "_row_maxima", lambda x, *rest: maxima_of.append(x.shape) or row_maxima(x, *rest)
    )
    m, n, k = 300, 280, 64
    a = torch.randn(m, k, device=DEVICE, requires_grad=grad_a)
    b = torch.randn(n, k, device=DEVICE, requires_grad=grad_b)
    grad_out = torch.randn(m, n, device=DEVICE)
    gemm_fp8(a, b, "rowwise").to(torch.float32).backward(grad_out)
    step_maxima = list(maxima_of)

    def fresh(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, scales = quant._quantize_triton(x, "rowwise", torch.float8_e4m3fn)
        return q.view(torch.uint8), scales

    a, b, grad = a.detach(), b.detach(), grad_out.to(torch.bfloat16)
    expected = [(*fresh(a), *fresh(b))]
    expected += [(*fresh(grad), *fresh(b.t()))] if grad_a else []
    expected += [(*fresh(grad.t()), *fresh(a.t()))] if grad_b else []
    got = [tuple(t.view(torch.uint8) if t.dtype.is_floating_point and t.element_size() == 1 else t
                 for t in args) for args in products]  # fmt: skip
    assert len(got) == len(expected)
    assert all(map(torch.equal, sum(got, ()), sum(expected, ())))

    def programs(rows: int) -> int:  # the column-maxima pass's programs, so its partials' rows
        return min(rows, quant.num_sms(a.device, quant.INTERPRETER_SMS) * quant.COLMAX_PER_SM)

    reductions = {
        (True, True): [(k, programs(m)), (k, programs(n)), (n, programs(m))],  # a, b, dOut
        (True, False): [(k, programs(n))],  # b's, for b.T
        (False, True): [(k, programs(m)), (n, m)],  # a's; dOut.T finds its own (no dA pass)
    }
    assert step_maxima == reductions[grad_a, grad_b]


def test_grad_dtypes_cover_every_granularity() -> None:
    """The harness reads thresholds from GRAD_FP8_DTYPE: every granularity has an fp8 format."""
    assert set(GRAD_FP8_DTYPE) == set(GRANULARITIES)
    assert set(GRAD_FP8_DTYPE.values()) <= {torch.float8_e4m3fn, torch.float8_e5m2}


def test_reference_kind_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("describes the CPU fallback")
    assert module.reference_kind("blockwise") == module.REFERENCE_DEQUANTISED


@pytest.mark.parametrize(
    ("make_inputs", "granularity", "message"),
    [
        (lambda: (torch.randn(4, 8), torch.randn(5, 9)), "rowwise", "K must match"),
        (lambda: (torch.randn(2, 4, 8), torch.randn(5, 8)), "rowwise", "reshape"),
        (lambda: (torch.randint(0, 3, (4, 8)), torch.randn(5, 8)), "rowwise", "bfloat16"),
        (lambda: (torch.randn(4, 8), torch.randn(5, 8, dtype=torch.float16)), "rowwise", "cast both"),
        (lambda: (torch.randn(0, 8), torch.randn(5, 8)), "rowwise", "non-empty"),
        (lambda: (torch.randn(4, 8), torch.randn(5, 8)), "channelwise", "tensorwise, rowwise, blockwise"),
    ],
)
def test_bad_inputs_raise_with_the_fix(make_inputs: object, granularity: str, message: str) -> None:
    a, b = make_inputs()  # type: ignore[operator]
    with pytest.raises(ValueError, match=message):
        gemm_fp8(a, b, granularity)


def test_kernel_rejects_unquantised_operands() -> None:
    x = torch.randn(4, 8)
    scales = torch.ones(4, 1)
    with pytest.raises(ValueError, match="kernels.quant.quantize"):
        module._matmul_triton(x, scales, x, scales, "rowwise", 1, torch.bfloat16)


# (M, N, K) on the GPU: training-size products and the awkward edges.
GPU_SHAPES = [
    (4096, 4096, 4096),  # square, tile-aligned
    (2048, 1024, 4096),  # non-square, dB reduces over M=2048
    (1, 4096, 1024),  # M=1 (decode-like): dB reduces over a single row
    (1000, 1000, 1000),  # nothing a multiple of 16 or 128: cuBLAS fallback in the torch backend
]


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize(("m", "n", "k"), GPU_SHAPES)
def test_gpu_snr(granularity: str, m: int, n: int, k: int) -> None:
    """The whole Triton path (Triton quantisers + GEMM) in bf16 on the GPU."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    _assert_snr(a, b, granularity)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize(("m", "n", "k"), [(2048, 4096, 1024), (1000, 1000, 1000)])
def test_gpu_backends_agree(
    monkeypatch: pytest.MonkeyPatch, granularity: str, m: int, n: int, k: int
) -> None:
    """Triton vs torch._scaled_mm (or its dequantised fallback) on out, dA and dB: the quantisers are
    bit-identical, so only accumulation order and bf16 output rounding differ (>= 35 dB)."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    _assert_backends_agree(monkeypatch, a, b, granularity, floor_db=35.0)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (2048, 4096, 1024),  # training-size tiles: every program walks several tiles
        (1000, 1040, 1040),  # partial tiles and a partial last K block; dB (reduction M = 1000) is not TMA
        (64, 256, 256),  # one 64-row slice: consumer 1's rows are all past M
    ],
)
@pytest.mark.parametrize("tile", sorted(_gluon_fp8.STAGES), ids=lambda tile: f"{64 * tile[0]}x{tile[1]}")
def test_gpu_gluon_blockwise(
    monkeypatch: pytest.MonkeyPatch,
    launches: dict[str, _LaunchSpy],
    gluon_calls: list[int],
    m: int,
    n: int,
    k: int,
    tile: tuple[int, int],
) -> None:
    """The Gluon kernel (through the unpinned dispatch) against the Triton TMA kernel (pinned) on the
    same quantised operands, both y scale layouts (128x128 blocks; 1x128, dB's), fp32 and bf16 out:
    the same fp8 products summed in another order (>= 50 dB); fp32 out also against the exact
    dequantised product. Then the whole blockwise forward and backward against the torch backend
    (>= 35 dB, as test_gpu_backends_agree), every product through Gluon where TMA can address it."""
    if not _gluon_fp8.runs_on(torch.device("cuda")):
        pytest.skip("the Gluon kernel runs on sm_90 (H100/H200) only")
    monkeypatch.delenv(module.CONFIG_ENV, raising=False)
    monkeypatch.setattr(_gluon_fp8, "TILE_WEIGHT_BLOCKS", tile)  # both scale layouts at this tile
    monkeypatch.setattr(_gluon_fp8, "TILE_COLUMN_SCALES", tile)
    for y_kind, y_group_n in (("block128", quant.BLOCK), ("blockwise", 1)):
        x, sx = quant.quantize(torch.randn(m, k, device="cuda"), "blockwise", torch.float8_e4m3fn)
        y, sy = quant.quantize(torch.randn(n, k, device="cuda"), y_kind, torch.float8_e4m3fn)
        for out_dtype in (torch.float32, torch.bfloat16):
            got = module._matmul_triton(x, sx, y, sy, "blockwise", y_group_n, out_dtype)
            monkeypatch.setenv(module.CONFIG_ENV, GPU_TEST_CONFIGS[module.CONFIG_ENV])
            want = module._matmul_triton(x, sx, y, sy, "blockwise", y_group_n, out_dtype)
            monkeypatch.delenv(module.CONFIG_ENV)
            assert got.dtype == out_dtype and snr_db(want, got) >= 50.0
            if out_dtype == torch.float32:
                exact = _dequantised64(x, sx, "blockwise") @ _dequantised64(y, sy, y_kind).t()
                _assert_close_to_exact(got, exact)
    assert gluon_calls == [quant.BLOCK, quant.BLOCK, 1, 1] and len(launches["tma"].grids) == 4

    gluon_calls.clear()
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    _assert_backends_agree(monkeypatch, a, b, "blockwise", floor_db=35.0)
    # dB reduces over M: 1000 fp8 bytes a row is no TMA pitch, so that product stays on the pointer kernel.
    assert gluon_calls == [quant.BLOCK, quant.BLOCK] + ([] if m % 16 else [1])


@pytest.mark.gpu
@gpu
def test_gpu_reference_kind() -> None:
    """cuBLAS fp8 takes tensorwise and rowwise on any Hopper; blockwise is reported either way."""
    assert module.reference_kind("tensorwise") == module.REFERENCE_SCALED_MM
    assert module.reference_kind("rowwise") == module.REFERENCE_SCALED_MM
    kind = module.reference_kind("blockwise")
    assert kind == module.REFERENCE_DEQUANTISED or kind.startswith(module.REFERENCE_BLOCK_SCALED)
