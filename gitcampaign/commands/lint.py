"""`git campaign lint [PATHS]`: the static anti-cheat check, as text for people or JSON for agents."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from gitcampaign.lint import format_finding, lint_paths


def run_lint(paths: list[Path], as_json: bool) -> tuple[int, str]:
    """Lint `paths` (files or directories); exit code 1 when any finding blocks, and the text to print."""
    findings = lint_paths(paths)
    blocking = sum(f.blocking for f in findings)
    if as_json:
        document = {
            "findings": [{**asdict(f), "blocking": f.blocking} for f in findings],
            "blocking": blocking,
        }
        return (1 if blocking else 0), json.dumps(document, indent=2)
    lines = [format_finding(f) for f in findings]
    lines.append(f"campaign-lint: {blocking} blocking finding(s), {len(findings) - blocking} other(s)")
    return (1 if blocking else 0), "\n".join(lines)
