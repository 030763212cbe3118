"""The transfer gate: does a round's benchmark win survive real optimiser steps? The training probe
runs for incumbent and candidate, interleaved on the same seed; a candidate slower there, or whose
loss leaves the incumbent's trajectory by more than the op's precision allows, is REJECTed for
`overfit` (the handoff's real-training rule: ACCEPT-as-real, ACCEPT-with-asterisk, REJECT-as-overfit).

A probe record is the frozen harness's (`--train-probe`: one entry per shape under "shapes", the
representative shapes plus the op's small host-bound ones) or, for campaigns made before op
specs, the old probe's (one block size, its figures at the top level).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign.errors import CampaignError
from gitcampaign.gates import Rejection
from gitcampaign.manifest import Manifest
from gitcampaign.measure import InTurn, LoggedRun, pair_order, triton_cache_env
from gitcampaign.progress import Progress
from gitcampaign.shapes import Shape, dump_shapes

# One pair: a probe's step time repeats to 0.1-0.2% within a side on the H200 (BENCHMARKS.md), far
# inside OVERFIT_LIMIT, and the loss comparison is deterministic; a second pair costs a run each side.
PROBE_PAIRS = 1
# ... but a step that the host bounds repeats far worse from process to process: on an H200 a heat's
# probe read 14-15% slower on two such shapes in one pair, where the harness read 13% faster. A
# probe that reads slower is run for this many more pairs, and the fastest run of each side decides
# (`judge`).
CONFIRM_PAIRS = 2
OVERFIT_LIMIT = 0.03  # a candidate this much slower on a probe shape did not transfer (REJECT)

REAL, ASTERISK, OVERFIT = "ACCEPT-as-real", "ACCEPT-with-asterisk", "REJECT-as-overfit"


@dataclass
class Transfer:
    verdict: str
    reasons: list[str] = field(default_factory=list)  # why it did not transfer
    record: dict[str, Any] = field(default_factory=dict)  # the verdict document's "probe"
    notes: list[str] = field(default_factory=list)  # for the verdict's notes, after the reasons

    @property
    def overfit(self) -> bool:
        return self.verdict == OVERFIT

    @property
    def rejection(self) -> Rejection | None:
        """The transfer gate's REJECT: `overfit`, with why the gain did not transfer."""
        return Rejection(C.REASON_OVERFIT, self.reasons) if self.overfit else None


def takes_shapes(manifest: Manifest) -> bool:
    """Whether the probe is the frozen harness's (it takes the shapes to run in a file)."""
    return manifest.probe_command.split()[:2] == [
        "python",
        f"{C.campaign_dir(manifest.name)}/{C.HARNESS_FILE}",
    ]


def run_probe(
    trees: dict[str, Path], manifest: Manifest, scratch: Path, shapes: list[Shape], progress: Progress
) -> Transfer:
    """PROBE_PAIRS pairs of probe runs, incumbent and candidate interleaved, then `judge`; where the
    candidate reads slower (and its loss kept to the incumbent's), CONFIRM_PAIRS more pairs first."""
    extra: tuple[str, ...] = ()
    if takes_shapes(manifest):
        shapes_file = scratch / "probe.shapes.yaml"
        shapes_file.write_text(dump_shapes(shapes))
        extra = ("--shapes-file", str(shapes_file))
    runs: dict[str, list[dict[str, Any]]] = {C.INCUMBENT: [], C.CANDIDATE: []}
    _probe_pairs(runs, 0, PROBE_PAIRS, trees, manifest, scratch, extra, progress)
    transfer = judge(runs)
    if transfer.overfit and not transfer.record["diverged"]:
        slow = ", ".join(
            f"{label} {speedup:.3f}"
            for label, speedup in transfer.record["speedup"].items()
            if did_not_transfer(speedup)
        )
        progress.note(f"the training probe read the candidate slower ({slow}): {CONFIRM_PAIRS} more pairs")
        _probe_pairs(runs, PROBE_PAIRS, CONFIRM_PAIRS, trees, manifest, scratch, extra, progress)
        transfer = judge(runs)
        outcome = "confirmed" if transfer.overfit else "cleared"
        first = "pair" if PROBE_PAIRS == 1 else f"{PROBE_PAIRS} pairs"
        transfer.notes.append(
            f"the probe's first {first} read the candidate slower ({slow}, speedup); "
            f"{outcome} on the fastest run of each side over {PROBE_PAIRS + CONFIRM_PAIRS} pairs"
        )
    return transfer


def _probe_pairs(
    runs: dict[str, list[dict[str, Any]]],
    start: int,
    count: int,
    trees: dict[str, Path],
    manifest: Manifest,
    scratch: Path,
    extra: tuple[str, ...],
    progress: Progress,
) -> None:
    """`count` more pairs of probe runs, numbered from `start`, their records added to `runs`."""
    total = start + count
    order = [(start + index, role) for index, role in pair_order(count)]
    probes = [
        LoggedRun(
            manifest.probe_command,
            trees[role],
            scratch / f"probe{index}-{role}.log",
            "training probe",
            triton_cache_env(trees[role]),
            ("--json", str(scratch / f"probe{index}-{role}.json"), *extra),
        )
        for index, role in order
    ]
    with InTurn(probes, ahead=False) as turns:  # it times the host: nothing starts beside it
        for (index, role), probe in zip(order, probes, strict=True):
            out = Path(probe.args[1])
            with progress.harness_run(f"probe {index + 1}/{total}, {role}", [], probe.log_path):
                code = turns.run(probe, manifest.harness_timeout_s)
            # The candidate's loss going non-finite (exit 1, result written) is its own verdict.
            if role == C.CANDIDATE and code == 1 and out.exists():
                runs[role].append(json.loads(out.read_text()))
                continue
            if code != 0 or not out.exists():
                raise CampaignError(
                    f"the training probe exited {code} in the {role} worktree; nothing was recorded",
                    f"run `{manifest.probe_command} --json /tmp/p.json` by hand (see {probe.log_path}), "
                    "or validate with --no-probe",
                )
            runs[role].append(json.loads(out.read_text()))


def did_not_transfer(speedup: float) -> bool:
    """A probe shape's speedup (incumbent ms / candidate ms) more than OVERFIT_LIMIT slower, or NaN."""
    return not speedup >= 1.0 - OVERFIT_LIMIT  # written so that NaN does not transfer


def per_shape(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A probe record's shapes by label; an old probe's single block as one shape."""
    if "shapes" in run:
        return {
            shape["label"]: {**shape, "seed": run.get("seed"), "layers": run.get("layers", 1)}
            for shape in run["shapes"]
        }
    return {"block": {**run, "layers": run.get("layers", 2)}}


def fastest(step_ms: list[float]) -> float:
    """A side's step time on a probe shape over its runs: the fastest run's (its own median step).

    What slows a probe run down is added to it (another process on the host, the first run's cold
    caches), so the fastest run is the side's own cost. A step that the host bounds repeats badly
    from process to process: on an H100 on 2026-12-06 the incumbent's three runs at 256 tokens read
    1.82, 1.87 and 1.72 ms (8.3% apart, against a 3% limit), and on the median of three the
    candidate's 2.03, 1.98, 1.74 read 8% slower, where its fastest run is 1% slower. A run missing
    the shape (NaN) makes the side's time NaN, which does not transfer."""
    return math.nan if any(math.isnan(ms) for ms in step_ms) else min(step_ms)


def judge(runs: dict[str, list[dict[str, Any]]]) -> Transfer:
    """The verdict from the probe runs of both sides: overfit where a shape's fastest run is
    OVERFIT_LIMIT slower than the incumbent's, or its loss leaves the incumbent's trajectory, or the
    loss is not finite."""
    shaped = {role: [per_shape(run) for run in done] for role, done in runs.items()}
    incumbent, candidate = shaped[C.INCUMBENT], shaped[C.CANDIDATE]
    labels = list(incumbent[0])
    speedups = {
        label: fastest([float(run[label]["median_ms"]) for run in incumbent])
        / fastest([float(run.get(label, {}).get("median_ms", math.nan)) for run in candidate])
        for label in labels
    }
    diverged = [
        f"{label}: {reason}" if len(labels) > 1 else reason
        for mine, theirs in zip(candidate, incumbent, strict=True)
        for label in labels
        if (reason := loss_divergence(theirs[label], mine.get(label, {})))
    ]
    reasons = []
    if diverged:
        reasons.append(f"the training probe's loss left the incumbent's trajectory: {diverged[0]}")
    for label, speedup in speedups.items():
        if did_not_transfer(speedup):
            where = f" on {label}" if len(labels) > 1 else ""
            reasons.append(
                f"the training probe ran {100 * (1 - speedup):.1f}% slower{where}: the gain did not transfer"
            )
    overall = statistics.geometric_mean(speedups.values()) if not reasons else math.nan
    verdict = OVERFIT if reasons else REAL if overall >= 1.0 else ASTERISK
    record = {
        "step_ms": {
            role: {
                label: [float(run.get(label, {}).get("median_ms", math.nan)) for run in done]
                for label in labels
            }
            for role, done in shaped.items()
        },
        "speedup": {label: round(speedup, 6) for label, speedup in speedups.items()},
        "loss": {
            role: {label: [run.get(label, {}).get("loss") for run in done] for label in labels}
            for role, done in shaped.items()
        },
        "diverged": diverged,
    }
    return Transfer(verdict, reasons, record)


def loss_divergence(incumbent: dict[str, Any], candidate: dict[str, Any]) -> str | None:
    """Where the candidate's probe loss leaves the incumbent's (same seed, same data), or None.

    Tolerance from the precision: the op may be off by `op_rel_error` (rms, relative: what its
    checks admit), so a probe of `layers` op applications by e = (1 + err)^layers - 1. An output off
    by e·rms(o) moves an MSE loss L by at most e²·ms(o) + 2e·sqrt(ms(o)·L) (Cauchy-Schwarz), and
    both runs may be off that much, hence twice that, per step, with the incumbent's L and ms(o)."""
    if "op_rel_error" not in incumbent or "out_ms" not in incumbent:
        return None  # a campaign whose frozen probe predates the comparison: only its step time counts
    if candidate.get("seed") != incumbent.get("seed") or len(candidate.get("loss", [])) != len(
        incumbent["loss"]
    ):
        return "the two probe runs are not the same run (seed or steps differ)"
    error = float(incumbent["op_rel_error"])
    block = (1.0 + error) ** int(incumbent.get("layers", 2)) - 1.0
    steps = zip(candidate["loss"], incumbent["loss"], incumbent["out_ms"], strict=True)
    for step, (mine, theirs, out_ms) in enumerate(steps):
        tolerance = 2.0 * (block**2 * out_ms + 2.0 * block * math.sqrt(out_ms * theirs))
        if not abs(mine - theirs) <= tolerance:  # written so that NaN diverges
            return (
                f"step {step}: loss {mine:.6g} against {theirs:.6g} (tolerance {tolerance:.3g} for a "
                f"{error:.3g} relative op error)"
            )
    return None
