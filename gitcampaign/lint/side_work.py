"""S1: work hidden off the timed stream (side streams not joined back, threads, processes)."""

from __future__ import annotations

import ast

from gitcampaign.lint.names import last_name, own_nodes
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.scope import Scope
from gitcampaign.lint.walk import Family

RULES = (
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
)

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


class SideWork(Family):
    RULES = RULES

    def module(self) -> None:
        for node in ast.walk(self.context.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(SIDE_WORK_MODULES):
                        self._imports(node, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith(SIDE_WORK_MODULES):
                    self._imports(node, node.module)
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in SIDE_WORK_MODULES:
                        self._imports(node, f"{node.module}.{alias.name}")

    def _imports(self, node: ast.AST, module: str) -> None:
        self.context.report(
            "S1", node, f"imports {module}: work run off the timed stream still costs a training step"
        )

    def node(self, node: ast.AST, scope: Scope) -> None:
        if not isinstance(node, ast.Call):
            return
        func = self.context.resolve(node.func) or ""
        if func in SIDE_WORK_CALLS and self._hides_work(node, func, scope):
            self.context.report(
                "S1", node, f"`{func}(...)`: work hidden off the timed stream still costs a training step"
            )

    def _hides_work(self, call: ast.Call, func: str, scope: Scope) -> bool:
        """Threads always do. Making a stream object hides nothing; entering one the op made
        (`with torch.cuda.stream(s)`, `set_stream(s)`) does unless the function joins it back
        (`wait_stream`, `wait_event`, `event.wait()`, a synchronize). A stream the caller passed in
        runs on the caller's schedule."""
        if func not in SIDE_STREAM_CALLS:
            return True
        if func not in {"torch.cuda.stream", "torch.cuda.set_stream"} or not call.args:
            return False
        return self._made_stream(call.args[0], scope) and not self._joined(scope)

    def _joined(self, scope: Scope) -> bool:
        """Whether this function, or one it is nested in, makes the current stream wait for another."""
        return any(
            isinstance(node, ast.Call) and self._is_join(node)
            for owner in (s.owner for s in scope.chain())
            if owner is not None
            for node in own_nodes(owner)
        )

    def _is_join(self, call: ast.Call) -> bool:
        func = self.context.resolve(call.func) or ""
        return func == "torch.cuda.synchronize" or (
            isinstance(call.func, ast.Attribute) and call.func.attr in JOIN_METHODS and func != "time.sleep"
        )

    def _made_stream(self, node: ast.expr, scope: Scope) -> bool:
        if isinstance(node, ast.Call):
            return (self.context.resolve(node.func) or "") in SIDE_STREAM_CALLS
        name = last_name(node)
        if name is None:
            return False
        values = scope.assignments(name) or self.context.module_scope.assignments(name)
        if not values and isinstance(node, ast.Attribute):  # `self._side`, assigned in __init__
            values = [
                n.value
                for n in ast.walk(self.context.tree)
                if isinstance(n, ast.Assign) and any(last_name(t) == name for t in n.targets)
            ]
        return any(self._made_stream(value, scope) for value in values if not isinstance(value, ast.Name))
