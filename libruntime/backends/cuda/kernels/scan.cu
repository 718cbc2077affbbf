// scan.cu: cumsum, hardmax and lp_norm along one axis, one thread per line (x viewed as
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
