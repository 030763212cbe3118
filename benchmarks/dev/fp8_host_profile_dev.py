"""Where the host time of a `gemm_fp8` training step goes, per granularity, at 256^3 where the GPU's
share is negligible. This is host_profile_dev.py's method for the fp8 ops. Each part is timed alone
(microseconds a call, calls back to back, one synchronize at the end, as benchmarks/host_cost.py
times them): the whole step, the forward and backward bodies as plain calls, one quantisation and
one product. Then cProfile of the main thread over each body, by own time.

On 12-06 a forward and backward cost an H100's host 0.73 / 1.01 / 1.17 ms (tensorwise / rowwise /
blockwise; host_cost.py), about 100 us for each of its 9-12 launches, where an empty kernel takes
4.4. That was more than the o shape's step runs on the GPU.

    python3 benchmarks/dev/fp8_host_profile_dev.py [--calls 2000] [--granularities rowwise,blockwise]
    python3 benchmarks/dev/fp8_host_profile_dev.py --smoke    # CPU, the interpreter, 2 calls: it runs
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
GRANULARITIES = ("tensorwise", "rowwise", "blockwise")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--granularities", default=",".join(GRANULARITIES))
    parser.add_argument("--smoke", action="store_true", help="CPU, in Triton's interpreter, 2 calls")
    args = parser.parse_args()
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernels import
    device = "cpu" if args.smoke else "cuda"
    calls = 2 if args.smoke else args.calls
    size = 128 if args.smoke else 256

    import host_cost
    import torch

    from kernels import gemm_fp8 as F8
    from kernels import quant

    torch.manual_seed(0)

    def rand(*shape: int, grad: bool = False) -> torch.Tensor:
        dtype = torch.float32 if args.smoke else torch.bfloat16  # the interpreter's bf16 is raw bits
        return torch.randn(*shape, device=device, dtype=dtype).requires_grad_(grad)

    timer = host_cost._timer(device)

    def per_call(call: Callable[[], object]) -> float:
        for _ in range(3 if args.smoke else 20):  # autotuning, compiling, resolving the launches
            call()
        return timer(call, calls)[0]  # host_cost.py's back-to-back figure

    print(
        f"host time a call, us ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, {calls} calls)"
    )

    def parts_of(granularity: str) -> dict[str, Callable[[], object]]:
        recipe = F8._RECIPES[granularity]
        a, b, g = rand(size, size), rand(size, size), rand(size, size)
        a_leaf, b_leaf = rand(size, size, grad=True), rand(size, size, grad=True)
        _, *residuals = recipe.forward(a, b, True, True)
        saved = recipe.saved(a, b, tuple(residuals))
        q, s = quant.quantize(a, granularity, F8.OPERAND_FP8_DTYPE)
        y_kind = "block128" if granularity == "blockwise" else granularity
        qy, sy = quant.quantize(b, y_kind, F8.OPERAND_FP8_DTYPE)

        def step() -> None:
            a_leaf.grad = b_leaf.grad = None
            F8.gemm_fp8(a_leaf, b_leaf, granularity).backward(g)

        return {
            "step (forward+backward)": step,
            "forward body": lambda: recipe.forward(a, b, True, True),
            "backward body": lambda: recipe.backward(g, *saved, a.dtype, b.dtype, True, True),
            "one quantisation": lambda: quant.quantize(a, granularity, F8.OPERAND_FP8_DTYPE),
            "one product": lambda: F8._product(q, s, qy, sy, granularity, y_kind, torch.bfloat16),
            "torch.empty": lambda: torch.empty((size, size), dtype=a.dtype, device=device),
        }

    for granularity in args.granularities.split(","):
        parts = parts_of(granularity)
        for name, call in parts.items():
            print(f"{granularity:10s} {name:26s} {per_call(call):8.1f}", flush=True)
        for name in ("forward body", "backward body"):
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(calls):
                parts[name]()
            profile.disable()
            if device == "cuda":
                torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
            print(f"===== cProfile {granularity} {name} ({calls} calls)\n{text.getvalue()}", flush=True)


if __name__ == "__main__":
    main()
