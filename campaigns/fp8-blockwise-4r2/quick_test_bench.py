"""Quick validation harness: the authoritative per-shape gate of a campaign (gitcampaign's docs/harness.md).

`git campaign prepare` copies this file into `campaigns/NAME/quick_test_bench.py` with the two
placeholder lines below filled in, commits it and protects it; BASELINE and every VALIDATE run it as

    python campaigns/NAME/quick_test_bench.py --summary-csv ROUND/benchmark.csv --shapes-file SHAPES.yaml

It is self-contained on purpose (no `gitcampaign` import): the committed copy must measure the same
way in every worktree, whatever version of the tool is installed. It imports the kernels of ITS OWN
repository root (two levels up), so a run from a round's worktree measures that round's kernels.

What a number means here, and why it is hard to fool:
- the GPU is timed as a training step runs it: calls back to back, after a pre-roll that brings the
  SM clock to where the power limit holds it (an isolated call on an idle GPU runs at boost clock,
  10-25% faster on the H200); SM clock, power and temperature of each timed window are recorded
  (NVML) in the log and in `*.clocks.json` beside the CSV, with a warning when the clock moved;
- every timed call gets fresh random inputs, prepared outside the timed region and used once, so
  caches keyed on tensor identity or address miss as they would in training: views at new addresses
  (new contents) into banks of random values drawn once per shape, several times larger than L2, so
  no call finds its inputs in L2 and no random draw runs between the calls (Bank says why); L2 is
  cleared before every timed call as triton's `do_bench` clears it (a 256 MB write);
- CUDA events around the op only, the host's launch kept outside them; compilation and autotuning
  happen in an untimed warm-up; gradients are never accumulated (each timed backward is
  `torch.autograd.grad` on its own fresh forward, run when its set was prepared);
- metric per repeat, median over repeats, population stddev of the per-repeat metric in `*_stddev`;
- after timing, correctness runs on fresh inputs (new contents in the storage the timed calls read,
  so a cache keyed on the storage answers wrongly): outputs are poisoned with NaN before each checked
  call, inputs must come back bit for bit unchanged, two runs on the same inputs must agree bit for
  bit, a third run with the activation's values changed behind the same identity (object, address,
  `_version`) must give a new result, and SNR is measured in float64 against a float64 reference;
- the work measured is the harness's own: the shapes come from the shape file; the MoE routing of
  grouped GEMMs (`make_group_sizes`, checked after every shape for having been rebound or rewritten
  by the kernels) and the quantisation reference live in this file;
- calls the timed loop made are checked too: three drawn at random after the fact, on their own
  inputs, so an op that behaves only under the checks above (it can see deterministic mode, the
  poisoned allocator, a second run) or replays a graph without its inputs is wrong there;
- outputs must be exactly `torch.Tensor` (no subclass, no torch function or dispatch mode left on),
  and no reference exists before the candidate has returned (an op cannot find and return it);
- the timers must still be the originals, torch, `torch.Tensor` and this harness must still be what
  they were before the kernels were imported, and a figure above the GPU's datasheet peak is a FAIL.

Exit codes: 0 every shape PASS, 1 some shape FAIL/ERROR, 2 no GPU for a GPU-only op, 3 usage error.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import importlib
import itertools
import json
import math
import os
import random
import re
import statistics
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, astuple, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, Protocol

LOADED = time.perf_counter()  # the process's time before this is Python's own start-up
RUNS = itertools.count()  # main() calls so far: gitcampaign.crosscheck makes several in one process

OP = "gemm_fp8_blockwise"
BACKEND = "triton"

# The CSV schema, byte for byte; gitcampaign reads these (and the SNR thresholds, the Shape record
# and the distributions) from this file, so the contract is written once.
GEMM_HEADER = (
    "label,B,M,N,K,Check,Forward TFLOPS,Forward TFLOPS_stddev,Backward TFLOPS,"
    "Backward TFLOPS_stddev,Forward Time (ms),Backward Time (ms),out_snr,da_snr,db_snr"
)
QUANT_HEADER = "label,M,K,Check,Forward GB/s,Forward GB/s_stddev,Forward Time (ms),mismatch_frac"

PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"
CLOCK_LOG_SUFFIX = ".clocks.json"  # beside --summary-csv: SM clock, power, temperature per timed window
EXIT_OK, EXIT_FAILED, EXIT_NO_GPU, EXIT_USAGE = 0, 1, 2, 3

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("triton", "torch")
# MoE token distributions over the experts of one rank (skewed loads are representative: gitcampaign's docs/design.md).
# The routing is the judge's, not the kernel's: a round may edit kernels/ but not what it is measured on.
DISTRIBUTIONS = ("uniform", "top2_cf1.0", "top1_cf1.25", "hot_half", "empty_one")
SKEWED_DISTRIBUTIONS = ("top2_cf1.0", "top1_cf1.25", "hot_half", "empty_one")
SHAPE_FIELDS = ("label", "B", "M", "N", "K", "dist", "min_snr_db")
# Back-to-back timing (Clock.back_to_back says why each is there).
POOL_L2_MULTIPLE = 4  # bytes read between two uses of an input byte, in L2 sizes
POOL_MAX_SETS = 1024  # tiny shapes: enough sets, bounded host time to make them
FLUSH_BYTES = 256 * 1024 * 1024  # written before every timed call, as do_bench clears L2
BANK_ALIGN_BYTES = 512  # an input view starts where the caching allocator would place a tensor
BANK_PASSES = 1024  # passes over a bank, each one alignment further along, before it is drawn anew
# Under its power limit the H200 hunts: the SM clock swings 10-20% within a few hundred ms (seen with
# NVML, 2026-11-29). Fixed counts of 100 calls (0.03-0.35 s windows, no settling) left 1-2% between
# processes. With the host at most QUEUE_AHEAD_S ahead, a window lasts on the GPU what it was sized
# for (before, the launch queue stretched a 0.5 s window to 1-2 s): 0.5 s windows then spread more
# than 1 s ones, and 1 s windows after 0.5 s of pre-roll spread no more than the stretched windows
# did (bf16 GEMM, 8B gate_up and down, five processes each, 2026-11-30: step CV 0.27-0.73% for 0.5 s,
# 0.04-0.31% for 1 s, 0.21-0.50% stretched), in 15.5 s a process against 19 s stretched.
PREROLL_CHUNK_S = 0.25  # the clock is read after each chunk of pre-roll calls
PREROLL_MIN_S, PREROLL_MAX_S = 0.5, 4.0
SETTLED_CLOCK = 0.03  # two successive chunks' median SM clocks this close: settled
TIMED_MIN_S = 1.0  # a timed window lasts at least this long: more calls per repeat when calls are short
MAX_TIMED_CALLS = 20_000
CLOCK_MOVED_WARN = 0.03  # warn when the SM clock drifts more than this within a timed window
MONITOR_PERIOD_S = 0.01  # NVML sampling period
LAUNCH_PROBES = 3  # calls timed with the GPU idle to size the launch cover
MIN_COVER_S, MAX_COVER_S = 20e-6, 5e-3  # spin length bounds when the host does not keep ahead
# The host keeps at most this much GPU time queued (Cover.launched): enough to hide any launch, far
# less than the launch queue's own depth (100-170 calls, ~1.5 s of an 8B gate_up backward), by which
# a pre-roll settled in the host's time ran on for as long again on the GPU, and a 0.5 s window sized
# from the host's pace came out 2-4 times longer.
QUEUE_AHEAD_S = 0.02
SPIN_CYCLES_PER_S = 2.0e9  # torch.cuda._sleep counts SM cycles; at a lower clock the spin only lasts longer
SNR_CHUNK = 1 << 26  # elements per float64 chunk of the SNR sums (512 MB)
SNR_THRESHOLDS_DB = {"float8_e4m3fn": 25.0, "float8_e5m2": 20.0, "bfloat16": 40.0, "float16": 40.0}

# Dense datasheet peaks (TFLOP/s for bf16/fp16 and fp8 tensor cores, GB/s of HBM), matched on
# torch.cuda.get_device_name(); the first entry whose words all occur in the name wins.
PEAKS: tuple[tuple[tuple[str, ...], dict[str, float]], ...] = (
    (("H200",), {"bf16": 989.0, "fp8": 1979.0, "hbm": 4800.0}),
    (("H100", "PCIe"), {"bf16": 756.0, "fp8": 1513.0, "hbm": 2000.0}),
    (("H100",), {"bf16": 989.0, "fp8": 1979.0, "hbm": 3350.0}),
)


class UsageError(Exception):
    """A bad command line, shape file or placeholder: exit 3 with the message."""


# ---------------------------------------------------------------------------------------------
# Shapes and CSV records
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """One entry of the shape file. For GEMM-class ops M is the total row count (summed over groups)."""

    label: str
    M: int
    K: int
    N: int | None = None
    B: int | None = None
    dist: str | None = None
    min_snr_db: float | None = None

    def work(self) -> int:
        """A size proxy for ordering shapes: multiply-adds for GEMMs, elements for element-wise ops."""
        return self.M * self.K * (self.N or 1)

    def to_dict(self) -> dict[str, object]:
        """The shape-file mapping, keys in CSV column order."""
        fields = asdict(self)
        return {key: fields[key] for key in SHAPE_FIELDS if fields[key] is not None}


@dataclass
class GemmRow:
    """One GEMM-class CSV row; field order is GEMM_HEADER's column order."""

    label: str
    B: int
    M: int
    N: int
    K: int
    check: str
    forward_tflops: float = math.nan
    forward_tflops_stddev: float = math.nan
    backward_tflops: float = math.nan
    backward_tflops_stddev: float = math.nan
    forward_ms: float = math.nan
    backward_ms: float = math.nan
    out_snr: float = math.nan
    da_snr: float = math.nan
    db_snr: float = math.nan


@dataclass
class QuantRow:
    """One quantisation CSV row; field order is QUANT_HEADER's column order."""

    label: str
    M: int
    K: int
    check: str
    forward_gbs: float = math.nan
    forward_gbs_stddev: float = math.nan
    forward_ms: float = math.nan
    mismatch_frac: float = math.nan


def format_cell(value: object) -> str:
    """Six significant digits keep sub-percent differences visible; NaN/inf as `nan`/`inf`."""
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def csv_line(row: GemmRow | QuantRow) -> str:
    return ",".join(format_cell(value) for value in astuple(row)) + "\n"


def parse_shapes(data: object, source: str, grouped: bool, quant: bool) -> list[Shape]:
    """Validate the YAML shape list for this op; every error names the entry and the field."""
    required = ("label", "M", "K") if quant else ("label", "M", "N", "K") + (("B", "dist") if grouped else ())
    shapes = shape_records(data, source, required, minimum=0, needed_by=f", which {OP} needs")
    for index, shape in enumerate(shapes):
        where = f"{source}: shape #{index + 1}"
        if grouped and (shape.B or 0) < 1:
            raise UsageError(f"{where}: B (the number of groups) must be at least 1")
        if shape.min_snr_db is not None:
            if quant:
                raise UsageError(f"{where}: min_snr_db does not apply to {OP}, which is checked bit for bit")
            if shape.min_snr_db < min(SNR_THRESHOLDS_DB.values()):
                raise UsageError(f"{where}: min_snr_db may only tighten the default thresholds")
    return shapes


def shape_records(
    data: object, source: str, required: tuple[str, ...], minimum: int, needed_by: str = ""
) -> list[Shape]:
    """The shape list as records, checked as every reader of a shape file checks it (this harness
    with its op's `required` fields, and gitcampaign for any op): a list of mappings of known
    fields, integer sizes of at least `minimum`, a known `dist`, a label a CSV cell can carry, a
    numeric min_snr_db, and no label twice. UsageError names the entry and the field."""
    if not isinstance(data, list) or not data:
        raise UsageError(f"{source}: expected a non-empty YAML list of shapes")
    shapes: list[Shape] = []
    for index, entry in enumerate(data):
        where = f"{source}: shape #{index + 1}"
        if not isinstance(entry, dict):
            raise UsageError(f"{where} is not a mapping")
        unknown = sorted(set(entry) - set(SHAPE_FIELDS))
        if unknown:
            raise UsageError(f"{where} has unknown fields {unknown}; allowed: {', '.join(SHAPE_FIELDS)}")
        for name in required:
            if entry.get(name) is None:
                raise UsageError(f"{where} has no {name!r}{needed_by}")
        for name in ("M", "N", "K", "B"):
            value = entry.get(name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < minimum
            ):
                kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"
                raise UsageError(f"{where}: {name} = {value!r} is not a {kind} integer")
        if entry.get("dist") is not None and entry["dist"] not in DISTRIBUTIONS:
            raise UsageError(f"{where}: dist {entry['dist']!r} is not one of {', '.join(DISTRIBUTIONS)}")
        label = str(entry["label"])
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", label):
            raise UsageError(f"{where}: label {label!r} has characters a CSV cell cannot carry")
        min_snr = entry.get("min_snr_db")
        if min_snr is not None and (
            not isinstance(min_snr, (int, float)) or isinstance(min_snr, bool) or not math.isfinite(min_snr)
        ):
            raise UsageError(f"{where}: min_snr_db = {min_snr!r} is not a number")
        shapes.append(
            Shape(label, entry["M"], entry["K"], entry.get("N"), entry.get("B"), entry.get("dist"), min_snr)
        )
    labels = [shape.label for shape in shapes]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise UsageError(f"{source}: duplicate labels {duplicated}")
    return shapes


# ---------------------------------------------------------------------------------------------
# MoE routing: how many rows each expert gets (owned here so that no round can change it)
# ---------------------------------------------------------------------------------------------

# Spread of the router's logits for the capacity-factor distributions: softmax(0.5 * N(0, 1)) gives a
# busiest expert ~1.5-2.5x the mean load for 8-32 experts, like a router trained with a balance loss.
ROUTER_LOGIT_STD = 0.5


def round_to_total(shares: Any, total: int) -> Any:
    """Integer counts proportional to non-negative `shares` that sum exactly to `total`
    (largest-remainder rounding)."""
    import torch

    exact = shares / shares.sum() * total
    counts = exact.floor()
    short = total - int(counts.sum())
    counts[torch.argsort(exact - counts, descending=True)[:short]] += 1
    return counts.to(torch.int64)


def random_shares(count: int, generator: Any) -> Any:
    """Random positive weights for `count` experts (a lognormal spread, never a zero weight)."""
    import torch

    logits = torch.randn(count, generator=generator, dtype=torch.float64)
    return torch.softmax(logits * ROUTER_LOGIT_STD, dim=0)


def capacity_limited(shares: Any, total: int, capacity_factor: float) -> Any:
    """Rows per expert after a capacity-limited router drops overflow tokens.

    Routing R rows with routed shares p gives expert e min(p_e R, C) rows, capacity C =
    capacity_factor * R / G. The GEMM sees only kept rows and the caller fixes their number, so R is
    solved from Σ min(p_e R, C) = total: R = total / Σ min(p_e, cf / G). Busy experts therefore sit
    at capacity and the rest keep their routed share. top_k only changes how many tokens make the R
    rows, not this expected per-expert share, so it does not appear here.
    """
    import torch

    groups = shares.shape[0]
    kept = torch.minimum(shares, torch.full_like(shares, capacity_factor / groups))
    return round_to_total(kept, total)


def make_group_sizes(dist: str, total: int, groups: int, generator: Any = None, device: Any = "cpu") -> Any:
    """G int64 row counts summing exactly to `total`, for one of DISTRIBUTIONS.

    uniform      as equal as possible (the first total % G experts get one row more)
    top2_cf1.0   routed shares softmax(0.5 * N(0, 1)), capped at capacity factor 1.0 (`capacity_limited`)
    top1_cf1.25  the same with capacity factor 1.25
    hot_half     one random expert holds ceil(total / 2) rows, the others split the rest at random
    empty_one    one random expert holds 0 rows, the others split all rows at random
    Randomness comes from `generator` (a CPU generator), so each timed call gets a fresh routing.
    """
    import torch

    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; use one of {', '.join(DISTRIBUTIONS)}")
    if groups < 1 or total < 0:
        raise ValueError(f"need groups >= 1 and total >= 0, got groups={groups}, total={total}")
    if dist == "empty_one" and groups < 2 and total > 0:
        raise ValueError("empty_one needs at least 2 groups: one stays empty, another takes the rows")
    if dist == "uniform":
        sizes = torch.full((groups,), total // groups, dtype=torch.int64)
        sizes[: total % groups] += 1
    elif dist in ("top2_cf1.0", "top1_cf1.25"):
        capacity_factor = 1.0 if dist == "top2_cf1.0" else 1.25
        sizes = capacity_limited(random_shares(groups, generator), total, capacity_factor)
    else:
        chosen = int(torch.randint(groups, (1,), generator=generator))
        others = [g for g in range(groups) if g != chosen]
        chosen_rows = (total + 1) // 2 if dist == "hot_half" else 0
        sizes = torch.zeros(groups, dtype=torch.int64)
        sizes[chosen] = chosen_rows
        if others:
            sizes[others] = round_to_total(random_shares(len(others), generator), total - chosen_rows)
        else:
            sizes[chosen] = total
    return sizes.to(device)


# The kernels run in this process and could rebind or rewrite the routing; what it was before they
# were imported is kept here and compared after every shape (`routing_replaced`).
_ROUTING_ORIGINALS = {
    function.__name__: (function, function.__code__)
    for function in (round_to_total, random_shares, capacity_limited, make_group_sizes)
}
_ROUTING_CONSTANTS = (DISTRIBUTIONS, ROUTER_LOGIT_STD)


def routing_replaced() -> list[str]:
    """The routing functions or constants that are no longer what this module defined."""
    current = globals()
    replaced = [
        name
        for name, (function, code) in _ROUTING_ORIGINALS.items()
        if current[name] is not function or function.__code__ is not code
    ]
    if (current["DISTRIBUTIONS"], current["ROUTER_LOGIT_STD"]) != _ROUTING_CONSTANTS:
        replaced.append("DISTRIBUTIONS/ROUTER_LOGIT_STD")
    return replaced


# ---------------------------------------------------------------------------------------------
# Ops: inputs, reference, candidate provider, work, correctness thresholds
# ---------------------------------------------------------------------------------------------

SAMPLED_CALLS = 3  # timed calls checked per shape, drawn at random from all of them


class CallSampler:
    """Keeps SAMPLED_CALLS providers drawn uniformly from all called for one shape (reservoir
    sampling, seeded from the OS's entropy). A draw is a few hundred nanoseconds of host time after
    the op returned, while the GPU still runs it (the timed loop keeps the host ahead)."""

    def __init__(self) -> None:
        self.made = 0
        self.kept: list[Provider] = []
        self.random = random.Random(os.urandom(16))

    def offer(self, provider: Provider) -> None:
        self.made += 1
        if len(self.kept) < SAMPLED_CALLS:
            self.kept.append(provider)
        else:
            slot = self.random.randrange(self.made)
            if slot < SAMPLED_CALLS:
                self.kept[slot] = provider

    def take(self) -> list[Provider]:
        """The sample so far; sampling starts afresh (a shape starts with `take()` too, so the
        previous shape's checked calls never count as this shape's timed ones)."""
        kept, self.kept, self.made = self.kept, [], 0
        return kept


class Provider:
    """One call of the candidate on one set of inputs. Warm-up, timed loop and checks all reach the
    op through this one frame, so the op cannot tell them apart by its caller, and a sample of the
    calls keeps inputs and result, so the checks can look at calls that were timed
    (`timed_call_reasons`)."""

    __slots__ = ("call", "inputs", "result", "sampler")

    def __init__(self, call: Callable[[], Any], inputs: Any, sampler: CallSampler) -> None:
        self.call, self.inputs, self.sampler = call, inputs, sampler
        self.result: Any = None

    def __call__(self) -> Any:
        self.result = self.call()
        self.sampler.offer(self)
        return self.result


@dataclass
class GemmInputs:
    """a: M×K, b: N×K (dense) or G×N×K (grouped), both leaves requiring grad; group_sizes: G int64."""

    a: Any
    b: Any
    group_sizes: Any = None

    def tensors(self) -> list[Any]:
        return [t for t in (self.a, self.b, self.group_sizes) if t is not None]


@dataclass
class QuantInputs:
    x: Any

    def tensors(self) -> list[Any]:
        return [self.x]


def sets_apart(l2_bytes: int, set_bytes: int) -> int:
    """How many sets of `set_bytes` go round before one is used again, so that POOL_L2_MULTIPLE x L2
    is read in between (at least 2; tiny sets: POOL_MAX_SETS)."""
    return min(POOL_MAX_SETS, max(2, math.ceil(POOL_L2_MULTIPLE * l2_bytes / max(set_bytes, 1)) + 1))


def normal(size: tuple[int, ...], generator: Any, device: Any, dtype: Any) -> Any:
    """Standard normal values, drawn in the target dtype (one write per element)."""
    import torch

    return torch.randn(*size, generator=generator, device=device, dtype=dtype)


def binades(size: tuple[int, ...], generator: Any, device: Any, dtype: Any) -> Any:
    """Normal values scaled per row by a power of two from 2^-6 to 2^6, so that a quantiser's codes
    and scales both get exercised."""
    import torch

    x = torch.randn(*size, generator=generator, device=device)
    scale = torch.exp2(torch.randint(-6, 7, (*size[:-1], 1), generator=generator, device=device).float())
    return (x * scale).to(dtype)


Fill = Callable[[tuple[int, ...], Any, Any, Any], Any]


class Bank:
    """The timed calls' inputs, without a draw per call. Drawing a set of random inputs costs the
    GPU more than copying it (2.9 ms for a Mixtral layer's 1.9 GB of expert weights, H200, more than
    the 2.5 ms call), and draws between back-to-back calls lower their duty cycle: the GEMMs then
    ran ~15% above the clock of calls back to back without draws, and read 8-11% fast
    (2026-11-30). So the values of each input (one bank per size, dtype and distribution) are
    drawn once, and every tensor taken is a view into them:
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
        passes = min(BANK_PASSES, stride // align)  # pass p's starts are p x align modulo the stride
        key = (size, dtype, fill)
        if key not in self.banks:
            sets = sets_apart(self.l2_bytes, stride * itemsize)
            self.banks[key] = [
                self._draw(size, sets * stride + passes * align, dtype, fill),
                0,
                0,
            ]
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
        rows = -(-numel // size[-1])
        return fill((rows, size[-1]), self.generator, self.device, dtype).view(-1)


def take(
    bank: Bank | None, size: tuple[int, ...], generator: Any, device: Any, dtype: Any, fill: Fill = normal
) -> Any:
    """A view from `bank`, or with none a tensor drawn now (what full_bench and crosscheck use)."""
    return fill(size, generator, device, dtype) if bank is None else bank.take(size, dtype, fill)


class Op(Protocol):
    """What the harness asks of an op: inputs drawn from a shape, the candidate as a zero-argument
    provider, and the reference outputs computed by the harness itself, in one signature for every
    op (`grad_out` is the upstream gradient of ops with a backward, None for the others)."""

    name: str
    module: str
    env_var: str
    cuda_only_backends: tuple[str, ...]
    peak_key: str
    grouped: bool
    sampler: CallSampler

    def inputs(
        self, shape: Shape, generator: Any, device: Any, dtype: Any, bank: Bank | None = None
    ) -> Any: ...

    def provider(self, kernels: ModuleType, inputs: Any) -> Provider: ...

    def reference(self, inputs: Any, grad_out: Any = None) -> tuple[Any, ...]: ...


@dataclass
class GemmOp:
    """`out = a @ b.T` and its backward (dA = g @ b, dB = gᵀ @ a), dense or grouped, bf16 or fp8."""

    name: str
    module: str
    env_var: str
    call: Callable[[ModuleType, GemmInputs], Any]
    granularity: str | None = None  # fp8 scaling; None for bf16/fp16
    grouped: bool = False
    cuda_only_backends: tuple[str, ...] = ()
    peak_key: str = "bf16"
    quant = False
    _routing_draws: int = field(default=0, init=False, repr=False)  # seeds of successive routings
    sampler: CallSampler = field(default_factory=CallSampler, repr=False, compare=False)

    def inputs(
        self, shape: Shape, generator: Any, device: Any, dtype: Any, bank: Bank | None = None
    ) -> GemmInputs:
        """Drawn from `generator`, or taken from `bank` (the timed calls': Bank says why)."""
        import torch

        assert shape.N is not None
        a = take(bank, (shape.M, shape.K), generator, device, dtype)
        if not self.grouped:
            b = take(bank, (shape.N, shape.K), generator, device, dtype)
            return GemmInputs(a.requires_grad_(), b.requires_grad_())
        assert shape.B is not None and shape.dist is not None
        # The harness's own routing (never the kernel module's), drawn on the CPU with a CPU
        # generator seeded on the host (reading a draw back from the device would stall the GPU each
        # time a set is prepared).
        self._routing_draws += 1
        routing = torch.Generator().manual_seed(generator.initial_seed() * 1_000_003 + self._routing_draws)
        sizes = make_group_sizes(shape.dist, shape.M, shape.B, generator=routing)
        if sizes.device != torch.device(device):
            # Pinned and non-blocking: a pageable copy would make the host wait for the stream
            # between back-to-back timed calls, and the GPU would idle before each one.
            sizes = sizes.pin_memory().to(device, non_blocking=True)
        b = take(bank, (shape.B, shape.N, shape.K), generator, device, dtype)
        return GemmInputs(a.requires_grad_(), b.requires_grad_(), sizes)

    def grad_out(
        self, shape: Shape, generator: Any, device: Any, dtype: Any, bank: Bank | None = None
    ) -> Any:
        assert shape.N is not None
        return take(bank, (shape.M, shape.N), generator, device, dtype)

    def provider(self, kernels: ModuleType, inputs: GemmInputs) -> Provider:
        """The candidate as a zero-argument callable, so that nothing but the op is ever timed."""
        return Provider(functools.partial(self.call, kernels, inputs), inputs, self.sampler)

    def reference(self, inputs: GemmInputs, grad_out: Any = None) -> tuple[Any, Any, Any]:
        """out, dA, dB in float64 from the same (unquantised) inputs and `grad_out`."""
        import torch

        a, b, g = inputs.a.detach().double(), inputs.b.detach().double(), grad_out.double()
        if not self.grouped:
            return a @ b.T, g @ b, g.T @ a
        out, da, db = torch.empty_like(g), torch.empty_like(a), torch.zeros_like(b)
        start = 0
        for group, size in enumerate(inputs.group_sizes.tolist()):
            rows = slice(start, start + size)
            out[rows] = a[rows] @ b[group].T
            da[rows] = g[rows] @ b[group]
            db[group] = g[rows].T @ a[rows]
            start += size
        return out, da, db

    def flops(self, shape: Shape) -> tuple[float, float]:
        """Forward 2MNK, backward 4MNK (dA + dB); M sums over groups, so this holds for grouped too."""
        assert shape.N is not None
        work = float(shape.M) * shape.N * shape.K
        return 2.0 * work, 4.0 * work

    def thresholds(self, kernels: ModuleType, dtype: Any, shape: Shape) -> dict[str, float]:
        """Minimum SNR per metric: the precision's default, tightened by the shape's min_snr_db."""
        if self.granularity is None:
            base = SNR_THRESHOLDS_DB[str(dtype).removeprefix("torch.")]
            defaults = {"out_snr": base, "da_snr": base, "db_snr": base}
        else:
            grad = SNR_THRESHOLDS_DB[str(kernels.GRAD_FP8_DTYPE[self.granularity]).removeprefix("torch.")]
            defaults = {"out_snr": SNR_THRESHOLDS_DB["float8_e4m3fn"], "da_snr": grad, "db_snr": grad}
        floor = shape.min_snr_db if shape.min_snr_db is not None else -math.inf
        return {metric: max(value, floor) for metric, value in defaults.items()}


@dataclass
class QuantOp:
    """x (M×K) → fp8 e4m3 codes + fp32 scales, checked bit for bit against the torch reference."""

    name: str
    granularity: str
    module: str = "kernels.quant"
    env_var: str = "KERNELS_QUANT_BACKEND"
    cuda_only_backends: tuple[str, ...] = ()
    peak_key: str = "hbm"
    quant = True
    grouped = False
    sampler: CallSampler = field(default_factory=CallSampler, repr=False, compare=False)

    def inputs(
        self, shape: Shape, generator: Any, device: Any, dtype: Any, bank: Bank | None = None
    ) -> QuantInputs:
        return QuantInputs(take(bank, (shape.M, shape.K), generator, device, dtype, binades))

    def provider(self, kernels: ModuleType, inputs: QuantInputs) -> Provider:
        call = functools.partial(kernels.quantize_fp8, inputs.x, granularity=self.granularity)
        return Provider(call, inputs, self.sampler)

    def reference(self, inputs: QuantInputs, grad_out: Any = None) -> tuple[Any, Any]:
        """The harness's own copy of the quantisation rule, not the kernel module's: a round may
        edit kernels/quant.py freely, but not the reference it is judged against (no backward:
        `grad_out` is unused)."""
        return quantize_reference(inputs.x, self.granularity)

    def bytes_moved(self, shape: Shape, element_size: int, scale_count: int) -> float:
        """x read + fp8 codes written + fp32 scales written."""
        return float(shape.M) * shape.K * (element_size + 1) + 4.0 * scale_count


QUANT_BLOCK = 128  # 1x128 blocks along K (DeepSeek-V3 activations)
E4M3_MAX = 448.0
SCALE_EPS = 1e-12  # an all-zero row or block gets scale SCALE_EPS / 448 and codes 0


def quantize_reference(x: Any, granularity: str) -> tuple[Any, Any]:
    """fp8 e4m3 codes and fp32 scales: scale = max(amax, eps) / 448, codes = clamp(x * (1 / scale)),
    round to nearest even. Tensor-by-tensor IEEE divisions (on CUDA, `tensor / python_scalar` becomes
    a multiply by the reciprocal, which a kernel's division does not match bit for bit)."""
    import torch

    x32 = x.to(torch.float32)
    rows, cols = x32.shape
    if granularity == "tensorwise":
        amax = x32.abs().amax().reshape(1, 1)
    elif granularity == "rowwise":
        amax = x32.abs().amax(dim=1, keepdim=True)
    else:
        blocks = -(-cols // QUANT_BLOCK)
        padded = torch.nn.functional.pad(x32.abs(), (0, blocks * QUANT_BLOCK - cols))
        amax = padded.reshape(rows, blocks, QUANT_BLOCK).amax(dim=2)
    amax = amax.clamp_min(SCALE_EPS)
    scales = amax / torch.full_like(amax, E4M3_MAX)
    inverse = torch.ones_like(scales) / scales
    expanded = (
        inverse if granularity != "blockwise" else inverse.repeat_interleave(QUANT_BLOCK, dim=1)[:, :cols]
    )
    codes = (x32 * expanded).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).contiguous()
    return codes, scales


def _fp8_call(granularity: str) -> Callable[[ModuleType, GemmInputs], Any]:
    return lambda kernels, inputs: kernels.gemm_fp8(inputs.a, inputs.b, granularity)


def _fp8_op(granularity: str) -> GemmOp:
    # torch's fp8 reference is torch._scaled_mm, which only runs on CUDA.
    return GemmOp(
        f"gemm_fp8_{granularity}",
        "kernels.gemm_fp8",
        "KERNELS_GEMM_BACKEND",
        _fp8_call(granularity),
        granularity=granularity,
        cuda_only_backends=("torch",),
        peak_key="fp8",
    )


_OPS_FOLLOW_THE_PROTOCOL: tuple[type[Op], ...] = (GemmOp, QuantOp)  # checked by mypy, costs nothing
OPS: dict[str, GemmOp | QuantOp] = {
    "gemm": GemmOp("gemm", "kernels.gemm", "KERNELS_GEMM_BACKEND", lambda k, i: k.gemm(i.a, i.b)),
    **{f"gemm_fp8_{g}": _fp8_op(g) for g in ("tensorwise", "rowwise", "blockwise")},
    "grouped_gemm": GemmOp(
        "grouped_gemm",
        "kernels.grouped_gemm",
        "KERNELS_GROUPED_GEMM_BACKEND",
        lambda k, i: k.grouped_gemm(i.a, i.b, i.group_sizes),
        grouped=True,
    ),
    "quantize_fp8_tensorwise": QuantOp("quantize_fp8_tensorwise", "tensorwise"),
    "quantize_fp8_rowwise": QuantOp("quantize_fp8_rowwise", "rowwise"),
    "quantize_fp8_blockwise": QuantOp("quantize_fp8_blockwise", "blockwise"),
}


# ---------------------------------------------------------------------------------------------
# Correctness: SNR, bit-level comparison, poisoning
# ---------------------------------------------------------------------------------------------


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


@dataclass
class Failures:
    """What the checks found for one shape; `reasons` empty means PASS."""

    reasons: list[str] = field(default_factory=list)


def checked_call(
    label: str,
    call: Callable[[], Any],
    inputs: list[Any],
    out_bytes: list[int],
    device: Any,
    failures: Failures,
) -> Any:
    """Run `call` twice on the same inputs with poisoned outputs; flag mutation and nondeterminism."""
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
    pairs = list(zip(first, second, strict=True)) if isinstance(first, tuple) else [(first, second)]
    if not all(bits_equal(x, y) for x, y in pairs):
        failures.reasons.append(
            f"{label}: two runs on the same inputs differ (nondeterministic or uninitialised)"
        )
    if answers_from_identity(call, inputs, first, out_bytes, device):
        failures.reasons.append(
            f"{label}: new values in the same input tensors got the old result "
            "(a cache keyed on id(), data_ptr() or _version of an input)"
        )
    return first


def answers_from_identity(
    call: Callable[[], Any], inputs: list[Any], first: Any, out_bytes: list[int], device: Any
) -> bool:
    """True when the op returns its earlier result after the activation's values changed in place
    while its identity did not: same object, address, shape and `_version` (writes through `.data`
    bump no version counter). That is what a cache keyed on tensor identity sees in training, where
    each step's fresh activation may reuse a freed address or object id; timing alone cannot be
    relied on to expose it, since whether the allocator reuses an address varies by device and size.
    Only the first floating-point input (the activation) changes: a weight cache keyed on
    (id(weight), weight._version) stays valid, as it does in training."""
    import torch

    activation = next((t for t in inputs if t.is_floating_point() and t.numel()), None)
    outputs = list(first) if isinstance(first, tuple) else [first]
    if activation is None or not any(bool((out.detach() != 0).any()) for out in outputs if out.numel()):
        return False  # nothing to change, or an all-zero output that negated inputs would keep
    with torch.no_grad():
        activation.data.neg_()  # exact, and undone exactly below
    try:
        with poisoned_outputs(out_bytes, device):
            again = call()
        synchronize(device)
    finally:
        with torch.no_grad():
            activation.data.neg_()
    repeated = list(again) if isinstance(again, tuple) else [again]
    return all(bits_equal(x, y) for x, y in zip(outputs, repeated, strict=True))


# ---------------------------------------------------------------------------------------------
# Run-time anti-cheat checks: what the op returned, on which call, in which harness
# ---------------------------------------------------------------------------------------------


def plain_tensor_reasons(label: str, result: Any) -> list[str]:
    """The op must return plain torch.Tensors: a subclass (or a `__torch_function__` wrapper) can
    compute lazily when the checks read it, or answer the checks differently from training."""
    import torch

    reasons = []
    outputs = result if isinstance(result, tuple | list) else (result,)
    for index, output in enumerate(outputs):
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


def timed_call_reasons(run: Run, shape: Shape) -> list[str]:
    """Check calls the timed loop made, on their own fresh inputs, with the reference computed only
    now. The checked path (poisoned outputs, deterministic mode, a second run) is visible to an op
    that looks for it; these calls are not, so an op that behaves only when checked, a CUDA graph
    replayed without its inputs or a cache that skips work is wrong here."""
    import torch

    op = run.op
    reasons: list[str] = []
    for provider in op.sampler.take():
        label = "timed call"
        reasons += plain_tensor_reasons(label, provider.result)
        if reasons:
            break
        if isinstance(op, GemmOp):
            out_ref = op.reference(provider.inputs, torch.zeros_like(provider.result))[0]
            snr = snr_db(out_ref, provider.result)
            del out_ref
            threshold = op.thresholds(run.kernels, run.dtype, shape)["out_snr"]
            if not snr >= threshold:  # NaN fails
                reasons.append(f"{label}: out_snr = {snr:.4g} dB on its own inputs (below {threshold:g})")
        else:
            reference = op.reference(provider.inputs)
            if run.device.type == "cuda":
                if mismatch_fraction(provider.result, reference) != 0.0:
                    reasons.append(
                        f"{label}: output differs bit for bit from the reference on its own inputs"
                    )
            else:
                reasons += [f"{label}: {r}" for r in interpreter_quant_reasons(provider.result, reference)]
            del reference
        if reasons:
            break
    return reasons


class Seal:
    """The identity of every attribute of what the harness's numbers rest on, taken before the
    kernels are imported: torch (and `torch.Tensor`, whose `@` the reference uses), the clocks, and
    this harness's own functions, classes and the objects it measures with (the clock, the op).
    An op that rebinds any of them, by whatever route (`__dict__`, an alias, `setattr` with a
    computed name, an instance attribute shadowing a method), shows up in `broken()`."""

    def __init__(self, device: Any, *objects: Any) -> None:
        self.device = device
        self.objects = {f"harness.{type(obj).__name__}()": obj for obj in objects if hasattr(obj, "__dict__")}
        self.snapshot = {label: dict(vars(space)) for label, space in self._namespaces().items()}

    def _namespaces(self) -> dict[str, Any]:
        import torch

        harness = sys.modules[__name__]
        spaces: dict[str, Any] = {
            "torch": torch,
            "torch.Tensor": torch.Tensor,
            "torch.nn.functional": torch.nn.functional,
            "torch.autograd": torch.autograd,
            "time": time,
            "harness": harness,
        }
        for name, value in vars(harness).items():
            if isinstance(value, type) and value.__module__ == __name__:
                spaces[f"harness.{name}"] = value
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


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------


class GpuMonitor:
    """SM clock, power and temperature through NVML (`nvidia-ml-py`, imported here, lazily: CPU
    installs need not have it), sampled by a background thread while a window of calls runs.
    Without NVML the harness still times; it only cannot say at what clock."""

    def __init__(self, device: Any) -> None:
        self.handle: Any = None
        self.unavailable = ""
        try:
            import pynvml
        except ImportError:
            self.unavailable = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            return
        self.nvml = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = self._handle(device)
        except pynvml.NVMLError as exc:
            self.unavailable = f"NVML failed: {exc}"

    def _handle(self, device: Any) -> Any:
        """The NVML device of this CUDA device, matched by UUID: CUDA_VISIBLE_DEVICES renumbers CUDA's
        indices but not NVML's."""
        import torch

        try:
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            return self.nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except (AttributeError, TypeError, ValueError, self.nvml.NVMLError):
            return self.nvml.nvmlDeviceGetHandleByIndex(device.index or 0)

    def sample(self) -> tuple[float, float, float]:
        """(SM clock MHz, power W, temperature C) now."""
        nvml = self.nvml
        return (
            float(nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)),
            nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0,
            float(nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU)),
        )

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[tuple[float, float, float]]]:
        """Samples every MONITOR_PERIOD_S while the block runs (and one at each end). ctypes drops the
        GIL inside NVML, so the thread does not slow the host's launches."""
        samples: list[tuple[float, float, float]] = []
        if self.handle is None:
            yield samples
            return
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(MONITOR_PERIOD_S):
                samples.append(self.sample())

        samples.append(self.sample())
        thread = threading.Thread(target=loop, daemon=True)  # campaign-lint: allow S1 -- NVML reads only
        thread.start()
        try:
            yield samples
        finally:
            stop.set()
            thread.join()
            samples.append(self.sample())


class Cover:
    """Whether the GPU has enough queued to hide the host's launch of the next call; if not, a spin
    (torch.cuda._sleep) goes before the call's start event, so the interval holds the GPU's time only.

    The queued work is counted in whole calls still running or waiting, the one at the head taken
    as almost done. Checking only whether the GPU had caught up is not enough: where launching a call
    takes the host longer than running it (fp8 ops of ~10 Triton launches, 0.3-1 ms of host time),
    the GPU finishes call i while the host is half-way through launching call i + 1, whose interval
    then holds part of the launch (8B o-projection forward, fp8 tensorwise, 2026-11-30: the median
    call read 0.26 ms in one process and 0.45-0.57 ms in others, an A/A floor of 8.4%).
    The spin lasts twice the launch measured with the GPU idle, so the host gets that far ahead and
    the calls then run in bursts; the less the host keeps up, the more often a spin comes, up to one
    a call (the same o forward: 44 of 860 timed calls).

    The host stays at most `queue_s` of calls ahead of the GPU, and never less than one whole call
    (the bound is at least twice the cover, so it never brings on a spin; 0: as far ahead as the
    launch queue lets it)."""

    def __init__(self, launch_s: float, call_s: float, queue_s: float = QUEUE_AHEAD_S) -> None:
        self.cover_s = min(max(2.0 * launch_s, MIN_COVER_S), MAX_COVER_S)
        self.cycles = int(self.cover_s * SPIN_CYCLES_PER_S)
        self.call_s = max(call_s, 1e-9)
        self.queue_s = max(queue_s, 2.0 * self.cover_s) if queue_s > 0 else math.inf
        self.pending: collections.deque[Any] = collections.deque()  # end events, in launch order
        self.covered = 0  # calls given a spin so far

    def needed(self) -> bool:
        while self.pending and self.pending[0].query():
            self.pending.popleft()
        if (len(self.pending) - 1) * self.call_s >= self.cover_s:
            return False
        self.covered += 1
        return True

    def launched(self, end: Any) -> None:
        """Count the call just launched; where more than queue_s is queued, wait for the oldest calls
        to end (never for the GPU to drain: what stays queued still hides the next launch)."""
        self.pending.append(end)
        while len(self.pending) > 2 and (len(self.pending) - 1) * self.call_s > self.queue_s:
            self.pending.popleft().synchronize()


@dataclass
class Window:
    """What the GPU did while one shape's calls were timed: how they were fed, and at what clock."""

    what: str
    calls: int
    pool_sets: int
    pool_mb: float
    preroll_s: float
    settled: bool
    samples: list[tuple[float, float, float]]
    wall_s: float = 0.0  # all of it: the pool's inputs, launch probes, pre-roll, timed calls, drain
    host_ms: float = math.nan  # the host's time to launch one call (fastest probe, GPU idle)
    gpu_ms: float = math.nan  # the GPU's time for one call (median of the timed calls)
    covered: int = 0  # timed calls given a spin first (Cover): more of them the more host-bound

    @property
    def host_bound(self) -> bool:
        """Launching a call takes the host longer than the GPU takes to run it."""
        return self.host_ms > self.gpu_ms

    def summary(self) -> dict[str, object]:
        record: dict[str, object] = {
            "what": self.what,
            "calls": self.calls,
            "pool_sets": self.pool_sets,
            "pool_mb": round(self.pool_mb, 1),
            "preroll_s": round(self.preroll_s, 3),
            "settled": self.settled,
            "samples": len(self.samples),
            "clock_moved": round(self.clock_moved, 4),
            "wall_s": round(self.wall_s, 3),
            "host_ms": round(self.host_ms, 4),
            "gpu_ms": round(self.gpu_ms, 4),
            "covered": self.covered,
        }
        for index, name in enumerate(("sm_mhz", "power_w", "temp_c")):
            values = [sample[index] for sample in self.samples]
            if values:
                record[name] = {
                    "min": min(values),
                    "median": statistics.median(values),
                    "max": max(values),
                }
        return record

    @property
    def clock_moved(self) -> float:
        """How far the SM clock drifted over the timed window: the median of its last third against
        the median of its first third, over the median of all. Not max - min: under the power limit
        the clock hunts by 10-20% within tenths of a second, which a window of a second averages out;
        a drift (heat, another process) it does not. 0 with fewer than 3 samples."""
        clocks = [sample[0] for sample in self.samples]
        if len(clocks) < 3:
            return 0.0
        third = len(clocks) // 3
        drift = statistics.median(clocks[-third:]) - statistics.median(clocks[:third])
        return abs(drift) / statistics.median(clocks)

    def describe(self) -> str:
        text = (
            f"{self.what}: {self.calls} calls back to back after {self.preroll_s:.2f} s of pre-roll"
            f"{'' if self.settled else ' (clock not settled)'}, inputs from a pool of {self.pool_sets} "
            f"sets ({self.pool_mb:.0f} MB), {self.wall_s:.2f} s in all; a call: host {self.host_ms:.3f} ms "
            f"to launch, GPU {self.gpu_ms:.3f} ms"
        )
        if self.covered:
            text += f"; {self.covered} of the timed calls after a spin that covers the launch"
        if not self.samples:
            return text + "; no clock record"
        record = self.summary()
        sm, power, temp = record["sm_mhz"], record["power_w"], record["temp_c"]
        assert isinstance(sm, dict) and isinstance(power, dict) and isinstance(temp, dict)
        return (
            f"{text}; SM {sm['median']:.0f} MHz ({sm['min']:.0f}-{sm['max']:.0f}), "
            f"{power['median']:.0f} W ({power['min']:.0f}-{power['max']:.0f}), {temp['max']:.0f} C max"
        )


class Clock:
    """CUDA events on a GPU, `time.perf_counter` on the CPU; originals captured before the kernels
    are imported, so a kernel module that replaces a timer cannot change what this clock reads."""

    def __init__(
        self,
        device: Any,
        min_preroll_s: float = PREROLL_MIN_S,
        min_window_s: float = TIMED_MIN_S,
        queue_s: float = QUEUE_AHEAD_S,
    ) -> None:
        import torch

        self.device = device
        self.min_preroll_s, self.min_window_s, self.queue_s = min_preroll_s, min_window_s, queue_s
        self.originals: dict[str, object] = {"time.perf_counter": time.perf_counter}
        self.perf_counter = time.perf_counter
        self.windows: list[Window] = []
        self.l2_bytes = 0
        if device.type == "cuda":
            import triton.testing

            self.event_class = torch.cuda.Event
            self.originals.update(
                {
                    "torch.cuda.Event": torch.cuda.Event,
                    "torch.cuda.Event.record": torch.cuda.Event.record,
                    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                    "torch.cuda.synchronize": torch.cuda.synchronize,
                    "triton.testing.do_bench": triton.testing.do_bench,
                }
            )
            self.l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0))
            self.monitor = GpuMonitor(device)

    @property
    def name(self) -> str:
        if self.device.type != "cuda":
            return "time.perf_counter"
        nvml = "NVML clock record" if self.monitor.handle is not None else self.monitor.unavailable
        return (
            "CUDA events, calls back to back at sustained clock after a pre-roll, L2 cleared before each, "
            f"fresh inputs as views into random banks larger than L2 ({nvml})"
        )

    def replaced(self) -> list[str]:
        """The timers that are no longer the objects captured at start-up."""
        import torch

        current: dict[str, object] = {"time.perf_counter": time.perf_counter}
        if self.device.type == "cuda":
            import triton.testing

            current.update(
                {
                    "torch.cuda.Event": torch.cuda.Event,
                    "torch.cuda.Event.record": torch.cuda.Event.record,
                    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                    "torch.cuda.synchronize": torch.cuda.synchronize,
                    "triton.testing.do_bench": triton.testing.do_bench,
                }
            )
        return [name for name, original in self.originals.items() if current[name] is not original]

    def time_ms(self, call: Callable[[], Any]) -> float:
        """Milliseconds of one call on the CPU (the interpreter: no clocks to settle, no L2 to mind)."""
        start = self.perf_counter()
        call()
        return (self.perf_counter() - start) * 1e3

    def back_to_back(
        self, bank: Bank, prepare: Callable[[], Callable[[], Any]], repeats: int, iters: int, what: str
    ) -> list[float]:
        """Milliseconds of repeats x n timed calls run back to back on the GPU, each on inputs of its
        own; n is `iters`, or more where that many calls would not fill `min_window_s`.

        A training step runs its kernels back to back at the clock the power limit allows, not one
        at a time on a cold GPU at boost clock (on the H200 the two differ by 10-25%). So:
        - every call on inputs of its own, taken from a Bank (views at new addresses, out of L2
          when their turn comes: Bank says why no random draw runs between the calls), through a
          FIFO pool of prepared calls deep enough that the bytes a set holds (its views, and what
          preparing it allocated: a timed backward's forward) exceed POOL_L2_MULTIPLE x L2 between
          its making and its use;
        - L2 cleared before every timed call by writing FLUSH_BYTES, as triton's `do_bench` does:
          the previous call's outputs are not left in L2, and the GPU's duty cycle is do_bench's
          (a training step, too, runs other kernels between its GEMMs). Without it the gate read
          GEMMs 1-4% slower than do_bench at a 1-4% lower SM clock, and the quantisers 5-8% faster
          (H200, 2026-11-30);
        - a pre-roll of the same calls until the SM clock settles (NVML), then at least
          `min_window_s` of timed calls, with no wait for the GPU to drain from the pre-roll's start
          to the window's end: the host runs ahead and the GPU never waits for it; the host stays
          at most `queue_s` ahead (Cover), so that the host's time tracks the GPU's;
        - where the host does not keep ahead (kernels of a few microseconds, or ops of many
          launches), a GPU spin sized from the measured launch time goes before the start event
          whenever too little is queued to hide the launch (Cover), so the host's launch stays out
          of the interval.
        """
        import torch

        device = self.device
        flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
        torch.cuda.synchronize(device)
        window_began = self.perf_counter()
        before, taken = torch.cuda.memory_allocated(device), bank.handed_out
        pool: collections.deque[Callable[[], Any]] = collections.deque([prepare()])
        set_bytes = torch.cuda.memory_allocated(device) - before + bank.handed_out - taken
        depth = sets_apart(self.l2_bytes, set_bytes)
        while len(pool) < depth:
            pool.append(prepare())

        def step(cover: Cover, start: Any, end: Any) -> None:
            call = pool.popleft()
            if cover.needed():
                torch.cuda._sleep(cover.cycles)  # too little queued to hide this launch: cover it
            flush.zero_()
            start.record()
            call()
            end.record()
            cover.launched(end)
            del call  # its outputs (and a backward's forward) are freed in stream order
            pool.append(prepare())

        # Launch time of one call as the host sees it, with the GPU idle (the worst case).
        launches, call_s = [], 0.0
        for _ in range(LAUNCH_PROBES):
            call = pool.popleft()
            start, end = self.event_class(enable_timing=True), self.event_class(enable_timing=True)
            torch.cuda.synchronize(device)
            began = self.perf_counter()
            start.record()
            call()
            end.record()
            launches.append(self.perf_counter() - began)
            del call
            pool.append(prepare())
            end.synchronize()
            call_s = max(call_s, start.elapsed_time(end) * 1e-3)
        cover = Cover(max(launches), call_s, self.queue_s)

        # The host reads the clock between chunks without waiting for the GPU to drain: once it is
        # queue_s ahead it goes at the GPU's pace, so host time measures the pre-roll, and the GPU
        # never idles between the pre-roll and the timed window. A chunk is sized from the GPU's time a
        # call, or from the host's where launching is slower (host-bound: the host sets the pace).
        preroll_began = self.perf_counter()
        per_call_s = max(call_s, max(launches), 1e-6)
        settled, previous_clock, preroll_calls = False, math.nan, 0
        while self.min_preroll_s > 0 and not settled and self.perf_counter() - preroll_began < PREROLL_MAX_S:
            chunk = max(1, math.ceil(PREROLL_CHUNK_S / per_call_s))
            chunk_began = self.perf_counter()
            with self.monitor.recording() as samples:
                preroll_calls += chunk
                for _ in range(chunk):
                    start, end = self.event_class(enable_timing=True), self.event_class(enable_timing=True)
                    step(cover, start, end)
            per_call_s = max(call_s, (self.perf_counter() - chunk_began) / chunk, 1e-6)
            long_enough = self.perf_counter() - preroll_began >= self.min_preroll_s
            if not samples:
                settled = long_enough
                continue
            clock = statistics.median(sample[0] for sample in samples)
            settled = long_enough and abs(clock - previous_clock) <= SETTLED_CLOCK * previous_clock
            previous_clock = clock
        preroll_s = self.perf_counter() - preroll_began
        # What one timed step costs, prepare included (the probes' figure when there was no pre-roll).
        sustained_call_s = preroll_s / preroll_calls if preroll_calls else call_s
        per_repeat = max(iters, math.ceil(self.min_window_s / (repeats * max(sustained_call_s, 1e-9))))
        calls = min(repeats * per_repeat, max(repeats * iters, MAX_TIMED_CALLS // repeats * repeats))

        events = [
            (self.event_class(enable_timing=True), self.event_class(enable_timing=True)) for _ in range(calls)
        ]
        covered_before = cover.covered
        with self.monitor.recording() as samples:
            for start, end in events:
                step(cover, start, end)
            torch.cuda.synchronize(device)
        pool.clear()  # sets prepared and never timed: their views and forwards go unused
        times = [float(start.elapsed_time(end)) for start, end in events]
        window = Window(
            what,
            calls,
            depth,
            depth * set_bytes / 1e6,
            preroll_s,
            settled,
            samples,
            self.perf_counter() - window_began,
            min(launches) * 1e3,
            statistics.median(times),
            cover.covered - covered_before,
        )
        self.windows.append(window)
        print(f"quick_test_bench: {window.describe()}", file=sys.stderr)
        if window.host_bound:
            print(
                f"quick_test_bench: {what}: WARNING: host-bound: launching a call takes the host "
                f"{window.host_ms:.3f} ms, running it the GPU {window.gpu_ms:.3f} ms. The figure is GPU "
                "time (the launch is hidden); a training step whose host does not run ahead pays the host's",
                file=sys.stderr,
            )
        if window.clock_moved > CLOCK_MOVED_WARN:
            print(
                f"quick_test_bench: {what}: WARNING: the SM clock drifted {100 * window.clock_moved:.1f}% "
                f"during the timed window (more than {100 * CLOCK_MOVED_WARN:.0f}%): the figure mixes "
                "clock states",
                file=sys.stderr,
            )
        return times


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Timing:
    """Per-repeat mean call time (ms) and the derived per-repeat metric."""

    repeat_ms: list[float]
    work: float
    scale: float  # metric = work / seconds / scale (1e12 for TFLOPS, 1e9 for GB/s)

    @property
    def per_repeat_metric(self) -> list[float]:
        return [self.work / (ms * 1e-3) / self.scale if ms > 0 else math.inf for ms in self.repeat_ms]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.repeat_ms)

    @property
    def metric(self) -> float:
        return statistics.median(self.per_repeat_metric)

    @property
    def stddev(self) -> float:
        return statistics.pstdev(self.per_repeat_metric)


def measure(
    clock: Clock,
    bank: Bank,
    prepare: Callable[[], Callable[[], Any]],
    repeats: int,
    iters: int,
    work: float,
    scale: float,
    what: str = "",
) -> Timing:
    """`prepare()` takes fresh inputs from `bank` and returns the zero-argument call to time (setup
    untimed). A repeat is the mean of `iters` consecutive calls."""
    if clock.device.type == "cuda":
        call_ms = clock.back_to_back(bank, prepare, repeats, iters, what)
        iters = len(call_ms) // repeats
    else:
        call_ms = []
        for _ in range(repeats * iters):
            call = prepare()
            call_ms.append(clock.time_ms(call))
            del call
    repeat_ms = [statistics.fmean(call_ms[index : index + iters]) for index in range(0, len(call_ms), iters)]
    return Timing(repeat_ms, work, scale)


def device_peaks(device: Any) -> tuple[str, dict[str, float] | None]:
    import torch

    if device.type != "cuda":
        return "CPU", None
    name = torch.cuda.get_device_name(device)
    for words, peaks in PEAKS:
        if all(word in name for word in words):
            return name, peaks
    return name, None


# ---------------------------------------------------------------------------------------------
# Per-shape runs
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """Everything a shape run needs besides the shape itself."""

    op: GemmOp | QuantOp
    kernels: ModuleType
    device: Any
    dtype: Any
    clock: Clock
    repeats: int
    iters: int
    forward_only: bool
    seed: int
    peaks: dict[str, float] | None
    gpu_name: str
    seal: Seal | None = None
    warm_up_s: float = 0.0  # spent in untimed first calls (compilation, autotuning), all shapes so far
    tuning_s: float = 0.0  # of which the autotuner spent timing configs


def run_gemm_shape(run: Run, shape: Shape, index: int) -> tuple[GemmRow, list[str]]:
    """One GEMM-class shape: warm up, time forward (and backward), then check the timed calls and
    fresh calls against the reference; the row and why it failed (nothing when it passed)."""
    import torch

    op = run.op
    assert isinstance(op, GemmOp) and shape.N is not None
    generator = torch.Generator(device=run.device).manual_seed(run.seed + 1000 * index)
    draws = GemmDraws(run, op, shape, generator, Bank(generator, run.device, run.clock.l2_bytes))
    row = GemmRow(shape.label, shape.B or 1, shape.M, shape.N, shape.K, ERROR)
    op.sampler.take()
    warm_up_gemm(run, draws)
    timings = time_gemm(run, shape, draws, row)
    failures = Failures()
    failures.reasons += timed_call_reasons(run, shape)
    check_gemm_accuracy(run, shape, draws, row, failures)
    check_gemm_plausibility(run, timings, failures)
    timer_reasons(run, failures)
    row.check = FAIL if failures.reasons else PASS
    return row, failures.reasons


@dataclass
class GemmDraws:
    """Fresh inputs and upstream gradients for one shape, all from the shape's own bank."""

    run: Run
    op: GemmOp
    shape: Shape
    generator: Any
    bank: Bank

    def inputs(self) -> GemmInputs:
        return self.op.inputs(self.shape, self.generator, self.run.device, self.run.dtype, self.bank)

    def grad_out(self) -> Any:
        return self.op.grad_out(self.shape, self.generator, self.run.device, self.run.dtype, self.bank)

    def backward_call(self, inputs: GemmInputs, grad_out: Any) -> Callable[[], Any]:
        """The backward of one forward, as a zero-argument callable (the forward is not timed)."""
        import torch

        out = self.op.provider(self.run.kernels, inputs)()
        return lambda: torch.autograd.grad(out, (inputs.a, inputs.b), grad_out)


def warm_up(run: Run, first_call: Callable[[], object]) -> None:
    """The shape's first call (compilation and autotuning), never timed; its seconds go to the log."""
    began = run.clock.perf_counter()
    with configs_compiled_together(run.device, run.clock.perf_counter) as tuning:
        first_call()
    synchronize(run.device)
    run.warm_up_s += run.clock.perf_counter() - began
    run.tuning_s += tuning.seconds


# The autotuner's timing of one config in the warm-up: do_bench with 5 ms of warm-up calls and 20 ms
# of timed ones (Triton's defaults: 25 and 100), about 20 ms / the kernel's time of timed calls (9
# for a 2 ms kernel, ~100 for 0.1 ms with do_bench's L2 clear), of which the median decides. A cold
# process of the fp8 rowwise op on the four Llama-3.1-8B shapes spent 13.7 of its 23.4 s of first
# calls timing configs at the defaults, 3.6 of 12.9 s at these (H200, 2026-12-01).
TUNING_WARMUP_MS = 5
TUNING_REP_MS = 20


@dataclass
class Tuning:
    seconds: float = 0.0  # spent in the autotuner's timing of configs (not in compiling them together)


@contextlib.contextmanager
def configs_compiled_together(device: Any, perf_counter: Callable[[], float]) -> Iterator[Tuning]:
    """While the block runs, an autotuned kernel compiles all its configs at once, in threads, before
    Triton's autotuner times them one by one (which then finds them compiled), each briefly
    (TUNING_WARMUP_MS, TUNING_REP_MS) unless the kernel brings a benchmark of its own. Yields the
    seconds the timing took, by `perf_counter` (the clock's original, which no kernel can replace).

    Triton compiles an autotuner's configs one after another, each as the benchmark reaches it: the
    first process of each side of a cold validation spent 18-22 s that way (H200, 2026-11-30), the GPU
    idle. Part of a compile holds the GIL (Python builds the IR), the rest does not (the MLIR passes,
    ptxas in a process of its own). Which config wins is still Triton's choice, from do_bench's median.
    A config that does not compile fails here silently and again, as Triton reports it, in the
    benchmark. The compiling hooks the autotuner's timing of a key's first config, so a key whose
    tuning is known (in memory, or in the autotune results a validation keeps on disk) compiles only
    the config it launches. Kernels with one config, and the CPU (the interpreter), are left alone."""
    tuning = Tuning()
    if device.type != "cuda":
        yield tuning
        return
    from concurrent.futures import ThreadPoolExecutor  # campaign-lint: allow S1 -- warm-up compiles

    import triton.testing
    from triton.runtime import _async_compile
    from triton.runtime.autotuner import Autotuner

    original = Autotuner._bench
    brief = functools.partial(triton.testing.do_bench, warmup=TUNING_WARMUP_MS, rep=TUNING_REP_MS)

    def bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        configs = self.prune_configs(meta)  # what Autotuner.run is timing, in its order
        if config is configs[0]:
            launch = {key: value for key, value in meta.items() if key != "warmup"}
            with (
                ThreadPoolExecutor(min(len(configs), os.cpu_count() or 1)) as pool,
                _async_compile.AsyncCompileMode(pool, ignore_errors=True),
            ):
                for each in configs:
                    with contextlib.suppress(Exception):
                        self.fn.run(*args, warmup=True, **launch, **each.all_kwargs())
        # Triton's `do_bench` property caches its benchmark in the instance's __dict__; one there
        # shadows it for this timing only. A kernel's own benchmark (`do_bench=`) is kept.
        began = perf_counter()
        own = getattr(self, "_do_bench", None) is not None
        before = self.__dict__.get("do_bench")
        if not own:
            self.__dict__["do_bench"] = brief
        try:
            return original(self, *args, config=config, **meta)
        finally:
            if not own:
                if before is None:
                    del self.__dict__["do_bench"]
                else:
                    self.__dict__["do_bench"] = before
            tuning.seconds += perf_counter() - began

    Autotuner._bench = bench
    try:
        yield tuning
    finally:
        Autotuner._bench = original


def warm_up_gemm(run: Run, draws: GemmDraws) -> None:
    import torch

    def forward_backward() -> None:
        warm = draws.inputs()
        warm_out = draws.op.provider(run.kernels, warm)()
        if not run.forward_only:
            torch.autograd.grad(warm_out, (warm.a, warm.b), draws.grad_out())

    warm_up(run, forward_backward)


def time_gemm(run: Run, shape: Shape, draws: GemmDraws, row: GemmRow) -> dict[str, Timing]:
    """Forward (and backward) throughput on fresh inputs for every call; fills the row's figures."""
    op = draws.op
    forward_flops, backward_flops = op.flops(shape)
    forward = measure(
        run.clock,
        draws.bank,
        lambda: op.provider(run.kernels, draws.inputs()),
        run.repeats,
        run.iters,
        forward_flops,
        1e12,
        f"{shape.label} forward",
    )
    row.forward_tflops, row.forward_tflops_stddev = forward.metric, forward.stddev
    row.forward_ms = forward.median_ms
    timings = {"forward": forward}
    if not run.forward_only:
        backward = measure(
            run.clock,
            draws.bank,
            lambda: draws.backward_call(draws.inputs(), draws.grad_out()),
            run.repeats,
            run.iters,
            backward_flops,
            1e12,
            f"{shape.label} backward",
        )
        row.backward_tflops, row.backward_tflops_stddev = backward.metric, backward.stddev
        row.backward_ms = backward.median_ms
        timings["backward"] = backward
    return timings


def check_gemm_accuracy(run: Run, shape: Shape, draws: GemmDraws, row: GemmRow, failures: Failures) -> None:
    """Correctness on fresh inputs, after timing (see the module docstring): SNR of out (and dA,
    dB) against the float64 reference, each at least its threshold."""
    import torch

    op = draws.op
    assert shape.N is not None
    inputs, grad_out = draws.inputs(), draws.grad_out()
    out_size = shape.M * shape.N * (torch.bfloat16 if op.granularity else run.dtype).itemsize
    out = checked_call(
        "forward", op.provider(run.kernels, inputs), inputs.tensors(), [out_size], run.device, failures
    )
    out_ref, da_ref, db_ref = op.reference(inputs, grad_out)
    row.out_snr = snr_db(out_ref, out)
    if not run.forward_only:
        # Each checked backward runs on its own forward: a graph can be differentiated only once.
        grads = checked_call(
            "backward",
            lambda: torch.autograd.grad(op.provider(run.kernels, inputs)(), (inputs.a, inputs.b), grad_out),
            [*inputs.tensors(), grad_out],
            [t.numel() * t.element_size() for t in (inputs.a, inputs.b)],
            run.device,
            failures,
        )
        row.da_snr, row.db_snr = snr_db(da_ref, grads[0]), snr_db(db_ref, grads[1])
    thresholds = op.thresholds(run.kernels, run.dtype, shape)
    checked = ["out_snr"] if run.forward_only else ["out_snr", "da_snr", "db_snr"]
    for metric in checked:
        value = getattr(row, metric)
        if not value >= thresholds[metric]:  # written so that NaN fails
            failures.reasons.append(
                f"{metric} = {value:.4g} dB is below the {thresholds[metric]:g} dB threshold"
            )


def check_gemm_plausibility(run: Run, timings: dict[str, Timing], failures: Failures) -> None:
    """No repeat may beat the GPU's datasheet peak (when it is known)."""
    if run.peaks is not None:
        peak = run.peaks[run.op.peak_key]
        for phase, timing in timings.items():
            fastest = max(timing.per_repeat_metric)
            if fastest > peak:
                failures.reasons.append(
                    f"implausible: {phase} {fastest:.4g} TFLOP/s exceeds the {run.gpu_name} peak of {peak:g}"
                )


def run_quant_shape(run: Run, shape: Shape, index: int) -> tuple[QuantRow, list[str]]:
    import torch

    op = run.op
    assert isinstance(op, QuantOp)
    generator = torch.Generator(device=run.device).manual_seed(run.seed + 1000 * index)
    bank = Bank(generator, run.device, run.clock.l2_bytes)
    row = QuantRow(shape.label, shape.M, shape.K, ERROR)
    op.sampler.take()

    def fresh_inputs() -> QuantInputs:
        return op.inputs(shape, generator, run.device, run.dtype, bank)

    warm_up(run, lambda: op.provider(run.kernels, fresh_inputs())())
    # No reference exists before the candidate's last call (an op could find it and return it).
    blocks = -(-shape.K // QUANT_BLOCK)
    scale_count = {"tensorwise": 1, "rowwise": shape.M, "blockwise": shape.M * blocks}[op.granularity]
    work = op.bytes_moved(shape, run.dtype.itemsize, scale_count)
    forward = measure(
        run.clock,
        bank,
        lambda: op.provider(run.kernels, fresh_inputs()),
        run.repeats,
        run.iters,
        work,
        1e9,
        f"{shape.label} forward",
    )
    row.forward_gbs, row.forward_gbs_stddev, row.forward_ms = (
        forward.metric,
        forward.stddev,
        forward.median_ms,
    )
    failures = Failures()
    failures.reasons += timed_call_reasons(run, shape)

    inputs = fresh_inputs()
    out_bytes = [shape.M * shape.K, scale_count * 4]
    codes, scales = checked_call(
        "forward", op.provider(run.kernels, inputs), inputs.tensors(), out_bytes, run.device, failures
    )
    codes_ref, scales_ref = op.reference(inputs)
    row.mismatch_frac = mismatch_fraction((codes, scales), (codes_ref, scales_ref))
    if run.device.type == "cuda":
        if row.mismatch_frac != 0.0:  # NaN fails too
            failures.reasons.append(
                f"mismatch_frac = {row.mismatch_frac:.4g}: output differs bit for bit from the reference"
            )
    else:
        failures.reasons.extend(interpreter_quant_reasons((codes, scales), (codes_ref, scales_ref)))
    if run.peaks is not None:
        fastest = max(forward.per_repeat_metric)
        if fastest > run.peaks["hbm"]:
            failures.reasons.append(
                f"implausible: {fastest:.4g} GB/s exceeds the {run.gpu_name} HBM peak of {run.peaks['hbm']:g}"
            )
    timer_reasons(run, failures)
    row.check = FAIL if failures.reasons else PASS
    return row, failures.reasons


def mismatch_fraction(candidate: tuple[Any, Any], reference: tuple[Any, Any]) -> float:
    """Share of output elements (codes and scales) that differ bit for bit; a shape mismatch is 1."""
    differing, total = 0, 0
    for got, want in zip(candidate, reference, strict=True):
        total += want.numel()
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            differing += want.numel()
            continue
        differing += int((element_bits(got) != element_bits(want)).sum())
    return differing / total if total else 0.0


def element_bits(tensor: Any) -> Any:
    """One integer per element holding its bit pattern (uint8 for fp8, int32 for fp32)."""
    import torch

    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[tensor.element_size()]
    return tensor.contiguous().view(width).reshape(-1)


def interpreter_quant_reasons(candidate: tuple[Any, Any], reference: tuple[Any, Any]) -> list[str]:
    """The CPU rule. Triton's interpreter rounds fp32→fp8 casts wrongly in two ways: a code may sit
    one step (one ulp, same sign) from the reference, and a value that should round up to a power of
    two loses the carry and lands on half of it (code 0x70 → 0x68, subnormal 0x08 → 0x04). Those two,
    and only those, are forgiven; scales involve no such cast and must match bit for bit. Weaker than
    the GPU's exact rule, which is why it is announced."""
    import torch

    (codes, scales), (codes_ref, scales_ref) = candidate, reference
    if codes.dtype != codes_ref.dtype or tuple(codes.shape) != tuple(codes_ref.shape):
        return [
            f"codes are {codes.dtype} {tuple(codes.shape)}, expected {codes_ref.dtype} {tuple(codes_ref.shape)}"
        ]
    if not bits_equal(scales, scales_ref):
        return ["scales differ bit for bit from the reference"]
    got, want = element_bits(codes).to(torch.int16), element_bits(codes_ref).to(torch.int16)
    magnitude, magnitude_ref = got & 0x7F, want & 0x7F
    same_sign = ((got & 0x80) == (want & 0x80)) | ((magnitude == 0) & (magnitude_ref == 0))
    one_step = (magnitude - magnitude_ref).abs() <= 1
    value, value_ref = codes.float().reshape(-1).abs(), codes_ref.float().reshape(-1).abs()
    power_of_two = torch.frexp(value_ref).mantissa == 0.5
    lost_carry = power_of_two & (value == value_ref / 2)
    bad = ~same_sign | ~(one_step | lost_carry) | (magnitude == 0x7F)
    if bool(bad.any()):
        return [
            f"{int(bad.sum())} fp8 codes differ from the reference beyond the interpreter's rounding faults"
        ]
    return []


def timer_reasons(run: Run, failures: Failures) -> None:
    replaced = run.clock.replaced()
    if replaced:
        failures.reasons.append(f"timer replaced: {', '.join(replaced)}")
    broken = run.seal.broken() if run.seal is not None else []
    if broken:
        failures.reasons.append(f"harness or torch rebound: {', '.join(broken[:8])}")


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse would exit 2, which this harness reserves for "no GPU for a GPU-only op".
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(
        description=f"Quick validation harness for {OP} ({BACKEND} backend); writes the gate CSV."
    )
    parser.add_argument("--summary-csv", required=True, type=Path, help="where to write the per-shape CSV")
    parser.add_argument(
        "--shapes-file", required=True, type=Path, help="YAML list of {label, B?, M, N?, K, dist?}"
    )
    parser.add_argument("--repeats", type=int, help="timed repeats per shape (default: GPU 20, CPU 3)")
    parser.add_argument("--iters-per-repeat", type=int, help="timed calls per repeat (default: GPU 5, CPU 1)")
    parser.add_argument("--forward-only", action="store_true", help="skip the backward (its columns are nan)")
    parser.add_argument(
        "--preroll-s",
        type=float,
        default=PREROLL_MIN_S,
        help=f"GPU: least back-to-back pre-roll per figure, 0 for none (default {PREROLL_MIN_S:g})",
    )
    parser.add_argument(
        "--window-s",
        type=float,
        default=TIMED_MIN_S,
        help=f"GPU: least duration of a figure's timed calls (default {TIMED_MIN_S:g})",
    )
    parser.add_argument(
        "--queue-s",
        type=float,
        default=QUEUE_AHEAD_S,
        help=f"GPU: most GPU time the host queues ahead of the GPU, 0 for no bound (default {QUEUE_AHEAD_S:g})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    args = parser.parse_args(argv)
    for name in ("repeats", "iters_per_repeat"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("preroll_s", "window_s", "queue_s"):
        if not 0.0 <= getattr(args, name) <= 60.0:
            parser.error(f"--{name.replace('_', '-')} must be between 0 and 60 seconds")
    return args


def check_placeholders() -> GemmOp | QuantOp:
    """`git campaign prepare` fills OP and BACKEND in; a copy that still has them cannot run."""
    if OP.startswith("__") or BACKEND.startswith("__"):
        raise UsageError(
            "OP and BACKEND are still placeholders; `git campaign prepare` fills them in "
            '(for a manual copy, set the lines to e.g. OP = "gemm" and BACKEND = "triton")'
        )
    if OP not in OPS:
        raise UsageError(f"OP = {OP!r} is not one of {', '.join(OPS)}")
    if BACKEND not in BACKENDS:
        raise UsageError(f"BACKEND = {BACKEND!r} is not one of {', '.join(BACKENDS)}")
    return OPS[OP]


def load_kernels(op: GemmOp | QuantOp, cuda: bool) -> ModuleType:
    """Import THIS repository's kernels with the campaign's backend (env set before the import)."""
    os.environ[op.env_var] = BACKEND
    if not cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module(op.module)


def main(argv: list[str] | None = None) -> int:
    """Read the arguments and shapes, set up the device and clock, run every shape, write the CSV."""
    began = LOADED if next(RUNS) == 0 else time.perf_counter()  # a later run has no imports to pay
    try:
        op, args, shapes = read_request(argv)
    except UsageError as exc:
        print(f"quick_test_bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    run = start_run(op, args)
    if run is None:
        return EXIT_NO_GPU
    print(
        f"quick_test_bench: start-up (imports, device, kernels): {run.clock.perf_counter() - began:.2f} s",
        file=sys.stderr,
    )
    lines, all_pass = run_shapes(run, shapes)
    write_results(args, run, lines)
    return EXIT_OK if all_pass else EXIT_FAILED


def read_request(argv: list[str] | None) -> tuple[GemmOp | QuantOp, argparse.Namespace, list[Shape]]:
    """The op this copy was prepared for, the arguments and the shape file; UsageError when bad."""
    op = check_placeholders()
    args = parse_args(argv)
    try:
        import yaml

        data = yaml.safe_load(args.shapes_file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read the shape file {args.shapes_file}: {exc}") from exc
    return op, args, parse_shapes(data, str(args.shapes_file), op.grouped, op.quant)


def start_run(op: GemmOp | QuantOp, args: argparse.Namespace) -> Run | None:
    """Device, clock and seal (both before the kernels are imported), the kernels and the GPU's
    peaks; None when the backend needs a GPU and there is none."""
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and BACKEND in op.cuda_only_backends:
        print(
            f"quick_test_bench: {OP} with the {BACKEND} backend needs a CUDA GPU, and none is visible",
            file=sys.stderr,
        )
        return None
    if not cuda:
        print(
            "quick_test_bench: no CUDA GPU: Triton interpreter (TRITON_INTERPRET=1), fp16 instead of bf16 "
            "(bf16 is wrong in the interpreter), figures are CPU figures",
            file=sys.stderr,
        )
    device = torch.device("cuda" if cuda else "cpu")
    clock = Clock(device, args.preroll_s, args.window_s, args.queue_s)
    seal = Seal(device, clock, op)  # before the kernels are imported, like the clock
    kernels = load_kernels(op, cuda)
    gpu_name, peaks = device_peaks(device)
    print(f"quick_test_bench: {OP} ({BACKEND}) from {REPO_ROOT}; clock: {clock.name}", file=sys.stderr)
    if cuda and peaks is None:
        print(
            f"quick_test_bench: no datasheet peak known for {gpu_name}: no plausibility check",
            file=sys.stderr,
        )
    if isinstance(op, GemmOp) and op.granularity is not None and not cuda:
        print(
            "quick_test_bench: fp8 on the CPU: the interpreter rounds fp32->fp8 casts wrongly (a carry into "
            "a power of two is lost, halving the value), which costs several dB of SNR; the thresholds are "
            "the GPU's, so expect FAIL here: only a GPU run judges fp8 accuracy",
            file=sys.stderr,
        )
    if op.quant and not cuda:
        print(
            "quick_test_bench: CPU check is weaker: fp8 codes may differ from the reference by one step or "
            "by a carry into a power of two that was lost (the interpreter rounds fp32->fp8 casts wrongly); scales must match bit "
            "for bit; Check on a GPU demands mismatch_frac = 0",
            file=sys.stderr,
        )
    return Run(
        op,
        kernels,
        device,
        torch.bfloat16 if cuda else torch.float16,
        clock,
        args.repeats or (20 if cuda else 3),
        args.iters_per_repeat or (5 if cuda else 1),
        args.forward_only,
        args.seed,
        peaks,
        gpu_name,
        seal,
    )


def run_shapes(run: Run, shapes: list[Shape]) -> tuple[list[str], bool]:
    """Every shape in order, each row printed as it is done: the CSV lines and whether all passed.
    A shape that raises is an ERROR row; a timer or routing replaced at import fails every row."""
    op, clock, seal = run.op, run.clock, run.seal
    assert seal is not None
    startup = clock.replaced() + seal.broken()
    run_shape: Callable[[Run, Shape, int], tuple[GemmRow | QuantRow, list[str]]] = (
        run_quant_shape if op.quant else run_gemm_shape
    )
    header = QUANT_HEADER if op.quant else GEMM_HEADER
    lines = [header + "\n"]
    print(header, flush=True)
    all_pass = True
    for index, shape in enumerate(shapes):
        row: GemmRow | QuantRow
        began, windows_before = clock.perf_counter(), len(clock.windows)
        warm_up_before, tuning_before = run.warm_up_s, run.tuning_s
        try:
            row, reasons = run_shape(run, shape, index)
            if startup:
                reasons.insert(0, f"timer replaced when the kernels were imported: {', '.join(startup)}")
                row.check = FAIL
            rerouted = routing_replaced()
            if rerouted:
                reasons.insert(0, f"MoE routing replaced by the kernels: {', '.join(rerouted)}")
                row.check = FAIL
        except Exception:
            print(f"quick_test_bench: {shape.label}: ERROR\n{traceback.format_exc()}", file=sys.stderr)
            row = (
                QuantRow(shape.label, shape.M, shape.K, ERROR)
                if op.quant
                else GemmRow(shape.label, shape.B or 1, shape.M, shape.N or 0, shape.K, ERROR)
            )
            reasons = []
        for reason in reasons:
            print(f"quick_test_bench: {shape.label}: FAIL: {reason}", file=sys.stderr)
        # Where a shape's time goes (the validation's length is mostly this, shape after shape).
        windows_s = sum(window.wall_s for window in clock.windows[windows_before:])
        print(
            f"quick_test_bench: {shape.label}: {clock.perf_counter() - began:.2f} s, {windows_s:.2f} s of it in "
            f"timed windows, {run.warm_up_s - warm_up_before:.2f} s in first calls (compilation, autotuning; "
            f"{run.tuning_s - tuning_before:.2f} s of it timing configs), "
            "the rest inputs and checks",
            file=sys.stderr,
        )
        all_pass &= row.check == PASS
        lines.append(csv_line(row))
        print(csv_line(row), end="", flush=True)
    return lines, all_pass


def write_results(args: argparse.Namespace, run: Run, lines: list[str]) -> None:
    """The CSV, and beside it the clock log of every timed window."""
    clock, gpu_name = run.clock, run.gpu_name
    args.summary_csv.parent.mkdir(parents=True, exist_ok=True)
    args.summary_csv.write_text("".join(lines))
    if clock.windows:
        # Beside the CSV (whose schema is frozen): what the GPU ran at while each figure was timed.
        clock_log = [window.summary() for window in clock.windows]
        clock_path = args.summary_csv.with_suffix(CLOCK_LOG_SUFFIX)
        clock_path.write_text(json.dumps({"gpu": gpu_name, "windows": clock_log}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
