"""The compiled example (examples/cpp_extension, a C++ matmul built with torch.utils.cpp_extension)
taken through the loop on the CPU: build, tests, measurement, one accepted round, one rejected
round that breaks the build, and the report with its acceptance suite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gitcampaign import constants as C
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import ACCEPTED, Decision

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpp_extension"
NAME = "matmul"
NAIVE = """  // i-j-p order: the inner loop walks B down a column, a new cache line per multiply-add.
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc;
    }
  }"""
ROW_ORDER = """  // i-p-j order: the inner loop walks rows of B and C contiguously, so it vectorises.
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) c[i * n + j] = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) {
      const float a_ip = a[i * k + p];
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += a_ip * b[p * n + j];
    }
  }"""

# Slow: about 40 s of compiles and harness processes on an idle 2-core machine.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler (.ci/run installs g++)"),
]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def verdict(root: Path, commit: str) -> dict:
    return list(yaml.safe_load_all(git(root, "notes", "--ref", C.NOTES_VERDICT, "show", commit)))[-1]


def commit_round(root: Path, hypothesis: str, old: str, new: str) -> str:
    open_round(root, NAME, hypothesis)
    source = root / "csrc" / "matmul.cpp"
    assert source.read_text().count(old) == 1
    source.write_text(source.read_text().replace(old, new))
    git(root, "commit", "-q", "-am", f"Hypothesis: {hypothesis}\nChange: csrc/matmul.cpp")
    return git(root, "rev-parse", "HEAD").strip()


def test_compiled_extension_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "matmul"
    shutil.copytree(
        EXAMPLE, root, ignore=shutil.ignore_patterns("build", "*.so", "__pycache__", "*.egg-info")
    )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "a C++ matmul extension")
    monkeypatch.chdir(root)
    init(
        root,
        InitOptions(
            name=NAME,
            op="matmul",
            metric="forward",
            shapes="shapes.yaml",
            build_command="python setup.py -q build_ext --inplace",
            test_command="python -m pytest -q test_matmulext.py",
            acceptance_command="python -m pytest -q",
            quick_command="python bench.py",
            probe_command="",
            kernel_source="csrc/matmul.cpp",
            pairs=2,
            max_iterations=2,
        ),
    )
    baseline(root, NAME)
    start = git(root, "rev-parse", CampaignRef.main(NAME).branch).strip()
    base_doc = verdict(root, start)
    assert set(base_doc["build"]) == {"incumbent", "candidate"} and base_doc["tests"]["passed"]

    # Round 2: a loop order that vectorises. The incumbent's sources did not change since the
    # baseline built them in the same tree, so its build is restored; the candidate compiles.
    good = commit_round(root, "i-p-j order vectorises the inner loop", NAIVE, ROW_ORDER)
    result = validate(root, NAME)
    assert result.decision in ACCEPTED and result.ratio > 1.5, result
    doc = verdict(root, good)
    assert "cached_from" in doc["build"]["incumbent"] and "cached_from" not in doc["build"]["candidate"]
    assert doc["build"]["candidate"]["seconds"] > 0 and doc["tests"]["passed"]
    # Each side measured its own compiled code: every harness process names the module it loaded.
    run = sorted((root / ".git" / "campaign" / "runs" / NAME).glob("round-2-*"))[-1]
    trees = root / ".git" / "campaign" / "worktrees" / NAME
    for role in ("incumbent", "candidate"):
        for log in (run / "s1").glob(f"pair*-{role}.log"):
            assert f"kernel {trees / role}/matmulext/_C" in log.read_text(), log
    assert len(list((run / "s1").glob("pair*-*.log"))) == 4

    # Round 3 does not compile: REJECT build_failed with the compiler's words, nothing measured.
    broken = commit_round(root, "unroll the inner loop by 4", "c[i * n + j] += a_ip", "c[i * n + jj] += a_ip")
    result = validate(root, NAME)
    assert (result.decision, result.reasons) == (Decision.REJECT, [C.REASON_BUILD_FAILED])
    doc = verdict(root, broken)
    assert "jj" in doc["build"]["candidate"]["output"] and doc["build"]["candidate"]["passed"] is False
    assert "sessions" not in doc and "tests" not in doc
    assert git(root, "rev-parse", CampaignRef.main(NAME).branch).strip() == good

    final = report(root, NAME)
    assert (final.acceptance, final.clean_diff) == ("passed", True) and final.ratio > 1.5
    text = git(root, "show", f"{CampaignRef.main(NAME).branch}:campaigns/{NAME}/REPORT.md")
    assert "holds only the accepted rounds' changes: 1 file(s)" in text and "`csrc/matmul.cpp`" in text
    assert "unroll the inner loop by 4 (REJECT build_failed)" in text
    assert "from accepted round(s) 2;" in text and "`python -m pytest -q`: **passed**" in text
