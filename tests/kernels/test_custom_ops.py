"""The kernels as torch.library custom ops: `torch.library.opcheck` on every op, and
`torch.compile(fullgraph=True)` through every public function, forward and backward.

On a CPU the ops run in Triton's interpreter (the `triton` backend) or in torch (the `torch`
backend), at sizes of a few tiles, in fp16/fp32: the interpreter computes bf16 dots on raw bits.

The compile tests use the "aot_eager" backend: it runs what torch.compile does up to code
generation — Dynamo's trace of the Python, AOTAutograd's joint forward/backward graph built from
the fake implementations and the registered autograd formulas — then runs those graphs as they
are. That is where a graph break, a wrong fake or a wrong formula shows; Inductor would only add
generated code around the ops (opaque to it) and needs a C++ toolchain and minutes of compiling on
a CPU runner. The GPU tests (tests/kernels/test_compile_and_graphs_gpu.py) compile with Inductor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._library import custom_ops

from kernels import gemm as gemm_module
from kernels import gemm_fp8 as fp8_module
from kernels import grouped_gemm as grouped_module
from kernels import quant
from kernels.gemm import gemm
from kernels.gemm_fp8 import gemm_fp8
from kernels.grouped_gemm import grouped_gemm
from kernels.quant import quantize_fp8
from tests.kernels.helpers import DEVICE

# The interpreter itself warns on `range(tl.cdiv(K, BLOCK_K))` under NumPy >= 1.25; not our code.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

GRANULARITIES = ("tensorwise", "rowwise", "blockwise")
BACKENDS = ("triton", "torch")
BACKEND_ENVS = (gemm_module.BACKEND_ENV, quant.BACKEND_ENV, grouped_module.BACKEND_ENV)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every op's backend set to one of ours (Triton) or torch's (the vendor reference)."""
    for variable in BACKEND_ENVS:
        monkeypatch.setenv(variable, request.param)
    yield request.param


def _randn(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device=DEVICE).requires_grad_(grad)


# Group sizes with an empty group and a group that is not a tile multiple.
SIZES = [50, 0, 70, 30]


OpCase = tuple[str, Any, Callable[[], tuple[Any, ...]]]


def _op_cases() -> list[OpCase]:
    """(id, op, () -> args) for every forward and backward op, inputs fresh per call."""
    sizes = torch.tensor(SIZES, device=DEVICE)
    half = torch.float16
    cases: list[OpCase] = [
        ("gemm-fp16", gemm_module.gemm_op,
         lambda: (_randn(64, 96, dtype=half, grad=True), _randn(80, 96, dtype=half, grad=True))),
        ("gemm-fp32-frozen-b", gemm_module.gemm_op, lambda: (_randn(70, 40, grad=True), _randn(24, 40))),
        ("grouped_gemm", grouped_module.grouped_gemm_op,
         lambda: (_randn(150, 64, dtype=half, grad=True), _randn(4, 72, 64, dtype=half, grad=True), sizes)),
        ("grouped_gemm_db", grouped_module.grouped_gemm_db_op, lambda: (_randn(150, 72), _randn(150, 64), sizes)),
    ]  # fmt: skip
    for granularity in GRANULARITIES:
        cases.append(
            (f"quantize_fp8-{granularity}", quant.quantize_fp8_op, lambda g=granularity: (_randn(64, 200), g))
        )
        recipe = fp8_module._RECIPES[granularity]
        for need_a, need_b in ((True, True), (True, False), (False, False)):
            cases.append((
                f"gemm_fp8_{granularity}-grads{int(need_a)}{int(need_b)}",
                recipe.forward_op,
                lambda na=need_a, nb=need_b: (_randn(64, 128, grad=na), _randn(80, 128, grad=nb), na, nb),
            ))  # fmt: skip
        cases.append(
            (f"gemm_fp8_{granularity}_backward", recipe.backward_op, lambda r=recipe: _fp8_backward_args(r))
        )
    return cases


def _fp8_backward_args(recipe: Any) -> tuple[Any, ...]:
    """The backward op's arguments: dOut and the residuals its forward op left for both gradients."""
    a, b = _randn(64, 128), _randn(80, 128)
    out, *residuals = recipe.forward_op(a, b, True, True)
    saved = recipe.saved(a, b, tuple(residuals))
    return (_randn(*out.shape, dtype=torch.bfloat16), *saved, a.dtype, b.dtype, True, True)


OP_CASES = _op_cases()


@pytest.mark.parametrize(
    ("op", "make_args"), [case[1:] for case in OP_CASES], ids=[case[0] for case in OP_CASES]
)
def test_opcheck(backend: str, op: Any, make_args: Callable[[], tuple[Any, ...]]) -> None:
    """Schema, autograd registration, fake tensors (shapes, dtypes, strides against the real run)
    and AOTAutograd with dynamic shapes, forward and backward, against eager: all of opcheck."""
    torch.manual_seed(0)
    torch.library.opcheck(op, make_args())


def test_every_op_is_checked() -> None:
    """A new op in the namespace cannot go without an opcheck case."""
    registered = {name for name in custom_ops.OPDEFS if name.startswith("gitcampaign_kernels::")}
    assert len(registered) == 10
    assert registered == {case[1]._qualname for case in OP_CASES}


class GraphRecorder:
    """A torch.compile backend that keeps the forward and backward graphs AOTAutograd makes and
    runs them as they are (aot_eager), so a test can say which ops they call."""

    def __init__(self) -> None:
        self.graphs: dict[str, list[torch.fx.GraphModule]] = {"forward": [], "backward": []}
        self.backend = aot_autograd(fw_compiler=self._keep("forward"), bw_compiler=self._keep("backward"))

    def _keep(self, kind: str) -> Callable[[torch.fx.GraphModule, Any], Callable[..., Any]]:
        def compiler(graph: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
            self.graphs[kind].append(graph)
            return make_boxed_func(graph.forward)

        return compiler

    def ops(self, kind: str) -> set[str]:
        """Names of the gitcampaign_kernels ops in the graphs of one kind."""
        return {
            str(node.target).split(".")[1]
            for graph in self.graphs[kind]
            for node in graph.graph.nodes
            if node.op == "call_function" and str(node.target).startswith("gitcampaign_kernels.")
        }


def _compiled_against_eager(
    block: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]
) -> GraphRecorder:
    """Run `block` compiled with fullgraph=True (a graph break raises) and eagerly on the same
    inputs; the loss and every input gradient must agree bit for bit (the same kernels run on the
    same data, only the path to them differs). Returns the recorded graphs."""
    recorder = GraphRecorder()
    compiled = torch.compile(block, backend=recorder.backend, fullgraph=True)
    results = []
    for run in (compiled, block):
        for tensor in inputs:
            tensor.grad = None
        loss = run(*inputs)
        loss.backward()
        results.append((loss.detach(), *(t.grad for t in inputs if t.requires_grad)))
    assert len(recorder.graphs["forward"]) == 1 and len(recorder.graphs["backward"]) == 1
    for compiled_result, eager_result in zip(*results, strict=True):
        assert torch.equal(compiled_result, eager_result)
    return recorder


def test_compile_gemm_block(backend: str) -> None:
    """Two gemms around an activation (an MLP), the second weight in fp16 like the first."""

    def mlp(x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
        return gemm(torch.relu(gemm(x, w_up)), w_down).float().square().mean()

    torch.manual_seed(1)
    dtype = torch.float16
    inputs = (_randn(64, 96, dtype=dtype, grad=True), _randn(128, 96, dtype=dtype, grad=True),
              _randn(72, 128, dtype=dtype, grad=True))  # fmt: skip
    recorder = _compiled_against_eager(mlp, inputs)
    assert recorder.ops("forward") == {"gemm"} and recorder.ops("backward") == {"gemm"}


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_compile_gemm_fp8_block(backend: str, granularity: str) -> None:
    """A linear layer in fp8 with a frozen second layer: the backward asks the second op for dA
    only, so the op's residuals for dB are left out and its formula must cope."""

    def block(x: torch.Tensor, w: torch.Tensor, frozen: torch.Tensor) -> torch.Tensor:
        hidden = gemm_fp8(x, w, granularity).float()
        return gemm_fp8(torch.relu(hidden), frozen, granularity).float().square().mean()

    torch.manual_seed(2)
    inputs = (_randn(64, 128, grad=True), _randn(96, 128, grad=True), _randn(80, 96))
    recorder = _compiled_against_eager(block, inputs)
    assert recorder.ops("forward") == {f"gemm_fp8_{granularity}"}
    assert recorder.ops("backward") == {f"gemm_fp8_{granularity}_backward"}


def test_compile_grouped_gemm_block(backend: str) -> None:
    """An MoE expert layer: a grouped up-projection, an activation, a grouped down-projection."""

    def experts(
        x: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, sizes: torch.Tensor
    ) -> torch.Tensor:
        hidden = torch.relu(grouped_gemm(x, w_up, sizes))
        return grouped_gemm(hidden, w_down, sizes).float().square().mean()

    torch.manual_seed(3)
    dtype = torch.float16
    sizes = torch.tensor(SIZES, device=DEVICE)
    inputs = (_randn(150, 64, dtype=dtype, grad=True), _randn(4, 96, 64, dtype=dtype, grad=True),
              _randn(4, 48, 96, dtype=dtype, grad=True))  # fmt: skip
    recorder = _compiled_against_eager(lambda x, up, down: experts(x, up, down, sizes), inputs)
    assert recorder.ops("forward") == {"grouped_gemm"}
    assert recorder.ops("backward") == {"grouped_gemm", "grouped_gemm_db"}


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_compile_quantize_fp8_block(backend: str, granularity: str) -> None:
    """Fake quantisation (quantise, dequantise) inside a differentiable block: the op's outputs
    carry no gradient, the gradient flows around it, and the codes match eager bit for bit."""

    def block(x: torch.Tensor) -> torch.Tensor:
        q, scales = quantize_fp8(x, granularity)
        dequantised = q.float() * quant.expand_scales(scales, granularity, *x.shape)
        return (x * dequantised).sum()

    torch.manual_seed(4)
    recorder = _compiled_against_eager(block, (_randn(64, 200, grad=True),))
    assert recorder.ops("forward") == {"quantize_fp8"} and recorder.ops("backward") == set()


def test_fp8_op_without_prepared_gradient_refuses_backward() -> None:
    """Called directly with need_grad_a=False, the forward op keeps nothing for dA: a backward that
    then wants dA raises, naming the fix, rather than returning a wrong (zero) gradient."""
    a, b = _randn(64, 128, grad=True), _randn(80, 128, grad=True)
    out = fp8_module._RECIPES["tensorwise"].forward_op(a, b, False, True)[0]
    with pytest.raises(RuntimeError, match="pass each input's requires_grad"):
        out.float().sum().backward()


BAD_CALLS: dict[str, tuple[Callable[[], object], str]] = {
    "gemm": (lambda: gemm(_randn(4, 8), _randn(4, 9)), "the same K"),
    "gemm_fp8": (lambda: gemm_fp8(_randn(4, 8), _randn(4, 8), "columnwise"), "is not supported"),
    "grouped_gemm": (
        lambda: grouped_gemm(_randn(4, 8), _randn(2, 4, 8), torch.tensor([4, 0], dtype=torch.int32)),
        "must be int64",
    ),
    "quantize_fp8": (lambda: quantize_fp8(_randn(4, 8, dtype=torch.float64)), "has dtype torch.float64"),
}


@pytest.mark.parametrize("public", sorted(BAD_CALLS))
def test_compiled_public_functions_still_check_inputs(public: str) -> None:
    """The input checks run while Dynamo traces (on the fake tensors' shapes and dtypes), so a bad
    call under torch.compile raises the eager ValueError; with fullgraph=True, Dynamo's error
    carries it (an exception leaving the compiled region is a graph break there)."""
    call, message = BAD_CALLS[public]
    with pytest.raises(ValueError, match=message):
        call()
    for fullgraph, error in ((False, ValueError), (True, torch._dynamo.exc.Unsupported)):
        torch._dynamo.reset()  # Dynamo's verdict on a frame is cached across torch.compile wrappers
        with pytest.raises(error, match=message):
            torch.compile(call, backend="eager", fullgraph=fullgraph)()
