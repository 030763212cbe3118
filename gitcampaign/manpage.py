"""The `git-campaign(1)` man page, generated from the click definitions.

git turns `git campaign --help` into `git help campaign`, which runs `man git-campaign`: without a
man page that fails whatever our program could print, because git never starts it. The wheel
installs the committed page (man/git-campaign.1); `cli.install_man_page` copies it into an editable
install. This module renders the CLI, so it sits above it.

Regenerate with `python -m gitcampaign.manpage man/git-campaign.1` (a test fails when it is stale).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitcampaign import __version__
from gitcampaign.cli import cli

WIDTH = 80


def _roff(text: str) -> str:
    """Text for a no-fill block: backslashes and hyphens escaped, no line read as a request."""
    lines = []
    for line in text.replace("\\", "\\e").replace("-", "\\-").splitlines():
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def _help(command: click.Command, path: list[str], parent: click.Context | None) -> str:
    context = click.Context(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        help_option_names=command.context_settings.get("help_option_names", ["--help"]),
    )
    return command.get_help(context)


def _sections(command: click.Command, path: list[str], parent: click.Context | None) -> list[tuple[str, str]]:
    """(title, help text) for `command` and every subcommand below it, depth first."""
    context = click.Context(command, info_name=path[-1], parent=parent)
    found = [(" ".join(path), _help(command, path, parent))]
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                found += _sections(sub, [*path, name], context)
    return found


def render(group: click.Group) -> str:
    summary = " ".join((group.help or "").split("\n\n")[0].split())
    top, *commands = _sections(group, ["git campaign"], None)
    parts = [
        f'.TH GIT\\-CAMPAIGN 1 "" "gitcampaign {__version__}" "Git Manual"',
        ".SH NAME",
        f"git\\-campaign \\- {_roff(summary)}",
        ".SH SYNOPSIS",
        ".B git campaign",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
        ".nf",
        _roff(top[1]),
        ".fi",
        ".SH COMMANDS",
    ]
    for title, text in commands:
        parts += [f'.SS "{_roff(title)}"', ".nf", _roff(text), ".fi"]
    parts += [
        ".SH SEE ALSO",
        "\\fBgit\\fR(1), \\fBgit\\-notes\\fR(1), \\fBgit\\-worktree\\fR(1); "
        "`git campaign COMMAND -h` prints the same text for one command.",
        "",
    ]
    return "\n".join(parts)


def main() -> int:
    text = render(cli)
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text)  # the checkout's man/git-campaign.1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
