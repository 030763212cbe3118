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
