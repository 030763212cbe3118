"""GPU check and timing of kernels.quant against the torch reference and a device copy (bf16 inputs).

    python benchmarks/dev/quant_dev.py [--quick]
    python benchmarks/dev/quant_dev.py --split-variants FILE

For 8192x4096, 8192x14336 and 32768x4096 and each granularity (tensorwise, rowwise, blockwise,
block128, and rowwise on a transposed view, `rowwise.T`: what the fp8 GEMM's backward quantises for
a.T, b.T and dOut.T), e4m3 codes:
1. bit-exactness against the quick harness's own reference rule (the quantize_fp8 spec's `reference`; block128,
   which the harness never measures, against the torch backend), on the harness's input draw;
2. kernel launches per call (torch.profiler; a memset counts) and each kernel's device time;
3. GB/s and fraction of a device copy for
   - `do_bench`: triton.testing.do_bench (L2 cleared before each call; the host's launch can leak in
     where it outlasts the clear),
   - `ring`: a CUDA graph of calls over a ring of input sets larger than 3x L2, replayed and timed
     with events (device time only, no host launch, L2 cold for each input: what the campaign's
     back-to-back harness approaches; a graph capture also proves the call never syncs the host),
   - the torch reference with do_bench, and `y.copy_(x)` moving the same bytes (half read, half
     written) with both clocks;
4. per-config timings, ring clock, each autotune config pinned: `_quant_kernel` for rowwise and
   blockwise, `_quant_tensorwise_kernel` for tensorwise; compile or launch errors are printed, not
   raised;
5. the config the autotuner picked for each shape.
Run it on two trees (a candidate's and main's) for an A/B.
--split-variants FILE times only rowwise on the transposed views the rowwise fp8 GEMM's backward
quantises (a.T, b.T, dOut.T of the Llama-3.1-8B layers), ring clock, for each (SPLIT_CHUNKS,
SPLIT_STAGES) of the strided split (stages only where the tree's amax loop takes them), checks each
bit for bit, and writes the fastest exact one in total to FILE as `CHUNKS-STAGES`.

Bytes = x read + codes written + scales written (the harness's bytes_moved). Everything goes to
stdout; the whole run took 21 s on an H200, start-up included (2026-11-30; --quick: one shape).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gitcampaign.harness.inputs import binades  # noqa: E402
from gitcampaign.harness.ops import spec_of  # noqa: E402
from gitcampaign.harness.spec import load_spec_module  # noqa: E402
from kernels import quant  # noqa: E402

E4M3 = torch.float8_e4m3fn
SHAPES = [(8192, 4096), (8192, 14336), (32768, 4096)]
GRANULARITIES = ("tensorwise", "rowwise", "blockwise", "block128", "rowwise.T")
L2_MULTIPLE = 3


# The harness's quantisation spec: its input draw, byte count and reference rule.
SPEC = load_spec_module(spec_of("quantize_fp8_rowwise")[0])  # type: ignore[index]


def harness_input(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """The quick harness's draw (normal values times 2^k per row), in bf16."""
    return binades((rows, cols), generator, "cuda", torch.bfloat16)


def bytes_moved(rows: int, cols: int, granularity: str) -> int:
    """The harness's count (x read, codes and scales written); `.T`: the transposed view, cols x rows."""
    if granularity.endswith(".T"):
        rows, cols, granularity = cols, rows, granularity.removesuffix(".T")
    scale_count = math.prod(quant._scale_shape(rows, cols, granularity))
    return rows * cols * (2 + 1) + 4 * scale_count  # bf16 x read, fp8 codes and fp32 scales written


def reference_quantize(x: torch.Tensor, granularity: str) -> object:
    """The harness's own rule where it has one (tensorwise, rowwise, blockwise: what a campaign is
    judged against), the torch backend's for the private block128."""
    if granularity == "block128":
        return quant._quantize_torch(x, granularity, E4M3)
    SPEC.VARIANT = granularity
    return SPEC.reference(x)


def mismatch(ours: tuple[torch.Tensor, torch.Tensor], ref: tuple[torch.Tensor, torch.Tensor]) -> str:
    """Differing codes and scales, bit for bit, as `codes/total scales/total`."""
    (q, s), (rq, rs) = ours, ref
    if q.shape != rq.shape or s.shape != rs.shape:
        return f"SHAPE {tuple(q.shape)}/{tuple(s.shape)} vs {tuple(rq.shape)}/{tuple(rs.shape)}"
    bad_q = int((q.view(torch.uint8) != rq.view(torch.uint8)).sum())
    bad_s = int((s.view(torch.int32) != rs.view(torch.int32)).sum())
    return f"{bad_q}/{q.numel()} {bad_s}/{s.numel()}"


def do_bench_ms(fn: Callable[[], object]) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=60))


def ring_ms(call: Callable[[torch.Tensor], object], inputs: list[torch.Tensor], replays: int = 5) -> float:
    """Median device ms per call: a CUDA graph of >= 8 calls cycling over `inputs`, replayed."""
    calls = max(8, len(inputs))
    for x in inputs[:2]:
        call(x)  # compile / autotune outside the capture
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call(inputs[0])  # warm the side stream, as graph capture wants
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for index in range(calls):
            call(inputs[index % len(inputs)])
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    del graph
    return sorted(times)[len(times) // 2]


def launches(call: Callable[[], object]) -> str:
    """Kernels one call launches, each with its device time (us), from torch.profiler."""
    call()
    torch.cuda.synchronize()
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        parts = [
            f"{e.name[:28]}={e.device_time if hasattr(e, 'device_time') else e.cuda_time:.1f}us"
            for e in kernels
        ]
        return f"{len(kernels)} launch(es): " + ", ".join(parts)
    except Exception as error:  # the profiler is diagnostic only
        return f"profiler failed: {type(error).__name__}: {error}"


def quantize_e4m3(x: torch.Tensor, granularity: str) -> object:
    return quant.quantize(x, granularity, E4M3)


def config_name(config: triton.Config) -> str:
    return ",".join(f"{k}={v}" for k, v in config.kwargs.items()) + f",num_warps={config.num_warps}"


def bench_copy(rows: int, cols: int, ring_len: int) -> tuple[float, float]:
    """GB/s of `y.copy_(x)` moving the quantiser's bytes (half read, half written): do_bench, ring."""
    copy_bytes = bytes_moved(rows, cols, "rowwise") // 2
    sources = [torch.empty(copy_bytes, dtype=torch.uint8, device="cuda") for _ in range(ring_len)]
    target = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
    copy_bench = do_bench_ms(lambda: target.copy_(sources[0]))
    copy_ring = ring_ms(lambda src: target.copy_(src), sources)
    gbs_bench, gbs_ring = 2 * copy_bytes / copy_bench / 1e6, 2 * copy_bytes / copy_ring / 1e6
    print(
        f"device copy of {2 * copy_bytes / 1e6:.0f} MB in+out: do_bench {copy_bench * 1e3:.1f} us "
        f"= {gbs_bench:.0f} GB/s; ring {copy_ring * 1e3:.1f} us = {gbs_ring:.0f} GB/s"
    )
    return gbs_bench, gbs_ring


def bench_granularities(
    rows: int,
    cols: int,
    inputs: list[torch.Tensor],
    copy_gbs: tuple[float, float],
    generator: torch.Generator,
) -> list[str]:
    """Check, launches and timings of every granularity on one shape; summary lines."""
    copy_gbs_bench, copy_gbs_ring = copy_gbs
    summary = []
    print(
        f"{'granularity':<11} {'mismatch (codes scales)':<32} {'ours do_bench':>22} {'ours ring':>22} "
        f"{'torch ref':>16} {'ref/ours':>8}"
    )
    for granularity in GRANULARITIES:

        def ours(x: torch.Tensor, g: str = granularity) -> object:
            return quant.quantize(x.t() if g.endswith(".T") else x, g.removesuffix(".T"), E4M3)

        def reference(x: torch.Tensor, g: str = granularity) -> object:
            return reference_quantize(x.t() if g.endswith(".T") else x, g.removesuffix(".T"))

        work = bytes_moved(rows, cols, granularity)
        first = inputs[0]
        try:
            check_input = harness_input(rows, cols, generator)
            check_input[0, 0] = 0.0
            check_input[1] = 0.0  # an all-zero row: the SCALE_EPS scale
            check = mismatch(ours(check_input), reference(check_input))  # type: ignore[arg-type]
            ms_bench = do_bench_ms(lambda: ours(first))  # noqa: B023 (called before the next iteration)
            ms_ring = ring_ms(ours, inputs)
            ms_ref = do_bench_ms(lambda: reference(first))  # noqa: B023
        except Exception as error:
            print(f"{granularity:<11} FAILED {type(error).__name__}: {str(error)[:300]}")
            continue
        gbs_bench, gbs_ring = work / ms_bench / 1e6, work / ms_ring / 1e6
        print(
            f"{granularity:<11} {check:<32} "
            f"{ms_bench * 1e3:7.1f}us {gbs_bench:5.0f} {gbs_bench / copy_gbs_bench:4.2f}x "
            f"{ms_ring * 1e3:7.1f}us {gbs_ring:5.0f} {gbs_ring / copy_gbs_ring:4.2f}x "
            f"{ms_ref * 1e3:9.1f}us {work / ms_ref / 1e6:5.0f} {ms_ref / ms_ring:7.1f}x"
        )
        print(f"{'':<11} {launches(lambda: ours(first))}")  # noqa: B023
        summary.append(
            f"{rows}x{cols} {granularity:<10} ring {gbs_ring / copy_gbs_ring:.2f} of copy ({check})"
        )
    for tuned in (quant._quant_kernel_tuned, quant._quant_tensorwise_kernel_tuned):
        for key, config in getattr(tuned, "cache", {}).items():
            if rows in key and cols in key:
                print(f"autotuned {tuned.fn.fn.__name__} {key[:5]}: {config_name(config)}")
    return summary


def bench_configs(rows: int, cols: int, inputs: list[torch.Tensor], copy_gbs_ring: float) -> None:
    """Ring time of each autotune config, pinned (what KERNELS_QUANT_CONFIG does); errors printed per
    config: `_quant_kernel` for rowwise and blockwise, `_quant_tensorwise_kernel` for tensorwise."""
    lists = (
        ("_quant_kernel_tuned", quant._quant_kernel, quant._configs(), ("rowwise", "blockwise")),
        (
            "_quant_tensorwise_kernel_tuned",
            quant._quant_tensorwise_kernel,
            quant._tensorwise_configs(),
            ("tensorwise",),
        ),
    )
    for attribute, kernel, configs, granularities in lists:
        print(
            f"per config of {attribute.removesuffix('_tuned')}, ring clock, us and fraction of the ring copy:"
        )
        original = getattr(quant, attribute)
        try:
            for config in configs:
                setattr(quant, attribute, triton.autotune(configs=[config], key=["R"])(kernel))
                cells = []
                for granularity in granularities:
                    try:
                        ms = ring_ms(
                            functools.partial(quantize_e4m3, granularity=granularity), inputs, replays=3
                        )
                        gbs = bytes_moved(rows, cols, granularity) / ms / 1e6
                        cells.append(f"{granularity} {ms * 1e3:6.1f}us {gbs / copy_gbs_ring:4.2f}x")
                    except Exception as error:
                        cells.append(f"{granularity} ERROR {type(error).__name__}: {str(error)[:160]}")
                print(f"  {config_name(config):<44} " + " | ".join(cells))
        finally:
            setattr(quant, attribute, original)


# The transposed views the rowwise fp8 GEMM's backward quantises (a.T, b.T, dOut.T of each
# Llama-3.1-8B layer at M = 8192), as the contiguous tensors they are views of.
BACKWARD_VIEWS = [
    (8192, 4096), (6144, 4096), (8192, 6144),  # qkv
    (8192, 4096), (4096, 4096), (8192, 4096),  # o
    (8192, 4096), (28672, 4096), (8192, 28672),  # gate_up
    (8192, 14336), (4096, 14336), (8192, 4096),  # down
]  # fmt: skip
SPLIT_VARIANTS = [(8, 1), (8, 3), (4, 1), (4, 3), (2, 1), (1, 1)]  # (SPLIT_CHUNKS, SPLIT_STAGES)


def bench_split_variants(out: Path, l2_bytes: int) -> None:
    """Ring ms of rowwise on each backward view, per (SPLIT_CHUNKS, SPLIT_STAGES) of the strided
    split, checked bit for bit against the reference; writes the fastest in total as `CHUNKS-STAGES`."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    pipelined = "STAGES" in quant._row_amax_partials_kernel.arg_names  # a tree whose loop takes it
    variants = [(chunks, stages) for chunks, stages in SPLIT_VARIANTS if pipelined or stages == 1]
    totals = dict.fromkeys(variants, 0.0)
    print("rowwise of x.T, ring us per variant (SPLIT_CHUNKS, SPLIT_STAGES):", *variants)
    for rows, cols in BACKWARD_VIEWS:
        ring_len = max(2, math.ceil(L2_MULTIPLE * l2_bytes / (rows * cols * 2)))
        inputs = [harness_input(rows, cols, generator) for _ in range(ring_len)]
        cells = []
        for chunks, stages in variants:
            quant.SPLIT_CHUNKS, quant.SPLIT_STAGES = chunks, stages
            check = mismatch(
                quantize_e4m3(inputs[0].t(), "rowwise"), reference_quantize(inputs[0].t(), "rowwise")
            )
            ms = ring_ms(lambda x: quantize_e4m3(x.t(), "rowwise"), inputs, replays=3)
            exact = all(part.startswith("0/") for part in check.split())  # no code, no scale differs
            totals[(chunks, stages)] += ms if exact else math.inf  # never the pick
            cells.append(f"{ms * 1e3:7.1f}" + ("" if exact else f" MISMATCH {check}"))
        print(f"  {rows}x{cols}.T " + " ".join(cells), flush=True)
        inputs.clear()
        torch.cuda.empty_cache()
    best = min(totals, key=totals.__getitem__)
    print("  total   " + " ".join(f"{ms * 1e3:7.1f}" for ms in totals.values()), f"-> best {best}")
    out.write_text(f"{best[0]}-{best[1]}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="8192x4096 only")
    parser.add_argument(
        "--split-variants", type=Path, metavar="FILE", help="only time the strided rowwise split's variants"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("quant_dev: needs a CUDA GPU")
    began = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 * 2**20)
    print(
        f"{props.name}, {props.multi_processor_count} SMs, L2 {l2_bytes / 2**20:.0f} MiB, "
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"
    )
    if args.split_variants:
        bench_split_variants(args.split_variants, l2_bytes)
        return
    generator = torch.Generator(device="cuda").manual_seed(0)
    summary: list[str] = []
    for rows, cols in SHAPES[:1] if args.quick else SHAPES:
        ring_len = max(2, math.ceil(L2_MULTIPLE * l2_bytes / (rows * cols * 2)))
        print(f"\n=== {rows} x {cols} bf16 ({ring_len} input sets in the ring) ===")
        copy_gbs = bench_copy(rows, cols, ring_len)
        inputs = [harness_input(rows, cols, generator) for _ in range(ring_len)]
        summary += bench_granularities(rows, cols, inputs, copy_gbs, generator)
        bench_configs(rows, cols, inputs, copy_gbs[1])
        inputs.clear()
        torch.cuda.empty_cache()
    print("\nsummary (ring clock; targets: >= 0.85 of copy at 8192x4096, >= 0.92 on the larger shapes)")
    for line in summary:
        print(f"  {line}")
    print(f"total {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
