"""L0 and the suppression comments it checks: `# campaign-lint: allow W2 -- why this is safe` on the
flagged line (several ids may be given comma-separated). The finding is still returned, with the
reason, so the verdict reports it."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Collection

from gitcampaign.lint.rule import Rule

RULE = Rule(
    "L0",
    "malformed suppression comment",
    "a suppression comment without a reason, or naming an unknown rule.",
)

SUPPRESS_RE = re.compile(
    r"campaign-lint:\s*allow\s+(?P<rules>[A-Z]\w*(?:\s*,\s*[A-Z]\w*)*)\s*(?:--(?P<reason>.*))?", re.IGNORECASE
)


def directives(
    source: str, known: Collection[str]
) -> tuple[dict[int, tuple[set[str], str]], list[tuple[int, str]]]:
    """({line: (rule ids allowed there, reason)}, [(line, L0 message)]) from the file's comments."""
    allowed: dict[int, tuple[set[str], str]] = {}
    malformed: list[tuple[int, str]] = []
    for line, comment in _comments(source).items():
        match = SUPPRESS_RE.search(comment)
        if match is None:
            continue
        rules = {r.strip().upper() for r in match["rules"].replace(",", " ").split() if r.strip()}
        reason = (match["reason"] or "").strip()
        unknown = sorted(rules - set(known))
        if unknown:
            malformed.append((line, f"suppression names unknown rule(s) {', '.join(unknown)}"))
        if not reason:
            malformed.append(
                (line, "suppression without a reason: write `# campaign-lint: allow ID -- why it is safe`")
            )
            continue
        allowed[line] = (rules, reason)
    return allowed, malformed


def _comments(source: str) -> dict[int, str]:
    """Comment text by line, from the tokenizer (so a directive inside a string does not count)."""
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string
    except (tokenize.TokenError, IndentationError):
        pass
    return comments
