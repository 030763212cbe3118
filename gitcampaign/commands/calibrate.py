"""`git campaign calibrate`: does the harness agree with an outside clock on this GPU?

On the campaign's shapes it runs, in one process, rounds of the campaign's committed harness and of
an independent back-to-back measurement (`gitcampaign.crosscheck`: triton's `do_bench` loop, CUDA
events, L2 cleared between calls, median), each for our backend and the vendor's (`torch`) next to
each other, so that the our/vendor ratios compare windows that ran at the same clock.
The limits and the table are gitcampaign.calibration's.
The table, the clocks and the environment are appended to the `refs/notes/campaign/environment`
note of the accepted head.

`calibrate --peaks` measures the machine's ceilings instead (`gitcampaign.peaks`, in a child: dense
bf16 and fp8 GEMM, device copy, the launch floor), which `analyze` and `report` hold figures against
(`gitcampaign.roofline`); they go in the same note, as a document of kind `peaks`.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import envinfo, measure, peaks, roofline, trust, verdict
from gitcampaign import git as g
from gitcampaign.calibration import (
    RATIO_LIMIT,
    ROLES,
    SHAPE_LIMIT,
    VENDOR_BACKEND,
    CalibrationRow,
    build_rows,
)
from gitcampaign.campaign import locked
from gitcampaign.crosscheck import ROUNDS
from gitcampaign.errors import CampaignError
from gitcampaign.shapes import dump_shapes


@dataclass
class CalibrateResult:
    commit: str
    backends: tuple[str, str]
    rounds: int
    rows: list[CalibrationRow]
    environment: dict[str, object]
    warnings: list[str] = field(default_factory=list)

    @property
    def agreed(self) -> bool:
        return bool(self.rows) and all(row.agrees() for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "ours": self.backends[0],
            "vendor": self.backends[1],
            "rounds": self.rounds,
            "limits": {"shape": SHAPE_LIMIT, "ratio": RATIO_LIMIT},
            "agreed": self.agreed,
            "rows": [row.to_json() for row in self.rows],
            "warnings": self.warnings,
            "environment": self.environment,
        }


def calibrate(
    repo_path: Path,
    campaign_name: str | None,
    all_shapes: bool = False,
    forward_only: bool = False,
    rounds: int | None = None,
) -> CalibrateResult:
    rounds = ROUNDS if rounds is None else rounds
    if rounds < 1:
        raise CampaignError(f"calibrate needs at least one round, got {rounds}", "pass --rounds 1 or more")
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        manifest = campaign.manifest()
        trust.require(campaign)
        harness = f"{C.campaign_dir(manifest.name)}/{C.HARNESS_FILE}"
        if not manifest.quick_command.startswith(f"python {harness}"):
            raise CampaignError(
                f"calibrate needs the campaign's own harness, and the quick command is {manifest.quick_command!r}",
                "calibrate your own harness by hand against triton.testing.do_bench",
            )
        head = campaign.accepted_head()
        if g.read_file_at(repo, head, harness) is None:
            raise CampaignError(
                f"{harness} is not committed on {campaign.main_branch}", "run `git campaign prepare`"
            )
        shapes = (
            manifest.shapes()
            if all_shapes or not manifest.representative_shapes
            else manifest.representative()
        )
        backends = (manifest.target_backend, VENDOR_BACKEND)
        scratch = measure.run_dir(repo, campaign.name, "calibrate")
        shapes_file = scratch / "shapes.yaml"
        shapes_file.write_text(dump_shapes(shapes))
        out = scratch / "crosscheck"
        # Paths reach the command as arguments, never as shell text (see run_logged).
        command = f"{shlex.quote(sys.executable)} -m gitcampaign.crosscheck"
        args = [
            "--harness",
            harness,
            "--ours",
            backends[0],
            "--vendor",
            backends[1],
            "--rounds",
            str(rounds),
            "--shapes-file",
            str(shapes_file),
            "--out",
            str(out),
            *(["--forward-only"] if forward_only else []),
        ]
        log = scratch / "crosscheck.log"
        with measure.worktrees(repo, campaign.name, {"calibrate": head}) as paths:
            # Each round runs the harness twice (ours, the vendor's) and the outside clock twice.
            timeout_s = 2 * rounds * manifest.harness_timeout_s
            code = measure.run_logged(command, paths["calibrate"], log, timeout_s, "calibration", args=args)
        if code != 0:
            meaning = "no CUDA GPU is visible" if code == 2 else f"it exited {code}"
            raise CampaignError(
                f"the calibration failed ({meaning}); nothing was recorded\n"
                f"command: {command} {shlex.join(args)}\nlast lines of {log}:\n{measure.tail(log)}",
                "calibrate on the GPU the campaign measures on",
            )
        records = json.loads((out / "crosscheck.json").read_text())
        result = CalibrateResult(head, backends, rounds, build_rows(records), envinfo.fingerprint())
        for record in records:
            for number, one in enumerate(record["rounds"], start=1):
                for role in ROLES:
                    where = f"{record['label']} {record['backends'][role]} round {number}"
                    if one["check"][role] != C.CHECK_PASS:
                        result.warnings.append(f"{where}: the harness's Check is {one['check'][role]}")
                    result.warnings += [
                        f"{where} {phase}: the SM clock moved during the harness's timed window"
                        for phase, figures in one["harness"][role].items()
                        if figures.get("clock_moved")
                    ]
        document: dict[str, Any] = {
            "kind": "calibration",
            "campaign": campaign.name,
            **result.to_json(),
            "harness_clocks": {role: envinfo.clock_records(out / role) for role in ROLES},
        }
        verdict.append(repo, head, document, C.NOTES_ENVIRONMENT)
        return result


PEAKS_TIMEOUT_S = 600.0  # the GEMMs, the copy and the launches take about a minute together


@dataclass
class PeaksResult:
    commit: str  # the accepted head whose environment note holds them
    figures: dict[str, Any]  # gitcampaign.peaks's record
    environment: dict[str, object]

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, **self.figures, "environment": self.environment}


def calibrate_peaks(repo_path: Path, campaign_name: str | None) -> PeaksResult:
    """Measure this GPU's ceilings once (gitcampaign.peaks) and append them to the environment note
    of the accepted head, where `analyze` and `report` find them for this GPU model."""
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        head = campaign.accepted_head()
        scratch = measure.run_dir(repo, campaign.name, "peaks")
        out = scratch / "peaks.json"
        command = f"{shlex.quote(sys.executable)} -m gitcampaign.peaks"
        log = scratch / "peaks.log"
        # Run from the scratch folder: nothing there shadows the installed gitcampaign.
        code = measure.run_logged(
            command, scratch, log, PEAKS_TIMEOUT_S, "peak measurement", args=["--out", str(out)]
        )
        if code != 0 or not out.exists():
            meaning = "no CUDA GPU is visible" if code == peaks.EXIT_NO_GPU else f"it exited {code}"
            raise CampaignError(
                f"the ceilings were not measured ({meaning}); nothing was recorded\n"
                f"last lines of {log}:\n{measure.tail(log)}",
                "run `git campaign calibrate --peaks` on the GPU the campaign measures on; without one, "
                f"`analyze` and `report` use the datasheet of a GPU they know, labelled {roofline.DATASHEET!r}",
            )
        figures = json.loads(out.read_text())
        result = PeaksResult(head, figures, envinfo.fingerprint())
        document = {"kind": roofline.PEAKS_KIND, "campaign": campaign.name, **result.to_json()}
        verdict.append(repo, head, document, C.NOTES_ENVIRONMENT)
        return result
