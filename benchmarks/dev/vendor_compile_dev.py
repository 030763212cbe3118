"""The fp8 vendor linear under torch.compile on the GPU: traced into the graph (`ScaledMMLinear.apply`
inside the compiled function) against the custom op `benchmarks/vendor.py` now uses there, each
against eager; the norms of the output and both gradients. On 2026-12-05 (H100, torch 2.11.0+cu130)
the traced form gave the right output and all-zero gradients with Inductor and with aot_eager.

    python3 benchmarks/dev/vendor_compile_dev.py [--granularity tensorwise|rowwise|blockwise]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--granularity", default="tensorwise", choices=("tensorwise", "rowwise", "blockwise"))
    granularity = parser.parse_args().granularity

    import torch
    import vendor

    torch.manual_seed(0)
    a = torch.randn(512, 256, device="cuda").to(torch.bfloat16).requires_grad_()
    b = (torch.randn(384, 256, device="cuda") / 16).to(torch.bfloat16).requires_grad_()
    grad = torch.randn(512, 384, device="cuda").to(torch.bfloat16)

    def traced(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = vendor.ScaledMMLinear.apply(a, b, granularity, "inductor")
        return out

    def as_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return vendor.scaled_mm_linear(a, b, granularity, "inductor")

    cases: list[tuple[str, Callable[..., torch.Tensor]]] = [("eager", as_op)]
    for backend in ("inductor", "aot_eager"):
        cases += [(f"traced, {backend}", torch.compile(traced, backend=backend)),
                  (f"custom op, {backend}", torch.compile(as_op, backend=backend))]  # fmt: skip
    for label, linear in cases:
        a.grad = b.grad = None
        out = linear(a, b)
        out.backward(grad)
        norms = [t.float().norm().item() if t is not None else float("nan") for t in (out, a.grad, b.grad)]
        print(f"{label:24s} |out| {norms[0]:10.3f}  |dA| {norms[1]:10.3f}  |dB| {norms[2]:10.3f}")


if __name__ == "__main__":
    main()
