// movement.cu: one strided copy, by element size, behind transpose, concat and set_input of
// non-dense device tensors; tile, the gathers, scatter_elements, trilu and pad.
// They move whole elements, so they go by element size (scatter's reductions by type).
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

// The host checked every index against dim before the launch.
template <typename E>
__device__ inline void gather(const rt_cuda_gather_params &p) {
    const E *data = (const E *)p.data;
    RT_GRID_LOOP(i, p.n) {
        int64_t j = i % p.inner, k = i / p.inner % p.count, outer = i / (p.inner * p.count);
        int64_t at = p.index_bits == 32 ? (int64_t)((const int32_t *)p.indices)[k]
                                         : ((const int64_t *)p.indices)[k];
        if (at < 0)
            at += p.dim;
        ((E *)p.out)[i] = data[(outer * p.dim + at) * p.inner + j];
    }
}

extern "C" __global__ void rt_k_gather_1(rt_cuda_gather_params p) { gather<uint8_t>(p); }
extern "C" __global__ void rt_k_gather_2(rt_cuda_gather_params p) { gather<uint16_t>(p); }
extern "C" __global__ void rt_k_gather_4(rt_cuda_gather_params p) { gather<uint32_t>(p); }
extern "C" __global__ void rt_k_gather_8(rt_cuda_gather_params p) { gather<uint64_t>(p); }

template <typename E>
__device__ inline void tile(const rt_cuda_tile_params &p) {
    const E *x = (const E *)p.x;
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, xo = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            xo += rest % p.out_sizes[d] % p.x_sizes[d] * p.x_strides[d];
            rest /= p.out_sizes[d];
        }
        ((E *)p.out)[i] = x[xo];
    }
}

extern "C" __global__ void rt_k_tile_1(rt_cuda_tile_params p) { tile<uint8_t>(p); }
extern "C" __global__ void rt_k_tile_2(rt_cuda_tile_params p) { tile<uint16_t>(p); }
extern "C" __global__ void rt_k_tile_4(rt_cuda_tile_params p) { tile<uint32_t>(p); }
extern "C" __global__ void rt_k_tile_8(rt_cuda_tile_params p) { tile<uint64_t>(p); }

// In place (out == x) too: each element is read and written by the same thread.
template <typename E>
__device__ inline void trilu(const rt_cuda_trilu_params &p) {
    const E *x = (const E *)p.x;
    RT_GRID_LOOP(i, p.n) {
        int64_t col = i % p.cols, row = i / p.cols % p.rows;
        bool keep = p.upper ? col >= row + p.k : col <= row + p.k;
        ((E *)p.out)[i] = keep ? x[i] : (E)0;
    }
}

extern "C" __global__ void rt_k_trilu_1(rt_cuda_trilu_params p) { trilu<uint8_t>(p); }
extern "C" __global__ void rt_k_trilu_2(rt_cuda_trilu_params p) { trilu<uint16_t>(p); }
extern "C" __global__ void rt_k_trilu_4(rt_cuda_trilu_params p) { trilu<uint32_t>(p); }
extern "C" __global__ void rt_k_trilu_8(rt_cuda_trilu_params p) { trilu<uint64_t>(p); }

// Source position in [0, kept) of j, outside the kept part, for reflect / edge / wrap.
__device__ inline int64_t pad_source(int mode, int64_t j, int64_t kept) {
    if (mode == 2)
        return j < 0 ? 0 : kept - 1;
    if (mode == 3) {
        int64_t m = j % kept;
        return m < 0 ? m + kept : m;
    }
    if (kept == 1) // reflect, period 2 * (kept - 1) as numpy.pad
        return 0;
    int64_t period = 2 * (kept - 1), m = j % period;
    m = m < 0 ? m + period : m;
    return m < kept ? m : period - m;
}

template <typename E>
__device__ inline void pad(const rt_cuda_pad_params &p) {
    const E *x = (const E *)p.x;
    E fill = p.value ? *(const E *)p.value : (E)0;
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, xo = 0;
        bool inside = true;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t j = rest % p.out_sizes[d] - p.lead[d];
            rest /= p.out_sizes[d];
            if (j < 0 || j >= p.kept[d]) {
                if (p.mode == 0) {
                    inside = false;
                    break;
                }
                j = pad_source(p.mode, j, p.kept[d]);
            }
            xo += (p.skip[d] + j) * p.x_strides[d];
        }
        ((E *)p.out)[i] = inside ? x[xo] : fill;
    }
}

extern "C" __global__ void rt_k_pad_1(rt_cuda_pad_params p) { pad<uint8_t>(p); }
extern "C" __global__ void rt_k_pad_2(rt_cuda_pad_params p) { pad<uint16_t>(p); }
extern "C" __global__ void rt_k_pad_4(rt_cuda_pad_params p) { pad<uint32_t>(p); }
extern "C" __global__ void rt_k_pad_8(rt_cuda_pad_params p) { pad<uint64_t>(p); }

// The host checked every index against dim before the launch.
template <typename E>
__device__ inline void gather_elements(const rt_cuda_gather_elements_params &p) {
    const E *data = (const E *)p.data;
    RT_GRID_LOOP(i, p.n) {
        int64_t at = p.index_bits == 32 ? (int64_t)((const int32_t *)p.indices)[i]
                                         : ((const int64_t *)p.indices)[i];
        if (at < 0)
            at += p.dim;
        int64_t rest = i, offset = at * p.data_strides[p.axis];
        for (int d = p.rank - 1; d >= 0; d--) {
            if (d != p.axis)
                offset += rest % p.out_sizes[d] * p.data_strides[d];
            rest /= p.out_sizes[d];
        }
        ((E *)p.out)[i] = data[offset];
    }
}

extern "C" __global__ void rt_k_gather_elements_1(rt_cuda_gather_elements_params p) {
    gather_elements<uint8_t>(p);
}
extern "C" __global__ void rt_k_gather_elements_2(rt_cuda_gather_elements_params p) {
    gather_elements<uint16_t>(p);
}
extern "C" __global__ void rt_k_gather_elements_4(rt_cuda_gather_elements_params p) {
    gather_elements<uint32_t>(p);
}
extern "C" __global__ void rt_k_gather_elements_8(rt_cuda_gather_elements_params p) {
    gather_elements<uint64_t>(p);
}

// W: the type add and mul run in (uint64_t for integers: they wrap). NaN wins max and min, as
// numpy and ops/movement/scatter.c.
template <typename T, typename W>
__device__ inline void scatter_apply(int reduction, T *d, T s) {
    switch (reduction) {
    case 1: *d = (T)((W)*d + (W)s); break;
    case 2: *d = (T)((W)*d * (W)s); break;
    case 3: *d = (s > *d || s != s) ? s : *d; break;
    case 4: *d = (s < *d || s != s) ? s : *d; break;
    default: *d = s; break;
    }
}

__device__ inline int64_t scatter_index(const rt_cuda_scatter_params &p, int64_t i) {
    return p.index_bits == 32 ? (int64_t)((const int32_t *)p.indices)[i]
                              : ((const int64_t *)p.indices)[i];
}

// The host checked every index before the launch.
template <typename T, typename W>
__device__ inline void scatter_nd(const rt_cuda_scatter_params &p) {
    const T *updates = (const T *)p.updates;
    T *out = (T *)p.out;
    RT_GRID_LOOP(e, p.lines) {
        for (int64_t t = 0; t < p.tuples; t++) {
            int64_t offset = e;
            for (int j = 0; j < p.k; j++) {
                int64_t at = scatter_index(p, t * p.k + j);
                offset += (at < 0 ? at + p.idx_sizes[j] : at) * p.out_strides[j];
            }
            scatter_apply<T, W>(p.reduction, out + offset, updates[t * p.lines + e]);
        }
    }
}

template <typename T, typename W>
__device__ inline void scatter(const rt_cuda_scatter_params &p) {
    if (p.nd) {
        scatter_nd<T, W>(p);
        return;
    }
    const T *updates = (const T *)p.updates;
    T *out = (T *)p.out;
    int64_t along = p.idx_sizes[p.axis], idx_stride = 1;
    for (int d = p.axis + 1; d < p.rank; d++)
        idx_stride *= p.idx_sizes[d];
    RT_GRID_LOOP(line, p.lines) {
        // line runs over the indices' coordinates without the axis, row-major.
        int64_t rest = line, base = 0, first = 0, step = 1;
        for (int d = p.rank - 1; d >= 0; d--) {
            if (d != p.axis) {
                int64_t c = rest % p.idx_sizes[d];
                rest /= p.idx_sizes[d];
                base += c * p.out_strides[d];
                first += c * step;
            }
            step *= p.idx_sizes[d];
        }
        for (int64_t k = 0; k < along; k++) {
            int64_t i = first + k * idx_stride, at = scatter_index(p, i);
            if (at < 0)
                at += p.dim;
            scatter_apply<T, W>(p.reduction, out + base + at * p.out_strides[p.axis],
                                updates[i]);
        }
    }
}

#define RT_SCATTER_KERNEL(sfx, T, W)                                              \
    extern "C" __global__ void rt_k_scatter_##sfx(rt_cuda_scatter_params p) {     \
        scatter<T, W>(p);                                                         \
    }
RT_SCATTER_KERNEL(f32, float, float)
RT_SCATTER_KERNEL(f64, double, double)
RT_SCATTER_KERNEL(i8, int8_t, uint64_t)
RT_SCATTER_KERNEL(i16, int16_t, uint64_t)
RT_SCATTER_KERNEL(i32, int32_t, uint64_t)
RT_SCATTER_KERNEL(i64, int64_t, uint64_t)
RT_SCATTER_KERNEL(u8, uint8_t, uint64_t)
RT_SCATTER_KERNEL(u16, uint16_t, uint64_t)
RT_SCATTER_KERNEL(u32, uint32_t, uint64_t)
RT_SCATTER_KERNEL(u64, uint64_t, uint64_t)

// The host checked every index against its dimension before the launch.
template <typename E>
__device__ inline void gather_nd(const rt_cuda_gather_nd_params &p) {
    const E *data = (const E *)p.data;
    RT_GRID_LOOP(i, p.n) {
        int64_t t = i / p.slice, offset = t / p.per_batch * p.batch_stride + i % p.slice;
        for (int j = 0; j < p.k; j++) {
            int64_t at = p.index_bits == 32 ? (int64_t)((const int32_t *)p.indices)[t * p.k + j]
                                             : ((const int64_t *)p.indices)[t * p.k + j];
            int d = p.batch_dims + j;
            offset += (at < 0 ? at + p.data_sizes[d] : at) * p.data_strides[d];
        }
        ((E *)p.out)[i] = data[offset];
    }
}

extern "C" __global__ void rt_k_gather_nd_1(rt_cuda_gather_nd_params p) { gather_nd<uint8_t>(p); }
extern "C" __global__ void rt_k_gather_nd_2(rt_cuda_gather_nd_params p) {
    gather_nd<uint16_t>(p);
}
extern "C" __global__ void rt_k_gather_nd_4(rt_cuda_gather_nd_params p) {
    gather_nd<uint32_t>(p);
}
extern "C" __global__ void rt_k_gather_nd_8(rt_cuda_gather_nd_params p) {
    gather_nd<uint64_t>(p);
}
