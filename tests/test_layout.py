"""The package's layout as the README states it: the verbs in gitcampaign/commands/ import no other verb
(what two of them share lives in a module of its own)."""

from __future__ import annotations

import ast
from pathlib import Path

COMMANDS = Path(__file__).resolve().parents[1] / "gitcampaign" / "commands"


def test_no_command_imports_another() -> None:
    crossing = []
    for path in sorted(COMMANDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            crossing += [f"{path.name}: {name}" for name in names if name.startswith("gitcampaign.commands")]
    assert crossing == []
