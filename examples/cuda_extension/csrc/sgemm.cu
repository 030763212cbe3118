// C = A @ B for row-major float32 A (M x K), B (K x N), C (M x N) on the GPU: the campaign's kernel.
// Grid: one 16 x 16 thread block per 16 x 16 tile of C; one thread per element of C.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kTile = 16;

__global__ void sgemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                             std::int64_t m, std::int64_t n, std::int64_t k) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  if (row >= m || col >= n) return;
  // Every operand straight from global memory: A's row is re-read by each of the N / 16 blocks.
  float acc = 0.0f;
  for (std::int64_t p = 0; p < k; ++p) acc += a[row * k + p] * b[p * n + col];
  c[row * n + col] = acc;
}

}  // namespace

cudaError_t sgemm_launch(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                         cudaStream_t stream) {
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  sgemm_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  return cudaGetLastError();
}
