"""Static anti-cheat check: code patterns that win a benchmark and lose real training.

A campaign's harness gives every repeat fresh inputs, but a round can still hide a cheat the harness
does not exercise, or exercises only by luck. These AST rules name the patterns the static gate
(docs/design.md, Gates) forbids. Each finding says why the pattern breaks real training.

Rules (ids are stable: verdict notes and suppression comments name them):

- W2  a cache keyed on the identity of a non-weight tensor (activation, grad_out, activation scale):
      `id(x)`, `hash(x)` (a tensor hashes by identity), `x.data_ptr()`, `weakref.ref(x)`, `x._version`
      in a key (a subscript, an `in` test, `.get/.setdefault/.pop`, a dict literal key, or the return
      value of a function whose name says key/cache/memo), and any `WeakKeyDictionary`. Adding
      `_version`, shape or dtype to the key does not help: in training every activation is new,
      while a freed one's id and data_ptr are reused by the next, so such caches either miss or
      return stale results.
- W1  (info, not blocking) the allowed weight cache: the key holds the identity of a *weight* together
      with that same weight's `_version` (the optimiser's in-place update bumps it). Its gain is
      capped at the weight's quantisation time, so the verdict carries it as an asterisk.
      A name is a weight when its last component is `b` or `w` (the weight operand of
      `gemm(a, b)`), `w` followed by digits, starts with `w_`, ends with `_w`, or contains `weight`.
      A weight identity without its `_version` is W2: it serves stale data after `optimizer.step()`.
- W3  memoisation whose key holds a tensor: `functools.lru_cache` / `functools.cache` on a function
      taking a tensor, or a dict-like container (assigned `{}`/`dict()`/`OrderedDict()`/
      `defaultdict()`, annotated as a dict, or named like a cache/memo) indexed by a key holding a
      tensor (shape, dtype, device, strides of a tensor are fine). A tensor is a parameter annotated
      `Tensor`, a name assigned from a `torch.*` call, or a name in the usual tensor vocabulary
      (lower-case `a, b, x, y, h, w, inp, out, grad_out, dy, *_scale, ...`, or a single capital
      `A, B, X`; UPPER_CASE names are constants); an explicit non-tensor annotation (`int`,
      `torch.dtype`, ...) wins over the name.
- G1  a `tl.constexpr` kernel parameter that is a per-group (per-expert) M: a name with a per-group
      token (`per`, `group(s)`, `expert(s)`) and a row-count token (`m`, `rows`, `tokens`), e.g.
      `M_PER_GROUP`, `GROUP_M_SIZE`, `m_per_expert`, `tokens_per_expert`. Tile parameters (any name
      with `block`/`tile`) and the tile-order swizzles `GROUP_M`, `GROUP_N`, `GROUP_SIZE_*` are
      fine. A constexpr per-group M compiles one kernel per routing, which in training changes
      every step (or is right only for the benchmark's group sizes).
- T1  monkeypatching a clock or event: assigning (or `setattr`, `mock.patch`, `monkeypatch.setattr`)
      `time.perf_counter`, `time.time`, `torch.cuda.Event(.elapsed_time/.record)`,
      `torch.cuda.synchronize`, `triton.testing.do_bench`, ... The measurement is then fiction.
- S1  side streams, threads or processes in op code (`torch.cuda.Stream`, `torch.cuda.stream`,
      `threading.Thread`, `concurrent.futures`, `multiprocessing`): work hidden off the timed
      stream, which in training competes with the next layer.
- F1  a `try/except` whose handler falls back to the reference (`torch.matmul`, `F.linear`, `@`,
      `torch._scaled_mm`, `torch._grouped_mm`, a function named `*reference*`/`*_torch*`, or switching
      the backend env var to torch) instead of re-raising: the candidate can fail on shapes it
      claims and still report PASS.
- L0  a suppression comment without a reason, or naming an unknown rule.
- E0  a file that cannot be read or parsed: the check cannot vouch for it.

Suppression: `# campaign-lint: allow W2 -- why this is safe` on the flagged line (several ids may be
given comma-separated). The finding is still returned, with the reason, so the verdict reports it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

RULES = {
    "W1": "weight cache keyed on (id(weight), weight._version): allowed, gain capped at quantisation time",
    "W2": "cache keyed on the identity of a non-weight tensor",
    "W3": "memoisation keyed on a tensor",
    "G1": "per-group M as a compile-time constant",
    "T1": "monkeypatched clock or event",
    "S1": "side stream, thread or process in op code",
    "F1": "try/except falling back to the reference implementation",
    "L0": "malformed suppression comment",
    "E0": "file cannot be parsed",
}
INFO_RULES = frozenset({"W1"})


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    line: int
    message: str
    suppressed_reason: str | None = None

    @property
    def blocking(self) -> bool:
        """Whether this finding fails the gate: not informational and not suppressed with a reason."""
        return self.rule not in INFO_RULES and self.suppressed_reason is None


SUPPRESS_RE = re.compile(
    r"campaign-lint:\s*allow\s+(?P<rules>[A-Z]\w*(?:\s*,\s*[A-Z]\w*)*)\s*(?:--(?P<reason>.*))?", re.IGNORECASE
)

WEIGHT_NAME_RE = re.compile(r"^(b|w|w\d+|w_\w*|\w*_w|\w*weight\w*)$", re.IGNORECASE)
# Lower-case names only (UPPER_CASE is a constant by convention), plus the single capitals of
# math-style code (A @ B).
TENSOR_NAME_RE = re.compile(
    r"^([ABXYHW]\d?|a|b|x|y|h|w|t|a\d|b\d|x\d|h\d|w\d|inp|input|inputs|out|output|act|acts|activations?|"
    r"tensor|dx|dy|da|db|dw|dout|grad|grads|grad_[a-z0-9_]+|[a-z0-9_]+_grad|scale|scales|[a-z0-9_]+_scales?|"
    r"[a-z0-9_]+_fp8|[a-z0-9_]+_tensor|[a-z0-9_]*weight[a-z0-9_]*|group_sizes|hidden|hidden_states)$"
)
# A parameter annotated with one of these is not a tensor, whatever its name.
NON_TENSOR_ANNOTATIONS = frozenset(
    {"int", "float", "bool", "str", "bytes", "dtype", "device", "Size", "tuple"}
)
# Attributes of a tensor that describe it without being it: fine in a config key.
TENSOR_METADATA = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "size",
        "stride",
        "numel",
        "dim",
        "is_contiguous",
        "layout",
        "requires_grad",
        "is_cuda",
        "element_size",
        "itemsize",
        "nbytes",
    }
)
IDENTITY_FUNCS = frozenset({"id", "hash", "weakref.ref", "weakref.proxy"})
DICT_FACTORIES = frozenset(
    {
        "dict",
        "collections.OrderedDict",
        "collections.defaultdict",
        "OrderedDict",
        "defaultdict",
        "weakref.WeakKeyDictionary",
        "weakref.WeakValueDictionary",
    }
)
DICT_ANNOTATIONS = frozenset({"dict", "Dict", "MutableMapping", "OrderedDict", "defaultdict"})
CACHE_NAME_RE = re.compile(r"(cache|memo)", re.IGNORECASE)
KEY_FUNCTION_RE = re.compile(r"(key|cache|memo)", re.IGNORECASE)
MEMO_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "lru_cache", "cache"})

PER_GROUP_TOKENS = frozenset({"per", "group", "groups", "expert", "experts"})
ROW_TOKENS = frozenset({"m", "rows", "row", "tokens", "token"})
TILE_TOKENS = frozenset({"block", "tile"})
# Tile-order swizzles (the Triton tutorial's GROUP_SIZE_M): how many tile rows share a column band.
TILE_SWIZZLE_RE = re.compile(r"^(group_[mn]|group_size_\w+)$")

TIMERS = frozenset(
    {
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.process_time",
        "torch.cuda.Event",
        "torch.cuda.Event.elapsed_time",
        "torch.cuda.Event.record",
        "torch.cuda.Event.synchronize",
        "torch.cuda.synchronize",
        "torch.cuda.current_stream",
        "torch.Event",
        "torch.cuda.streams.Event",
        "triton.testing.do_bench",
        "triton.testing.do_bench_cudagraph",
        "torch.utils.benchmark.Timer",
    }
)
# Attribute names that are a clock whatever object they hang off (aliases the resolver cannot see).
TIMER_ATTRS = frozenset({"perf_counter", "perf_counter_ns", "do_bench", "do_bench_cudagraph"})
# Methods that are a clock when they hang off an Event class (`Event.elapsed_time = ...`).
EVENT_TIMER_ATTRS = frozenset({"elapsed_time", "record", "synchronize", "query"})
PATCH_FUNCS = frozenset({"patch", "setattr", "object"})

SIDE_WORK_CALLS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.set_stream",
        "torch.Stream",
        "torch.cuda.streams.Stream",
        "threading.Thread",
        "threading.Timer",
        "_thread.start_new_thread",
    }
)
SIDE_WORK_MODULES = ("concurrent.futures", "multiprocessing", "torch.multiprocessing")

FALLBACK_CALLS = frozenset(
    {
        "torch.matmul",
        "torch.mm",
        "torch.bmm",
        "torch.addmm",
        "torch.baddbmm",
        "torch.einsum",
        "torch.nn.functional.linear",
        "torch._scaled_mm",
        "torch._grouped_mm",
        "torch.Tensor.matmul",
    }
)
FALLBACK_NAME_RE = re.compile(r"(reference|^_?torch_|_torch$|_torch_)", re.IGNORECASE)

TRY_NODES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
# torch calls that return something other than a tensor.
NON_TENSOR_TORCH_CALLS = re.compile(r"^torch\.(cuda\.|backends\.|finfo|iinfo|device|Size|get_|is_|dtype)")

# Conventional aliases, used when the module does not import them itself.
DEFAULT_ALIASES = {"F": "torch.nn.functional", "tl": "triton.language"}


def lint_source(source: str, path: str) -> list[Finding]:
    """All findings in one Python source, suppressions applied, sorted by line."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [Finding("E0", path, line, f"cannot parse ({exc}): the anti-cheat check cannot vouch for it")]
    raw = _Checker(tree, path).run()
    return _apply_suppressions(raw, source, path)


def lint_paths(paths: Iterable[Path]) -> list[Finding]:
    """Findings in every Python file among `paths` (directories are searched recursively; named
    files that are not `.py`/`.pyi` are skipped, so `git campaign lint $(git diff --name-only)` works)."""
    findings: list[Finding] = []
    for file in _python_files(paths):
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            findings.append(
                Finding("E0", str(file), 1, f"cannot read ({exc}): the check cannot vouch for it")
            )
            continue
        findings.extend(lint_source(source, str(file)))
    return findings


def _python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if p.is_file())
        elif path.suffix in (".py", ".pyi"):
            yield path


# -- suppressions ------------------------------------------------------------------------------------


def _comments(source: str) -> dict[int, str]:
    """Comment text by line, from the tokenizer (so a directive inside a string does not count)."""
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string
    except (tokenize.TokenError, IndentationError):
        pass
    return comments


def _apply_suppressions(findings: list[Finding], source: str, path: str) -> list[Finding]:
    allowed: dict[int, tuple[set[str], str]] = {}
    result: list[Finding] = []
    for line, comment in _comments(source).items():
        match = SUPPRESS_RE.search(comment)
        if match is None:
            continue
        rules = {r.strip().upper() for r in match["rules"].replace(",", " ").split() if r.strip()}
        reason = (match["reason"] or "").strip()
        unknown = sorted(rules - RULES.keys())
        if unknown:
            result.append(
                Finding("L0", path, line, f"suppression names unknown rule(s) {', '.join(unknown)}")
            )
        if not reason:
            result.append(
                Finding(
                    "L0",
                    path,
                    line,
                    "suppression without a reason: write `# campaign-lint: allow ID -- why it is safe`",
                )
            )
            continue
        allowed[line] = (rules, reason)
    for finding in findings:
        rules_and_reason = allowed.get(finding.line)
        if rules_and_reason and finding.rule in rules_and_reason[0]:
            finding = Finding(finding.rule, finding.path, finding.line, finding.message, rules_and_reason[1])
        result.append(finding)
    unique = {(f.rule, f.line, f.message): f for f in result}
    return sorted(unique.values(), key=lambda f: (f.line, f.rule))


# -- the AST walk ------------------------------------------------------------------------------------


def _last_name(node: ast.AST) -> str | None:
    """`self.w1` -> `w1`, `weight` -> `weight`; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _annotation_names(annotation: ast.expr | None) -> set[str]:
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


class _Scope:
    """What the checker knows about one function (or the module): assignments, tensors, dicts."""

    def __init__(self, parent: _Scope | None) -> None:
        self.parent = parent
        self.assigned: dict[str, list[ast.expr]] = {}
        self.tensors: set[str] = set()
        self.non_tensors: set[str] = set()
        self.dicts: set[str] = set()

    def is_tensor_name(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.non_tensors:
                return False
            if name in scope.tensors:
                return True
            scope = scope.parent
        return bool(TENSOR_NAME_RE.match(name))

    def is_dict(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.dicts:
                return True
            scope = scope.parent
        return bool(CACHE_NAME_RE.search(name))

    def assignments(self, name: str) -> list[ast.expr]:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.assigned:
                return scope.assigned[name]
            scope = scope.parent
        return []


class _Checker:
    def __init__(self, tree: ast.Module, path: str) -> None:
        self.tree = tree
        self.path = path
        self.aliases: dict[str, str] = dict(DEFAULT_ALIASES)
        self.findings: list[Finding] = []

    def run(self) -> list[Finding]:
        self._collect_imports()
        module_scope = self._build_scope(self.tree, None, [])
        self._check_body(self.tree, module_scope)
        return self.findings

    def _add(self, rule: str, node: ast.AST, message: str) -> None:
        self.findings.append(Finding(rule, self.path, getattr(node, "lineno", 1), message))

    # -- names ---------------------------------------------------------------------------------------

    def _collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = root
                    if alias.name.startswith(SIDE_WORK_MODULES) or alias.name in SIDE_WORK_MODULES:
                        self._side_work_import(node, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith(SIDE_WORK_MODULES):
                    self._side_work_import(node, node.module)
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    self.aliases[alias.asname or alias.name] = full
                    if full in SIDE_WORK_MODULES:
                        self._side_work_import(node, full)

    def _side_work_import(self, node: ast.AST, module: str) -> None:
        self._add("S1", node, f"imports {module}: work run off the timed stream still costs a training step")

    def _resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression denotes, with import aliases expanded (`F.linear` ->
        `torch.nn.functional.linear`); None when it is not a plain dotted name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    # -- scopes --------------------------------------------------------------------------------------

    def _build_scope(self, owner: ast.AST, parent: _Scope | None, params: list[ast.arg]) -> _Scope:
        scope = _Scope(parent)
        for arg in params:
            names = _annotation_names(arg.annotation)
            if "Tensor" in names or "Parameter" in names:
                scope.tensors.add(arg.arg)
            elif names & NON_TENSOR_ANNOTATIONS or names & {"constexpr"}:
                scope.non_tensors.add(arg.arg)
        for node in _own_nodes(owner):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                for target in targets:
                    key = self._target_key(target)
                    if key is None or value is None:
                        continue
                    scope.assigned.setdefault(key, []).append(value)
                    if self._is_dict_value(value):
                        scope.dicts.add(key)
                    if isinstance(value, ast.Call) and self._returns_tensor(value):
                        scope.tensors.add(key)
                if isinstance(node, ast.AnnAssign):
                    key = self._target_key(node.target)
                    if key and _annotation_names(node.annotation) & DICT_ANNOTATIONS:
                        scope.dicts.add(key)
        return scope

    @staticmethod
    def _target_key(target: ast.expr) -> str | None:
        """`cache` and `self._cache` are both tracked by their last name."""
        return _last_name(target) if isinstance(target, ast.Name | ast.Attribute) else None

    def _returns_tensor(self, call: ast.Call) -> bool:
        """`torch.empty(...)`, `torch.nn.functional.gelu(...)`: public torch functions, not torch's
        internals (`torch._dynamo...`) nor the ones that return metadata (`torch.finfo`)."""
        func = self._resolve(call.func) or ""
        parts = func.split(".")
        public = (len(parts) == 2 and parts[0] == "torch") or func.startswith("torch.nn.functional.")
        return public and not parts[-1].startswith("_") and not NON_TENSOR_TORCH_CALLS.match(func)

    def _is_dict_value(self, value: ast.expr) -> bool:
        if isinstance(value, ast.Dict | ast.DictComp):
            return True
        return isinstance(value, ast.Call) and (self._resolve(value.func) or "") in DICT_FACTORIES

    # -- the walk ------------------------------------------------------------------------------------

    def _check_body(self, owner: ast.AST, scope: _Scope) -> None:
        for node in _own_nodes(owner):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                self._check_function(node, scope)
            elif isinstance(node, ast.ClassDef):
                self._check_body(node, scope)
            else:
                self._check_node(node, scope)

    def _check_function(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, parent: _Scope
    ) -> None:
        args = func.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        scope = self._build_scope(func, parent, params)
        if isinstance(func, ast.Lambda):
            # `sorted(d, key=lambda x: d[x])`: a lambda's parameters cannot be annotated, and as
            # sort keys they are dict keys far more often than tensors.
            scope.non_tensors.update(p.arg for p in params)
        if not isinstance(func, ast.Lambda):
            self._check_memo_decorator(func, scope, params)
            self._check_constexpr_group_m(func, params)
            if KEY_FUNCTION_RE.search(func.name):
                for node in _own_nodes(func):
                    if isinstance(node, ast.Return) and node.value is not None:
                        self._check_key(node.value, node, scope, dict_like=True)
        self._check_body(func, scope)

    def _check_node(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, ast.Subscript):
            self._check_key(node.slice, node, scope, dict_like=self._is_dict_expr(node.value, scope))
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn):
                    self._check_key(node.left, node, scope, dict_like=self._is_dict_expr(right, scope))
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    self._check_key(key, node, scope, dict_like=False)
        elif isinstance(node, ast.Call):
            self._check_call(node, scope)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self._check_timer_assignment(target)
        elif isinstance(node, TRY_NODES):
            for handler in node.handlers:
                self._check_fallback(handler)

    def _is_dict_expr(self, node: ast.expr, scope: _Scope) -> bool:
        name = _last_name(node)
        return name is not None and scope.is_dict(name)

    # -- W1 / W2 / W3: keys --------------------------------------------------------------------------

    def _check_key(self, key: ast.expr, at: ast.AST, scope: _Scope, dict_like: bool) -> None:
        parts = list(self._expand(key, scope, depth=0))
        versions = {
            ast.dump(node.value)
            for part in parts
            for node in ast.walk(part)
            if isinstance(node, ast.Attribute) and node.attr == "_version"
        }
        identity_args = self._identity_args(parts)
        for arg in identity_args:
            name = _last_name(arg) or ast.unparse(arg)
            if isinstance(arg, ast.Name) and arg.id in scope.non_tensors:
                continue
            if WEIGHT_NAME_RE.match(name):
                if ast.dump(arg) in versions:
                    self._add(
                        "W1",
                        at,
                        f"weight cache keyed on (id({name}), {name}._version): allowed; its gain is capped "
                        "at the weight's quantisation time",
                    )
                else:
                    self._add(
                        "W2",
                        at,
                        f"cache keyed on the identity of weight `{name}` without `{name}._version`: after "
                        "optimizer.step() updates the weight in place it serves stale data",
                    )
            else:
                what = (
                    f"non-weight tensor `{name}`"
                    if scope.is_tensor_name(name)
                    else f"`{name}` (no weight by name; if it is no tensor, suppress with the reason)"
                )
                self._add(
                    "W2",
                    at,
                    f"cache keyed on the identity of {what}: in training every activation/grad is new and "
                    "freed ids/pointers are reused, so it misses or returns stale results (adding "
                    "_version, shape or dtype does not fix it)",
                )
        identity_dumps = {ast.dump(arg) for arg in identity_args}
        for part in parts:
            for node in ast.walk(part):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "_version"
                    and ast.dump(node.value) not in identity_dumps
                    and not WEIGHT_NAME_RE.match(_last_name(node.value) or "")
                ):
                    self._add(
                        "W2",
                        at,
                        f"key holds the version counter of non-weight tensor `{ast.unparse(node.value)}`: "
                        "every fresh activation starts at the same version, so the cache serves another "
                        "step's data",
                    )
        if dict_like:
            tensor = next(
                (t for part in parts for t in self._bare_tensors(part, scope, identity_dumps)), None
            )
            if tensor is not None:
                self._add(
                    "W3",
                    at,
                    f"memoisation keyed on tensor `{tensor}`: a tensor hashes by identity, and in training "
                    "every step's tensors are new, so the cache never hits honestly",
                )

    def _expand(self, key: ast.expr, scope: _Scope, depth: int) -> Iterator[ast.expr]:
        """The key, plus what a key variable (or a variable element of a key tuple) was assigned,
        a few levels deep: `key = (id(a), a._version); cache[key]` is the same key as written inline.
        Names used through metadata (`a.shape`) are not expanded: only the key's own variables."""
        yield key
        if depth >= 3:
            return
        elements = key.elts if isinstance(key, ast.Tuple | ast.List) else [key]
        for element in elements:
            if isinstance(element, ast.Name):
                for value in scope.assignments(element.id):
                    yield from self._expand(value, scope, depth + 1)

    def _identity_args(self, parts: list[ast.expr]) -> list[ast.expr]:
        args: dict[str, ast.expr] = {}
        for part in parts:
            for node in ast.walk(part):
                if not isinstance(node, ast.Call):
                    continue
                func = self._resolve(node.func) or ""
                if func in IDENTITY_FUNCS and node.args:
                    args.setdefault(ast.dump(node.args[0]), node.args[0])
                elif isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr":
                    args.setdefault(ast.dump(node.func.value), node.func.value)
        return list(args.values())

    def _bare_tensors(self, part: ast.expr, scope: _Scope, identity_dumps: set[str]) -> Iterator[str]:
        """Tensor names used as themselves in a key (not via metadata, identity or _version)."""
        covered: set[ast.AST] = set()
        for node in ast.walk(part):
            if isinstance(node, ast.Attribute) and (node.attr in TENSOR_METADATA or node.attr == "_version"):
                covered.update(ast.walk(node.value))
            elif isinstance(node, ast.Call):
                func = self._resolve(node.func) or ""
                if func in IDENTITY_FUNCS or func in {"len", "type", "isinstance", "str", "repr"}:
                    covered.update(n for arg in node.args for n in ast.walk(arg))
                if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_METADATA | {"data_ptr"}:
                    covered.update(ast.walk(node.func.value))
            elif ast.dump(node) in identity_dumps:
                covered.update(ast.walk(node))
        for node in ast.walk(part):
            if node in covered:
                continue
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and scope.is_tensor_name(node.id)
            ):
                yield node.id
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in {"self", "ctx"}
                and TENSOR_NAME_RE.match(node.attr)
            ):
                yield ast.unparse(node)

    def _check_memo_decorator(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope, params: list[ast.arg]
    ) -> None:
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (self._resolve(target) or "") not in MEMO_DECORATORS:
                continue
            tensors = [p.arg for p in params if p.arg not in {"self", "cls"} and scope.is_tensor_name(p.arg)]
            if tensors:
                self._add(
                    "W3",
                    decorator,
                    f"`{func.name}` is memoised on tensor argument(s) {', '.join(tensors)}: tensors hash by "
                    "identity, so it hits only when the benchmark reuses its inputs",
                )

    # -- G1 ------------------------------------------------------------------------------------------

    def _check_constexpr_group_m(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, params: list[ast.arg]
    ) -> None:
        for arg in params:
            if "constexpr" not in _annotation_names(arg.annotation):
                continue
            tokens = set(arg.arg.lower().split("_"))
            if tokens & TILE_TOKENS or TILE_SWIZZLE_RE.match(arg.arg.lower()):
                continue
            if tokens & PER_GROUP_TOKENS and tokens & ROW_TOKENS:
                self._add(
                    "G1",
                    arg,
                    f"`{arg.arg}` in kernel `{func.name}` makes the per-group M a compile-time constant: "
                    "training routes tokens differently every step, so every step recompiles (or the "
                    "kernel is only right for the benchmark's group sizes)",
                )

    # -- T1 / S1 -------------------------------------------------------------------------------------

    def _check_timer_assignment(self, target: ast.expr) -> None:
        for node in ast.walk(target):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Store):
                continue
            name = self._resolve(node) or ""
            if name in TIMERS or self._is_timer_attribute(name):
                self._add(
                    "T1", node, f"assigns `{ast.unparse(node)}`: a patched clock makes the timing fiction"
                )

    @staticmethod
    def _is_timer_attribute(name: str) -> bool:
        """A clock reached through an alias the resolver cannot see (`from time import perf_counter`
        is a name; `timing.perf_counter`, `Event.elapsed_time` are attributes); an object's own
        attribute (`self.perf_counter = time.perf_counter`) is not a patch."""
        parts = name.split(".")
        if len(parts) < 2 or parts[0] in {"self", "cls"}:
            return False
        return parts[-1] in TIMER_ATTRS or (parts[-1] in EVENT_TIMER_ATTRS and parts[-2].endswith("Event"))

    def _check_call(self, call: ast.Call, scope: _Scope) -> None:
        func = self._resolve(call.func) or ""
        if func in SIDE_WORK_CALLS:
            self._add(
                "S1", call, f"`{func}(...)`: work hidden off the timed stream still costs a training step"
            )
        if func in {"weakref.WeakKeyDictionary"}:
            self._add(
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
            self._check_key(call.args[0], call, scope, dict_like=self._is_dict_expr(call.func.value, scope))
        self._check_patch_call(call, func)

    def _check_patch_call(self, call: ast.Call, func: str) -> None:
        last = func.rsplit(".", 1)[-1] if func else _last_name(call.func)
        if last not in PATCH_FUNCS or not call.args:
            return
        first = call.args[0]
        patched: str | None = None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            patched = first.value
        elif (
            len(call.args) >= 2
            and isinstance(call.args[1], ast.Constant)
            and isinstance(call.args[1].value, str)
        ):
            owner = self._resolve(first)
            patched = f"{owner}.{call.args[1].value}" if owner else call.args[1].value
        if patched and (patched in TIMERS or self._is_timer_attribute(patched)):
            self._add("T1", call, f"patches `{patched}`: a patched clock makes the timing fiction")

    # -- F1 ------------------------------------------------------------------------------------------

    def _check_fallback(self, handler: ast.ExceptHandler) -> None:
        if handler.body and isinstance(handler.body[-1], ast.Raise):
            return
        for node in ast.walk(handler):
            reason = self._fallback_reason(node)
            if reason:
                self._add(
                    "F1",
                    handler,
                    f"except handler falls back to {reason}: the candidate fails on shapes it claims and "
                    "still reports PASS; let the error propagate (or re-raise with a better message)",
                )
                return

    def _fallback_reason(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return "`@` (torch matmul)"
        if isinstance(node, ast.Call):
            func = self._resolve(node.func) or ""
            if func in FALLBACK_CALLS:
                return f"`{func}`"
            name = _last_name(node.func) or ""
            if name in {"matmul", "mm", "linear", "_scaled_mm", "_grouped_mm"}:
                return f"`{ast.unparse(node.func)}`"
            if FALLBACK_NAME_RE.search(name):
                return f"reference function `{name}`"
            if name in {"setdefault", "putenv"} and self._mentions_torch_backend(node):
                return "the torch backend"
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value == "torch"
            and any(
                isinstance(t, ast.Subscript) and "BACKEND" in ast.unparse(t.slice).upper()
                for t in node.targets
            )
        ):
            return "the torch backend"
        return None

    @staticmethod
    def _mentions_torch_backend(call: ast.Call) -> bool:
        texts = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        return any("BACKEND" in t.upper() for t in texts) and "torch" in texts


def _own_nodes(owner: ast.AST) -> Iterator[ast.AST]:
    """Every node inside `owner` that belongs to it rather than to a nested function or class
    (the nested definitions themselves are yielded, their bodies are not)."""
    stack = list(ast.iter_child_nodes(owner))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def format_finding(finding: Finding) -> str:
    """`path:line: ID message`, marked when the finding is informational or suppressed."""
    if finding.suppressed_reason is not None:
        tag = f" (suppressed: {finding.suppressed_reason})"
    elif not finding.blocking:
        tag = " (info)"
    else:
        tag = ""
    return f"{finding.path}:{finding.line}: {finding.rule}{tag} {finding.message}"
