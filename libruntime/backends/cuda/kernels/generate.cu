// generate.cu: kernels that make tensors from parameters: constant_of_shape and eye_like
// (fill), one_hot. By element size, so any dtype.
#include "common.cuh"

template <typename E>
__device__ inline void fill(const rt_cuda_fill_params &p) {
    E *out = (E *)p.out;
    if (p.value) {
        E v = *(const E *)p.value;
        RT_GRID_LOOP(i, p.n)
            out[i] = v;
        return;
    }
    E one;
    memcpy(&one, &p.one, sizeof one); // the low bytes: little-endian, as the host wrote them
    RT_GRID_LOOP(i, p.n)
        out[i] = i % p.cols == i / p.cols + p.k ? one : (E)0;
}

extern "C" __global__ void rt_k_fill_1(rt_cuda_fill_params p) { fill<uint8_t>(p); }
extern "C" __global__ void rt_k_fill_2(rt_cuda_fill_params p) { fill<uint16_t>(p); }
extern "C" __global__ void rt_k_fill_4(rt_cuda_fill_params p) { fill<uint32_t>(p); }
extern "C" __global__ void rt_k_fill_8(rt_cuda_fill_params p) { fill<uint64_t>(p); }

// Position of index element i in [0, depth), or -1, with the rules of ops/generate/generate.c.
__device__ inline int64_t one_hot_position(const rt_cuda_one_hot_params &p, int64_t i) {
    int64_t v, depth = p.depth;
    double f;
    switch (p.index_type) {
    case RT_CUDA_F32: f = ((const float *)p.indices)[i]; goto floating;
    case RT_CUDA_F64: f = ((const double *)p.indices)[i]; goto floating;
    case RT_CUDA_I8: v = ((const int8_t *)p.indices)[i]; break;
    case RT_CUDA_I16: v = ((const int16_t *)p.indices)[i]; break;
    case RT_CUDA_I32: v = ((const int32_t *)p.indices)[i]; break;
    case RT_CUDA_I64: v = ((const int64_t *)p.indices)[i]; break;
    case RT_CUDA_U8: v = ((const uint8_t *)p.indices)[i]; break;
    case RT_CUDA_U16: v = ((const uint16_t *)p.indices)[i]; break;
    case RT_CUDA_U32: v = ((const uint32_t *)p.indices)[i]; break;
    case RT_CUDA_U64: {
        uint64_t u = ((const uint64_t *)p.indices)[i];
        return u < (uint64_t)depth ? (int64_t)u : -1;
    }
    default: return -1;
    }
    if (v < 0)
        v = v < -depth ? -1 : v + depth;
    return v < depth ? v : -1;
floating:
    if (!(f == floor(f)) || f < -(double)depth || f >= (double)depth)
        return -1; // also NaN
    v = (int64_t)f;
    return v < 0 ? v + depth : v;
}

template <typename E>
__device__ inline void one_hot(const rt_cuda_one_hot_params &p) {
    const E *values = (const E *)p.values;
    RT_GRID_LOOP(i, p.n) {
        int64_t inner = i % p.inner, at = i / p.inner % p.depth;
        int64_t outer = i / (p.inner * p.depth);
        bool on = one_hot_position(p, outer * p.inner + inner) == at;
        ((E *)p.out)[i] = values[on ? 1 : 0];
    }
}

extern "C" __global__ void rt_k_one_hot_1(rt_cuda_one_hot_params p) { one_hot<uint8_t>(p); }
extern "C" __global__ void rt_k_one_hot_2(rt_cuda_one_hot_params p) { one_hot<uint16_t>(p); }
extern "C" __global__ void rt_k_one_hot_4(rt_cuda_one_hot_params p) { one_hot<uint32_t>(p); }
extern "C" __global__ void rt_k_one_hot_8(rt_cuda_one_hot_params p) { one_hot<uint64_t>(p); }
