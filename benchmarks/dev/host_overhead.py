"""Host time of the fp8 op's launches, on a machine without a GPU (Triton 3.6's internals stubbed).

    python benchmarks/dev/host_overhead.py [--calls N]

Two depths, each in a process of its own:
- `ours`: every Triton launch replaced by a no-op at `kernel[grid]`, so what is left of a forward +
  backward step of `gemm_fp8` is our own Python around the launches (checks, allocations, autograd);
- `triton`: a fake CUDA driver and compiled kernel, so one launch runs Triton's own Python path
  (autotuner dispatch, argument binding and specialisation, cache lookup, grid) and stops where the
  C launcher would call the driver; autotuning "times" every config at 1 ms and keeps the first.
Neither counts the C launcher, the driver's launch or CUDA's allocator; fp8_dev.py section 3c
measures the whole on a GPU. CPU tensors of small shapes keep allocation out of the figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
M, N, K = 256, 384, 256


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    for _ in range(20):
        fn()
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - began) / calls * 1e6


def ours(calls: int) -> None:
    import torch
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    JITFunction.__getitem__ = Autotuner.__getitem__ = lambda self, grid: lambda *a, **k: None  # type: ignore[method-assign]
    from kernels import gemm_fp8

    a = torch.randn(M, K, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(N, K, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(M, N, dtype=torch.bfloat16)
    for granularity in gemm_fp8.GRANULARITIES:
        step = lambda g=granularity: torch.autograd.grad(gemm_fp8.gemm_fp8(a, b, g), (a, b), grad)  # noqa: E731
        print(f"ours: {granularity:<10} {per_call_us(step, calls // 10):7.1f} us a forward + backward step")


def triton_path(calls: int) -> None:
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction

    class FakeDriver:
        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self) -> torch.device:
            return torch.device("cpu")

    class FakeKernel:
        function, packed_metadata = 0, ()

        def launch_metadata(self, *args: object) -> None:
            return None

        def run(self, *args: object) -> None:
            return None

    def compiled(self, key, signature, device, constexprs, options, attrs, warmup):  # type: ignore[no-untyped-def]
        self.device_caches[device][0][key] = FakeKernel()
        return self.device_caches[device][0][key]

    driver.set_active(FakeDriver())  # type: ignore[arg-type]
    JITFunction._do_compile = compiled  # type: ignore[method-assign]
    Autotuner._bench = lambda self, *args, config, **meta: [1.0, 1.0, 1.0]  # type: ignore[method-assign]
    from kernels import gemm_fp8, quant

    gemm_fp8.use_tma_scratch = lambda device: None  # no CUDA allocator to hand Triton
    x, y = torch.empty((M, K), dtype=torch.float8_e4m3fn), torch.empty((N, K), dtype=torch.float8_e4m3fn)
    one = torch.ones((1, 1))
    a, q = torch.empty((M, K), dtype=torch.bfloat16), torch.empty((M, K), dtype=torch.float8_e4m3fn)
    cases = {
        "fp8 GEMM, TMA kernel (1 launch)": lambda: gemm_fp8._matmul_triton(
            x, one, y, one, "tensorwise", 1, torch.bfloat16
        ),
        "tensorwise quantisation (2 launches)": lambda: quant._quantize_tensorwise(a, q, one, 448.0),
        "fp8 transpose (1 launch)": lambda: gemm_fp8._transposed(q, one),
    }
    for name, case in cases.items():
        print(f"triton: {name:<38} {per_call_us(case, calls):7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "depth",
        nargs="?",
        choices=("ours", "triton"),
        help="one depth, in this process (default: both, each in its own)",
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=2000,
        help="launches timed per figure (a tenth as many steps; few for a smoke run)",
    )
    args = parser.parse_args()
    if args.depth:
        {"ours": ours, "triton": triton_path}[args.depth](args.calls)
        return
    # Without TRITON_INTERPRET: the compiled kernels' launch path, not the interpreter's.
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    for depth in ("ours", "triton"):
        subprocess.run([sys.executable, __file__, depth, "--calls", str(args.calls)], env=env, check=True)


if __name__ == "__main__":
    main()
