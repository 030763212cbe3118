"""On a GPU: the kernels under torch.compile with Inductor (fullgraph, forward and backward, and
mode="reduce-overhead", Inductor's own CUDA graphs), and captured into CUDA graphs by hand, forward
and backward, autotuning included.

A replayed graph is checked on NEW inputs: after capture, fresh values are copied into the static
input buffers (weights, gradient, group sizes included), the graph is replayed, and its outputs and
gradients must equal an eager run on those values bit for bit (the same kernels and configs run on
the same data). A graph that did not run, or that baked a value into a launch (a pointer, a group
size, a descriptor, a config picked while capturing), leaves the old results or wrong ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from kernels import _common
from kernels import gemm as gemm_module
from kernels import gemm_fp8 as fp8_module
from kernels import grouped_gemm as grouped_module
from kernels._common import tma_config
from kernels.gemm import gemm
from kernels.gemm_fp8 import gemm_fp8
from kernels.grouped_gemm import grouped_gemm
from kernels.quant import expand_scales, quantize_fp8
from tests.kernels.helpers import gpu, snr_db

pytestmark = [pytest.mark.gpu, gpu]

GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
BF16 = torch.bfloat16
# Group sizes on the device, skewed, one group empty; the replay gets another routing.
SIZES, NEW_SIZES = [300, 0, 17, 195, 8, 0, 2, 502], [0, 640, 1, 100, 127, 64, 0, 92]


def _randn(*shape: int, dtype: torch.dtype = BF16) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device="cuda")


@pytest.fixture
def unpinned_fp8(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blockwise runs the shipped path, the Gluon kernel on sm_90 (a pinned fp8 config, which
    tests/conftest.py sets on a GPU, would ask for the Triton kernel instead)."""
    monkeypatch.delenv(fp8_module.CONFIG_ENV, raising=False)


def _autotuned(
    monkeypatch: pytest.MonkeyPatch, kernel: object, configs: list[object]
) -> dict[object, object]:
    """Let `kernel` autotune over `configs` with an empty cache (tests/conftest.py pins one config,
    which the autotuner runs without timing); returns the cache it fills."""
    cache: dict[object, object] = {}
    monkeypatch.setattr(kernel, "configs", configs)
    monkeypatch.setattr(kernel, "cache", cache)
    return cache


# ---- Inductor ------------------------------------------------------------------------------------


def _mlp(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    return gemm(torch.relu(gemm(x, w_up)), w_down)


def _fp8_mlp(granularity: str) -> Callable[..., torch.Tensor]:
    def mlp(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
        return gemm_fp8(torch.relu(gemm_fp8(x, w_up, granularity)), w_down, granularity)

    return mlp


def _experts(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    return grouped_gemm(torch.relu(grouped_gemm(x, w_up, sizes)), w_down, sizes)


def _fake_quantised(granularity: str) -> Callable[..., torch.Tensor]:
    """Quantisation-aware training's fake quantisation: x's dequantised codes forward, x's gradient
    straight through (the codes carry none)."""

    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        q, scales = quantize_fp8(x, granularity)
        dequantised = q.to(torch.float32) * expand_scales(scales, granularity, *x.shape)
        return gemm(x + (dequantised.to(BF16) - x).detach(), w)

    return block


def _blocks() -> dict[str, tuple[Callable[..., torch.Tensor], Callable[[], tuple[torch.Tensor, ...]]]]:
    """name -> (block, () -> fresh inputs; tensors of float dtype are differentiated)."""
    sizes = lambda values: torch.tensor(values, dtype=torch.int64, device="cuda")  # noqa: E731
    blocks = {
        "gemm": (_mlp, lambda: (_randn(512, 256), _randn(768, 256), _randn(384, 768))),
        "grouped_gemm": (
            _experts,
            lambda: (_randn(sum(SIZES), 256), _randn(8, 384, 256), _randn(8, 128, 384), sizes(SIZES)),
        ),
    }
    for granularity in GRANULARITIES:
        blocks[f"gemm_fp8-{granularity}"] = (
            _fp8_mlp(granularity),
            lambda: (_randn(512, 256), _randn(768, 256), _randn(384, 768)),
        )
        blocks[f"quantize_fp8-{granularity}"] = (
            _fake_quantised(granularity),
            lambda: (_randn(512, 384), _randn(256, 384)),
        )
    return blocks


BLOCKS = _blocks()


def _run(
    block: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], grad_seed: int
) -> list[torch.Tensor]:
    """out and the gradient of every float input, for an upstream gradient drawn from `grad_seed`."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = block(*leaves)
    grad = torch.randn(out.shape, generator=torch.Generator("cuda").manual_seed(grad_seed), device="cuda")
    out.backward(grad.to(out.dtype))
    return [out.detach(), *(t.grad for t in leaves if t.is_floating_point())]


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_inductor_fullgraph_forward_and_backward(name: str, unpinned_fp8: None) -> None:
    """Inductor with fullgraph=True (a graph break raises) against eager: the ops are opaque to
    Inductor, the code around them is its own (relu, casts), so agreement is checked to 40 dB (bf16
    rounding of one op is ~50 dB; a wrong graph is ~0)."""
    torch._dynamo.reset()
    block, make_inputs = BLOCKS[name]
    torch.manual_seed(0)
    inputs = make_inputs()
    compiled = torch.compile(block, fullgraph=True)
    for got, want in zip(_run(compiled, inputs, 1), _run(block, inputs, 1), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert snr_db(want, got) >= 40.0, name


@pytest.mark.parametrize("name", ["gemm", "gemm_fp8-rowwise", "grouped_gemm"])
def test_inductor_cuda_graphs_on_new_inputs(
    name: str, unpinned_fp8: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mode="reduce-overhead": Inductor records the compiled step in CUDA graphs after its warm-up
    runs; later calls with new values (new routing for the grouped GEMM) replay them. The process's
    first launches are the warm-up's (no descriptor scratch kept from an earlier test), as in a
    training script: a buffer kept from there is a live tensor in the graph's pool, which Inductor
    refuses."""
    monkeypatch.setattr(_common, "_SCRATCH", {})
    torch._dynamo.reset()
    block, make_inputs = BLOCKS[name]
    compiled = torch.compile(block, mode="reduce-overhead", fullgraph=True)
    for step in range(4):
        torch.manual_seed(10 + step)
        inputs = make_inputs()
        if name == "grouped_gemm" and step % 2:
            inputs = (*inputs[:3], torch.tensor(NEW_SIZES, device="cuda"))
        for got, want in zip(_run(compiled, inputs, step), _run(block, inputs, step), strict=True):
            assert snr_db(want, got) >= 40.0, (name, step)


# ---- CUDA graphs by hand -------------------------------------------------------------------------


def _capture(step: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """Warm up on a side stream (autotuning times configs there; it cannot run while capturing),
    then capture one step."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


class StaticStep:
    """A training step over static buffers: inputs (float ones are leaves that require grad), an
    upstream gradient, and the outputs and gradients the captured graph writes."""

    def __init__(self, block: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> None:
        self.block = block
        self.inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        self.grad = torch.randn_like(block(*inputs).float())
        self.results: list[torch.Tensor] = []

    def __call__(self) -> None:
        for tensor in self.inputs:
            tensor.grad = None  # the captured backward then allocates the gradients in the graph's pool
        out = self.block(*self.inputs)
        out.backward(self.grad.to(out.dtype))
        self.results = [out, *(t.grad for t in self.inputs if t.is_floating_point())]

    def load(self, inputs: tuple[torch.Tensor, ...], grad: torch.Tensor) -> None:
        with torch.no_grad():
            for static, new in zip(self.inputs, inputs, strict=True):
                static.copy_(new)
            self.grad.copy_(grad)

    def eager(self, inputs: tuple[torch.Tensor, ...], grad: torch.Tensor) -> list[torch.Tensor]:
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        out = self.block(*leaves)
        out.backward(grad.to(out.dtype))
        return [out.detach(), *(t.grad for t in leaves if t.is_floating_point())]


def _check_replay(
    block: Callable[..., torch.Tensor],
    make_inputs: Callable[[], tuple[torch.Tensor, ...]],
    make_new_inputs: Callable[[], tuple[torch.Tensor, ...]] | None = None,
) -> None:
    """Capture a step over inputs from `make_inputs`, then replay it twice on values from
    `make_new_inputs` (default: the same maker) against eager."""
    torch.manual_seed(1)
    step = StaticStep(block, make_inputs())
    graph = _capture(step)
    captured = [t.clone() for t in step.results]
    # Eager calls of other shapes between capture and replay: nothing they leave behind (descriptors,
    # scratch memory, tuned configs) may reach the graph.
    other = [
        _randn(96, 64).requires_grad_(),
        _randn(80, 64).requires_grad_(),
        _randn(48, 80).requires_grad_(),
    ]
    _mlp(*other).float().sum().backward()
    for attempt in range(2):
        torch.manual_seed(100 + attempt)
        new_inputs, new_grad = (make_new_inputs or make_inputs)(), torch.randn_like(step.grad)
        step.load(new_inputs, new_grad)
        graph.replay()
        expected = step.eager(new_inputs, new_grad)
        for got, want, old in zip(step.results, expected, captured, strict=True):
            assert not torch.equal(want, old), "the new inputs must change every result"
            assert torch.equal(got, want)


def test_gemm_graph_with_autotuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """gemm forward and backward (the TMA kernel in all three layouts), its configs tuned during
    the warm-up: the capture launches the tuned ones and times nothing."""
    cache = _autotuned(
        monkeypatch,
        gemm_module._matmul_nt_kernel,
        [tma_config(128, 128, 64, 8, 3), tma_config(128, 256, 64, 8, 3, subtile=True)],
    )
    block, make_inputs = BLOCKS["gemm"]
    _check_replay(block, make_inputs)
    assert len(cache) >= 3  # the forward's layout and the two backward products', each timed


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_gemm_fp8_graph(granularity: str, unpinned_fp8: None) -> None:
    """gemm_fp8 forward and backward: quantisers (tensorwise amax partials on the device, no host
    sync), transposes, the TMA kernel and, blockwise on sm_90, the Gluon kernel with its host-built
    TMA descriptors (over the static buffers, so the replay reads the new values)."""
    block, make_inputs = BLOCKS[f"gemm_fp8-{granularity}"]
    _check_replay(block, make_inputs)


def test_grouped_gemm_graph_with_device_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grouped GEMM forward and backward with the group sizes on the device: each replay routes by
    the sizes in the static buffer (SIZES captured, NEW_SIZES replayed), the forward's persistent
    kernel autotuned during the warm-up."""
    cache = _autotuned(
        monkeypatch,
        grouped_module._grouped_matmul_nt_tma_kernel,
        [tma_config(128, 128, 64, 8, 4), tma_config(64, 256, 64, 4, 4)],
    )
    block, make_inputs = BLOCKS["grouped_gemm"]

    def rerouted() -> tuple[torch.Tensor, ...]:
        x, w_up, w_down, _ = make_inputs()
        return x, w_up, w_down, torch.tensor(NEW_SIZES, device="cuda")

    _check_replay(block, make_inputs, rerouted)
    assert len(cache) >= 2  # both layers' forwards and dA products, each timed


@pytest.fixture
def inference() -> Iterator[None]:
    with torch.no_grad():
        yield


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_forward_only_graph(name: str, inference: None, unpinned_fp8: None) -> None:
    """Inference: the forward alone (no residuals kept for a backward) captured and replayed."""
    block, make_inputs = BLOCKS[name]
    torch.manual_seed(3)
    static_inputs = make_inputs()
    outputs: dict[str, torch.Tensor] = {}

    def forward() -> None:
        outputs["out"] = block(*static_inputs)

    graph = _capture(forward)
    captured = outputs["out"].clone()
    torch.manual_seed(4)
    new_inputs = make_inputs()
    for static, new in zip(static_inputs, new_inputs, strict=True):
        static.copy_(new)
    graph.replay()
    expected = block(*new_inputs)
    assert not torch.equal(expected, captured)
    assert torch.equal(outputs["out"], expected)
