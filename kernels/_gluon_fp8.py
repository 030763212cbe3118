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
consumer's rows wrong for blockwise, so this kernel does it by hand: consumers tied only by
mbarriers, so that one promotes while another's product runs.

Grid. Persistent: min(#SMs, tiles) programs, program p computing the tiles p, p + P, ... in
GROUP_M-grouped order (`kernels._common.tile_pid`, as the Triton kernels). BLOCK_K = 128 = one
scale block = 128 fp8 bytes = one 128-byte swizzle atom. The tile (`tile`): BLOCK_M = 64 rows a
consumer warpgroup, BLOCK_N one or two 128-wide halves:
- 192 x 128 (three consumers) for the products with a weight's 128x128 blocks (forward, dA): while
  one consumer promotes, two have products queued at the tensor cores, and each K block's Y tile
  serves three consumers instead of two;
- 128 x 256 (two consumers, each issuing the two halves' wgmma in turn and promoting each into its
  own 64 x 128 accumulator) for dB's per-column scales: half the X traffic of 128 x 128, and the
  column scales of a K block in one 1 KiB box;
- 128 x 128 for fp32 out (gradients of fp32 inputs), whose out buffers leave no room for the
  others' rings.

Partitions (`gl.warp_specialize`): a producer and 2 or 3 consumers, 4 warps each (the producer is
one warp, its warpgroup padded).
- producer (24 registers): fills a ring of STAGES shared-memory stages, each K block's X rows as one
  64 x 128 box a consumer and its Y tile (BLOCK_N x 128), by TMA from host descriptors; with
  Y_GROUP_N = 1 also the K block's row and column scales, sx_t[kb, rows of each consumer] and
  sy_t[kb, off_n : off_n + BLOCK_N] ([1, 64] and [1, BLOCK_N] fp32 boxes, unswizzled; zero fill past
  M, N meets TMA's zero-filled operand rows, and those rows and columns are clipped at the store).
  Each stage has a `full` mbarrier (count 1: the producer's expect-tx arrive, then the TMA bytes;
  the byte count is all the stage's whole boxes, as TMA counts a clipped box whole) and an `empty`
  mbarrier (count: one arrive from each consumer). The producer waits on `empty` with the inverted
  phase, so the first pass through the ring does not block.
- consumer c (the default partition is consumer 0) owns rows 64c..64c+63 of the tile: its own X box
  of the stage (a valid wgmma operand) and the whole Y tile, one 128-wide half at a time. Per K
  block and half: its scales (Y_GROUP_N = 128: sx for 64 rows from global memory, clamped to M-1,
  and the half's sy, loaded before the `full` wait so that their latency hides behind it;
  Y_GROUP_N = 1: its 64 row scales and the half's 128 column scales from the stage), the async
  wgmma 64x128x128 into a zeroed product, a wait for it, the promotion acc_h += prod * sx * sy. After
  the last read of the stage a partition-local barrier (all four warps are done reading it) and one
  arrive on `empty`.
- the ring index and phase run on across tiles (one iteration counter in every partition; each
  partition walks the same tiles and K blocks, so none waits on a signal that never comes).
- epilogue per consumer: wait for its previous TMA stores to finish reading its 64 x 128 out
  buffers (one a half), convert the accumulators to the out dtype, store them there, fence, a
  partition-local barrier, TMA stores (clipped at M, N).

Shared memory (bf16 / fp16 out): 192 x 128, 4 stages of 40 KiB + 3 x 16 KiB out = 208 KiB (213 KiB
with Y_GROUP_N = 1's scale boxes); 128 x 256, 3 stages of 48 KiB + 4 x 16 KiB = 208 KiB (+ 4.5 KiB of
scales); 128 x 128 with fp32 out, 4 stages of 32 KiB + 2 x 32 KiB = 192 KiB; all under the 227 KiB a
block may take.

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
its ptxas for sm_90a; `REGISTERS`): at launch 128 registers a thread for 16 warps (three
consumers) or 168 for 12 (two), which Triton's lowering trades by setmaxnreg into 160 (three) or 240
(two) a consumer thread and 24 for the producer's; 0 bytes spilled for every shipped tile and out
dtype. Each consumer's loop reads ``MMAx4 | WAIT 0x0 | Fx64`` (192 x 128: one FFMA an accumulator
element, sx * sy computed ahead) or ``MMAx4 | WAIT 0x0 | Fx94 | MMA | Fx34 | MMAx3 | WAIT 0x0 |
Fx128`` (128 x 256, Y_GROUP_N = 1: FMUL and FFMA an element; ptxas starts the second half's wgmma
under the end of the first half's promotion). A second half needs two accumulators and a product,
192 registers: LLVM sank the first promotion below the second wgmma (both products live: 644 bytes
spilled at 240 registers) until the first accumulator went through an opaque copy (`_pinned`), and
at 232 registers a consumer the tile spilled 68 bytes. The same tile for the weight-block products
spills at any split (420 bytes), and three consumers with per-column scales (32 column scales a
thread beside 128 registers of accumulator and product, at 160) spill 216. The global scale
addresses are formed in the loop from int32 offsets (`sx_ptr + (sx_offs + kb)`): a per-column
gather with `sy_ptr + kb + sy_offs` made LLVM hoist 32 64-bit pointers a thread out of the loop and
ptxas spill 28 bytes. Triton's shared-memory barrier analysis adds a partition-local bar.sync
before each `full` wait (consecutive waits on one barrier array with a dynamic index); the four
warps of a consumer are in step there anyway.

Measured against cuBLAS's block-scaled product (`F.scaled_mm`) on the Llama-3.1-8B products, tile
by tile: docs/benchmarks/2026-12-01-gluon-fp8-kernel-notes.md; the current figures: BENCHMARKS.md.

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

from kernels._common import capability, cdiv, interpreting, launch, tile_pid
from kernels._common import num_sms as device_sms

CONSUMER_ROWS = 64  # a consumer warpgroup's rows of the tile: BLOCK_M = 64 * consumers
HALF_N = 128  # one wgmma's N: BLOCK_N is one or two of them
# The tile, (consumers, BLOCK_N), for 16-bit out: the products with a weight's 128x128 blocks
# (forward, dA) and those with per-column y scales (dB). fp32 out takes FP32_TILE, whose out buffers
# leave room for that tile's ring only.
TILE_WEIGHT_BLOCKS = (3, 128)
TILE_COLUMN_SCALES = (2, 256)
FP32_TILE = (2, 128)
BLOCK_K = 128  # one scale block
# Ring stages by tile: what fits beside the out buffers in 227 KiB.
STAGES = {(2, 128): 4, (2, 256): 3, (3, 128): 4}
GROUP_M = 8
# Registers a thread by consumers: at launch, a consumer's and the producer's. The producer needs a
# handful, the consumers take what is left of the 64K (12 warps: 24 * 128 + 240 * 256 <= 168 * 384;
# 16 warps: 24 * 128 + 160 * 384 <= 128 * 512).
REGISTERS = {2: (168, 240, 24), 3: (128, 160, 24)}

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
    Y_GROUP_N: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
):  # fmt: skip
    """TMA loads of every tile's K blocks into the ring, one stage per K block: a box of X rows for
    each consumer and the Y tile (with Y_GROUP_N = 1, the K block's row and column scales too)."""
    ROWS: gl.constexpr = x_desc.block_type.shape[0]  # one consumer's rows: X comes in a box each
    BLOCK_M: gl.constexpr = ROWS * CONSUMERS
    BLOCK_N: gl.constexpr = y_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = x_desc.block_type.shape[1]
    if Y_GROUP_N == 1:
        STAGE_BYTES: gl.constexpr = (
            CONSUMERS * (x_desc.block_type.nbytes + sx_desc.block_type.nbytes) + y_desc.block_type.nbytes
            + sy_desc.block_type.nbytes
        )  # fmt: skip
    else:
        STAGE_BYTES: gl.constexpr = CONSUMERS * x_desc.block_type.nbytes + y_desc.block_type.nbytes
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
            for c in gl.static_range(CONSUMERS):
                tma.async_copy_global_to_shared(
                    x_desc,
                    [pid_m * BLOCK_M + c * ROWS, kb * BLOCK_K],
                    full,
                    x_bufs.index(stage * CONSUMERS + c),
                )
                if Y_GROUP_N == 1:  # row kb of the kb-major scale copies: contiguous floats
                    tma.async_copy_global_to_shared(
                        sx_desc, [kb, pid_m * BLOCK_M + c * ROWS], full, sx_bufs.index(stage * CONSUMERS + c)
                    )
            tma.async_copy_global_to_shared(
                y_desc, [pid_n * BLOCK_N, kb * BLOCK_K], full, y_bufs.index(stage)
            )
            if Y_GROUP_N == 1:
                tma.async_copy_global_to_shared(sy_desc, [kb, pid_n * BLOCK_N], full, sy_bufs.index(stage))
            step += 1


@gluon.jit
def _pinned(x):
    """x, through an asm statement with side effects: what computes x stays before what follows."""
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.float32, is_pure=False, pack=1)


@gluon.jit
def _consumer(
    x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx_ptr, sy_ptr, M, N, K, stride_sxm,
    stride_sym, sx_bufs, sy_bufs, CONSUMER: gl.constexpr, Y_GROUP_N: gl.constexpr,
    GROUP_M: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
):  # fmt: skip
    """Rows CONSUMER * 64 .. + 63 of every tile: wgmma per K block, promotion, TMA store. The scales
    come from sx_ptr, sy_ptr (Y_GROUP_N a multiple of 128) or from the ring's sx_bufs, sy_bufs
    (Y_GROUP_N = 1: sx_ptr, sy_ptr are then the producer's descriptors, unused here)."""
    ROWS: gl.constexpr = x_bufs.type.shape[1]
    BLOCK_M: gl.constexpr = ROWS * CONSUMERS
    BLOCK_K: gl.constexpr = x_bufs.type.shape[2]
    BLOCK_N: gl.constexpr = y_bufs.type.shape[1]
    HALF: gl.constexpr = out_bufs.type.shape[2]  # one wgmma's N: 128
    HALVES: gl.constexpr = BLOCK_N // HALF
    gl.static_assert(HALVES == 1 or HALVES == 2, "BLOCK_N is one or two 128-wide halves")
    # One warpgroup, a 128-wide half of N in each instruction (m16 n128 k32 for fp8).
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HALF, 32]
    )
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M + CONSUMER * ROWS
        off_n = pid_n * BLOCK_N
        if Y_GROUP_N != 1:
            # Rows past M read a real scale and multiply TMA's zero fill. Offsets, not pointers.
            sx_offs = gl.minimum(off_m + gl.arange(0, ROWS, layout=row_layout), M - 1) * stride_sxm
            # One scale a half (a half is in one block); a second half past N reads the last.
            sy_offs0 = (off_n // Y_GROUP_N) * stride_sym
            if HALVES == 2:
                sy_offs1 = (gl.minimum(off_n + HALF, N - 1) // Y_GROUP_N) * stride_sym
        acc0 = gl.zeros([ROWS, HALF], gl.float32, layout=mma_layout)
        if HALVES == 2:
            acc1 = gl.zeros([ROWS, HALF], gl.float32, layout=mma_layout)
        for kb in range(k_tiles):
            if Y_GROUP_N != 1:
                sx = gl.load(sx_ptr + (sx_offs + kb))
                row_scale0 = sx * gl.load(sy_ptr + (sy_offs0 + kb))
                if HALVES == 2:
                    row_scale1 = sx * gl.load(sy_ptr + (sy_offs1 + kb))
            stage = step % STAGES
            mbarrier.wait(full_bars.index(stage), (step // STAGES) & 1)
            if Y_GROUP_N == 1:  # in the stage, valid once `full` completes; zeros past M / N
                sx = sx_bufs.index(stage * CONSUMERS + CONSUMER).reshape([ROWS]).load(row_layout)
                sy = sy_bufs.index(stage).reshape([BLOCK_N]).slice(0, HALF).load(col_layout)
            x_buf = x_bufs.index(stage * CONSUMERS + CONSUMER)
            y_buf = y_bufs.index(stage).slice(0, HALF).permute((1, 0))
            prod = warpgroup_mma(
                x_buf, y_buf, gl.zeros([ROWS, HALF], gl.float32, layout=mma_layout), use_acc=False,
                is_async=True,
            )  # fmt: skip
            prod, x_buf, y_buf = warpgroup_mma_wait(num_outstanding=0, deps=(prod, x_buf, y_buf))
            if HALVES == 1:
                # The arrive comes from one thread: every warp of this consumer must be done reading
                # the stage (the product's operands and, with Y_GROUP_N = 1, the scales).
                gl.thread_barrier()
                mbarrier.arrive(empty_bars.index(stage), count=1)
            if Y_GROUP_N == 1:
                acc0 += prod * gl.expand_dims(sx, 1) * gl.expand_dims(sy, 0)
            else:
                acc0 += prod * gl.expand_dims(row_scale0, 1)
            if HALVES == 2:  # the second half of the stage's Y tile, promoted into acc1
                # LLVM would sink acc0's promotion below this wgmma: two products live at once, more
                # than the 240 registers, spilled (644 bytes). An opaque copy of acc0 keeps it above.
                acc0 = _pinned(acc0)
                y_buf = y_bufs.index(stage).slice(HALF, HALF).permute((1, 0))
                prod = warpgroup_mma(
                    x_buf, y_buf, gl.zeros([ROWS, HALF], gl.float32, layout=mma_layout), use_acc=False,
                    is_async=True,
                )  # fmt: skip
                prod, x_buf, y_buf = warpgroup_mma_wait(num_outstanding=0, deps=(prod, x_buf, y_buf))
                if Y_GROUP_N == 1:
                    sy = sy_bufs.index(stage).reshape([BLOCK_N]).slice(HALF, HALF).load(col_layout)
                gl.thread_barrier()  # as above: the stage is read, then one arrive
                mbarrier.arrive(empty_bars.index(stage), count=1)
                if Y_GROUP_N == 1:
                    acc1 += prod * gl.expand_dims(sx, 1) * gl.expand_dims(sy, 0)
                else:
                    acc1 += prod * gl.expand_dims(row_scale1, 1)
            step += 1
        # The previous tile's stores must have read the buffers before they are overwritten, and
        # every warp must see that (the wait is the issuing thread's).
        tma.store_wait(pendings=0)
        gl.thread_barrier()
        out_bufs.index(CONSUMER * HALVES).store(acc0.to(out_desc.dtype))
        if HALVES == 2:
            out_bufs.index(CONSUMER * HALVES + 1).store(acc1.to(out_desc.dtype))
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(out_desc, [off_m, off_n], out_bufs.index(CONSUMER * HALVES))
        if HALVES == 2:
            tma.async_copy_shared_to_global(
                out_desc, [off_m, off_n + HALF], out_bufs.index(CONSUMER * HALVES + 1)
            )
    tma.store_wait(pendings=0)


@gluon.jit
def _gemm_fp8_blockwise_ws_kernel(
    x_desc, y_desc, out_desc, sx, sy, stride_sxm, stride_sym,
    Y_GROUP_N: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
    PRODUCER_REGISTERS: gl.constexpr, CONSUMER_REGISTERS: gl.constexpr, CONSUMERS: gl.constexpr,
):  # fmt: skip
    """C = (X * sx) @ (Y * sy).T with blockwise scales: a producer and CONSUMERS 64-row consumers. sx, sy:
    the scales' pointers (Y_GROUP_N a multiple of 128), or TMA descriptors of their kb-major copies
    (Y_GROUP_N = 1; the strides are then unused)."""
    gl.static_assert(x_desc.block_type.shape[1] == 128, "BLOCK_K must be the 128-deep scale block")
    gl.static_assert(Y_GROUP_N == 1 or Y_GROUP_N % 128 == 0, "y scales per column or per 128 columns")
    M = x_desc.shape[0]
    N = y_desc.shape[0]
    K = x_desc.shape[1]
    x_bufs = gl.allocate_shared_memory(
        x_desc.dtype, [STAGES * CONSUMERS] + x_desc.block_type.shape, x_desc.layout
    )
    y_bufs = gl.allocate_shared_memory(y_desc.dtype, [STAGES] + y_desc.block_type.shape, y_desc.layout)
    # Per consumer, one 64 x 128 out buffer for each 128-wide half of the tile.
    HALVES: gl.constexpr = y_desc.block_type.shape[0] // out_desc.block_type.shape[1]
    out_bufs = gl.allocate_shared_memory(
        out_desc.dtype, [CONSUMERS * HALVES] + out_desc.block_type.shape, out_desc.layout
    )
    if Y_GROUP_N == 1:  # fp32 rows of scales: [1, 64] a consumer and [1, BLOCK_N] a stage
        sx_bufs = gl.allocate_shared_memory(sx.dtype, [STAGES * CONSUMERS] + sx.block_type.shape, sx.layout)
        sy_bufs = gl.allocate_shared_memory(sy.dtype, [STAGES] + sy.block_type.shape, sy.layout)
    else:
        sx_bufs = gl.constexpr(0)
        sy_bufs = gl.constexpr(0)
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=CONSUMERS)  # one arrive from each consumer
    fence_async_shared()

    if CONSUMERS == 3:
        # fmt: off
        gl.warp_specialize(
            [
                (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                             stride_sxm, stride_sym, sx_bufs, sy_bufs, 0, Y_GROUP_N, GROUP_M,
                             STAGES, CONSUMERS)),
                (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                             stride_sxm, stride_sym, sx_bufs, sy_bufs, 1, Y_GROUP_N, GROUP_M,
                             STAGES, CONSUMERS)),
                (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                             stride_sxm, stride_sym, sx_bufs, sy_bufs, 2, Y_GROUP_N, GROUP_M,
                             STAGES, CONSUMERS)),
                (_producer, (x_desc, y_desc, x_bufs, y_bufs, sx, sy, sx_bufs, sy_bufs, full_bars, empty_bars,
                             Y_GROUP_N, GROUP_M, STAGES, CONSUMERS)),
            ],
            [4, 4, 1],  # warps of the workers: consumers 1 and 2, producer (consumer 0: the default)
            [CONSUMER_REGISTERS, CONSUMER_REGISTERS, PRODUCER_REGISTERS],
        )
    else:
        # fmt: off
        gl.warp_specialize(
            [
                (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                             stride_sxm, stride_sym, sx_bufs, sy_bufs, 0, Y_GROUP_N, GROUP_M,
                             STAGES, CONSUMERS)),
                (_consumer, (x_bufs, y_bufs, out_bufs, full_bars, empty_bars, out_desc, sx, sy, M, N, K,
                             stride_sxm, stride_sym, sx_bufs, sy_bufs, 1, Y_GROUP_N, GROUP_M,
                             STAGES, CONSUMERS)),
                (_producer, (x_desc, y_desc, x_bufs, y_bufs, sx, sy, sx_bufs, sy_bufs, full_bars, empty_bars,
                             Y_GROUP_N, GROUP_M, STAGES, CONSUMERS)),
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
    return device.type == "cuda" and not interpreting() and capability(device) == (9, 0)


def takes(device: torch.device, y_group_n: int, m: int, n: int) -> bool:
    """Whether this kernel runs an M x N product on `device` (runs_on) with these y scales: a
    weight's 128x128 blocks (Y_GROUP_N a multiple of HALF_N), or dB's 1x128 blocks where M and N
    are multiples of 4 (the rows of the kb-major scale copies are then 16-byte pitched, as TMA
    needs). The operands' own TMA addressing is the caller's check."""
    scales_fit = y_group_n % HALF_N == 0 or (y_group_n == 1 and m % 4 == 0 and n % 4 == 0)
    return scales_fit and runs_on(device)


def tile(y_group_n: int, out_dtype: torch.dtype) -> tuple[int, int]:
    """(consumers, BLOCK_N) of the products with these y scales into out_dtype."""
    if out_dtype == torch.float32:
        return FP32_TILE
    return TILE_COLUMN_SCALES if y_group_n == 1 else TILE_WEIGHT_BLOCKS


# Shared-memory layouts of the descriptors' boxes, by (box, dtype): computed once, not every call.
_LAYOUTS: dict[tuple[tuple[int, ...], torch.dtype], gl.NVMMASharedLayout] = {}


def _descriptor(tensor: torch.Tensor, block: list[int]) -> TensorDescriptor:
    key = (tuple(block), tensor.dtype)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _LAYOUTS[key] = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[tensor.dtype])
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
    consumers, block_n = tile(y_group_n, out.dtype)
    tiles = cdiv(m, CONSUMER_ROWS * consumers) * cdiv(n, block_n)
    launch_registers, consumer_registers, producer_registers = REGISTERS[consumers]
    grid = (min(num_sms or device_sms(x.device, 1), tiles),)
    # kb-major copies, so that a K block's 128 row (column) scales are one box; a [1, 128] box gets
    # an unswizzled layout, which the kernel's scale buffers take from the descriptors.
    if y_group_n == 1:
        sx_arg: torch.Tensor | TensorDescriptor = _descriptor(_kb_major(sx), [1, CONSUMER_ROWS])
        sy_arg: torch.Tensor | TensorDescriptor = _descriptor(_kb_major(sy), [1, block_n])
    else:
        sx_arg, sy_arg = sx, sy
    launch(
        _gemm_fp8_blockwise_ws_kernel, grid,
        _descriptor(x, [CONSUMER_ROWS, BLOCK_K]), _descriptor(y, [block_n, BLOCK_K]),
        _descriptor(out, [CONSUMER_ROWS, HALF_N]), sx_arg, sy_arg, sx.stride(0), sy.stride(0),
        Y_GROUP_N=y_group_n, STAGES=STAGES[consumers, block_n], GROUP_M=GROUP_M,
        PRODUCER_REGISTERS=producer_registers, CONSUMER_REGISTERS=consumer_registers, CONSUMERS=consumers,
        num_warps=4, maxnreg=launch_registers,
    )  # fmt: skip
    return out
