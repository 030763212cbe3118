"""Grouped GEMM (MoE experts): a: (ΣM)×K rows sorted by group, b: G×N×K expert weights,
group_sizes: G int64 on the device, drawn by the harness's own routing for the shape's `dist`
(skewed loads and empty experts included); out[rows of g] = a[rows of g] @ b[g].T, with its backward."""

NAME = "grouped_gemm"
MODULE = "kernels.grouped_gemm"
BACKEND_ENV = "KERNELS_GROUPED_GEMM_BACKEND"
KERNEL_SOURCE = "kernels/grouped_gemm.py"
TESTS = "tests/kernels/test_grouped_gemm.py"
# M is the total row count over the B groups, so FLOPs are 2·M·N·K as for a dense GEMM.
FIELDS = {"B": "int", "M": "int", "N": "int", "K": "int", "dist": {"type": "routing", "column": False}}
OUTPUTS = ("out",)
CHECKS = {"out_snr": {"of": "out"}, "da_snr": {"of": "a.grad"}, "db_snr": {"of": "b.grad"}}
UNIT = "TFLOPS"
BACKWARD = True
METRIC = "Combined Step TFLOPS"
PROBE_SHAPES = [{"label": "probe-host-256", "B": 4, "M": 256, "N": 128, "K": 128, "dist": "hot_half"}]


def inputs(shape, draw):
    return {
        "a": draw.activation(shape["M"], shape["K"]),
        "b": draw.parameter(shape["B"], shape["N"], shape["K"]),
        "group_sizes": draw.routing(shape["dist"], shape["M"], shape["B"]),
    }


def candidate(kernel, a, b, group_sizes):
    return kernel.grouped_gemm(a, b, group_sizes)


def reference(a, b, group_sizes):
    import torch

    parts, start = [], 0
    for group, size in enumerate(group_sizes.tolist()):
        parts.append(a[start : start + size] @ b[group].T)
        start += size
    return torch.cat(parts)


def work(shape, dtype):
    mnk = float(shape["M"]) * shape["N"] * shape["K"]
    return {"forward": 2.0 * mnk, "backward": 4.0 * mnk}
