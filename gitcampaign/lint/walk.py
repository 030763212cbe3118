"""The walk: one pass over a file's AST that hands every node, with the scope it belongs to, to each
rule family's visitor.

The bodies of `@triton.jit` (and other DSL `jit`/`kernel`) functions are device code: the walk
does not enter them, so no cache, stream, clock or fallback rule applies there; the families still
see their definitions (G1 checks their parameters).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from gitcampaign.lint.names import FunctionNode, Names, own_nodes
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.scope import Inference, Scope, parameters

# Decorators whose function body is device code (Triton, CuTe DSL, ...): no host-side cache there.
DEVICE_DECORATORS = frozenset({"jit", "kernel", "autotune", "heuristics", "func", "inline"})

RawFinding = tuple[str, int, str]  # rule id, line, message


class Context:
    """What the families of one file share: its tree and path, names, scope inference, the functions
    it defines (by name, the first definition), the module scope, and the findings so far."""

    def __init__(self, tree: ast.Module, path: str, names: Names) -> None:
        self.tree = tree
        self.path = path
        self.names = names
        self.inference = Inference(names)
        self.functions: dict[str, FunctionNode] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, node)
        self.module_scope = self.inference.build(tree, None, [])
        self.found: list[RawFinding] = []

    def report(self, rule: str, node: ast.AST, message: str) -> None:
        self.found.append((rule, getattr(node, "lineno", 1), message))

    def resolve(self, node: ast.AST) -> str | None:
        return self.names.resolve(node)


class Family:
    """A rule family's visitor. `RULES` are its rows; `ALIASABLE` the dotted names an assignment
    may alias (`clock = time`) for its rules to see through. The hooks run in source order."""

    RULES: tuple[Rule, ...] = ()
    ALIASABLE: frozenset[str] = frozenset()

    def __init__(self, context: Context) -> None:
        self.context = context

    def module(self) -> None:
        """Once per file, before the walk."""

    def definition(self, func: FunctionNode, params: list[ast.arg]) -> None:
        """Every function definition, device code included."""

    def host_function(self, func: FunctionNode, scope: Scope) -> None:
        """Every function definition that is not device code, with its own scope."""

    def node(self, node: ast.AST, scope: Scope) -> None:
        """Every node outside device code that is not a definition, with the scope it belongs to."""


def walk(tree: ast.Module, path: str, families: Sequence[type[Family]]) -> list[RawFinding]:
    """The findings of `families` in one parsed file, in the order their visitors report them."""
    names = Names(tree, frozenset().union(*(family.ALIASABLE for family in families)))
    context = Context(tree, path, names)
    visitors = [family(context) for family in families]
    for visitor in visitors:
        visitor.module()
    _Walker(context, visitors).body(tree, context.module_scope)
    return context.found


class _Walker:
    def __init__(self, context: Context, visitors: list[Family]) -> None:
        self.context = context
        self.visitors = visitors

    def body(self, owner: ast.AST, scope: Scope) -> None:
        for node in own_nodes(owner):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                self.function(node, scope)
            elif isinstance(node, ast.ClassDef):
                self.body(node, self.context.inference.class_scope(node, scope))
            else:
                for visitor in self.visitors:
                    visitor.node(node, scope)

    def function(self, func: FunctionNode | ast.Lambda, parent: Scope) -> None:
        scope = self.context.inference.function_scope(func, parent)
        if not isinstance(func, ast.Lambda):
            params, _ = parameters(func)
            for visitor in self.visitors:
                visitor.definition(func, params)
            if self._is_device_code(func):
                return
            for visitor in self.visitors:
                visitor.host_function(func, scope)
        self.body(func, scope)

    def _is_device_code(self, func: FunctionNode) -> bool:
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = self.context.resolve(target) or ""
            if name.rsplit(".", 1)[-1] in DEVICE_DECORATORS and not name.startswith(("functools", "torch")):
                return True
        return False
