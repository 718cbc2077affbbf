// scan.cu: cumsum, hardmax, lp_norm and topk along one axis, one thread per line (x viewed as
// [outer, n, inner]); each line is read before (cumsum: as) it is written, so out may be x.
#include "common.cuh"

// Integers go by element size: the low bits of a wrapping uint64 sum are those of the sum in
// any integer type of that size, signed or not.
template <typename T, typename ACC, typename LOAD>
__device__ inline void cumsum(const rt_cuda_scan_params &p) {
    const T *x = (const T *)p.x;
    T *out = (T *)p.out;
    RT_GRID_LOOP(line, p.outer * p.inner) {
        int64_t start = line / p.inner * p.n * p.inner + line % p.inner;
        ACC acc = 0;
        for (int64_t step = 0; step < p.n; step++) {
            int64_t at = start + (p.reverse ? p.n - 1 - step : step) * p.inner;
            ACC before = acc;
            acc += (ACC)(LOAD)x[at];
            out[at] = (T)(p.exclusive ? before : acc);
        }
    }
}

extern "C" __global__ void rt_k_cumsum_f32(rt_cuda_scan_params p) {
    cumsum<float, double, float>(p);
}
extern "C" __global__ void rt_k_cumsum_f64(rt_cuda_scan_params p) {
    cumsum<double, double, double>(p);
}
extern "C" __global__ void rt_k_cumsum_int1(rt_cuda_scan_params p) {
    cumsum<uint8_t, uint64_t, uint8_t>(p);
}
extern "C" __global__ void rt_k_cumsum_int2(rt_cuda_scan_params p) {
    cumsum<uint16_t, uint64_t, uint16_t>(p);
}
extern "C" __global__ void rt_k_cumsum_int4(rt_cuda_scan_params p) {
    cumsum<uint32_t, uint64_t, uint32_t>(p);
}
extern "C" __global__ void rt_k_cumsum_int8(rt_cuda_scan_params p) {
    cumsum<uint64_t, uint64_t, uint64_t>(p);
}

template <typename T>
__device__ inline void hardmax(const rt_cuda_scan_params &p) {
    const T *x = (const T *)p.x;
    T *out = (T *)p.out;
    RT_GRID_LOOP(line, p.outer * p.inner) {
        int64_t start = line / p.inner * p.n * p.inner + line % p.inner, best = 0;
        T best_value = x[start];
        for (int64_t k = 1; k < p.n; k++) {
            T v = x[start + k * p.inner];
            if (v > best_value || (v != v && best_value == best_value)) {
                best = k;
                best_value = v;
            }
        }
        for (int64_t k = 0; k < p.n; k++)
            out[start + k * p.inner] = k == best ? (T)1 : (T)0;
    }
}

extern "C" __global__ void rt_k_hardmax_f32(rt_cuda_scan_params p) { hardmax<float>(p); }
extern "C" __global__ void rt_k_hardmax_f64(rt_cuda_scan_params p) { hardmax<double>(p); }

template <typename T>
__device__ inline void lp_norm(const rt_cuda_scan_params &p) {
    const T *x = (const T *)p.x;
    T *out = (T *)p.out;
    RT_GRID_LOOP(line, p.outer * p.inner) {
        int64_t start = line / p.inner * p.n * p.inner + line % p.inner;
        double acc = 0;
        for (int64_t k = 0; k < p.n; k++) {
            double v = (double)x[start + k * p.inner];
            acc += p.p == 1 ? fabs(v) : v * v;
        }
        acc = acc == 0 ? 1 : p.p == 1 ? acc : sqrt(acc); // a norm of 0 divides 0s: give 0s
        for (int64_t k = 0; k < p.n; k++)
            out[start + k * p.inner] = (T)((double)x[start + k * p.inner] / acc);
    }
}

extern "C" __global__ void rt_k_lp_norm_f32(rt_cuda_scan_params p) { lp_norm<float>(p); }
extern "C" __global__ void rt_k_lp_norm_f64(rt_cuda_scan_params p) { lp_norm<double>(p); }

// Whether element i (value a) comes before element j (value b) in topk's order, that of
// ops/reduce/scan.c.
template <typename T>
__device__ inline bool topk_before(T a, int64_t i, T b, int64_t j, bool largest) {
    bool na = a != a, nb = b != b;
    if (na || nb)
        return na && nb ? i < j : largest ? na : nb; // NaN first when largest, else last
    if (a != b)
        return largest ? a > b : a < b;
    return i < j;
}

template <typename T>
__device__ inline void topk(const rt_cuda_topk_params &p) {
    const T *x = (const T *)p.x;
    RT_GRID_LOOP(e, p.outer * p.n * p.inner) {
        int64_t inner = e % p.inner, i = e / p.inner % p.n, outer = e / (p.inner * p.n);
        const T *line = x + outer * p.n * p.inner + inner;
        T v = line[i * p.inner];
        int64_t rank = 0;
        for (int64_t j = 0; j < p.n && rank < p.k; j++)
            rank += j != i && topk_before(line[j * p.inner], j, v, i, p.largest != 0);
        if (rank < p.k) {
            int64_t at = (outer * p.k + rank) * p.inner + inner;
            ((T *)p.values)[at] = v;
            ((int64_t *)p.indices)[at] = i;
        }
    }
}

extern "C" __global__ void rt_k_topk_f32(rt_cuda_topk_params p) { topk<float>(p); }
extern "C" __global__ void rt_k_topk_f64(rt_cuda_topk_params p) { topk<double>(p); }
extern "C" __global__ void rt_k_topk_i8(rt_cuda_topk_params p) { topk<int8_t>(p); }
extern "C" __global__ void rt_k_topk_i16(rt_cuda_topk_params p) { topk<int16_t>(p); }
extern "C" __global__ void rt_k_topk_i32(rt_cuda_topk_params p) { topk<int32_t>(p); }
extern "C" __global__ void rt_k_topk_i64(rt_cuda_topk_params p) { topk<int64_t>(p); }
extern "C" __global__ void rt_k_topk_u8(rt_cuda_topk_params p) { topk<uint8_t>(p); }
extern "C" __global__ void rt_k_topk_u16(rt_cuda_topk_params p) { topk<uint16_t>(p); }
extern "C" __global__ void rt_k_topk_u32(rt_cuda_topk_params p) { topk<uint32_t>(p); }
extern "C" __global__ void rt_k_topk_u64(rt_cuda_topk_params p) { topk<uint64_t>(p); }
