"""How `measure.run_logged` starts a manifest command: the harness of a simple command is the
process that dies with the tool (PR_SET_PDEATHSIG reaches it: the shell execs it), while a compound
command keeps its shell, whose children only the next command's sweep stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitcampaign import measure

SCRIPT = "import os, sys\nopen(sys.argv[1], 'w').write(str(os.getppid()))\n"


@pytest.mark.parametrize(
    ("command", "direct"),
    [
        ("{python} report.py", True),
        ("{python} 'report.py'", True),
        ("true && {python} report.py", False),
        ("PYTHONDONTWRITEBYTECODE=1 {python} report.py", False),
    ],
)
def test_a_simple_command_replaces_its_shell(tmp_path: Path, command: str, direct: bool) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "report.py").write_text(SCRIPT)
    out = tmp_path / "parent"
    code = measure.run_logged(
        command.format(python=sys.executable), tmp_path, tmp_path / "log", 60, "test command", args=[str(out)]
    )
    assert code == 0, (tmp_path / "log").read_text()
    assert (int(out.read_text()) == os.getpid()) is direct


def test_what_counts_as_simple() -> None:
    assert measure._simple("python campaigns/x/quick_test_bench.py --repeats 3")
    for compound in (
        "make && ./bench",
        "cd x; python y",
        "FOO=1 python x",
        "python x --n=2",
        "! python x",
        "",
    ):
        assert not measure._simple(compound), compound


IMPORTER = "import sys\nsys.path.insert(0, 'lib')\nimport helper\nopen(sys.argv[1], 'w').write(repr(sys.pycache_prefix))\n"


@pytest.mark.parametrize("torch_lacks_bytecode", [True, False])
def test_bytecode_goes_to_the_campaign_cache_where_writing_it_is_forbidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch_lacks_bytecode: bool
) -> None:
    """PYTHONDONTWRITEBYTECODE with a torch installed without bytecode: the children write theirs
    under .git/campaign/python-cache (none in the tree), and the next child loads it from there.
    With a torch that has its bytecode, the environment is left as it is."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("VALUE = 1\n")
    (tmp_path / "child.py").write_text(IMPORTER)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(measure, "_torch_lacks_bytecode", lambda: torch_lacks_bytecode)
    cache = tmp_path / ".git" / "campaign" / "python-cache"
    pyc = cache / (tmp_path / "lib").resolve().relative_to("/") / f"helper.{sys.implementation.cache_tag}.pyc"
    written = []
    for run in range(2):
        out = tmp_path / f"prefix{run}"
        code = measure.run_logged(
            f"{sys.executable} child.py", tmp_path, tmp_path / "log", 60, "test", args=[str(out)]
        )
        assert code == 0, (tmp_path / "log").read_text()
        assert out.read_text() == (repr(str(cache)) if torch_lacks_bytecode else "None")
        written.append(pyc.stat().st_mtime_ns if pyc.exists() else None)
    assert not list((tmp_path / "lib").rglob("*.pyc"))  # the tree stays clean either way
    if torch_lacks_bytecode:
        assert written[0] is not None and written[1] == written[0]  # written once, then loaded
    else:
        assert not cache.exists()
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    assert measure.bytecode_env(tmp_path) == {}  # the user's own prefix stands


# Records how it ran, as `python SCRIPT.py` runs it; the first argument names its record.
RECORDER = """\
import json, os, sys, time
def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
    except OSError:
        return []
deadline = time.monotonic() + (10 if sys.argv[0].endswith("first.py") else 0)
while True:  # the first waits (10 s at most) for the second to be started
    others = [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())]
    waiting = [pid for pid in others if b"sub/second.py" in cmdline(pid)]
    if waiting or time.monotonic() >= deadline:
        break
    time.sleep(0.01)
if waiting and sys.argv[0].endswith("first.py"):
    time.sleep(1.0)  # time enough for a second that did not wait for its turn to run its script
json.dump({
    "argv": sys.argv, "path0": sys.path[0], "file": __file__, "name": __name__,
    "stdin": os.readlink("/proc/self/fd/0"), "waiting": len(waiting), "torch": "torch" in sys.modules,
    "second_ran": os.path.exists("second.json"),
}, open(sys.argv[1], "w"))
sys.exit(int(sys.argv[2]))
"""


def recorded_runs(tmp_path: Path, script_text: str = RECORDER) -> tuple[measure.LoggedRun, measure.LoggedRun]:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub").mkdir()
    for name in ("first.py", "second.py"):
        (tmp_path / "sub" / name).write_text(script_text)
    return tuple(  # type: ignore[return-value]
        measure.LoggedRun(
            f"{sys.executable} sub/{name}.py",
            tmp_path,
            tmp_path / f"{name}.log",
            "test",
            None,
            (f"{name}.json", code),
        )
        for name, code in (("first", "0"), ("second", "3"))
    )


NEEDS_PROC = pytest.mark.skipif(not Path("/proc").is_dir(), reason="the recorder reads /proc")


@NEEDS_PROC
def test_the_next_run_starts_during_this_one_and_runs_its_script_as_python_would(tmp_path: Path) -> None:
    """While a run runs, the next one is already a process, waiting for its turn: its script has not
    run (the first sees it waiting); in its turn it runs as `python sub/second.py ARGS` would."""
    first, second = recorded_runs(tmp_path)
    with measure.InTurn([first, second]) as turns:
        assert turns.run(first, 60) == 0, first.log_path.read_text()
        assert not (tmp_path / "second.json").exists()  # started, not run
        assert turns.run(second, 60) == 3, second.log_path.read_text()
    ran = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("first", "second")}
    assert ran["first"]["waiting"] == 1 and not ran["first"]["second_ran"]
    assert ran["second"]["waiting"] == 0
    # The second, started ahead of its turn, runs as the first (`python sub/first.py`, in its turn) did,
    # but for an absolute argv[0] and its stdin, which is /dev/null.
    assert ran["first"]["argv"] == ["sub/first.py", "first.json", "0"]
    assert ran["second"]["argv"] == [str(tmp_path / "sub" / "second.py"), "second.json", "3"]
    for name, record in ran.items():
        assert record["path0"] == str(tmp_path / "sub")
        assert record["file"] == str(tmp_path / "sub" / f"{name}.py")
        assert record["name"] == "__main__"
    assert ran["second"]["stdin"] == os.devnull
    assert not list((tmp_path / ".git" / "campaign" / "procs").iterdir())


@NEEDS_PROC
def test_a_run_still_waiting_when_the_turns_end_is_stopped_unrun(tmp_path: Path) -> None:
    first, second = recorded_runs(tmp_path)
    with measure.InTurn([first, second]) as turns:
        turns.run(first, 60)
        waiting = turns.waiting[second.log_path].process
    assert waiting.poll() is not None
    assert not (tmp_path / "second.json").exists()
    assert not second.log_path.exists()  # an empty log of a run that never ran is not left behind
    assert not list((tmp_path / ".git" / "campaign" / "procs").iterdir())


def test_a_run_waiting_for_its_turn_whose_tool_goes_away_never_runs_its_script(tmp_path: Path) -> None:
    """Its stdin closes without "go" (the tool died): it exits, and the script never ran."""
    _, second = recorded_runs(tmp_path)
    launch = measure._start(second, measure.waiting_argv(second.command, second.cwd))
    assert launch.process.stdin is not None  # started ahead of its turn
    launch.process.stdin.close()
    assert launch.process.wait(timeout=60) == 1
    measure._stop(launch)
    assert "cancelled before its turn" in second.log_path.read_text()
    assert not (tmp_path / "second.json").exists()


def test_which_commands_start_ahead_of_their_turn(tmp_path: Path) -> None:
    """`python SCRIPT.py ...` only; torch is imported ahead where the script imports it."""
    (tmp_path / "plain.py").write_text("print(1)\n")
    (tmp_path / "torchy.py").write_text("def main():\n    import torch\n")
    (tmp_path / "bench").write_text("")
    ahead = measure.waiting_argv("python3.12 torchy.py --x 1", tmp_path)
    assert ahead == ["python3.12", "-c", measure.TURN_WAIT, "torch", "torchy.py", "--x", "1"]
    assert measure.waiting_argv(f"{sys.executable} plain.py", tmp_path) == [
        sys.executable,
        "-c",
        measure.TURN_WAIT,
        "",
        "plain.py",
    ]
    for command in (
        "python missing.py",
        "./bench",
        "python -u plain.py",
        "true && python plain.py",
        "pytest plain.py",
    ):
        assert measure.waiting_argv(command, tmp_path) is None, command


@NEEDS_PROC
def test_a_script_that_imports_torch_finds_it_imported_at_its_turn(tmp_path: Path) -> None:
    """The turn wait imports torch ahead for a script that imports it (here in a branch never taken),
    and nothing else: the harness's start-up then skips torch's import."""
    script = RECORDER + "if False:\n    import torch\n"
    first, second = recorded_runs(tmp_path, script)
    with measure.InTurn([first, second]) as turns:
        turns.run(first, 60)
        turns.run(second, 60)
    ran = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("first", "second")}
    assert ran["second"]["torch"]
    assert not ran["first"]["torch"]


class Stop(Exception):
    """What the test's SIGTERM handler raises (the CLI's raises Terminated)."""


@NEEDS_PROC
def test_a_sigterm_as_the_next_run_starts_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM that arrives the moment the next run's process exists, before InTurn has it on
    record, waits until it has: the exception stops both runs, and no process is left."""
    import signal

    first, second = recorded_runs(tmp_path)
    started: list[int] = []
    start = measure._start

    def start_then_signal(run: measure.LoggedRun, ahead: list[str] | None = None) -> measure.Launch:
        launch = start(run, ahead)
        started.append(launch.process.pid)
        if run is second:
            os.kill(os.getpid(), signal.SIGTERM)  # delivered now; its handler waits for the record
        return launch

    def raise_stop(number: int, frame: object) -> None:
        raise Stop

    monkeypatch.setattr(measure, "_start", start_then_signal)
    previous = signal.signal(signal.SIGTERM, raise_stop)
    try:
        with pytest.raises(Stop), measure.InTurn([first, second]) as turns:
            turns.run(first, 60)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(started) == 2
    for pid in started:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert not list((tmp_path / ".git" / "campaign" / "procs").iterdir())
