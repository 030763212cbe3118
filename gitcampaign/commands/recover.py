"""`git campaign recover`: finish what a killed command left, and nothing else.

Every command that changes a campaign does this first; `status`, `log` and `show` only read, so
`status` reports what is left (`unfinished`) and names this verb.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import git as g


@dataclass
class RecoverResult:
    done: list[str]  # one line per thing finished: a branch move, stopped processes, removed worktrees

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def recover(repo_path: Path) -> RecoverResult:
    return RecoverResult(g.recover(g.open_repo(repo_path)))
