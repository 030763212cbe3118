"""Inputs: what an op spec's `inputs(shape, draw)` draws with, and the banks the timed calls take
their inputs from (fresh values at fresh addresses for every call, without a draw per call)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gitcampaign.harness.routing import make_group_sizes

POOL_L2_MULTIPLE = 4  # bytes read between two uses of an input byte, in L2 sizes
POOL_MAX_SETS = 1024  # tiny shapes: enough sets, bounded host time to make them
BANK_ALIGN_BYTES = 512  # an input view starts where the caching allocator would place a tensor
BANK_PASSES = 1024  # passes over a bank, each one alignment further along, before it is drawn anew
ACTIVATION, PARAMETER = "activation", "parameter"


def sets_apart(l2_bytes: int, set_bytes: int) -> int:
    """How many sets of `set_bytes` go round before one is used again, so that POOL_L2_MULTIPLE x L2
    is read in between (at least 2; tiny sets: POOL_MAX_SETS)."""
    return min(POOL_MAX_SETS, max(2, math.ceil(POOL_L2_MULTIPLE * l2_bytes / max(set_bytes, 1)) + 1))


def normal(size: tuple[int, ...], generator: Any, device: Any, dtype: Any) -> Any:
    """Standard normal values, drawn in the target dtype (one write per element)."""
    import torch

    return torch.randn(*size, generator=generator, device=device, dtype=dtype)


def uniform(size: tuple[int, ...], generator: Any, device: Any, dtype: Any) -> Any:
    """Values uniform in [0, 1)."""
    import torch

    return torch.rand(*size, generator=generator, device=device, dtype=dtype)


def binades(size: tuple[int, ...], generator: Any, device: Any, dtype: Any) -> Any:
    """Normal values scaled per row by a power of two from 2^-6 to 2^6, so that a quantiser's codes
    and scales both get exercised."""
    import torch

    x = torch.randn(*size, generator=generator, device=device)
    scale = torch.exp2(torch.randint(-6, 7, (*size[:-1], 1), generator=generator, device=device).float())
    return (x * scale).to(dtype)


Fill = Callable[[tuple[int, ...], Any, Any, Any], Any]
FILLS: dict[str, Fill] = {"normal": normal, "uniform": uniform, "binades": binades}


@functools.cache
def scaled(fill: Fill, scale: float, shift: float) -> Fill:
    """`fill` times `scale` plus `shift`, computed in float32 and cast once (one function per
    triple, so a bank keyed on it finds its values again)."""
    if (scale, shift) == (1.0, 0.0):
        return fill

    def draw(size: tuple[int, ...], generator: Any, device: Any, dtype: Any) -> Any:
        import torch

        return (fill(size, generator, device, torch.float32) * scale + shift).to(dtype)

    return draw


class Bank:
    """The timed calls' inputs, without a draw per call. Drawing a set of random inputs costs the
    GPU more than copying it (a Mixtral layer's expert weights take longer to draw than the layer's
    GEMM takes to run), and draws between back-to-back calls lower their duty cycle, so the calls run
    above the clock they hold back to back (BENCHMARKS.md, the harness's agreement). So the values of
    each input (one bank per size, dtype and fill) are drawn once, and every tensor taken is a view:
    - at an address no earlier take had (a cache keyed on identity or address never hits), with
      contents no earlier take had (a cache keyed on the storage answers wrongly);
    - walking the bank, so that between two uses of a byte at least POOL_L2_MULTIPLE x L2 of the
      same bank is taken (no call finds its inputs in L2; tiny inputs: POOL_MAX_SETS takes);
    - aligned as the caching allocator aligns a tensor. Each pass over the bank starts one alignment
      further along; when the offsets within one tensor's stride (or BANK_PASSES) run out, the values
      are drawn anew, in a new buffer (views taken earlier keep theirs)."""

    def __init__(self, generator: Any, device: Any, l2_bytes: int = 0) -> None:
        self.generator, self.device, self.l2_bytes = generator, device, l2_bytes
        self.handed_out = 0  # bytes of the views taken: what a set weighs in the pool's depth
        self.banks: dict[tuple[object, ...], list[Any]] = {}  # key -> [values, next start, pass]

    def take(self, size: tuple[int, ...], dtype: Any, fill: Fill = normal) -> Any:
        numel, itemsize = math.prod(size), dtype.itemsize
        align = max(1, BANK_ALIGN_BYTES // itemsize)
        stride = -(-numel // align) * align
        passes = min(BANK_PASSES, max(1, stride // align))  # pass p's starts are p x align modulo the stride
        key = (size, dtype, fill)
        if key not in self.banks:
            sets = sets_apart(self.l2_bytes, stride * itemsize)
            self.banks[key] = [self._draw(size, sets * stride + passes * align, dtype, fill), 0, 0]
        bank = self.banks[key]
        values, start, done = bank
        if start + numel > values.numel():  # the next pass, one alignment further along
            done += 1
            if done == passes:
                values, done = self._draw(size, values.numel(), dtype, fill), 0
            start = done * align
        bank[:] = [values, start + stride, done]
        self.handed_out += numel * itemsize
        return values[start : start + numel].view(size)

    def _draw(self, size: tuple[int, ...], numel: int, dtype: Any, fill: Fill) -> Any:
        """At least `numel` values, drawn in rows of the input's last dimension."""
        width = size[-1] if size and size[-1] else 1
        rows = -(-max(numel, 1) // width)
        return fill((rows, width), self.generator, self.device, dtype).reshape(-1)


@dataclass
class Inputs:
    """One call's inputs as the spec returned them, with the role of each tensor it drew."""

    values: dict[str, Any]
    roles: dict[str, str] = field(default_factory=dict)  # name -> ACTIVATION or PARAMETER

    def tensors(self) -> list[Any]:
        import torch

        return [value for value in self.values.values() if isinstance(value, torch.Tensor)]

    def differentiable(self) -> dict[str, Any]:
        """The tensors gradients are taken for, by name, in the spec's order."""
        import torch

        return {
            name: value
            for name, value in self.values.items()
            if isinstance(value, torch.Tensor) and value.requires_grad
        }

    def activations(self) -> list[Any]:
        """The floating-point activations (fresh every step in training; a cache keyed on their
        identity is forbidden, where one keyed on a parameter's identity and version is not)."""
        return [
            self.values[name]
            for name, role in self.roles.items()
            if role == ACTIVATION and self.values[name].is_floating_point() and self.values[name].numel()
        ]


class Draw:
    """What an op spec draws its inputs with: `draw.activation(M, K)`, `draw.parameter(N, K)`,
    `draw.routing(dist, rows, groups)`, `draw.integers(low, high, *size)`; `draw.dtype` is the
    campaign's compute dtype and `draw.device` its device. Tensors come from a bank (the timed calls)
    or are drawn now (checks, warm-up, the training probe); floating ones require grad when the op
    has a backward, unless drawn with `grad=False`."""

    def __init__(self, generator: Any, device: Any, dtype: Any, backward: bool, bank: Bank | None = None):
        self.generator, self.device, self.dtype, self.backward, self.bank = (
            generator,
            device,
            dtype,
            backward,
            bank,
        )
        self.routing_draws = 0  # seeds successive routings
        self.made: list[tuple[Any, str]] = []

    def activation(
        self,
        *size: Any,
        dtype: Any = None,
        fill: str = "normal",
        scale: float = 1.0,
        shift: float = 0.0,
        grad: bool = True,
    ) -> Any:
        """A tensor drawn fresh for every call, as an activation is in training."""
        return self._tensor(ACTIVATION, size, dtype, fill, scale, shift, grad)

    def parameter(
        self,
        *size: Any,
        dtype: Any = None,
        fill: str = "normal",
        scale: float = 1.0,
        shift: float = 0.0,
        grad: bool = True,
    ) -> Any:
        """A weight: fresh for every timed call too (so no cache of it helps the figure), but kept
        across the training probe's steps and updated in place by its optimiser."""
        return self._tensor(PARAMETER, size, dtype, fill, scale, shift, grad)

    def integers(self, low: int, high: int, *size: Any) -> Any:
        """int64 values in [low, high), an activation (drawn now: integer inputs are small)."""
        import torch

        sizes = self._size(size)
        tensor = torch.randint(low, high, sizes, generator=self.generator, device=self.device)
        self.made.append((tensor, ACTIVATION))
        return tensor

    def routing(self, dist: str, rows: int, groups: int) -> Any:
        """`groups` int64 row counts summing to `rows`, drawn by the harness's own MoE routing for
        the `dist` distribution (never the kernel module's), on the device. Drawn on the CPU with a
        generator seeded on the host: reading a draw back from the device would stall the GPU each
        time a set is prepared."""
        import torch

        self.routing_draws += 1
        seed = self.generator.initial_seed() * 1_000_003 + self.routing_draws
        sizes = make_group_sizes(dist, rows, groups, generator=torch.Generator().manual_seed(seed))
        if sizes.device != torch.device(self.device):
            # Pinned and non-blocking: a pageable copy would make the host wait for the stream
            # between back-to-back timed calls, and the GPU would idle before each one.
            sizes = sizes.pin_memory().to(self.device, non_blocking=True)
        self.made.append((sizes, ACTIVATION))
        return sizes

    @staticmethod
    def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
        sizes = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
        if not all(isinstance(n, int) and n >= 0 for n in sizes):
            raise ValueError(f"sizes must be non-negative integers, got {size!r}")
        return sizes

    def _tensor(
        self, role: str, size: tuple[Any, ...], dtype: Any, fill: str, scale: float, shift: float, grad: bool
    ) -> Any:
        if fill not in FILLS:
            raise ValueError(f"fill {fill!r} is not one of {', '.join(FILLS)}")
        sizes, dtype = self._size(size), dtype or self.dtype
        function = scaled(FILLS[fill], float(scale), float(shift))
        if self.bank is None:
            tensor = function(sizes, self.generator, self.device, dtype)
        else:
            tensor = self.bank.take(sizes, dtype, function)
        if grad and self.backward and tensor.is_floating_point():
            tensor.requires_grad_()
        self.made.append((tensor, role))
        return tensor

    def inputs(self, spec: Any, shape: dict[str, Any]) -> Inputs:
        """One call's inputs from the spec, each tensor with the role it was drawn in."""
        self.made = []
        values = spec.inputs(shape, self)
        if not isinstance(values, dict):
            raise TypeError(f"the op spec's inputs() returned {type(values).__name__}, not a dict of inputs")
        roles = {
            name: role for name, value in values.items() for tensor, role in self.made if tensor is value
        }
        self.made = []
        return Inputs(values, roles)
