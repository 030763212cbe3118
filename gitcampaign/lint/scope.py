"""Scope inference, shared by every rule family: what each name of a function (or the module) is.

What a name *is* decides, never what it is called: a name is a tensor when a parameter is annotated
`Tensor`/`Parameter`, when it was assigned from a call that makes a tensor (a public `torch.*`
function, a tensor method such as `.contiguous()`, `ctx.saved_tensors`) or from another tensor, or
when the function uses it as only a tensor is used (`x.data_ptr()`, `x.stride()`, `x @ y`, ...). It
is not a tensor when annotated otherwise, given a constant default, or assigned from `x.shape[0]`,
`int()`, `float()`, `bool()`, `len()`, a comparison, `triton.cdiv`, `.item()`, .... A weight is module
state (`self.w` assigned in `__init__` or never assigned by the class, e.g. an inherited
`nn.Linear.weight`) or an `nn.Parameter` (annotated or constructed), nothing else.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gitcampaign.lint.names import FunctionNode, Names, annotation_names, is_self, last_name, own_nodes
from gitcampaign.lint.values import (
    DICT_ANNOTATIONS,
    DICT_FACTORIES,
    NON_TENSOR_ANNOTATIONS,
    NON_TENSOR_TORCH_CALLS,
    TENSOR_ANNOTATIONS,
    TENSOR_METADATA,
    TENSOR_USES,
    TENSOR_VIEW_ATTRS,
    TORCH_FACTORIES,
    VALUE_CALLS,
    VALUE_METHODS,
)

TENSOR, OTHER = "tensor", "other"
# Methods that set a module up: the `self.X` they write are module state, not per-call stashes.
INIT_METHODS = frozenset({"__init__", "__post_init__", "reset_parameters", "_init_weights", "setup"})


class Scope:
    """What inference knows about one function (or the module, or a class body): what each name is."""

    def __init__(self, parent: Scope | None, written_per_call: frozenset[str] | None = None) -> None:
        self.parent = parent
        self.assigned: dict[str, list[ast.expr]] = {}
        self.kinds: dict[str, str] = {}  # TENSOR or OTHER, from annotations and assignments
        self.used_as_tensor: set[str] = set()
        self.weights: set[str] = set()  # names bound to an nn.Parameter
        self.dicts: set[str] = set()
        # Inside a class: the `self.X` attributes its methods write per call (activation stashes,
        # not module state); None outside any class, where `self.X` is nobody's module state.
        inherited = parent.written_per_call if parent is not None else None
        self.written_per_call: frozenset[str] | None = (
            written_per_call if written_per_call is not None else inherited
        )
        self.owner: ast.AST | None = None  # the function or module whose own nodes built it

    def chain(self) -> Iterator[Scope]:
        """This scope, then each enclosing one."""
        scope: Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def kind(self, name: str) -> str | None:
        for scope in self.chain():
            if name in scope.kinds:
                return scope.kinds[name]
            if name in scope.used_as_tensor:
                return TENSOR
        return None

    def is_tensor(self, name: str) -> bool:
        return self.kind(name) == TENSOR

    def is_weight_name(self, name: str) -> bool:
        return any(name in scope.weights for scope in self.chain())

    def is_dict(self, name: str) -> bool:
        return any(name in scope.dicts for scope in self.chain())

    def assignments(self, name: str) -> list[ast.expr]:
        for scope in self.chain():
            if name in scope.assigned:
                return scope.assigned[name]
        return []


class Inference:
    """Builds scopes and says what an expression evaluates to, with the file's `names`."""

    def __init__(self, names: Names) -> None:
        self.names = names

    def build(
        self,
        owner: ast.AST,
        parent: Scope | None,
        params: list[ast.arg],
        defaults: dict[str, ast.expr] | None = None,
    ) -> Scope:
        scope = Scope(parent)
        scope.owner = owner
        for arg in params:
            names = annotation_names(arg.annotation)
            if names & TENSOR_ANNOTATIONS:
                scope.kinds[arg.arg] = TENSOR
                if "Parameter" in names:
                    scope.weights.add(arg.arg)
            elif names & NON_TENSOR_ANNOTATIONS:
                scope.kinds[arg.arg] = OTHER
            elif defaults and isinstance(defaults.get(arg.arg), ast.Constant):
                default = defaults[arg.arg]
                assert isinstance(default, ast.Constant)
                if default.value is not None:  # `x=None` is an optional tensor as often as not
                    scope.kinds[arg.arg] = OTHER
            if names & DICT_ANNOTATIONS:
                scope.dicts.add(arg.arg)
        for node in own_nodes(owner):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                self._record_assignment(node, scope)
            elif (
                isinstance(node, ast.For) and isinstance(node.target, ast.Name) and self._is_range(node.iter)
            ):
                scope.kinds[node.target.id] = OTHER
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.attr in TENSOR_USES and isinstance(node.ctx, ast.Load):
                    scope.used_as_tensor.add(node.value.id)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                scope.used_as_tensor.update(n.id for n in (node.left, node.right) if isinstance(n, ast.Name))
            elif (
                isinstance(node, ast.Call)
                and self.call_kind(node, scope) == TENSOR
                and node.args
                and isinstance(node.args[0], ast.Name)
                and (self.names.resolve(node.func) or "").rsplit(".", 1)[-1] not in TORCH_FACTORIES
            ):
                scope.used_as_tensor.add(node.args[0].id)  # `torch.nn.functional.pad(a, ...)`
        # Modules and `self` are not tensors, whatever attributes they carry.
        scope.used_as_tensor -= {"self", "cls", "ctx", *self.names.aliases}
        return scope

    def function_scope(self, func: FunctionNode | ast.Lambda, parent: Scope) -> Scope:
        params, defaults = parameters(func)
        scope = self.build(func, parent, params, defaults)
        if isinstance(func, ast.Lambda):
            # `sorted(d, key=lambda x: d[x])`: a lambda's parameters are keys far more often than tensors.
            scope.kinds.update({p.arg: OTHER for p in params})
        return scope

    @staticmethod
    def class_scope(cls: ast.ClassDef, parent: Scope) -> Scope:
        """Module state of a class: `self.X` attributes set up at construction (or never assigned
        here, e.g. an inherited `nn.Linear.weight`), not the ones a call writes (activation stashes)."""
        assigned_later: set[str] = set()
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or method.name in INIT_METHODS:
                continue
            for node in ast.walk(method):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and is_self(node.value)
                ):
                    assigned_later.add(node.attr)
        return Scope(parent, frozenset(assigned_later))

    def _is_range(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and self.names.resolve(node.func) in {
            "range",
            "triton.language.range",
        }

    def _record_assignment(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, scope: Scope) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            if isinstance(target, ast.Tuple | ast.List):
                self._record_unpacking(target, value, scope)
                continue
            key = last_name(target) if isinstance(target, ast.Name | ast.Attribute) else None
            if key is None:  # `cache` and `self._cache` are both tracked by their last name
                continue
            scope.assigned.setdefault(key, []).append(value)
            if self.is_dict_value(value):
                scope.dicts.add(key)
            kind = self.kind(value, scope)
            if isinstance(node, ast.AnnAssign):
                names = annotation_names(node.annotation)
                if names & DICT_ANNOTATIONS:
                    scope.dicts.add(key)
                kind = (
                    TENSOR
                    if names & TENSOR_ANNOTATIONS
                    else OTHER
                    if names & NON_TENSOR_ANNOTATIONS
                    else kind
                )
            if kind is not None and isinstance(target, ast.Name):
                scope.kinds[key] = kind
            if isinstance(value, ast.Call) and (self.names.resolve(value.func) or "").endswith(
                "nn.Parameter"
            ):
                scope.weights.add(key)

    def _record_unpacking(self, target: ast.Tuple | ast.List, value: ast.expr, scope: Scope) -> None:
        names = [element.id for element in target.elts if isinstance(element, ast.Name)]
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            for element, item in zip(target.elts, value.elts, strict=True):
                if isinstance(element, ast.Name):
                    kind = self.kind(item, scope)
                    if kind is not None:
                        scope.kinds[element.id] = kind
                    scope.assigned.setdefault(element.id, []).append(item)
            return
        if isinstance(value, ast.Attribute) and value.attr == "saved_tensors":
            scope.kinds.update({name: TENSOR for name in names})
        elif self.kind(value, scope) == OTHER or (isinstance(value, ast.Attribute) and value.attr == "shape"):
            scope.kinds.update({name: OTHER for name in names})

    def kind(self, value: ast.expr, scope: Scope) -> str | None:
        """TENSOR, OTHER or None (unknown) for what an expression evaluates to."""
        if isinstance(
            value,
            ast.Constant
            | ast.JoinedStr
            | ast.Compare
            | ast.BoolOp
            | ast.Lambda
            | ast.Dict
            | ast.DictComp
            | ast.Set
            | ast.SetComp
            | ast.List
            | ast.ListComp
            | ast.Tuple
            | ast.GeneratorExp,
        ):
            return OTHER
        if isinstance(value, ast.UnaryOp):
            return OTHER if isinstance(value.op, ast.Not) else self.kind(value.operand, scope)
        if isinstance(value, ast.Name):
            return scope.kind(value.id)
        if isinstance(value, ast.Attribute):
            if value.attr in TENSOR_METADATA:
                return OTHER
            if value.attr in TENSOR_VIEW_ATTRS and self.kind(value.value, scope) == TENSOR:
                return TENSOR
            return None
        if isinstance(value, ast.Subscript):
            base = value.value
            if (isinstance(base, ast.Attribute) and base.attr == "shape") or (
                isinstance(base, ast.Call) and last_name(base.func) in {"size", "stride"}
            ):
                return OTHER
            return TENSOR if self.kind(base, scope) == TENSOR else None
        if isinstance(value, ast.BinOp):
            kinds = {self.kind(value.left, scope), self.kind(value.right, scope)}
            if isinstance(value.op, ast.MatMult) or TENSOR in kinds:
                return TENSOR
            return OTHER if kinds == {OTHER} else None
        if isinstance(value, ast.IfExp):
            kinds = {self.kind(value.body, scope), self.kind(value.orelse, scope)}
            return TENSOR if TENSOR in kinds else OTHER if kinds == {OTHER} else None
        if isinstance(value, ast.Await):
            return self.kind(value.value, scope)
        if isinstance(value, ast.Call):
            return self.call_kind(value, scope)
        return None

    def call_kind(self, call: ast.Call, scope: Scope) -> str | None:
        func = self.names.resolve(call.func) or ""
        if func in VALUE_CALLS or func.startswith(("math.", "os.", "triton.language.constexpr")):
            return OTHER
        parts = func.split(".")
        if parts[0] == "torch":
            public = (len(parts) == 2 or func.startswith("torch.nn.functional.")) and not parts[
                -1
            ].startswith("_")
            if NON_TENSOR_TORCH_CALLS.match(func):
                return OTHER
            return TENSOR if public else None
        if isinstance(call.func, ast.Attribute):
            if call.func.attr in VALUE_METHODS:
                return OTHER
            if self.kind(call.func.value, scope) == TENSOR:
                return TENSOR  # `x.contiguous()`, `x.float()`, `x.view(...)`: a tensor method
        return None

    def is_dict_value(self, value: ast.expr) -> bool:
        if isinstance(value, ast.Dict | ast.DictComp):
            return True
        return isinstance(value, ast.Call) and (self.names.resolve(value.func) or "") in DICT_FACTORIES

    def is_weight(self, node: ast.expr, scope: Scope) -> bool:
        """Module state (`self.w` set up at construction) or an nn.Parameter; not a name."""
        if isinstance(node, ast.Attribute) and is_self(node.value):
            return scope.written_per_call is not None and node.attr not in scope.written_per_call
        if isinstance(node, ast.Name):
            if scope.is_weight_name(node.id):
                return True
            return any(
                isinstance(value, ast.Attribute) and self.is_weight(value, scope)
                for value in scope.assignments(node.id)
            )
        return False


def parameters(func: FunctionNode | ast.Lambda) -> tuple[list[ast.arg], dict[str, ast.expr]]:
    """Every parameter of `func` (positional, keyword-only, *args, **kwargs) and their defaults."""
    args = func.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    defaults = {a.arg: d for a, d in zip(with_default, args.defaults, strict=True)}
    defaults.update(
        {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
    )
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    return params, defaults
