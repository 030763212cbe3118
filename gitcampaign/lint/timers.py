"""T1: a monkeypatched clock or event."""

from __future__ import annotations

import ast

from gitcampaign.lint.names import last_name
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.scope import Scope
from gitcampaign.lint.walk import Family

RULES = (
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
)

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


class Timers(Family):
    RULES = RULES
    ALIASABLE = TIMER_OWNERS | TIMERS

    def node(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self._check_assignment(target)
        elif isinstance(node, ast.Call):
            self._check_patch_call(node)

    def _check_assignment(self, target: ast.expr) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = self.context.resolve(node) or ""
                if name in TIMERS or _is_timer_attribute(name):
                    self.context.report(
                        "T1", node, f"assigns `{ast.unparse(node)}`: a patched clock makes the timing fiction"
                    )
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                owner = self._namespace_owner(node.value)
                if owner is not None:
                    self.context.report(
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
        elif isinstance(node, ast.Call) and self.context.resolve(node.func) == "vars" and node.args:
            owner = node.args[0]
        if owner is None:
            return None
        name = self.context.resolve(owner) or ""
        return name if name in TIMER_OWNERS else None

    def _check_patch_call(self, call: ast.Call) -> None:
        func = self.context.resolve(call.func) or ""
        last = func.rsplit(".", 1)[-1] if func else last_name(call.func)
        if last not in PATCH_FUNCS or not call.args:
            return
        if isinstance(call.func, ast.Attribute) and call.func.attr == "update":
            return
        first = call.args[0]
        patched: str | None = None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            patched = first.value
        elif len(call.args) >= 2:
            owner = self.context.resolve(first)
            name = call.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                patched = f"{owner}.{name.value}" if owner else name.value
            elif owner in TIMER_OWNERS:  # a computed attribute name on a clock's owner
                self.context.report(
                    "T1",
                    call,
                    f"sets a computed attribute of `{owner}`: a patched clock makes the timing fiction",
                )
                return
        if patched and (patched in TIMERS or _is_timer_attribute(patched)):
            self.context.report("T1", call, f"patches `{patched}`: a patched clock makes the timing fiction")


def _is_timer_attribute(name: str) -> bool:
    """A clock reached through an alias the resolver cannot see (`from time import perf_counter`
    is a name; `timing.perf_counter`, `Event.elapsed_time` are attributes); an object's own
    attribute (`self.perf_counter = time.perf_counter`) is not a patch."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] in {"self", "cls"}:
        return False
    return parts[-1] in TIMER_ATTRS or (parts[-1] in EVENT_TIMER_ATTRS and parts[-2].endswith("Event"))
