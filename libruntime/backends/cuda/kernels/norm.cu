// norm.cu: softmax / log_softmax, layer_norm and rms_norm, one block of RT_BLOCK threads per row.
// Sums run in double, as in the CPU kernels, so results agree to rounding.
#include "common.cuh"

template <typename T>
__device__ inline void softmax(const rt_cuda_softmax_params &p) {
    __shared__ double shared[RT_BLOCK];
    const T *x = (const T *)p.x;
    T *out = (T *)p.out;
    int64_t columns = p.outer * p.inner;
    for (int64_t col = blockIdx.x; col < columns; col += gridDim.x) {
        int64_t o = col / p.inner, in = col % p.inner;
        int64_t base = o * p.n * p.inner + in;
        double best = -INFINITY;
        for (int64_t k = threadIdx.x; k < p.n; k += RT_BLOCK) {
            double v = (double)x[base + k * p.inner];
            if (v > best)
                best = v;
        }
        best = rt_block_max(best, shared);
        const T m = (T)best;
        double sum = 0.0;
        for (int64_t k = threadIdx.x; k < p.n; k += RT_BLOCK)
            sum += (double)exp(x[base + k * p.inner] - m);
        sum = rt_block_sum(sum, shared);
        if (p.log) {
            const T shift = (T)((double)m + log(sum));
            for (int64_t k = threadIdx.x; k < p.n; k += RT_BLOCK)
                out[base + k * p.inner] = x[base + k * p.inner] - shift;
        } else {
            for (int64_t k = threadIdx.x; k < p.n; k += RT_BLOCK)
                out[base + k * p.inner] = (T)((double)exp(x[base + k * p.inner] - m) / sum);
        }
    }
}

extern "C" __global__ void rt_k_softmax_f32(rt_cuda_softmax_params p) { softmax<float>(p); }
extern "C" __global__ void rt_k_softmax_f64(rt_cuda_softmax_params p) { softmax<double>(p); }

// A row's mean and 1 / std from sums shifted by its first element (as ops/norm/norm.c); every
// thread of the block gets them. An empty row gives NaN.
template <typename T>
__device__ inline void row_stats(const T *x, int64_t len, double eps, double *shared,
                                 double *mean, double *inv) {
    *mean = *inv = NAN;
    if (len == 0)
        return;
    double shift = (double)x[0], sum = 0.0, squares = 0.0;
    for (int64_t k = threadIdx.x; k < len; k += RT_BLOCK) {
        double d = (double)x[k] - shift;
        sum += d;
        squares += d * d;
    }
    sum = rt_block_sum(sum, shared);
    squares = rt_block_sum(squares, shared);
    double m = sum / (double)len, var = squares / (double)len - m * m;
    *mean = shift + m;
    *inv = 1.0 / sqrt((var > 0 ? var : 0) + eps);
}

// instance_norm and group_norm: (x - mean) * (inv_std * scale[p]) + bias[p], p the channel or
// the group, in ops/norm/norm.c's order of operations. Rows are contiguous, so out may be x.
template <typename T>
__device__ inline void channel_norm(const rt_cuda_channel_norm_params &p) {
    __shared__ double shared[RT_BLOCK];
    const T *sc = (const T *)p.scale, *bi = (const T *)p.bias;
    const int64_t len = p.group_channels * p.spatial;
    for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
        const T *x = (const T *)p.x + r * len;
        T *o = (T *)p.out + r * len;
        double mean, inv;
        row_stats(x, len, p.eps, shared, &mean, &inv);
        const T m = (T)mean, s = (T)inv;
        const int64_t g = r % p.groups;
        for (int64_t k = threadIdx.x; k < len; k += RT_BLOCK) {
            int64_t c = k / p.spatial;
            int64_t q = p.per_group ? g : g * p.group_channels + c;
            T a = sc ? s * sc[q] : s, b = bi ? bi[q] : (T)0;
            o[k] = (x[k] - m) * a + b;
        }
        __syncthreads(); // the next row reuses `shared`
    }
}

extern "C" __global__ void rt_k_channel_norm_f32(rt_cuda_channel_norm_params p) {
    channel_norm<float>(p);
}
extern "C" __global__ void rt_k_channel_norm_f64(rt_cuda_channel_norm_params p) {
    channel_norm<double>(p);
}

// layer_norm: (x - mean) * inv_std * scale + bias. Every thread reads its elements before writing them,
// and the statistics are complete before any write, so out may be x.
template <typename T>
__device__ inline void layer_norm(const rt_cuda_layer_norm_params &p) {
    __shared__ double shared[RT_BLOCK];
    const T *sc = (const T *)p.scale, *bi = (const T *)p.bias;
    for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
        const T *x = (const T *)p.x + r * p.len;
        T *o = (T *)p.out + r * p.len;
        double mean, inv;
        row_stats(x, p.len, p.eps, shared, &mean, &inv);
        if (p.mean && threadIdx.x == 0) {
            ((T *)p.mean)[r] = (T)mean;
            ((T *)p.inv_std)[r] = (T)inv;
        }
        const T m = (T)mean, s = (T)inv;
        for (int64_t k = threadIdx.x; k < p.len; k += RT_BLOCK) {
            T v = (x[k] - m) * s;
            o[k] = (sc ? v * sc[k % p.scale_period] : v) + (bi ? bi[k % p.bias_period] : (T)0);
        }
        __syncthreads(); // the next row reuses `shared`
    }
}

extern "C" __global__ void rt_k_layer_norm_f32(rt_cuda_layer_norm_params p) {
    layer_norm<float>(p);
}
extern "C" __global__ void rt_k_layer_norm_f64(rt_cuda_layer_norm_params p) {
    layer_norm<double>(p);
}

// rms_norm: x / sqrt(mean(x^2) + eps) * scale; the row is summed before any write (out may be x).
template <typename T>
__device__ inline void rms_norm(const rt_cuda_rms_norm_params &p) {
    __shared__ double shared[RT_BLOCK];
    const T *sc = (const T *)p.scale;
    for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
        const T *x = (const T *)p.x + r * p.len;
        T *o = (T *)p.out + r * p.len;
        double squares = 0.0;
        for (int64_t k = threadIdx.x; k < p.len; k += RT_BLOCK)
            squares += (double)x[k] * (double)x[k];
        squares = rt_block_sum(squares, shared);
        const T s = (T)(1.0 / sqrt(squares / (double)p.len + p.eps));
        for (int64_t k = threadIdx.x; k < p.len; k += RT_BLOCK)
            o[k] = sc ? x[k] * s * sc[k % p.scale_period] : x[k] * s;
        __syncthreads(); // the next row reuses `shared`
    }
}

extern "C" __global__ void rt_k_rms_norm_f32(rt_cuda_rms_norm_params p) { rms_norm<float>(p); }
extern "C" __global__ void rt_k_rms_norm_f64(rt_cuda_rms_norm_params p) { rms_norm<double>(p); }
