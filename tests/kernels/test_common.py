"""kernels._common: the tile order every matmul kernel shares, against a plain-Python reference, and
the launch path that resolves a kernel call once (with Triton's launch and driver replaced by fakes:
the CPU has neither)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from kernels import _common
from kernels._common import tile_pid
from tests.kernels.helpers import DEVICE, gpu


@triton.jit
def _tile_order_kernel(out_ptr, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = tile_pid(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def reference_order(num_pid_m: int, num_pid_n: int, group_size_m: int) -> list[tuple[int, int]]:
    """Bands of `group_size_m` row tiles top to bottom; in each band, column by column, rows down."""
    order = []
    for first in range(0, num_pid_m, group_size_m):
        for n in range(num_pid_n):
            order += [(m, n) for m in range(first, min(first + group_size_m, num_pid_m))]
    return order


# One tile, a single partial band, exact bands, a short last band, group size 1 (row-major).
@pytest.mark.parametrize(
    ("num_pid_m", "num_pid_n", "group_size_m"), [(1, 1, 8), (3, 5, 8), (8, 3, 4), (11, 4, 4), (5, 3, 1)]
)
def test_tile_pid_matches_reference_order(num_pid_m: int, num_pid_n: int, group_size_m: int) -> None:
    programs = num_pid_m * num_pid_n
    out = torch.full((programs, 2), -1, dtype=torch.int32, device=DEVICE)
    _tile_order_kernel[(programs,)](out, num_pid_m, num_pid_n, GROUP_SIZE_M=group_size_m)
    assert [tuple(pair) for pair in out.tolist()] == reference_order(num_pid_m, num_pid_n, group_size_m)


def _toy_kernel(a_ptr, b_ptr, M, K, BLOCK: tl.constexpr, EVEN: tl.constexpr, SPLIT: tl.constexpr = 2):  # type: ignore[no-untyped-def]
    """Stands in for a kernel's signature: two pointers, two sizes, a tuned, a derived and a
    defaulted constant."""


class _FakeCompiled:
    """A compiled kernel that records its launches, in the argument order JITFunction.run uses."""

    function = "cu-function"
    packed_metadata = "packed"

    def __init__(self) -> None:
        self.launches: list[tuple[Any, ...]] = []

    def launch_metadata(self, grid: tuple[int, ...], stream: int, *values: Any) -> None:
        return None

    def run(self, *launch_args: Any) -> None:
        self.launches.append(launch_args)


@pytest.fixture
def toy_launch(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, _FakeCompiled, list[tuple[Any, ...]]]:
    """`_toy_kernel` autotuned over two BLOCKs with a heuristic EVEN, behind `launch` with the fast
    path on: Triton's own launch (`kernel[grid](...)`) is replaced by a recorder that picks the last
    config (BLOCK=64) and returns a fake compiled kernel; the driver reports device 0, stream 7."""
    jit = JITFunction(_toy_kernel)
    configs = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})]
    kernel = triton.autotune(configs=configs, key=["M"])(
        triton.heuristics({"EVEN": lambda meta: meta["K"] % meta["BLOCK"] == 0})(jit)
    )
    compiled = _FakeCompiled()
    slow_launches: list[tuple[Any, ...]] = []

    def triton_run(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> _FakeCompiled:
        kernel.best_config = kernel.configs[-1]
        slow_launches.append(args)
        return compiled

    monkeypatch.setattr(kernel, "run", triton_run)
    active = SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda device: 7)
    monkeypatch.setattr(_common, "driver", SimpleNamespace(active=active))
    monkeypatch.setattr(_common, "fast_launch", True)
    monkeypatch.setattr(_common, "_LAUNCHES", {})
    return kernel, compiled, slow_launches


def test_fast_launch_resolves_once_per_distinct_call(
    toy_launch: tuple[Any, _FakeCompiled, list[Any]],
) -> None:
    """The first call of a kind goes through Triton; the next ones hand the compiled kernel the
    grid and every parameter in order (the autotuner's BLOCK, the heuristic's EVEN, the default),
    with the new call's tensors, also after the autotuner tuned another shape. A new integer, a
    misaligned tensor or a replaced autotune config list (even one of equal configs) make a new
    kind."""
    kernel, compiled, slow_launches = toy_launch
    grid = lambda meta: (triton.cdiv(meta["M"], meta["BLOCK"]), 2)  # noqa: E731
    a, b = torch.randn(300), torch.randn(300)
    _common.launch(kernel, grid, a, b, 300, 128)
    assert len(slow_launches) == 1 and compiled.launches == []

    a2, b2 = torch.randn(300), torch.randn(300)
    _common.launch(kernel, grid, a2, b2, 300, 128)
    assert len(slow_launches) == 1
    (launch_args,) = compiled.launches
    assert launch_args[:6] == (5, 2, 1, 7, "cu-function", "packed")
    assert launch_args[9:] == (a2, b2, 300, 128, 64, True, 2)

    kernel.cache[("another shape",)] = kernel.configs[0]  # the autotuner tuning another shape
    _common.launch(kernel, grid, a, b, 300, 128)
    assert len(slow_launches) == 1 and len(compiled.launches) == 2

    _common.launch(kernel, grid, a2, b2, 300, 96)  # another K: EVEN changes
    _common.launch(kernel, grid, a2[1:], b2, 300, 128)  # a pointer 4 bytes off 16-byte alignment
    assert len(slow_launches) == 3
    kernel.configs = list(kernel.configs)  # a fresh list of the same configs: a re-tune
    _common.launch(kernel, grid, a2, b2, 300, 128)
    assert len(slow_launches) == 4 and len(compiled.launches) == 2
    _common.launch(kernel, grid, a, b, 300, 128)
    assert len(compiled.launches) == 3 and compiled.launches[2][9:11] == (a, b)


def test_launch_without_fast_path_is_tritons(
    toy_launch: tuple[Any, _FakeCompiled, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """KERNELS_FAST_LAUNCH=0 (or the interpreter): every call goes through Triton."""
    kernel, compiled, slow_launches = toy_launch
    monkeypatch.setattr(_common, "fast_launch", False)
    for _ in range(3):
        _common.launch(kernel, (1,), torch.randn(8), torch.randn(8), 8, 8)
    assert len(slow_launches) == 3 and compiled.launches == []


@gpu
@pytest.mark.gpu
def test_gpu_fast_launch_gives_tritons_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel family, forward and backward, through Triton's launch and then twice through
    `launch` (resolving, then resolved): the same bits, and the resolved launches were used."""
    from kernels import gemm_fp8 as fp8_module
    from kernels.gemm import gemm
    from kernels.gemm_fp8 import gemm_fp8
    from kernels.grouped_gemm import grouped_gemm
    from kernels.quant import quantize_fp8

    monkeypatch.delenv(fp8_module.CONFIG_ENV, raising=False)  # blockwise on the Gluon kernel (sm_90)
    monkeypatch.setattr(_common, "_LAUNCHES", {})
    torch.manual_seed(0)
    a, b = torch.randn(384, 512, device="cuda"), torch.randn(256, 512, device="cuda")
    experts = torch.randn(4, 256, 512, device="cuda")
    sizes = torch.tensor([100, 0, 200, 84], device="cuda")

    def step() -> list[torch.Tensor]:
        results = []
        products: list[Any] = [lambda x, w: gemm(x, w)]
        products += [lambda x, w, g=g: gemm_fp8(x, w, g) for g in ("tensorwise", "rowwise", "blockwise")]
        products += [lambda x, w: grouped_gemm(x, experts.to(x.dtype).requires_grad_(), sizes)]
        for product in products:
            x = a.to(torch.bfloat16).requires_grad_()
            w = b.to(torch.bfloat16).requires_grad_()
            out = product(x, w)
            out.backward(torch.ones_like(out))
            results += [out, *(t.grad for t in (x, w) if t.grad is not None)]
        for granularity in ("tensorwise", "rowwise", "blockwise"):
            results += [
                t.view(torch.uint8) if t.element_size() == 1 else t for t in quantize_fp8(a, granularity)
            ]
        return results

    monkeypatch.setattr(_common, "fast_launch", False)
    expected = step()
    monkeypatch.setattr(_common, "fast_launch", True)
    step()
    resolved = len(_common._LAUNCHES)
    got = step()
    assert resolved >= 20 and len(_common._LAUNCHES) == resolved  # nothing new to resolve the second time
    assert len(got) == len(expected)
    for mine, triton_s in zip(got, expected, strict=True):
        assert torch.equal(mine, triton_s)


def test_tma_scratch_is_kept_for_the_default_stream_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """One descriptor buffer serves every launch on a device's default stream; a launch elsewhere (a
    graph's capture, Inductor's warm-up of a graph on its own stream, which routes every allocation
    into the graph's pool) gets a buffer of its own, kept nowhere. torch.cuda is faked: the CPU has
    none."""
    made: list[int] = []

    def empty(size: int, **_: object) -> torch.Tensor:
        made.append(size)
        return torch.zeros(size, dtype=torch.int8)

    capturing = [False]
    monkeypatch.setattr(_common, "_SCRATCH", {})
    monkeypatch.setattr(_common, "_DEFAULT_STREAMS", {})
    monkeypatch.setattr(_common.torch, "empty", empty)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device: SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    first = _common._tma_scratch(128, 128, 0)
    assert _common._tma_scratch(64, 128, 0) is first  # the default stream's buffer, kept
    assert _common._tma_scratch(256, 128, 0) is not first and made == [128, 256]  # grown once
    kept = _common._SCRATCH[0]
    side = _common._tma_scratch(64, 128, 7)  # another stream (Inductor's warm-up runs on its own)
    capturing[0] = True
    captured = _common._tma_scratch(64, 128, 0)
    assert side is not kept and captured is not kept and made == [128, 256, 64, 64]
    assert list(_common._SCRATCH) == [0] and _common._SCRATCH[0] is kept
