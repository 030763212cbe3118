"""The static anti-cheat check: every planted cheat is caught by its rule, no honest optimisation is.

Fixtures live in tests/cheats/*.py.txt (data, not code); a trailing `# expect: ID [ID...]` marks each
line where a finding of that rule must appear, and no other line may carry a finding.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gitcampaign.commands.lint import run_lint
from gitcampaign.lint import RULES, Finding, lint_paths, lint_source

CHEATS = Path(__file__).parent / "cheats"
EXPECT_RE = re.compile(r"#\s*expect:\s*(?P<rules>[A-Z0-9 ]+)$")


def _expected(source: str) -> set[tuple[str, int]]:
    expected = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = EXPECT_RE.search(line)
        if match:
            expected.update((rule, number) for rule in match["rules"].split())
    return expected


def _found(findings: list[Finding]) -> set[tuple[str, int]]:
    return {(f.rule, f.line) for f in findings}


# Fixture files are named by the layer that catches them: `<rule id>_*.py.txt` for a lint rule,
# `harness_*.py.txt` for a run-time check of the quick harness (tests/test_quick_harness.py),
# `honest_*.py.txt` for code that must pass.
LINT_FIXTURES = sorted(p.name for p in CHEATS.glob("*.py.txt") if p.name != "suppressed.py.txt")
FIXTURES = [name for name in LINT_FIXTURES if not name.startswith("harness_")]
CHEAT_FIXTURES = [name for name in FIXTURES if not name.startswith("honest_")]
HONEST_FIXTURES = [name for name in FIXTURES if name.startswith("honest_")]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_fixture_findings_match_markers(fixture: str) -> None:
    """Cheats are flagged on exactly the marked lines with the marked rule; honest files stay clean."""
    source = (CHEATS / fixture).read_text()
    assert _found(lint_source(source, fixture)) == _expected(source)


@pytest.mark.parametrize("fixture", CHEAT_FIXTURES)
def test_each_planted_cheat_blocks_under_the_rule_it_is_named_by(fixture: str) -> None:
    rule = fixture.split("_", 1)[0].upper()
    assert rule in RULES, f"{fixture} must be named by the rule (or harness check) that catches it"
    findings = lint_source((CHEATS / fixture).read_text(), fixture)
    assert findings, f"{fixture} planted a cheat and nothing was found"
    assert {f.rule for f in findings} == {rule}
    assert all(f.blocking for f in findings)


@pytest.mark.parametrize("fixture", HONEST_FIXTURES)
def test_honest_look_alikes_do_not_block(fixture: str) -> None:
    """One file per false-alarm cause found on real kernel code (the lint used to flag each)."""
    findings = lint_source((CHEATS / fixture).read_text(), fixture)
    assert not [f for f in findings if f.blocking]


def test_weight_cache_with_version_is_w1_and_without_is_w2() -> None:
    """The one difference between the allowed weight cache and a stale one is `weight._version`."""
    allowed = "import torch\n_c = {}\ndef f(weight: torch.nn.Parameter):\n    return _c[(id(weight), weight._version)]\n"
    stale = "import torch\n_c = {}\ndef f(weight: torch.nn.Parameter):\n    return _c[(id(weight), weight.shape)]\n"
    activation = "import torch\n_c = {}\ndef f(a):\n    return _c[(id(a), a._version)]\n"
    assert [(f.rule, f.blocking) for f in lint_source(allowed, "allowed.py")] == [("W1", False)]
    assert [(f.rule, f.blocking) for f in lint_source(stale, "stale.py")] == [("W2", True)]
    assert [(f.rule, f.blocking) for f in lint_source(activation, "activation.py")] == [("W2", True)]


def test_version_of_another_tensor_does_not_make_a_weight_cache() -> None:
    """`_version` must belong to the same weight whose id is in the key."""
    source = "_c = {}\ndef f(weight, w2):\n    return _c[(id(weight), w2._version)]\n"
    assert {f.rule for f in lint_source(source, "mixed.py")} == {"W2"}


def test_suppression_with_reason_is_reported_not_blocking() -> None:
    findings = lint_source((CHEATS / "suppressed.py.txt").read_text(), "suppressed.py")
    by_line = {(f.rule, f.line): f for f in findings}
    assert set(by_line) == {("W2", 7), ("W2", 11), ("L0", 11)}
    assert by_line[("W2", 7)].suppressed_reason == "test-only helper, never called by the op"
    assert not by_line[("W2", 7)].blocking
    # Without a reason the directive is itself a finding and suppresses nothing.
    assert by_line[("L0", 11)].blocking
    assert by_line[("W2", 11)].suppressed_reason is None


def test_suppression_must_name_the_rule_it_waives() -> None:
    source = "_c = {}\ndef f(a):\n    return _c[id(a)]  # campaign-lint: allow T1 -- wrong rule\n"
    findings = lint_source(source, "wrong.py")
    assert [(f.rule, f.blocking) for f in findings] == [("W2", True)]


def test_directive_inside_a_string_does_not_suppress() -> None:
    source = '_c = {}\ndef f(a):\n    return _c[id(a)], "# campaign-lint: allow W2 -- not a comment"\n'
    assert [f.blocking for f in lint_source(source, "string.py")] == [True]


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
    suppressed = [f for f in document["findings"] if f["suppressed_reason"]]
    assert [(f["rule"], f["line"], f["blocking"]) for f in suppressed] == [("W2", 7, False)]


def test_repository_code_is_clean() -> None:
    """The project's own package and kernels pass their own gate (no false positives on real code)."""
    root = Path(__file__).resolve().parents[1]
    code = [root / name for name in ("gitcampaign", "kernels", "benchmarks") if (root / name).is_dir()]
    assert not [f for f in lint_paths(code) if f.blocking]
