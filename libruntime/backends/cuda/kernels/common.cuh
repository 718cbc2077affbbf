// common.cuh: helpers shared by the kernels: grid-stride loops, block reductions, the fused
// activations. Every kernel takes one parameter block (params.h) by value.
#ifndef RT_CUDA_COMMON_CUH
#define RT_CUDA_COMMON_CUH

#include <stdint.h>

#include "params.h"

// Each thread visits i, i + stride, ... below n (grids are capped, see rt_cuda__blocks).
#define RT_GRID_LOOP(i, n)                                                        \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);    \
         i += (int64_t)gridDim.x * blockDim.x)

#define RT_BLOCK 256

// Sum and max over the block (blockDim.x == RT_BLOCK); every thread gets the result.
__device__ inline double rt_block_sum(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int step = RT_BLOCK / 2; step > 0; step /= 2) {
        if ((int)threadIdx.x < step)
            shared[threadIdx.x] += shared[threadIdx.x + step];
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads();
    return total;
}

// NaN never wins, as in the CPU kernels' `v > best ? v : best`.
__device__ inline double rt_block_max(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int step = RT_BLOCK / 2; step > 0; step /= 2) {
        if ((int)threadIdx.x < step) {
            double other = shared[threadIdx.x + step];
            if (other > shared[threadIdx.x])
                shared[threadIdx.x] = other;
        }
        __syncthreads();
    }
    double best = shared[0];
    __syncthreads();
    return best;
}

// The fused activations of conv2d_act and linear_act (ops/fused_activation.h), in float.
__device__ inline float rt_activate(int act, float lo, float hi, float x) {
    switch (act) {
    case RT_CUDA_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case RT_CUDA_ACT_CLIP: return x < lo ? lo : x > hi ? hi : x;
    case RT_CUDA_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    // the GELUs and SiLU in forms that do not cancel for large negative x, as the CPU's
    case RT_CUDA_ACT_GELU: return 0.5f * x * erfcf(x * -0.70710678118654752f);
    case RT_CUDA_ACT_SILU: return x / (1.0f + expf(-x));
    case RT_CUDA_ACT_GELU_TANH:
        return x / (1.0f + expf(-1.5957691216057308f * (x + 0.044715f * x * x * x)));
    case RT_CUDA_ACT_HARDSWISH: {
        float g = x / 6.0f + 0.5f;
        return x * (g < 0.0f ? 0.0f : g > 1.0f ? 1.0f : g);
    }
    default: return x;
    }
}

template <typename T>
__device__ inline T rt_activate_t(int act, float lo, float hi, T x) {
    return act == RT_CUDA_ACT_NONE ? x : (T)rt_activate(act, lo, hi, (float)x);
}

#endif
