"""What a dotted name denotes in one file (import aliases expanded), and the AST helpers every rule
family shares."""

from __future__ import annotations

import ast
from collections.abc import Iterator

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

# Conventional aliases, used when the module does not import them itself.
DEFAULT_ALIASES = {"F": "torch.nn.functional", "tl": "triton.language"}


class Names:
    """The file's import aliases (`import torch.nn.functional as F`, `from time import perf_counter`)
    and the aliases it makes by assignment of a name in `aliasable` (`clock = time`,
    `t = sys.modules["time"]`, `ident = id`): the rule families name what they look for by the
    dotted names these expand to."""

    def __init__(self, tree: ast.Module, aliasable: frozenset[str]) -> None:
        self.aliases: dict[str, str] = dict(DEFAULT_ALIASES)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                denoted = self.resolve(node.value)
                if denoted and denoted in aliasable:
                    self.aliases[node.targets[0].id] = denoted

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression denotes, with import aliases expanded (`F.linear` ->
        `torch.nn.functional.linear`, `sys.modules["time"]` -> `time`,
        `importlib.import_module("time")` -> `time`); None when it is not a plain dotted name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        module = self._module_by_string(node)
        if module is not None:
            parts.append(module)
        elif isinstance(node, ast.Name):
            parts.append(self.aliases.get(node.id, node.id))
        else:
            return None
        return ".".join(reversed(parts))

    def _module_by_string(self, node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.Subscript)
            and self.resolve(node.value) == "sys.modules"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            return node.slice.value
        if (
            isinstance(node, ast.Call)
            and self.resolve(node.func) in {"importlib.import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return node.args[0].value
        return None


def last_name(node: ast.AST) -> str | None:
    """`self.w1` -> `w1`, `weight` -> `weight`; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def annotation_names(annotation: ast.expr | None) -> set[str]:
    """Every identifier in an annotation, string annotations included (`"torch.Tensor | None"`)."""
    if annotation is None:
        return set()
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return set()
    names: set[str] = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in {"self", "cls"}


def own_nodes(owner: ast.AST) -> Iterator[ast.AST]:
    """Every node inside `owner` that belongs to it rather than to a nested function or class
    (the nested definitions themselves are yielded, their bodies are not), in source order."""
    stack = list(reversed(list(ast.iter_child_nodes(owner))))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
