"""F1: an exception handler that falls back to the reference implementation."""

from __future__ import annotations

import ast
import re

from gitcampaign.lint.names import last_name
from gitcampaign.lint.rule import Rule
from gitcampaign.lint.scope import Scope
from gitcampaign.lint.walk import Family

RULES = (
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
)

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
TRY_NODES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


class Fallback(Family):
    RULES = RULES

    def node(self, node: ast.AST, scope: Scope) -> None:
        if not isinstance(node, TRY_NODES):
            return
        for handler in node.handlers:
            if handler.body and isinstance(handler.body[-1], ast.Raise):
                continue
            reason = next(filter(None, (self._fallback_reason(n, scope) for n in ast.walk(handler))), None)
            if reason:
                self.context.report(
                    "F1",
                    handler,
                    f"except handler falls back to {reason}: the candidate fails on shapes it claims and "
                    "still reports PASS; let the error propagate (or re-raise with a better message)",
                )

    def _fallback_reason(self, node: ast.AST, scope: Scope) -> str | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return "`@` (torch matmul)"
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            call = node.value
            tensors = [a.id for a in call.args if isinstance(a, ast.Name) and scope.is_tensor(a.id)]
            method_of_tensor = isinstance(call.func, ast.Attribute) and scope.is_tensor(
                last_name(call.func.value) or ""
            )
            if tensors and not method_of_tensor:
                return f"another implementation, `{ast.unparse(call.func)}({', '.join(tensors)}, ...)`"
        if isinstance(node, ast.Call):
            func = self.context.resolve(node.func) or ""
            if func in FALLBACK_CALLS:
                return f"`{func}`"
            if func.startswith("torch.ops.aten.") and func.split(".")[3] in MATMUL_NAMES:
                return f"`{func}`"
            name = last_name(node.func) or ""
            if name in MATMUL_NAMES - {"einsum"}:
                return f"`{ast.unparse(node.func)}`"
            if FALLBACK_NAME_RE.search(name):
                return f"reference function `{name}`"
            if name in {"setdefault", "putenv"} and _mentions_torch_backend(node):
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


def _mentions_torch_backend(call: ast.Call) -> bool:
    texts = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return any("BACKEND" in t.upper() for t in texts) and "torch" in texts
