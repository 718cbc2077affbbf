// reduce.cu: reduce_sum, _mean, _prod, _max, _min, _l1, _l2, _log_sum, _log_sum_exp and
// _sum_square over any set of axes, one block of RT_BLOCK threads per output element.
// As ops/reduce_kernels.c: sums and products in double, max and min propagate NaN, log_sum_exp
// subtracts the maximum (exp in the element type) and returns an infinite or NaN maximum as is.
#include "common.cuh"

// Folds `other` into `acc` for the kind of accumulation op needs.
__device__ inline double reduce_combine(int op, double acc, double other) {
    switch (op) {
    case RT_CUDA_RPROD: return acc * other;
    case RT_CUDA_RMAX: return (other > acc || other != other) ? other : acc;
    case RT_CUDA_RMIN: return (other < acc || other != other) ? other : acc;
    default: return acc + other;
    }
}

__device__ inline double reduce_identity(int op) {
    switch (op) {
    case RT_CUDA_RPROD: return 1.0;
    case RT_CUDA_RMAX: return -INFINITY;
    case RT_CUDA_RMIN: return INFINITY;
    default: return 0.0;
    }
}

__device__ inline double block_reduce(int op, double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int step = RT_BLOCK / 2; step > 0; step /= 2) {
        if ((int)threadIdx.x < step)
            shared[threadIdx.x] = reduce_combine(op, shared[threadIdx.x],
                                                 shared[threadIdx.x + step]);
        __syncthreads();
    }
    double result = shared[0];
    __syncthreads();
    return result;
}

__device__ inline int64_t offset_of(int64_t index, int rank, const int64_t *sizes,
                                    const int64_t *strides) {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        off += index % sizes[d] * strides[d];
        index /= sizes[d];
    }
    return off;
}

template <typename T>
__device__ inline void reduce(const rt_cuda_reduce_params &p) {
    __shared__ double shared[RT_BLOCK];
    const int op = p.op;
    for (int64_t o = blockIdx.x; o < p.n_out; o += gridDim.x) {
        const T *x = (const T *)p.x + offset_of(o, p.kept_rank, p.kept_sizes, p.kept_strides);
        double result;
        if (op == RT_CUDA_RLOG_SUM_EXP) {
            double m = -INFINITY;
            for (int64_t r = threadIdx.x; r < p.n_red; r += RT_BLOCK)
                m = reduce_combine(RT_CUDA_RMAX, m,
                                   (double)x[offset_of(r, p.red_rank, p.red_sizes,
                                                       p.red_strides)]);
            m = block_reduce(RT_CUDA_RMAX, m, shared);
            const T mt = (T)m;
            double sum = 0.0;
            for (int64_t r = threadIdx.x; r < p.n_red; r += RT_BLOCK)
                sum += (double)exp(x[offset_of(r, p.red_rank, p.red_sizes, p.red_strides)] - mt);
            sum = block_reduce(RT_CUDA_RSUM, sum, shared);
            result = isfinite(m) ? m + log(sum) : m;
        } else {
            double acc = reduce_identity(op);
            for (int64_t r = threadIdx.x; r < p.n_red; r += RT_BLOCK) {
                double v = (double)x[offset_of(r, p.red_rank, p.red_sizes, p.red_strides)];
                if (op == RT_CUDA_RL1)
                    v = fabs(v);
                else if (op == RT_CUDA_RL2 || op == RT_CUDA_RSUM_SQUARE)
                    v = v * v;
                acc = reduce_combine(op, acc, v);
            }
            acc = block_reduce(op, acc, shared);
            switch (op) {
            case RT_CUDA_RMEAN: result = acc / (double)p.n_red; break;
            case RT_CUDA_RL2: result = sqrt(acc); break;
            case RT_CUDA_RLOG_SUM: result = log(acc); break;
            default: result = acc; break;
            }
        }
        if (threadIdx.x == 0)
            ((T *)p.out)[o] = (T)result;
    }
}

extern "C" __global__ void rt_k_reduce_f32(rt_cuda_reduce_params p) { reduce<float>(p); }
extern "C" __global__ void rt_k_reduce_f64(rt_cuda_reduce_params p) { reduce<double>(p); }
