"""Where the host time of a bf16 `gemm` and a `grouped_gemm` call goes, at 256^3 where the GPU's share
is negligible: each part timed alone (microseconds a call, calls back to back, one synchronize at
the end, as benchmarks/host_cost.py times them), then cProfile of the main thread over the launch
path and the backward bodies. The autograd engine runs a backward on a thread of its own, which
cProfile does not see: the backward bodies are timed here as plain calls.

    python3 benchmarks/dev/host_profile_dev.py [--calls 3000]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    calls = parser.parse_args().calls

    import host_cost
    import torch
    import torch.nn.functional as F

    from kernels import _common
    from kernels import gemm as G
    from kernels import grouped_gemm as GG

    torch.manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)

    a, b, g = rand(256, 256), rand(256, 256), rand(256, 256)
    x, w, gx = rand(1024, 256), rand(4, 256, 256), rand(1024, 256)
    sizes = torch.tensor([512, 256, 0, 256], device="cuda")
    a_leaf, b_leaf = a.clone().requires_grad_(), b.clone().requires_grad_()

    def step(linear: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            a_leaf.grad = b_leaf.grad = None
            linear(a_leaf, b_leaf).backward(g)

        return run

    timer = host_cost._timer("cuda")

    def per_call(call: Callable[[], object]) -> float:
        for _ in range(20):  # autotuning, compiling, resolving the launches
            call()
        return timer(call, calls)[0]  # host_cost.py's back-to-back figure

    ends = torch.cumsum(sizes, 0).to(torch.int32)
    parts: dict[str, Callable[[], object]] = {
        "F.linear": lambda: F.linear(a, b),
        "gemm": lambda: G.gemm(a, b),
        "gemm._matmul_nt": lambda: G._matmul_nt(a, b),
        "gemm._check_pair": lambda: G._check_pair(a, b, "a", "b"),
        "torch.empty": lambda: torch.empty((256, 256), dtype=a.dtype, device="cuda"),
        "_tma_transposed x2": lambda: (G._tma_transposed(a), G._tma_transposed(b)),
        "use_tma_scratch": lambda: _common.use_tma_scratch(a.device),
        "the scratch allocator": lambda: _common._tma_scratch(512, 64, None),
        "backend()": lambda: _common.backend(G.BACKEND_ENV),
        "gemm backward body": lambda: G._backward(g, a, b, (True, True), G._forward),
        "vendor backward products": lambda: (g @ b, g.t() @ a),
        "_Gemm.apply, forward only": lambda: G._Gemm.apply(a_leaf, b_leaf),
        "F.linear with grad": lambda: F.linear(a_leaf, b_leaf),
        "step ours (fwd+bwd)": step(G.gemm),
        "step vendor (fwd+bwd)": step(F.linear),
        "grouped_gemm": lambda: GG.grouped_gemm(x, w, sizes),
        "grouped _check_group_sum": lambda: GG._check_group_sum(sizes, 1024),
        "grouped _grouped_matmul_nt": lambda: GG._grouped_matmul_nt(x, w, sizes),
        "grouped _grouped_db": lambda: GG._grouped_db(gx, x, sizes),
        "grouped backward body": lambda: GG._backward(gx, x, w, sizes, (True, True), GG._product, GG._db),
        "torch._grouped_mm": lambda: torch._grouped_mm(x, w.transpose(1, 2), offs=ends),
    }
    print(f"host time a call, us ({torch.cuda.get_device_name()}, {calls} calls back to back)")
    for name, call in parts.items():
        print(f"{name:32s} {per_call(call):8.1f}", flush=True)
    for name in ("gemm._matmul_nt", "gemm backward body", "grouped_gemm", "grouped backward body"):
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(calls):
            parts[name]()
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        print(f"===== cProfile {name} ({calls} calls)\n{text.getvalue()}")


if __name__ == "__main__":
    main()
