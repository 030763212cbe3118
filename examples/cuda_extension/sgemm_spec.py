"""The op spec of the CUDA sgemm (sgemmext, built in place by setup.py): how gitcampaign's harness
measures and checks it (docs/op-spec.md). float32 on the GPU; forward only."""

NAME = "sgemm"
MODULE = "sgemmext"  # the package built in place in the measured tree
KERNEL_SOURCE = "csrc/sgemm.cu"
TESTS = "test_sgemm.py"
CUDA_ONLY_BACKENDS = ("cuda", "torch")  # the kernel is CUDA; the vendor's path here is cuBLAS
FIELDS = {"M": "int", "N": "int", "K": "int"}
OUTPUTS = ("out",)
# float32 sums over K = 4096 reach about 110 dB; a skipped K tile falls below 30.
CHECKS = {"out_snr": {"of": "out", "min_db": 80}}
UNIT = "TFLOPS"
DTYPE = "float32"


def inputs(shape, draw):
    """a: M×K activation, b: K×N weight (sgemm's layout: out = a @ b)."""
    return {"a": draw.activation(shape["M"], shape["K"]), "b": draw.parameter(shape["K"], shape["N"])}


def candidate(kernel, a, b):
    return kernel.sgemm(a, b)


def vendor(a, b):
    return a @ b


def reference(a, b):
    return a @ b


def work(shape, dtype):
    return {"forward": 2.0 * shape["M"] * shape["N"] * shape["K"]}
