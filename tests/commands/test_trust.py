"""A campaign that arrives from elsewhere runs nothing until this clone approves its commands, and
its commands are frozen at the baseline like the harness (issue 36, section 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import trust as trust_rule
from gitcampaign.campaign import Campaign
from gitcampaign.cli import main
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.bundle import export, import_bundle
from gitcampaign.commands.hooks import run_pre_commit
from gitcampaign.commands.init import init
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.pull import pull
from gitcampaign.commands.push import push
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.status import status
from gitcampaign.commands.trust import trust
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.loop import run_next
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop import NAME, commit_round, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402


def marked(marker: Path) -> str:
    """The fake project's test command, leaving a mark wherever it runs."""
    return f"{sys.executable} test_kernel.py && echo ran >> {marker}"


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """Alice made the campaign and its baseline and pushed it; Bob cloned the project and pulled it."""
    alice = make_project(tmp_path / "alice")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(alice), str(origin)], check=True)
    git(alice, "remote", "add", "origin", str(origin))
    monkeypatch.chdir(alice)
    init(alice, options(test_command=marked(tmp_path / "alice-ran")))
    baseline(alice, None)
    push(alice, None)
    bob = tmp_path / "bob"
    subprocess.run(["git", "clone", "-q", str(origin), str(bob)], check=True)
    pull(bob, NAME)
    return alice, bob, origin


def test_init_approves_its_own_campaign(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    alice, _, _ = team
    assert (tmp_path / "alice-ran").read_text().count("ran") == 1  # the baseline's tests ran
    commit_round(alice, "faster", 120)
    assert validate(alice, None).decision == Decision.ACCEPT


def test_a_pulled_campaign_runs_nothing_until_approved(
    team: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, bob, _ = team
    (tmp_path / "alice-ran").unlink()
    commit_round(bob, "faster", 120)
    head = git(bob, "rev-parse", CampaignRef.main(NAME).branch).strip()
    with pytest.raises(CampaignError, match="not approved in this clone") as refused:
        validate(bob, None)
    assert "echo ran >>" in refused.value.message and "quick_command" in refused.value.message
    assert refused.value.hint.endswith(f"git campaign trust --campaign {NAME}")
    with pytest.raises(CampaignError, match="not approved in this clone"):
        run_next(bob, None)
    git(bob, "checkout", "-q", CampaignRef.round_branch(NAME, 2).branch)
    code, text = run_pre_commit(bob)
    assert code == 1 and f"git campaign trust --campaign {NAME}" in text
    git(bob, "checkout", "-q", CampaignRef.main(NAME).branch)
    assert "git campaign trust" in status(bob, None).next
    assert main(["-C", str(bob), "validate"]) == 1
    assert "git campaign trust" in capsys.readouterr().err
    assert not (tmp_path / "alice-ran").exists()  # nothing ran anywhere
    assert git(bob, "rev-parse", CampaignRef.main(NAME).branch).strip() == head

    approved = trust(bob, None)
    assert approved.commands["test_command"] == marked(tmp_path / "alice-ran") and approved.newly
    assert not trust(bob, None).newly  # approving again changes nothing
    assert validate(bob, None).decision == Decision.ACCEPT
    assert (tmp_path / "alice-ran").exists()
    # Stored in the clone's git dir: nothing in the tree, no ref that could travel.
    assert git(bob, "status", "--porcelain") == ""
    assert not [ref for ref in git(bob, "for-each-ref", "--format=%(refname)").split() if "trust" in ref]


def test_a_changed_command_set_asks_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the baseline the commands may still change; a change made elsewhere and pulled is not
    approved by the approval of the set before it."""
    alice = make_project(tmp_path / "alice")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(alice), str(origin)], check=True)
    git(alice, "remote", "add", "origin", str(origin))
    monkeypatch.chdir(alice)
    init(alice, options())
    push(alice, None)
    bob = tmp_path / "bob"
    subprocess.run(["git", "clone", "-q", str(origin), str(bob)], check=True)
    pull(bob, NAME)
    trust(bob, None)
    manifest = alice / "campaigns" / NAME / "manifest.yaml"
    fields = yaml.safe_load(manifest.read_text())
    fields["build_command"] = f"echo pwned >> {tmp_path / 'pwned'}"
    manifest.write_text(yaml.safe_dump(fields, sort_keys=False))
    git(alice, "commit", "-q", "-am", "build step")
    push(alice, None)
    pull(bob, NAME)
    with pytest.raises(CampaignError, match="not approved in this clone") as refused:
        baseline(bob, None)
    assert "changed since this clone approved them: build_command" in refused.value.message
    assert not (tmp_path / "pwned").exists()


def test_a_swapped_file_of_the_campaign_asks_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The approval covers the files of the campaign's folder the commands run, not only their
    names: the same command running another harness file asks again."""
    alice = make_project(tmp_path / "alice")
    (alice / "kernels").mkdir()
    (alice / "kernels" / "gemm.py").write_text("def gemm(a, b):\n    return a @ b.T\n")  # what it measures
    git(alice, "add", ".")
    git(alice, "commit", "-q", "-m", "a gemm")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(alice), str(origin)], check=True)
    git(alice, "remote", "add", "origin", str(origin))
    monkeypatch.chdir(alice)
    harness = f"campaigns/{NAME}/{C.HARNESS_FILE}"
    init(alice, options(op="gemm", quick_command=f"python {harness}", test_command=""))
    prepare(alice, None, install_hooks=False)  # copies the tool's harness; alice's approval follows it
    assert trust_rule.pending(Campaign(g.open_repo(alice), NAME)) is None
    push(alice, None)
    bob = tmp_path / "bob"
    subprocess.run(["git", "clone", "-q", str(origin), str(bob)], check=True)
    pull(bob, NAME)
    prepare(bob, None, install_hooks=False)  # nothing to copy, and approves nothing
    shown = trust_rule.pending(Campaign(g.open_repo(bob), NAME))
    assert shown is not None and harness in shown.files
    trust(bob, None)
    (alice / harness).write_text("import os\nos.system('echo pwned')\n")
    git(alice, "commit", "-q", "-am", "a friendlier harness")
    push(alice, None)
    pull(bob, NAME)
    with pytest.raises(CampaignError, match=f"changed since this clone approved them: {harness}") as refused:
        baseline(bob, None)
    assert f"runs {harness} (blob " in refused.value.message


def test_an_imported_campaign_says_it_needs_approval(
    team: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, _, origin = team
    bundle = Path(export(alice, NAME, tmp_path / "alice.bundle").path)
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    assert main(["-C", str(fresh), "import", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert f"campaign {NAME}'s commands are not approved in this clone" in out
    assert f"git campaign trust --campaign {NAME}" in out and "test_command:" in out
    with pytest.raises(CampaignError, match="not approved"):
        report(fresh, None, force=True)
    assert main(["-C", str(fresh), "trust", "--campaign", NAME]) == 0
    assert "approved" in capsys.readouterr().out
    assert main(["-C", str(fresh), "import", str(bundle)]) == 0
    assert "not approved" not in capsys.readouterr().out
    # A pull of a campaign this clone approved says nothing more either.
    import_bundle(fresh, bundle)


def test_pull_says_when_the_campaign_needs_approval(
    team: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, origin = team
    carol = tmp_path / "carol"
    subprocess.run(["git", "clone", "-q", str(origin), str(carol)], check=True)
    assert main(["-C", str(carol), "pull", "origin", "--campaign", NAME]) == 0
    assert f"git campaign trust --campaign {NAME}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "field",
    [
        "test_command",
        "build_command",
        "quick_command",
        "probe_command",
        "benchmark_command",
        "acceptance_command",
    ],
)
def test_commands_are_frozen_at_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """A commit on the accepted line that sets `test_command: 'true'` (or changes any command) is
    refused; the broken round after it is never accepted."""
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, options())
    baseline(root, None)
    path = root / "campaigns" / NAME / "manifest.yaml"
    fields = yaml.safe_load(path.read_text())
    fields[field] = "true" if field != "quick_command" else fields[field] + " --fast"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    git(root, "commit", "-q", "-am", "relax the tests")
    trust(root, None)  # approving the new commands here does not unfreeze them
    with pytest.raises(CampaignError, match=f"{field} changed"):
        open_round(root, None, "skip the edge cases")
    git(root, "checkout", "-q", "-b", f"campaign/{NAME}/round-2")
    set_kernel(root, 300, edge_cases_ok=False)
    git(root, "commit", "-q", "--no-verify", "-am", "Hypothesis: h\nChange: c")
    for command in (lambda: validate(root, None), lambda: report(root, None, force=True)):
        with pytest.raises(CampaignError, match=f"{field} changed by hand since the baseline") as refused:
            command()
        assert "frozen" in refused.value.message
        assert "git campaign init" in refused.value.hint and "git checkout" in refused.value.hint
    assert g.rev(g.open_repo(root), CampaignRef.main(NAME).branch) == git(root, "rev-parse", "HEAD~1").strip()
