"""Process supervision (gitcampaign/process.py): the registry of started runs, and what stops the
runs of a command that died before it could."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitcampaign import process

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="runs are found through /proc")


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture
def tagged_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A sleeping process in its own group whose environment carries a run token, as measure starts one."""
    token = "test-token-" + os.urandom(4).hex()
    run = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        env={**os.environ, process.RUN_TOKEN_ENV: token},
        start_new_session=True,
    )
    yield run, token
    process.kill_group(run.pid)
    run.wait()


def _entry(folder: Path, owner: int, pgid: int, token: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pgid}.json"
    path.write_text(json.dumps({"owner": owner, "pgid": pgid, "token": token}))
    return path


def test_an_orphan_is_reported_without_being_touched(
    tmp_path: Path, tagged_run: tuple[subprocess.Popen[bytes], str]
) -> None:
    run, token = tagged_run
    entry = _entry(tmp_path / "procs", _dead_pid(), run.pid, token)
    [orphan] = process.orphans(tmp_path / "procs")
    assert (orphan.entry, orphan.pgid, orphan.token) == (entry, run.pid, token)
    assert orphan.still_running() == 1
    assert run.poll() is None and entry.exists()


def test_sweep_stops_an_orphan_and_drops_its_entry(
    tmp_path: Path, tagged_run: tuple[subprocess.Popen[bytes], str]
) -> None:
    run, token = tagged_run
    entry = _entry(tmp_path / "procs", _dead_pid(), run.pid, token)
    assert process.sweep_orphans(tmp_path / "procs") == [
        "stopped 1 process(es) left running by a killed command"
    ]
    assert run.wait(timeout=10) == -9
    assert not entry.exists()
    assert process.orphans(tmp_path / "procs") == []


def test_a_live_owners_run_is_left_alone(
    tmp_path: Path, tagged_run: tuple[subprocess.Popen[bytes], str]
) -> None:
    run, token = tagged_run
    entry = process.register(tmp_path / "procs", run.pid, token)  # owned by this test, alive
    assert process.orphans(tmp_path / "procs") == []
    assert process.sweep_orphans(tmp_path / "procs") == []
    assert run.poll() is None and entry.exists()


def test_an_unreadable_entry_names_nothing_and_is_dropped(tmp_path: Path) -> None:
    folder = tmp_path / "procs"
    folder.mkdir()
    (folder / "1.json").write_text("{not json")
    (folder / "2.json").write_text(json.dumps({"owner": 1}))
    assert process.orphans(folder) == []
    assert process.sweep_orphans(folder) == []
    assert list(folder.iterdir()) == []


def test_pid_alive() -> None:
    assert process.pid_alive(os.getpid())
    assert not process.pid_alive(_dead_pid())
    assert not process.pid_alive(0)


def test_signals_deferred_acts_on_a_signal_when_the_block_ends() -> None:
    """Inside the block a SIGTERM only waits; at its end the handler that was in place runs, once,
    and is in place again."""
    import signal

    seen: list[int] = []

    def handler(number: int, frame: object) -> None:
        seen.append(number)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        with pytest.raises(KeyboardInterrupt), process.signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []  # not yet
        assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is handler
        with process.signals_deferred():
            pass
        assert seen == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_dropped_inside_a_finaliser_still_stops_the_wait_on_a_run() -> None:
    """Python prints and drops an exception raised inside `__del__`: a SIGTERM handled there must
    still stop the command, at its wait on the harness."""
    import signal

    class Finalised:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs here, at a backward jump, and its Terminated is dropped
                pass

    previous = signal.signal(signal.SIGTERM, process.terminate)
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        Finalised()
        with pytest.raises(process.Terminated):
            process.wait(run, 60)
    finally:
        signal.signal(signal.SIGTERM, previous)
        process.clear_termination()
        run.kill()
        run.wait()
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    with pytest.raises(subprocess.TimeoutExpired):  # forgotten once handled: a wait times out again
        process.wait(later, 0.3)
    later.kill()
    later.wait()


def test_wait_all_waits_on_every_process_at_once_and_leaves_the_late_one_to_stop() -> None:
    """Each exit code and when it ended; a process still running at the deadline reads None (its
    caller stops it)."""
    quick = [
        subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(0.3); raise SystemExit({code})"])
        for code in (0, 3)
    ]
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ended = process.wait_all([*quick, late], timeout_s=3.0)
    finally:
        late.kill()
        late.wait()
    assert [code for code, _ in ended] == [0, 3, None]
    assert all(seconds < 2.5 for _, seconds in ended[:2]) and ended[2][1] >= 3.0
