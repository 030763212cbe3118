"""GPU check and timing of kernels.gemm_fp8 on the Llama-3.1-8B mbs=1 shapes (M = 8192 tokens).

    python benchmarks/dev/fp8_dev.py [--skip-configs] [--pointer] [--layers qkv,o,gate_up,down]
        [--granularities tensorwise,rowwise,blockwise] [--sections 1,2,2g,3,3b,3c,4]

Sections, each printed as it finishes:
1. correctness: out, dA, dB of gemm_fp8 against float64 (the harness's SNR: out >= 25 dB, gradients
   25 dB for e4m3 / 20 dB for e5m2, GRAD_FP8_DTYPE says which).
2. kernel alone on pre-quantised operands (forward, dA and dB products) against the torch backend's
   product (torch._scaled_mm, or what reference_kind prints for blockwise); with --pointer also the
   pointer kernel (the TMA kernel's fallback, forced) on the forward product (its autotuning adds
   about a minute). 2g. blockwise only: each tile of the Gluon kernel (`_gluon_fp8.STAGES`: 64 rows a
   consumer x BLOCK_N) on the three products, each checked against the 128x128 tile (>= 50 dB: the
   same fp8 products summed in another order).
3. whole op (quantisation + GEMMs) forward and forward+backward against F.linear in bf16, and against
   the fp8 torch backend (torch quantiser + cuBLAS); 3b. where one step's GPU time goes, kernel by
   kernel (torch.profiler); 3c. the host's time to launch one step, with the GPU kept busy so that
   the host never waits, and where the first layer's host time goes (cProfile). do_bench's whole-op
   figures include the host's time where it exceeds the GPU's (the quick harness hides launches).
   Then the autotuner's pick for each product.
4. per-config timings of the TMA kernel, each config of its autotune list pinned in turn (compile or
   launch errors printed per config).

`speed` columns are their time / our time (> 1: ours faster). Times are triton.testing.do_bench
medians (it clears L2 between repeats).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]

from vendor import Products  # noqa: E402

from gitcampaign.harness.checks import snr_db  # noqa: E402
from gitcampaign.harness.contract import SNR_THRESHOLDS_DB  # noqa: E402
from gitcampaign.shapes import preset  # noqa: E402
from kernels import _gluon_fp8  # noqa: E402
from kernels import gemm_fp8 as fp8  # noqa: E402

START = time.perf_counter()
# The granularities a run covers (--granularities).
GRANULARITIES = list(fp8.GRANULARITIES)


def _ms(fn: Callable[[], object], warmup: int = 25, rep: int = 100) -> float:
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep))


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


@contextmanager
def _pointer_kernel() -> Iterator[None]:
    """Force the launcher's fallback (the pre-TMA kernel) by declaring TMA unusable."""
    real = fp8.tma_supported
    fp8.tma_supported = lambda device: False  # type: ignore[assignment]
    try:
        yield
    finally:
        fp8.tma_supported = real


@contextmanager
def _pinned(config: triton.Config) -> Iterator[None]:
    kernel = fp8._gemm_fp8_tma_kernel
    configs = kernel.configs
    kernel.configs = [config]
    try:
        yield
    finally:
        kernel.configs = configs


def _elapsed() -> str:
    return f"[{time.perf_counter() - START:5.0f} s]"


def _layers() -> list[tuple[str, int, int, int]]:
    return [
        (shape.label.split("-")[2], shape.M, shape.N or 0, shape.K) for shape in preset("llama3.1-8b:mbs=1")
    ]


def _inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=generator)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=generator)
    grad = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=generator)
    return a, b, grad


def check_snr(layers: list[tuple[str, int, int, int]]) -> bool:
    print(f"\n== 1. SNR against float64 (dB) {_elapsed()}")
    ok = True
    for name, m, n, k in layers:
        a, b, grad = _inputs(m, n, k)
        ref = (a.double() @ b.double().t(), grad.double() @ b.double(), grad.double().t() @ a.double())
        for granularity in GRANULARITIES:
            a_ = a.clone().requires_grad_()
            b_ = b.clone().requires_grad_()
            try:
                out = fp8.gemm_fp8(a_, b_, granularity)
                grads = torch.autograd.grad(out, (a_, b_), grad)
            except Exception as error:  # noqa: BLE001 - a dev script reports and goes on
                print(f"{name:<8}{granularity:<11} FAILED {type(error).__name__}: {str(error)[:300]}")
                ok = False
                continue
            # The harness's rule and thresholds: the output against e4m3's, gradients against their format's.
            out_floor = SNR_THRESHOLDS_DB["float8_e4m3fn"]
            grad_floor = SNR_THRESHOLDS_DB[str(fp8.GRAD_FP8_DTYPE[granularity]).removeprefix("torch.")]
            snrs = [snr_db(r, got) for r, got in zip(ref, (out, *grads), strict=True)]
            passed = snrs[0] >= out_floor and min(snrs[1:]) >= grad_floor
            ok &= passed
            print(
                f"{name:<8}{granularity:<11} out {snrs[0]:5.1f}  dA {snrs[1]:5.1f}  dB {snrs[2]:5.1f}"
                f"  (need {out_floor:.0f} / {grad_floor:.0f})  {'ok' if passed else 'FAIL'}"
            )
        del ref
    return ok


def time_kernels(layers: list[tuple[str, int, int, int]], pointer: bool) -> None:
    print(f"\n== 2. kernel alone, pre-quantised operands (ms; speed = their time / ours) {_elapsed()}")
    for granularity in GRANULARITIES:
        print(f"-- {granularity}: torch backend = {fp8.reference_kind(granularity)}")
        print(f"{'layer':<8}{'product':<8}{'M,N,K':<18}{'ours':>8}{'TFLOP/s':>9}{'vendor':>8}{'speed':>7}"
              f"{'pointer':>9}{'speed':>7}")  # fmt: skip
        for name, m, n, k in layers:
            a, b, grad = _inputs(m, n, k)
            products = Products(a, b, grad, granularity)
            dims = {"fwd": (m, n, k), "dA": (m, k, n), "dB": (n, k, m)}
            for product, (pm, pn, pk) in dims.items():
                ours = _ms(products.ours(product))
                vendor = _ms(products.vendor(product))
                cells = f"{ours:8.3f}{2 * pm * pn * pk / ours / 1e9:9.0f}{vendor:8.3f}{vendor / ours:7.2f}"
                if pointer and product == "fwd":
                    with _pointer_kernel():
                        old = _ms(products.ours(product))
                    cells += f"{old:9.3f}{old / ours:7.2f}"
                print(f"{name:<8}{product:<8}{f'{pm},{pn},{pk}':<18}{cells}", flush=True)


@contextmanager
def _gluon_tile(consumers: int, block_n: int) -> Iterator[None]:
    """Every 16-bit product of the Gluon kernel at this tile."""
    saved = _gluon_fp8.TILE_WEIGHT_BLOCKS, _gluon_fp8.TILE_COLUMN_SCALES
    _gluon_fp8.TILE_WEIGHT_BLOCKS = _gluon_fp8.TILE_COLUMN_SCALES = (consumers, block_n)
    try:
        yield
    finally:
        _gluon_fp8.TILE_WEIGHT_BLOCKS, _gluon_fp8.TILE_COLUMN_SCALES = saved


def time_gluon_tiles(layers: list[tuple[str, int, int, int]]) -> None:
    tiles = sorted(_gluon_fp8.STAGES)
    print(f"\n== 2g. the Gluon kernel's tiles, blockwise (ms, speed = vendor / ours) {_elapsed()}")
    print(f"{'layer':<8}{'product':<8}{'vendor':>8}" + "".join(f"{f'{64 * c}x{n}':>16}" for c, n in tiles))
    for name, m, n, k in layers:
        products = Products(*_inputs(m, n, k), "blockwise")
        for product in ("fwd", "dA", "dB"):
            vendor = _ms(products.vendor(product))
            with _gluon_tile(2, 128):
                want = products.ours(product)().double()
            cells = ""
            for consumers, block_n in tiles:
                with _gluon_tile(consumers, block_n):
                    try:
                        snr = snr_db(want, products.ours(product)().double())
                        ours = _ms(products.ours(product))
                    except Exception as error:  # noqa: BLE001 - a dev script reports and goes on
                        print(f"{consumers} x {block_n}: {type(error).__name__}: {str(error)[:300]}")
                        cells += f"{'error':>16}"
                        continue
                cells += f"{ours:9.3f}{vendor / ours:5.2f}{'' if snr >= 50 else '!':>2}"
            print(f"{name:<8}{product:<8}{vendor:8.3f}{cells}", flush=True)


def _grads_of(fn: Callable[[], torch.Tensor], a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor) -> object:
    return torch.autograd.grad(fn(), (a, b), grad)


def time_whole_op(layers: list[tuple[str, int, int, int]]) -> None:
    print(f"\n== 3. whole op (ms; speed = their time / ours) {_elapsed()}")
    print(f"{'layer':<8}{'granularity':<12}{'fwd':>8}{'bf16':>8}{'speed':>7}{'fp8 torch':>10}{'speed':>7}"
          f"{'fwd+bwd':>9}{'bf16':>8}{'speed':>7}{'fp8 torch':>10}{'speed':>7}")  # fmt: skip
    for name, m, n, k in layers:
        a, b, grad = _inputs(m, n, k)
        a.requires_grad_()
        b.requires_grad_()
        bf16 = functools.partial(F.linear, a, b)
        bf16_fwd, bf16_step = _ms(bf16), _ms(functools.partial(_grads_of, bf16, a, b, grad))
        for granularity in GRANULARITIES:
            op = functools.partial(fp8.gemm_fp8, a, b, granularity)
            step = functools.partial(_grads_of, op, a, b, grad)
            fwd, both = _ms(op), _ms(step)
            with _env(fp8.BACKEND_ENV, "torch"):
                vendor_fwd, vendor_both = _ms(op), _ms(step)
            print(
                f"{name:<8}{granularity:<12}{fwd:8.3f}{bf16_fwd:8.3f}{bf16_fwd / fwd:7.2f}"
                f"{vendor_fwd:10.3f}{vendor_fwd / fwd:7.2f}{both:9.3f}{bf16_step:8.3f}{bf16_step / both:7.2f}"
                f"{vendor_both:10.3f}{vendor_both / both:7.2f}",
                flush=True,
            )


def kernel_times(step: Callable[[], object], steps: int = 5) -> dict[str, tuple[float, float]]:
    """GPU kernel name -> (ms, launches) per step, from torch.profiler over `steps` back-to-back steps."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return {  # the kernels themselves, not the host-side ops that launched them (that would count twice)
        event.key: (event.self_device_time_total / 1e3 / steps, event.count / steps)
        for event in prof.key_averages()
        if event.device_type == DeviceType.CUDA and event.self_device_time_total > 0
    }


def time_breakdown(layers: list[tuple[str, int, int, int]], top: int = 8) -> None:
    """Where one step (forward + backward) of the whole op spends its GPU time, kernel by kernel."""
    print(f"\n== 3b. where a step's GPU time goes (torch.profiler, ms per step, back to back) {_elapsed()}")
    for name, m, n, k in layers:
        a, b, grad = _inputs(m, n, k)
        a.requires_grad_()
        b.requires_grad_()
        bf16 = sum(
            ms
            for ms, _ in kernel_times(
                functools.partial(_grads_of, functools.partial(F.linear, a, b), a, b, grad)
            ).values()
        )
        for granularity in GRANULARITIES:
            op = functools.partial(fp8.gemm_fp8, a, b, granularity)
            times = kernel_times(functools.partial(_grads_of, op, a, b, grad))
            total = sum(ms for ms, _ in times.values())
            launches = sum(count for _, count in times.values())
            print(
                f"-- {name} {granularity}: {total:.3f} ms in {launches:.0f} launches; bf16 F.linear "
                f"{bf16:.3f} ms, speed {bf16 / total:.2f}"
            )
            for kernel, (ms, count) in sorted(times.items(), key=lambda item: -item[1][0])[:top]:
                print(f"   {ms:8.3f} {100 * ms / total:5.1f}% x{count:<3.0f} {kernel[:90]}")


def host_ms(step: Callable[[], object], steps: int = 20) -> float:
    """Host milliseconds to launch one step while the GPU is busy with a long spin (nothing waits)."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # ~1 s of GPU cycles: the launches below queue behind it
    began = time.perf_counter()
    for _ in range(steps):
        step()
    host = (time.perf_counter() - began) / steps * 1e3
    torch.cuda.synchronize()
    return host


def time_host(layers: list[tuple[str, int, int, int]], top: int = 15) -> None:
    """Host time per forward+backward step: ours per granularity and bf16 F.linear's."""
    import cProfile
    import pstats

    print(f"\n== 3c. host ms to launch one step (GPU kept busy; compare 3b's GPU ms) {_elapsed()}")
    for index, (name, m, n, k) in enumerate(layers):
        a, b, grad = _inputs(m, n, k)
        a.requires_grad_()
        b.requires_grad_()
        bf16 = host_ms(functools.partial(_grads_of, functools.partial(F.linear, a, b), a, b, grad))
        ours = {
            granularity: functools.partial(
                _grads_of, functools.partial(fp8.gemm_fp8, a, b, granularity), a, b, grad
            )
            for granularity in GRANULARITIES
        }
        print(
            f"{name:<8} bf16 {bf16:.3f}  " + "  ".join(f"{g} {host_ms(step):.3f}" for g, step in ours.items())
        )
        if index == 0:
            for granularity, step in ours.items():
                torch.cuda._sleep(2_000_000_000)
                profiler = cProfile.Profile()
                profiler.runcall(lambda: [step() for _ in range(10)])  # noqa: B023
                torch.cuda.synchronize()
                print(f"-- {name} {granularity}: host functions by own time, 10 steps")
                pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def _config_name(config: triton.Config) -> str:
    kw = config.kwargs
    return (
        f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} w{config.num_warps} s{config.num_stages}"
        f" sub{kw.get('EPILOGUE_SUBTILE', 0)} occ{kw.get('OCCUPANCY', 1)}"
    )


def time_configs(layers: list[tuple[str, int, int, int]]) -> None:
    print(f"\n== 4. TMA kernel per pinned config (ms; best marked *) {_elapsed()}")
    configs = fp8._tma_configs()
    for granularity in GRANULARITIES:
        scaling = fp8._SCALING_CODE[granularity]
        serving = fp8._prune_configs(configs, {}, SCALING=scaling)
        print(f"-- {granularity}: " + " | ".join(_config_name(c) for c in serving))
        for name, m, n, k in layers:
            a, b, grad = _inputs(m, n, k)
            products = Products(a, b, grad, granularity)
            for product in products.items:
                cells = []
                for config in serving:
                    with _pinned(config):
                        try:
                            cells.append(_ms(products.ours(product), warmup=10, rep=30))
                        except Exception as error:  # noqa: BLE001 - report per config, go on
                            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                            print(f"   {_config_name(config)}: {type(error).__name__}: {first[:200]}")
                            cells.append(math.inf)
                best = min(cells)
                text = "".join(f"{t:9.3f}{'*' if t == best else ' '}" for t in cells)
                print(f"{name:<8}{product:<5}{text}", flush=True)


def print_picks() -> None:
    print(f"\n-- autotuner's picks (key starts M, N, K, SCALING, Y_GROUP_N, NUM_SMS) {_elapsed()}")
    for key, config in fp8._gemm_fp8_tma_kernel.cache.items():
        print(f"{key[:6]}: {_config_name(config)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-configs", action="store_true", help="leave out section 4")
    parser.add_argument("--pointer", action="store_true", help="time the pointer (fallback) kernel too")
    parser.add_argument("--layers", default="qkv,o,gate_up,down", help="comma-separated subset")
    parser.add_argument("--granularities", default=",".join(fp8.GRANULARITIES), help="comma-separated subset")
    parser.add_argument("--sections", default="1,2,2g,3,3b,3c,4", help="comma-separated subset")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("fp8_dev.py needs a CUDA GPU (Hopper for fp8 wgmma and TMA)")
    GRANULARITIES[:] = [g for g in fp8.GRANULARITIES if g in args.granularities.split(",")]
    sections = set(args.sections.split(",")) - ({"4"} if args.skip_configs else set())
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    layers = [layer for layer in _layers() if layer[0] in args.layers.split(",")]
    ok = check_snr(layers) if "1" in sections else True
    steps = {"2": lambda: time_kernels(layers, pointer=args.pointer), "2g": lambda: time_gluon_tiles(layers),
             "3": lambda: time_whole_op(layers),
             "3b": lambda: time_breakdown(layers), "3c": lambda: time_host(layers)}  # fmt: skip
    for section, run in steps.items():
        if section in sections:
            run()
    print_picks()
    if "4" in sections:
        time_configs(layers)
    print(f"\ndone {_elapsed()}; SNR {'ok' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
