"""The campaign as git holds it, read from the fixture campaign (written before the domain layer):
which campaign is meant, its rounds through their refs, the one-commit rule, the preamble."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_project import git
from fixture_campaign import NAME, restore

from gitcampaign import campaign as domain
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, campaigns, check_name, resolve
from gitcampaign.errors import CampaignError
from gitcampaign.vocabulary import Status


@pytest.fixture
def old(tmp_path: Path) -> Campaign:
    return Campaign(g.open_repo(restore(tmp_path / "old")), NAME)


def test_rounds_are_found_through_their_refs(old: Campaign) -> None:
    assert campaigns(old.repo) == [NAME]
    assert resolve(old.repo, None) == NAME  # from the checked-out round branch
    assert sorted(old.round_branches()) == [2, 3, 4, 5, 6, 7]
    assert sorted(old.rejected_pins()) == [3, 4, 6]
    assert old.next_round_number() == 8
    baseline, rounds = old.lineage()
    assert baseline and baseline[0].phase == "BASELINE"
    assert [(r.number, r.status) for r in rounds] == [
        (2, Status.ACCEPTED),
        (3, Status.REJECTED),
        (4, Status.REJECTED),
        (5, Status.ACCEPTED),
        (6, Status.REJECTED),
        (7, Status.OPEN),
    ]
    assert rounds[3].decision is not None and rounds[3].decision.phase == "OVERRIDE"


def test_a_branch_in_the_namespace_names_its_campaign(old: Campaign) -> None:
    git(Path(g.root(old.repo)), "checkout", "-q", "-b", f"campaign/{NAME}/scratch")
    assert resolve(old.repo, None) == NAME


def test_names_that_cannot_be_refs_are_refused(old: Campaign) -> None:
    for bad in ("", "a/b", "a..b", "x.lock", "-x", "n" * 65):
        with pytest.raises(CampaignError):
            check_name(bad)
    git(Path(g.root(old.repo)), "branch", "campaign/x")
    with pytest.raises(CampaignError, match="cannot be"):
        check_name("x", old.repo)  # branch `campaign/x` blocks the folder `campaign/x/`


def test_the_one_commit_rule(old: Campaign) -> None:
    head = old.accepted_head()
    tip = g.rev(old.repo, old.round_ref(7))
    assert domain.check_one_commit(old, 7, tip, head) == tip
    with pytest.raises(CampaignError, match="no commit yet"):
        domain.check_one_commit(old, 7, head, head)
    root = Path(g.root(old.repo))
    (root / "extra.txt").write_text("x\n")
    git(root, "add", "extra.txt")
    git(root, "commit", "-q", "--no-verify", "-m", "second")
    with pytest.raises(CampaignError, match="holds 2 commits") as two:
        domain.check_one_commit(old, 7, g.rev(old.repo, "HEAD"), head)
    assert "git reset --soft campaign/demo/main" in two.value.hint
    with pytest.raises(CampaignError, match="2 commits ahead"):
        domain.check_next_commit(old, 7, amending=False)
    with pytest.raises(CampaignError, match="does not start from the accepted head"):
        domain.check_one_commit(old, 7, g.rev(old.repo, old.rejected_ref(3)), head)  # off the line


def test_the_preamble_locks_and_requires_a_clean_tree(old: Campaign) -> None:
    root = Path(g.root(old.repo))
    (root / "kernel.py").write_text("dirty\n")
    with domain.locked(root, None) as found:  # no clean tree asked for
        assert found.name == NAME
        assert (g.common_dir(old.repo) / "campaign").exists()
    with (
        pytest.raises(CampaignError, match="uncommitted changes"),
        domain.locked(root, None, clean_for="do something"),
    ):
        pass


def test_notes_configuration(old: Campaign) -> None:
    domain.configure_notes(old.repo)
    domain.configure_notes(old.repo)  # idempotent: one value each
    assert git(Path(g.root(old.repo)), "config", "--get-all", "notes.displayRef").split() == [
        "refs/notes/campaign/*"
    ]


def test_manifest_commands_come_from_the_accepted_line(old: Campaign) -> None:
    assert old.manifest_command("test_command") == "python test_kernel.py"
    assert old.manifest_command("build_command") == ""
    assert old.manifest().quick_command == "python bench.py"
