// resize.cu: resize from the interpolation tables the host builds with ops/movement/resize.c's own code
// (ops/movement/resize.h), one thread per output element.
#include "common.cuh"

// The multi-index of output element i, and whether some dimension puts it outside the input
// (tf_crop_and_resize).
__device__ inline bool resize_index(const rt_cuda_resize_params &p, int64_t i, int64_t *o) {
    bool outside = false;
    for (int32_t d = p.rank - 1; d >= 0; d--) {
        o[d] = i % p.out_sizes[d];
        i /= p.out_sizes[d];
        outside = outside || p.table[p.outside_at[d] + o[d]] != 0;
    }
    return outside;
}

template <typename T>
__device__ inline void resize_nearest(const rt_cuda_resize_params &p) {
    RT_GRID_LOOP(i, p.n) {
        int64_t o[RT_CUDA_RANK];
        T v;
        if (resize_index(p, i, o)) {
            memcpy(&v, &p.fill, sizeof v); // the low bytes, little-endian as the host
        } else {
            int64_t offset = 0;
            for (int32_t d = 0; d < p.rank; d++)
                offset += p.table[p.offsets_at[d] + o[d]];
            v = ((const T *)p.x)[offset];
        }
        ((T *)p.out)[i] = v;
    }
}

extern "C" __global__ void rt_k_resize_nearest_1(rt_cuda_resize_params p) {
    resize_nearest<uint8_t>(p);
}
extern "C" __global__ void rt_k_resize_nearest_2(rt_cuda_resize_params p) {
    resize_nearest<uint16_t>(p);
}
extern "C" __global__ void rt_k_resize_nearest_4(rt_cuda_resize_params p) {
    resize_nearest<uint32_t>(p);
}
extern "C" __global__ void rt_k_resize_nearest_8(rt_cuda_resize_params p) {
    resize_nearest<uint64_t>(p);
}

// Every combination of the dimensions' taps, the last dimension's fastest.
template <typename T>
__device__ inline void resize_interpolate(const rt_cuda_resize_params &p) {
    const double *weights = (const double *)p.table;
    RT_GRID_LOOP(i, p.n) {
        int64_t o[RT_CUDA_RANK], k[RT_CUDA_RANK];
        if (resize_index(p, i, o)) {
            ((T *)p.out)[i] = (T)p.extrapolation;
            continue;
        }
        for (int32_t d = 0; d < p.rank; d++)
            k[d] = 0;
        double acc = 0;
        for (;;) {
            int64_t offset = 0;
            double w = 1;
            for (int32_t d = 0; d < p.rank; d++) {
                int64_t at = o[d] * p.taps[d] + k[d];
                offset += p.table[p.offsets_at[d] + at];
                w *= weights[p.weights_at[d] + at];
            }
            acc += w * (double)((const T *)p.x)[offset];
            int32_t d = p.rank - 1;
            for (; d >= 0; d--) {
                if (++k[d] < p.taps[d])
                    break;
                k[d] = 0;
            }
            if (d < 0)
                break;
        }
        ((T *)p.out)[i] = (T)acc;
    }
}

extern "C" __global__ void rt_k_resize_f32(rt_cuda_resize_params p) {
    resize_interpolate<float>(p);
}
extern "C" __global__ void rt_k_resize_f64(rt_cuda_resize_params p) {
    resize_interpolate<double>(p);
}
