"""What the compiler made of the persistent fp8 GEMM kernel, without a GPU: registers, spills, shared
memory, and the order of the tensor-core ops, their waits and the float ops in its K loop.

    python benchmarks/dev/sass_dev.py [--granularity blockwise] [--y-group-n 128]
        [--config BLOCK_M=128,BLOCK_N=128,BLOCK_K=128,GROUP_M=8,PROMOTE_LAG=1,num_warps=8,num_stages=3]

Compiles kernels.gemm_fp8's TMA kernel for sm_90 (Triton's own ptxas and nvdisasm, on any machine),
for --config or else every shipped tile that serves the granularity. A config that does not compile
prints the compiler's error (an assertion inside the compiler aborts the script with its message)
instead of costing a GPU run. The loop line reads, in SASS order:
`MMA` a wgmma (HGMMA/QGMMA), `WAIT` a wait on wgmma groups (`WARPGROUP.DEPBAR.LE gsb0, N`: N groups
may stay in flight), `F` a float add/mul/fma, `xN` a run of N. Blockwise promotes each K block's
product into the accumulator with float ops: those overlap the tensor cores only where they come
before a WAIT that leaves the MMA in flight. Found with it (2026-11-30, triton 3.6.0):
- rowwise and tensorwise chain their products in the MMA accumulator: `MMAx4 | WAIT 0x1`, one group
  in flight across steps;
- blockwise 128x128: `MMA | Fx2 | MMAx3 | WAIT 0x0 | Fx64`, each product waited for, then promoted;
- a lagged promotion (step k's dot issued before step k-1's product is promoted; not on main) first
  crashed the pipeliner when a product was peeled off before the loop or a scale carried across
  steps, and in the form that compiles reads `MMAx4 | WAIT 0x0 | Fx66` with 231 registers instead of
  170: triton still waits for each product before any float op, so the lag buys nothing here.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # the compiler, not the interpreter
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import get_ptxas  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.errors import CompilationError  # noqa: E402

from kernels import gemm_fp8  # noqa: E402
from kernels._common import parse_config  # noqa: E402

POINTERS = {
    "x_ptr": "*fp8e4nv",
    "y_ptr": "*fp8e4nv",
    "out_ptr": "*bf16",
    "sx_ptr": "*fp32",
    "sy_ptr": "*fp32",
}
SM90 = GPUTarget("cuda", 90, 32)


def compile_config(
    config: triton.Config, scaling: int, y_group_n: int, sms: int
) -> triton.compiler.CompiledKernel:
    fn = gemm_fp8._gemm_fp8_tma_kernel.fn
    constants = {"SCALING": scaling, "Y_GROUP_N": y_group_n, "NUM_SMS": sms, **config.kwargs}
    constants.update(
        {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default and p.name not in constants}
    )
    signature = {p.name: POINTERS.get(p.name, "i32") for p in fn.params if not p.is_constexpr}
    signature.update({name: "constexpr" for name in constants})
    return triton.compile(
        ASTSource(fn, signature, constants),
        target=SM90,
        options={"num_warps": config.num_warps, "num_stages": config.num_stages},
    )


def resources(ptx: str) -> str:
    """ptxas -v's registers and spills line for the kernel."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as file:
        file.write(ptx)
        file.flush()
        report = subprocess.run(
            [get_ptxas(90).path, "-arch=sm_90a", "-v", file.name, "-o", os.devnull],
            capture_output=True,
            text=True,
        ).stderr
    found = re.search(r"(\d+) bytes spill stores.*?Used (\d+) registers", report, re.S)
    return f"{found.group(2)} registers, {found.group(1)} bytes spilled" if found else report.strip()


def loop_order(cubin: bytes) -> str:
    """The SASS of the loop that holds the MMAs, as runs of MMA / WAIT / F, from its first MMA to the
    branch after the last."""
    nvdisasm = Path(get_ptxas(90).path).with_name("nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        sass = subprocess.run(
            [str(nvdisasm), "-c", file.name], capture_output=True, text=True, check=True
        ).stdout
    events = []
    for line in sass.splitlines():
        if re.search(r"\b[HQ]GMMA\b", line):
            events.append("MMA")
        elif wait := re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\w+)", line):
            events.append(f"WAIT {wait.group(1)}")
        elif re.search(r"\b(FFMA|FMUL|FADD)\b", line):
            events.append("F")
        elif re.search(r"\bBRA\b", line):
            events.append("BRA")
    mmas = [i for i, event in enumerate(events) if event == "MMA"]
    if not mmas:
        return "no MMA"
    end = next((i for i in range(mmas[-1], len(events)) if events[i] == "BRA"), len(events))
    runs = [(event, len(list(group))) for event, group in itertools.groupby(events[mmas[0] : end])]
    return " | ".join(f"{event}x{count}" if count > 1 else event for event, count in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--granularity", choices=sorted(gemm_fp8._SCALING_CODE), default="blockwise")
    parser.add_argument(
        "--y-group-n", type=int, default=128, help="rows of y per scale: 128 (weights), 1 (dB)"
    )
    parser.add_argument(
        "--config", help="one config (kernels' KERNELS_GEMM_FP8_CONFIG syntax); default: the shipped tiles"
    )
    parser.add_argument("--sms", type=int, default=132)
    args = parser.parse_args()
    scaling = gemm_fp8._SCALING_CODE[args.granularity]
    if args.config:
        configs = [parse_config(args.config)]
    else:
        configs = [
            c for c in gemm_fp8._tma_configs() if scaling in gemm_fp8._TMA_SERVES[gemm_fp8._tile_key(c)]
        ]
    print(f"triton {triton.__version__}, sm_90, {args.granularity}, Y_GROUP_N={args.y_group_n}")
    for config in configs:
        name = ",".join(f"{k}={v}" for k, v in config.kwargs.items())
        name += f",num_warps={config.num_warps},num_stages={config.num_stages}"
        try:
            kernel = compile_config(config, scaling, args.y_group_n, args.sms)
        except (RuntimeError, CompilationError) as exc:  # the compiler's own failure is the finding
            print(f"{name}\n  does not compile: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        print(f"{name}\n  {resources(kernel.asm['ptx'])}, {kernel.metadata.shared} B shared")
        print(f"  loop: {loop_order(kernel.asm['cubin'])}")


if __name__ == "__main__":
    main()
