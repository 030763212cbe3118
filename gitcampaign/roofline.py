"""The machine's ceilings, and where a measured figure sits under them (docs/analyze.md).

Ceilings come, in this order of trust, from:
1. `git campaign calibrate --peaks` (gitcampaign.peaks): measured on this GPU model at its steady
   clock, kept in the environment note (`kind: peaks`) of the accepted head it ran on; the latest
   measurement of the GPU model wins, whichever campaign of the repository made it;
2. the datasheet table below, for a GPU model it knows, labelled "datasheet, not measured";
3. nothing: on the CPU, or on a GPU the table does not know, shares are "not measured".

A figure's limit follows its unit: work counted in FLOPs is held against the dense GEMM ceiling of
its precision (fp8 for an op whose name says fp8, bf16 otherwise; none for an op whose op spec
computes in float32 or float64, which no measured ceiling covers), work counted in bytes against the
device copy bandwidth; a GEMM peak at the SM clock the figure was taken at, where NVML read both
(`Limit.at_clock`). A shape can sit under another limit than its unit's (a skinny GEMM bound by
memory, a small one by launches or the host): `bound` says which, from the host and GPU times per
call, the launch floor and, with Nsight Compute, the SM and DRAM throughput.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.harness.contract import UsageError, spec_info, spec_literals

MEASURED = "measured"
DATASHEET = "datasheet, not measured"
NOT_MEASURED = "not measured"
PEAKS_KIND = "peaks"  # the environment note's document of `calibrate --peaks`

FLOP, BYTE = "flop", "byte"
COMPUTE, MEMORY, LAUNCH, HOST = "compute", "memory", "launch", "host"
# A call whose GPU time is under this many launch floors per kernel launch is bound by launching:
# its kernels are too short for the GPU to reach any throughput ceiling.
LAUNCH_FACTOR = 2.0

# NVIDIA's datasheets, dense (without sparsity), per GPU: (words of the device name, bf16 TFLOP/s,
# fp8 TFLOP/s or None, memory GB/s). More specific names first; matched on whole words of the name
# torch reports ("NVIDIA H100 80GB HBM3" is the SXM part, "NVIDIA GH200 480GB" matches no row).
DATASHEET_TABLE: tuple[tuple[tuple[str, ...], float, float | None, float], ...] = (
    (("h100", "nvl"), 835.0, 1671.0, 3900.0),
    (("h100", "pcie"), 756.0, 1513.0, 2000.0),
    (("h100",), 989.0, 1979.0, 3350.0),
    (("h200", "nvl"), 835.0, 1671.0, 4800.0),
    (("h200",), 989.0, 1979.0, 4800.0),
    (("b200",), 2250.0, 4500.0, 8000.0),
    (("a100", "80gb", "pcie"), 312.0, None, 1935.0),
    (("a100", "80gb"), 312.0, None, 2039.0),
    (("a100",), 312.0, None, 1555.0),
    (("l40s",), 362.0, 733.0, 864.0),
)


# Dtypes whose FLOPs no ceiling here covers: the GEMM peaks are of bf16 and fp8 tensor cores.
WIDE_DTYPES = ("float32", "float64")
NO_WIDE_CEILING = "the op computes in {dtype}; the ceilings are bf16 and fp8 tensor-core GEMM peaks"


def uncovered(unit: str, dtype: str | None) -> bool:
    """Work no ceiling here covers: FLOPs in a wide dtype (NO_WIDE_CEILING says why)."""
    return unit == FLOP and dtype in WIDE_DTYPES


@dataclass(frozen=True)
class Limit:
    """The ceiling one figure is held against: its name, the rate in the figure's unit per second,
    and for a GEMM peak the SM clock it was measured at (NVML's median), where known."""

    name: str
    per_second: float
    sm_mhz: float | None = None

    def at_clock(self, sm_mhz: float | None) -> Limit:
        """This ceiling at the SM clock a figure was taken at. Tensor-core throughput is clock times
        work a clock, so a GEMM peak measured at one clock is that peak scaled to another, and a
        figure held against it reads its distance to the hardware in the same state of the card, not
        the gap between two clocks (`calibrate --peaks`'s 8192³ GEMM ran at 1335 MHz under an H100's
        power limit on 2026-12-06). Itself where either clock is unknown (the copy's always: the SM
        clock does not move the HBM's)."""
        if not (self.sm_mhz and sm_mhz) or self.sm_mhz == sm_mhz:
            return self
        return Limit(f"{self.name} at {sm_mhz:.0f} MHz", self.per_second * sm_mhz / self.sm_mhz, sm_mhz)


@dataclass(frozen=True)
class Ceilings:
    source: str  # MEASURED, DATASHEET or NOT_MEASURED
    gpu: str
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    copy_gbs: float | None = None
    launch_floor_us: float | None = None  # GPU time per empty kernel launched back to back
    measured: str = ""  # when `calibrate --peaks` measured them, and on which commit's note
    bf16_sm_mhz: float | None = None  # the SM clock each GEMM peak was measured at (NVML's median)
    fp8_sm_mhz: float | None = None

    def limit(
        self, unit: str, op: str, dtype: str | None = None, sm_mhz: float | None = None
    ) -> Limit | None:
        """The ceiling of work counted in `unit`, for the op named `op` computing in `dtype` (its op
        spec's dtype on a GPU, where known), a GEMM peak at `sm_mhz`, the SM clock of the figure held
        against it, where known (`Limit.at_clock`); None where there is none."""
        if unit == BYTE:
            return Limit("copy", self.copy_gbs * 1e9) if self.copy_gbs else None
        if uncovered(unit, dtype):
            return None
        fp8 = "fp8" in op.lower()
        tflops, mhz = (self.fp8_tflops, self.fp8_sm_mhz) if fp8 else (self.bf16_tflops, self.bf16_sm_mhz)
        return (
            Limit(f"{'fp8' if fp8 else 'bf16'} GEMM peak", tflops * 1e12, mhz).at_clock(sm_mhz)
            if tflops
            else None
        )

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (None, "")}


def datasheet(gpu: str) -> Ceilings | None:
    words = set(re.split(r"[^a-z0-9]+", gpu.lower()))
    for names, bf16, fp8, memory in DATASHEET_TABLE:
        if set(names) <= words:
            return Ceilings(DATASHEET, gpu, bf16, fp8, memory)
    return None


def on_cpu(device: str) -> bool:
    """The harness's device "cpu", or the fingerprint's "none (CPU)": nothing to hold figures against."""
    return not device or device.lower() == "cpu" or device.lower().startswith("none")


def recorded_peaks(repo: Repo) -> list[tuple[str, Mapping[str, Any]]]:
    """(commit, document) of every `calibrate --peaks` measurement in the repository, oldest first."""
    found = []
    for commit, blob in g.note_blobs(repo, C.NOTES_ENVIRONMENT).items():
        for doc in verdict.parse_stream(g.read_blob(repo, blob)):
            if doc.kind == PEAKS_KIND and isinstance(doc.extra.get("ceilings"), dict):
                found.append((commit, doc.to_mapping()))
    return sorted(found, key=lambda item: str(item[1].get("written", "")))


def ceilings_for(repo: Repo, device: str) -> Ceilings:
    """What figures measured on `device` (a GPU's name, or the CPU) are held against."""
    if on_cpu(device):
        return Ceilings(NOT_MEASURED, device)
    mine = [(commit, doc) for commit, doc in recorded_peaks(repo) if doc.get("gpu") == device]
    if mine:
        commit, doc = mine[-1]
        values = doc["ceilings"]
        figures = doc.get("figures")

        def clock(name: str) -> float | None:
            figure = figures.get(name) if isinstance(figures, dict) else None
            return _number(figure.get("sm_mhz")) if isinstance(figure, dict) else None

        return Ceilings(
            MEASURED,
            device,
            _number(values.get("bf16_gemm_tflops")),
            _number(values.get("fp8_gemm_tflops")),
            _number(values.get("copy_gbs")),
            _number(values.get("launch_floor_us")),
            f"{doc.get('written', '?')} (environment note of {commit[:12]})",
            clock("bf16_gemm"),
            clock("fp8_gemm"),
        )
    return datasheet(device) or Ceilings(NOT_MEASURED, device)


def spec_dtype(repo: Repo, campaign: str, commit: str) -> str | None:
    """The dtype on a GPU of the op spec that `commit` (a commit of the campaign's line) froze for
    the campaign; None where it froze none (campaigns made before op specs) or it does not parse."""
    path = f"{C.campaign_dir(campaign)}/{C.OP_SPEC_FILE}"
    raw = g.read_file_at(repo, commit, path)
    if raw is None:
        return None
    try:
        return spec_info(spec_literals(raw.decode(errors="replace"), path), path).dtype_for("cuda")
    except UsageError:
        return None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


@dataclass(frozen=True)
class Placement:
    """Where one phase of one shape sits: its rate against its limit, and what bounds it."""

    achieved_per_s: float  # the phase's work per second of GPU time
    limit: Limit | None
    share: float | None  # achieved / limit; None where the limit was not measured
    bound: str  # COMPUTE, MEMORY or LAUNCH: where the GPU's time goes
    host_bound: bool  # the host takes longer to issue a call than the GPU to run it
    why: str  # what decided `bound`


def place(
    unit: str,
    work: float,
    gpu_ms: float,
    host_ms: float,
    launches: float,
    limit: Limit | None,
    launch_floor_us: float | None,
    throughput: tuple[float, float] | None = None,
) -> Placement:
    """The placement of a call doing `work` (in `unit`) in `gpu_ms` of GPU time, issued by the host
    in `host_ms`, in `launches` kernel launches. `throughput` is Nsight Compute's (SM %, DRAM %) of
    peak, weighted by the kernels' time, where it ran. The bound, in order: launching, where the GPU
    time is under LAUNCH_FACTOR launch floors per launch; else ncu's larger throughput; else the unit
    (FLOPs: compute, bytes: memory)."""
    achieved = work / (gpu_ms * 1e-3) if gpu_ms > 0 else math.nan
    share = achieved / limit.per_second if limit is not None and math.isfinite(achieved) else None
    floor_ms = launches * launch_floor_us * 1e-3 if launch_floor_us else None
    if floor_ms is not None and gpu_ms < LAUNCH_FACTOR * floor_ms:
        bound, why = LAUNCH, f"GPU {gpu_ms:.3g} ms < {LAUNCH_FACTOR:g} x {launches:g} launch floors"
    elif throughput is not None:
        sm, dram = throughput
        bound = MEMORY if dram > sm else COMPUTE
        why = f"ncu: SM {sm:.0f}%, DRAM {dram:.0f}% of peak"
    else:
        bound = COMPUTE if unit == FLOP else MEMORY
        why = f"the op's work is counted in {unit}s (ncu did not run)"
    return Placement(achieved, limit, share, bound, host_ms > gpu_ms, why)


def verdict_line(placement: Placement, launches: float, gpu_ms: float, host_ms: float, where: str) -> str:
    """One line: "memory-bound at 0.62 of copy; 3 launches; host 0.2 ms <= GPU 0.4 ms per call", led
    by "host-bound; on the GPU ..." when the host takes longer to issue a call than the GPU to run it
    (`where` says why there is no share when there is no ceiling)."""
    at = (
        f"at {placement.share:.2f} of {placement.limit.name}"
        if placement.share is not None and placement.limit is not None
        else f"(share of the limit not measured: {where})"
    )
    gpu = f"{placement.bound}-bound {at}"
    head = f"host-bound; on the GPU {gpu}" if placement.host_bound else gpu
    count = f"{launches:g} launch{'' if launches == 1 else 'es'}"
    relation = ">" if host_ms > gpu_ms else "<="
    return f"{head}; {count}; host {host_ms:.3g} ms {relation} GPU {gpu_ms:.3g} ms per call"


def metric_unit(metric: str) -> str:
    """The unit the campaign's primary metric counts work in (TFLOPS: FLOPs, GB/s: bytes)."""
    return BYTE if metric.endswith("GB/s") else FLOP


def metric_share(
    value: float,
    metric: str,
    op: str,
    ceilings: Ceilings,
    dtype: str | None = None,
    sm_mhz: float | None = None,
) -> float | None:
    """A harness figure (TFLOPS or GB/s of `metric`) as a share of its limit, a GEMM peak taken at
    the SM clock the figure was measured at where it is known (`Limit.at_clock`); None where there
    is no limit."""
    limit = ceilings.limit(metric_unit(metric), op, dtype, sm_mhz)
    if limit is None or not math.isfinite(value):
        return None
    scale = 1e9 if metric_unit(metric) == BYTE else 1e12
    return value * scale / limit.per_second


# A share this far above 1 is not a profile's noise: the ceiling is under what the op reached.
OVER_CEILING = 1.02


def above_ceiling(shares: Mapping[str, float | None]) -> str:
    """The caveat for the shares ({where: share}) read above their ceiling, "" where none is. A share
    over 1 says the ceiling or the figure was measured in another state of the card than the other,
    or measured wrong, not that the op beat the hardware: on H100s on 2026-12-06 `calibrate --peaks`
    timed cuBLAS in windows of 2-3 calls (629 and 649 TFLOP/s; 698 in windows of 169), and profiled
    calls ran at boost after the profiler's idle start."""
    over = [
        f"{where} {share:.2f}"
        for where, share in shares.items()
        if share is not None and share > OVER_CEILING
    ]
    if not over:
        return ""
    return (
        f"above the measured ceiling ({', '.join(over)}): the ceiling understates this GPU in the state the "
        "figures were taken in, so read these shares against each other, not as distances to the hardware; "
        "the vendor side by side (benchmarks/best_vendor.py) says how close the op is"
    )


def share_text(share: float | None) -> str:
    return f"{share:.2f}" if share is not None else NOT_MEASURED


def weighted(pairs: Sequence[tuple[float, float]]) -> float:
    """The mean of values weighted by their weights ((value, weight) pairs); NaN without weight."""
    total = sum(weight for _, weight in pairs)
    return sum(value * weight for value, weight in pairs) / total if total > 0 else math.nan
