"""Correctness and anti-cheat checks: SNR, bit-level and tolerance rules, poisoned outputs, the
identity flip, plain-tensor outputs, and the seal over everything the numbers rest on."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gitcampaign.harness.contract import SNR_THRESHOLDS_DB, CheckSpec

SNR_CHUNK = 1 << 26  # elements per float64 chunk of the SNR sums (512 MB)


def snr_db(reference: Any, candidate: Any) -> float:
    """10·log10(‖ref‖² / ‖ref − out‖²) in float64; NaN anywhere in the candidate gives NaN.

    Summed in chunks so that the float64 temporaries of a large shape stay small."""
    if tuple(reference.shape) != tuple(candidate.shape):
        return math.nan
    reference, candidate = reference.detach().reshape(-1), candidate.detach().reshape(-1)
    signal, error = 0.0, 0.0
    for start in range(0, reference.numel(), SNR_CHUNK):
        expected = reference[start : start + SNR_CHUNK].double()
        signal += float(expected.pow(2).sum())
        error += float((expected - candidate[start : start + SNR_CHUNK].double()).pow(2).sum())
    if math.isnan(error):
        return math.nan
    if error == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / error)


def bits(tensor: Any) -> Any:
    """The raw bytes of a tensor, so that NaN == NaN and -0 != +0 (torch.equal says otherwise)."""
    import torch

    flat = tensor.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else flat


def bits_equal(first: Any, second: Any) -> bool:
    import torch

    same_layout = first.dtype == second.dtype and tuple(first.shape) == tuple(second.shape)
    return same_layout and torch.equal(bits(first), bits(second))


def element_bits(tensor: Any) -> Any:
    """One integer per element holding its bit pattern (uint8 for fp8, int32 for fp32, ...)."""
    import torch

    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]
    return tensor.contiguous().view(width).reshape(-1)


def mismatch_fraction(candidate: list[Any], reference: list[Any]) -> float:
    """Share of output elements that differ bit for bit; a dtype or shape mismatch counts whole."""
    differing, total = 0, 0
    for got, want in zip(candidate, reference, strict=True):
        total += want.numel()
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            differing += want.numel()
            continue
        differing += int((element_bits(got) != element_bits(want)).sum())
    return differing / total if total else 0.0


def is_fp8(tensor: Any) -> bool:
    return tensor.dtype.is_floating_point and tensor.element_size() == 1


def interpreter_fp8_reasons(candidate: Any, reference: Any) -> list[str]:
    """The CPU rule for fp8 tensors. Triton's interpreter rounds fp32→fp8 casts wrongly in two ways:
    a code may sit one step (one ulp, same sign) from the reference, and a value that should round
    up to a power of two loses the carry and lands on half of it (code 0x70 → 0x68, subnormal
    0x08 → 0x04). Those two, and only those, are forgiven. Weaker than the GPU's exact rule, which
    is why the harness announces it."""
    import torch

    if candidate.dtype != reference.dtype or tuple(candidate.shape) != tuple(reference.shape):
        return [
            f"codes are {candidate.dtype} {tuple(candidate.shape)}, expected {reference.dtype} "
            f"{tuple(reference.shape)}"
        ]
    got, want = element_bits(candidate).to(torch.int16), element_bits(reference).to(torch.int16)
    magnitude, magnitude_ref = got & 0x7F, want & 0x7F
    same_sign = ((got & 0x80) == (want & 0x80)) | ((magnitude == 0) & (magnitude_ref == 0))
    one_step = (magnitude - magnitude_ref).abs() <= 1
    value, value_ref = candidate.float().reshape(-1).abs(), reference.float().reshape(-1).abs()
    power_of_two = torch.frexp(value_ref).mantissa == 0.5
    lost_carry = power_of_two & (value == value_ref / 2)
    bad = ~same_sign | ~(one_step | lost_carry) | (magnitude == 0x7F)
    if bool(bad.any()):
        return [
            f"{int(bad.sum())} fp8 codes differ from the reference beyond the interpreter's rounding faults"
        ]
    return []


def close_ratio(candidate: Any, reference: Any, atol: float, rtol: float) -> float:
    """The largest |out − ref| / (atol + rtol·|ref|) over the elements, in float64 (≤ 1 passes);
    NaN anywhere gives NaN, a shape mismatch inf."""
    import torch

    if tuple(candidate.shape) != tuple(reference.shape):
        return math.inf
    if not reference.numel():
        return 0.0
    got, want = candidate.detach().double(), reference.detach().double()
    error = (got - want).abs()
    allowed = atol + rtol * want.abs()
    ratio = torch.where(allowed > 0, error / allowed.clamp_min(1e-300), torch.where(error > 0, math.inf, 0.0))
    return math.nan if bool(torch.isnan(ratio).any()) else float(ratio.max())


def default_threshold(tensor: Any) -> float:
    """The SNR a tensor of this dtype must reach (bf16/fp16 40 dB, fp32 60 dB, fp8 25/20 dB)."""
    return SNR_THRESHOLDS_DB.get(str(tensor.dtype).removeprefix("torch."), SNR_THRESHOLDS_DB["float32"])


def judge(
    check: CheckSpec, got: list[Any], want: list[Any], threshold: float, cuda: bool
) -> tuple[float, list[str]]:
    """The check's column value and why it fails (nothing when it passes); NaN never passes."""
    if check.rule == "snr":
        value = snr_db(want[0], got[0])
        if not value >= threshold:
            return value, [f"{check.column} = {value:.4g} dB is below the {threshold:g} dB threshold"]
        return value, []
    if check.rule == "close":
        value = close_ratio(got[0], want[0], check.atol, check.rtol)
        if not value <= 1.0:
            return value, [
                f"{check.column} = {value:.4g}: |out - ref| exceeds atol {check.atol:g} + rtol {check.rtol:g}·|ref|"
            ]
        return value, []
    value = mismatch_fraction(got, want)
    if cuda:
        if value != 0.0:  # NaN fails too
            return value, [f"{check.column} = {value:.4g}: output differs bit for bit from the reference"]
        return value, []
    reasons: list[str] = []
    for one, other in zip(got, want, strict=True):
        if is_fp8(other):
            reasons += interpreter_fp8_reasons(one, other)
        elif not bits_equal(one, other):
            reasons.append(f"{check.column}: a {other.dtype} output differs bit for bit from the reference")
    return value, reasons


@contextlib.contextmanager
def poisoned_outputs(sizes_bytes: list[int], device: Any) -> Iterator[None]:
    """Make memory the op allocates come up as NaN, so elements it never writes cannot pass.

    Two mechanisms: torch fills every `torch.empty*` result with NaN (or 0xFF..) while deterministic
    mode is on (CPU and CUDA); on CUDA, additionally, the caching allocator is emptied and then
    primed with 0xFF-filled blocks of the outputs' sizes (0xFF.. is NaN in every float format used
    here), which it hands to the op's next allocations of those sizes whatever API they use."""
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()
        primed = [torch.full((size,), 0xFF, dtype=torch.uint8, device=device) for size in sizes_bytes * 2]
        torch.cuda.synchronize()
        del primed
    previous = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def as_tuple(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


@dataclass
class Failures:
    """What the checks found for one shape; `reasons` empty means PASS."""

    reasons: list[str] = field(default_factory=list)


def checked_call(
    label: str,
    call: Callable[[], Any],
    inputs: list[Any],
    activations: list[Any],
    out_bytes: list[int],
    device: Any,
    failures: Failures,
) -> Any:
    """Run `call` twice on the same inputs with poisoned outputs; flag mutation, nondeterminism,
    outputs that are not plain tensors, and an answer that ignores the activations' new values."""
    before = [tensor.detach().clone() for tensor in inputs]
    results = []
    for _ in range(2):
        with poisoned_outputs(out_bytes, device):
            results.append(call())
        synchronize(device)
    if not all(bits_equal(snapshot, tensor) for snapshot, tensor in zip(before, inputs, strict=True)):
        failures.reasons.append(f"{label}: the op modified its inputs")
    first, second = results
    failures.reasons += plain_tensor_reasons(label, first) + plain_tensor_reasons(label, second)
    if not all(bits_equal(x, y) for x, y in zip(as_tuple(first), as_tuple(second), strict=True)):
        failures.reasons.append(
            f"{label}: two runs on the same inputs differ (nondeterministic or uninitialised)"
        )
    if answers_from_identity(call, activations, first, out_bytes, device):
        failures.reasons.append(
            f"{label}: new values in the same input tensors got the old result "
            "(a cache keyed on id(), data_ptr() or _version of an input)"
        )
    return first


def answers_from_identity(
    call: Callable[[], Any], activations: list[Any], first: Any, out_bytes: list[int], device: Any
) -> bool:
    """True when the op returns its earlier result after the activations' values changed in place
    while their identity did not: same objects, addresses, shapes and `_version` (writes through
    `.data` bump no version counter). That is what a cache keyed on tensor identity sees in
    training, where each step's fresh activation may reuse a freed address or object id; timing
    alone cannot be relied on to expose it, since whether the allocator reuses an address varies by
    device and size. Parameters keep their values: a weight cache keyed on (id(weight),
    weight._version) stays valid, as it does in training.

    The values change by negation, exact and undone exactly; an op whose result negation keeps
    (an even function) gets a second try with the elements rolled by one, also exact. Only an
    answer that survives both is flagged."""
    import torch

    outputs = as_tuple(first)
    if not activations or not any(bool((out.detach() != 0).any()) for out in outputs if out.numel()):
        return False  # nothing to change, or an all-zero output that changed inputs may keep

    def again_with(change: Callable[[Any], Any], undo: Callable[[Any], Any]) -> bool:
        with torch.no_grad():
            for activation in activations:
                activation.data.copy_(change(activation.data))
        try:
            with poisoned_outputs(out_bytes, device):
                repeated = as_tuple(call())
            synchronize(device)
        finally:
            with torch.no_grad():
                for activation in activations:
                    activation.data.copy_(undo(activation.data))
        return all(bits_equal(x, y) for x, y in zip(outputs, repeated, strict=True))

    return again_with(torch.neg, torch.neg) and again_with(lambda t: t.roll(1), lambda t: t.roll(-1))


def plain_tensor_reasons(label: str, result: Any) -> list[str]:
    """The op must return plain torch.Tensors: a subclass (or a `__torch_function__` wrapper) can
    compute lazily when the checks read it, or answer the checks differently from training."""
    import torch

    reasons = []
    for index, output in enumerate(as_tuple(result)):
        kind = type(output)
        if kind is not torch.Tensor:
            reasons.append(
                f"{label}: output {index} is a {kind.__module__}.{kind.__qualname__}, not a plain torch.Tensor"
            )
        elif output.is_meta or output.layout != torch.strided:
            reasons.append(f"{label}: output {index} holds no data ({output.device}, {output.layout})")
    if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
        reasons.append(f"{label}: the op left a torch function or dispatch mode active")
    return reasons


def harness_modules() -> list[ModuleType]:
    """The modules the harness's code lives in: the frozen single file, or the package's modules."""
    own = sys.modules[__name__]
    package = __package__ or ""
    modules = {own} | {
        module for name, module in sys.modules.items() if package and name.startswith(package + ".")
    }
    return sorted(modules, key=lambda module: module.__name__)


class Seal:
    """The identity of every attribute of what the harness's numbers rest on, taken before the
    kernels are imported: torch (and `torch.Tensor`, whose `@` the reference uses), the clocks, the
    op spec, and the harness's own functions, classes and the objects it measures with (the clock,
    the op). An op that rebinds any of them, by whatever route (`__dict__`, an alias, `setattr` with
    a computed name, an instance attribute shadowing a method), shows up in `broken()`."""

    def __init__(self, device: Any, spec: ModuleType | None, *objects: Any) -> None:
        self.device, self.spec = device, spec
        self.objects = {f"harness.{type(obj).__name__}()": obj for obj in objects if hasattr(obj, "__dict__")}
        self.snapshot = {label: dict(vars(space)) for label, space in self._namespaces().items()}

    def _namespaces(self) -> dict[str, Any]:
        import torch

        spaces: dict[str, Any] = {
            "torch": torch,
            "torch.Tensor": torch.Tensor,
            "torch.nn.functional": torch.nn.functional,
            "torch.autograd": torch.autograd,
            "time": time,
        }
        for module in harness_modules():
            spaces[f"harness:{module.__name__}"] = module
            for name, value in vars(module).items():
                if isinstance(value, type) and value.__module__ == module.__name__:
                    spaces[f"harness.{name}"] = value
        if self.spec is not None:
            spaces["op_spec"] = self.spec
        spaces.update(self.objects)
        if self.device.type == "cuda":
            import triton.testing

            spaces.update(
                {
                    "torch.cuda": torch.cuda,
                    "torch.cuda.Event": torch.cuda.Event,
                    "triton.testing": triton.testing,
                }
            )
        return spaces

    @staticmethod
    def _torch_wrapper(new: Any, old: Any) -> bool:
        """torch rebinds a few of its own functions when a submodule loads (`import torch._dynamo`
        wraps `torch.manual_seed`): a wrapper whose code lives in torch and unwraps to the original."""
        import inspect

        import torch

        code = getattr(new, "__code__", None)
        return (
            code is not None
            and code.co_filename.startswith(os.path.dirname(torch.__file__))
            and inspect.unwrap(new) is old
        )

    def broken(self) -> list[str]:
        """`space.name` for every attribute rebound, removed, or (on a class) added since start-up;
        on an object (the clock, the op), only its callables count: its counters may move."""
        broken = []
        for label, space in self._namespaces().items():
            before, now = self.snapshot.get(label, {}), vars(space)
            instance = not isinstance(space, ModuleType | type)
            broken += [
                f"{label}.{name}"
                for name, value in before.items()
                if now.get(name, before) is not value
                and not self._torch_wrapper(now.get(name), value)
                and not (instance and not callable(value) and not callable(now.get(name)))
            ]
            if not isinstance(space, ModuleType):  # nothing new on a class, no new callable on an object
                broken += [
                    f"{label}.{name}"
                    for name in now.keys() - before.keys()
                    if not instance or callable(now[name])
                ]
        return sorted(broken)
