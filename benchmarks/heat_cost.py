"""What a heat costs against a single validate, and one real heat in a small dogfood campaign (issue 41).

    python3 benchmarks/heat_cost.py OUTDIR                            # on one GPU: about 6-7 minutes
    python3 benchmarks/heat_cost.py OUTDIR --project DIR --plan P.json  # another project (CI: the fake one)

By default a scratch git repository gets the RMSNorm example (examples/rmsnorm) and four Llama
shapes (hidden 4096 and 8192, 8192 and 1024 tokens), and every step runs as a user runs it,
`python -m gitcampaign ...` in a fresh process:
1. init (Backward GB/s, 2 pairs), prepare, baseline;
2. a heat of four candidates, each one configuration pin of rmsnorm.py (16 or 4 backward tiles a
   program, 8 warps, 2-row tiles), then `validate --heat --json`, timed;
3. one candidate validated alone on the head the heat left, made again as a plain round, then
   `validate --json`, timed: the candidate the heat confirmed where the heat accepted none (the
   same candidate through the same gates, probe included), else the first of the heat's losers
   whose change still applies there.
It prints, for the heat and the single validate, the wall seconds of the command, the device
seconds its verdicts record, and the seconds of its measurement phases (the harness runs: the heat's
screen and confirmation sessions, the single's sessions), with the ratios heat / single: issue 41
asks at most 2.5 for four candidates of four shapes. OUTDIR gets heat_cost.json (every figure),
campaign.log (every command and its output), versions.txt, log.txt, rejected.txt, status.txt,
verdicts.yaml and lineage.bundle (`git campaign export --self-contained`: `git campaign import` it
in any clone).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHAPES = """# Llama-3.1-8B (hidden 4096) and -70B (hidden 8192) norms, an 8192- and a 1024-token micro-batch.
- {label: llama8b-8k, M: 8192, N: 4096}
- {label: llama70b-8k, M: 8192, N: 8192}
- {label: llama8b-1k, M: 1024, N: 4096}
- {label: llama70b-1k, M: 1024, N: 8192}
"""


def _pin(hypothesis: str, old: str, new: str) -> dict[str, str]:
    return {"hypothesis": hypothesis, "file": "rmsnorm.py", "old": old, "new": new}


RMSNORM_PLAN: dict[str, Any] = {
    "name": "rms",
    "files": {"shapes-heat.yaml": SHAPES},
    "init": ["--op-spec", "rmsnorm_spec.py", "--shapes", "shapes-heat.yaml", "--metric", "bwd-gbs"],
    "init_options": ["--pairs", "2", "--max-iterations", "20"],
    "prepare": True,
    "candidates": [
        _pin(
            "16 row tiles a backward program: the fp32 dweight partials shrink 16x",
            "BWD_TILES_PER_PROGRAM = 1 ",
            "BWD_TILES_PER_PROGRAM = 16 ",
        ),
        _pin(
            "4 row tiles a backward program: partials shrink 4x, four times the programs of 16",
            "BWD_TILES_PER_PROGRAM = 1 ",
            "BWD_TILES_PER_PROGRAM = 4 ",
        ),
        _pin(
            "8 warps a program: half the registers a thread holds, more loads in flight",
            "NUM_WARPS = 4 ",
            "NUM_WARPS = 8 ",
        ),
        _pin(
            "2-row tiles: the weight loaded once per two rows",
            "ROWS_PER_PROGRAM = 1 ",
            "ROWS_PER_PROGRAM = 2 ",
        ),
    ],
}


class Session:
    """The scratch repository and the log every command's output goes to."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root, self.log = root, log

    def run(self, *args: str, check: bool = True) -> tuple[subprocess.CompletedProcess[str], float]:
        """`args` in the scratch repository; (the finished process, its wall seconds)."""
        started = time.monotonic()
        done = subprocess.run(args, cwd=self.root, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        with self.log.open("a") as log:
            log.write(
                f"== {' '.join(args)}  ({seconds:.1f} s, exit {done.returncode})\n{done.stdout}{done.stderr}\n"
            )
        if check and done.returncode != 0:
            raise SystemExit(f"`{' '.join(args)}` failed (exit {done.returncode}):\n{done.stderr}")
        return done, seconds

    def campaign(self, *args: str, check: bool = True) -> tuple[subprocess.CompletedProcess[str], float]:
        return self.run(sys.executable, "-m", "gitcampaign", *args, check=check)

    def git(self, *args: str) -> str:
        return self.run("git", *args)[0].stdout.strip()

    def commit_edit(self, edit: dict[str, str]) -> None:
        """Make the round's one change (`old` -> `new` in `file`) and commit it with its lines."""
        path = self.root / edit["file"]
        text = path.read_text()
        if text.count(edit["old"]) != 1:
            raise SystemExit(f"{edit['file']} does not hold {edit['old']!r} once")
        path.write_text(text.replace(edit["old"], edit["new"]))
        change = f"{edit['file']}: {edit['old'].strip()} -> {edit['new'].strip()}"
        message = [
            "-m",
            edit["hypothesis"],
            "-m",
            f"Hypothesis: {edit['hypothesis']}",
            "-m",
            f"Change: {change}",
        ]
        # --no-verify: the pre-commit hook's tests (a minute for five commits on a GPU) run again in
        # validate, whose gates are what this measures.
        self.git("commit", "-q", "--no-verify", "-a", *message)


def measurement_seconds(phases: dict[str, float]) -> float:
    """The harness runs of a validation: its screen and its measurement sessions."""
    return round(
        sum(
            s for name, s in phases.items() if name == "heat screen" or name.startswith("measurement session")
        ),
        1,
    )


def figures(done: subprocess.CompletedProcess[str], wall: float) -> dict[str, Any]:
    """A validation's figures from its `--json` output: its wall, device and measurement seconds."""
    result = json.loads(done.stdout)
    phases = result.get("phase_seconds", {})
    return {
        "wall_s": round(wall, 1),
        "device_s": result["device_seconds"],
        "measurement_s": measurement_seconds(phases),
        "phases": phases,
        "result": result,
    }


def alone(plan: dict[str, Any], result: dict[str, Any], root: Path) -> dict[str, str]:
    """The candidate to validate alone on the head the heat left (`result`: the heat's JSON). Where
    the heat accepted none, the one it confirmed, made again as a plain round: the heat's
    confirmation is that candidate's own validation (probe included), so heat / single is what the
    other candidates and the screen cost. Where it accepted one, the first loser whose change still
    applies there (each pin is one line: it does unless it was the winner's own line)."""
    # The heat's rounds are numbered from 2 (the baseline is round 1) in the order they were opened.
    accepted, confirmed = result["accepted"], result["confirmed"]
    if not accepted and confirmed:
        return dict(plan["candidates"][confirmed - 2])
    winner = plan["candidates"][accepted - 2]["hypothesis"] if accepted else None
    losers = [edit for edit in plan.get("single", plan["candidates"]) if edit["hypothesis"] != winner]
    return next(edit for edit in losers if (root / edit["file"]).read_text().count(edit["old"]) == 1)


def ratio(heat: float | None, single: float | None) -> float | None:
    return round(heat / single, 3) if heat and single else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument(
        "--project", type=Path, default=REPO / "examples" / "rmsnorm", help="copied, without .git"
    )
    parser.add_argument("--plan", type=Path, help="a JSON plan like RMSNORM_PLAN (default: the RMSNorm one)")
    args = parser.parse_args()
    plan = json.loads(args.plan.read_text()) if args.plan else RMSNORM_PLAN
    out = args.outdir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "campaign.log").write_text("")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    os.environ["GITCAMPAIGN_PYTHON"] = sys.executable  # what the installed hooks run
    os.environ.setdefault("PYTHONUNBUFFERED", "1")

    root = Path(tempfile.mkdtemp(prefix="heat-cost-")) / "project"
    shutil.copytree(args.project, root, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    for name, content in plan.get("files", {}).items():
        (root / name).write_text(content)
    session = Session(root, out / "campaign.log")
    session.git("init", "-q", "-b", "main")
    session.git("config", "user.name", "heat cost")
    session.git("config", "user.email", "heat-cost@gitcampaign.invalid")
    session.git("add", ".")
    session.git("commit", "-q", "-m", "The project a heat is measured on")
    gpu = (
        shutil.which("nvidia-smi")
        and session.run("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")[
            0
        ].stdout.strip()
    )
    versions = session.run(
        sys.executable,
        "-c",
        "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)",
    )[0].stdout
    (out / "versions.txt").write_text(f"{gpu or 'no GPU (CPU)'}\n{versions}")

    name = plan["name"]
    gpu_name = ["--gpu", gpu.split(",")[0].strip()] if gpu else []
    session.campaign("init", name, *plan["init"], *gpu_name, *plan.get("init_options", []))
    if plan.get("prepare"):
        session.campaign("prepare")
    _, baseline_s = session.campaign("baseline")

    summary: dict[str, Any] = {
        "gpu": gpu or None,
        "versions": versions.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python3", "benchmarks/heat_cost.py", *sys.argv[1:]]),
        "candidates": len(plan["candidates"]),
        "base": session.git("rev-parse", f"campaign/{name}/main"),
        "baseline_wall_s": round(baseline_s, 1),
    }
    for edit in plan["candidates"]:
        session.campaign("round", "--heat", "-m", edit["hypothesis"])
        session.commit_edit(edit)
    session.git("checkout", "-q", f"campaign/{name}/main")
    heat_run, heat_s = session.campaign("validate", "--heat", "--json")
    heat = summary["heat"] = figures(heat_run, heat_s)
    (out / "heat_cost.json").write_text(json.dumps(summary, indent=2))  # kept should the rest not finish
    session.git("checkout", "-q", f"campaign/{name}/main")
    single_edit = alone(plan, heat["result"], root)
    session.campaign("round", "-m", single_edit["hypothesis"])
    session.commit_edit(single_edit)
    single_run, single_s = session.campaign("validate", "--json")
    single = figures(single_run, single_s)
    summary["single"] = {
        **single,
        "round": single["result"]["round"],
        "hypothesis": single_edit["hypothesis"],
    }
    summary["ratios"] = {
        key: ratio(heat[key], single[key]) for key in ("wall_s", "device_s", "measurement_s")
    }
    (out / "heat_cost.json").write_text(json.dumps(summary, indent=2))
    session.campaign("export", name, str(out / "lineage.bundle"), "--self-contained")
    (out / "log.txt").write_text(session.campaign("log")[0].stdout)
    (out / "rejected.txt").write_text(session.campaign("log", "--rejected")[0].stdout)
    (out / "status.txt").write_text(session.campaign("status")[0].stdout)
    notes = [
        session.run("git", "notes", "--ref", "refs/notes/campaign/verdict", "show", commit, check=False)[0]
        for commit in session.git("log", "--all", "--format=%H").split()
    ]
    (out / "verdicts.yaml").write_text("".join(note.stdout for note in notes))
    decided = ", ".join(
        f"round {r['round']} {r['decision']} {'/'.join(r['reasons'])}".rstrip()
        for r in heat["result"]["rounds"]
    )
    print(f"heat of {len(plan['candidates'])} on {gpu or 'the CPU'}: {decided}")
    print(f"single validate (round {single['result']['round']}): {single['result']['decision']}")
    print(f"{'':14}{'heat':>11}{'single':>11}{'heat/single':>13}")
    for key, label in (("wall_s", "wall s"), ("device_s", "device s"), ("measurement_s", "measurement s")):
        shown = [heat[key], single[key], summary["ratios"][key]]
        cells = ["-" if value is None else format(value, ".3g") for value in shown]
        print(f"{label:14}{cells[0]:>11}{cells[1]:>11}{cells[2]:>13}")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
