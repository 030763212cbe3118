"""GPU check of the harness's warm-up: how long the first forward + backward of each shape takes in a
cold process (compiling every autotune config and timing them), with the configs compiled one at a
time as Triton does, and compiled together first (`configs_compiled_together`, what the harness's
warm-up does); and whether the autotuner picks the same configs either way.

Each mode runs in processes of its own, each with an empty Triton cache (no autotune results kept),
alternating: serial, together, serial, together. Run on the GPU machine from the repository root:

    python benchmarks/dev/compile_dev.py [--op gemm|gemm_fp8_blockwise] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def child(op: str, mode: str) -> None:
    import contextlib

    import torch
    from triton.runtime.autotuner import Autotuner

    from gitcampaign.harness.clock import configs_compiled_together
    from gitcampaign.shapes import preset
    from kernels import gemm, gemm_fp8

    device = torch.device("cuda")
    call = gemm.gemm if op == "gemm" else lambda a, b: gemm_fp8.gemm_fp8(a, b, "blockwise")
    seconds = {}
    for shape in preset("llama3.1-8b:mbs=1"):
        a = torch.randn(shape.M, shape.K, device=device, dtype=torch.bfloat16, requires_grad=True)
        b = torch.randn(shape.N, shape.K, device=device, dtype=torch.bfloat16, requires_grad=True)
        torch.cuda.synchronize()
        began = time.perf_counter()
        together = configs_compiled_together(device) if mode == "together" else contextlib.nullcontext()
        with together:
            out = call(a, b)
            torch.autograd.grad(out, (a, b), torch.randn_like(out))
        torch.cuda.synchronize()
        seconds[shape.label] = round(time.perf_counter() - began, 2)
    picked = sorted(
        f"{tuner.base_fn.__name__} {key} -> {config}"
        for module in (gemm, gemm_fp8)
        for tuner in vars(module).values()
        if isinstance(tuner, Autotuner)
        for key, config in tuner.cache.items()
    )
    print(json.dumps({"mode": mode, "seconds": seconds, "picked": picked}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", choices=("gemm", "gemm_fp8_blockwise"), default="gemm")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.op, args.child)
        return
    results = []
    for _ in range(args.rounds):
        for mode in ("serial", "together"):
            env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_AUTOTUNING"}
            env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile_dev.")
            began = time.perf_counter()
            done = subprocess.run(
                [sys.executable, __file__, "--op", args.op, "--child", mode],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            wall = time.perf_counter() - began
            if done.returncode:
                print(done.stderr[-3000:])
                raise SystemExit(f"compile_dev: the {mode} process failed")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            print(
                f"{mode:8s} process {wall:6.1f} s; first calls {sum(result['seconds'].values()):6.1f} s {result['seconds']}"
            )
    for mode in ("serial", "together"):
        picks = {tuple(r["picked"]) for r in results if r["mode"] == mode}
        print(f"{mode}: {len(picks)} distinct set(s) of picked configs over {args.rounds} processes")
    serial = [r["picked"] for r in results if r["mode"] == "serial"]
    together = [r["picked"] for r in results if r["mode"] == "together"]
    print("picked configs, first serial vs first together process:")
    for left, right in zip(serial[0], together[0], strict=False):
        print(
            f"  {'same' if left == right else 'DIFF'}  {left}"
            + ("" if left == right else f"\n        {right}")
        )


if __name__ == "__main__":
    main()
