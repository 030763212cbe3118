"""How long the tool's own bookkeeping takes on a campaign with many rounds (issue: < 0.5 s a command).

Builds a scratch repository whose campaign has a baseline and ROUNDS finished rounds (two accepted
in three, the rest rejected and pinned, each with its CSV and verdict notes), written with git
plumbing so that building it takes seconds, then times the read commands as a user runs them
(`git campaign ...` in a fresh process, so interpreter start-up and imports count) and, in-process,
the lineage read that every mutating command does before it runs the harness.

    python benchmarks/bookkeeping.py [--rounds 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.campaign import Campaign
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.lineage import lineage_rows
from gitcampaign.manifest import NoiseFloor, parse_manifest, sha256_bytes
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision

NAME = "bench"
SHAPES = "- {label: a, M: 64, N: 64, K: 64}\n- {label: b, M: 128, N: 64, K: 64}\n- {label: c, M: 256, N: 64, K: 64}\n"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def build(root: Path, rounds: int) -> None:
    _git(root, "init", "-q", "-b", "main")
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        _git(root, "config", key, value)
    (root / "kernel.py").write_text("SPEED = 0\n")
    (root / "shapes.yaml").write_text(SHAPES)
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "project")
    init(
        root,
        InitOptions(
            name=NAME,
            op="bench",
            shapes=str(root / "shapes.yaml"),
            quick_command="true",
            probe_command="",
            test_command="true",
            max_iterations=rounds + 10,
        ),
    )
    repo = g.open_repo(root)
    campaign = Campaign(repo, NAME)
    manifest = campaign.manifest()
    manifest.csv_header, manifest.representative_shapes = C.GEMM_HEADER, ["a", "b", "c"]
    manifest.csv_header_sha256 = sha256_bytes(C.GEMM_HEADER.encode())
    manifest.noise_floor = NoiseFloor(0.01, {"a": 0.01, "b": 0.01, "c": 0.01})
    parse_manifest(manifest.to_yaml(), "check")
    csv = (C.GEMM_HEADER + "\n" + "a,1,64,64,64,PASS,1,0,1,0,1,1,60,60,60\n").encode()
    base = g.commit_files(
        repo,
        campaign.main_branch,
        {manifest.path: manifest.to_yaml()},
        "baseline",
        notes={
            C.NOTES_BENCH: csv,
            C.NOTES_FULL: csv,
            C.NOTES_VERDICT: verdict.render(
                {
                    "campaign": NAME,
                    "round": 1,
                    "phase": "BASELINE",
                    "decision": "BASELINE",
                    "measured_commit": g.rev(repo, campaign.main_ref),
                    "aggregate": {"quick": 100.0},
                }
            ),
        },
    )
    head = base
    for number in range(2, rounds + 2):
        (root / "kernel.py").write_text(f"SPEED = {number}\n")
        blob = g.write_blob(repo, (root / "kernel.py").read_bytes())
        listing = _tree_listing(repo, head, blob)
        tree = subprocess.run(
            ["git", "-C", str(root), "mktree"], input=listing, capture_output=True, text=True, check=True
        ).stdout.strip()
        commit = g.commit_tree(repo, tree, head, f"Hypothesis: idea {number}\nChange: speed {number}\n")
        accepted = number % 3 != 0
        g.write_note(repo, C.NOTES_BENCH, commit, csv)
        verdict.append(
            repo,
            commit,
            {
                "campaign": NAME,
                "round": number,
                "phase": "VALIDATE",
                "hypothesis": f"idea {number}",
                "decision": Decision.ACCEPT if accepted else Decision.REJECT,
                "reasons": [] if accepted else [C.REASON_NOT_FASTER],
                "ratio": 1.01 if accepted else 0.98,
                "shapes": {s: {"check": "PASS", "ratio": 1.01} for s in "abc"},
                "incumbent": head,
                "commit": commit,
            },
        )
        branch = str(CampaignRef.round_branch(NAME, number))
        if accepted:
            g.update_ref(repo, campaign.main_ref, commit, head, "accept")
            g.update_ref(repo, branch, commit, None, "round")
            head = commit
        else:
            g.update_ref(repo, str(CampaignRef.rejected(NAME, number)), commit, None, "pin")
            g.update_ref(repo, branch, head, None, "round")
    _git(root, "checkout", "-q", "-f", campaign.main_branch)


def _tree_listing(repo: Repo, head: str, kernel_blob: str) -> str:
    """`head`'s tree listing with kernel.py swapped for a new blob (input of `git mktree`)."""
    listing = repo.git.ls_tree(head)
    lines = []
    for line in listing.splitlines():
        meta, path = line.split("\t")
        if path == "kernel.py":
            meta = meta.rsplit(" ", 1)[0] + " " + kernel_blob
        lines.append(f"{meta}\t{path}")
    return "\n".join(lines) + "\n"


def timed(argv: list[str], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        start = time.perf_counter()
        build(root, args.rounds)
        print(f"built {args.rounds} rounds in {time.perf_counter() - start:.1f} s")
        tool = [sys.executable, "-m", "gitcampaign", "-C", str(root)]
        rows = [
            (
                "python -c pass (interpreter start-up alone)",
                timed([sys.executable, "-c", "pass"], args.repeats),
            )
        ]
        for verb in (
            ["status"],
            ["log"],
            ["log", "--json"],
            ["show", str(args.rounds // 2)],
            ["status", "--json"],
        ):
            rows.append((f"git campaign {' '.join(verb)}", timed([*tool, *verb], args.repeats)))
        campaign = Campaign(g.open_repo(root), NAME)
        samples = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            _, lineage = lineage_rows(campaign)
            samples.append(time.perf_counter() - start)
        rows.append((f"lineage read in-process ({len(lineage)} rows)", statistics.median(samples)))
        width = max(len(name) for name, _ in rows)
        for name, seconds in rows:
            print(f"{name:<{width}}  {seconds * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
