"""Development benchmark of `kernels.grouped_gemm` on one GPU (bf16): correctness, then speed.

Not part of a campaign round: a standalone script for whoever iterates on the kernel. For the
Mixtral-8x7B (all ten shapes) and DeepSeek-V3 MoE (uniform and hot_half; `--full`: all five
routings) shapes at micro-batch 1, with group sizes drawn by the harness's own routing
(`make_group_sizes`), it prints

1. SNR of out, dA and dB against the harness's float64 reference (floor: the harness's bf16 one);
2. `triton.testing.do_bench` times of forward and forward+backward for ours (`kernels.grouped_gemm`
   as it is: autotuned), torch (`KERNELS_GROUPED_GEMM_BACKEND=torch`: `torch._grouped_mm`) and a dense
   `F.linear` of equal FLOPs (M = ΣM rows, one N x K weight), with the ratios ours/torch and
   ours/dense as speed ratios (> 1: ours is faster), and the autotuner's picks;
3. per-config times of each TMA kernel (forward, dA and dB separately) with each autotune config
   pinned, on a few shapes (`--config-shapes`), with the forward's tile count and the rounds of the
   SMs it takes; a config that fails to compile or run prints its error and the run goes on.

Inputs are reused across timed calls (L2 may hold part of a small operand; the harness uses fresh
inputs). Run: `python benchmarks/dev/grouped_dev.py [--full] [--no-configs] [--config-shapes A,B]` from the repository
root; everything goes to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import kernels.grouped_gemm as gg  # noqa: E402
from gitcampaign.harness.checks import snr_db  # noqa: E402
from gitcampaign.harness.contract import SNR_THRESHOLDS_DB  # noqa: E402
from gitcampaign.harness.inputs import Inputs  # noqa: E402
from gitcampaign.harness.ops import spec_of  # noqa: E402
from gitcampaign.harness.routing import make_group_sizes  # noqa: E402
from gitcampaign.harness.spec import Op, load_spec_module  # noqa: E402
from gitcampaign.shapes import Shape, preset  # noqa: E402

GROUPED = Op(load_spec_module(spec_of("grouped_gemm")[0]), "grouped_gemm", "grouped_gemm spec")  # type: ignore[index]

DTYPE = torch.bfloat16
DEVICE = "cuda"
SNR_FLOOR_DB = SNR_THRESHOLDS_DB["bfloat16"]
# Shapes whose per-config times are printed (labels of the presets).
CONFIG_SHAPES = (
    "mixtral-8x7b-gate_up-mbs1-uniform",
    "mixtral-8x7b-down-mbs1-uniform",
    "mixtral-8x7b-gate_up-mbs1-hot_half",
    "deepseek-v3-moe-gate_up-mbs1-uniform",
    "deepseek-v3-moe-down-mbs1-hot_half",
)


def shapes(full: bool) -> list[Shape]:
    deepseek = preset("deepseek-v3-moe:mbs=1")
    if not full:
        deepseek = [s for s in deepseek if s.dist in ("uniform", "hot_half")]
    return preset("mixtral-8x7b:mbs=1") + deepseek


def bench_ms(call: Callable[[], object], rep: int = 100) -> float:
    return float(triton.testing.do_bench(call, warmup=25, rep=rep))


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12


def with_backend(name: str, call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        os.environ[gg.BACKEND_ENV] = name
        try:
            return call()
        finally:
            os.environ.pop(gg.BACKEND_ENV, None)

    return run


def forward_backward(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    a: torch.Tensor,
    b: torch.Tensor,
    g: torch.Tensor,
) -> Callable[[], object]:
    """One training step's three products, gradients returned rather than accumulated into .grad."""
    return lambda: torch.autograd.grad(fn(a, b), (a, b), g)


def picked(kernel: triton.runtime.Autotuner, rows: int) -> str:
    """The tuned configs of this shape's launches (autotune keys start with the routed rows, M_total)."""
    configs = [str(config) for key, config in kernel.cache.items() if key[0] == rows]
    return " / ".join(configs) or "-"


def check_and_time(shape: Shape, seed: int) -> dict[str, float]:
    assert shape.N is not None and shape.B is not None and shape.dist is not None
    device = torch.device(DEVICE)
    generator = torch.Generator().manual_seed(seed)
    sizes = make_group_sizes(shape.dist, shape.M, shape.B, generator=generator).to(device)
    torch.manual_seed(seed)
    a = torch.randn(shape.M, shape.K, device=device, dtype=DTYPE, requires_grad=True)
    b = torch.randn(shape.B, shape.N, shape.K, device=device, dtype=DTYPE, requires_grad=True)
    g = torch.randn(shape.M, shape.N, device=device, dtype=DTYPE)

    ours = lambda x, w: gg.grouped_gemm(x, w, sizes)  # noqa: E731
    out = ours(a, b)
    da, db = torch.autograd.grad(out, (a, b), g)
    reference = GROUPED.reference(Inputs({"a": a, "b": b, "group_sizes": sizes}), {"out": g})
    ref_out, ref_da, ref_db = reference["out"], reference["a.grad"], reference["b.grad"]
    snrs = {"out": snr_db(ref_out, out), "dA": snr_db(ref_da, da), "dB": snr_db(ref_db, db)}
    del ref_out, ref_da, ref_db, out, da, db
    torch.cuda.empty_cache()

    dense_a = torch.randn(shape.M, shape.K, device=device, dtype=DTYPE, requires_grad=True)
    dense_w = torch.randn(shape.N, shape.K, device=device, dtype=DTYPE, requires_grad=True)
    times = {
        "ours_fwd": bench_ms(lambda: ours(a, b)),
        "ours_step": bench_ms(forward_backward(ours, a, b, g)),
        "torch_fwd": bench_ms(with_backend("torch", lambda: ours(a, b))),
        "torch_step": bench_ms(with_backend("torch", forward_backward(ours, a, b, g))),
        "dense_fwd": bench_ms(lambda: F.linear(dense_a, dense_w)),
        "dense_step": bench_ms(forward_backward(F.linear, dense_a, dense_w, g)),
    }
    fwd_flops = 2.0 * shape.M * shape.N * shape.K
    ok = all(value >= SNR_FLOOR_DB for value in snrs.values())
    print(
        f"{shape.label:40s} sizes {sizes.tolist()}\n"
        f"  SNR dB: out {snrs['out']:.1f}  dA {snrs['dA']:.1f}  dB {snrs['dB']:.1f}  "
        f"{'ok' if ok else f'FAIL (floor {SNR_FLOOR_DB})'}\n"
        f"  fwd  ms: ours {times['ours_fwd']:.3f} ({tflops(fwd_flops, times['ours_fwd']):.0f} TFLOPS)  "
        f"torch {times['torch_fwd']:.3f}  dense {times['dense_fwd']:.3f}  -> "
        f"vs torch {times['torch_fwd'] / times['ours_fwd']:.3f}x  vs dense {times['dense_fwd'] / times['ours_fwd']:.3f}x\n"
        f"  step ms: ours {times['ours_step']:.3f} ({tflops(3 * fwd_flops, times['ours_step']):.0f} TFLOPS)  "
        f"torch {times['torch_step']:.3f}  dense {times['dense_step']:.3f}  -> "
        f"vs torch {times['torch_step'] / times['ours_step']:.3f}x  vs dense {times['dense_step'] / times['ours_step']:.3f}x\n"
        f"  picked: fwd, dA {picked(gg._grouped_matmul_nt_tma_kernel, shape.M)} | dB {picked(gg._grouped_db_tma_kernel, shape.M)}",
        flush=True,
    )
    return times


def pinned(kernel: triton.runtime.Autotuner, config: triton.Config, call: Callable[[], object]) -> str:
    """Time `call` with `kernel` restricted to `config`; the error's first line if it fails."""
    saved_configs = kernel.configs
    kernel.configs = [config]  # one config: the autotuner runs it without timing or its cache
    try:
        return f"{bench_ms(call, rep=40):.3f} ms"
    except Exception as exc:  # a config that does not compile or fit is reported, not fatal
        return f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    finally:
        kernel.configs = saved_configs


def per_config(shape: Shape, seed: int) -> None:
    assert shape.N is not None and shape.B is not None and shape.dist is not None
    device = torch.device(DEVICE)
    sizes = make_group_sizes(shape.dist, shape.M, shape.B, generator=torch.Generator().manual_seed(seed))
    sizes = sizes.to(device)
    a = torch.randn(shape.M, shape.K, device=device, dtype=DTYPE)
    b = torch.randn(shape.B, shape.N, shape.K, device=device, dtype=DTYPE)
    g = torch.randn(shape.M, shape.N, device=device, dtype=DTYPE)
    fwd_flops = 2.0 * shape.M * shape.N * shape.K
    print(f"{shape.label} (each product {fwd_flops / 1e12:.2f} TFLOP)", flush=True)
    forward = gg._grouped_matmul_nt_tma_kernel
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    for config in gg._hopper_tma_configs():
        fwd = pinned(forward, config, lambda: gg._grouped_matmul_nt(a, b, sizes))
        da = pinned(forward, config, lambda: gg._grouped_matmul_nt(g, b.transpose(1, 2), sizes))
        # Output tiles of the forward and how many rounds of the SMs they take: a persistent kernel
        # pays whole rounds, so a last round barely begun costs nearly a full one.
        bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
        tiles = int(((sizes + bm - 1) // bm).sum()) * triton.cdiv(shape.N, bn)
        waves = f"{tiles} tiles, {tiles / sms:.2f} rounds"
        print(f"  fwd {fwd:>12s}  dA {da:>12s}  {waves:>22s}  {config}", flush=True)
    for config in gg._hopper_tma_db_configs():
        db = pinned(gg._grouped_db_tma_kernel, config, lambda: gg._grouped_db(g, a, sizes))
        print(f"  dB  {db:>12s}  {config}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="all five DeepSeek-V3 routings")
    parser.add_argument("--no-configs", action="store_true", help="skip the per-config times")
    parser.add_argument(
        "--config-shapes", default=",".join(CONFIG_SHAPES), help="comma list of the shapes timed per config"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("grouped_dev: needs a CUDA GPU", file=sys.stderr)
        return 2
    began = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    print(
        f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}"
    )
    print(
        f"TMA path: {'yes' if torch.cuda.get_device_capability()[0] >= 9 else 'no (pre-sm90: pointer kernels)'}\n"
    )

    print("== correctness and speed (ratios: vendor time / ours, > 1 = ours faster) ==")
    summary: dict[str, list[float]] = {"torch_fwd": [], "torch_step": [], "dense_fwd": [], "dense_step": []}
    per_shape: dict[str, dict[str, float]] = {}
    for index, shape in enumerate(shapes(args.full)):
        try:
            times = check_and_time(shape, seed=1000 + index)
        except Exception as exc:
            print(f"{shape.label}: ERROR {type(exc).__name__}: {exc}", flush=True)
            continue
        per_shape[shape.label] = times
        for vendor in ("torch", "dense"):
            for phase in ("fwd", "step"):
                summary[f"{vendor}_{phase}"].append(times[f"{vendor}_{phase}"] / times[f"ours_{phase}"])
        torch.cuda.empty_cache()

    print("\n== summary: geometric means of vendor/ours ==")
    for key, ratios in summary.items():
        if ratios:
            mean = float(torch.tensor(ratios, dtype=torch.float64).log().mean().exp())
            print(f"  {key:11s} {mean:.3f}x over {len(ratios)} shapes")
    # The dense GEMM is the same product in every row of a linear, yet its time drifts between rows
    # with the GPU's power state: skew is read against dense within each row, not across rows.
    print("  skewed vs uniform ((ours/dense step) over uniform's; < 1.05 is the target):")
    for label, times in per_shape.items():
        uniform = per_shape.get(label.rsplit("-", 1)[0] + "-uniform")
        if not label.endswith("-uniform") and uniform:
            relative = (times["ours_step"] / times["dense_step"]) / (
                uniform["ours_step"] / uniform["dense_step"]
            )
            print(f"    {label:40s} {relative:.3f}")
    print(f"\n(elapsed {time.perf_counter() - began:.0f} s)", flush=True)

    if not args.no_configs:
        print("\n== per-config times (TMA kernels, each config pinned) ==")
        by_label = {shape.label: shape for shape in shapes(True)}
        for index, label in enumerate(args.config_shapes.split(",")):
            try:
                per_config(by_label[label], seed=2000 + index)
            except Exception as exc:
                print(f"{label}: ERROR {type(exc).__name__}: {exc}", flush=True)
            torch.cuda.empty_cache()
    print(f"\n(total {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
