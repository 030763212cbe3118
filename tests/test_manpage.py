"""git's conventions: `git campaign --help` opens the generated man page; click's shell completion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitcampaign import manpage
from gitcampaign.cli import MAN_PAGE, cli, install_man_page
from gitcampaign.completion import script

REPO_ROOT = Path(__file__).resolve().parents[1]
COMMITTED = REPO_ROOT / "man" / MAN_PAGE


def test_committed_page_is_generated_from_the_cli() -> None:
    assert COMMITTED.read_text() == manpage.render(cli), (
        "man/git-campaign.1 is stale: python -m gitcampaign.manpage man/git-campaign.1"
    )
    page = COMMITTED.read_text()
    for verb in ("validate", "report", "mcp", "plot", "next", "hooks install"):
        assert f'.SS "git campaign {verb}"' in page, verb


def _fake_prefix(tmp_path: Path) -> Path:
    """An installation prefix as pip lays one out: bin/git-campaign, and the page copied on first run."""
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    launcher = prefix / "bin" / "git-campaign"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gitcampaign "$@"\n')
    launcher.chmod(0o755)
    return prefix


def test_editable_install_gets_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = _fake_prefix(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    written = install_man_page()
    assert written == prefix / "share" / "man" / "man1" / MAN_PAGE
    assert written.read_bytes() == COMMITTED.read_bytes()
    assert install_man_page() is None  # up to date: nothing rewritten


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man (CI installs man-db)")
def test_git_campaign_help_opens_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = _fake_prefix(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    install_man_page()
    env = {key: value for key, value in os.environ.items() if key != "MANPATH"}
    # man derives its search path from PATH: <prefix>/bin -> <prefix>/share/man.
    env.update(PATH=f"{prefix / 'bin'}:/usr/bin:/bin", MANPAGER="cat", PAGER="cat", MANWIDTH="100")
    done = subprocess.run(
        ["git", "campaign", "--help"], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "GIT-CAMPAIGN(1)" in done.stdout and "git campaign validate" in done.stdout


def test_click_completion_protocol_and_git_hook(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.update(_GIT_CAMPAIGN_COMPLETE="bash_complete", COMP_WORDS="git-campaign val", COMP_CWORD="1")
    done = subprocess.run([sys.executable, "-m", "gitcampaign"], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["plain,validate"]
    if shutil.which("bash") is None:
        return
    prefix = _fake_prefix(tmp_path)
    completion = tmp_path / "completion.bash"
    completion.write_text(script(cli, "bash"))
    # What git-completion.bash does for `git campaign ro<TAB>`: call _git_campaign with git's words.
    shell = f'source {completion}; COMP_WORDS=(git campaign ro); COMP_CWORD=2; _git_campaign; echo "${{COMPREPLY[@]}}"'
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["rollback", "round"], done.stderr
