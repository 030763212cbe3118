"""Progress of the long commands: plain lines in a pipe, one redrawn line on a terminal, nothing
under --json, and the wall time of each phase in the JSON."""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitcampaign.cli import cli
from gitcampaign.commands.round import open_round
from gitcampaign.progress import Progress, finished_shapes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_project import git, init_args, make_project, set_kernel  # noqa: E402


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wait_for(condition: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_finished_shapes_counts_rows_in_order() -> None:
    log = "quick_test_bench: gemm\nlabel,B,M\na,1,2\nwarning: x, y\nb,1,2\n"
    assert finished_shapes(log, ["a", "b", "c"]) == 2
    assert finished_shapes(log, ["b", "a"]) == 2
    assert finished_shapes(log, ["c", "a"]) == 0  # shapes run in order: c is not done, so nothing after it
    assert finished_shapes("a,1\n", ["a"]) is None  # no header: a harness that prints no CSV


def test_plain_lines_name_phase_pair_side_shape_and_times(tmp_path: Path) -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = Progress(stream, live=False, clock=clock, interval=0.01)
    log = tmp_path / "run.log"
    log.write_text("")
    with progress.phase("measurement session 1", runs=2):
        with progress.harness_run("pair 1/1, candidate", ["small", "large"], log):
            log.write_text("label,...\n")
            wait_for(lambda: "shape 1/2 small" in stream.getvalue())
            clock.now = 30.0
            log.write_text("label,...\nsmall,1\n")
            wait_for(lambda: "shape 2/2 large" in stream.getvalue())
            clock.now = 60.0
        with progress.harness_run("pair 1/1, incumbent", ["small", "large"], log.with_name("other.log")):
            clock.now = 90.0
    lines = stream.getvalue().splitlines()
    assert lines[:3] == [
        "measurement session 1 ...",
        "measurement session 1, pair 1/1, candidate, 0:00 elapsed",
        "measurement session 1, pair 1/1, candidate, shape 1/2 small, 0:00 elapsed",
    ]
    # One shape of four planned is done after 30 s: 90 s left.
    assert lines[3] == "measurement session 1, pair 1/1, candidate, shape 2/2 large, 0:30 elapsed, ~1:30 left"
    assert lines[4] == "pair 1/1, candidate: finished in 1:00"
    # The second run's log does not exist yet: no shape to name, the phase's estimate still holds.
    assert lines[5] == "measurement session 1, pair 1/1, incumbent, 1:00 elapsed, ~1:00 left"
    assert lines[-1] == "measurement session 1: done in 1:30"
    assert progress.phase_seconds == {"measurement session 1": 90.0}


def test_the_estimate_leaves_out_compiling(tmp_path: Path) -> None:
    """The first shape took 30 s, 20 of them compiling: 10 s of work for a quarter of the runs."""
    stream, clock = io.StringIO(), FakeClock()
    progress = Progress(stream, live=False, clock=clock, interval=0.01)
    log = tmp_path / "run.log"
    log.write_text("label,...\n")
    shape_line = "quick_test_bench: small: 30.00 s, 5.00 s of it in timed windows, 20.00 s in first calls"
    with progress.phase("measurement session 1", runs=2):
        with progress.harness_run("pair 1/1, candidate", ["small", "large"], log):
            wait_for(lambda: "shape 1/2 small" in stream.getvalue())
            clock.now = 30.0
            log.write_text(f"label,...\n{shape_line} (compilation, autotuning)\nsmall,1\n")
            wait_for(lambda: "shape 2/2 large" in stream.getvalue())
            clock.now = 40.0
        with progress.harness_run("pair 1/1, incumbent", ["small", "large"], log.with_name("other.log")):
            pass
    lines = stream.getvalue().splitlines()
    assert "measurement session 1, pair 1/1, candidate, shape 2/2 large, 0:30 elapsed, ~0:30 left" in lines
    # The finished run's compiling stays out: 20 s of work for one run of two.
    assert "measurement session 1, pair 1/1, incumbent, 0:40 elapsed, ~0:20 left" in lines


def test_a_terminal_gets_one_line_redrawn_in_place(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = Progress(stream, live=True, interval=0.01)
    with (
        progress.phase("A/A noise floor", runs=2),
        progress.harness_run("pair 1/1, incumbent", [], tmp_path / "x"),
    ):
        wait_for(lambda: stream.getvalue().count("\r\x1b[K") >= 4)  # redrawn while the run goes on
    text = stream.getvalue()
    assert text.endswith("A/A noise floor: done in 0:00\n")
    assert text.count("\n") == 2  # the run's end and the phase's end stay; the status line does not


def test_silent_progress_writes_nothing_but_keeps_phase_times() -> None:
    progress = Progress.for_cli(as_json=True)
    assert progress.stream is None
    with progress.phase("gates"):
        pass
    assert list(progress.phase_seconds) == ["gates"]
    assert Progress.for_cli(as_json=False, stream=io.StringIO()).live is False  # a pipe gets plain lines


def test_an_exception_ends_the_run_and_the_phase(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = Progress(stream, interval=0.01)
    with (
        pytest.raises(RuntimeError),
        progress.phase("gates"),
        progress.harness_run("run", ["a"], tmp_path / "l"),
    ):
        raise RuntimeError("boom")
    assert stream.getvalue().splitlines()[-2:] == ["run: stopped after 0:00", "gates: stopped after 0:00"]
    assert threading.active_count() == 1  # the log watcher stopped


def test_validate_reports_progress_on_stderr_and_phase_times_under_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    runner = CliRunner()
    assert runner.invoke(cli, ["-C", str(root), *init_args()]).exit_code == 0
    done = runner.invoke(cli, ["-C", str(root), "baseline"])
    assert done.exit_code == 0, done.output
    assert "A/A noise floor: done in" in done.stderr and "pair 2/2, candidate: finished in" in done.stderr
    assert "build and tests: done in" in done.stderr  # the tests can take minutes before any measuring
    # The fake harness prints no CSV: runs and times, but no shape is named.
    assert "full validation, baseline commit, 0:00 elapsed" in done.stderr and "shape" not in done.stderr
    open_round(root, None, "faster")
    set_kernel(root, 150.0)
    git(root, "commit", "-q", "-am", "Hypothesis: faster\nChange: speed 150")
    done = runner.invoke(cli, ["-C", str(root), "validate", "--json"])
    assert done.exit_code == 0, done.output
    assert done.stderr == ""
    phases = json.loads(done.stdout)["phase_seconds"]
    assert {"gates", "measurement session 1"} <= set(phases) and all(s >= 0 for s in phases.values())
