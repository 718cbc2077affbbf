// reduce.cu: reduce_sum, _mean, _prod, _max, _min, _l1, _l2, _log_sum, _log_sum_exp and _sum_square
// over any set of axes, and argmax / argmin over one axis; one block of RT_BLOCK threads per output
// element (integer and bool reductions and int64 argmax / argmin included). As
// ops/reduce/kernels/reduce.c: sums and products in double, max and min propagate NaN, log_sum_exp
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

// ---- integer and bool reductions, as ops/reduce/kernels/reduce.c: sum, prod, l1 and sum_square in
// uint64 (wrapping like the result type, so any order gives the same bits), max and min in T
// (bool: any and all, true counting as 1). ----

template <typename T, bool BOOL>
__device__ inline uint64_t reduce_int_fold(int op, uint64_t acc, uint64_t other) {
    switch (op) {
    case RT_CUDA_RPROD: return acc * other;
    case RT_CUDA_RMAX: return (T)other > (T)acc ? other : acc;
    case RT_CUDA_RMIN: return (T)other < (T)acc ? other : acc;
    default: return acc + other;
    }
}

template <typename T, bool BOOL>
__device__ inline uint64_t reduce_int_identity(int op) {
    const bool is_signed = (T)-1 < (T)0;
    const T lowest = is_signed ? (T)((uint64_t)1 << (8 * sizeof(T) - 1)) : (T)0;
    const T highest = BOOL ? (T)1 : (T)~lowest;
    switch (op) {
    case RT_CUDA_RPROD: return 1u;
    case RT_CUDA_RMAX: return (uint64_t)(int64_t)lowest;
    case RT_CUDA_RMIN: return (uint64_t)(int64_t)highest;
    default: return 0u;
    }
}

template <typename T, bool BOOL>
__device__ inline void reduce_int(const rt_cuda_reduce_params &p) {
    __shared__ uint64_t shared[RT_BLOCK];
    const int op = p.op;
    const bool is_signed = (T)-1 < (T)0;
    for (int64_t o = blockIdx.x; o < p.n_out; o += gridDim.x) {
        const T *x = (const T *)p.x + offset_of(o, p.kept_rank, p.kept_sizes, p.kept_strides);
        uint64_t acc = reduce_int_identity<T, BOOL>(op);
        for (int64_t r = threadIdx.x; r < p.n_red; r += RT_BLOCK) {
            T t = x[offset_of(r, p.red_rank, p.red_sizes, p.red_strides)];
            uint64_t v = (uint64_t)(int64_t)t; // sign-extended for the signed types
            if (op == RT_CUDA_RL1 && is_signed && (int64_t)t < 0)
                v = 0u - v;
            else if (op == RT_CUDA_RSUM_SQUARE)
                v = v * v;
            acc = reduce_int_fold<T, BOOL>(op, acc, v);
        }
        shared[threadIdx.x] = acc;
        __syncthreads();
        for (int step = RT_BLOCK / 2; step > 0; step /= 2) {
            if ((int)threadIdx.x < step)
                shared[threadIdx.x] = reduce_int_fold<T, BOOL>(op, shared[threadIdx.x],
                                                               shared[threadIdx.x + step]);
            __syncthreads();
        }
        if (threadIdx.x == 0)
            ((T *)p.out)[o] = (T)shared[0];
        __syncthreads();
    }
}

extern "C" __global__ void rt_k_reduce_i8(rt_cuda_reduce_params p) { reduce_int<int8_t, false>(p); }
extern "C" __global__ void rt_k_reduce_i16(rt_cuda_reduce_params p) {
    reduce_int<int16_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_i32(rt_cuda_reduce_params p) {
    reduce_int<int32_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_i64(rt_cuda_reduce_params p) {
    reduce_int<int64_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_u8(rt_cuda_reduce_params p) {
    reduce_int<uint8_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_u16(rt_cuda_reduce_params p) {
    reduce_int<uint16_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_u32(rt_cuda_reduce_params p) {
    reduce_int<uint32_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_u64(rt_cuda_reduce_params p) {
    reduce_int<uint64_t, false>(p);
}
extern "C" __global__ void rt_k_reduce_bool(rt_cuda_reduce_params p) {
    reduce_int<uint8_t, true>(p);
}

// ---- argmax, argmin ----

// Whether candidate (v, i) beats (w, j): NaN is the extreme; equal values go to the first
// position (or the last), as ops/reduce/kernels/reduce.c's sequential rule gives.
template <typename V>
__device__ inline bool arg_better(V v, int64_t i, V w, int64_t j, bool last, bool smallest) {
    if (j < 0)
        return i >= 0;
    if (i < 0)
        return false;
    bool vn = v != v, wn = w != w;
    if (vn || wn) {
        if (vn && wn)
            return last ? i > j : i < j;
        return vn;
    }
    if (v == w)
        return last ? i > j : i < j;
    return smallest ? v < w : v > w;
}

// V holds the values exactly: double for the floats, the integer type itself otherwise.
template <typename T, typename V>
__device__ inline void arg_reduce(const rt_cuda_arg_params &p) {
    __shared__ V values[RT_BLOCK];
    __shared__ int64_t positions[RT_BLOCK];
    const bool last = p.last != 0, smallest = p.smallest != 0;
    for (int64_t o = blockIdx.x; o < p.outer * p.inner; o += gridDim.x) {
        const T *x = (const T *)p.x + (o / p.inner) * p.n * p.inner + o % p.inner;
        V best = 0;
        int64_t at = -1;
        for (int64_t k = threadIdx.x; k < p.n; k += RT_BLOCK) {
            V v = (V)x[k * p.inner];
            if (arg_better(v, k, best, at, last, smallest)) {
                best = v;
                at = k;
            }
        }
        values[threadIdx.x] = best;
        positions[threadIdx.x] = at;
        __syncthreads();
        for (int step = RT_BLOCK / 2; step > 0; step /= 2) {
            if ((int)threadIdx.x < step &&
                arg_better(values[threadIdx.x + step], positions[threadIdx.x + step],
                           values[threadIdx.x], positions[threadIdx.x], last, smallest)) {
                values[threadIdx.x] = values[threadIdx.x + step];
                positions[threadIdx.x] = positions[threadIdx.x + step];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0)
            ((int64_t *)p.out)[o] = positions[0] < 0 ? 0 : positions[0];
        __syncthreads();
    }
}

extern "C" __global__ void rt_k_arg_f32(rt_cuda_arg_params p) { arg_reduce<float, double>(p); }
extern "C" __global__ void rt_k_arg_f64(rt_cuda_arg_params p) { arg_reduce<double, double>(p); }
extern "C" __global__ void rt_k_arg_i8(rt_cuda_arg_params p) { arg_reduce<int8_t, int8_t>(p); }
extern "C" __global__ void rt_k_arg_i16(rt_cuda_arg_params p) { arg_reduce<int16_t, int16_t>(p); }
extern "C" __global__ void rt_k_arg_i32(rt_cuda_arg_params p) { arg_reduce<int32_t, int32_t>(p); }
extern "C" __global__ void rt_k_arg_i64(rt_cuda_arg_params p) { arg_reduce<int64_t, int64_t>(p); }
extern "C" __global__ void rt_k_arg_u8(rt_cuda_arg_params p) { arg_reduce<uint8_t, uint8_t>(p); }
extern "C" __global__ void rt_k_arg_u16(rt_cuda_arg_params p) {
    arg_reduce<uint16_t, uint16_t>(p);
}
extern "C" __global__ void rt_k_arg_u32(rt_cuda_arg_params p) {
    arg_reduce<uint32_t, uint32_t>(p);
}
extern "C" __global__ void rt_k_arg_u64(rt_cuda_arg_params p) {
    arg_reduce<uint64_t, uint64_t>(p);
}
