"""fp8 GEMM: out = a @ b.T (a: M×K activation, b: N×K weight, both bf16), quantised to fp8 inside
the op with the variant's scaling granularity, bf16 out; with its backward. Judged against the
float64 product of the unquantised inputs: the out threshold is e4m3's, the gradients' that of the
gradient format the kernel uses for the granularity (its GRAD_FP8_DTYPE)."""

NAME = "gemm_fp8"
VARIANTS = ("tensorwise", "rowwise", "blockwise")
MODULE = "kernels.gemm_fp8"
BACKEND_ENV = "KERNELS_GEMM_BACKEND"
CUDA_ONLY_BACKENDS = ("torch",)  # torch's fp8 path is torch._scaled_mm, which only runs on CUDA
KERNEL_SOURCE = "kernels/gemm_fp8.py"
TESTS = "tests/kernels/test_gemm_fp8.py"
FIELDS = {"B": {"type": "int", "default": 1, "choices": [1]}, "M": "int", "N": "int", "K": "int"}
OUTPUTS = ("out",)
CHECKS = {
    "out_snr": {"of": "out", "min_db": "float8_e4m3fn"},
    "da_snr": {"of": "a.grad"},
    "db_snr": {"of": "b.grad"},
}
UNIT = "TFLOPS"
PEAK = "fp8"
BACKWARD = True
METRIC = "Combined Step TFLOPS"
PROBE_SHAPES = [{"label": "probe-host-256", "M": 256, "N": 256, "K": 256}]
VARIANT = None  # set by the harness from the op's name


def inputs(shape, draw):
    return {"a": draw.activation(shape["M"], shape["K"]), "b": draw.parameter(shape["N"], shape["K"])}


def candidate(kernel, a, b):
    return kernel.gemm_fp8(a, b, VARIANT)


def reference(a, b):
    return a @ b.T


def work(shape, dtype):
    mnk = float(shape["M"]) * shape["N"] * shape["K"]
    return {"forward": 2.0 * mnk, "backward": 4.0 * mnk}


def thresholds(kernel, shape):
    grad = kernel.GRAD_FP8_DTYPE[VARIANT]
    return {"da_snr": grad, "db_snr": grad}
