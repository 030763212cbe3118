"""The lint package's public face (gitcampaign/lint/__init__.py): lint_source, lint_paths, Finding,
the rule table, and `git campaign lint` on top of them."""

from __future__ import annotations

import json
from pathlib import Path

import gitcampaign.lint
from gitcampaign.commands.lint import run_lint
from gitcampaign.lint import FAMILIES, RULE_TABLE, RULES, lint_paths
from tests.lint.cheats import CHEATS, HONEST, fixtures_of


def test_every_lint_fixture_is_checked_by_a_family() -> None:
    """A fixture no family test reads would test nothing; harness fixtures are the harness's."""
    claimed = {name for family in FAMILIES for name in fixtures_of(family)}
    lint_fixtures = {p.name for p in CHEATS.glob("*.py.txt")} - {"suppressed.py.txt"}
    assert claimed == {name for name in lint_fixtures if not name.startswith("harness_")}
    assert set(HONEST) == set(FAMILIES)


def test_every_rule_is_documented_once_in_table_order() -> None:
    ids = [rule.id for rule in RULE_TABLE]
    assert ids == ["W2", "W1", "W3", "G1", "T1", "S1", "F1", "D1", "L0", "E0"]
    assert list(RULES) == ids
    doc = gitcampaign.lint.__doc__ or ""
    assert "{rules}" not in doc
    assert [doc.index(f"- {rule}  ") for rule in ids] == sorted(doc.index(f"- {rule}  ") for rule in ids)


def test_syntax_error_is_a_finding(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    findings = lint_paths([broken])
    assert [(f.rule, f.line, f.blocking) for f in findings] == [("E0", 1, True)]


def test_lint_paths_walks_directories_and_skips_non_python(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "op.py").write_text((CHEATS / "w2_id_activation_cache.py.txt").read_text())
    (tmp_path / "notes.txt").write_text("cache[id(a)]\n")
    findings = lint_paths([tmp_path, tmp_path / "notes.txt"])
    assert {f.path for f in findings} == {str(tmp_path / "pkg" / "op.py")}


def test_run_lint_exit_code_and_text(tmp_path: Path) -> None:
    cheat = tmp_path / "cheat.py"
    cheat.write_text((CHEATS / "t1_patched_timers.py.txt").read_text())
    honest = tmp_path / "honest.py"
    honest.write_text((CHEATS / "honest_w1_weight_cache.py.txt").read_text())
    code, text = run_lint([cheat], as_json=False)
    assert code == 1
    assert f"{cheat}:8: T1 " in text
    code, text = run_lint([honest], as_json=False)
    assert code == 0
    assert f"{honest}:8: W1 (info) " in text


def test_run_lint_json_is_machine_readable(tmp_path: Path) -> None:
    cheat = tmp_path / "cheat.py"
    cheat.write_text((CHEATS / "suppressed.py.txt").read_text())
    code, text = run_lint([cheat], as_json=True)
    document = json.loads(text)
    assert code == 1
    assert document["blocking"] == 2
    assert set(document["findings"][0]) == {
        "rule",
        "path",
        "line",
        "message",
        "suppressed_reason",
        "blocking",
    }
    suppressed = [f for f in document["findings"] if f["suppressed_reason"]]
    assert [(f["rule"], f["line"], f["blocking"]) for f in suppressed] == [("W2", 7, False)]


def test_repository_code_is_clean() -> None:
    """The project's own package and kernels pass their own gate (no false positives on real code)."""
    root = Path(__file__).resolve().parents[2]
    code = [root / name for name in ("gitcampaign", "kernels", "benchmarks") if (root / name).is_dir()]
    assert not [f for f in lint_paths(code) if f.blocking]
