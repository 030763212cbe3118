"""W1, W2, W3: caches keyed on a tensor (its identity, its version counter, or the tensor itself),
and state stashed on a tensor object."""

from __future__ import annotations

import ast

from gitcampaign.lint.keys import IDENTITY_FUNCS, Identity, KeyPart, KeyReader, is_descriptor_key
from gitcampaign.lint.names import FunctionNode, last_name, own_nodes
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.scope import OTHER, TENSOR, Scope, parameters
from gitcampaign.lint.walk import Context, Family

RULES = (
    Rule(
        "W2",
        "cache keyed on the identity of a non-weight tensor",
        (
            "a cache keyed on the identity of a non-weight tensor (activation, grad_out, activation scale): "
            "`id(x)`, `hash(x)` (a tensor hashes by identity), `x.data_ptr()`, storage pointers, "
            "`weakref.ref(x)`, `x._version` in a key (a subscript, an `in` test, `.get/.setdefault/.pop`, a "
            "dict literal key), also through aliases (`ident = id`, `ptr = x.data_ptr`, `x.__hash__()`) and "
            "helpers defined in the file; any `WeakKeyDictionary`; and state stashed on a tensor object "
            "(`x._fp8 = ...`, `setattr(x, ...)`), which is keyed on its identity too. Adding `_version`, "
            "shape or dtype does not help: in training every activation is new, while a freed one's id and "
            "data_ptr are reused by the next, so such caches miss or return stale results. A zero-copy "
            "descriptor cache (key: `data_ptr` with the shape and strides of the same tensor, no `_version`) "
            "is fine: the kernel reads live memory and reuses no result."
        ),
    ),
    Rule(
        "W1",
        "weight cache keyed on (id(weight), weight._version): allowed, gain capped at quantisation time",
        (
            "the allowed weight cache: the key holds the identity of a *weight* together with that same "
            "weight's `_version` (the optimiser's in-place update bumps it). Its gain is capped at the "
            "weight's quantisation time, so the verdict carries it as an asterisk. A weight identity without "
            "its `_version` is W2: it serves stale data after `optimizer.step()`."
        ),
        blocking=False,
    ),
    Rule(
        "W3",
        "memoisation keyed on a tensor",
        (
            "memoisation whose key holds a tensor: `functools.lru_cache` / `functools.cache` (as a decorator "
            "or applied as a call) on a function taking a tensor, or a dict (assigned `{}`/`dict()`/ "
            "`OrderedDict()`/`defaultdict()`, or annotated as a dict) indexed by a key holding a tensor "
            "(shape, dtype, device, strides of a tensor are fine)."
        ),
    ),
)

# Attributes a tensor legitimately carries: assigning them stashes nothing.
TENSOR_OWN_ATTRS = frozenset({"grad", "data", "requires_grad", "retains_grad", "names"})
MEMO_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "lru_cache", "cache"})


class Caches(Family):
    RULES = RULES
    ALIASABLE = IDENTITY_FUNCS

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.keys = KeyReader(context)

    def host_function(self, func: FunctionNode, scope: Scope) -> None:
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (self.context.resolve(target) or "") in MEMO_DECORATORS:
                self._check_memoised(func, scope, decorator)

    def node(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load | ast.Store):
            self._check_key(node.slice, node, scope, node.value)
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn):
                    self._check_key(node.left, node, scope, right)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    self._check_key(key, node, scope, None)
        elif isinstance(node, ast.Call):
            self._check_call(node, scope)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if node.value is not None and self.context.inference.kind(node.value, scope) == TENSOR:
                    self._check_stash(target, node, scope)

    def _check_call(self, call: ast.Call, scope: Scope) -> None:
        func = self.context.resolve(call.func) or ""
        if func == "weakref.WeakKeyDictionary":
            self.context.report(
                "W2",
                call,
                "WeakKeyDictionary keys a cache on tensor identity: a weight cache must key on "
                "(id(weight), weight._version); an activation cache is not allowed",
            )
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr in {"get", "setdefault", "pop"}
            and call.args
        ):
            self._check_key(call.args[0], call, scope, call.func.value)
        if (
            func == "setattr"
            and len(call.args) == 3
            and self.context.inference.kind(call.args[2], scope) == TENSOR
        ):
            first = call.args[0]
            if isinstance(first, ast.Name) and scope.is_tensor(first.id):
                attr = call.args[1].value if isinstance(call.args[1], ast.Constant) else "?"
                self._stash(first, str(attr), call, scope)
        self._check_memo_call(call, func)

    # -- keys: `container[key]`, `key in container`, `container.get(key)`, `{key: ...}` -------------

    def _check_key(self, key: ast.expr, at: ast.AST, scope: Scope, container: ast.expr | None) -> None:
        """The first of the key rules that finds something reports it (`container` is None for a
        dict literal's key)."""
        parts = list(self.keys.parts(key, scope))
        identities = self.keys.identities(parts)
        if self._check_identity_key(parts, identities, at, scope, container):
            return
        identity_dumps = {ast.dump(arg) for arg, _, _ in identities}
        if self._check_version_key(parts, identity_dumps, at):
            return
        name = last_name(container) if container is not None else None
        if name is not None and scope.is_dict(name):
            self._check_tensor_key(parts, identity_dumps, at)

    def _check_identity_key(
        self,
        parts: list[KeyPart],
        identities: list[Identity],
        at: ast.AST,
        scope: Scope,
        container: ast.expr | None,
    ) -> bool:
        """W1/W2: a key holding a tensor's identity (id, hash, data_ptr, ...); whether it reported."""
        versions = {
            ast.dump(node.value)
            for part, _ in parts
            for node in ast.walk(part)
            if isinstance(node, ast.Attribute) and node.attr == "_version"
        }
        for arg, part_scope, via_pointer in identities:
            name = ast.unparse(arg)
            if isinstance(arg, ast.Name) and part_scope.kind(arg.id) == OTHER:
                continue
            if (
                via_pointer
                and is_descriptor_key(arg, parts, versions)
                and not self._stores_results(container, scope)
            ):
                continue
            if not self.context.inference.is_weight(arg, part_scope):
                self.context.report(
                    "W2",
                    at,
                    f"cache keyed on the identity of `{name}`, which is not a weight held as module state "
                    "or an nn.Parameter: in training every activation/grad is new and freed ids/pointers "
                    "are reused, so it misses or returns stale results (adding _version, shape or dtype "
                    "does not fix it)",
                )
            elif ast.dump(arg) in versions:
                self.context.report(
                    "W1",
                    at,
                    f"weight cache keyed on (id({name}), {name}._version): allowed; its gain is capped "
                    "at the weight's quantisation time",
                )
            else:
                self.context.report(
                    "W2",
                    at,
                    f"cache keyed on the identity of weight `{name}` without `{name}._version`: after "
                    "optimizer.step() updates the weight in place it serves stale data",
                )
            return True
        return False

    def _check_version_key(self, parts: list[KeyPart], identity_dumps: set[str], at: ast.AST) -> bool:
        """W2: a key holding a non-weight tensor's version counter; whether it reported."""
        inference = self.context.inference
        for part, part_scope in parts:
            for node in ast.walk(part):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "_version"
                    and ast.dump(node.value) not in identity_dumps
                    and not inference.is_weight(node.value, part_scope)
                    and inference.kind(node.value, part_scope) != OTHER
                ):
                    self.context.report(
                        "W2",
                        at,
                        f"key holds the version counter of non-weight tensor `{ast.unparse(node.value)}`: "
                        "every fresh activation starts at the same version, so the cache serves another "
                        "step's data",
                    )
                    return True
        return False

    def _check_tensor_key(self, parts: list[KeyPart], identity_dumps: set[str], at: ast.AST) -> None:
        """W3: a dict indexed by a key holding a bare tensor."""
        tensor = next((t for part, s in parts for t in self.keys.bare_tensors(part, s, identity_dumps)), None)
        if tensor is not None:
            self.context.report(
                "W3",
                at,
                f"memoisation keyed on tensor `{tensor}`: a tensor hashes by identity, and in training "
                "every step's tensors are new, so the cache never hits honestly",
            )

    def _stores_results(self, container: ast.expr | None, scope: Scope) -> bool:
        """Whether this function stores a tensor into `container` (a result cache, not a descriptor)."""
        name = last_name(container) if container is not None else None
        if name is None or scope.owner is None:
            return container is None
        for node in own_nodes(scope.owner):
            stored: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Subscript) and last_name(t.value) == name for t in node.targets):
                    stored.append(node.value)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setdefault"
                and last_name(node.func.value) == name
            ):
                stored.extend(node.args[1:2])
            for value in stored:
                items = value.elts if isinstance(value, ast.Tuple | ast.List) else [value]
                if any(self.context.inference.kind(item, scope) == TENSOR for item in items):
                    return True
        return False

    # -- W3: memoised functions ----------------------------------------------------------------------

    def _check_memo_call(self, call: ast.Call, func: str) -> None:
        """`functools.lru_cache(maxsize=None)(quantise)` / `functools.cache(quantise)`."""
        wrapped: ast.expr | None = None
        if (
            isinstance(call.func, ast.Call)
            and (self.context.resolve(call.func.func) or "") in MEMO_DECORATORS
        ):
            wrapped = call.args[0] if call.args else None
        elif func in MEMO_DECORATORS and call.args and isinstance(call.args[0], ast.Name | ast.Attribute):
            wrapped = call.args[0]
        name = last_name(wrapped) if wrapped is not None else None
        target = self.context.functions.get(name) if name else None
        if target is not None:
            scope = self.context.inference.function_scope(target, self.context.module_scope)
            self._check_memoised(target, scope, call)

    def _check_memoised(self, func: FunctionNode, scope: Scope, at: ast.AST) -> None:
        params, _ = parameters(func)
        tensors = [p.arg for p in params if p.arg not in {"self", "cls"} and scope.is_tensor(p.arg)]
        if tensors:
            self.context.report(
                "W3",
                at,
                f"`{func.name}` is memoised on tensor argument(s) {', '.join(tensors)}: tensors hash by "
                "identity, so it hits only when the benchmark reuses its inputs",
            )

    # -- W2: state stashed on a tensor ---------------------------------------------------------------

    def _check_stash(self, target: ast.expr, at: ast.AST, scope: Scope) -> None:
        if (
            isinstance(target, ast.Attribute)
            and target.attr not in TENSOR_OWN_ATTRS
            and isinstance(target.value, ast.Name)
            and scope.is_tensor(target.value.id)
        ):
            self._stash(target.value, target.attr, at, scope)

    def _stash(self, tensor: ast.expr, attr: str, at: ast.AST, scope: Scope) -> None:
        if self.context.inference.is_weight(tensor, scope):
            return  # a weight's own attribute; a stale one is the harness's and the probe's to catch
        self.context.report(
            "W2",
            at,
            f"stashes tensor `{attr}` on tensor `{ast.unparse(tensor)}`: state keyed on the tensor object "
            "is an identity cache; in training every activation is new, and a stash found again means a "
            "reused input",
        )
