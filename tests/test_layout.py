"""The package's layout: modules in layers that import only downwards, no import cycle anywhere, and
verbs in gitcampaign/commands/ that import no other verb (what two of them share lives in a module
of its own).

Imports are read with ast, function-level and TYPE_CHECKING ones included: an import deferred into
a function is still a dependency, only a later one.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gitcampaign"
ROOT = "__init__"  # the package's own module, as a layer entry

# Lowest first. A module may import its own layer and the ones before it; an entry names a module
# or a subpackage (every module under it).
LAYERS: list[tuple[str, list[str]]] = [
    ("words", [ROOT, "errors", "vocabulary", "refs", "constants", "progress", "safe_yaml"]),
    (
        "rules",
        [
            "rules",
            "decision",
            "results",
            "shapes",
            "manifest",
            "calibration",
            "crosscheck",
            "peaks",
            "isa",
            "lint",
        ],
    ),
    ("process", ["process"]),
    ("git", ["git"]),
    (
        "repository",
        [
            "envinfo",
            "verdict",
            "campaign",
            "protected",
            "hook_install",
            "sync",
            "gates",
            "trust",
            "heat",
            "cost",
            "rejections",
        ],
    ),
    ("evidence", ["roofline", "ncu", "profile"]),
    ("views", ["lineage", "plot", "html_report", "next_step"]),
    (
        "measurement",
        ["measure", "executor", "steps", "kept_sessions", "transfer", "validation", "heat_validation"],
    ),
    ("commands", ["commands"]),
    ("orchestration", ["loop", "demo_flow", "mcp_server"]),
    ("cli", ["completion", "cli"]),
    ("tools", ["manpage", "__main__"]),
]
# Code that also runs outside the package (the harness, frozen into campaigns as one file; the
# stdlib shield; the demo's scratch project): it imports nothing of gitcampaign but itself, and any
# layer may read it.
STANDALONE = ["harness", "shield", "demo"]


def _modules() -> dict[str, Path]:
    """Dotted name relative to the package (`commands.status`, `__init__` for the package itself)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _owner(name: str, modules: dict[str, Path]) -> str:
    """The module an absolute `gitcampaign...` name denotes (a name in a module: that module)."""
    parts = name.split(".")[1:] or [ROOT]
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return ROOT


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `module` imports, anywhere in its file."""
    package = module.split(".") if path.name == "__init__.py" and module != ROOT else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package the file is in, `level - 1` up
                anchor = ["gitcampaign", *package][: len(package) + 2 - node.level]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "gitcampaign" or name.startswith("gitcampaign."):
                owner = _owner(name, modules)
                if owner != module:
                    found.add(owner)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {module: _imports(module, path, modules) for module, path in modules.items()}


def _entry(module: str, entries: list[str]) -> bool:
    return any(module == entry or module.startswith(f"{entry}.") for entry in entries)


def _layer(module: str) -> int | None:
    return next((index for index, (_, entries) in enumerate(LAYERS) if _entry(module, entries)), None)


def _cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """(members, one cycle through them as a path back to its start) for every set of modules that
    import each other (a strongly connected component of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [(sorted(component), _cycle_in(sorted(component), graph)) for component in components]


def _cycle_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A path from the component's first module back to it, through the component."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                frontier.append(nxt)
    raise AssertionError(f"{component} is not strongly connected")


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles, one per set of modules that import each other:\n" + "\n".join(
        f"{' -> '.join(cycle)}  (the set: {', '.join(sorted(members))})" for members, cycle in cycles
    )


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in sorted(_modules()) if _layer(m) is None and not _entry(m, STANDALONE)]
    assert unplaced == [], f"place these modules in LAYERS or STANDALONE of {Path(__file__).name}: {unplaced}"


def test_layers_import_only_downwards() -> None:
    upward = [
        f"{module} ({LAYERS[low][0]}) imports {imported} ({LAYERS[high][0]})"
        for module, imported_modules in sorted(_graph().items())
        for imported in sorted(imported_modules)
        if (low := _layer(module)) is not None and (high := _layer(imported)) is not None and high > low
    ]
    assert upward == [], "\n".join(upward)


def test_standalone_code_imports_nothing_of_the_package_but_itself() -> None:
    leaking = [
        f"{module} imports {imported}"
        for entry in STANDALONE
        for module, imports in sorted(_graph().items())
        if _entry(module, [entry])
        for imported in sorted(imports)
        if not _entry(imported, [entry])
    ]
    assert leaking == [], "\n".join(leaking)


def test_no_command_imports_another() -> None:
    crossing = [
        f"{module} imports {imported}"
        for module, imports in sorted(_graph().items())
        if module.startswith("commands.")
        for imported in sorted(imports)
        if imported.startswith("commands.")
    ]
    assert crossing == [], "\n".join(crossing)


def test_validate_holds_the_lock_the_notes_and_the_ref_moves_and_judges_nothing() -> None:
    """The verb orchestrates (issue 37): the judges (validation, heat_validation) apply the rules
    and return verdicts, which only the verb notes and applies."""
    graph = _graph()
    assert len(graph["commands.validate"]) <= 12, sorted(graph["commands.validate"])
    rules = {"rules", "gates", "decision", "transfer", "steps", "measure", "executor"}
    assert graph["commands.validate"] & rules == set()
    effects = {"verdict.append", "verdict.write_csv_note", "g.write_note", "g.update_ref", "g.move_branch"}
    for judge in ("validation", "heat_validation"):
        tree = ast.parse(_modules()[judge].read_text())
        used = {
            f"{node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        }
        used |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        assert used & (effects | {"apply_decision"}) == set(), judge


def test_the_checks_see_what_they_check() -> None:
    """The graph holds function-level imports and finds a cycle where there is one."""
    graph = _graph()
    assert "commands.validate" in graph["cli"]  # imported inside the `validate` command
    assert "lint.suppress" in graph["lint"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "b"}, "d": {"a"}}) == [
        (["a", "b", "c"], ["a", "b", "c", "a"])
    ]
