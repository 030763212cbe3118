"""What the tool knows about the ops it ships harnesses for (kernels/, README.md "Kernels")."""

from __future__ import annotations

from dataclasses import dataclass

from gitcampaign import constants as C


@dataclass(frozen=True)
class OpInfo:
    kernel_source: str
    test_file: str
    default_metric: str
    header: str
    grouped: bool = False


_GEMM_FP8 = OpInfo("kernels/gemm_fp8.py", "tests/kernels/test_gemm_fp8.py", C.METRIC_STEP, C.GEMM_HEADER)
_QUANT = OpInfo("kernels/quant.py", "tests/kernels/test_quant.py", C.METRIC_GBS, C.QUANT_HEADER)

OPS: dict[str, OpInfo] = {
    "gemm": OpInfo("kernels/gemm.py", "tests/kernels/test_gemm.py", C.METRIC_STEP, C.GEMM_HEADER),
    "gemm_fp8_tensorwise": _GEMM_FP8,
    "gemm_fp8_rowwise": _GEMM_FP8,
    "gemm_fp8_blockwise": _GEMM_FP8,
    "grouped_gemm": OpInfo(
        "kernels/grouped_gemm.py",
        "tests/kernels/test_grouped_gemm.py",
        C.METRIC_STEP,
        C.GEMM_HEADER,
        grouped=True,
    ),
    "quantize_fp8_tensorwise": _QUANT,
    "quantize_fp8_rowwise": _QUANT,
    "quantize_fp8_blockwise": _QUANT,
}
