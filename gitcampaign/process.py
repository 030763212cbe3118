"""Process supervision: what the commands start (harnesses, builds, tests, probes) runs in a process
group of its own, dies with the command on Linux, and is registered, so that the next command stops
whatever a killed one left running.

This module knows processes and folders, not repositories: `git.py` (which sweeps a killed command's
leftovers) and `measure.py` (which starts the runs) both sit above it, and say which registry
folder to use.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

# Every process a command starts carries this variable (inherited by its children), so the next
# command can find and stop what a killed one left running.
RUN_TOKEN_ENV = "GITCAMPAIGN_RUN"
GROUP_EXIT_WAIT_S = 5.0  # SIGKILL is asynchronous: a harness can outlive our exit by a moment
PROC = Path("/proc")
POLL_S = 0.2  # how soon a wait on a run notices a SIGTERM whose exception was dropped


class Terminated(BaseException):
    """SIGTERM, raised where the process is so that cleanup (`finally`) runs as for ^C."""


_TERMINATING = threading.Event()


def terminate(signum: int, frame: FrameType | None) -> None:
    """The commands' SIGTERM handler. Python drops an exception raised inside a finaliser (a
    `__del__` that was running when the signal came prints "Exception ignored" and goes on), so the
    request is also remembered: every wait on a run raises it again (wait)."""
    _TERMINATING.set()
    raise Terminated


def clear_termination() -> None:
    """Forget a SIGTERM (a command that handled it is done)."""
    _TERMINATING.clear()


def wait(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """`process.wait(timeout_s)` that raises Terminated once a SIGTERM came, even one whose first
    exception was dropped; subprocess.TimeoutExpired at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not _TERMINATING.is_set():
        try:
            return process.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(process.args, timeout_s) from None
    raise Terminated


def wait_all(processes: list[subprocess.Popen[bytes]], timeout_s: float) -> list[tuple[int | None, float]]:
    """Wait for every process at once: each one's exit code (None: still running at the deadline,
    left to the caller to stop) and its seconds from this call until it ended (or the deadline);
    raises Terminated once a SIGTERM came, as `wait`."""
    started = time.monotonic()
    ended: dict[int, tuple[int | None, float]] = {}
    while len(ended) < len(processes):
        if _TERMINATING.is_set():
            raise Terminated
        elapsed = time.monotonic() - started
        for index, process in enumerate(processes):
            if index not in ended and (code := process.poll()) is not None:
                ended[index] = (code, elapsed)
        if elapsed >= timeout_s:
            ended.update({index: (None, elapsed) for index in range(len(processes)) if index not in ended})
        elif len(ended) < len(processes):
            time.sleep(POLL_S)
    return [ended[index] for index in range(len(processes))]


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (a lock's or a harness's owner; another user's counts too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent() -> None:
    """`preexec_fn` of a supervised run on Linux: the kernel kills it when its parent dies."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def kill_group(pgid: int) -> None:
    """SIGKILL the whole group, then wait (bounded) until none of it still runs, so that a command
    that returns, or exits on ^C or SIGTERM, leaves no harness behind (zombies awaiting their
    reaper do not run and are not waited for)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    _wait_gone(lambda: _group_running(pgid))


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """^C and SIGTERM wait until the block ends, then act as they would have. A process started
    inside is in the caller's records before the exception their handler raises can unwind past
    it: otherwise a signal between `fork` and the record (inside `subprocess.Popen`, say) leaves a
    harness that no cleanup knows of. Python runs handlers in the main thread, whichever thread
    the signal reached; elsewhere nothing is deferred."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, FrameType | None]] = []

    def hold(number: int, frame: FrameType | None) -> None:
        caught.append((number, frame))

    previous = {number: signal.signal(number, hold) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        if caught:
            received, frame = caught[0]
            handler = previous[signal.Signals(received)]
            if callable(handler):
                handler(received, frame)
            elif handler in (signal.SIG_DFL, None):
                signal.raise_signal(received)


def register(folder: Path, pgid: int, token: str) -> Path:
    """Record that this process started group `pgid` with run `token`; returns the entry to remove
    once the group is stopped."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pgid}.json"
    path.write_text(json.dumps({"owner": os.getpid(), "pgid": pgid, "token": token}))
    return path


@dataclass(frozen=True)
class Orphan:
    """A registered run whose owner died before it could stop it."""

    entry: Path
    pgid: int
    token: str

    def still_running(self) -> int:
        """How many of its processes still run (Linux: /proc; elsewhere 1 while its group exists).
        Reads only: nothing is signalled."""
        if not PROC.is_dir():
            return int(_group_exists(self.pgid))
        return sum(1 for entry in _tagged(self.token) if _running(entry))


def orphans(folder: Path) -> list[Orphan]:
    """The registered runs in `folder` whose owner is gone; reads only (unreadable entries, which
    name nothing to stop, are left out)."""
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        entry = _read_entry(path)
        if entry is not None and not pid_alive(entry[0]):
            found.append(Orphan(path, entry[1], entry[2]))
    return found


def sweep_orphans(folder: Path) -> list[str]:
    """Stop the processes of commands that died without stopping them (their owner is gone), and
    drop their entries, and unreadable ones, from the registry `folder`."""
    done = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if _read_entry(path) is None:
            path.unlink(missing_ok=True)
    for orphan in orphans(folder):
        stopped = _kill_tagged(orphan.token, orphan.pgid)
        if stopped:
            done.append(f"stopped {stopped} process(es) left running by a killed command")
        orphan.entry.unlink(missing_ok=True)
    return done


def _read_entry(path: Path) -> tuple[int, int, str] | None:
    """(owner pid, process group, run token) of a registry entry; None when it cannot be read."""
    try:
        entry = json.loads(path.read_text())
        return int(entry["owner"]), int(entry["pgid"]), str(entry["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _kill_tagged(token: str, pgid: int) -> int:
    """Kill every process whose environment carries `token` (Linux: /proc), else the group; waits
    (bounded, as kill_group) until none of them still runs."""
    if not PROC.is_dir():
        kill_group(pgid)
        return 0
    killed: list[Path] = []
    for entry in _tagged(token):
        try:
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(entry)
        except (ProcessLookupError, PermissionError):
            pass
    _wait_gone(lambda: any(_running(entry) for entry in killed))
    return len(killed)


def _tagged(token: str) -> Iterator[Path]:
    """The /proc folder of every process whose environment carries run `token`."""
    marker = f"{RUN_TOKEN_ENV}={token}".encode()
    for entry in _processes():
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            yield entry


def _wait_gone(running: Callable[[], bool]) -> None:
    """Poll until `running()` is false, at most GROUP_EXIT_WAIT_S (SIGKILL is asynchronous)."""
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    while running() and time.monotonic() < deadline:
        time.sleep(0.01)


def _processes() -> Iterator[Path]:
    """The /proc folder of every process (none where there is no /proc)."""
    if PROC.is_dir():
        yield from (entry for entry in PROC.iterdir() if entry.name.isdigit())


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)  # signal 0: the existence check, nothing is sent
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_running(pgid: int) -> bool:
    """Whether a process of group `pgid` is still alive and not a zombie (Linux /proc; elsewhere
    nothing to wait on is known, so no)."""
    for entry in _processes():
        fields = _stat(entry)
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            return True
    return False


def _stat(entry: Path) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None when gone."""
    try:
        return (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _running(entry: Path) -> bool:
    """Whether the process of /proc folder `entry` still exists and is not a zombie."""
    fields = _stat(entry)
    return fields is not None and fields[0] != "Z"
