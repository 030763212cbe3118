"""Progress of the long commands (baseline, validate, report, demo, calibrate): what is running
(phase, pair, side, shape), the time elapsed and an estimate of the time left.

One `Progress` is made by the CLI and passed down through the commands to the harness runs in
`measure.py`. Three outputs, one object:
- on a terminal, one status line on stderr, redrawn in place every half second;
- in a log or a pipe, plain lines on stderr, one per event (a run starts, a shape finishes, a run ends);
- under `--json`, nothing: stdout carries the JSON document alone.
Every mode records the wall time of each phase, which `--json` reports (`phase_seconds`).

The harness runs in a child process, so the shape it is on is read from its log: the quick harness
prints the CSV header, then each row as soon as its shape is done. A harness that prints no CSV
still gets its run, side and times reported. The estimate of the time left leaves out the seconds
the quick harness says it spent in first calls (compiling and autotuning, which the later processes
of a tree find in Triton's caches): counted in, the first shape's 20 s of compiling made a grouped
validate's first estimate 12 minutes for 2:30 of work.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

REDRAW_S = 0.5  # terminal redraw and log polling interval
# The quick harness's line at the end of each shape: "LABEL: 29.95 s, ..., 22.44 s in first calls ..."
FIRST_CALLS = re.compile(r"(\d+(?:\.\d+)?) s in first calls")


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}:{rest:02d}"


def finished_shapes(log_text: str, labels: list[str]) -> int | None:
    """How many of `labels` (run in this order) have a CSV row in the harness's output so far;
    None while no CSV header (a line starting `label,`) has been printed."""
    seen = {line.split(",", 1)[0] for line in log_text.splitlines() if "," in line}
    if "label" not in seen:
        return None
    done = 0
    for label in labels:
        if label not in seen:
            break
        done += 1
    return done


def compile_seconds(log_text: str) -> float:
    """Seconds the harness spent in first calls (compiling, autotuning), summed over its shapes."""
    return sum(float(seconds) for seconds in FIRST_CALLS.findall(log_text))


@dataclass
class _Phase:
    name: str
    runs: int  # harness processes planned in this phase; 0 when unknown
    started: float
    runs_done: int = 0
    compile_s: float = 0.0  # first calls of its finished runs


@dataclass
class _Run:
    what: str
    labels: list[str]
    log_path: Path
    started: float
    shapes_done: int | None = None  # None: the harness has printed no CSV (yet)
    compile_s: float = 0.0


@dataclass
class Progress:
    """A reporter passed down to the commands; `Progress.silent()` reports nothing."""

    stream: TextIO | None = None
    live: bool = False  # redraw one status line in place (a terminal) instead of writing lines
    clock: Callable[[], float] = time.monotonic
    interval: float = REDRAW_S
    phase_seconds: dict[str, float] = field(default_factory=dict)
    _phase: _Phase | None = None
    _run: _Run | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_cli(cls, as_json: bool, stream: TextIO | None = None) -> Progress:
        """Silent under --json; a live line on a terminal; plain lines in a log or a pipe."""
        if as_json:
            return cls()
        stream = stream or sys.stderr
        return cls(stream, live=stream.isatty())

    @classmethod
    def silent(cls) -> Progress:
        return cls()

    @contextmanager
    def phase(self, name: str, runs: int = 0) -> Iterator[None]:
        """A named step of a command; `runs` harness processes are planned in it (for the estimate).
        Its wall time lands in `phase_seconds` (a repeated name adds up)."""
        started = self.clock()
        outer, self._phase = self._phase, _Phase(name, runs, started)
        self._line(f"{name} ...")
        ended = "stopped after"  # an error or a signal ended it
        try:
            yield
            ended = "done in"
        finally:
            elapsed = self.clock() - started
            self.phase_seconds[name] = round(self.phase_seconds.get(name, 0.0) + elapsed, 3)
            self._phase = outer
            self._line(f"{name}: {ended} {_clock(elapsed)}", final=True)

    def note(self, text: str) -> None:
        """A line of its own: something the user should know before the work it concerns."""
        self._line(text, final=True)

    @contextmanager
    def harness_run(self, what: str, labels: list[str], log_path: Path) -> Iterator[None]:
        """One child process (`what`: "pair 2/3, candidate"), its finished shapes read from `log_path`."""
        self._run = _Run(what, labels, log_path, self.clock())
        self._line(self._status())
        stop = threading.Event()
        watch = threading.Thread(target=self._watch, args=(stop,))  # campaign-lint: allow S1 -- tails a log
        if self.stream is not None:
            watch.start()
        ended = "stopped after"
        try:
            yield
            ended = "finished in"
        finally:
            stop.set()
            if watch.is_alive():
                watch.join()
            run, self._run = self._run, None
            self._poll(run)
            if self._phase is not None:
                self._phase.runs_done += 1
                self._phase.compile_s += run.compile_s
            self._line(f"{run.what}: {ended} {_clock(self.clock() - run.started)}", final=True)

    def _watch(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            run = self._run
            if run is None:
                return
            if self._poll(run) or self.live:
                self._line(self._status())

    def _poll(self, run: _Run) -> bool:
        """Read the run's log; True when another shape finished."""
        if not run.labels:
            return False
        try:
            text = run.log_path.read_text(errors="replace")
        except OSError:
            return False
        done = finished_shapes(text, run.labels)
        run.compile_s = compile_seconds(text)
        changed, run.shapes_done = done != run.shapes_done, done
        return changed and done is not None

    def _status(self) -> str:
        run, phase, now = self._run, self._phase, self.clock()
        if run is None:
            return ""
        parts = [run.what]
        total, done = len(run.labels), run.shapes_done or 0
        if total and run.shapes_done is not None:
            parts.append(
                f"shape {done + 1}/{total} {run.labels[done]}" if done < total else "all shapes done"
            )
        if phase is not None:
            parts.insert(0, phase.name)
            elapsed = now - phase.started
            parts.append(f"{_clock(elapsed)} elapsed")
            fraction = phase.runs_done + (done / total if total else 0.0)
            if phase.runs and fraction > 0:
                working = max(elapsed - phase.compile_s - run.compile_s, 0.0)
                left = working / fraction * max(phase.runs - fraction, 0.0)
                parts.append(f"~{_clock(left)} left")
        return ", ".join(parts)

    def _line(self, text: str, final: bool = False) -> None:
        if self.stream is None or not text:
            return
        with self._lock:
            if self.live:
                # \r and erase-line keep one status line; a final line stays and the next one starts below.
                self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
