"""What the compiler made of our persistent TMA kernels, without a GPU: registers, spills, shared
memory, and the order of the tensor-core ops, their waits and the float ops in the K loop.

    python benchmarks/dev/sass_dev.py [--kernel gemm_fp8|gemm|grouped|grouped_db|gluon_fp8] [--granularity blockwise]
        [--const Y_GROUP_N=1] [--config BLOCK_M=128,BLOCK_N=128,BLOCK_K=128,GROUP_M=8,num_warps=8,num_stages=3]
        [--one NUM_SMS,M,N,K]

Compiles the kernel for sm_90 (Triton's own ptxas and nvdisasm, on any machine; bf16 operands, 8
experts for the grouped ones; every pointer and integer argument but G marked as dividing by 16, as
the launcher marks them for the model shapes), for --config or else every shipped tile (for
gemm_fp8: that serves the granularity); --const sets a constexpr (A_T, B_T, B_K_MAJOR, Y_GROUP_N:
128 for weights, 1 for the dB product's per-column scales; every constexpr without a default must
be set); --one compiles each config once for each named argument equal to 1, as Triton's launcher
specialises an argument of 1 (a one-program launch, a tiny test's M = 1). A config that
does not compile prints the compiler's error (an assertion inside the compiler aborts the script
with its message) instead of costing a GPU run. The loop line reads, in SASS order:
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
- the grouped forward's 128x256 subtiled tile: 217 registers, no spills. Compiled without the
  launcher's divisibility marks (this script's first version) it read 255 registers and 328 bytes
  spilled, the masked pointer store then computing an address per element; a round built on that
  figure (one TMA-stored launch of whole 128-row blocks) measured nothing on uniform routings.
- warp specialisation (`tl.range(..., warp_specialize=True)` on the persistent loop, 4 warps a
  config; tried on copies of the kernels, not on main, not yet run on a GPU): triton 3.6 partitions
  the dense and fp8 loops for sm_90 into a producer warpgroup and two 64-row consumers (12 warps,
  `setmaxnreg`; each consumer's branch reads `MMAx4 | WAIT 0x0`, and `| Fx64` for blockwise
  128x128), 168 registers and no spills at 128x128 and 128x256 (213 KiB shared at 3 stages; 4
  stages of 128x256 exceed the 227 KiB). Its pass fails on a subtiled epilogue, on blockwise scales
  carried across steps (the prefetch), on the grouped kernel, and on the fp8 kernel with K = 1.

--kernel gluon_fp8 is the blockwise kernel of kernels/_gluon_fp8.py (Gluon, warp-specialised by
hand, BLOCK_K = 128; --const Y_GROUP_N=1 for the dB product's per-column scales), compiled for each
out dtype (bf16, and fp16/fp32 for gradients) from host TMA descriptors, at the tile it ships for
that dtype and scale layout (`_gluon_fp8.tile`), or at --gluon-tile CONSUMERS,BLOCK_N. Its loop line
has one loop per consumer partition, joined by ` || `; the resource line adds the `setmaxnreg`
values of the partitions (the registers ptxas reports are the launch's .maxnreg, which the
partitions then trade).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.pop("TRITON_INTERPRET", None)  # the compiler, not the interpreter
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import get_ptxas  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.errors import CompilationError  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402

from kernels import _gluon_fp8, gemm, gemm_fp8  # noqa: E402
from kernels import grouped_gemm as grouped  # noqa: E402
from kernels._common import parse_config  # noqa: E402

SM90 = GPUTarget("cuda", 90, 32)
FP8 = {"x_ptr": "*fp8e4nv", "y_ptr": "*fp8e4nv", "out_ptr": "*bf16", "sx_ptr": "*fp32", "sy_ptr": "*fp32"}
# kernel: (its autotuner, pointer types (others are i32), constexprs besides the config, the shipped tiles)
KERNELS: dict[str, tuple[Any, dict[str, str], dict[str, Any], Callable[[], list[triton.Config]]]] = {
    "gemm_fp8": (gemm_fp8._gemm_fp8_tma_kernel, FP8, {"NUM_SMS": 132, "Y_GROUP_N": 128}, gemm_fp8._tma_configs),
    "gemm": (gemm._matmul_nt_kernel, dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*bf16"),
             {"NUM_SMS": 132, "A_T": 0, "B_T": 0}, gemm._tma_configs),
    "grouped": (grouped._grouped_matmul_nt_tma_kernel,
                {**dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*bf16"), "sizes_ptr": "*i64"},
                {"NUM_SMS": 132, "G_POW2": 8, "B_K_MAJOR": 1}, grouped._hopper_tma_configs),
    "grouped_db": (grouped._grouped_db_tma_kernel,
                   {**dict.fromkeys(("dout_ptr", "a_ptr", "db_ptr"), "*bf16"), "sizes_ptr": "*i64"},
                   {"NUM_SMS": 132, "G_POW2": 8}, grouped._hopper_tma_db_configs),
}  # fmt: skip


# Triton's launcher tells the compiler which pointer and integer arguments divide by 16 (torch's
# allocations, and the model shapes' sizes and strides, all do), and the compiler vectorises and
# aligns on that; compiled without it, a kernel reads and writes in narrower pieces than it does when
# launched. The exception: a grouped GEMM's expert count G (8 for Mixtral).
ODD = {"G"}


def compile_config(
    kernel: str, config: triton.Config, constants: dict[str, Any], one: str | None = None
) -> Any:
    """`one`: an argument equal to 1, compiled as the launcher compiles it (a constant 1): NUM_SMS on a
    one-program launch, or a size (M = 1) of a tiny test."""
    autotuner, pointers, defaults, _ = KERNELS[kernel]
    fn = autotuner.fn
    if one is not None and (one not in fn.arg_names or one in pointers):
        raise SystemExit(f"sass_dev: {one} is not an integer argument of {kernel}")
    constants = {**defaults, **constants, **config.kwargs, **({one: 1} if one else {})}
    constants.update(
        {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default and p.name not in constants}
    )
    missing = [p.name for p in fn.params if p.is_constexpr and p.name not in constants]
    if missing:  # Triton would compile them as None: another kernel than the one launched
        raise SystemExit(f"sass_dev: set {', '.join(missing)} for {kernel} (--const NAME=INT)")
    signature = {
        p.name: pointers.get(p.name, "i32") for p in fn.params if not p.is_constexpr and p.name != one
    }
    aligned = {
        (fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in signature if name not in ODD
    }
    signature.update(dict.fromkeys(constants, "constexpr"))
    return triton.compile(
        ASTSource(fn, signature, constants, aligned),
        target=SM90,
        options={"num_warps": config.num_warps, "num_stages": config.num_stages},
    )


# The Gluon kernel's out dtypes: bf16 (the forward), fp16 and fp32 (gradients of fp16/fp32 inputs).
GLUON_OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def compile_gluon(constants: dict[str, Any], out_dtype: torch.dtype, consumers: int, block_n: int) -> Any:
    """kernels._gluon_fp8's kernel as `matmul_blockwise` launches it: host TMA descriptors (their
    signature taken from descriptors of CPU tensors), the scales as pointers (Y_GROUP_N = 128) or as
    descriptors of their kb-major copies (Y_GROUP_N = 1), pointers and row strides marked as dividing
    by 16 (as for the other kernels), e4m3 operands."""
    fn = _gluon_fp8._gemm_fp8_blockwise_ws_kernel
    operand = torch.empty(256, 256, dtype=torch.float8_e4m3fn)
    out = torch.empty(256, 256, dtype=out_dtype)
    rows = _gluon_fp8.CONSUMER_ROWS
    launch_registers, consumer_registers, producer_registers = _gluon_fp8.REGISTERS[consumers]
    constants = {
        "Y_GROUP_N": 128,
        "STAGES": _gluon_fp8.STAGES[consumers, block_n],
        "GROUP_M": _gluon_fp8.GROUP_M,
        "PRODUCER_REGISTERS": producer_registers,
        "CONSUMER_REGISTERS": consumer_registers,
        "CONSUMERS": consumers,
        **constants,
    }
    unknown = sorted(set(constants) - set(fn.arg_names))
    if unknown:
        raise SystemExit(f"sass_dev: {', '.join(unknown)} is not a constexpr of gluon_fp8")
    if constants["Y_GROUP_N"] == 1:
        copy = _gluon_fp8._kb_major(torch.empty(256, 2))
        scales = {
            "sx": mangle_type(_gluon_fp8._descriptor(copy, [1, rows])),
            "sy": mangle_type(_gluon_fp8._descriptor(copy, [1, block_n])),
        }
    else:
        scales = {"sx": "*fp32", "sy": "*fp32"}
    signature = {
        "x_desc": mangle_type(_gluon_fp8._descriptor(operand, [rows, _gluon_fp8.BLOCK_K])),
        "y_desc": mangle_type(_gluon_fp8._descriptor(operand, [block_n, _gluon_fp8.BLOCK_K])),
        "out_desc": mangle_type(_gluon_fp8._descriptor(out, [rows, _gluon_fp8.HALF_N])),
        **scales,
        "stride_sxm": "i32",
        "stride_sym": "i32",
    }
    aligned = {
        (fn.arg_names.index(name),): [["tt.divisibility", 16]]
        for name, kind in list(signature.items())[3:]
        if not kind.startswith("tensordesc")
    }
    signature.update(dict.fromkeys(constants, "constexpr"))
    return triton.compile(
        GluonASTSource(fn, signature, {(fn.arg_names.index(k),): v for k, v in constants.items()}, aligned),
        target=SM90,
        options={"num_warps": 4, "maxnreg": launch_registers},
    )


def setmaxnreg(ptx: str) -> str:
    """The register counts the partitions set (`setmaxnreg.inc/dec`), in PTX order, each once."""
    counts = dict.fromkeys(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx))
    return ", ".join(f"{kind} {count}" for kind, count in counts)


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


def loop_order(cubin: bytes, per_partition: bool = False) -> str:
    """The SASS of the loop that holds the MMAs, as runs of MMA / WAIT / F, from its first MMA to the
    branch after the last. per_partition (a warp-specialised kernel, one MMA loop per consumer
    partition): each loop from an MMA to the first branch after it, joined by ` || `."""
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
    if not per_partition:
        spans = [(mmas[0], _branch_after(events, mmas[-1]))]
    else:
        spans = []
        start = mmas[0]
        while start < len(events):
            end = _branch_after(events, start)
            spans.append((start, end))
            start = next((i for i in mmas if i > end), len(events))
    return " || ".join(_runs(events[start:end]) for start, end in spans)


def _branch_after(events: list[str], start: int) -> int:
    return next((i for i in range(start, len(events)) if events[i] == "BRA"), len(events))


def _runs(events: list[str]) -> str:
    runs = [(event, len(list(group))) for event, group in itertools.groupby(events)]
    return " | ".join(f"{event}x{count}" if count > 1 else event for event, count in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", choices=sorted([*KERNELS, "gluon_fp8"]), default="gemm_fp8")
    parser.add_argument(
        "--granularity", choices=sorted(gemm_fp8._SCALING_CODE), default="blockwise", help="gemm_fp8"
    )
    parser.add_argument("--const", action="append", default=[], help="NAME=INT, a constexpr of the kernel")
    parser.add_argument(
        "--gluon-tile", help="CONSUMERS,BLOCK_N: gluon_fp8 at this tile, not the shipped ones"
    )
    parser.add_argument(
        "--config", help="one config (the kernels' *_CONFIG syntax); default: the shipped tiles"
    )
    parser.add_argument(
        "--one",
        help="NAME,...: compile once with each named integer argument equal to 1 (NUM_SMS, M, K, ...)",
    )
    args = parser.parse_args()
    constants: dict[str, Any] = {
        name: int(value) for name, _, value in (c.partition("=") for c in args.const)
    }
    if args.kernel == "gluon_fp8":
        main_gluon(constants, tuple(map(int, args.gluon_tile.split(","))) if args.gluon_tile else None)
        return
    configs = [parse_config(args.config)] if args.config else KERNELS[args.kernel][3]()
    if args.kernel == "gemm_fp8":
        constants.setdefault("SCALING", gemm_fp8._SCALING_CODE[args.granularity])
        if not args.config:
            configs = [
                c for c in configs if constants["SCALING"] in gemm_fp8._TMA_SERVES[gemm_fp8._tile_key(c)]
            ]
    print(f"triton {triton.__version__}, sm_90, {args.kernel} {constants}")
    ones: list[str | None] = args.one.split(",") if args.one else [None]
    for config, one in itertools.product(configs, ones):
        name = ",".join(f"{k}={v}" for k, v in config.kwargs.items())
        name += f",num_warps={config.num_warps},num_stages={config.num_stages}" + (
            f" ({one} = 1)" if one else ""
        )
        try:
            kernel = compile_config(args.kernel, config, constants, one)
        except (RuntimeError, CompilationError) as exc:  # the compiler's own failure is the finding
            print(f"{name}\n  does not compile: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        print(f"{name}\n  {resources(kernel.asm['ptx'])}, {kernel.metadata.shared} B shared")
        print(f"  loop: {loop_order(kernel.asm['cubin'])}")


def main_gluon(constants: dict[str, Any], tile: tuple[int, int] | None) -> None:
    """The Gluon kernel's lines, one per out dtype, in the other kernels' format: the tile it ships
    for that dtype and Y_GROUP_N (`_gluon_fp8.tile`), or the one given."""
    print(f"triton {triton.__version__}, sm_90, gluon_fp8 {constants}")
    for out_dtype in GLUON_OUT_DTYPES:
        consumers, block_n = tile or _gluon_fp8.tile(constants.get("Y_GROUP_N", 128), out_dtype)
        name = (
            f"BLOCK_M={_gluon_fp8.CONSUMER_ROWS * consumers},BLOCK_N={block_n},BLOCK_K={_gluon_fp8.BLOCK_K},"
            f"GROUP_M={_gluon_fp8.GROUP_M},STAGES={_gluon_fp8.STAGES[consumers, block_n]},"
            f"out={str(out_dtype).split('.')[-1]},warps={'4+' * consumers}1"
        )
        try:
            kernel = compile_gluon(constants, out_dtype, consumers, block_n)
        except (RuntimeError, CompilationError) as exc:
            print(f"{name}\n  does not compile: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        ptx = kernel.asm["ptx"]
        print(f"{name}\n  {resources(ptx)}, {kernel.metadata.shared} B shared, setmaxnreg {setmaxnreg(ptx)}")
        print(f"  loop: {loop_order(kernel.asm['cubin'], per_partition=True)}")


if __name__ == "__main__":
    main()
