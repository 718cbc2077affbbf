// gemm.cu: the fallback matrix product (cuBLAS is used when present): 64 x 64 tiles of C per
// block of 256 threads, 4 x 4 results per thread, K in steps of 16 through shared memory.
// Operands are read through arbitrary element strides; the epilogue adds the biases and applies
// the fused activation.
#include "common.cuh"

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16

template <typename T>
__device__ inline void gemm(const rt_cuda_gemm_params &p) {
    __shared__ T as[TILE_K][TILE_M + 1];
    __shared__ T bs[TILE_K][TILE_N + 1];
    int64_t batch = (int64_t)blockIdx.z + p.batch_offset, rest = batch, ao = 0, bo = 0;
    for (int d = p.batch_rank - 1; d >= 0; d--) {
        int64_t index = rest % p.batch_sizes[d];
        rest /= p.batch_sizes[d];
        ao += index * p.a_batch_strides[d];
        bo += index * p.b_batch_strides[d];
    }
    const T *a = (const T *)p.a + ao, *b = (const T *)p.b + bo;
    T *c = (T *)p.c + batch * p.c_batch_stride;
    const T *row_bias = (const T *)p.row_bias, *col_bias = (const T *)p.col_bias;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t col0 = (int64_t)blockIdx.x * TILE_N;
    // Loads walk the operand along its unit stride when it has one, so a warp reads
    // consecutive addresses.
    const bool a_k_fast = p.a_col_stride == 1, b_n_fast = p.b_col_stride == 1;
    for (int64_t row0 = (int64_t)blockIdx.y * TILE_M; row0 < p.m;
         row0 += (int64_t)gridDim.y * TILE_M) {
        T acc[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc[i][j] = (T)0;
        for (int64_t k0 = 0; k0 < p.k; k0 += TILE_K) {
            for (int e = threadIdx.x; e < TILE_M * TILE_K; e += RT_BLOCK) {
                int r = a_k_fast ? e / TILE_K : e % TILE_M;
                int kk = a_k_fast ? e % TILE_K : e / TILE_M;
                int64_t gr = row0 + r, gk = k0 + kk;
                as[kk][r] = gr < p.m && gk < p.k ? a[gr * p.a_row_stride + gk * p.a_col_stride]
                                                 : (T)0;
            }
            for (int e = threadIdx.x; e < TILE_K * TILE_N; e += RT_BLOCK) {
                int cc = b_n_fast ? e % TILE_N : e / TILE_K;
                int kk = b_n_fast ? e / TILE_N : e % TILE_K;
                int64_t gc = col0 + cc, gk = k0 + kk;
                bs[kk][cc] = gc < p.n && gk < p.k ? b[gk * p.b_row_stride + gc * p.b_col_stride]
                                                  : (T)0;
            }
            __syncthreads();
            for (int kk = 0; kk < TILE_K; kk++) {
                T av[4], bv[4];
                for (int i = 0; i < 4; i++)
                    av[i] = as[kk][ty + 16 * i];
                for (int j = 0; j < 4; j++)
                    bv[j] = bs[kk][tx + 16 * j];
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++)
                        acc[i][j] += av[i] * bv[j];
            }
            __syncthreads();
        }
        for (int i = 0; i < 4; i++) {
            int64_t r = row0 + ty + 16 * i;
            if (r >= p.m)
                continue;
            for (int j = 0; j < 4; j++) {
                int64_t cc = col0 + tx + 16 * j;
                if (cc >= p.n)
                    continue;
                T v = acc[i][j];
                if (row_bias)
                    v += row_bias[r];
                if (col_bias)
                    v += col_bias[cc];
                c[r * p.c_row_stride + cc] = rt_activate_t<T>(p.act, p.lo, p.hi, v);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_gemm_f32(rt_cuda_gemm_params p) {
    gemm<float>(p);
}
extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_gemm_f64(rt_cuda_gemm_params p) {
    gemm<double>(p);
}
// Integer matmul (int32, int64) in the unsigned types of the same width: the same bits as
// wrapping signed arithmetic, without signed overflow.
extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_gemm_u32(rt_cuda_gemm_params p) {
    gemm<uint32_t>(p);
}
extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_gemm_u64(rt_cuda_gemm_params p) {
    gemm<uint64_t>(p);
}
