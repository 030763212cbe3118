"""fp8 quantiser: x (M×K) → fp8 e4m3 codes and fp32 scales, per tensor, per row or per 1×128 block
along K (the variant), checked bit for bit against this file's own copy of the rule: a round may
edit the kernel module freely, not the reference it is judged against."""

NAME = "quantize_fp8"
VARIANTS = ("tensorwise", "rowwise", "blockwise")
MODULE = "kernels.quant"
BACKEND_ENV = "KERNELS_QUANT_BACKEND"
KERNEL_SOURCE = "kernels/quant.py"
TESTS = "tests/kernels/test_quant.py"
FIELDS = {"M": "int", "K": "int"}
OUTPUTS = ("codes", "scales")
CHECKS = {"mismatch_frac": {"of": ["codes", "scales"], "rule": "exact"}}
UNIT = "GB/s"
METRIC = "Forward GB/s"
REFERENCE_DTYPE = "input"  # the rule is defined on the input's values, in float32
PROBE_SHAPES = [{"label": "probe-host-256", "M": 256, "K": 512}]
VARIANT = None  # set by the harness from the op's name

BLOCK = 128  # 1x128 blocks along K (DeepSeek-V3 activations)
E4M3_MAX = 448.0
SCALE_EPS = 1e-12  # an all-zero row or block gets scale SCALE_EPS / 448 and codes 0


def inputs(shape, draw):
    # Rows scaled by powers of two from 2^-6 to 2^6, so that codes and scales both get exercised.
    return {"x": draw.activation(shape["M"], shape["K"], fill="binades")}


def candidate(kernel, x):
    return kernel.quantize_fp8(x, granularity=VARIANT)


def reference(x):
    """scale = max(amax, eps) / 448, codes = clamp(x * (1 / scale)), round to nearest even.
    Tensor-by-tensor IEEE divisions (on CUDA, `tensor / python_scalar` becomes a multiply by the
    reciprocal, which a kernel's division does not match bit for bit)."""
    import torch

    x32 = x.to(torch.float32)
    rows, cols = x32.shape
    if VARIANT == "tensorwise":
        amax = x32.abs().amax().reshape(1, 1)
    elif VARIANT == "rowwise":
        amax = x32.abs().amax(dim=1, keepdim=True)
    else:
        blocks = -(-cols // BLOCK)
        padded = torch.nn.functional.pad(x32.abs(), (0, blocks * BLOCK - cols))
        amax = padded.reshape(rows, blocks, BLOCK).amax(dim=2)
    amax = amax.clamp_min(SCALE_EPS)
    scales = amax / torch.full_like(amax, E4M3_MAX)
    inverse = torch.ones_like(scales) / scales
    expanded = inverse if VARIANT != "blockwise" else inverse.repeat_interleave(BLOCK, dim=1)[:, :cols]
    codes = (x32 * expanded).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).contiguous()
    return codes, scales


def work(shape, dtype):
    """x read + fp8 codes written + fp32 scales written."""
    scales = {"tensorwise": 1, "rowwise": shape["M"], "blockwise": shape["M"] * -(-shape["K"] // BLOCK)}[
        VARIANT
    ]
    return {"forward": float(shape["M"]) * shape["K"] * (dtype.itemsize + 1) + 4.0 * scales}
