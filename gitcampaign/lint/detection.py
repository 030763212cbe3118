"""D1: benchmark detection in op code (the call stack, the garbage collector, the harness's name)."""

from __future__ import annotations

import ast

from gitcampaign.lint.rule import Rule
from gitcampaign.lint.scope import Scope
from gitcampaign.lint.walk import Family

RULES = (
    Rule(
        "D1",
        "benchmark detection (stack, gc or harness inspection) in op code",
        (
            "benchmark detection in op code: inspecting the call stack (`inspect.stack`, `sys._getframe`, "
            "`traceback.extract_stack`, frame attributes), the garbage collector (`gc.get_objects`, ...), "
            "`sys.argv`, or naming the harness. An op that knows it is measured can behave differently."
        ),
    ),
)

# Who called me, what else is alive, which program runs.
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


class Detection(Family):
    RULES = RULES

    def node(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Compare):
            self._check_harness_test(node)
        elif isinstance(node, ast.Call):
            func = self.context.resolve(node.func) or ""
            if func in DETECTION_CALLS or func == "sys.argv":
                self.context.report(
                    "D1",
                    node,
                    f"`{func}()` in op code: an op that inspects its surroundings can tell a benchmark",
                )
        elif isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRS:
            self.context.report(
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
                self.context.report(
                    "D1",
                    compare,
                    "tests for the campaign harness: an op that knows it is measured can behave differently",
                )
                return
