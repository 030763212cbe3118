"""The op spec of rmsnorm.py: how the harness measures and checks it (gitcampaign's docs/op-spec.md).

Frozen beside the harness by `git campaign prepare`; from the baseline on a round may not change it.
"""

NAME = "rmsnorm"
MODULE = "rmsnorm"  # imported from the measured tree's root
KERNEL_SOURCE = "rmsnorm.py"
TESTS = "test_rmsnorm.py"
FIELDS = {"M": "int", "N": "int", "eps": {"type": "float", "default": 1e-6}}
OUTPUTS = ("y",)
CHECKS = {"y_snr": {"of": "y"}, "dx_snr": {"of": "x.grad"}, "dw_snr": {"of": "weight.grad"}}
UNIT = "GB/s"
BACKWARD = True
METRIC = "Forward GB/s"
# A few rows: where launching costs the host more than the GPU's work (the probe's host check).
PROBE_SHAPES = [{"label": "probe-host", "M": 64, "N": 512}]


def inputs(shape, draw):
    """x is an activation (fresh every call); the weight a parameter near 1, as trained norms are."""
    return {
        "x": draw.activation(shape["M"], shape["N"]),
        "weight": draw.parameter(shape["N"], scale=0.1, shift=1.0),
        "eps": shape["eps"],
    }


def candidate(kernel, x, weight, eps):
    return kernel.rmsnorm(x, weight, eps)


def vendor(x, weight, eps):
    import torch

    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


def reference(x, weight, eps):
    import torch

    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def work(shape, dtype):
    """Bytes a call must move at least: forward reads x and weight, writes y; backward reads x, dy
    and weight, writes dx and dweight (the per-row 1/rms kept between them is left out)."""
    m, n, size = shape["M"], shape["N"], dtype.itemsize
    return {"forward": (2 * m * n + n) * size, "backward": (3 * m * n + 2 * n) * size}
