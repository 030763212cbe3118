"""The campaign in `fixtures/campaign-v1.bundle`, written by the tool before the domain layer:
baseline; round 2 accepted, 3 rejected, 4 rejected by a gate (harness edited), 5 rejected then
accepted by hand, 6 accepted then rolled back, 7 open (one commit, not validated)."""

from __future__ import annotations

from pathlib import Path

from fake_project import git

from gitcampaign.commands.trust import trust

FIXTURES = Path(__file__).parent / "fixtures"
NAME = "demo"


def restore(root: Path) -> Path:
    """The fixture's refs and notes in a fresh repository, checked out where it was left, its
    commands approved (it came from elsewhere: `git campaign trust`)."""
    root.mkdir()
    git(root, "init", "-q", "-b", "scratch")
    git(root, "fetch", "-q", str(FIXTURES / "campaign-v1.bundle"), "+refs/*:refs/*")
    git(root, "checkout", "-q", f"campaign/{NAME}/round-7")
    trust(root, NAME)
    return root
