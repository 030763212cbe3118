"""The profile note (`refs/notes/campaign/profile`): what `git campaign analyze` found on a commit.

The harness profiles (docs/analyze.md, "The harness's side"):

    QUICK_COMMAND --profile OUT.json --shapes-file SHAPES.yaml [--profile-calls N] [--forward-only]

and writes, per shape and phase, the calls, the unit and work per call, the host's and the GPU's
milliseconds per call and the kernels (name, launches and GPU milliseconds over the calls, share).
`HarnessProfile.parse` reads that file (a malformed one stops the command, nothing recorded);
`findings` places each phase under its ceilings (gitcampaign.roofline); `document` is what the note
holds, one YAML document per analysis appended to the commit's stream, never overwritten.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import ncu, roofline, verdict
from gitcampaign.errors import CampaignError

if TYPE_CHECKING:
    from gitcampaign.campaign import Campaign, Round

HARNESS_FORMAT = 1  # the harness's --profile file
KIND = "profile"
PHASES = ("forward", "backward")
UNITS = (roofline.FLOP, roofline.BYTE)
PROFILER_STEP = "ProfilerStep"  # torch.profiler's range around each step, on the GPU's timeline too


@dataclass
class Kernel:
    name: str
    launches: int  # over the phase's calls
    gpu_ms: float  # over the phase's calls
    share: float  # of the phase's GPU time
    ncu: dict[str, Any] | None = None  # gitcampaign.ncu.summarise of its launches, where ncu ran


@dataclass
class Phase:
    calls: int
    unit: str
    work: float  # per call, in `unit`s
    host_ms_per_call: float
    gpu_ms_per_call: float
    kernels: list[Kernel] = field(default_factory=list)
    sm_mhz: float | None = None  # NVML's median SM clock while the calls ran, where it was read

    @property
    def launches_per_call(self) -> float:
        return sum(kernel.launches for kernel in self.kernels) / self.calls

    def ncu_throughput(self) -> tuple[float, float] | None:
        """(SM %, DRAM %) of peak over the phase's kernels that ncu measured, weighted by their time."""
        measured = [kernel for kernel in self.kernels if kernel.ncu]
        if not measured:
            return None
        pairs = [(k.ncu or {}, k.gpu_ms) for k in measured]
        sm = roofline.weighted([(figures.get("sm_throughput_pct", math.nan), ms) for figures, ms in pairs])
        dram = roofline.weighted(
            [(figures.get("dram_throughput_pct", math.nan), ms) for figures, ms in pairs]
        )
        return (sm, dram) if math.isfinite(sm) and math.isfinite(dram) else None


@dataclass
class HarnessProfile:
    op: str
    device: str  # "cpu" or the GPU's name
    profiler: str
    shapes: dict[str, dict[str, Phase]]  # label -> phase -> Phase, in the shape file's order

    @classmethod
    def parse(cls, data: object, source: str) -> HarnessProfile:
        """The harness's --profile file; CampaignError naming the field that is wrong."""

        def bad(what: str) -> CampaignError:
            return CampaignError(
                f"{source}: {what}; nothing was recorded",
                "the harness's --profile file must follow docs/analyze.md; run the command by hand to see it",
            )

        if not isinstance(data, dict):
            raise bad("not a JSON object")
        if data.get("format") != HARNESS_FORMAT:
            raise bad(f"format is {data.get('format')!r}, not {HARNESS_FORMAT}")
        for key in ("op", "device", "profiler"):
            if not isinstance(data.get(key), str):
                raise bad(f"{key} is not a string")
        entries = data.get("shapes")
        if not isinstance(entries, list) or not entries:
            raise bad("shapes is not a non-empty list")
        shapes: dict[str, dict[str, Phase]] = {}
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
                raise bad("a shape without a label")
            label, phases = entry["label"], entry.get("phases")
            if not isinstance(phases, dict) or "forward" not in phases or not set(phases) <= set(PHASES):
                raise bad(f"shape {label}: phases must be forward (and backward)")
            shapes[label] = {
                name: _phase(phases[name], f"shape {label} {name}", bad) for name in PHASES if name in phases
            }
        # GPU time without a kernel to hold it is no figure: the profiler saw none of the calls' kernels.
        empty = [
            f"{label} {name}"
            for label, found in shapes.items()
            for name, phase in found.items()
            if not phase.kernels
        ]
        if data["device"] != "cpu" and empty:
            raise bad(f"no kernel recorded on the GPU for {', '.join(empty)}")
        return cls(data["op"], data["device"], data["profiler"], shapes)


def _phase(raw: object, where: str, bad: Callable[[str], CampaignError]) -> Phase:
    if not isinstance(raw, dict):
        raise bad(f"{where}: not an object")

    def number(value: object, what: str, positive: bool = False) -> float:
        """A finite number, not negative (with `positive`, above zero)."""
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
            or (positive and value == 0)
        ):
            raise bad(f"{where}: {what} is {value!r}")
        return float(value)

    calls = raw.get("calls")
    if not isinstance(calls, int) or isinstance(calls, bool) or calls <= 0:
        raise bad(f"{where}: calls is {calls!r}")
    if raw.get("unit") not in UNITS:
        raise bad(f"{where}: unit {raw.get('unit')!r} is not flop or byte")
    kernels = raw.get("kernels")
    if not isinstance(kernels, list):
        raise bad(f"{where}: kernels is not a list")
    parsed = []
    for kernel in kernels:
        if not isinstance(kernel, dict) or not isinstance(kernel.get("name"), str):
            raise bad(f"{where}: a kernel without a name")
        name, launches = kernel["name"], kernel.get("launches")
        if not isinstance(launches, int) or isinstance(launches, bool) or launches < 0:
            raise bad(f"{where}: kernel {name} launches is {launches!r}")
        share = number(kernel.get("share"), f"kernel {name} share")
        if share > 1:
            raise bad(f"{where}: kernel {name} share is {share!r}")
        parsed.append(Kernel(name, launches, number(kernel.get("gpu_ms"), f"kernel {name} gpu_ms"), share))
    gpu_ms_per_call = number(raw.get("gpu_ms_per_call"), "gpu_ms_per_call", positive=True)
    # The profiler's step range is no kernel. Harnesses frozen on 2026-12-06 (from 59af8c4) listed it
    # among a phase's kernels, with their GPU time counted twice: read without it.
    kernels_only = [kernel for kernel in parsed if not kernel.name.startswith(PROFILER_STEP)]
    total_ms = sum(kernel.gpu_ms for kernel in kernels_only)
    if len(kernels_only) < len(parsed) and total_ms > 0:
        for kernel in kernels_only:
            kernel.share = kernel.gpu_ms / total_ms
        gpu_ms_per_call = total_ms / calls
    parsed = kernels_only
    clock = raw.get("sm_mhz")
    return Phase(
        calls,
        str(raw["unit"]),
        number(raw.get("work"), "work", positive=True),
        number(raw.get("host_ms_per_call"), "host_ms_per_call"),
        gpu_ms_per_call,
        parsed,
        None if clock is None else number(clock, "sm_mhz", positive=True),
    )


def attach_ncu(profile: HarnessProfile, label: str, measured: dict[str, dict[str, Any]]) -> list[str]:
    """Give each kernel of the shape ncu's figures for its name (gitcampaign.ncu.by_kernel); returns
    the profile's kernels ncu did not see."""
    missing = []
    for phase in profile.shapes[label].values():
        for kernel in phase.kernels:
            kernel.ncu = measured.get(ncu.base_name(kernel.name))
            if kernel.ncu is None:
                missing.append(kernel.name)
    return missing


def findings(
    profile: HarnessProfile, ceilings: roofline.Ceilings, dtype: str | None = None
) -> dict[str, dict[str, Any]]:
    """Per shape: its phases placed under the ceilings (for work in `dtype`, the op spec's dtype on
    a GPU where known; a GEMM peak at the SM clock the phase ran at, where both clocks are known:
    `roofline.Limit.at_clock`), and the one-line verdict."""
    found = {}
    for label, phases in profile.shapes.items():
        entry: dict[str, Any] = {}
        lines = []
        for name, phase in phases.items():
            launches = phase.launches_per_call
            placement = roofline.place(
                phase.unit,
                phase.work,
                phase.gpu_ms_per_call,
                phase.host_ms_per_call,
                launches,
                ceilings.limit(phase.unit, profile.op, dtype, phase.sm_mhz),
                ceilings.launch_floor_us,
                phase.ncu_throughput(),
            )
            if ceilings.source == roofline.NOT_MEASURED:
                where = f"no ceilings for {profile.device}"
            elif roofline.uncovered(phase.unit, dtype):
                where = roofline.NO_WIDE_CEILING.format(dtype=dtype)
            else:
                where = ceilings.source
            line = roofline.verdict_line(
                placement, launches, phase.gpu_ms_per_call, phase.host_ms_per_call, where
            )
            lines.append(line if len(phases) == 1 else f"{name}: {line}")
            entry[name] = _phase_record(phase, placement)
        entry["verdict"] = " | ".join(lines)
        found[label] = entry
    return found


def over_the_ceiling(found: dict[str, dict[str, Any]]) -> list[str]:
    """`roofline.above_ceiling` for the phases `findings` placed, as analyze's warnings."""
    caveat = roofline.above_ceiling(
        {
            f"{label} {name}": record.get("share_of_limit")
            for label, entry in found.items()
            for name, record in entry.items()
            if name != "verdict"
        }
    )
    return [caveat] if caveat else []


def _phase_record(phase: Phase, placement: roofline.Placement) -> dict[str, Any]:
    return {
        "calls": phase.calls,
        "unit": phase.unit,
        "work_per_call": phase.work,
        "host_ms_per_call": phase.host_ms_per_call,
        "gpu_ms_per_call": phase.gpu_ms_per_call,
        "launches_per_call": phase.launches_per_call,
        f"achieved_{phase.unit}s_per_s": placement.achieved_per_s,
        "limit": placement.limit.name if placement.limit else roofline.NOT_MEASURED,
        "limit_per_s": placement.limit.per_second if placement.limit else None,
        "sm_mhz": phase.sm_mhz,
        "share_of_limit": placement.share,
        "bound": placement.bound,
        "host_bound": placement.host_bound,
        "bound_because": placement.why,
        "kernels": [
            {
                "name": kernel.name,
                "launches_per_call": kernel.launches / phase.calls,
                "gpu_ms_per_call": kernel.gpu_ms / phase.calls,
                "share": kernel.share,
                **({"ncu": kernel.ncu} if kernel.ncu else {}),
            }
            for kernel in phase.kernels
        ],
    }


def verdicts(doc: Mapping[str, Any]) -> list[str]:
    """ "LABEL: VERDICT" for each shape of a profile document."""
    shapes = doc.get("shapes") or {}
    return [
        f"{label}: {entry.get('verdict', '?')}" for label, entry in shapes.items() if isinstance(entry, dict)
    ]


def bounds(doc: Mapping[str, Any]) -> dict[str, list[str]]:
    """What bounds each phase of a profile document ("host" where the host takes longer to issue a
    call than the GPU to run it, else compute, memory or launch), each with its shapes' labels."""
    found: dict[str, list[str]] = {}
    for label, entry in (doc.get("shapes") or {}).items():
        phases = entry.values() if isinstance(entry, dict) else ()
        for phase in (p for p in phases if isinstance(p, dict) and p.get("bound")):
            bound = roofline.HOST if phase.get("host_bound") else str(phase["bound"])
            if label not in found.setdefault(bound, []):
                found[bound].append(label)
    return found


def of_lineage(
    campaign: Campaign, rounds: Sequence[Round], head: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """(title, key, latest profile) of each profiled commit of the lineage, in its order: the
    baseline (key "1"), each round's commit (its number), the accepted head where it is none of
    those ("head")."""
    found = read_all(campaign.repo)
    base = campaign.baseline_commit()
    commits = [(f"Baseline ({base[:12]})", "1", base)] if base else []
    commits += [
        (f"Round {entry.number} ({entry.commit[:12]})", str(entry.number), entry.commit)
        for entry in rounds
        if entry.commit
    ]
    if head not in {commit for _, _, commit in commits}:
        commits.append((f"Accepted head ({head[:12]})", "head", head))
    return [(title, key, found[commit][-1]) for title, key, commit in commits if commit in found]


def read(repo: Repo, commit: str) -> list[dict[str, Any]]:
    """The profile documents on `commit`, oldest first (a malformed one is skipped)."""
    return _documents(g.read_note(repo, C.NOTES_PROFILE, commit))


def read_all(repo: Repo) -> dict[str, list[dict[str, Any]]]:
    """{commit: profile documents} for every profiled commit, in one `notes list`."""
    return {
        commit: docs
        for commit, blob in g.note_blobs(repo, C.NOTES_PROFILE).items()
        if (docs := _documents(g.read_blob(repo, blob)))
    }


def _documents(raw: bytes | None) -> list[dict[str, Any]]:
    return [doc.to_mapping() for doc in verdict.parse_stream(raw) if doc.kind == KIND]


def append(repo: Repo, commit: str, document: Mapping[str, Any]) -> None:
    """Add one analysis to the commit's stream (earlier ones are kept byte for byte)."""
    verdict.append(repo, commit, {"kind": KIND, **document}, C.NOTES_PROFILE)
