"""Kills at every step of validate (of one round and of a heat), baseline, accept, rollback and report; races of two campaigns,
two worktrees and two clones. After each: no note lost, refs and notes consistent, no stale lock
or worktree, no orphan process, and the command `status` names finishes the job."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import verdict
from gitcampaign.campaign import Campaign
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import init
from gitcampaign.commands.status import status
from gitcampaign.commands.trust import trust
from gitcampaign.commands.validate import validate
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Status

# Children are forked and checked through /proc: Linux, as in CI.
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and /proc")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faultkit import (  # noqa: E402
    KILLED,
    assert_invariants,
    assert_no_note_lost,
    clone_state,
    fast_fingerprint,  # noqa: F401 (autouse fixture)
    next_command,
    notes_state,
    processes_under,
    run,
    trace_points,
)
from test_loop import NAME, commit_round, options  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_project import git, make_project, set_kernel  # noqa: E402


def _round(speed: float) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        baseline(root, None)
        commit_round(root, f"speed {speed}", speed)

    return build


def _decided(speed: float) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        _round(speed)(root)
        validate(root, None)

    return build


def _heat(root: Path) -> None:
    """Three candidates in a heat: faster, slower, faster still."""
    from gitcampaign.commands.round import open_round

    baseline(root, None)
    for speed in (110, 90, 120):
        open_round(root, None, f"speed {speed}", heat=True)
        set_kernel(root, speed)
        git(root, "commit", "-q", "-am", f"Hypothesis: speed {speed}\nChange: speed {speed}")


def heat_decided(root: Path) -> None:
    """Only the fastest accepted, the others pinned, the heat closed (a heat ref a kill left on a
    decided round says nothing: the next round drops it)."""
    from gitcampaign import heat

    assert [round_status(root, number) for number in (2, 3, 4)] == [
        Status.REJECTED,
        Status.REJECTED,
        Status.ACCEPTED,
    ]
    assert main_sha(root) == git(root, "rev-parse", CampaignRef.round_branch(NAME, 4).branch).strip()
    campaign = Campaign(g.open_repo(root), NAME)
    assert heat.members(campaign, campaign.lineage()[1]) == []


def main_sha(root: Path) -> str:
    return git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()


def round_status(root: Path, number: int) -> str:
    _, rounds = Campaign(g.open_repo(root), NAME).lineage()
    return next(r.status for r in rounds if r.number == number)


def accepted_round_2(root: Path) -> None:
    assert round_status(root, 2) == Status.ACCEPTED
    assert main_sha(root) == git(root, "rev-parse", CampaignRef.round_branch(NAME, 2).branch).strip()


def rejected_round_2(root: Path) -> None:
    assert round_status(root, 2) == Status.REJECTED
    assert g.rev(g.open_repo(root), str(CampaignRef.rejected(NAME, 2))) is not None


def has_baseline(root: Path) -> None:
    assert Campaign(g.open_repo(root), NAME).require_baseline().noise_floor is not None


def rolled_back(root: Path) -> None:
    rejected_round_2(root)
    pin = git(root, "rev-parse", str(CampaignRef.rejected(NAME, 2))).strip()
    assert git(root, "rev-parse", f"{CampaignRef.main(NAME).branch}^").strip() == pin
    assert git(root, "rev-parse", f"{CampaignRef.main(NAME).branch}^{{tree}}") == git(
        root, "rev-parse", f"{pin}^^{{tree}}"
    )


def reported(root: Path) -> None:
    report_file = f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/{C.REPORT_FILE}"
    assert g.rev(g.open_repo(root), report_file, peel="") is not None


def _holds(check: Callable[[Path], None], root: Path) -> bool:
    try:
        check(root)
    except AssertionError:
        return False
    return True


# (command, how the repository is prepared, what must hold once the command (or its recovery) is done)
SCENARIOS = {
    "validate-accept": (["validate"], _round(150), accepted_round_2),
    "validate-reject": (["validate"], _round(50), rejected_round_2),
    "validate-heat": (["validate", "--heat"], _heat, heat_decided),
    "baseline": (["baseline"], lambda root: None, has_baseline),
    "accept": (["accept", "2"], _decided(90), accepted_round_2),
    "rollback": (["rollback", "2"], _decided(150), rolled_back),
    "report": (["report", "--force"], _decided(150), reported),
}


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One prepared repository per scenario, built once and copied for every kill."""
    from tests.conftest import HERMETIC_GIT_ENV

    built = {}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in HERMETIC_GIT_ENV.items():
            patch.setenv(key, value)
        patch.setattr("gitcampaign.envinfo.fingerprint", lambda timeout_s=120.0: {"torch": "stub"})
        for name, (_, build, _) in SCENARIOS.items():
            root = make_project(tmp_path_factory.mktemp(name) / "proj")
            patch.chdir(root)
            init(root, options())
            build(root)
            built[name] = root
    return built


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_kill_at_every_step(scenario: str, templates: dict[str, Path], tmp_path: Path) -> None:
    """SIGKILL at each fault point the command passes; then `status` names the commands that
    finish the job (`recover` for what the kill left, `validate` for a noted decision), and
    following them ends where an uninterrupted run ends."""
    argv, _, finished = SCENARIOS[scenario]
    points = trace_points(templates[scenario], tmp_path / "trace", argv)
    assert len(points) >= 3, points
    for index, point in enumerate(points):
        root = clone_state(templates[scenario], tmp_path / f"kill{index}")
        before = notes_state(root)
        code, stderr = run(root, argv, fault=point)
        assert code == KILLED, f"{point}: {stderr}"
        followed: list[str] = []
        while hint := next_command(root):
            assert len(followed) < 3, f"after a kill at {point}, status keeps naming {followed}"
            code, stderr = run(root, hint)
            assert code == 0, f"after a kill at {point}, `{' '.join(hint)}` failed: {stderr}"
            followed.append(" ".join(hint))
            assert_no_note_lost(before, notes_state(root))
        if not _holds(finished, root):  # killed before it changed anything: run it again
            code, stderr = run(root, argv)
            assert code == 0, f"after a kill at {point}, `{' '.join(argv)}` failed: {stderr}"
        finished(root)
        assert_invariants(root, NAME)
        assert_no_note_lost(before, notes_state(root))


def test_killed_harness_is_stopped(templates: dict[str, Path], tmp_path: Path) -> None:
    """A validate killed mid-measurement leaves no harness running (PR_SET_PDEATHSIG); `status`
    reports its scratch worktrees without touching them, and `recover` sweeps whatever survived
    (the registry of process groups), as the next command that changes the campaign would."""
    root = clone_state(templates["validate-accept"], tmp_path / "p")
    os.environ["BENCH_MODE"] = "hang"
    try:
        code, _ = run(root, ["validate", "--timeout", "20"], fault="measure:harness-started")
    finally:
        del os.environ["BENCH_MODE"]
    assert code == KILLED
    assert next_command(root) == ["recover"]
    assert any("scratch worktree" in line for line in status(root, None).unfinished)
    assert run(root, ["recover"])[0] == 0
    assert_invariants(root, NAME)


def test_sigterm_stops_cleanly_with_a_message(templates: dict[str, Path], tmp_path: Path) -> None:
    import signal
    import time

    from gitcampaign.cli import main

    root = clone_state(templates["validate-accept"], tmp_path / "p")
    os.environ["BENCH_MODE"] = "hang"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 98
        try:
            os.dup2(write_end, 2)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            code = main(["-C", str(root), "validate"])
        finally:
            os._exit(code)
    del os.environ["BENCH_MODE"]
    os.close(write_end)
    # Until the harness itself runs: the git and test processes before it come and go, and a signal
    # sent before main() installs its handler kills the child outright. A loaded machine is slow.
    deadline = time.monotonic() + 120
    while not (started := _harnesses_under(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end) as pipe:
        stderr = pipe.read()
    assert started, f"the harness never started within 120 s: {stderr}"
    assert os.WIFEXITED(status), f"validate died of signal {os.WTERMSIG(status)} instead of handling it"
    assert os.WEXITSTATUS(status) == 143, stderr
    assert "terminated (SIGTERM)" in stderr and "git campaign status" in stderr
    assert processes_under(root) == []
    assert_invariants(root, NAME)


def _harnesses_under(root: Path) -> list[str]:
    """The fake project's harness processes (`python bench.py ...`) among processes_under(root)."""
    found = []
    for process in processes_under(root):
        try:
            argv = Path(f"/proc/{process.split()[0]}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"bench.py" in argv:
            found.append(process)
    return found


def _race(roots_and_args: list[tuple[Path, list[str]]]) -> list[tuple[int | str, str]]:
    """Start the commands at once (forked children), wait for all."""
    import threading

    results: list[tuple[int | str, str]] = [(-1, "")] * len(roots_and_args)

    def one(index: int, root: Path, argv: list[str]) -> None:
        results[index] = run(root, argv)

    threads = [threading.Thread(target=one, args=(i, r, a)) for i, (r, a) in enumerate(roots_and_args)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_note_writers_racing_lose_nothing(tmp_path: Path) -> None:
    """Eight processes append verdict documents and CSV notes at once: all 40 survive (plain
    `git notes add` has no compare-and-swap; the repository lock serialises every writer)."""
    root = make_project(tmp_path / "p")
    commits = []
    for index in range(8):
        (root / f"f{index}").write_text(str(index))
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", f"c{index}")
        commits.append(git(root, "rev-parse", "HEAD").strip())
    pids = []
    for index in range(8):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                repo = g.open_repo(root)
                for step in range(4):
                    verdict.append(repo, commits[step], {"campaign": "race", "round": 2, "writer": index})
                verdict.write_csv_note(repo, C.NOTES_BENCH, commits[index], f"csv {index}\n".encode())
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in pids)
    repo = g.open_repo(root)
    writers = [doc.extra["writer"] for commit in commits[:4] for doc in verdict.read(repo, commit)]
    assert sorted(writers) == sorted(list(range(8)) * 4)
    assert all(g.read_note(repo, C.NOTES_BENCH, commits[i]) == f"csv {i}\n".encode() for i in range(8))


def _two_campaign_repo(root: Path) -> None:
    make_project(root)
    os.chdir(root)
    for name in ("one", "two"):
        git(root, "checkout", "-q", "main")
        init(root, options(name=name))
        baseline(root, name)
    for name, speed in (("one", 150), ("two", 50)):
        from gitcampaign.commands.round import open_round

        git(root, "checkout", "-q", CampaignRef.main(name).branch)
        open_round(root, name, f"speed {speed}")
        set_kernel(root, speed)
        git(root, "commit", "-q", "-am", f"Hypothesis: h\nChange: speed {speed}")


def test_two_campaigns_validating_at_once(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _two_campaign_repo(root)
    git(root, "checkout", "-q", CampaignRef.main("one").branch)
    results = _race([(root, ["-c", "one", "validate"]), (root, ["-c", "two", "validate"])])
    assert [code for code, _ in results] == [0, 0], results
    repo = g.open_repo(root)
    one = Campaign(repo, "one").lineage()[1][0]
    two = Campaign(repo, "two").lineage()[1][0]
    assert (one.status, two.status) == (Status.ACCEPTED, Status.REJECTED)
    for entry in (one, two):
        assert entry.commit and verdict.read(repo, entry.commit)
        assert g.read_note(repo, C.NOTES_BENCH, entry.commit) is not None
    for name in ("one", "two"):
        assert_invariants(root, name)


def test_two_worktrees_racing(tmp_path: Path) -> None:
    """Linked worktrees share refs and notes: the lock lives in the common git dir."""
    root = tmp_path / "p"
    _two_campaign_repo(root)
    other = tmp_path / "second worktree"
    git(root, "checkout", "-q", CampaignRef.main("one").branch)
    git(root, "worktree", "add", "-q", str(other), CampaignRef.round_branch("two", 2).branch)
    results = _race([(root, ["-c", "one", "validate"]), (other, ["-c", "two", "validate"])])
    assert [code for code, _ in results] == [0, 0], results
    repo = g.open_repo(root)
    assert Campaign(repo, "one").lineage()[1][0].status == Status.ACCEPTED
    assert Campaign(repo, "two").lineage()[1][0].status == Status.REJECTED
    assert_invariants(root, "one")
    assert_invariants(other, "two")


def test_two_clones_racing(templates: dict[str, Path], tmp_path: Path) -> None:
    """Clones sharing objects (`clone --shared`) keep their own refs, notes and locks."""
    first = clone_state(templates["validate-accept"], tmp_path / "first")
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", "--shared", str(first), str(second))
    git(second, "branch", "-q", CampaignRef.main(NAME).branch, f"origin/{CampaignRef.main(NAME).branch}")
    git(second, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    trust(second, NAME)  # a clone runs no campaign command it has not approved
    assert git(second, "symbolic-ref", "--short", "HEAD").strip() == CampaignRef.round_branch(NAME, 2).branch
    results = _race([(first, ["validate"]), (second, ["validate"])])
    assert [code for code, _ in results] == [0, 0], results
    for root in (first, second):
        accepted_round_2(root)
        assert_invariants(root, NAME)


def test_note_writers_in_threads_lose_nothing(tmp_path: Path) -> None:
    """The MCP server runs its tools in threads of one process: eight threads appending 80 verdict
    documents at once lose none (the repository lock's re-entrancy is per thread, so a second
    thread waits instead of walking in as if it held the lock), and the lock is free afterwards."""
    import threading

    root = make_project(tmp_path / "p")
    commits = []
    for index in range(4):
        (root / f"f{index}").write_text(str(index))
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", f"c{index}")
        commits.append(git(root, "rev-parse", "HEAD").strip())
    failures: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            repo = g.open_repo(root)
            for step in range(10):
                verdict.append(repo, commits[step % 4], {"campaign": "race", "writer": index, "step": step})
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    repo = g.open_repo(root)
    written = sorted(
        (doc.extra["writer"], doc.extra["step"]) for commit in commits for doc in verdict.read(repo, commit)
    )
    assert written == sorted((writer, step) for writer in range(8) for step in range(10))
    assert g.lock_free(g.common_dir(repo) / "campaign" / "repository.lock")
    # The lock still excludes another process afterwards (a counter gone negative stopped locking).
    with g.repo_lock(repo):
        assert not g.lock_free(g.common_dir(repo) / "campaign" / "repository.lock")


def test_a_thread_waits_for_the_repository_lock_another_thread_holds(tmp_path: Path) -> None:
    import threading
    import time

    root = make_project(tmp_path / "p")
    repo = g.open_repo(root)
    inside = threading.Event()
    order: list[str] = []

    def holder() -> None:
        with g.repo_lock(repo):
            inside.set()
            time.sleep(0.3)
            with g.repo_lock(repo):  # re-entrant within its own thread
                order.append("holder")

    def waiter() -> None:
        inside.wait()
        with g.repo_lock(repo):
            order.append("waiter")

    threads = [threading.Thread(target=holder), threading.Thread(target=waiter)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert order == ["holder", "waiter"]
    assert g.lock_free(g.common_dir(repo) / "campaign" / "repository.lock")


def test_a_thread_leaving_the_lock_never_unlocks_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving that deadlocked one MCP server validating two campaigns: with a counter per
    process, a second thread walked in, the first left (counter 0) and came back, the second left
    (counter 0 again), and the first thread's nested level then waited on its own flock."""
    import threading

    monkeypatch.setattr(g, "REPO_LOCK_WAIT_S", 3.0)
    repo = g.open_repo(make_project(tmp_path / "p"))
    first_in, second_in, first_again, second_out = (threading.Event() for _ in range(4))
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with g.repo_lock(repo):
                first_in.set()
                second_in.wait(1)  # a correct lock keeps the second thread out: this times out
            with g.repo_lock(repo):
                first_again.set()
                second_out.wait(1)
                with g.repo_lock(repo):
                    pass
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    def second() -> None:
        first_in.wait()
        with g.repo_lock(repo):
            second_in.set()
            first_again.wait(1)
        second_out.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []


def test_threads_reading_verdicts_while_one_writes(tmp_path: Path) -> None:
    """Readers refresh the verdict cache (a file in the git dir) while a writer adds notes: each
    thread writes its own scratch file, so none replaces another's half-written one."""
    import threading

    root = make_project(tmp_path / "p")
    repo = g.open_repo(root)
    head = git(root, "rev-parse", "HEAD").strip()
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                verdict.read_many(g.open_repo(root), g.note_blobs(repo, C.NOTES_VERDICT))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    try:
        for step in range(30):
            verdict.append(repo, head, {"campaign": "race", "step": step})
    finally:
        done.set()
        for thread in readers:
            thread.join(timeout=30)
    assert errors == []
    assert [doc.extra["step"] for doc in verdict.read(repo, head)] == list(range(30))


def test_a_killed_import_leaves_no_refs_behind(tmp_path: Path) -> None:
    """An import fetches into a private namespace (`refs/campaign-remote/_import-*`) and drops it
    when done; killed in between, those refs stayed forever. The next command drops them."""
    from gitcampaign.commands.bundle import export

    root = tmp_path / "p"
    make_project(root)
    os.chdir(root)
    init(root, options())
    bundle = Path(export(root, NAME, tmp_path / "demo.bundle").path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    code, _ = run(clone, ["import", str(bundle)], fault="import:fetched")
    assert code == KILLED
    assert "refs/campaign-remote/_import-" in git(clone, "for-each-ref")
    code, stderr = run(clone, ["import", str(bundle)])
    assert code == 0, stderr
    assert "refs/campaign-remote/" not in git(clone, "for-each-ref")
    run(clone, ["import", str(bundle)], fault="import:fetched")
    left = status(clone, NAME).unfinished  # a read-only verb names them and moves nothing
    assert any("of an interrupted import remains" in line for line in left), left
    assert "refs/campaign-remote/_import-" in git(clone, "for-each-ref")
    code, stderr = run(clone, ["recover"])  # as does every command that recovers first
    assert code == 0, stderr
    assert "refs/campaign-remote/" not in git(clone, "for-each-ref")


def test_threads_writing_the_config_lose_nothing(tmp_path: Path) -> None:
    """Two campaigns' `round` write branch descriptions, `pull` and `init` the notes settings: git
    refuses a second writer of `.git/config` at once ("could not lock config file")."""
    import threading

    root = make_project(tmp_path / "p")
    failures: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            for step in range(10):
                g.config_set(
                    g.open_repo(root), f"branch.campaign/c{index}/round-{step}.description", f"h{index}"
                )
                g.config_add_once(g.open_repo(root), "notes.displayRef", f"refs/notes/t{index}")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    repo = g.open_repo(root)
    assert all(
        g.config_get(repo, f"branch.campaign/c{index}/round-{step}.description") == f"h{index}"
        for index in range(6)
        for step in range(10)
    )
    assert sorted(repo.git.config("--get-all", "notes.displayRef").split()) == [
        f"refs/notes/t{i}" for i in range(6)
    ]
