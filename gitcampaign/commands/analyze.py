"""ANALYZE: `git campaign analyze [N] [--shape LABEL] [--ncu|--no-ncu] [--isa]`, where the time goes.

It profiles the incumbent (or round N; 1 is the baseline) at the representative shapes (or one),
in the measured tree of that commit (a worktree, built as validate builds it), through the
campaign's own harness (`QUICK_COMMAND --profile OUT.json --shapes-file SHAPES.yaml`: torch's
profiler, CUPTI on a GPU), then, where Nsight Compute is on PATH and the profile ran on a GPU, once
more per shape under ncu (gitcampaign.ncu). Each phase of each shape is placed under the machine's
ceilings (gitcampaign.roofline) and gets a one-line verdict; with `--isa` the compiled kernels'
SASS is listed (gitcampaign.isa). The findings go in the profile note of the analysed commit
(gitcampaign.profile), appended, never replacing an earlier analysis.

Profiling decides nothing: it runs outside every gate, and it holds the campaign's lock only for
the moment of writing its note. Its worktree sits under a lock of its own, so that another command
starting meanwhile does not sweep it away as a killed command's leftover.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gitcampaign import envinfo, isa, measure, ncu, profile, roofline, steps
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, opened
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import Manifest
from gitcampaign.progress import Progress
from gitcampaign.shapes import Shape, dump_shapes
from gitcampaign.verdict import StepRecord
from gitcampaign.vocabulary import Status

TREE = "analyze"
NOTE_LOCK_WAIT_S = 900.0  # a validate holding the campaign's lock takes minutes
IMPORT_TIMEOUT_S = 600.0


@dataclass
class AnalyzeResult:
    campaign: str
    round: int | None  # None: the incumbent is no round's commit (a setup, report or rollback commit)
    commit: str
    device: str
    ceilings: dict[str, Any]
    shapes: dict[str, dict[str, Any]]  # label -> phases placed (gitcampaign.profile.findings) + verdict
    ncu: dict[str, Any]
    isa: dict[str, Any] | None
    run_dir: str
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def scratch_name(campaign: str) -> str:
    """The name of analyze's own lock and worktree folder: '+' is in no campaign name."""
    return f"{campaign}+{TREE}"


def analyze(
    repo_path: Path,
    campaign_name: str | None,
    number: int | None = None,
    shape: str | None = None,
    use_ncu: bool | None = None,
    with_isa: bool = False,
    progress: Progress | None = None,
) -> AnalyzeResult:
    progress = progress or Progress.silent()
    campaign = opened(repo_path, campaign_name)
    repo = campaign.repo
    manifest = campaign.manifest()
    commit, round_no = target(campaign, number)
    shapes = pick_shapes(manifest, shape)
    if use_ncu and shutil.which("ncu") is None:
        raise CampaignError(
            "--ncu: Nsight Compute (`ncu`) is not on PATH", "install it, or run without --ncu"
        )
    scratch = measure.run_dir(repo, campaign.name, TREE)
    measured = measure_commit(campaign, manifest, commit, shapes, scratch, use_ncu, with_isa, progress)
    found = profile.findings(
        measured.harness, measured.ceilings, roofline.spec_dtype(repo, campaign.name, commit)
    )
    document: dict[str, Any] = {
        "campaign": campaign.name,
        "round": round_no,
        "commit": commit,
        "tree": g.tree_of(repo, commit),
        "op": measured.harness.op,
        "device": measured.harness.device,
        "profiler": measured.harness.profiler + (" + ncu" if measured.ncu.get("ran") else ""),
        "ceilings": measured.ceilings.to_json(),
        "shapes": found,
        "ncu": measured.ncu,
        **({"isa": measured.isa} if measured.isa is not None else {}),
        "harness_command": f"{manifest.quick_command} --profile OUT.json --shapes-file SHAPES.yaml",
        "run_dir": str(scratch),
        **(
            {"build": {role: step.to_mapping() for role, step in measured.built.items()}}
            if measured.built
            else {}
        ),
        "environment": envinfo.fingerprint(),
    }
    kept = scratch / "profile.yaml"  # the document, whatever happens to the note
    kept.write_text(yaml.safe_dump(document, sort_keys=False, width=120))
    write_note(campaign, commit, document, kept)
    return AnalyzeResult(
        campaign.name,
        round_no,
        commit,
        measured.harness.device,
        measured.ceilings.to_json(),
        found,
        measured.ncu,
        measured.isa,
        str(scratch),
        measured.warnings + profile.over_the_ceiling(found),
    )


@dataclass
class Measured:
    harness: profile.HarnessProfile
    ceilings: roofline.Ceilings
    ncu: dict[str, Any]
    isa: dict[str, Any] | None
    built: dict[str, StepRecord]  # by tree, empty without a build command
    warnings: list[str]


def measure_commit(
    campaign: Campaign,
    manifest: Manifest,
    commit: str,
    shapes: list[Shape],
    scratch: Path,
    use_ncu: bool | None,
    with_isa: bool,
    progress: Progress,
) -> Measured:
    """Build the commit's tree, profile it, then ncu and the ISA where asked (under analyze's own lock)."""
    repo = campaign.repo
    with ExitStack() as stack:
        try:
            stack.enter_context(g.campaign_lock(repo, scratch_name(campaign.name)))
        except CampaignError:
            raise CampaignError(
                f"another `git campaign analyze` of {campaign.name} is running",
                "wait for it, then run this again",
            ) from None
        trees = stack.enter_context(
            measure.worktrees(
                repo, scratch_name(campaign.name), {TREE: commit}, steps.measured_paths(manifest)
            )
        )
        tree = trees[TREE]
        built = steps.build_all(repo, manifest, trees, {TREE: commit}, scratch, manifest.harness_timeout_s)
        with progress.phase("profile", runs=1):
            harness_profile = run_profile(manifest, tree, shapes, scratch, progress)
        ceilings = roofline.ceilings_for(repo, harness_profile.device)
        on_gpu = not roofline.on_cpu(harness_profile.device)
        wanted = use_ncu if use_ncu is not None else shutil.which("ncu") is not None and on_gpu
        warnings = []
        if wanted and on_gpu:
            with progress.phase("ncu", runs=len(shapes)):
                ncu_record = run_ncu(manifest, tree, harness_profile, shapes, scratch, progress)
        else:
            why = "--no-ncu" if use_ncu is False else "no GPU" if not on_gpu else "`ncu` is not on PATH"
            ncu_record = {"ran": False, "why": why}
            if use_ncu:
                warnings.append(f"--ncu: ncu did not run ({why}: Nsight Compute measures CUDA kernels only)")
        isa_record = None
        if with_isa:
            names = {
                kernel.name
                for phases in harness_profile.shapes.values()
                for phase in phases.values()
                for kernel in phase.kernels
            }
            cache = Path(measure.triton_cache_env(tree)["TRITON_CACHE_DIR"])
            isa_record = isa.listings(cache, sorted(names), scratch / "isa")
            if not isa_record["listings"]:
                warnings.append(f"--isa: {isa_record['why_none']}")
    return Measured(harness_profile, ceilings, ncu_record, isa_record, built, warnings)


def target(campaign: Campaign, number: int | None) -> tuple[str, int | None]:
    """(commit, round) to analyze: the accepted head by default, else round `number` (1: the baseline)."""
    baseline = campaign.baseline_commit()
    _, rounds = campaign.lineage()
    if number is None:
        head = campaign.accepted_head()
        accepted = [r.number for r in rounds if r.status == Status.ACCEPTED and r.commit == head]
        return head, accepted[0] if accepted else 1 if head == baseline else None
    if number == 1:
        if baseline is None:
            raise CampaignError(
                f"campaign {campaign.name} has no baseline yet",
                "run `git campaign baseline`, or analyze the incumbent",
            )
        return baseline, 1
    entry = next((r for r in rounds if r.number == number), None)
    if entry is None or entry.commit is None:
        raise CampaignError(
            f"campaign {campaign.name} has no round {number} with a commit",
            "list rounds with `git campaign log`; `git campaign analyze` alone profiles the incumbent",
        )
    return entry.commit, number


def pick_shapes(manifest: Manifest, label: str | None) -> list[Shape]:
    """The representative shapes (all target shapes before the baseline picked them), or one."""
    if label is None:
        return manifest.representative() if manifest.representative_shapes else manifest.shapes()
    chosen = [shape for shape in manifest.shapes() if shape.label == label]
    if not chosen:
        raise CampaignError(
            f"no target shape {label!r}",
            f"pick one of {', '.join(shape.label for shape in manifest.shapes())}",
        )
    return chosen


def run_profile(
    manifest: Manifest, tree: Path, shapes: list[Shape], scratch: Path, progress: Progress
) -> profile.HarnessProfile:
    """The harness's --profile run on `shapes`, read."""
    shapes_file = scratch / "shapes.yaml"
    shapes_file.write_text(dump_shapes(shapes))
    out = scratch / "profile.json"
    log = scratch / "profile.log"
    args = ["--profile", str(out), "--shapes-file", str(shapes_file)]
    with progress.harness_run("profiling run", [], log):
        code = measure.run_logged(
            manifest.quick_command,
            tree,
            log,
            manifest.harness_timeout_s,
            "profiling run",
            measure.triton_cache_env(tree),
            args,
        )
    text = log.read_text(errors="replace") if log.exists() else ""
    command = f"{manifest.quick_command} {shlex.join(args)}"
    if code != 0 and "--profile" in text and "unrecognized arguments" in text:
        raise CampaignError(
            f"the campaign's frozen harness predates profiling: it does not take --profile\n{measure.tail(log, 3)}",
            "the harness is protected, so a campaign keeps the one it was prepared with: start a new campaign "
            "from the project's branch (`git campaign init NAME-2 ...`, then `prepare`) to profile with the "
            "current harness; a harness of your own can add --profile (docs/analyze.md)",
        )
    if code != 0 or not out.exists():
        meaning = "no GPU for a GPU-only op" if code == 2 else f"it exited {code}"
        raise CampaignError(
            f"the profiling run failed ({meaning}); nothing was recorded\ncommand: {command}\n"
            f"last lines of {log}:\n{measure.tail(log)}",
            "run that command by hand in a checkout of the commit to see why",
        )
    try:
        data = json.loads(out.read_text())
    except ValueError as exc:
        raise CampaignError(
            f"{out} is not JSON ({exc}); nothing was recorded", "run the command by hand"
        ) from exc
    return profile.HarnessProfile.parse(data, str(out))


def run_ncu(
    manifest: Manifest,
    tree: Path,
    harness_profile: profile.HarnessProfile,
    shapes: list[Shape],
    scratch: Path,
    progress: Progress,
) -> dict[str, Any]:
    """Each shape's profiling run under Nsight Compute, one call per phase; its figures attached to
    the profile's kernels by name. A shape ncu could not measure (no permission for the counters,
    a crash) is noted, never fatal: the profile stands without it."""
    record: dict[str, Any] = {"ran": False, "metrics": list(ncu.METRICS), "shapes": {}}
    for shape in shapes:
        label = shape.label
        one = scratch / f"ncu-{label}.shapes.yaml"
        one.write_text(dump_shapes([shape]))
        report = scratch / f"ncu-{label}"
        log = scratch / f"ncu-{label}.log"
        command = f"{shlex.join(ncu.profile_command(report))} {manifest.quick_command}"
        args = [
            "--profile",
            str(scratch / f"ncu-{label}.json"),
            "--shapes-file",
            str(one),
            "--profile-calls",
            "1",
        ]
        with progress.harness_run(f"ncu {label}", [], log):
            code = measure.run_logged(
                command,
                tree,
                log,
                manifest.harness_timeout_s,
                "ncu run",
                measure.triton_cache_env(tree),
                args,
            )
        written = report.with_name(report.name + ".ncu-rep")
        if not written.exists():
            errors = [line for line in log.read_text(errors="replace").splitlines() if "==ERROR==" in line]
            record["shapes"][label] = {
                "ran": False,
                "why": f"ncu exited {code} without a report: "
                + ("; ".join(errors[:3]) or measure.tail(log, 3)),
                "log": str(log),
            }
            continue
        printed = scratch / f"ncu-{label}.csv"
        measure.run_logged(
            shlex.join(ncu.import_command(written)), tree, printed, IMPORT_TIMEOUT_S, "ncu import"
        )
        launches = ncu.parse_raw_csv(printed.read_text(errors="replace"))
        missing = profile.attach_ncu(harness_profile, label, ncu.by_kernel(launches))
        record["ran"] = True
        record["shapes"][label] = {
            "ran": True,
            "launches_measured": len(launches),
            "capped": len(launches) >= ncu.LAUNCH_CAP,
            "not_seen": missing,
            "report": str(written),
        }
    return record


def write_note(campaign: Campaign, commit: str, document: dict[str, Any], kept: Path) -> None:
    """Append the document to the commit's profile note under the campaign's lock, waiting for a
    command that holds it (a validate) up to NOTE_LOCK_WAIT_S."""
    deadline = time.monotonic() + NOTE_LOCK_WAIT_S
    while True:
        try:
            with g.campaign_lock(campaign.repo, campaign.name):
                profile.append(campaign.repo, commit, document)
                return
        except CampaignError as busy:
            if time.monotonic() > deadline:
                raise CampaignError(
                    f"{busy.message}; the profile was not noted (it is kept in {kept})",
                    "run `git campaign analyze` again once the other command has finished",
                ) from None
            time.sleep(1.0)
