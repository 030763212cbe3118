"""GEMM: out = a @ b.T in the torch.nn.functional.linear layout (a: M×K activation, b: N×K weight),
with its backward (dA = g @ b, dB = gᵀ @ a), in the campaign's compute dtype (bf16 on a GPU)."""

NAME = "gemm"
MODULE = "kernels.gemm"
BACKEND_ENV = "KERNELS_GEMM_BACKEND"
KERNEL_SOURCE = "kernels/gemm.py"
TESTS = "tests/kernels/test_gemm.py"
FIELDS = {"B": {"type": "int", "default": 1, "choices": [1]}, "M": "int", "N": "int", "K": "int"}
OUTPUTS = ("out",)
CHECKS = {"out_snr": {"of": "out"}, "da_snr": {"of": "a.grad"}, "db_snr": {"of": "b.grad"}}
UNIT = "TFLOPS"
BACKWARD = True
METRIC = "Combined Step TFLOPS"
# A size where launching a call costs the host more than the GPU's work: the probe's host check.
PROBE_SHAPES = [{"label": "probe-host-256", "M": 256, "N": 256, "K": 256}]


def inputs(shape, draw):
    return {"a": draw.activation(shape["M"], shape["K"]), "b": draw.parameter(shape["N"], shape["K"])}


def candidate(kernel, a, b):
    return kernel.gemm(a, b)


def reference(a, b):
    return a @ b.T


def work(shape, dtype):
    """Forward 2MNK, backward 4MNK (dA + dB)."""
    mnk = float(shape["M"]) * shape["N"] * shape["K"]
    return {"forward": 2.0 * mnk, "backward": 4.0 * mnk}
