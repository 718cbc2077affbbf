// quant.cu: quantize_linear, dequantize_linear, dynamic_quantize_linear, the integer matrix
// products (matmul_integer, qlinear_matmul) and convolutions (conv_integer, qlinear_conv),
// with the rules of ops/quant/quant.h and the CPU's loops in ops/quant/kernels/ (quantize.c,
// matmul_int8.c, conv_int8.c): round half to even, saturation, NaN giving the zero point,
// int32 sums that wrap.
#include "common.cuh"

__device__ inline int64_t quant_load_int(const void *p, int type, int64_t i) {
    switch (type) {
    case RT_CUDA_I8: return ((const int8_t *)p)[i];
    case RT_CUDA_U8: return ((const uint8_t *)p)[i];
    case RT_CUDA_I16: return ((const int16_t *)p)[i];
    case RT_CUDA_U16: return ((const uint16_t *)p)[i];
    default: return ((const int32_t *)p)[i];
    }
}

__device__ inline void quant_store_int(void *p, int type, int64_t i, int64_t v) {
    switch (type) {
    case RT_CUDA_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case RT_CUDA_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case RT_CUDA_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case RT_CUDA_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    default: ((int32_t *)p)[i] = (int32_t)v; break;
    }
}

// A rounded r plus zero point zp, saturated to [lo, hi]; NaN gives zp (clamped).
__device__ inline int64_t quant_saturate(double r, int64_t zp, int64_t lo, int64_t hi) {
    if (r != r)
        return zp < lo ? lo : zp > hi ? hi : zp;
    double v = r + (double)zp;
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

__device__ inline int64_t quant_param_index(const rt_cuda_quant_params &p, bool single,
                                            int64_t o, int64_t a, int64_t i) {
    if (single)
        return 0;
    if (p.block == 0)
        return a;
    return (o * p.blocks + a / p.block) * p.inner + i;
}

extern "C" __global__ void rt_k_quant_linear(rt_cuda_quant_params p) {
    RT_GRID_LOOP(pos, p.n) {
        int64_t row = pos / p.inner, i = pos % p.inner;
        int64_t o = row / p.length, a = row % p.length;
        int64_t si = quant_param_index(p, p.scale_single != 0, o, a, i);
        int64_t zp = 0;
        if (p.zero)
            zp = quant_load_int(p.zero, p.int_type, quant_param_index(p, p.zero_single != 0,
                                                                      o, a, i));
        bool f64 = p.float_type == RT_CUDA_F64;
        if (p.quantize) {
            // The division in x's type, as numpy computes it.
            double r = f64 ? rint(((const double *)p.x)[pos] / ((const double *)p.scale)[si])
                           : (double)rintf(((const float *)p.x)[pos] /
                                           ((const float *)p.scale)[si]);
            quant_store_int(p.out, p.int_type, pos, quant_saturate(r, zp, p.lo, p.hi));
        } else {
            // x rounded to float32, the rest in double, rounded once (the ONNX reference).
            double x = (double)(float)quant_load_int(p.x, p.int_type, pos);
            double s = f64 ? ((const double *)p.scale)[si] : (double)((const float *)p.scale)[si];
            double v = __dmul_rn(x - (double)zp, s);
            if (f64)
                ((double *)p.out)[pos] = v;
            else
                ((float *)p.out)[pos] = (float)v;
        }
    }
}

extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_quant_range(
    rt_cuda_quant_range_params p) {
    __shared__ float lows[RT_BLOCK], highs[RT_BLOCK];
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = threadIdx.x; i < p.n; i += RT_BLOCK) {
        float v = p.x[i];
        mn = v < mn ? v : mn; // NaN compares false: skipped
        mx = v > mx ? v : mx;
    }
    lows[threadIdx.x] = mn;
    highs[threadIdx.x] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int t = 1; t < RT_BLOCK; t++) {
            mn = lows[t] < mn ? lows[t] : mn;
            mx = highs[t] > mx ? highs[t] : mx;
        }
        float scale = __fdiv_rn(mx == mn ? 1.0f : mx - mn, 255.0f);
        float zp = 0.0f - __fdiv_rn(mn, scale);
        zp = zp > 255.0f ? 255.0f : zp < 0.0f ? 0.0f : zp;
        *p.scale = scale;
        *p.zero = (uint8_t)quant_saturate((double)rintf(zp), 0, 0, 255);
    }
}

// ---- integer products ----

// rint(acc * multiplier + zp), saturated: two double operations, never fused into an fma.
__device__ inline int64_t quant_requantize(int32_t acc, double multiplier, int64_t zp,
                                           int64_t lo, int64_t hi) {
    double v = __dadd_rn(__dmul_rn((double)acc, multiplier), (double)zp);
    if (v != v)
        return zp < lo ? lo : zp > hi ? hi : zp;
    return quant_saturate(rint(v), 0, lo, hi);
}

// (s1[i1] * s2[i2]) / s3[0] in the scales' type.
__device__ inline double quant_multiplier(int type, const void *s1, int64_t i1, const void *s2,
                                          int64_t i2, const void *s3) {
    if (type == RT_CUDA_F32) {
        float m = __fmul_rn(((const float *)s1)[i1], ((const float *)s2)[i2]);
        return (double)__fdiv_rn(m, ((const float *)s3)[0]);
    }
    double m = __dmul_rn(((const double *)s1)[i1], ((const double *)s2)[i2]);
    return m / ((const double *)s3)[0];
}

__device__ inline void quant_store8(void *p, int type, int64_t i, int64_t v) {
    if (type == RT_CUDA_I8)
        ((int8_t *)p)[i] = (int8_t)v;
    else
        ((uint8_t *)p)[i] = (uint8_t)v;
}

__device__ inline int64_t qparam_offset(const rt_cuda_qparam &q, const int64_t *index,
                                        int rank) {
    int64_t off = 0;
    for (int i = 0; i < rank; i++)
        off += index[i] * q.batch_strides[i];
    return off;
}

extern "C" __global__ void rt_k_qmatmul(rt_cuda_qmatmul_params p) {
    RT_GRID_LOOP(e, p.batch_count * p.m * p.n) {
        int64_t j = e % p.n, i = e / p.n % p.m, batch = e / (p.m * p.n);
        int64_t index[RT_CUDA_RANK], rest = batch, a_off = 0, b_off = 0;
        for (int d = p.batch_rank - 1; d >= 0; d--) {
            index[d] = rest % p.batch_sizes[d];
            rest /= p.batch_sizes[d];
            a_off += index[d] * p.a_batch_strides[d];
            b_off += index[d] * p.b_batch_strides[d];
        }
        int64_t za = p.za.data ? quant_load_int(p.za.data, p.za.type,
                                                qparam_offset(p.za, index, p.batch_rank) +
                                                    i * p.za.stride)
                               : 0;
        int64_t zb = p.zb.data ? quant_load_int(p.zb.data, p.zb.type,
                                                qparam_offset(p.zb, index, p.batch_rank) +
                                                    j * p.zb.stride)
                               : 0;
        uint32_t acc = 0;
        for (int64_t k = 0; k < p.k; k++) {
            int64_t av = quant_load_int(p.a, p.a_type, a_off + i * p.k + k) - za;
            int64_t bv = quant_load_int(p.b, p.b_type, b_off + k * p.n + j) - zb;
            acc += (uint32_t)(int32_t)(av * bv);
        }
        if (!p.requant) {
            ((int32_t *)p.out)[e] = (int32_t)acc;
            continue;
        }
        double mult = quant_multiplier(p.scale_type, p.sa.data,
                                       qparam_offset(p.sa, index, p.batch_rank) +
                                           i * p.sa.stride,
                                       p.sb.data,
                                       qparam_offset(p.sb, index, p.batch_rank) +
                                           j * p.sb.stride,
                                       p.y_scale);
        quant_store8(p.out, p.out_type, e,
                     quant_requantize((int32_t)acc, mult, p.y_zero, p.lo, p.hi));
    }
}

extern "C" __global__ void rt_k_qconv(rt_cuda_qconv_params p) {
    const int64_t group_in = p.channels / p.groups, group_out = p.out_channels / p.groups;
    RT_GRID_LOOP(e, p.batch * p.out_channels * p.out_h * p.out_w) {
        int64_t ow = e % p.out_w, oh = e / p.out_w % p.out_h;
        int64_t o = e / (p.out_w * p.out_h) % p.out_channels;
        int64_t n = e / (p.out_w * p.out_h * p.out_channels);
        int64_t first = o / group_out * group_in;
        int64_t wz = p.w_zero ? quant_load_int(p.w_zero, p.w_zero_type,
                                               p.w_zero_per_channel ? o : 0)
                              : 0;
        uint32_t acc = 0;
        for (int64_t c = 0; c < group_in; c++) {
            for (int64_t kh = 0; kh < p.kernel_h; kh++) {
                int64_t ih = oh * p.stride[0] - p.pad[0] + kh * p.dilation[0];
                if (ih < 0 || ih >= p.height)
                    continue;
                for (int64_t kw = 0; kw < p.kernel_w; kw++) {
                    int64_t iw = ow * p.stride[1] - p.pad[1] + kw * p.dilation[1];
                    if (iw < 0 || iw >= p.width)
                        continue;
                    int64_t xv = quant_load_int(p.x, p.x_type,
                                                ((n * p.channels + first + c) * p.height + ih) *
                                                        p.width + iw) - p.x_zero;
                    int64_t wv = quant_load_int(p.w, p.w_type,
                                                ((o * group_in + c) * p.kernel_h + kh) *
                                                        p.kernel_w + kw) - wz;
                    acc += (uint32_t)(int32_t)(xv * wv);
                }
            }
        }
        if (!p.requant) {
            ((int32_t *)p.out)[e] = (int32_t)acc;
            continue;
        }
        if (p.bias)
            acc += (uint32_t)p.bias[o];
        double mult = quant_multiplier(p.scale_type, p.x_scale, 0, p.w_scale,
                                       p.w_scale_per_channel ? o : 0, p.y_scale);
        quant_store8(p.out, p.out_type, e,
                     quant_requantize((int32_t)acc, mult, p.y_zero, p.lo, p.hi));
    }
}
