// attention.cu: softmax(q k^T * scale + mask) v, one block of RT_BLOCK threads per query row.
// The scores are computed three times (largest, sum, weights), each by the thread owning the
// key, so nothing is stored per key but one chunk of weights; dot products and sums in double.
#include "common.cuh"

template <typename T>
__device__ inline double attention_score(const rt_cuda_attention_params &p, const T *q,
                                         const T *k, const T *mask_row, int64_t j) {
    double s = 0.0;
    for (int64_t c = 0; c < p.head_dim; c++)
        s += (double)q[c] * (double)k[j * p.ks[2] + c];
    s *= p.scale;
    if (p.softcap > 0)
        s = p.softcap * tanh(s / p.softcap);
    if (mask_row) {
        if (p.mask_is_bool)
            s = ((const uint8_t *)mask_row)[j * p.mask_strides[3]] ? s : -INFINITY;
        else
            s += (double)mask_row[j * p.mask_strides[3]];
    }
    return s;
}

// Keys the query may see: kv length, mask length and causal frontier, as rt_attn__key_limit.
__device__ inline int64_t attention_key_limit(const rt_cuda_attention_params &p, int64_t b,
                                              int64_t query) {
    int64_t len = p.kv_len;
    if (p.lengths)
        len = p.lengths_are_i32 ? ((const int32_t *)p.lengths)[b * p.lengths_stride]
                                : ((const int64_t *)p.lengths)[b * p.lengths_stride];
    int64_t limit = p.mask && p.mask_len < len ? p.mask_len : len;
    int64_t frontier = p.causal == 1 ? query + 1 : p.causal == 2 ? query + 1 + len - p.q_len : limit;
    limit = frontier < limit ? frontier : limit;
    return limit < 0 ? 0 : limit;
}

template <typename T>
__device__ inline void attention(const rt_cuda_attention_params &p) {
    __shared__ double shared[RT_BLOCK];
    __shared__ double weight[RT_BLOCK];
    int64_t rows = p.batch * p.q_heads * p.q_len, group = p.q_heads / p.kv_heads;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t query = row % p.q_len, h = row / p.q_len % p.q_heads;
        int64_t b = row / (p.q_len * p.q_heads), kvh = h / group;
        const T *q = (const T *)p.q + b * p.qs[0] + h * p.qs[1] + query * p.qs[2];
        const T *k = (const T *)p.k + b * p.ks[0] + kvh * p.ks[1];
        const T *v = (const T *)p.v + b * p.vs[0] + kvh * p.vs[1];
        T *out = (T *)p.out + b * p.os[0] + h * p.os[1] + query * p.os[2];
        const T *mask_row = p.mask ? (const T *)((const char *)p.mask +
                                                 (b * p.mask_strides[0] + h * p.mask_strides[1] +
                                                  query * p.mask_strides[2]) *
                                                     (p.mask_is_bool ? 1 : sizeof(T)))
                                   : nullptr;
        int64_t limit = attention_key_limit(p, b, query);
        double best = -INFINITY;
        for (int64_t j = threadIdx.x; j < limit; j += RT_BLOCK) {
            double s = attention_score(p, q, k, mask_row, j);
            best = s > best ? s : best;
        }
        best = rt_block_max(best, shared);
        double sum = 0.0;
        if (best != -INFINITY)
            for (int64_t j = threadIdx.x; j < limit; j += RT_BLOCK)
                sum += exp(attention_score(p, q, k, mask_row, j) - best);
        sum = rt_block_sum(sum, shared);
        for (int64_t c = threadIdx.x; c < p.v_dim; c += RT_BLOCK)
            out[c] = (T)0;
        if (best == -INFINITY) // no key seen: zeros
            continue;
        for (int64_t j0 = 0; j0 < limit; j0 += RT_BLOCK) {
            int64_t j = j0 + threadIdx.x, n = limit - j0 < RT_BLOCK ? limit - j0 : RT_BLOCK;
            weight[threadIdx.x] = j < limit ? exp(attention_score(p, q, k, mask_row, j) - best) / sum
                                            : 0.0;
            __syncthreads();
            for (int64_t c = threadIdx.x; c < p.v_dim; c += RT_BLOCK) {
                double acc = 0.0;
                for (int64_t t = 0; t < n; t++)
                    acc += weight[t] * (double)v[(j0 + t) * p.vs[2] + c];
                out[c] = (T)((double)out[c] + acc);
            }
            __syncthreads(); // the next chunk rewrites `weight`
        }
    }
}

extern "C" __global__ void rt_k_attention_f32(rt_cuda_attention_params p) { attention<float>(p); }
extern "C" __global__ void rt_k_attention_f64(rt_cuda_attention_params p) { attention<double>(p); }

// rotary: one thread per pair of the rotated part (it reads both before writing either, so out
// may be x) and one per element past it.
template <typename T>
__device__ inline void rotary(const rt_cuda_rotary_params &p) {
    int64_t half = p.rotated / 2, per_row = half + (p.dim - p.rotated);
    RT_GRID_LOOP(i, p.rows * per_row) {
        int64_t row = i / per_row, j = i % per_row;
        const T *x = (const T *)p.x + row * p.dim;
        T *o = (T *)p.out + row * p.dim;
        if (j >= half) {
            int64_t k = p.rotated + (j - half);
            o[k] = x[k];
            continue;
        }
        int64_t b = row / (p.heads * p.seq), s = row / p.pos_stride % p.seq;
        int64_t k0 = p.interleaved ? 2 * j : j, k1 = p.interleaved ? 2 * j + 1 : j + half;
        const T *c = (const T *)p.cos + ((p.table_batched ? b : 0) * p.seq + s) * p.rotated;
        const T *sn = (const T *)p.sin + ((p.table_batched ? b : 0) * p.seq + s) * p.rotated;
        T x0 = x[k0], x1 = x[k1];
        o[k0] = x0 * c[k0] - x1 * sn[k0];
        o[k1] = x1 * c[k1] + x0 * sn[k1];
    }
}

extern "C" __global__ void rt_k_rotary_f32(rt_cuda_rotary_params p) { rotary<float>(p); }
extern "C" __global__ void rt_k_rotary_f64(rt_cuda_rotary_params p) { rotary<double>(p); }
