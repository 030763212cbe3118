"""Blockwise fp8 GEMM for Hopper (sm_90) in Gluon, warp-specialised by hand.

What it computes: the product of `kernels.gemm_fp8` for SCALING == 2 (blockwise), with the same
operands and scale layouts as `_gemm_fp8_tma_kernel` (see that module's docstring):
``C[m, n] = sum_kb (X[m, kb-block] . Y[n, kb-block]) * sx[m, kb] * sy[n // Y_GROUP_N, kb]``,
X (M x K) and Y (N x K) fp8 row-major, sx fp32 (M, ceil(K/128)), sy fp32
(ceil(N/Y_GROUP_N), ceil(K/128)); Y_GROUP_N = 128 for a weight's 128x128 blocks (one sy per
128-column tile and K block), 1 for 1x128 blocks (the dB product: sy per column). Out bf16, or
fp16/fp32 for gradients of fp16/fp32 inputs. K is a multiple of 16 (TMA); TMA's zero fill past M,
N and K adds nothing, so a partial last K block needs no mask. With Y_GROUP_N = 1 the kernel reads
the scales from kb-major copies, sx_t (KB, M) and sy_t (KB, N), KB = ceil(K/128), which
`matmul_blockwise` makes (`_kb_major`); TMA needs their 16-byte row pitches, so M and N multiples
of 4.

Why. Triton's blockwise loop reads ``MMA | F | MMAx3 | WAIT 0x0 | Fx64`` (sass_dev): both
warpgroups of a program wait for each 128-deep product and then promote it
(acc += prod * sx * sy), and Triton synchronises them every step, so the tensor cores idle during
the promotion (0.65-0.86 of cuBLAS). Triton 3.6's automatic warp specialisation computes the second
consumer's rows wrong for blockwise, so this kernel does it by hand: two consumers tied only by
mbarriers, so that one promotes while the other's product runs.

Grid. Persistent: min(#SMs, tiles) programs, program p computing the 128x128 tiles p, p + P, ... in
GROUP_M-grouped order (`kernels._common.tile_pid`, as the Triton kernels). BLOCK_K = 128 = one
scale block = 128 fp8 bytes = one 128-byte swizzle atom.

Partitions (`gl.warp_specialize`), 9 warps (12 at launch: the producer's warpgroup is padded):
- producer (a 1-warp worker, 40 registers): fills a STAGES = 4 ring of shared-memory stages, each an
  X tile (128 x 128 fp8) and a Y tile (128 x 128 fp8), 32 KiB, by TMA from host descriptors; with
  Y_GROUP_N = 1 also the K block's row and column scales, sx_t[kb, off_m : off_m + 128] and
  sy_t[kb, off_n : off_n + 128] ([1, 128] fp32 boxes, 512 B each, unswizzled; zero fill past M, N
  meets TMA's zero-filled operand rows, and those rows and columns are clipped at the store). Each
  stage has a `full` mbarrier (count 1: the producer's expect-tx arrive, then the TMA bytes; the
  byte count is all the stage's whole boxes, 32 KiB or 33 KiB, as TMA counts a clipped box whole)
  and an `empty` mbarrier (count 2: one arrive from each consumer). The producer waits on `empty`
  with the inverted phase, so the first pass through the ring does not block.
- consumers 0 (the default partition) and 1 (a worker), 4 warps each, 232 registers (setmaxnreg):
  consumer c owns rows 64c..64c+63 of the tile, a 64-row slice of the stage's X buffer (a multiple
  of the 8-row swizzle pattern, so the slice is a valid wgmma operand), and reads the whole Y
  stage. Per K block: load its scales from global memory (Y_GROUP_N = 128: sx for 64 rows,
  clamped to M-1, and one sy), wait `full`, with Y_GROUP_N = 1 read its 64 row scales (its 64-slice
  of the stage's sx row) and the 128 column scales from the stage, issue the async wgmma 64x128x128
  into a zeroed product, wait for it, a partition-local barrier (all four warps are done reading
  the stage: the product's operands and the scales), arrive on `empty`, then promote
  acc += prod * sx * sy. Global scales load before the waits, so their latency hides behind them.
- the ring index and phase run on across tiles (one iteration counter in every partition; each
  partition walks the same tiles and K blocks, so none waits on a signal that never comes).
- epilogue per consumer: wait for its previous TMA store to finish reading its own 64x128 buffer,
  convert acc to the out dtype, store it to the buffer, fence, a partition-local barrier, TMA
  store (clipped at M, N). Shared memory: 4 x 32 KiB stages (33 KiB with Y_GROUP_N = 1's scales)
  + 2 x 16 KiB (bf16/fp16) or 2 x 32 KiB (fp32) out buffers = 160 or 192 KiB (164 or 196 KiB),
  under the 227 KiB, so every out dtype keeps 4 stages.

Why dB's scales come by TMA (Y_GROUP_N = 1). Gathered from the row-major (N, KB) scales, as the
Triton kernel does, each thread of a consumer loads its ~32 column scales sy[n, kb] every K block,
consecutive columns KB * 4 bytes apart: one 32-byte sector a column, 128 a K block and consumer,
besides its row scales, all on the loop's critical path. That path ran at 0.52-0.60 of cuBLAS
(H200), against 0.86-1.04 for the forward. In the kb-major copies a K block's 128 scales are 512
contiguous bytes: one TMA box into the ring with the operands, on the same `full` barrier, then
read from shared memory (a broadcast: every row of lanes reads the same 128 floats). The copies
cost two small transposes on the host side (M x KB and N x KB floats: 1 MiB each for a 4096-row
operand and K = 8192 tokens, against a 4096 x 4096 x 8192 product of 275 GFLOP), about two
launches' time.

Resources (benchmarks/dev/sass_dev.py --kernel gluon_fp8 [--const Y_GROUP_N=1], triton 3.6.0,
its ptxas for sm_90a, 2026-11-30): .maxnreg 168 at launch (12 warps), which Triton's lowering
trades by setmaxnreg into 232 for each consumer warpgroup and 40 for the producer's; 0 bytes
spilled for both scale layouts and every out dtype; 164,072 B shared for bf16/fp16 out, 196,840 B
for fp32 (Y_GROUP_N = 1: 168,200 B and 200,968 B, the 4 x 1 KiB of scale rows added). Each
consumer's loop reads ``MMAx4 | WAIT 0x0 | Fx64`` (Y_GROUP_N = 128: one FFMA an accumulator
element, sx * sy computed ahead, the scales' loads issued before the `full` wait) or
``MMAx4 | WAIT 0x0 | Fx128`` (Y_GROUP_N = 1: FMUL and FFMA; after the `full` wait, 2 ld.shared.b32
of row scales and 16 ld.shared.v2 of column scales a thread, then the wgmma). In the PTX of
Y_GROUP_N = 1 the producer's expect-tx is 33,792 bytes, followed by four TMA loads a stage.
Compiled with the Y_GROUP_N = 1 path added, Y_GROUP_N = 128's SASS is byte for byte what it was.
The global scale addresses are formed in the loop from int32 offsets (`sx_ptr + (sx_offs + kb)`):
in the per-column gather that the TMA path replaced, `sy_ptr + kb + sy_offs` made LLVM hoist 32
64-bit pointers a thread out of the loop and ptxas spill 28 bytes. Triton's shared-memory barrier
analysis adds a partition-local bar.sync before each `full` wait (consecutive waits on one barrier
array with a dynamic index); the four warps of a consumer are in step there anyway.

Measured (H200, `benchmarks/dev/fp8_dev.py`, do_bench, cuBLAS block scaling through F.scaled_mm in
the same process, vendor ms / ours ms on the Llama-3.1-8B products, 2026-11-30): forward 0.86-1.04
and dA 0.87-0.93 (the Triton kernel: 0.72-0.86 and 0.68-0.75), about 1000 TFLOP/s; dB, with
per-column scales gathered from global memory (Fx128 promotions), 0.52-0.60 against the Triton
kernel's 0.65-0.67, so round 3 sent only the products with 128x128 weight blocks here. Campaign
fp8-blockwise-3, round 3 (that split): the blockwise step +10.2%. Round 4, dB with its scales by
TMA (the path above): dB 0.87-0.93 of cuBLAS (~800 TFLOP/s), the blockwise step +13.2% more
(2026-12-01).

Rejected:
- keeping one wgmma in flight within a consumer while promoting the previous product
  (warpgroup_mma_wait(1) with the promotion between): ptxas then serialises every wgmma of the
  kernel (warning C7514), so the overlap has to come from the second consumer, not from within one;
- the consumers taking turns at the tensor cores (ping-pong: two more mbarriers, each consumer
  issuing its product once the other has issued): 1-4% slower than consumers tied only by the ring
  (fp8-blockwise-3 round 2, every product through Gluon, rejected at -0.8%).

Gluon cannot run in Triton's interpreter, so `runs_on` is False there and on anything but sm_90.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernels._common import interpreting, tile_pid
from kernels._common import num_sms as device_sms

BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 128  # one scale block
STAGES = 4
GROUP_M = 8
CONSUMER_ROWS = BLOCK_M // 2
# Registers a thread: the producer needs a handful; the consumers take what is left of the 64K
# (168 a thread at launch for 12 warps: 40 * 128 + 232 * 256 <= 168 * 384).
LAUNCH_REGISTERS = 168
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232

_GL_DTYPES = {
    torch.float8_e4m3fn: gl.float8e4nv,
    torch.float8_e5m2: gl.float8e5,
    torch.bfloat16: gl.bfloat16,
    torch.float16: gl.float16,
    torch.float32: gl.float32,
}


@gluon.jit
def _producer(
    x_desc, y_desc, x_bufs, y_bufs, sx_desc, sy_desc, sx_bufs, sy_bufs, full_bars, empty_bars,
    Y_GROUP_N: gl.constexpr, GROUP_M: gl.constexpr,
):  # fmt: skip
    """TMA loads of every tile's K blocks into the ring, one stage per K block (with Y_GROUP_N = 1,
    the K block's 128 row scales and 128 column scales too)."""
    BLOCK_M: gl.constexpr = x_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = y_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = x_desc.block_type.shape[1]
    STAGES: gl.constexpr = x_bufs.type.shape[0]
    if Y_GROUP_N == 1:
        STAGE_BYTES: gl.constexpr = (
            x_desc.block_type.nbytes + y_desc.block_type.nbytes + sx_desc.block_type.nbytes
            + sy_desc.block_type.nbytes
        )  # fmt: skip
    else:
        STAGE_BYTES: gl.constexpr = x_desc.block_type.nbytes + y_desc.block_type.nbytes
    num_pid_m = gl.cdiv(x_desc.shape[0], BLOCK_M)
    num_pid_n = gl.cdiv(y_desc.shape[0], BLOCK_N)
    k_tiles = gl.cdiv(x_desc.shape[1], BLOCK_K)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        for kb in range(k_tiles):
            stage = step % STAGES
            # A fresh mbarrier counts as having completed the phase before its first, so waiting
            # on the inverted phase lets the first pass through the ring go without the consumers.
            mbarrier.wait(empty_bars.index(stage), ((step // STAGES) & 1) ^ 1)
            full = full_bars.index(stage)
            mbarrier.expect(full, STAGE_BYTES)
            tma.async_copy_global_to_shared(
                x_desc, [pid_m * BLOCK_M, kb * BLOCK_K], full, x_bufs.index(stage)
            )
            tma.async_copy_global_to_shared(
                y_desc, [pid_n * BLOCK_N, kb * BLOCK_K], full, y_bufs.index(stage)
            )
            if Y_GROUP_N == 1:  # row kb of the kb-major scale copies: 128 contiguous floats each
                tma.async_copy_global_to_shared(sx_desc, [kb, pid_m * BLOCK_M], full, sx_bufs.index(stage))
                tma.async_copy_global_to_shared(sy_desc, [kb, pid_n * BLOCK_N], full, sy_bufs.index(stage))
            step += 1


@gluon.jit
def _consumer(
    x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx_ptr, sy_ptr, M, N, K, stride_sxm,
    stride_sym, sx_bufs, sy_bufs, CONSUMER: gl.constexpr, Y_GROUP_N: gl.constexpr,
    GROUP_M: gl.constexpr,
):  # fmt: skip
    """Rows CONSUMER * 64 .. + 63 of every tile: wgmma per K block, promotion, TMA store. The scales
    come from sx_ptr, sy_ptr (Y_GROUP_N a multiple of 128) or from the ring's sx_bufs, sy_bufs
    (Y_GROUP_N = 1: sx_ptr, sy_ptr are then the producer's descriptors, unused here)."""
    STAGES: gl.constexpr = x_bufs.type.shape[0]
    BLOCK_M: gl.constexpr = x_bufs.type.shape[1]
    BLOCK_K: gl.constexpr = x_bufs.type.shape[2]
    BLOCK_N: gl.constexpr = y_bufs.type.shape[1]
    ROWS: gl.constexpr = out_bufs.type.shape[1]
    # One warpgroup, the whole 128-wide N in each instruction (m16 n128 k32 for fp8).
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 32]
    )
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    out_buf = out_bufs.index(CONSUMER)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M + CONSUMER * ROWS
        off_n = pid_n * BLOCK_N
        if Y_GROUP_N != 1:
            # Rows past M read a real scale and multiply TMA's zero fill. An offset, not pointers.
            sx_offs = gl.minimum(off_m + gl.arange(0, ROWS, layout=row_layout), M - 1) * stride_sxm
            sy_offs = (off_n // Y_GROUP_N) * stride_sym  # one scale: the tile is in one block
        acc = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=mma_layout)
        for kb in range(k_tiles):
            if Y_GROUP_N != 1:
                sx = gl.load(sx_ptr + (sx_offs + kb))
                sy = gl.load(sy_ptr + (sy_offs + kb))
            stage = step % STAGES
            mbarrier.wait(full_bars.index(stage), (step // STAGES) & 1)
            if Y_GROUP_N == 1:  # in the stage, valid once `full` completes; zeros past M / N
                sx = sx_bufs.index(stage).reshape([BLOCK_M]).slice(CONSUMER * ROWS, ROWS).load(row_layout)
                sy = sy_bufs.index(stage).reshape([BLOCK_N]).load(col_layout)
            x_buf = x_bufs.index(stage).slice(CONSUMER * ROWS, ROWS)
            y_buf = y_bufs.index(stage).permute((1, 0))
            prod = warpgroup_mma(
                x_buf, y_buf, gl.zeros([ROWS, BLOCK_N], gl.float32, layout=mma_layout), use_acc=False,
                is_async=True,
            )  # fmt: skip
            prod, x_buf, y_buf = warpgroup_mma_wait(num_outstanding=0, deps=(prod, x_buf, y_buf))
            # The arrive comes from one thread: every warp of this consumer must be done reading the
            # stage (the product's operands and, with Y_GROUP_N = 1, the scales).
            gl.thread_barrier()
            mbarrier.arrive(empty_bars.index(stage), count=1)
            if Y_GROUP_N == 1:
                acc += prod * gl.expand_dims(sx, 1) * gl.expand_dims(sy, 0)
            else:
                acc += prod * gl.expand_dims(sx * sy, 1)
            step += 1
        # The previous tile's store must have read the buffer before it is overwritten, and every
        # warp must see that (the wait is the issuing thread's).
        tma.store_wait(pendings=0)
        gl.thread_barrier()
        out_buf.store(acc.to(out_desc.dtype))
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(out_desc, [off_m, off_n], out_buf)
    tma.store_wait(pendings=0)


@gluon.jit
def _gemm_fp8_blockwise_ws_kernel(
    x_desc, y_desc, out_desc, sx, sy, stride_sxm, stride_sym,
    Y_GROUP_N: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
    PRODUCER_REGISTERS: gl.constexpr, CONSUMER_REGISTERS: gl.constexpr,
):  # fmt: skip
    """C = (X * sx) @ (Y * sy).T with blockwise scales: a producer and two 64-row consumers. sx, sy:
    the scales' pointers (Y_GROUP_N a multiple of 128), or TMA descriptors of their kb-major copies
    (Y_GROUP_N = 1; the strides are then unused)."""
    gl.static_assert(x_desc.block_type.shape[1] == 128, "BLOCK_K must be the 128-deep scale block")
    gl.static_assert(Y_GROUP_N == 1 or Y_GROUP_N % 128 == 0, "y scales per column or per 128 columns")
    M = x_desc.shape[0]
    N = y_desc.shape[0]
    K = x_desc.shape[1]
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES] + x_desc.block_type.shape, x_desc.layout)
    y_bufs = gl.allocate_shared_memory(y_desc.dtype, [STAGES] + y_desc.block_type.shape, y_desc.layout)
    out_bufs = gl.allocate_shared_memory(out_desc.dtype, [2] + out_desc.block_type.shape, out_desc.layout)
    if Y_GROUP_N == 1:  # a [1, 128] fp32 row of scales per stage and operand
        sx_bufs = gl.allocate_shared_memory(sx.dtype, [STAGES] + sx.block_type.shape, sx.layout)
        sy_bufs = gl.allocate_shared_memory(sy.dtype, [STAGES] + sy.block_type.shape, sy.layout)
    else:
        sx_bufs = gl.constexpr(0)
        sy_bufs = gl.constexpr(0)
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=2)  # one arrive from each consumer
    fence_async_shared()

    # fmt: off
    gl.warp_specialize(
        [
            (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                         stride_sxm, stride_sym, sx_bufs, sy_bufs, 0, Y_GROUP_N, GROUP_M)),
            (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                         stride_sxm, stride_sym, sx_bufs, sy_bufs, 1, Y_GROUP_N, GROUP_M)),
            (_producer, (x_desc, y_desc, x_bufs, y_bufs, sx, sy, sx_bufs, sy_bufs, full_bars, empty_bars,
                         Y_GROUP_N, GROUP_M)),
        ],
        [4, 1],  # warps of the workers: consumer 1, producer (consumer 0 is the default partition)
        [CONSUMER_REGISTERS, PRODUCER_REGISTERS],
    )
    # fmt: on
    # Every partition has returned: no TMA load or arrive is pending on the barriers.
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(full_bars.index(i))
        mbarrier.invalidate(empty_bars.index(i))


def runs_on(device: torch.device) -> bool:
    """Whether this kernel can run on `device`: a CUDA device of compute capability 9.0 (wgmma,
    setmaxnreg and this register split are Hopper's), outside Triton's interpreter."""
    if device.type != "cuda" or interpreting():
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.get_device_capability(index) == (9, 0)


def takes(device: torch.device, y_group_n: int, m: int, n: int) -> bool:
    """Whether this kernel runs an M x N product on `device` (runs_on) with these y scales: a
    weight's 128x128 blocks (Y_GROUP_N a multiple of BLOCK_N), or dB's 1x128 blocks where M and N
    are multiples of 4 (the rows of the kb-major scale copies are then 16-byte pitched, as TMA
    needs). The operands' own TMA addressing is the caller's check."""
    scales_fit = y_group_n % BLOCK_N == 0 or (y_group_n == 1 and m % 4 == 0 and n % 4 == 0)
    return scales_fit and runs_on(device)


def _descriptor(tensor: torch.Tensor, block: list[int]) -> TensorDescriptor:
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[tensor.dtype])
    return TensorDescriptor.from_tensor(tensor, block, layout)


def _kb_major(scales: torch.Tensor) -> torch.Tensor:
    """scales (rows x KB) copied to KB x rows with a row pitch of `rows` floats. (`.t().contiguous()`
    keeps a one-row copy's stride of 1, which a TensorDescriptor refuses: K <= 128, one K block.)"""
    return torch.empty(scales.shape[::-1], dtype=scales.dtype, device=scales.device).copy_(scales.t())


def matmul_blockwise(
    x: torch.Tensor,
    sx: torch.Tensor,
    y: torch.Tensor,
    sy: torch.Tensor,
    y_group_n: int,
    out: torch.Tensor,
    num_sms: int | None = None,
) -> torch.Tensor:
    """out (M x N) = (x * sx) @ (y * sy).T for blockwise scales; x, y and out TMA-addressable (the
    caller checks: `kernels._common.tma_addressable`), scales as in the module docstring and as
    `takes` requires (TensorDescriptor asserts the copies' row pitches). num_sms (the persistent
    grid's width) defaults to the device's multiprocessor count."""
    m, n = x.shape[0], y.shape[0]
    tiles = triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N)
    grid = (min(num_sms or device_sms(x.device, 1), tiles),)
    # kb-major copies, so that a K block's 128 row (column) scales are one box; a [1, 128] box gets
    # an unswizzled layout, which the kernel's scale buffers take from the descriptors.
    if y_group_n == 1:
        sx_arg: torch.Tensor | TensorDescriptor = _descriptor(_kb_major(sx), [1, BLOCK_M])
        sy_arg: torch.Tensor | TensorDescriptor = _descriptor(_kb_major(sy), [1, BLOCK_N])
    else:
        sx_arg, sy_arg = sx, sy
    _gemm_fp8_blockwise_ws_kernel[grid](
        _descriptor(x, [BLOCK_M, BLOCK_K]), _descriptor(y, [BLOCK_N, BLOCK_K]),
        _descriptor(out, [CONSUMER_ROWS, BLOCK_N]), sx_arg, sy_arg, sx.stride(0), sy.stride(0),
        Y_GROUP_N=y_group_n, STAGES=STAGES, GROUP_M=GROUP_M, PRODUCER_REGISTERS=PRODUCER_REGISTERS,
        CONSUMER_REGISTERS=CONSUMER_REGISTERS, num_warps=4, maxnreg=LAUNCH_REGISTERS,
    )  # fmt: skip
    return out
