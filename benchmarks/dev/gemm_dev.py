"""GPU check of kernels.gemm on the Llama-3.1 8B and 70B linear layers (M = 8192 tokens, mbs = 1):
correctness in bf16, time against cuBLAS, and every autotune config of the TMA kernel on its own.

1. Correctness: out, dA and dB of `kernels.gemm.gemm` in bf16 against an fp32 reference (TF32 off)
   from the same bf16 inputs, as SNR in dB; the campaign harness fails anything under 40 dB.
2. Timing: `triton.testing.do_bench` medians (L2 flushed between repeats; autotuning happens in
   the warm-up) of the forward and of forward + backward (`torch.autograd.grad`), ours (autotuned)
   against torch (`F.linear`, cuBLAS). speedup = torch ms / ours ms, so above 1 means ours is faster.
   The autotuned config of each layout (fwd, dA, dB) is printed.
3. Per config: each config of `_matmul_nt_kernel`'s autotune list (plus a few candidates outside
   it with --extra) pinned alone, the way KERNELS_GEMM_CONFIG pins one, with its forward and
   forward + backward times and its SNRs; a config that fails to compile or launch prints its error
   and the run goes on.

Everything goes to stdout. Run on an H200 from the repository root (about 2 minutes):

    python benchmarks/dev/gemm_dev.py [--models 8b,70b] [--extra] [--no-configs]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gitcampaign.harness.checks import snr_db  # noqa: E402
from gitcampaign.harness.contract import SNR_THRESHOLDS_DB  # noqa: E402
from gitcampaign.shapes import Shape, preset  # noqa: E402
from kernels import gemm as gemm_module  # noqa: E402
from kernels._common import num_sms, tma_config  # noqa: E402

MODELS = {"8b": "llama3.1-8b:mbs=1", "70b": "llama3.1-70b:mbs=1"}
SNR_FLOOR_DB = SNR_THRESHOLDS_DB["bfloat16"]
PRODUCTS = ("out", "dA", "dB")


def _with(config: triton.Config, **meta: int) -> triton.Config:
    return triton.Config({**config.kwargs, **meta}, num_warps=config.num_warps, num_stages=config.num_stages)


def extra_configs() -> list[triton.Config]:
    """Candidates outside the autotune list, worth a look when the list is revised."""
    config = tma_config
    return [
        config(128, 128, 64, 8, 5, subtile=True),  # deeper pipeline on the small tile
        config(256, 128, 64, 8, 4, subtile=True),  # 224 KiB like 128x256 s4
        _with(config(128, 256, 64, 8, 3, subtile=True), GROUP_M=16),  # a taller L2 band
        config(128, 128, 128, 8, 3, subtile=True),  # fewer, longer K steps
    ]


def short(config: triton.Config) -> str:
    meta = config.kwargs
    text = f"{meta['BLOCK_M']}x{meta['BLOCK_N']}x{meta['BLOCK_K']} w{config.num_warps} s{config.num_stages}"
    text += f" g{meta['GROUP_M']}" + (" sub" if meta.get("EPILOGUE_SUBTILE") else "")
    return text


class Case:
    """One shape's bf16 inputs, grad_out and fp32 reference products (TF32 off)."""

    def __init__(self, shape: Shape) -> None:
        assert shape.N is not None
        self.label = shape.label.removeprefix("llama3.1-").removesuffix("-mbs1")
        self.m, self.n, self.k = shape.M, shape.N, shape.K
        generator = torch.Generator(device="cuda").manual_seed(shape.M + shape.N + shape.K)

        def draw(*size: int) -> torch.Tensor:
            return torch.randn(*size, generator=generator, device="cuda", dtype=torch.bfloat16)

        self.a = draw(self.m, self.k).requires_grad_()
        self.b = draw(self.n, self.k).requires_grad_()
        self.grad_out = draw(self.m, self.n)
        a32, b32, g32 = self.a.detach().float(), self.b.detach().float(), self.grad_out.float()
        self.reference = (a32 @ b32.T, g32 @ b32, g32.T @ a32)

    @property
    def tflop_step(self) -> float:
        return 6.0 * self.m * self.n * self.k / 1e12

    def snrs(self, linear: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> list[float]:
        out = linear(self.a, self.b)
        grads = torch.autograd.grad(out, (self.a, self.b), self.grad_out)
        return [snr_db(ref, got) for ref, got in zip(self.reference, (out, *grads), strict=True)]

    def times(
        self, linear: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], rep: int
    ) -> tuple[float, float]:
        """Forward ms and forward + backward ms (medians)."""
        forward = do_bench(lambda: linear(self.a, self.b), warmup=25, rep=rep)
        step = do_bench(
            lambda: torch.autograd.grad(linear(self.a, self.b), (self.a, self.b), self.grad_out),
            warmup=25,
            rep=rep,
        )
        return float(forward), float(step)


def snr_text(snrs: list[float]) -> str:
    flags = ["" if value >= SNR_FLOOR_DB else "!" for value in snrs]  # NaN fails too
    return " ".join(f"{value:5.1f}{flag}" for value, flag in zip(snrs, flags, strict=True))


def tuned_configs(case: Case) -> str:
    """The autotuned config of each layout (fwd, dA, dB) for this shape, from the autotuner's cache."""
    kernel = gemm_module._matmul_nt_kernel
    layouts = {"fwd": (case.m, case.n, case.k, False, False), "dA": (case.m, case.k, case.n, False, True)}
    layouts["dB"] = (case.n, case.k, case.m, True, True)
    picked = []
    for name, key in layouts.items():
        config = next((c for cached_key, c in kernel.cache.items() if tuple(cached_key[:5]) == key), None)
        picked.append(f"{name} {short(config) if config else '-'}")
    return " | ".join(picked)


def run_case(case: Case, configs: list[triton.Config]) -> tuple[str, list[str]]:
    """The autotuned row and one row per pinned config."""
    kernel = gemm_module._matmul_nt_kernel
    autotune_list = kernel.configs
    config_rows = []
    for config in configs:
        kernel.configs = [config]  # one config: the autotuner runs it without timing, like a pin
        try:
            snrs = case.snrs(gemm_module.gemm)
            forward, step = case.times(gemm_module.gemm, rep=100)
            config_rows.append(
                f"{case.label:12} {short(config):28} {forward:8.3f} {step:8.3f} "
                f"{case.tflop_step / step * 1e3:7.0f}  {snr_text(snrs)}"
            )
        except Exception as error:  # a compile error or OutOfResources: print it, try the next config
            message = " ".join(f"{type(error).__name__}: {error}".split())[:300]
            config_rows.append(f"{case.label:12} {short(config):28} FAILED {message}")
        finally:
            kernel.configs = autotune_list

    started = time.perf_counter()
    ours_snrs = case.snrs(gemm_module.gemm)  # autotunes the three layouts
    tune_s = time.perf_counter() - started
    torch_snrs = case.snrs(F.linear)
    ours_fwd, ours_step = case.times(gemm_module.gemm, rep=200)
    torch_fwd, torch_step = case.times(F.linear, rep=200)
    row = (
        f"{case.label:12} {case.m:6} {case.n:6} {case.k:6}  {ours_fwd:8.3f} {torch_fwd:8.3f} "
        f"{torch_fwd / ours_fwd:5.2f}x  {ours_step:8.3f} {torch_step:8.3f} {torch_step / ours_step:5.2f}x  "
        f"{case.tflop_step / ours_step * 1e3:5.0f} {case.tflop_step / torch_step * 1e3:5.0f}  "
        f"{snr_text(ours_snrs)} | {snr_text(torch_snrs)}  tune {tune_s:4.1f}s\n"
        f"{'':12} tuned: {tuned_configs(case)}"
    )
    return row, config_rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="8b,70b", help="comma list of " + ", ".join(MODELS))
    parser.add_argument("--extra", action="store_true", help="also time the candidates outside the list")
    parser.add_argument("--no-configs", action="store_true", help="skip the per-config part")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gemm_dev needs a CUDA GPU", file=sys.stderr)
        return 2
    os.environ[gemm_module.BACKEND_ENV] = "triton"
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference is full fp32
    pinned = os.environ.get(gemm_module.CONFIG_ENV)

    configs = [] if args.no_configs else list(gemm_module._matmul_nt_kernel.configs)
    if args.extra:
        configs += extra_configs()
    print(
        f"gemm_dev {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
        f"{torch.cuda.get_device_name()} ({num_sms(torch.device('cuda'), 0)} SMs), "
        f"torch {torch.__version__}, triton {triton.__version__}, bf16"
        + (f"; {gemm_module.CONFIG_ENV}={pinned} pins the list" if pinned else "")
    )
    print(f"SNR columns: out dA dB in dB vs fp32; '!' marks one under the harness's {SNR_FLOOR_DB:g} dB")
    started = time.perf_counter()
    rows, config_rows = [], []
    for model in args.models.split(","):
        for shape in preset(MODELS[model.strip()]):
            case = Case(shape)
            try:
                row, per_config = run_case(case, configs)
            except Exception:
                traceback.print_exc()
                row, per_config = f"{case.label:12} FAILED (traceback above)", []
            print(row, flush=True)
            rows.append(row)
            config_rows += per_config
            del case
            torch.cuda.empty_cache()

    header = (
        f"{'layer':12} {'M':>6} {'N':>6} {'K':>6}  {'fwd ms':>8} {'torch':>8} {'speedup':>6}  "
        f"{'step ms':>8} {'torch':>8} {'speedup':>6}  {'TF/s':>5} {'torch':>5}  "
        f"{'ours out dA dB':17} | torch"
    )
    print("\n== ours (autotuned) vs torch F.linear; step = forward + backward, TF/s = 6MNK / step")
    print(header)
    print("\n".join(rows))
    if config_rows:
        print("\n== each config pinned alone")
        print(f"{'layer':12} {'config':28} {'fwd ms':>8} {'step ms':>8} {'TF/s':>7}  out dA dB (dB)")
        print("\n".join(config_rows))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
