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
from gitcampaign.lint import Finding, lint_paths, lint_source

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


FIXTURES = sorted(p.name for p in CHEATS.glob("*.py.txt") if p.name != "suppressed.py.txt")


@pytest.mark.parametrize("fixture", FIXTURES)
def test_fixture_findings_match_markers(fixture: str) -> None:
    """Cheats are flagged on exactly the marked lines with the marked rule; honest files stay clean."""
    source = (CHEATS / fixture).read_text()
    assert _found(lint_source(source, fixture)) == _expected(source)


@pytest.mark.parametrize(
    ("fixture", "rule"),
    [
        ("w2_id_activation_cache.py.txt", "W2"),
        ("w2_data_ptr_key.py.txt", "W2"),
        ("w2_version_does_not_fix.py.txt", "W2"),
        ("w2_weakkey_and_hash.py.txt", "W2"),
        ("w2_weight_without_version.py.txt", "W2"),
        ("w3_lru_cache_tensor.py.txt", "W3"),
        ("w3_dict_memo_tensor_key.py.txt", "W3"),
        ("g1_constexpr_group_m.py.txt", "G1"),
        ("t1_patched_timers.py.txt", "T1"),
        ("s1_side_stream_thread.py.txt", "S1"),
        ("f1_fallback_to_torch.py.txt", "F1"),
    ],
)
def test_each_planted_cheat_blocks_under_its_rule(fixture: str, rule: str) -> None:
    findings = lint_source((CHEATS / fixture).read_text(), fixture)
    assert findings, f"{fixture} planted a cheat and nothing was found"
    assert {f.rule for f in findings} == {rule}
    assert all(f.blocking for f in findings)


@pytest.mark.parametrize(
    "fixture",
    [
        "honest_config_dict.py.txt",
        "honest_triton_matmul.py.txt",
        "honest_reraise_and_timing.py.txt",
        "honest_w1_weight_cache.py.txt",
    ],
)
def test_honest_optimisations_do_not_block(fixture: str) -> None:
    findings = lint_source((CHEATS / fixture).read_text(), fixture)
    assert not [f for f in findings if f.blocking]


def test_weight_cache_with_version_is_w1_and_without_is_w2() -> None:
    """The one difference between the allowed weight cache and a stale one is `weight._version`."""
    allowed = "import torch\n_c = {}\ndef f(weight):\n    return _c[(id(weight), weight._version)]\n"
    stale = "import torch\n_c = {}\ndef f(weight):\n    return _c[(id(weight), weight.shape)]\n"
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
