"""How `measure.run_logged` starts a manifest command: the harness of a simple command is the
process that dies with the tool (PR_SET_PDEATHSIG reaches it: the shell execs it), while a compound
command keeps its shell, whose children only the next command's sweep stops."""

from __future__ import annotations

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
