"""The static anti-cheat check on real kernel code no one here wrote: findings per project.

    python benchmarks/lint_corpus.py CORPUS_DIR [--judgments JUDGMENTS.csv] [--list]

CORPUS_DIR holds one folder per project (each searched recursively for `*.py`). The corpus is kept
out of this repository; the one the README's figure comes from was cut from these commits with
`git archive COMMIT PATHS | tar -x -C CORPUS_DIR/NAME`:

    liger          linkedin/Liger-Kernel       ead96b618e5c  src/liger_kernel/ops
    flaggems       FlagOpen/FlagGems           532ff438c703  src/flag_gems/ops src/flag_gems/fused
    unsloth        unslothai/unsloth           015bdef0d94a  unsloth/kernels
    primus         AMD-AGI/Primus-Turbo        a6a16cdce46b  primus_turbo/pytorch primus_turbo/triton
    tritonbench    pytorch-labs/tritonbench    0efdc53db965  tritonbench/operators
    tritonkernels  triton-lang/kernels         eeeebdd8be7d  kernels
    gptoss         openai/gpt-oss              7b583341fe16  gpt_oss/triton

Whether a finding is true (the pattern the rule names: a cache that serves a tensor by identity,
a side stream left unjoined, ...) or a false alarm is a person's call, recorded in a judgments CSV
(`project,path,line,rule,verdict,why` with verdict `true` or `false`, path relative to the
project folder). Findings without a judgment are counted as `unjudged`, so a lint change that
adds findings shows up instead of silently counting as right. Precision = true / (true + false).
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from gitcampaign.lint import Finding, lint_paths


@dataclass
class ProjectCount:
    name: str
    files: int
    findings: list[Finding]
    true: int = 0
    false: int = 0
    unjudged: int = 0


def read_judgments(path: Path | None) -> dict[tuple[str, str, int, str], bool]:
    if path is None:
        return {}
    judgments = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["project"], row["path"], int(row["line"]), row["rule"])
            judgments[key] = row["verdict"].strip().lower() == "true"
    return judgments


def count(corpus: Path, judgments: dict[tuple[str, str, int, str], bool]) -> list[ProjectCount]:
    counts = []
    for project in sorted(p for p in corpus.iterdir() if p.is_dir()):
        findings = lint_paths([project])
        tally = ProjectCount(project.name, sum(1 for _ in project.rglob("*.py")), findings)
        for finding in findings:
            relative = str(Path(finding.path).relative_to(project))
            verdict = judgments.get((project.name, relative, finding.line, finding.rule))
            if verdict is None:
                tally.unjudged += 1
            elif verdict:
                tally.true += 1
            else:
                tally.false += 1
        counts.append(tally)
    return counts


def table(counts: list[ProjectCount]) -> str:
    lines = ["| project | files | findings | true | false | unjudged |", "|---|---:|---:|---:|---:|---:|"]
    for c in counts:
        lines.append(f"| {c.name} | {c.files} | {len(c.findings)} | {c.true} | {c.false} | {c.unjudged} |")
    files = sum(c.files for c in counts)
    found = sum(len(c.findings) for c in counts)
    true, false = sum(c.true for c in counts), sum(c.false for c in counts)
    unjudged = sum(c.unjudged for c in counts)
    lines.append(f"| all | {files} | {found} | {true} | {false} | {unjudged} |")
    precision = f"{100 * true / (true + false):.0f}%" if true + false else "n/a (nothing judged)"
    lines.append(f"\nprecision: {precision}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="folder with one sub-folder per project")
    parser.add_argument("--judgments", type=Path, help="CSV of per-finding verdicts (see the docstring)")
    parser.add_argument("--list", action="store_true", help="also print every finding")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        parser.error(f"{args.corpus} is not a directory")
    counts = count(args.corpus, read_judgments(args.judgments))
    if args.list:
        for c in counts:
            for f in c.findings:
                print(
                    f"{c.name}: {Path(f.path).relative_to(args.corpus / c.name)}:{f.line}: {f.rule} {f.message}"
                )
        print()
    print(table(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
