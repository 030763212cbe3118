"""Shell completion through click: `git campaign completion bash|zsh|fish` prints the script to source.

Click completes the program it is told the name of, here `git-campaign`. For bash there is a second
way in: git's own completion (git-completion.bash) completes `git campaign ...` by calling a function
named `_git_campaign` when one exists, so the bash script defines it, shifting the words so that
click sees `git-campaign ...`.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from gitcampaign.errors import CampaignError

PROG = "git-campaign"
COMPLETE_VAR = "_GIT_CAMPAIGN_COMPLETE"  # click's default would derive it from "git campaign"
SHELLS = ("bash", "zsh", "fish")

_GIT_BASH_HOOK = """
# `git campaign <TAB>` through git's completion: drop "git", name the program as click expects.
_git_campaign() {
    local -a COMP_WORDS=("git-campaign" "${COMP_WORDS[@]:2}")
    local COMP_CWORD=$((COMP_CWORD - 1))
    _git_campaign_completion git-campaign
}
"""


def script(command: click.Command, shell: str) -> str:
    completion = get_completion_class(shell)
    if completion is None:
        raise CampaignError(f"no completion for shell {shell!r}", f"pick one of: {', '.join(SHELLS)}")
    source = completion(command, {}, PROG, COMPLETE_VAR).source()
    return source + (_GIT_BASH_HOOK if shell == "bash" else "")
