"""push / pull between two clones and a bare remote, and export / import through a bundle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import sync, verdict
from gitcampaign.cli import show_text, status_text
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.bundle import default_path, export, import_bundle
from gitcampaign.commands.init import init
from gitcampaign.commands.pull import pull
from gitcampaign.commands.push import push
from gitcampaign.commands.round import open_round
from gitcampaign.commands.show import show
from gitcampaign.commands.status import status
from gitcampaign.commands.trust import trust
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from commands.test_loop import NAME, commit_round, options  # noqa: E402
from fake_project import git, make_project, set_kernel  # noqa: E402


def refs(root: Path) -> dict[str, str]:
    """Every campaign ref of a clone (branches, pins, notes)."""
    return sync.campaign_refs(g.open_repo(root), NAME)


def notes(root: Path) -> dict[str, dict[str, str]]:
    repo = g.open_repo(root)
    return {ref: g.note_blobs(repo, ref) for ref in sync.NOTES_REFS}


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """Alice ran init + baseline and pushed; Bob cloned the project (main only), pulled, and approved
    the campaign's commands (tests/commands/test_trust.py: before that, they run nothing)."""
    alice = make_project(tmp_path / "alice")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(alice), str(origin)], check=True)
    git(alice, "remote", "add", "origin", str(origin))
    monkeypatch.chdir(alice)
    init(alice, options())
    baseline(alice, None)
    push(alice, None)
    bob = tmp_path / "bob"
    subprocess.run(["git", "clone", "-q", str(origin), str(bob)], check=True)
    pull(bob, NAME)
    trust(bob, NAME)
    return alice, bob, origin


def test_pull_brings_the_campaign_byte_for_byte(team: tuple[Path, Path, Path]) -> None:
    alice, bob, origin = team
    assert refs(bob) == refs(alice) == refs(origin)
    assert notes(bob) == notes(alice)
    assert "Notes (campaign/verdict)" in git(
        bob, "log", "-1", CampaignRef.main(NAME).branch
    )  # notes config set
    state = status(bob, NAME)
    text, data = status_text(state), state.to_json()
    assert data["remotes"] == {"origin": {"ahead": [], "behind": [], "diverged": []}}
    assert "origin: in sync" in text
    commit_round(alice, "bigger tiles", 120)
    push(alice, None)
    assert status(bob, NAME).to_json()["remotes"]["origin"]["behind"] == []  # no network unless asked
    behind = status(bob, NAME, fetch=True).to_json()["remotes"]["origin"]["behind"]
    assert behind == [f"refs/heads/{CampaignRef.round_branch(NAME, 2).branch}"]
    commit_round(bob, "other", 90)  # Bob (not pulled) opens his own round 2 at another commit
    assert "diverged on 1 ref(s)" in status_text(status(bob, NAME))


@pytest.mark.parametrize("first", ["alice", "bob"])
def test_two_people_validate_different_rounds_and_push_in_either_order(
    team: tuple[Path, Path, Path], first: str
) -> None:
    alice, bob, origin = team
    rejected = commit_round(alice, "smaller tiles", 80)  # Alice claims round 2 and publishes it
    push(alice, None)
    pull(bob, None)
    accepted = commit_round(bob, "bigger tiles", 120)  # Bob opens round 3 beside Alice's open round
    assert git(bob, "branch", "--show-current").strip() == CampaignRef.round_branch(NAME, 3).branch
    assert validate(alice, None, probe=False).decision == Decision.REJECT
    assert validate(bob, None, probe=False).decision in ACCEPTED

    one, other = (alice, bob) if first == "alice" else (bob, alice)
    push(one, None)
    before = refs(origin)
    with pytest.raises(CampaignError, match="git campaign pull") as refused:
        push(other, None)
    assert "nothing was pushed" in refused.value.message
    assert refs(origin) == before
    assert "diverged" in status_text(status(other, NAME))
    merged = pull(other, None)
    assert not merged.merges  # different commits: the notes merge has nothing to decide
    push(other, None)
    pull(one, None)

    assert refs(alice) == refs(bob) == refs(origin)
    assert notes(alice) == notes(bob)
    repo = g.open_repo(alice)
    assert g.rev(repo, str(CampaignRef.rejected(NAME, 2))) == rejected
    assert g.rev(repo, f"refs/heads/{CampaignRef.round_branch(NAME, 2).branch}") == g.parent(
        repo, rejected
    )  # reset kept
    assert g.rev(repo, f"refs/heads/{CampaignRef.main(NAME).branch}") == accepted
    for commit in (rejected, accepted):  # each round's CSV and verdict arrived intact
        assert g.read_note(repo, C.NOTES_BENCH, commit) is not None
        assert len(verdict.read(repo, commit)) == 1


def test_diverged_accepted_lines_stop_the_pull_and_change_nothing(team: tuple[Path, Path, Path]) -> None:
    alice, bob, _ = team
    commit_round(alice, "bigger tiles", 120)
    validate(alice, None, probe=False)
    push(alice, None)
    commit_round(bob, "wider tiles", 130)  # Bob did not pull: his round 2 is another commit
    validate(bob, None, probe=False)
    before = refs(bob)
    with pytest.raises(CampaignError, match="accepted line is linear") as refused:
        pull(bob, None)
    assert "round-2" in refused.value.message and "nothing was changed" in refused.value.message
    assert refs(bob) == before


def test_conflicting_verdicts_are_both_kept_and_shown(team: tuple[Path, Path, Path]) -> None:
    alice, bob, _ = team
    commit = commit_round(alice, "bigger tiles", 120)
    push(alice, None)
    pull(bob, None)
    for clone, decision, csv in ((alice, Decision.ACCEPT, b"alice\n"), (bob, Decision.REJECT, b"bob\n")):
        repo = g.open_repo(clone)
        verdict.append(
            repo, commit, {"campaign": NAME, "round": 2, "phase": "VALIDATE", "decision": decision}
        )
        verdict.write_csv_note(repo, C.NOTES_BENCH, commit, csv)
    push(alice, None)
    result = pull(bob, None)
    assert any("differs between the two sides" in line for line in result.merges)
    assert any("decided differently" in line for line in result.merges)
    repo = g.open_repo(bob)
    assert g.read_note(repo, C.NOTES_BENCH, commit) == b"alice\n"  # published first: write-once
    old_notes = g.rev(repo, f"{C.NOTES_BENCH}^1", peel="")
    assert old_notes is not None and g.notes_at(repo, old_notes)[commit] == g.write_blob(repo, b"bob\n")
    decisions = [doc.decision for doc in verdict.read(repo, commit)]
    assert sorted(decisions) == [Decision.ACCEPT, Decision.REJECT]
    shown = show(bob, NAME, 2)
    text, data = show_text(shown), shown.to_json()
    assert sorted(data["conflicting_decisions"]) == [Decision.ACCEPT, Decision.REJECT]
    assert "conflicting verdicts" in text
    push(bob, None)
    pull(alice, None)
    assert notes(alice) == notes(bob)


def test_merge_streams_keeps_every_document_whichever_side_merges() -> None:
    base = verdict.render({"round": 2, "decision": "ACCEPT"})
    ours = base + b"---\nwritten: '2026-01-02'\nside: ours\n"
    theirs = base + b"---\nwritten: '2026-01-01'\nside: theirs\n"
    merged = sync.merge_streams(ours, theirs)
    assert merged == sync.merge_streams(theirs, ours)
    assert (
        merged
        == base + b"---\nwritten: '2026-01-01'\nside: theirs\n" + b"---\nwritten: '2026-01-02'\nside: ours\n"
    )
    assert sync.merge_streams(ours, base) == ours  # a plain append is a fast-forward


def test_a_stale_lease_refuses_the_push(team: tuple[Path, Path, Path]) -> None:
    alice, _, origin = team
    repo = g.open_repo(alice)
    main_ref = f"refs/heads/{CampaignRef.main(NAME).branch}"
    head = g.rev(repo, main_ref)
    assert head is not None
    stale = g.parent(repo, head)
    assert stale is not None
    newer = g.commit_tree(repo, repo.git.rev_parse(f"{head}^{{tree}}"), head, "someone else's work\n")
    with pytest.raises(CampaignError, match="refused the push"):  # we think origin is at `stale`
        g.push_with_leases(repo, "origin", {main_ref: (newer, stale)})
    assert refs(origin)[main_ref] == head


def test_export_import_round_trip_then_the_campaign_continues(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    alice, _, origin = team
    commit_round(alice, "smaller tiles", 80)
    validate(alice, None, probe=False)  # a rejected round: its pin must travel too
    head = g.rev(g.open_repo(alice), f"campaign/{NAME}/main")
    assert head is not None  # and a calibration table (written by hand: calibrate needs a GPU)
    verdict.append(g.open_repo(alice), head, {"kind": "calibration", "agreed": True}, C.NOTES_ENVIRONMENT)
    verdict.append(g.open_repo(alice), head, {"kind": "profile", "campaign": NAME}, C.NOTES_PROFILE)
    exported = export(alice, NAME)
    assert exported.path.endswith(default_path(NAME)) and exported.prerequisite is not None
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    git(fresh, "remote", "remove", "origin")  # no shared remote: the bundle is all there is
    import_bundle(fresh, Path(exported.path))
    assert refs(fresh) == refs(alice)
    assert (
        notes(fresh) == notes(alice) and notes(fresh)[C.NOTES_ENVIRONMENT] and notes(fresh)[C.NOTES_PROFILE]
    )
    assert not g.refs_under(g.open_repo(fresh), sync.TRACKING + "/")  # no leftovers
    again = import_bundle(fresh, Path(exported.path))
    assert again.updated == []  # idempotent
    trust(fresh, NAME)

    open_round(fresh, None, "bigger tiles")
    set_kernel(fresh, 120)
    git(fresh, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 120")
    assert validate(fresh, None, probe=False).decision in ACCEPTED
    assert [n for n in g.open_repo(fresh).git.branch("--list", "campaign/*").split() if "round-3" in n]


def test_an_imported_open_round_shows_its_hypothesis(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """`round` keeps the hypothesis in the clone's branch description, which no bundle carries: the
    importing side reads it from the round commit's `Hypothesis:` line (an interrupted validate's
    round, rolled back there by hand, otherwise showed none in `log`, `show` and the override's verdict)."""
    alice, _, origin = team
    commit_round(alice, "smaller tiles", 80)
    bundle = Path(export(alice, NAME, tmp_path / "alice.bundle").path)
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    import_bundle(fresh, bundle)
    assert g.config_get(g.open_repo(fresh), f"branch.campaign/{NAME}/round-2.description") is None
    assert show(fresh, NAME, 2).hypothesis == "smaller tiles"


def test_import_refuses_to_clobber_a_diverged_round(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    alice, bob, _ = team
    commit_round(alice, "smaller tiles", 80)
    bundle = Path(export(alice, NAME, tmp_path / "alice.bundle").path)
    commit_round(bob, "other idea", 90)  # Bob's own round 2, another commit
    before = refs(bob)
    with pytest.raises(CampaignError, match="same round number") as refused:
        import_bundle(bob, bundle)
    assert "nothing was changed" in refused.value.message
    assert refs(bob) == before


def test_cli_wiring(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    from gitcampaign.cli import main

    alice, _, _ = team
    assert main(["-C", str(alice), "push", "--json"]) == 0
    assert main(["-C", str(alice), "export", NAME, str(tmp_path / "x.bundle")]) == 0
    assert main(["-C", str(alice), "import", str(tmp_path / "x.bundle")]) == 0
    assert main(["-C", str(alice), "pull", "nowhere", "--campaign", NAME]) == 1


def test_supersede_keeps_the_remote_line_and_the_round_is_rerun_on_top(team: tuple[Path, Path, Path]) -> None:
    alice, bob, origin = team
    commit_round(alice, "bigger tiles", 120)
    push(alice, None)
    pull(bob, None)
    mine = commit_round(bob, "wider tiles", 130)  # round 3, beside Alice's round 2
    validate(alice, None, probe=False)
    validate(bob, None, probe=False)  # both accepted on the same head
    push(alice, None)
    with pytest.raises(CampaignError, match="--supersede"):
        pull(bob, None)
    result = pull(bob, None, supersede=True)
    assert any("round 3" in line and "cherry-pick" in line for line in result.merges)
    repo = g.open_repo(bob)
    assert (
        g.rev(repo, f"refs/heads/{CampaignRef.main(NAME).branch}")
        == refs(origin)[f"refs/heads/{CampaignRef.main(NAME).branch}"]
    )
    assert g.rev(repo, str(CampaignRef.rejected(NAME, 3))) == mine
    standing = verdict.standing(verdict.read(repo, mine))
    assert standing is not None and standing.reasons == [C.REASON_SUPERSEDED]
    data = status(bob, NAME).to_json()
    assert data["rounds"]["accepted"] == 1 and data["rounds"]["rejected"] == 1

    open_round(bob, None, "wider tiles, again")  # the re-run on top of Alice's line (the same
    set_kernel(bob, 130)  # one-line change as `mine`; a cherry-pick would conflict with hers)
    git(bob, "commit", "-q", "-am", "Hypothesis: wider tiles, again\nChange: speed 130")
    assert validate(bob, None, probe=False).decision in ACCEPTED
    push(bob, None)
    pull(alice, None)
    assert refs(alice) == refs(bob) == refs(origin)


def test_a_dirty_tree_stops_the_pull_before_anything_moves(team: tuple[Path, Path, Path]) -> None:
    """Bob has the accepted line checked out with an edit; Alice accepted a round: the pull that
    would move his checked-out branch refuses first, with his notes and pins as they were."""
    alice, bob, _ = team
    commit_round(alice, "bigger tiles", 120)
    assert validate(alice, None, probe=False).decision in ACCEPTED
    push(alice, None)
    git(bob, "checkout", "-q", CampaignRef.main(NAME).branch)
    (bob / "kernel.py").write_text((bob / "kernel.py").read_text() + "# an edit in progress\n")
    before = refs(bob)
    with pytest.raises(CampaignError):
        pull(bob, None)
    assert refs(bob) == before


def test_following_the_clash_hint_keeps_the_local_round_in_sight(team: tuple[Path, Path, Path]) -> None:
    """Both clones accepted a round 2 on the same head. The hint (delete yours, `pull --supersede`)
    pinned Bob's round as rejected under the number Alice's accepted round also has, and log, status
    and report showed only hers. His round now keeps a number of its own, shown as superseded."""
    from gitcampaign.commands.log import log

    alice, bob, _ = team
    theirs = commit_round(alice, "bigger tiles", 120)
    validate(alice, None, probe=False)
    push(alice, None)
    mine = commit_round(bob, "wider tiles", 130)  # Bob did not pull: his own round 2
    validate(bob, None, probe=False)
    with pytest.raises(CampaignError, match="same round number") as refused:
        pull(bob, None)
    assert "--supersede" in refused.value.message
    git(bob, "branch", "-D", CampaignRef.round_branch(NAME, 2).branch)
    result = pull(bob, None, supersede=True)
    rows = {row.round: row for row in log(bob, NAME).rows}
    assert (rows[2].status, rows[2].commit) == ("accepted", theirs)
    superseded = [row for row in rows.values() if row.commit == mine]
    assert len(superseded) == 1 and superseded[0].round == 3
    assert (superseded[0].status, superseded[0].reasons) == ("rejected", C.REASON_SUPERSEDED)
    assert superseded[0].hypothesis == "wider tiles"
    assert status(bob, NAME).to_json()["rounds"]["rejected"] == 1
    assert any("round 2" in line and "round 3" in line for line in result.merges)
    push(bob, None)  # and it travels: Alice sees it too
    pull(alice, None)
    assert {row.round: row.status for row in log(alice, NAME).rows} == {
        1: "baseline",
        2: "accepted",
        3: "rejected",
    }


def test_a_bundle_without_the_campaigns_main_imports_nothing(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """It half-imported: round branches and notes came in, exit 0, then "this repository has no
    campaign". Now it is refused before any ref moves, naming what is missing."""
    alice, _, origin = team
    commit_round(alice, "smaller tiles", 80)
    start = git(alice, "rev-parse", "main").strip()
    partial = tmp_path / "partial.bundle"
    git(
        alice,
        "bundle",
        "create",
        "-q",
        str(partial),
        CampaignRef.round_branch(NAME, 2).branch,
        C.NOTES_VERDICT,
        f"^{start}",
    )
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    before = git(fresh, "for-each-ref")
    with pytest.raises(
        CampaignError, match=f"not its accepted line .*{CampaignRef.main(NAME).branch}"
    ) as refused:
        import_bundle(fresh, partial)
    assert "nothing was imported" in refused.value.message and "git campaign export" in refused.value.hint
    assert git(fresh, "for-each-ref") == before


def test_an_import_without_the_start_commit_says_what_is_missing(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`git bundle verify --quiet` prints nothing: the message ended "cannot be imported here: "."""
    alice, _, _ = team
    bundle = Path(export(alice, NAME, tmp_path / "a.bundle").path)
    start = git(alice, "rev-parse", "main").strip()
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    with pytest.raises(CampaignError) as refused:
        import_bundle(empty, bundle)
    assert f"needs commit {start[:12]} (kernel project), which this repository does not have" in (
        refused.value.message
    )
    assert "git fetch" in refused.value.hint and "--self-contained" in refused.value.hint


def test_a_fresh_clone_pulls_the_remotes_campaign_without_naming_it(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    alice, _, origin = team
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    pull(fresh, None, "origin")  # said "this repository has no campaign / start one with init"
    assert refs(fresh) == refs(alice)
    git(alice, "checkout", "-q", "main")
    init(alice, options(name="other"))
    push(alice, None)
    second = tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(origin), str(second)], check=True)
    with pytest.raises(CampaignError, match="origin has 2 campaigns: demo, other") as refused:
        pull(second, None, "origin")
    assert "--campaign" in refused.value.hint


def test_a_supersede_interrupted_before_main_moved_is_finished_by_the_next_pull(
    team: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pull --supersede` notes the REJECT and pins the round before it moves main back: killed in
    between, the next `pull --supersede` refused ("not an accepted round"), and `validate` would
    have rolled the round back with a revert commit, diverging further."""
    alice, bob, origin = team
    commit_round(alice, "bigger tiles", 120)
    validate(alice, None, probe=False)
    push(alice, None)
    mine = commit_round(bob, "wider tiles", 130)
    validate(bob, None, probe=False)
    git(bob, "branch", "-D", CampaignRef.round_branch(NAME, 2).branch)
    real_move = g.move_branch

    def killed_before_main_moves(repo: object, branch: str, *args: object, **kwargs: object) -> None:
        if branch == CampaignRef.main(NAME).branch:
            raise KeyboardInterrupt
        real_move(repo, branch, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(g, "move_branch", killed_before_main_moves)
    with pytest.raises(KeyboardInterrupt):
        pull(bob, None, supersede=True)
    monkeypatch.undo()
    assert status(bob, NAME).to_json()["rounds"]["pending"] == 0  # validate must not roll it back
    pull(bob, None, supersede=True)
    assert (
        refs(bob)[f"refs/heads/{CampaignRef.main(NAME).branch}"]
        == refs(origin)[f"refs/heads/{CampaignRef.main(NAME).branch}"]
    )
    repo = g.open_repo(bob)
    assert [doc.reasons for doc in verdict.read(repo, mine)][-1] == [C.REASON_SUPERSEDED]
    assert len([doc for doc in verdict.read(repo, mine) if doc.phase == "OVERRIDE"]) == 1
    assert g.rev(repo, str(CampaignRef.rejected(NAME, 3))) == mine


def test_a_remote_notes_ref_that_is_no_notes_commit_changes_nothing(team: tuple[Path, Path, Path]) -> None:
    alice, bob, origin = team
    commit_round(alice, "bigger tiles", 120)
    push(alice, None)
    junk = (
        subprocess.run(
            ["git", "-C", str(origin), "hash-object", "-w", "--stdin"],
            input=b"junk\n",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    git(origin, "update-ref", C.NOTES_VERDICT, junk)
    before = refs(bob)
    with pytest.raises(CampaignError, match="is not a notes commit; nothing was changed"):
        pull(bob, None)
    assert refs(bob) == before


def test_a_remote_main_without_a_manifest_changes_nothing(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A branch named like a campaign's main that is not one (no manifest): pulled, every command
    there would stop on the missing manifest."""
    alice, _, origin = team
    git(origin, "update-ref", "refs/heads/campaign/other/main", git(alice, "rev-parse", "main").strip())
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], check=True)
    before = git(fresh, "for-each-ref", "refs/heads", "refs/notes", "refs/campaign")
    with pytest.raises(CampaignError, match="is not a campaign's accepted line: .*manifest.yaml is missing"):
        pull(fresh, "other", "origin")
    assert git(fresh, "for-each-ref", "refs/heads", "refs/notes", "refs/campaign") == before
