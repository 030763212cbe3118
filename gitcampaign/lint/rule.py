"""A rule row: the stable id, the summary a finding shows and the description the docs list. Each
rule family module declares its rows next to the visitor that reports them."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One rule: its stable id, the one-line summary findings and `--rules` show, the description
    the package docstring lists, and whether a finding fails the gate (W1 only informs)."""

    id: str
    summary: str
    description: str
    blocking: bool = True

    def doc_entry(self) -> str:
        text = ("(info, not blocking) " if not self.blocking else "") + self.description
        return textwrap.fill(text, 104, initial_indent=f"- {self.id}  ", subsequent_indent=" " * 6)
