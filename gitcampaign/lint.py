"""Static anti-cheat check: code patterns that win a benchmark and lose real training.

A campaign's harness gives every repeat fresh inputs and checks the very calls it times (see the
quick harness), so most cheats fail there at run time however they are spelled. These AST rules
add what only the source shows, and name the patterns the static gate (docs/design.md, Gates)
forbids. Each finding says why the pattern breaks real training.

What a name *is* decides, never what it is called: a name is a tensor when a parameter is annotated
`Tensor`/`Parameter`, when it was assigned from a call that makes a tensor (a public `torch.*`
function, a tensor method such as `.contiguous()`, `ctx.saved_tensors`) or from another tensor, or
when the function uses it as only a tensor is used (`x.data_ptr()`, `x.stride()`, `x @ y`, ...). It
is not a tensor when annotated otherwise, given a constant default, or assigned from `x.shape[0]`,
`int()`, `float()`, `bool()`, `len()`, a comparison, `triton.cdiv`, `.item()`, .... A weight is module
state (`self.w` assigned in `__init__` or never assigned by the class, e.g. an inherited
`nn.Linear.weight`) or an `nn.Parameter` (annotated or constructed), nothing else.

Rules (ids are stable: verdict notes and suppression comments name them):

{rules}

The bodies of `@triton.jit` (and other DSL `jit`/`kernel`) functions are device code: no cache
rule applies there, only G1 to their parameters.

Suppression: `# campaign-lint: allow W2 -- why this is safe` on the flagged line (several ids may be
given comma-separated). The finding is still returned, with the reason, so the verdict reports it.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rule:
    """One rule: its stable id, the one-line summary findings and `--rules` show, the description
    the module docstring lists, and whether a finding fails the gate (W1 only informs)."""

    id: str
    summary: str
    description: str
    blocking: bool = True

    def doc_entry(self) -> str:
        text = ("(info, not blocking) " if not self.blocking else "") + self.description
        return textwrap.fill(text, 104, initial_indent=f"- {self.id}  ", subsequent_indent=" " * 6)


RULE_TABLE = (
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
    Rule(
        "G1",
        "per-group M as a compile-time constant",
        (
            "a `tl.constexpr` kernel parameter that is a per-group (per-expert) M: a name with a group or "
            "expert token and a row-count token (`m`, `rows`, `tokens`), e.g. `M_PER_GROUP`, `GROUP_M_SIZE`, "
            "`tokens_per_expert`. Tile parameters (`block`/`tile`), widths and strides, and the tile-order "
            "swizzles `GROUP_M`, `GROUP_SIZE_*` are fine. A constexpr per-group M compiles one kernel per "
            "routing, which in training changes every step."
        ),
    ),
    Rule(
        "T1",
        "monkeypatched clock or event",
        (
            "monkeypatching a clock or event: assigning (or `setattr`, `mock.patch`, `monkeypatch.setattr`) "
            "`time.perf_counter`, `torch.cuda.Event(.elapsed_time/.record)`, `torch.cuda.synchronize`, "
            "`triton.testing.do_bench`, ..., also through a module alias, `sys.modules[...]`, `__dict__`, "
            "`vars()` or a computed attribute name. The measurement is then fiction."
        ),
    ),
    Rule(
        "S1",
        "side stream, thread or process in op code",
        (
            "side streams, threads or processes in op code (`torch.cuda.Stream`, `torch.cuda.stream`, "
            "`threading.Thread`, `concurrent.futures`, `multiprocessing`): work hidden off the timed stream, "
            "which in training competes with the next layer. A side stream joined back (`wait_stream`, "
            "`wait_event`, `event.wait()`, a synchronize) before its result is used is fine."
        ),
    ),
    Rule(
        "F1",
        "try/except falling back to the reference implementation",
        (
            "a `try/except` whose handler falls back to the reference (`torch.matmul`, `F.linear`, `@`, "
            "`torch._scaled_mm`, `torch._grouped_mm`, `torch.ops.aten.mm`, a function named "
            "`*reference*`/`*_torch*`, switching the backend env var to torch, or returning another "
            "implementation called on the op's tensors) instead of re-raising: the candidate can fail on "
            "shapes it claims and still report PASS."
        ),
    ),
    Rule(
        "D1",
        "benchmark detection (stack, gc or harness inspection) in op code",
        (
            "benchmark detection in op code: inspecting the call stack (`inspect.stack`, `sys._getframe`, "
            "`traceback.extract_stack`, frame attributes), the garbage collector (`gc.get_objects`, ...), "
            "`sys.argv`, or naming the harness. An op that knows it is measured can behave differently."
        ),
    ),
    Rule(
        "L0",
        "malformed suppression comment",
        ("a suppression comment without a reason, or naming an unknown rule."),
    ),
    Rule(
        "E0",
        "file cannot be parsed",
        ("a file that cannot be read or parsed: the check cannot vouch for it."),
    ),
)

RULES = {rule.id: rule.summary for rule in RULE_TABLE}
INFO_RULES = frozenset(rule.id for rule in RULE_TABLE if not rule.blocking)
__doc__ = (__doc__ or "").replace("{rules}", "\n".join(rule.doc_entry() for rule in RULE_TABLE))


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

TENSOR, OTHER = "tensor", "other"
# Annotations that make a name a tensor, and the ones that make it something else.
TENSOR_ANNOTATIONS = frozenset({"Tensor", "Parameter"})
NON_TENSOR_ANNOTATIONS = frozenset(
    {"int", "float", "bool", "str", "bytes", "dtype", "device", "Size", "tuple", "constexpr", "list", "dict"}
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
        "storage_offset",
        "is_leaf",
        "names",
    }
)
# Methods whose result is a plain value, whatever they are called on.
VALUE_METHODS = TENSOR_METADATA | {"item", "tolist", "data_ptr", "get_device", "__len__", "__hash__"}
# Attribute uses that only a tensor (or an array-like) has: evidence that an unannotated name is one.
TENSOR_USES = frozenset(
    {
        "data_ptr",
        "contiguous",
        "stride",
        "untyped_storage",
        "storage",
        "is_contiguous",
        "element_size",
        "numel",
        "_version",
        "detach",
        "view",
        "reshape",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "requires_grad_",
        "new_empty",
        "new_zeros",
        "storage_offset",
        "t",
        "T",
        "mT",
    }
)
# torch functions whose first argument is a size or a value, not a tensor.
TORCH_FACTORIES = frozenset(
    {
        "arange",
        "zeros",
        "ones",
        "empty",
        "full",
        "randn",
        "rand",
        "randint",
        "randperm",
        "tensor",
        "as_tensor",
        "asarray",
        "linspace",
        "logspace",
        "eye",
        "empty_strided",
        "from_numpy",
        "range",
        "scalar_tensor",
    }
)
TENSOR_VIEW_ATTRS = frozenset({"T", "mT", "H", "data", "grad"})
# Calls that return a plain value (the `x.shape[0]`, `float()`, `bool()` of the issue).
VALUE_CALLS = frozenset(
    {
        "int",
        "float",
        "bool",
        "str",
        "repr",
        "len",
        "tuple",
        "list",
        "dict",
        "set",
        "frozenset",
        "max",
        "min",
        "sum",
        "round",
        "divmod",
        "isinstance",
        "hasattr",
        "callable",
        "id",
        "hash",
        "range",
        "enumerate",
        "zip",
        "sorted",
        "type",
        "triton.cdiv",
        "triton.next_power_of_2",
        "cdiv",
        "next_power_of_2",
    }
)
# torch calls that return something other than a tensor.
NON_TENSOR_TORCH_CALLS = re.compile(
    r"^torch\.(cuda\.|backends\.|finfo|iinfo|device|Size|get_|is_|are_|dtype|compile|no_grad|"
    r"enable_grad|inference_mode|autocast|library|ops\.|_C|_dynamo|Generator|Stream|Event|typename|"
    r"manual_seed|set_|use_)"
)
IDENTITY_FUNCS = frozenset({"id", "hash", "weakref.ref", "weakref.proxy", "object.__hash__", "builtins.id"})
# `x.data_ptr()`, `x.untyped_storage().data_ptr()`: an address is an identity too.
POINTER_METHODS = frozenset({"data_ptr", "__hash__", "_cdata"})
POINTER_ATTRS = frozenset({"_cdata", "__cuda_array_interface__", "__array_interface__"})
STORAGE_METHODS = frozenset({"untyped_storage", "storage", "_typed_storage"})
# Attributes a tensor legitimately carries: assigning them stashes nothing.
TENSOR_OWN_ATTRS = frozenset({"grad", "data", "requires_grad", "retains_grad", "names"})
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
MEMO_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "lru_cache", "cache"})
# Decorators whose function body is device code (Triton, CuTe DSL, ...): no host-side cache there.
DEVICE_DECORATORS = frozenset({"jit", "kernel", "autotune", "heuristics", "func", "inline"})
INIT_METHODS = frozenset({"__init__", "__post_init__", "reset_parameters", "_init_weights", "setup"})

GROUP_TOKENS = frozenset({"group", "groups", "expert", "experts"})
ROW_TOKENS = frozenset({"m", "rows", "row", "tokens", "token"})
# A tile, a vector width or a stride says how rows are walked, not how many a group has.
NOT_A_COUNT_TOKENS = frozenset({"block", "tile", "width", "stride", "load", "vec", "bits", "chunk", "pad"})
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
# The objects that own a clock: writing an attribute of one through a name the reader cannot see
# (`__dict__`, `vars()`, a computed `setattr`) is a patch.
TIMER_OWNERS = frozenset({name.rsplit(".", 1)[0] for name in TIMERS} | {"time", "torch.cuda"})
# Attribute names that are a clock whatever object they hang off (aliases the resolver cannot see).
TIMER_ATTRS = frozenset({"perf_counter", "perf_counter_ns", "do_bench", "do_bench_cudagraph"})
# Methods that are a clock when they hang off an Event class (`Event.elapsed_time = ...`).
EVENT_TIMER_ATTRS = frozenset({"elapsed_time", "record", "synchronize", "query"})
PATCH_FUNCS = frozenset({"patch", "setattr", "object", "__setattr__"})

SIDE_STREAM_CALLS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.set_stream",
        "torch.Stream",
        "torch.cuda.streams.Stream",
    }
)
SIDE_WORK_CALLS = SIDE_STREAM_CALLS | {"threading.Thread", "threading.Timer", "_thread.start_new_thread"}
SIDE_WORK_MODULES = ("concurrent.futures", "multiprocessing", "torch.multiprocessing")
# Calls that make the current stream (or the host) wait for another stream's work.
JOIN_METHODS = frozenset({"wait_stream", "wait_event", "wait", "synchronize"})

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
MATMUL_NAMES = frozenset({"matmul", "mm", "bmm", "addmm", "linear", "_scaled_mm", "_grouped_mm", "einsum"})
FALLBACK_NAME_RE = re.compile(r"(reference|^_?torch_|_torch$|_torch_)", re.IGNORECASE)

# Benchmark detection: who called me, what else is alive, which program runs.
DETECTION_CALLS = frozenset(
    {
        "inspect.stack",
        "inspect.currentframe",
        "inspect.getouterframes",
        "inspect.getframeinfo",
        "inspect.trace",
        "sys._getframe",
        "sys._current_frames",
        "traceback.extract_stack",
        "traceback.format_stack",
        "traceback.walk_stack",
        "traceback.print_stack",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "f_code", "tb_frame"})
HARNESS_NAMES = ("quick_test_bench", "train_probe")

TRY_NODES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)

# Conventional aliases, used when the module does not import them itself.
DEFAULT_ALIASES = {"F": "torch.nn.functional", "tl": "triton.language"}

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


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


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in {"self", "cls"}


def _own_nodes(owner: ast.AST) -> Iterator[ast.AST]:
    """Every node inside `owner` that belongs to it rather than to a nested function or class
    (the nested definitions themselves are yielded, their bodies are not), in source order."""
    stack = list(reversed(list(ast.iter_child_nodes(owner))))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


class _Scope:
    """What the checker knows about one function (or the module): what each name is."""

    def __init__(self, parent: _Scope | None, written_per_call: frozenset[str] | None = None) -> None:
        self.parent = parent
        self.assigned: dict[str, list[ast.expr]] = {}
        self.kinds: dict[str, str] = {}  # TENSOR or OTHER, from annotations and assignments
        self.used_as_tensor: set[str] = set()
        self.weights: set[str] = set()  # names bound to an nn.Parameter
        self.dicts: set[str] = set()
        self.joins = False  # the function makes the current stream wait for another one
        # Inside a class: the `self.X` attributes its methods write per call (activation stashes,
        # not module state); None outside any class, where `self.X` is nobody's module state.
        inherited = parent.written_per_call if parent is not None else None
        self.written_per_call: frozenset[str] | None = (
            written_per_call if written_per_call is not None else inherited
        )
        self.owner: ast.AST | None = None

    def _chain(self) -> Iterator[_Scope]:
        scope: _Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def kind(self, name: str) -> str | None:
        for scope in self._chain():
            if name in scope.kinds:
                return scope.kinds[name]
            if name in scope.used_as_tensor:
                return TENSOR
        return None

    def is_tensor(self, name: str) -> bool:
        return self.kind(name) == TENSOR

    def is_weight_name(self, name: str) -> bool:
        return any(name in scope.weights for scope in self._chain())

    def is_dict(self, name: str) -> bool:
        return any(name in scope.dicts for scope in self._chain())

    def assignments(self, name: str) -> list[ast.expr]:
        for scope in self._chain():
            if name in scope.assigned:
                return scope.assigned[name]
        return []

    def joined(self) -> bool:
        return any(scope.joins for scope in self._chain())


class _Checker:
    def __init__(self, tree: ast.Module, path: str) -> None:
        self.tree = tree
        self.path = path
        self.aliases: dict[str, str] = dict(DEFAULT_ALIASES)
        self.findings: list[Finding] = []
        self.functions: dict[str, FunctionNode] = {}
        self.module_scope = _Scope(None)

    def run(self) -> list[Finding]:
        self._collect_imports()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, node)
        self.module_scope = self._build_scope(self.tree, None, [])
        self._check_body(self.tree, self.module_scope)
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
        # Module aliases made by assignment (`clock = time`, `t = sys.modules["time"]`,
        # `ident = id`): what the alias denotes, for the timer and identity rules.
        for node in ast.walk(self.tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                denoted = self._resolve(node.value)
                if denoted and (denoted in TIMER_OWNERS or denoted in TIMERS or denoted in IDENTITY_FUNCS):
                    self.aliases[node.targets[0].id] = denoted

    def _side_work_import(self, node: ast.AST, module: str) -> None:
        self._add("S1", node, f"imports {module}: work run off the timed stream still costs a training step")

    def _resolve(self, node: ast.AST) -> str | None:
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
            and self._resolve(node.value) == "sys.modules"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            return node.slice.value
        if (
            isinstance(node, ast.Call)
            and self._resolve(node.func) in {"importlib.import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return node.args[0].value
        return None

    # -- scopes: what each name is -------------------------------------------------------------------

    def _build_scope(
        self,
        owner: ast.AST,
        parent: _Scope | None,
        params: list[ast.arg],
        defaults: dict[str, ast.expr] | None = None,
    ) -> _Scope:
        scope = _Scope(parent)
        scope.owner = owner
        for arg in params:
            names = _annotation_names(arg.annotation)
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
        for node in _own_nodes(owner):
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
            elif isinstance(node, ast.Call):
                scope.joins |= self._is_join(node)
                if (
                    self._call_kind(node, scope) == TENSOR
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and (self._resolve(node.func) or "").rsplit(".", 1)[-1] not in TORCH_FACTORIES
                ):
                    scope.used_as_tensor.add(node.args[0].id)  # `torch.nn.functional.pad(a, ...)`
        # Modules and `self` are not tensors, whatever attributes they carry.
        scope.used_as_tensor -= {"self", "cls", "ctx", *self.aliases}
        return scope

    def _is_range(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and self._resolve(node.func) in {"range", "triton.language.range"}

    def _record_assignment(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, scope: _Scope) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            if isinstance(target, ast.Tuple | ast.List):
                self._record_unpacking(target, value, scope)
                continue
            key = self._target_key(target)
            if key is None:
                continue
            scope.assigned.setdefault(key, []).append(value)
            if self._is_dict_value(value):
                scope.dicts.add(key)
            kind = self._kind(value, scope)
            if isinstance(node, ast.AnnAssign):
                names = _annotation_names(node.annotation)
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
            if isinstance(value, ast.Call) and (self._resolve(value.func) or "").endswith("nn.Parameter"):
                scope.weights.add(key)

    def _record_unpacking(self, target: ast.Tuple | ast.List, value: ast.expr, scope: _Scope) -> None:
        names = [element.id for element in target.elts if isinstance(element, ast.Name)]
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            for element, item in zip(target.elts, value.elts, strict=True):
                if isinstance(element, ast.Name):
                    kind = self._kind(item, scope)
                    if kind is not None:
                        scope.kinds[element.id] = kind
                    scope.assigned.setdefault(element.id, []).append(item)
            return
        if isinstance(value, ast.Attribute) and value.attr == "saved_tensors":
            scope.kinds.update({name: TENSOR for name in names})
        elif self._kind(value, scope) == OTHER or (
            isinstance(value, ast.Attribute) and value.attr == "shape"
        ):
            scope.kinds.update({name: OTHER for name in names})

    @staticmethod
    def _target_key(target: ast.expr) -> str | None:
        """`cache` and `self._cache` are both tracked by their last name."""
        return _last_name(target) if isinstance(target, ast.Name | ast.Attribute) else None

    def _kind(self, value: ast.expr, scope: _Scope) -> str | None:
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
            return OTHER if isinstance(value.op, ast.Not) else self._kind(value.operand, scope)
        if isinstance(value, ast.Name):
            return scope.kind(value.id)
        if isinstance(value, ast.Attribute):
            if value.attr in TENSOR_METADATA:
                return OTHER
            if value.attr in TENSOR_VIEW_ATTRS and self._kind(value.value, scope) == TENSOR:
                return TENSOR
            return None
        if isinstance(value, ast.Subscript):
            base = value.value
            if (isinstance(base, ast.Attribute) and base.attr == "shape") or (
                isinstance(base, ast.Call) and _last_name(base.func) in {"size", "stride"}
            ):
                return OTHER
            return TENSOR if self._kind(base, scope) == TENSOR else None
        if isinstance(value, ast.BinOp):
            kinds = {self._kind(value.left, scope), self._kind(value.right, scope)}
            if isinstance(value.op, ast.MatMult) or TENSOR in kinds:
                return TENSOR
            return OTHER if kinds == {OTHER} else None
        if isinstance(value, ast.IfExp):
            kinds = {self._kind(value.body, scope), self._kind(value.orelse, scope)}
            return TENSOR if TENSOR in kinds else OTHER if kinds == {OTHER} else None
        if isinstance(value, ast.Await):
            return self._kind(value.value, scope)
        if isinstance(value, ast.Call):
            return self._call_kind(value, scope)
        return None

    def _call_kind(self, call: ast.Call, scope: _Scope) -> str | None:
        func = self._resolve(call.func) or ""
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
            if self._kind(call.func.value, scope) == TENSOR:
                return TENSOR  # `x.contiguous()`, `x.float()`, `x.view(...)`: a tensor method
        return None

    def _is_dict_value(self, value: ast.expr) -> bool:
        if isinstance(value, ast.Dict | ast.DictComp):
            return True
        return isinstance(value, ast.Call) and (self._resolve(value.func) or "") in DICT_FACTORIES

    def _is_join(self, call: ast.Call) -> bool:
        func = self._resolve(call.func) or ""
        return func == "torch.cuda.synchronize" or (
            isinstance(call.func, ast.Attribute) and call.func.attr in JOIN_METHODS and func != "time.sleep"
        )

    # -- the walk ------------------------------------------------------------------------------------

    def _check_body(self, owner: ast.AST, scope: _Scope) -> None:
        for node in _own_nodes(owner):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                self._check_function(node, scope)
            elif isinstance(node, ast.ClassDef):
                self._check_body(node, self._class_scope(node, scope))
            else:
                self._check_node(node, scope)

    def _class_scope(self, cls: ast.ClassDef, parent: _Scope) -> _Scope:
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
                    and _is_self(node.value)
                ):
                    assigned_later.add(node.attr)
        return _Scope(parent, frozenset(assigned_later))

    def _params(self, func: FunctionNode | ast.Lambda) -> tuple[list[ast.arg], dict[str, ast.expr]]:
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

    def _function_scope(self, func: FunctionNode | ast.Lambda, parent: _Scope) -> _Scope:
        params, defaults = self._params(func)
        scope = self._build_scope(func, parent, params, defaults)
        if isinstance(func, ast.Lambda):
            # `sorted(d, key=lambda x: d[x])`: a lambda's parameters are keys far more often than tensors.
            scope.kinds.update({p.arg: OTHER for p in params})
        return scope

    def _is_device_code(self, func: FunctionNode) -> bool:
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = self._resolve(target) or ""
            if name.rsplit(".", 1)[-1] in DEVICE_DECORATORS and not name.startswith(("functools", "torch")):
                return True
        return False

    def _check_function(self, func: FunctionNode | ast.Lambda, parent: _Scope) -> None:
        scope = self._function_scope(func, parent)
        if not isinstance(func, ast.Lambda):
            params, _ = self._params(func)
            self._check_constexpr_group_m(func, params)
            if self._is_device_code(func):
                return  # device code: no host cache, stream or clock lives there
            self._check_memo_decorator(func, scope)
        self._check_body(func, scope)

    def _check_node(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load | ast.Store):
            self._check_key(node.slice, node, scope, node.value)
        elif isinstance(node, ast.Compare):
            self._check_harness_test(node)
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
                self._check_timer_assignment(target)
                if node.value is not None and self._kind(node.value, scope) == TENSOR:
                    self._check_stash(target, node, scope)
        elif isinstance(node, TRY_NODES):
            for handler in node.handlers:
                self._check_fallback(handler, scope)
        elif isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRS:
            self._add(
                "D1", node, f"reads `.{node.attr}`: op code that inspects its callers can tell a benchmark"
            )

    def _check_harness_test(self, compare: ast.Compare) -> None:
        """`"quick_test_bench" in sys.modules`, `frame.filename.endswith(...) == ...`: a test for the harness."""
        for node in ast.walk(compare):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and any(name in node.value for name in HARNESS_NAMES)
            ):
                self._add(
                    "D1",
                    compare,
                    "tests for the campaign harness: an op that knows it is measured can behave differently",
                )
                return

    def _is_dict_expr(self, node: ast.expr, scope: _Scope) -> bool:
        name = _last_name(node)
        return name is not None and scope.is_dict(name)

    # -- W1 / W2 / W3: keys --------------------------------------------------------------------------

    def _check_key(self, key: ast.expr, at: ast.AST, scope: _Scope, container: ast.expr | None) -> None:
        """`container[key]`, `key in container`, `container.get(key)`, `{key: ...}` (no container):
        the first of the key rules that finds something reports it."""
        parts = list(self._expand(key, scope, depth=0))
        identities = self._identity_args(parts)
        if self._check_identity_key(parts, identities, at, scope, container):
            return
        identity_dumps = {ast.dump(arg) for arg, _, _ in identities}
        if self._check_version_key(parts, identity_dumps, at):
            return
        if container is not None and self._is_dict_expr(container, scope):
            self._check_tensor_key(parts, identity_dumps, at)

    def _check_identity_key(
        self,
        parts: list[tuple[ast.expr, _Scope]],
        identities: list[tuple[ast.expr, _Scope, bool]],
        at: ast.AST,
        scope: _Scope,
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
                and self._is_descriptor_key(arg, parts, versions)
                and not self._stores_results(container, scope)
            ):
                continue
            if self._is_weight(arg, part_scope):
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
                self._add(
                    "W2",
                    at,
                    f"cache keyed on the identity of `{name}`, which is not a weight held as module state "
                    "or an nn.Parameter: in training every activation/grad is new and freed ids/pointers "
                    "are reused, so it misses or returns stale results (adding _version, shape or dtype "
                    "does not fix it)",
                )
            return True
        return False

    def _check_version_key(
        self, parts: list[tuple[ast.expr, _Scope]], identity_dumps: set[str], at: ast.AST
    ) -> bool:
        """W2: a key holding a non-weight tensor's version counter; whether it reported."""
        for part, part_scope in parts:
            for node in ast.walk(part):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "_version"
                    and ast.dump(node.value) not in identity_dumps
                    and not self._is_weight(node.value, part_scope)
                    and self._kind(node.value, part_scope) != OTHER
                ):
                    self._add(
                        "W2",
                        at,
                        f"key holds the version counter of non-weight tensor `{ast.unparse(node.value)}`: "
                        "every fresh activation starts at the same version, so the cache serves another "
                        "step's data",
                    )
                    return True
        return False

    def _check_tensor_key(
        self, parts: list[tuple[ast.expr, _Scope]], identity_dumps: set[str], at: ast.AST
    ) -> None:
        """W3: a dict indexed by a key holding a bare tensor."""
        tensor = next((t for part, s in parts for t in self._bare_tensors(part, s, identity_dumps)), None)
        if tensor is not None:
            self._add(
                "W3",
                at,
                f"memoisation keyed on tensor `{tensor}`: a tensor hashes by identity, and in training "
                "every step's tensors are new, so the cache never hits honestly",
            )

    def _expand(self, key: ast.expr, scope: _Scope, depth: int) -> Iterator[tuple[ast.expr, _Scope]]:
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
                    yield from self._expand(value, scope, depth + 1)
            elif isinstance(element, ast.Call):
                helper = self._helper(element)
                if helper is not None:
                    helper_scope = self._function_scope(helper, self.module_scope)
                    for node in _own_nodes(helper):
                        if isinstance(node, ast.Return) and node.value is not None:
                            yield from self._expand(node.value, helper_scope, depth + 1)

    def _helper(self, call: ast.Call) -> FunctionNode | None:
        """A function of this file called as `name(...)` or `self.name(...)`."""
        if isinstance(call.func, ast.Name) or (
            isinstance(call.func, ast.Attribute) and _is_self(call.func.value)
        ):
            name = _last_name(call.func)
            return self.functions.get(name) if name else None
        return None

    def _identity_args(self, parts: list[tuple[ast.expr, _Scope]]) -> list[tuple[ast.expr, _Scope, bool]]:
        """(object, scope, by address) for every identity in the key parts."""
        found: dict[str, tuple[ast.expr, _Scope, bool]] = {}
        for part, scope in parts:
            for node in ast.walk(part):
                identity = self._identity_of(node, scope)
                if identity is not None:
                    found.setdefault(ast.dump(identity[0]), (identity[0], scope, identity[1]))
        return list(found.values())

    def _identity_of(self, node: ast.AST, scope: _Scope) -> tuple[ast.expr, bool] | None:
        """The object whose identity `node` takes, and whether it is an address (data_ptr & co)."""
        if isinstance(node, ast.Attribute) and node.attr in POINTER_ATTRS:
            return self._storage_owner(node.value), True
        if not isinstance(node, ast.Call):
            return None
        func = self._resolve(node.func) or ""
        if (func in IDENTITY_FUNCS or func.endswith(".__hash__")) and node.args:
            return node.args[0], False
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in POINTER_METHODS and not node.args:
                return self._storage_owner(node.func.value), node.func.attr != "__hash__"
            if (
                node.func.attr == "__call__"
                and self._resolve(node.func.value) in IDENTITY_FUNCS
                and node.args
            ):
                return node.args[0], False
        if isinstance(node.func, ast.Name):
            for bound in scope.assignments(node.func.id):  # `ptr = x.data_ptr; ptr()`
                if isinstance(bound, ast.Attribute) and bound.attr in POINTER_METHODS:
                    return self._storage_owner(bound.value), True
                if self._resolve(bound) in IDENTITY_FUNCS and node.args:  # `ident = id; ident(x)`
                    return node.args[0], False
        if (  # `getattr(x, "data_ptr")()`
            isinstance(node.func, ast.Call)
            and self._resolve(node.func.func) == "getattr"
            and len(node.func.args) >= 2
            and isinstance(node.func.args[1], ast.Constant)
            and node.func.args[1].value in POINTER_METHODS
        ):
            return self._storage_owner(node.func.args[0]), True
        return None

    @staticmethod
    def _storage_owner(node: ast.expr) -> ast.expr:
        """`x.untyped_storage()` -> `x`: the storage's address is the tensor's identity."""
        while (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in STORAGE_METHODS
        ):
            node = node.func.value
        return node

    @staticmethod
    def _is_descriptor_key(arg: ast.expr, parts: list[tuple[ast.expr, _Scope]], versions: set[str]) -> bool:
        """An address with the view (shape, strides) of the same tensor and no `_version`: a
        zero-copy descriptor of live memory, which reuses no result (unless the function stores a
        tensor in the cache, checked by the caller)."""
        if ast.dump(arg) in versions:
            return False
        described: set[str] = set()
        for part, _ in parts:
            for node in ast.walk(part):
                if isinstance(node, ast.Attribute) and ast.dump(node.value) == ast.dump(arg):
                    described.add(node.attr)
        return bool(described & {"shape", "size", "stride"})

    def _stores_results(self, container: ast.expr | None, scope: _Scope) -> bool:
        """Whether this function stores a tensor into `container` (a result cache, not a descriptor)."""
        name = _last_name(container) if container is not None else None
        if name is None or scope.owner is None:
            return container is None
        for node in _own_nodes(scope.owner):
            stored: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Subscript) and _last_name(t.value) == name for t in node.targets):
                    stored.append(node.value)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setdefault"
                and _last_name(node.func.value) == name
            ):
                stored.extend(node.args[1:2])
            for value in stored:
                items = value.elts if isinstance(value, ast.Tuple | ast.List) else [value]
                if any(self._kind(item, scope) == TENSOR for item in items):
                    return True
        return False

    def _is_weight(self, node: ast.expr, scope: _Scope) -> bool:
        """Module state (`self.w` set up at construction) or an nn.Parameter; not a name."""
        if isinstance(node, ast.Attribute) and _is_self(node.value):
            return scope.written_per_call is not None and node.attr not in scope.written_per_call
        if isinstance(node, ast.Name):
            if scope.is_weight_name(node.id):
                return True
            return any(
                isinstance(value, ast.Attribute) and self._is_weight(value, scope)
                for value in scope.assignments(node.id)
            )
        return False

    def _bare_tensors(self, part: ast.expr, scope: _Scope, identity_dumps: set[str]) -> Iterator[str]:
        """Tensor names used as themselves in a key (not via metadata, identity or _version)."""
        covered: set[ast.AST] = set()
        for node in ast.walk(part):
            if isinstance(node, ast.Attribute) and (node.attr in TENSOR_METADATA or node.attr == "_version"):
                covered.update(ast.walk(node.value))
            elif isinstance(node, ast.Compare):  # `scale is not None`: a bool
                covered.update(ast.walk(node))
            elif isinstance(node, ast.Call):
                func = self._resolve(node.func) or ""
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

    def _check_memo_decorator(self, func: FunctionNode, scope: _Scope) -> None:
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (self._resolve(target) or "") in MEMO_DECORATORS:
                self._check_memoised(func, scope, decorator)

    def _check_memoised(self, func: FunctionNode, scope: _Scope, at: ast.AST) -> None:
        params, _ = self._params(func)
        tensors = [p.arg for p in params if p.arg not in {"self", "cls"} and scope.is_tensor(p.arg)]
        if tensors:
            self._add(
                "W3",
                at,
                f"`{func.name}` is memoised on tensor argument(s) {', '.join(tensors)}: tensors hash by "
                "identity, so it hits only when the benchmark reuses its inputs",
            )

    # -- W2: state stashed on a tensor ---------------------------------------------------------------

    def _check_stash(self, target: ast.expr, at: ast.AST, scope: _Scope) -> None:
        if (
            isinstance(target, ast.Attribute)
            and target.attr not in TENSOR_OWN_ATTRS
            and isinstance(target.value, ast.Name)
            and scope.is_tensor(target.value.id)
        ):
            self._stash(target.value, target.attr, at, scope)

    def _stash(self, tensor: ast.expr, attr: str, at: ast.AST, scope: _Scope) -> None:
        name = ast.unparse(tensor)
        if self._is_weight(tensor, scope):
            return  # a weight's own attribute; a stale one is the harness's and the probe's to catch
        self._add(
            "W2",
            at,
            f"stashes tensor `{attr}` on tensor `{name}`: state keyed on the tensor object is an "
            "identity cache; in training every activation is new, and a stash found again means a "
            "reused input",
        )

    # -- G1 ------------------------------------------------------------------------------------------

    def _check_constexpr_group_m(self, func: FunctionNode, params: list[ast.arg]) -> None:
        for arg in params:
            if "constexpr" not in _annotation_names(arg.annotation):
                continue
            tokens = set(arg.arg.lower().split("_"))
            if tokens & NOT_A_COUNT_TOKENS or TILE_SWIZZLE_RE.match(arg.arg.lower()):
                continue
            if tokens & GROUP_TOKENS and tokens & ROW_TOKENS:
                self._add(
                    "G1",
                    arg,
                    f"`{arg.arg}` in kernel `{func.name}` makes the per-group M a compile-time constant: "
                    "training routes tokens differently every step, so every step recompiles (or the "
                    "kernel is only right for the benchmark's group sizes)",
                )

    # -- T1 / S1 / D1 --------------------------------------------------------------------------------

    def _check_timer_assignment(self, target: ast.expr) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = self._resolve(node) or ""
                if name in TIMERS or self._is_timer_attribute(name):
                    self._add(
                        "T1", node, f"assigns `{ast.unparse(node)}`: a patched clock makes the timing fiction"
                    )
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                owner = self._namespace_owner(node.value)
                if owner is not None:
                    self._add(
                        "T1",
                        node,
                        f"writes into the namespace of `{owner}`: a clock patched through `__dict__` or "
                        "`vars()` makes the timing fiction",
                    )

    def _namespace_owner(self, node: ast.expr) -> str | None:
        """`time.__dict__`, `vars(torch.cuda.Event)`: the clock owner whose namespace this is."""
        owner: ast.expr | None = None
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            owner = node.value
        elif isinstance(node, ast.Call) and self._resolve(node.func) == "vars" and node.args:
            owner = node.args[0]
        if owner is None:
            return None
        name = self._resolve(owner) or ""
        return name if name in TIMER_OWNERS else None

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
        if func in SIDE_WORK_CALLS and self._hides_work(call, func, scope):
            self._add(
                "S1", call, f"`{func}(...)`: work hidden off the timed stream still costs a training step"
            )
        if func in DETECTION_CALLS or func == "sys.argv":
            self._add(
                "D1",
                call,
                f"`{func}()` in op code: an op that inspects its surroundings can tell a benchmark",
            )
        if func == "weakref.WeakKeyDictionary":
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
            self._check_key(call.args[0], call, scope, call.func.value)
        if func == "setattr" and len(call.args) == 3 and self._kind(call.args[2], scope) == TENSOR:
            first = call.args[0]
            if isinstance(first, ast.Name) and scope.is_tensor(first.id):
                attr = call.args[1].value if isinstance(call.args[1], ast.Constant) else "?"
                self._stash(first, str(attr), call, scope)
        self._check_memo_call(call, func, scope)
        self._check_patch_call(call, func)

    def _hides_work(self, call: ast.Call, func: str, scope: _Scope) -> bool:
        """Threads always do. Making a stream object hides nothing; entering one the op made
        (`with torch.cuda.stream(s)`, `set_stream(s)`) does unless the function joins it back
        (`wait_stream`, `wait_event`, `event.wait()`, a synchronize). A stream the caller passed in
        runs on the caller's schedule."""
        if func not in SIDE_STREAM_CALLS:
            return True
        if func not in {"torch.cuda.stream", "torch.cuda.set_stream"} or not call.args:
            return False
        return self._made_stream(call.args[0], scope) and not scope.joined()

    def _made_stream(self, node: ast.expr, scope: _Scope) -> bool:
        if isinstance(node, ast.Call):
            return (self._resolve(node.func) or "") in SIDE_STREAM_CALLS
        name = _last_name(node)
        if name is None:
            return False
        values = scope.assignments(name) or self.module_scope.assignments(name)
        if not values and isinstance(node, ast.Attribute):  # `self._side`, assigned in __init__
            values = [
                n.value
                for n in ast.walk(self.tree)
                if isinstance(n, ast.Assign) and any(_last_name(t) == name for t in n.targets)
            ]
        return any(self._made_stream(value, scope) for value in values if not isinstance(value, ast.Name))

    def _check_memo_call(self, call: ast.Call, func: str, scope: _Scope) -> None:
        """`functools.lru_cache(maxsize=None)(quantise)` / `functools.cache(quantise)`."""
        wrapped: ast.expr | None = None
        if isinstance(call.func, ast.Call) and (self._resolve(call.func.func) or "") in MEMO_DECORATORS:
            wrapped = call.args[0] if call.args else None
        elif func in MEMO_DECORATORS and call.args and isinstance(call.args[0], ast.Name | ast.Attribute):
            wrapped = call.args[0]
        name = _last_name(wrapped) if wrapped is not None else None
        target = self.functions.get(name) if name else None
        if target is not None:
            self._check_memoised(target, self._function_scope(target, self.module_scope), call)

    def _check_patch_call(self, call: ast.Call, func: str) -> None:
        last = func.rsplit(".", 1)[-1] if func else _last_name(call.func)
        if last not in PATCH_FUNCS or not call.args:
            return
        if isinstance(call.func, ast.Attribute) and call.func.attr == "update":
            return
        first = call.args[0]
        patched: str | None = None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            patched = first.value
        elif len(call.args) >= 2:
            owner = self._resolve(first)
            name = call.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                patched = f"{owner}.{name.value}" if owner else name.value
            elif owner in TIMER_OWNERS:  # a computed attribute name on a clock's owner
                self._add(
                    "T1",
                    call,
                    f"sets a computed attribute of `{owner}`: a patched clock makes the timing fiction",
                )
                return
        if patched and (patched in TIMERS or self._is_timer_attribute(patched)):
            self._add("T1", call, f"patches `{patched}`: a patched clock makes the timing fiction")

    # -- F1 ------------------------------------------------------------------------------------------

    def _check_fallback(self, handler: ast.ExceptHandler, scope: _Scope) -> None:
        if handler.body and isinstance(handler.body[-1], ast.Raise):
            return
        for node in ast.walk(handler):
            reason = self._fallback_reason(node, scope)
            if reason:
                self._add(
                    "F1",
                    handler,
                    f"except handler falls back to {reason}: the candidate fails on shapes it claims and "
                    "still reports PASS; let the error propagate (or re-raise with a better message)",
                )
                return

    def _fallback_reason(self, node: ast.AST, scope: _Scope) -> str | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return "`@` (torch matmul)"
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            call = node.value
            tensors = [a.id for a in call.args if isinstance(a, ast.Name) and scope.is_tensor(a.id)]
            method_of_tensor = isinstance(call.func, ast.Attribute) and scope.is_tensor(
                _last_name(call.func.value) or ""
            )
            if tensors and not method_of_tensor:
                return f"another implementation, `{ast.unparse(call.func)}({', '.join(tensors)}, ...)`"
        if isinstance(node, ast.Call):
            func = self._resolve(node.func) or ""
            if func in FALLBACK_CALLS:
                return f"`{func}`"
            if func.startswith("torch.ops.aten.") and func.split(".")[3] in MATMUL_NAMES:
                return f"`{func}`"
            name = _last_name(node.func) or ""
            if name in MATMUL_NAMES - {"einsum"}:
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


def format_finding(finding: Finding) -> str:
    """`path:line: ID message`, marked when the finding is informational or suppressed."""
    if finding.suppressed_reason is not None:
        tag = f" (suppressed: {finding.suppressed_reason})"
    elif not finding.blocking:
        tag = " (info)"
    else:
        tag = ""
    return f"{finding.path}:{finding.line}: {finding.rule}{tag} {finding.message}"
