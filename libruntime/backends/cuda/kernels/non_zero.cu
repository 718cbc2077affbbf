// non_zero.cu: the indices of x's nonzero elements in row-major order (ops/generate/introspect.c's
// rules), in two launches of one block: count per chunk, then write (the host reads the total
// in between to give the output its size).
#include "common.cuh"

__device__ inline bool nz_element(const rt_cuda_non_zero_params &p, int64_t i) {
    const char *at = (const char *)p.x + i * p.elem_size;
    switch (p.kind) {
    case 1: return *(const float *)at != 0.0f;
    case 2: return *(const double *)at != 0.0;
    case 3: return (*(const uint16_t *)at & 0x7FFFu) != 0;
    default: break;
    }
    switch (p.elem_size) {
    case 1: return *(const uint8_t *)at != 0;
    case 2: return *(const uint16_t *)at != 0;
    case 4: return *(const uint32_t *)at != 0;
    default: return *(const uint64_t *)at != 0;
    }
}

// This thread's chunk [*begin, *end) of the n elements.
__device__ inline void nz_chunk(const rt_cuda_non_zero_params &p, int64_t *begin, int64_t *end) {
    int64_t per = (p.n + RT_CUDA_NON_ZERO_CHUNKS - 1) / RT_CUDA_NON_ZERO_CHUNKS;
    *begin = per * threadIdx.x;
    *end = *begin + per < p.n ? *begin + per : p.n;
    if (*begin > p.n)
        *begin = p.n;
}

extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_non_zero_count(
    rt_cuda_non_zero_params p) {
    int64_t begin, end, count = 0;
    nz_chunk(p, &begin, &end);
    for (int64_t i = begin; i < end; i++)
        count += nz_element(p, i);
    p.chunks[threadIdx.x] = count;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t total = 0;
        for (int t = 0; t < RT_CUDA_NON_ZERO_CHUNKS; t++) {
            int64_t c = p.chunks[t];
            p.chunks[t] = total;
            total += c;
        }
        p.chunks[RT_CUDA_NON_ZERO_CHUNKS] = total;
    }
}

extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_non_zero_write(
    rt_cuda_non_zero_params p) {
    int64_t begin, end, k = p.chunks[threadIdx.x];
    nz_chunk(p, &begin, &end);
    for (int64_t i = begin; i < end; i++) {
        if (!nz_element(p, i))
            continue;
        int64_t rest = i;
        for (int32_t d = p.rank - 1; d >= 0; d--) {
            p.out[d * p.count + k] = rest % p.sizes[d];
            rest /= p.sizes[d];
        }
        k++;
    }
}
