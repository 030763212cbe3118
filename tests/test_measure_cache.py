"""Triton's cache across the processes of a measurement (issue 8, "a GPU loop that fits"): each git
tree measured gets its own TRITON_CACHE_DIR with autotune results kept, so the processes of one side
reuse what the first compiled and tuned, while a candidate never starts from the incumbent's tuning;
it starts with the incumbent's compiled kernels only."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.measure import seed_triton_cache, triton_cache_env
from gitcampaign.vocabulary import ACCEPTED

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_project import git, make_project, set_kernel  # noqa: E402

# The quick command: records the cache it was given, what that cache held, and the kernel it
# measures; then leaves there a compiled kernel and an autotune result named after that kernel
# (as Triton would) and runs bench.py.
RECORDING_BENCH = """import hashlib, os, runpy, sys
from pathlib import Path
cache = Path(os.environ["TRITON_CACHE_DIR"])
kernel = Path("kernel.py").read_text().replace("\\n", " ")
held = ",".join(sorted(p.name for p in cache.iterdir())) if cache.is_dir() else ""
with open(os.environ["RECORD_CACHE"], "a") as record:
    record.write(f"{cache}|{os.environ['TRITON_CACHE_AUTOTUNING']}|{kernel}|{held}\\n")
name = hashlib.sha256(kernel.encode()).hexdigest()[:8]
for entry, file in ((f"bin-{name}", "k.cubin"), (f"tune-{name}", "k.autotune.json")):
    (cache / entry).mkdir(parents=True, exist_ok=True)
    (cache / entry / file).write_text(kernel)
sys.argv = ["bench.py", *sys.argv[1:]]
runpy.run_path("bench.py", run_name="__main__")
"""


# The test command: records the cache and the autotune switch it was given, then runs the tests.
RECORDING_TESTS = """import os, runpy
from pathlib import Path
kernel = Path("kernel.py").read_text().replace("\\n", " ")
with open(os.environ["RECORD_TESTS"], "a") as record:
    record.write(f"{os.environ['TRITON_CACHE_DIR']}|{os.environ['TRITON_CACHE_AUTOTUNING']}|{kernel}\\n")
runpy.run_path("test_kernel.py", run_name="__main__")
"""


def records(path: Path) -> dict[str, set[str]]:
    """Kernel text -> the cache directories its runs were given (every run keeping autotune results)."""
    seen: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        cache, autotuning, kernel, _ = line.split("|")
        assert autotuning == "1"
        seen.setdefault(kernel, set()).add(cache)
    return seen


def first_held(path: Path, kernel: str) -> set[str]:
    """What the cache of `kernel`'s tree held when its first run started."""
    line = next(line for line in path.read_text().splitlines() if line.split("|")[2] == kernel)
    return set(filter(None, line.split("|")[3].split(",")))


def entry(kernel: str) -> str:
    return hashlib.sha256(kernel.encode()).hexdigest()[:8]


def test_each_tree_gets_its_own_triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    (root / "bench_env.py").write_text(RECORDING_BENCH)
    (root / "test_env.py").write_text(RECORDING_TESTS)
    git(root, "add", "bench_env.py", "test_env.py")
    git(root, "commit", "-q", "-m", "recording bench")
    monkeypatch.chdir(root)
    record, tests_record = tmp_path / "record.txt", tmp_path / "tests.txt"
    monkeypatch.setenv("RECORD_CACHE", str(record))
    monkeypatch.setenv("RECORD_TESTS", str(tests_record))
    init(
        root,
        InitOptions(
            name="c",
            op="fake_gemm",
            metric="step",
            shapes="shapes.yaml",
            quick_command=f"{sys.executable} bench_env.py",
            test_command=f"{sys.executable} test_env.py",
            probe_command="",
            kernel_source="kernel.py",
            pairs=2,
        ),
    )
    baseline(root, None)
    open_round(root, None, "faster")
    set_kernel(root, 150.0)
    git(root, "commit", "-q", "-am", "Hypothesis: faster\nChange: speed 150")
    assert validate(root, None).decision in ACCEPTED
    # Round 3 changes the kernel file but not the speed: still new code, so still a fresh cache.
    open_round(root, None, "a comment")
    (root / "kernel.py").write_text((root / "kernel.py").read_text() + "# tidied\n")
    git(root, "commit", "-q", "-am", "Hypothesis: tidy\nChange: a comment")
    validate(root, None)

    caches = records(record)
    start, faster, tidied = (
        "SPEED = 100.0 CORRECT = True EDGE_CASES_OK = True ",
        "SPEED = 150.0 CORRECT = True EDGE_CASES_OK = True ",
        "SPEED = 150.0 CORRECT = True EDGE_CASES_OK = True # tidied ",
    )
    assert set(caches) == {start, faster, tidied}
    # One directory per tree, shared by all of its runs (baseline and A/A, or one side of a
    # validation, and the incumbent again in the next validation) ...
    assert all(len(directories) == 1 for directories in caches.values()), caches
    # ... and never the directory of other code.
    assert len(caches[start] | caches[faster] | caches[tidied]) == 3
    common = Path(git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    for (directory,) in caches.values():
        assert Path(directory).parent == common / "campaign" / "triton-cache"
    # Each candidate's first run found the incumbent's compiled kernels, and none of its tuning.
    assert first_held(record, faster) == {f"bin-{entry(start)}"}
    assert first_held(record, tidied) == {f"bin-{entry(start)}", f"bin-{entry(faster)}"}
    # ... and the incumbent's next run found the candidate's compiled kernels, none of its tuning.
    lines = [line.split("|") for line in record.read_text().splitlines()]
    after = next(i for i, line in enumerate(lines) if line[2] == faster)
    held = next(set(line[3].split(",")) for line in lines[after:] if line[2] == start)
    assert f"bin-{entry(faster)}" in held and f"tune-{entry(faster)}" not in held
    # Each validate's tests compiled into the candidate's cache, its tuning switched off.
    tested = [line.split("|") for line in tests_record.read_text().splitlines()]
    assert [(cache, autotuning) for cache, autotuning, kernel in tested if kernel == faster] == [
        (next(iter(caches[faster])), "0")
    ]
    assert all(autotuning == "0" and {cache} == caches[kernel] for cache, autotuning, kernel in tested)


def test_seeding_copies_compiled_kernels_only(tmp_path: Path) -> None:
    """seed_triton_cache: the incumbent's compiled kernels reach the candidate's cache whole; its
    autotune results, and entries the candidate already holds, stay as they are."""
    root = make_project(tmp_path / "proj")
    base = root / ".git" / "campaign" / "worktrees" / "demo"
    trees = {role: base / role for role in ("incumbent", "candidate")}
    for role, tree in trees.items():
        tree.mkdir(parents=True)
        (tree / "kernel.py").write_text(f"SPEED = {100.0 if role == 'incumbent' else 150.0}\n")
    source, target = (Path(triton_cache_env(tree)["TRITON_CACHE_DIR"]) for tree in trees.values())
    for name, files in {
        "compiled": {"k.cubin": "binary", "__grp__k.json": "{}"},
        "tuned": {"k.autotune.json": "{}"},
        "both": {"k.cubin": "incumbent's"},
    }.items():
        (source / name).mkdir(parents=True)
        for file, text in files.items():
            (source / name / file).write_text(text)
    (target / "both").mkdir(parents=True)
    (target / "both" / "k.cubin").write_text("candidate's")

    assert seed_triton_cache(trees["incumbent"], trees["candidate"]) == 1
    assert sorted(p.name for p in target.iterdir()) == ["both", "compiled"]  # no staging left over
    assert (target / "compiled" / "k.cubin").read_text() == "binary"
    assert (target / "compiled" / "__grp__k.json").exists()
    assert (target / "both" / "k.cubin").read_text() == "candidate's"
    assert seed_triton_cache(trees["incumbent"], trees["candidate"]) == 0  # nothing new
    assert seed_triton_cache(trees["incumbent"], trees["incumbent"]) == 0  # one tree, one cache


def test_workspace_copies_are_keyed_by_their_own_files(tmp_path: Path) -> None:
    """A workspace copy has no HEAD of its own: it must not fall back on the repository's (then the
    candidate would reuse the incumbent's tuning), but be keyed by what it holds, campaigns/ aside."""
    root = make_project(tmp_path / "proj")
    base = root / ".git" / "campaign" / "worktrees" / "demo"
    trees = {role: base / role for role in ("incumbent", "candidate", "again")}
    for role, tree in trees.items():
        (tree / "campaigns" / "demo").mkdir(parents=True)
        (tree / "campaigns" / "demo" / "manifest.yaml").write_text(f"written by {role}\n")
        (tree / "kernel.py").write_text("SPEED = 150.0\n" if role == "candidate" else "SPEED = 100.0\n")
    caches = {role: triton_cache_env(tree)["TRITON_CACHE_DIR"] for role, tree in trees.items()}
    assert caches["incumbent"] != caches["candidate"]
    assert caches["incumbent"] == caches["again"]  # the same code; only campaigns/ differs
