// movement.cu: one strided copy, by element size, behind transpose, concat, set_input of
// non-dense device tensors and the host-side layout changes.
#include "common.cuh"

template <typename E>
__device__ inline void copy_strided(const rt_cuda_copy_params &p) {
    const E *src = (const E *)p.src;
    E *dst = (E *)p.dst;
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, so = 0, dof = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t index = rest % p.sizes[d];
            rest /= p.sizes[d];
            so += index * p.src_strides[d];
            dof += index * p.dst_strides[d];
        }
        dst[dof] = src[so];
    }
}

extern "C" __global__ void rt_k_copy_strided_1(rt_cuda_copy_params p) { copy_strided<uint8_t>(p); }
extern "C" __global__ void rt_k_copy_strided_2(rt_cuda_copy_params p) { copy_strided<uint16_t>(p); }
extern "C" __global__ void rt_k_copy_strided_4(rt_cuda_copy_params p) { copy_strided<uint32_t>(p); }
extern "C" __global__ void rt_k_copy_strided_8(rt_cuda_copy_params p) { copy_strided<uint64_t>(p); }
