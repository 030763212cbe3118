"""What every op file shares: backend choice, interpreter detection, autotune configs, tile order,
the custom-op namespace, and what the persistent TMA kernels need: the device's capability, the
grid's width and the descriptors' scratch memory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from triton import knobs
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction

BACKENDS = ("triton", "torch")
# Every op registers as torch.ops.gitcampaign_kernels.NAME (torch.library.custom_op), the form
# torch.compile traces as one opaque node with a fake (shape-only) implementation and an autograd formula.
NAMESPACE = "gitcampaign_kernels"


def backend(env_var: str) -> str:
    """The backend an op runs on: `triton` (ours) unless `env_var` says `torch` (the vendor reference)."""
    value = os.environ.get(env_var)
    if value is None:
        return "triton"
    chosen = value.strip().lower()
    if chosen not in BACKENDS:
        raise ValueError(f"{env_var}={chosen!r} is not a backend; set it to one of {', '.join(BACKENDS)}")
    return chosen


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for host code: triton.cdiv is a constexpr function, whose wrapper costs the host
    a few microseconds a call."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1), for host code (see `cdiv`)."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU (TRITON_INTERPRET=1), where autotuning cannot time."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def parse_config(text: str, source: str = "config") -> triton.Config:
    """`BLOCK_M=128,BLOCK_N=128,num_warps=8,num_stages=3` -> triton.Config."""
    meta: dict[str, int] = {}
    launch: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"{source}: {item!r} is not KEY=INT; example: BLOCK_M=64,num_warps=4")
        (launch if key in ("num_warps", "num_stages", "num_ctas") else meta)[key.strip()] = int(value)
    return triton.Config(meta, **launch)


def pinned(pin_env: str) -> str:
    """The config pinned in the environment variable `pin_env`, or "" when none is."""
    return os.environ.get(pin_env, "").strip()


def pick_configs(
    configs: list[triton.Config], cpu_config: triton.Config, pin_env: str
) -> list[triton.Config]:
    """The autotune list to use: the one config pinned in `pin_env` (reproducible benchmarks and
    tests), else the CPU config in the interpreter (autotuning cannot time there), else all."""
    pinned_config = pinned(pin_env)
    if pinned_config:
        return [parse_config(pinned_config, pin_env)]
    if interpreting():
        return [cpu_config]
    return configs


def matmul_config(bm: int, bn: int, bk: int, warps: int, stages: int, group_m: int = 8) -> triton.Config:
    """A tiled-matmul config: BLOCK_M x BLOCK_N output tile, BLOCK_K reduction step, GROUP_M swizzle."""
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m}, num_warps=warps, num_stages=stages
    )


def tma_config(bm: int, bn: int, bk: int, warps: int, stages: int, subtile: bool = False) -> triton.Config:
    """A matmul config for a persistent TMA kernel: EPILOGUE_SUBTILE stores the C tile in two halves."""
    config = matmul_config(bm, bn, bk, warps, stages)
    config.kwargs["EPILOGUE_SUBTILE"] = int(subtile)
    return config


TMA_ONLY_KEYS = ("EPILOGUE_SUBTILE",)  # config keys the pointer (fallback) kernels do not take


def without_keys(configs: list[triton.Config], keys: tuple[str, ...]) -> list[triton.Config]:
    """The configs minus `keys`, so that one pinned config serves two kernels that take different
    meta-parameters (a TMA kernel and its pointer fallback, two quantisers)."""
    return [
        triton.Config(
            {key: value for key, value in config.kwargs.items() if key not in keys},
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )
        for config in configs
    ]


TMA_ALIGN_BYTES = 16  # TMA descriptors need 16-byte aligned base pointers and non-unit strides


def tma_addressable(tensor: torch.Tensor, unit_dim: int) -> bool:
    """Whether a TMA descriptor can read `tensor` with `unit_dim` as its contiguous dimension: a unit
    stride there, a 16-byte aligned base, and non-zero 16-byte aligned strides in the others."""
    strides = tensor.stride()
    if strides[unit_dim] != 1 or tensor.data_ptr() % TMA_ALIGN_BYTES:
        return False
    size = tensor.element_size()
    for dim, stride in enumerate(strides):  # a loop, not all(...): this runs on every launch
        if dim != unit_dim and (stride <= 0 or stride * size % TMA_ALIGN_BYTES):
            return False
    return True


# Device properties, looked up once per device index. Plain dicts rather than functools.cache: the
# lookups run inside the custom ops, but a cached function is also what torch.compile's tracer
# cannot enter, so none stays where a traced region could reach it.
_CAPABILITY: dict[int, tuple[int, int]] = {}
_SM_COUNT: dict[int, int] = {}


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def capability(device: torch.device) -> tuple[int, int]:
    """(major, minor) compute capability of a CUDA device."""
    index = _index(device)
    known = _CAPABILITY.get(index)
    if known is None:
        known = _CAPABILITY[index] = torch.cuda.get_device_capability(index)
    return known


def tma_supported(device: torch.device) -> bool:
    """TMA exists from sm90 on; the interpreter runs TMA kernels on the CPU."""
    return device.type != "cuda" or capability(device)[0] >= 9


def num_sms(device: torch.device, interpreter_programs: int) -> int:
    """Width of a persistent grid: the SM count of a CUDA device; in the interpreter
    `interpreter_programs`, a few, so that CPU tests walk several tiles a program."""
    if device.type != "cuda":
        return interpreter_programs
    index = _index(device)
    known = _SM_COUNT.get(index)
    if known is None:
        known = _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return known


# Descriptor scratch memory of each device's default stream: a kernel writes its descriptors there
# when it starts and reads them while it runs, and the next kernel on the stream starts after it
# ends, so one buffer serves every launch there (a torch.empty per launch cost the host a few us).
# Any other stream gets a buffer per launch, freed after it: a CUDA graph's capture keeps it in the
# graph's pool for as long as the graph, and Inductor's warm-up of a graph (mode="reduce-overhead")
# runs on a stream of its own with every allocation of the thread routed into the graph's pool,
# where a buffer kept past the call is a live tensor that Inductor refuses ("Detected 1 tensor(s)
# in the cudagraph pool not tracked as outputs", an H100 on 2026-12-06, where the first launch in
# the process was that warm-up's).
_SCRATCH: dict[int, torch.Tensor] = {}
_DEFAULT_STREAMS: dict[int, int] = {}


def _tma_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    device = torch.cuda.current_device()
    default = _DEFAULT_STREAMS.get(device)
    if default is None:
        default = _DEFAULT_STREAMS[device] = torch.cuda.default_stream(device).cuda_stream
    if stream != default or torch.cuda.is_current_stream_capturing():
        return torch.empty(size, device="cuda", dtype=torch.int8)
    buffer = _SCRATCH.get(device)
    if buffer is None or buffer.numel() < size:
        buffer = _SCRATCH[device] = torch.empty(size, device="cuda", dtype=torch.int8)
    return buffer


def use_tma_scratch(device: torch.device) -> None:
    """Give Triton global memory for the descriptors a kernel builds on a CUDA device. Before every
    launch, not once: Triton keeps the allocator in a ContextVar, which the autograd engine's own
    thread (where the backward's products run) does not inherit."""
    if device.type == "cuda":
        triton.set_allocator(_tma_scratch)


# Launching. `kernel[grid](...)` costs the host ~10-20 us a call in Triton itself: the autotuner
# rebuilds its key and keyword dicts, the JIT function binds and specialises every argument, turns
# its options into a string for the cache key and calls the grid function. `launch` does that once
# per distinct call and afterwards hands the compiled kernel its arguments directly, as
# JITFunction.run does at its end (and as Inductor's generated launchers do).
FAST_LAUNCH_ENV = "KERNELS_FAST_LAUNCH"
# Off in the interpreter (no compiled kernels) or where KERNELS_FAST_LAUNCH=0 (Triton's own path,
# to compare against or to rule the cache out). Read at import, like the autotune pins.
fast_launch = os.environ.get(FAST_LAUNCH_ENV, "1").strip() != "0" and not interpreting()


@dataclass
class _Launch:
    """What one distinct call resolved to: the compiled kernel, the grid, every parameter's value
    in the kernel's order with the tensors' places left empty, and the autotuner state it came from."""

    compiled: Any
    grid: tuple[int, int, int]
    values: list[Any]
    tensor_slots: list[int]  # positional arguments bind to the first parameters, in order
    tuner_state: tuple[Any, ...]


_LAUNCHES: dict[tuple[Any, ...], _Launch] = {}


def _arg_key(arg: Any) -> Any:
    """What Triton specialises a launch on, for one argument: a tensor's dtype and 16-byte
    alignment; a host TensorDescriptor's dtype, geometry and layout; any other value as it is
    (integers are kept whole, as the autotuner keys and grids read them)."""
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() % 16 == 0)
    if hasattr(arg, "block_shape"):
        return (arg.base.dtype, tuple(arg.shape), tuple(arg.strides), tuple(arg.block_shape), arg.layout)
    return arg


def _tuner_state(kernel: Any) -> tuple[Any, ...]:
    """The config lists and caches of the autotuners between `kernel` and its JIT function: a
    resolved launch holds until one of them is replaced (a test pinning configs, a re-tune)."""
    state = []
    while isinstance(kernel, Autotuner | Heuristics):
        if isinstance(kernel, Autotuner):
            state += [kernel.configs, kernel.cache]
        kernel = kernel.fn
    return tuple(state)


def _same_objects(held: tuple[Any, ...], current: tuple[Any, ...]) -> bool:
    """Identity, not equality: a cache that gains entries for other shapes is the same cache."""
    return len(held) == len(current) and all(a is b for a, b in zip(held, current, strict=True))


def _resolve(
    kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any], compiled: Any
) -> _Launch | None:
    """After `kernel[grid](*args, **kwargs)` returned `compiled`: the keyword arguments the JIT
    function received (the autotuner's pick, then the heuristics' values, in the wrappers' order),
    bound to its parameters. None where the innermost kernel is not a JIT function (a test's spy)."""
    keywords = dict(kwargs)
    layer = kernel
    while isinstance(layer, Autotuner | Heuristics):
        if isinstance(layer, Autotuner):
            keywords.update(layer.best_config.all_kwargs())
        else:
            named = {**dict(zip(layer.arg_names, args, strict=False)), **keywords}
            keywords.update({name: rule(named) for name, rule in layer.values.items()})
        layer = layer.fn
    if not isinstance(layer, JITFunction) or compiled is None:
        return None
    bound = layer.signature.bind(*args, **{k: v for k, v in keywords.items() if k in layer.arg_names})
    bound.apply_defaults()
    named_values = dict(bound.arguments)
    size = grid(named_values) if callable(grid) else grid
    grid_3d = (size[0], size[1] if len(size) > 1 else 1, size[2] if len(size) > 2 else 1)
    values = list(named_values.values())
    slots = [
        index
        for index, arg in enumerate(args)
        if isinstance(arg, torch.Tensor) or hasattr(arg, "block_shape")
    ]
    for index in slots:
        values[index] = None
    return _Launch(compiled, grid_3d, values, slots, _tuner_state(kernel))


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """`kernel[grid](*args, **kwargs)`, with what does not change between calls resolved once per
    distinct call: the same device, kernel, keyword values, tensor dtypes and alignments and integer
    arguments (so the same autotuned config, specialisation and grid). Tensors are passed
    positionally; keyword arguments are compile-time constants."""
    if not fast_launch:
        kernel[grid](*args, **kwargs)
        return
    device = driver.active.get_current_device()
    key = (kernel, device, *map(_arg_key, args), *kwargs.items())
    resolved = _LAUNCHES.get(key)
    if resolved is None or not _same_objects(resolved.tuner_state, _tuner_state(kernel)):
        compiled = kernel[grid](*args, **kwargs)
        resolved = _resolve(kernel, grid, args, kwargs, compiled)
        if resolved is not None:
            _LAUNCHES[key] = resolved
        return
    values = resolved.values.copy()
    for index in resolved.tensor_slots:
        values[index] = args[index]
    compiled = resolved.compiled
    stream = driver.active.get_current_stream(device)
    grid_0, grid_1, grid_2 = resolved.grid
    compiled.run(
        grid_0, grid_1, grid_2, stream, compiled.function, compiled.packed_metadata,
        compiled.launch_metadata(resolved.grid, stream, *values),
        knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *values,
    )  # fmt: skip


def input_precision(dtype: torch.dtype) -> str:
    """fp32 inputs multiply in full fp32 like torch's default matmul; 16-bit inputs ignore the flag."""
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def tile_pid(pid, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Program `pid` -> its output tile (pid_m, pid_n), in grouped ("swizzled") order.

    Consecutive programs walk down a group of GROUP_SIZE_M row tiles before moving one column right,
    so the tiles running at the same time share rows of A and columns of B in L2 (the order of
    Triton's matrix-multiplication tutorial, in the names of its persistent-matmul one). The last
    group is shorter when num_pid_m is not a multiple of GROUP_SIZE_M.
    """
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_in_group = pid % num_pid_in_group
    pid_m = first_pid_m + pid_in_group % group_size_m
    pid_n = pid_in_group // group_size_m
    return pid_m, pid_n
