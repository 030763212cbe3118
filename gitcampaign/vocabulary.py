"""The words a campaign records: decisions and phases (in verdict notes), round statuses (in
`status`, `log` and the report). String enums, so a member is the very string written before they
existed: notes, YAML and JSON stay byte for byte what they were."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, Enum):
        __str__ = str.__str__
        __format__ = str.__format__


class Decision(StrEnum):
    BASELINE = "BASELINE"
    ACCEPT = "ACCEPT"
    ACCEPT_WITH_NOTE = "ACCEPT_WITH_NOTE"
    REJECT = "REJECT"

    @property
    def accepted(self) -> bool:
        return self in ACCEPTED


ACCEPTED = (Decision.ACCEPT, Decision.ACCEPT_WITH_NOTE)


class Phase(StrEnum):
    """Which command wrote a verdict document."""

    BASELINE = "BASELINE"
    VALIDATE = "VALIDATE"
    OVERRIDE = "OVERRIDE"
    REPORT = "REPORT"


class Status(StrEnum):
    """Where a round stands, as the refs and the notes that git's records back say."""

    BASELINE = "baseline"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    OPEN = "open"  # a round branch with its commit, not validated yet
    EMPTY = "empty"  # a round branch without its commit yet
    PENDING = "pending"  # decided and noted, refs not moved yet (an interrupted validate)
    DAMAGED = "damaged"  # on the accepted line, but its verdict note cannot be read or is not backed


# A round's commit message: one non-empty line of each (the commit-msg hook and `round --from` check).
HYPOTHESIS_RE = re.compile(r"^hypothesis:\s*\S", re.IGNORECASE)
CHANGE_RE = re.compile(r"^change:\s*\S", re.IGNORECASE)
MESSAGE_FORMAT = "Hypothesis: <what you expect and why>\nChange: <the one change this round makes>"


# A line that starts a message's next labelled paragraph (`Change:`), ending the one before it.
LABEL_RE = re.compile(r"^[A-Za-z][\w-]*:(\s|$)")


def hypothesis_of(message: str) -> str:
    """The text of a round commit message's `Hypothesis:` paragraph, its lines joined ('' without
    one): the labelled line and the lines that continue it, up to a blank line or the next label."""
    lines = message.splitlines()
    start = next((i for i, line in enumerate(lines) if HYPOTHESIS_RE.match(line)), None)
    if start is None:
        return ""
    text = [lines[start].split(":", 1)[1].strip()]
    for line in lines[start + 1 :]:
        if not line.strip() or LABEL_RE.match(line):
            break
        text.append(line.strip())
    return " ".join(text)


def missing_message_lines(lines: Iterable[str]) -> list[str]:
    """The labels (`Hypothesis:`, `Change:`) that no line of a round's commit message carries."""
    lines = list(lines)
    return [
        label
        for label, pattern in (("Hypothesis:", HYPOTHESIS_RE), ("Change:", CHANGE_RE))
        if not any(pattern.match(line) for line in lines)
    ]


def _raw(text: str) -> bytes:
    """The bytes `text` was decoded from: Python keeps bytes that were not UTF-8 (in argv, in git's
    output) as lone surrogates, and JSON can carry lone surrogates of its own."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def not_utf8(data: bytes | str) -> str | None:
    """Where `data` is not UTF-8 ("byte 0xe9 in line 2"), or None. A round's hypothesis and commit
    message end up in YAML notes and UTF-8 reports, so the commands refuse them up front."""
    raw = data if isinstance(data, bytes) else _raw(data)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return f"byte 0x{raw[exc.start]:02x} in line {line}"
    return None


def escape_not_utf8(text: str) -> str:
    """`text` with every byte that was not UTF-8 written as `\\xNN`: the byte kept, the text readable
    (what a round that skipped the checks carries into its verdict and the report)."""
    return _raw(text).decode("utf-8", "backslashreplace")


NOT_UTF8_HINT = "write it in UTF-8 (a UTF-8 locale in the terminal or editor, e.g. LANG=C.UTF-8)"
