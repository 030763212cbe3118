"""Static anti-cheat check: code patterns that win a benchmark and lose real training.

A campaign's harness gives every repeat fresh inputs and checks the very calls it times (see the
quick harness), so most cheats fail there at run time however they are spelled. These AST rules
add what only the source shows, and name the patterns the static gate (docs/design.md, Gates)
forbids. Each finding says why the pattern breaks real training.

What a name is (a tensor, a weight, a dict) is inferred once per scope (`scope`), the same for
every rule; each rule family is one visitor next to its rule rows (`caches`, `group_m`, `timers`,
`side_work`, `fallback`, `detection`), handed every node by one walk (`walk`), which skips the
bodies of device code (`@triton.jit` and other DSL kernels).

Rules (ids are stable: verdict notes and suppression comments name them):

{rules}

Suppression: `# campaign-lint: allow W2 -- why this is safe` on the flagged line (several ids may be
given comma-separated). The finding is still returned, with the reason, so the verdict reports it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gitcampaign.lint import suppress
from gitcampaign.lint.caches import Caches
from gitcampaign.lint.detection import HARNESS_NAMES, Detection
from gitcampaign.lint.fallback import Fallback
from gitcampaign.lint.group_m import GroupM
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.side_work import SideWork
from gitcampaign.lint.timers import Timers
from gitcampaign.lint.walk import walk

__all__ = [
    "HARNESS_NAMES",
    "INFO_RULES",
    "RULES",
    "RULE_TABLE",
    "Finding",
    "Rule",
    "format_finding",
    "lint_paths",
    "lint_source",
]

FAMILIES = (Caches, GroupM, Timers, SideWork, Fallback, Detection)

PARSE_RULE = Rule(
    "E0", "file cannot be parsed", "a file that cannot be read or parsed: the check cannot vouch for it."
)

RULE_TABLE: tuple[Rule, ...] = (
    *(rule for family in FAMILIES for rule in family.RULES),
    suppress.RULE,
    PARSE_RULE,
)
RULES = {rule.id: rule.summary for rule in RULE_TABLE}
INFO_RULES = frozenset(rule.id for rule in RULE_TABLE if not rule.blocking)
__doc__ = (__doc__ or "").replace("{rules}", "\n".join(rule.doc_entry() for rule in RULE_TABLE))


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    line: int
    message: str
    suppressed_reason: str | None = None

    @property
    def blocking(self) -> bool:
        """Whether this finding fails the gate: not informational and not suppressed with a reason."""
        return self.rule not in INFO_RULES and self.suppressed_reason is None


def lint_source(source: str, path: str) -> list[Finding]:
    """All findings in one Python source, suppressions applied, sorted by line."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [Finding("E0", path, line, f"cannot parse ({exc}): the anti-cheat check cannot vouch for it")]
    allowed, malformed = suppress.directives(source, RULES.keys())
    found = [Finding("L0", path, line, message) for line, message in malformed]
    for rule, line, message in walk(tree, path, FAMILIES):
        rules, reason = allowed.get(line, (set(), None))
        found.append(Finding(rule, path, line, message, reason if rule in rules else None))
    unique = {(f.rule, f.line, f.message): f for f in found}
    return sorted(unique.values(), key=lambda f: (f.line, f.rule))


def lint_paths(paths: Iterable[Path]) -> list[Finding]:
    """Findings in every Python file among `paths` (directories are searched recursively; named
    files that are not `.py`/`.pyi` are skipped, so `git campaign lint $(git diff --name-only)` works)."""
    findings: list[Finding] = []
    for file in _python_files(paths):
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            findings.append(
                Finding("E0", str(file), 1, f"cannot read ({exc}): the check cannot vouch for it")
            )
            continue
        findings.extend(lint_source(source, str(file)))
    return findings


def _python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if p.is_file())
        elif path.suffix in (".py", ".pyi"):
            yield path


def format_finding(finding: Finding) -> str:
    """`path:line: ID message`, marked when the finding is informational or suppressed."""
    if finding.suppressed_reason is not None:
        tag = f" (suppressed: {finding.suppressed_reason})"
    elif not finding.blocking:
        tag = " (info)"
    else:
        tag = ""
    return f"{finding.path}:{finding.line}: {finding.rule}{tag} {finding.message}"
