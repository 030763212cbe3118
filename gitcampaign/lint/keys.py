"""What a cache key holds: the expressions it is built from (through key variables and key helpers
of the file), the objects whose identity it takes, and the tensors it holds as themselves."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gitcampaign.lint.names import FunctionNode, is_self, last_name, own_nodes
from gitcampaign.lint.scope import Scope
from gitcampaign.lint.values import TENSOR_METADATA
from gitcampaign.lint.walk import Context

IDENTITY_FUNCS = frozenset({"id", "hash", "weakref.ref", "weakref.proxy", "object.__hash__", "builtins.id"})
# `x.data_ptr()`, `x.untyped_storage().data_ptr()`: an address is an identity too.
POINTER_METHODS = frozenset({"data_ptr", "__hash__", "_cdata"})
POINTER_ATTRS = frozenset({"_cdata", "__cuda_array_interface__", "__array_interface__"})
STORAGE_METHODS = frozenset({"untyped_storage", "storage", "_typed_storage"})

KeyPart = tuple[ast.expr, Scope]  # a key expression, and the scope its names belong to
Identity = tuple[ast.expr, Scope, bool]  # the object, its scope, whether by address


class KeyReader:
    """Reads cache keys in one file."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def parts(self, key: ast.expr, scope: Scope, depth: int = 0) -> Iterator[KeyPart]:
        """The key, plus what a key variable (or a variable element of a key tuple) was assigned and
        what a key helper defined in this file returns, a few levels deep: `key = (id(a), a._version);
        cache[key]` and `cache[_key(a)]` are the same key as written inline. Names used through
        metadata (`a.shape`) are not expanded: only the key's own variables."""
        yield key, scope
        if depth >= 3:
            return
        elements = key.elts if isinstance(key, ast.Tuple | ast.List) else [key]
        for element in elements:
            if isinstance(element, ast.Name):
                for value in scope.assignments(element.id):
                    yield from self.parts(value, scope, depth + 1)
            elif isinstance(element, ast.Call):
                helper = self._helper(element)
                if helper is not None:
                    helper_scope = self.context.inference.function_scope(helper, self.context.module_scope)
                    for node in own_nodes(helper):
                        if isinstance(node, ast.Return) and node.value is not None:
                            yield from self.parts(node.value, helper_scope, depth + 1)

    def _helper(self, call: ast.Call) -> FunctionNode | None:
        """A function of this file called as `name(...)` or `self.name(...)`."""
        if isinstance(call.func, ast.Name) or (
            isinstance(call.func, ast.Attribute) and is_self(call.func.value)
        ):
            name = last_name(call.func)
            return self.context.functions.get(name) if name else None
        return None

    def identities(self, parts: list[KeyPart]) -> list[Identity]:
        """(object, scope, by address) for every identity in the key parts."""
        found: dict[str, Identity] = {}
        for part, scope in parts:
            for node in ast.walk(part):
                identity = self._identity_of(node, scope)
                if identity is not None:
                    found.setdefault(ast.dump(identity[0]), (identity[0], scope, identity[1]))
        return list(found.values())

    def _identity_of(self, node: ast.AST, scope: Scope) -> tuple[ast.expr, bool] | None:
        """The object whose identity `node` takes, and whether it is an address (data_ptr & co)."""
        resolve = self.context.resolve
        if isinstance(node, ast.Attribute) and node.attr in POINTER_ATTRS:
            return _storage_owner(node.value), True
        if not isinstance(node, ast.Call):
            return None
        func = resolve(node.func) or ""
        if (func in IDENTITY_FUNCS or func.endswith(".__hash__")) and node.args:
            return node.args[0], False
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in POINTER_METHODS and not node.args:
                return _storage_owner(node.func.value), node.func.attr != "__hash__"
            if node.func.attr == "__call__" and resolve(node.func.value) in IDENTITY_FUNCS and node.args:
                return node.args[0], False
        if isinstance(node.func, ast.Name):
            for bound in scope.assignments(node.func.id):  # `ptr = x.data_ptr; ptr()`
                if isinstance(bound, ast.Attribute) and bound.attr in POINTER_METHODS:
                    return _storage_owner(bound.value), True
                if resolve(bound) in IDENTITY_FUNCS and node.args:  # `ident = id; ident(x)`
                    return node.args[0], False
        if (  # `getattr(x, "data_ptr")()`
            isinstance(node.func, ast.Call)
            and resolve(node.func.func) == "getattr"
            and len(node.func.args) >= 2
            and isinstance(node.func.args[1], ast.Constant)
            and node.func.args[1].value in POINTER_METHODS
        ):
            return _storage_owner(node.func.args[0]), True
        return None

    def bare_tensors(self, part: ast.expr, scope: Scope, identity_dumps: set[str]) -> Iterator[str]:
        """Tensor names used as themselves in a key (not via metadata, identity or _version)."""
        covered: set[ast.AST] = set()
        for node in ast.walk(part):
            if isinstance(node, ast.Attribute) and (node.attr in TENSOR_METADATA or node.attr == "_version"):
                covered.update(ast.walk(node.value))
            elif isinstance(node, ast.Compare):  # `scale is not None`: a bool
                covered.update(ast.walk(node))
            elif isinstance(node, ast.Call):
                func = self.context.resolve(node.func) or ""
                if func not in {"tuple", "list", "frozenset", "set"}:
                    # What a call makes of its arguments is its own (helpers are expanded above).
                    covered.update(n for arg in [*node.args, *node.keywords] for n in ast.walk(arg))
                if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_METADATA | {"data_ptr"}:
                    covered.update(ast.walk(node.func.value))
            elif ast.dump(node) in identity_dumps:
                covered.update(ast.walk(node))
        for node in ast.walk(part):
            if node in covered:
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and scope.is_tensor(node.id):
                yield node.id


def _storage_owner(node: ast.expr) -> ast.expr:
    """`x.untyped_storage()` -> `x`: the storage's address is the tensor's identity."""
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in STORAGE_METHODS
    ):
        node = node.func.value
    return node


def is_descriptor_key(arg: ast.expr, parts: list[KeyPart], versions: set[str]) -> bool:
    """An address with the view (shape, strides) of the same tensor and no `_version`: a zero-copy
    descriptor of live memory, which reuses no result (unless the function stores a tensor in the
    cache, checked by the caller)."""
    if ast.dump(arg) in versions:
        return False
    described: set[str] = set()
    for part, _ in parts:
        for node in ast.walk(part):
            if isinstance(node, ast.Attribute) and ast.dump(node.value) == ast.dump(arg):
                described.add(node.attr)
    return bool(described & {"shape", "size", "stride"})
