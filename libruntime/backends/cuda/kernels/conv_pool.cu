// conv_pool.cu: direct 2-D convolution (any groups, so depthwise too), transposed convolution
// and max / average pooling over [N, C, H, W], one thread per output element. Window rules
// follow ops/conv/conv.c, ops/conv/conv_transpose.c and ops/pool/pool.c (PyTorch's).
#include "common.cuh"

template <typename T>
__device__ inline void conv2d(const rt_cuda_conv_params &p) {
    const T *x = (const T *)p.x, *w = (const T *)p.w, *bias = (const T *)p.bias;
    const int64_t group_in = p.channels / p.groups, group_out = p.out_channels / p.groups;
    const int64_t total = p.batch * p.out_channels * p.out_h * p.out_w;
    RT_GRID_LOOP(i, total) {
        int64_t ow = i % p.out_w, oh = i / p.out_w % p.out_h;
        int64_t oc = i / (p.out_w * p.out_h) % p.out_channels;
        int64_t n = i / (p.out_w * p.out_h * p.out_channels);
        int64_t g = oc / group_out;
        T acc = (T)0;
        for (int64_t c = 0; c < group_in; c++) {
            const T *xp = x + (n * p.channels + g * group_in + c) * p.height * p.width;
            const T *wp = w + (oc * group_in + c) * p.kernel_h * p.kernel_w;
            for (int64_t kh = 0; kh < p.kernel_h; kh++) {
                int64_t ih = oh * p.stride[0] - p.pad[0] + kh * p.dilation[0];
                if (ih < 0 || ih >= p.height)
                    continue;
                for (int64_t kw = 0; kw < p.kernel_w; kw++) {
                    int64_t iw = ow * p.stride[1] - p.pad[1] + kw * p.dilation[1];
                    if (iw < 0 || iw >= p.width)
                        continue;
                    acc += xp[ih * p.width + iw] * wp[kh * p.kernel_w + kw];
                }
            }
        }
        if (bias)
            acc += bias[oc];
        ((T *)p.out)[i] = rt_activate_t<T>(p.act, p.lo, p.hi, acc);
    }
}

extern "C" __global__ void rt_k_conv2d_f32(rt_cuda_conv_params p) { conv2d<float>(p); }
extern "C" __global__ void rt_k_conv2d_f64(rt_cuda_conv_params p) { conv2d<double>(p); }

// float32 with every tensor under 2^30 elements (the host checks): 32-bit index arithmetic
// (a 64-bit division is a long instruction sequence on the GPU, and conv2d does three per
// output), and OCB output channels of one group per thread, so each input element it loads
// serves OCB sums. Each sum runs in conv2d's order, so the results are conv2d's, bit for bit.
template <int OCB>
__device__ inline void conv2d_f32_narrow(const rt_cuda_conv_params &p) {
    const float *x = (const float *)p.x, *w = (const float *)p.w, *bias = (const float *)p.bias;
    const int channels = (int)p.channels, height = (int)p.height, width = (int)p.width;
    const int out_channels = (int)p.out_channels, out_w = (int)p.out_w;
    const int kernel_h = (int)p.kernel_h, kernel_w = (int)p.kernel_w;
    const int group_in = channels / (int)p.groups, group_out = out_channels / (int)p.groups;
    const int plane = (int)p.out_h * out_w, taps = kernel_h * kernel_w;
    const int oc_blocks = out_channels / OCB, total = (int)p.batch * oc_blocks * plane;
    const int stride_h = (int)p.stride[0], stride_w = (int)p.stride[1];
    const int dilation_h = (int)p.dilation[0], dilation_w = (int)p.dilation[1];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int pixel = i % plane, rest = i / plane;
        int ow = pixel % out_w, oh = pixel / out_w;
        int oc0 = rest % oc_blocks * OCB, n = rest / oc_blocks;
        int g = oc0 / group_out;
        int ih0 = oh * stride_h - (int)p.pad[0], iw0 = ow * stride_w - (int)p.pad[1];
        float acc[OCB];
#pragma unroll
        for (int o = 0; o < OCB; o++)
            acc[o] = 0.0f;
        const float *xg = x + (n * channels + g * group_in) * height * width;
        const float *wg = w + oc0 * group_in * taps;
        for (int c = 0; c < group_in; c++) {
            const float *xp = xg + c * height * width, *wp = wg + c * taps;
            for (int kh = 0; kh < kernel_h; kh++) {
                int ih = ih0 + kh * dilation_h;
                if (ih < 0 || ih >= height)
                    continue;
                for (int kw = 0; kw < kernel_w; kw++) {
                    int iw = iw0 + kw * dilation_w;
                    if (iw < 0 || iw >= width)
                        continue;
                    float v = xp[ih * width + iw];
#pragma unroll
                    for (int o = 0; o < OCB; o++)
                        acc[o] += v * wp[o * group_in * taps + kh * kernel_w + kw];
                }
            }
        }
        float *out = (float *)p.out + (n * out_channels + oc0) * plane + pixel;
#pragma unroll
        for (int o = 0; o < OCB; o++) {
            float sum = acc[o];
            if (bias)
                sum += bias[oc0 + o];
            out[o * plane] = rt_activate_t<float>(p.act, p.lo, p.hi, sum);
        }
    }
}

extern "C" __global__ void rt_k_conv2d_f32_narrow1(rt_cuda_conv_params p) {
    conv2d_f32_narrow<1>(p);
}
extern "C" __global__ void rt_k_conv2d_f32_narrow4(rt_cuda_conv_params p) {
    conv2d_f32_narrow<4>(p);
}
extern "C" __global__ void rt_k_conv2d_f32_narrow8(rt_cuda_conv_params p) {
    conv2d_f32_narrow<8>(p);
}

// Transposed convolution gathered per output element: w is [C, O / groups, kH, kW]; output
// (oh, ow) takes tap (kh, kw) of input channel c from x[c, ih, iw] when
// oh = ih * stride - top + kh * dilation lands exactly (likewise for ow). Sums in T, starting
// from the bias, like ops/conv/conv_transpose.c (whose order of terms differs).
template <typename T>
__device__ inline void conv_transpose2d(const rt_cuda_conv_params &p) {
    const T *x = (const T *)p.x, *w = (const T *)p.w, *bias = (const T *)p.bias;
    const int64_t group_in = p.channels / p.groups, group_out = p.out_channels / p.groups;
    const int64_t total = p.batch * p.out_channels * p.out_h * p.out_w;
    RT_GRID_LOOP(i, total) {
        int64_t ow = i % p.out_w, oh = i / p.out_w % p.out_h;
        int64_t oc = i / (p.out_w * p.out_h) % p.out_channels;
        int64_t n = i / (p.out_w * p.out_h * p.out_channels);
        int64_t g = oc / group_out, og = oc % group_out;
        T acc = bias ? bias[oc] : (T)0;
        for (int64_t kh = 0; kh < p.kernel_h; kh++) {
            int64_t sh = oh + p.pad[0] - kh * p.dilation[0];
            if (sh < 0 || sh % p.stride[0] != 0 || sh / p.stride[0] >= p.height)
                continue;
            int64_t ih = sh / p.stride[0];
            for (int64_t kw = 0; kw < p.kernel_w; kw++) {
                int64_t sw = ow + p.pad[1] - kw * p.dilation[1];
                if (sw < 0 || sw % p.stride[1] != 0 || sw / p.stride[1] >= p.width)
                    continue;
                int64_t iw = sw / p.stride[1];
                for (int64_t c = g * group_in; c < (g + 1) * group_in; c++)
                    acc += x[((n * p.channels + c) * p.height + ih) * p.width + iw] *
                           w[((c * group_out + og) * p.kernel_h + kh) * p.kernel_w + kw];
            }
        }
        ((T *)p.out)[i] = acc;
    }
}

extern "C" __global__ void rt_k_conv_transpose2d_f32(rt_cuda_conv_params p) {
    conv_transpose2d<float>(p);
}
extern "C" __global__ void rt_k_conv_transpose2d_f64(rt_cuda_conv_params p) {
    conv_transpose2d<double>(p);
}

// The start of a max: -inf, or an integer type's minimum.
template <typename T> __device__ inline T pool_lowest() { return (T)0; } // unsigned
template <> __device__ inline float pool_lowest<float>() { return -INFINITY; }
template <> __device__ inline double pool_lowest<double>() { return -INFINITY; }
template <> __device__ inline int8_t pool_lowest<int8_t>() { return INT8_MIN; }
template <> __device__ inline int16_t pool_lowest<int16_t>() { return INT16_MIN; }
template <> __device__ inline int32_t pool_lowest<int32_t>() { return INT32_MIN; }
template <> __device__ inline int64_t pool_lowest<int64_t>() { return INT64_MIN; }

// Padding never wins; a window with no input element gives -inf (integers: the minimum); NaN
// propagates.
template <typename T>
__device__ inline void max_pool2d(const rt_cuda_pool_params &p) {
    const int64_t total = p.planes * p.out_h * p.out_w;
    RT_GRID_LOOP(i, total) {
        int64_t ow = i % p.out_w, oh = i / p.out_w % p.out_h, plane = i / (p.out_w * p.out_h);
        const T *x = (const T *)p.x + plane * p.height * p.width;
        int64_t h0 = oh * p.stride[0] - p.pad[0], w0 = ow * p.stride[1] - p.pad[1];
        T best = pool_lowest<T>();
        for (int64_t kh = 0; kh < p.kernel[0]; kh++) {
            int64_t ih = h0 + kh * p.dilation[0];
            if (ih < 0 || ih >= p.height)
                continue;
            for (int64_t kw = 0; kw < p.kernel[1]; kw++) {
                int64_t iw = w0 + kw * p.dilation[1];
                if (iw < 0 || iw >= p.width)
                    continue;
                T v = x[ih * p.width + iw];
                if (v > best || v != v)
                    best = v;
            }
        }
        ((T *)p.out)[i] = best;
    }
}

// Output element i's averaging window: its input rows [ih0, ih1) and columns [iw0, iw1), and
// the divisor: the window clipped to the padded input (count_include_pad) or the number of
// input elements in it (0: nothing to count).
struct avg_window {
    int64_t plane, ih0, ih1, iw0, iw1, count;
};

__device__ inline avg_window avg_window_of(const rt_cuda_pool_params &p, int64_t i) {
    int64_t ow = i % p.out_w, oh = i / p.out_w % p.out_h;
    int64_t h0 = oh * p.stride[0] - p.pad[0], h1 = h0 + p.kernel[0];
    if (h1 > p.height + p.pad[2])
        h1 = p.height + p.pad[2];
    int64_t w0 = ow * p.stride[1] - p.pad[1], w1 = w0 + p.kernel[1];
    if (w1 > p.width + p.pad[3])
        w1 = p.width + p.pad[3];
    avg_window a;
    a.plane = i / (p.out_w * p.out_h);
    a.ih0 = h0 > 0 ? h0 : 0, a.ih1 = h1 < p.height ? h1 : p.height;
    a.iw0 = w0 > 0 ? w0 : 0, a.iw1 = w1 < p.width ? w1 : p.width;
    if (a.ih1 < a.ih0)
        a.ih1 = a.ih0;
    if (a.iw1 < a.iw0)
        a.iw1 = a.iw0;
    a.count = p.count_include_pad ? (h1 - h0) * (w1 - w0) : (a.ih1 - a.ih0) * (a.iw1 - a.iw0);
    return a;
}

template <typename T>
__device__ inline void avg_pool2d(const rt_cuda_pool_params &p) {
    const int64_t total = p.planes * p.out_h * p.out_w;
    RT_GRID_LOOP(i, total) {
        avg_window a = avg_window_of(p, i);
        const T *x = (const T *)p.x + a.plane * p.height * p.width;
        double sum = 0.0;
        for (int64_t ih = a.ih0; ih < a.ih1; ih++)
            for (int64_t iw = a.iw0; iw < a.iw1; iw++)
                sum += (double)x[ih * p.width + iw];
        ((T *)p.out)[i] = a.count > 0 ? (T)(sum / (double)a.count) : (T)0;
    }
}

extern "C" __global__ void rt_k_max_pool2d_f32(rt_cuda_pool_params p) { max_pool2d<float>(p); }
extern "C" __global__ void rt_k_max_pool2d_f64(rt_cuda_pool_params p) { max_pool2d<double>(p); }
extern "C" __global__ void rt_k_max_pool2d_i8(rt_cuda_pool_params p) { max_pool2d<int8_t>(p); }
extern "C" __global__ void rt_k_max_pool2d_i16(rt_cuda_pool_params p) { max_pool2d<int16_t>(p); }
extern "C" __global__ void rt_k_max_pool2d_i32(rt_cuda_pool_params p) { max_pool2d<int32_t>(p); }
extern "C" __global__ void rt_k_max_pool2d_i64(rt_cuda_pool_params p) { max_pool2d<int64_t>(p); }
extern "C" __global__ void rt_k_max_pool2d_u8(rt_cuda_pool_params p) { max_pool2d<uint8_t>(p); }
extern "C" __global__ void rt_k_max_pool2d_u16(rt_cuda_pool_params p) {
    max_pool2d<uint16_t>(p);
}
extern "C" __global__ void rt_k_max_pool2d_u32(rt_cuda_pool_params p) {
    max_pool2d<uint32_t>(p);
}
extern "C" __global__ void rt_k_max_pool2d_u64(rt_cuda_pool_params p) {
    max_pool2d<uint64_t>(p);
}
extern "C" __global__ void rt_k_avg_pool2d_f32(rt_cuda_pool_params p) { avg_pool2d<float>(p); }
extern "C" __global__ void rt_k_avg_pool2d_f64(rt_cuda_pool_params p) { avg_pool2d<double>(p); }

// Large windows (global average pooling above all): one block of RT_BLOCK threads per output
// element, each summing a share of the window, then a block sum; the window and divisor rules
// are avg_pool2d's. One thread per output would leave most of the GPU idle on few outputs.
template <typename T>
__device__ inline void avg_pool2d_wide(const rt_cuda_pool_params &p) {
    __shared__ double shared[RT_BLOCK];
    const int64_t total = p.planes * p.out_h * p.out_w;
    for (int64_t i = blockIdx.x; i < total; i += gridDim.x) {
        avg_window a = avg_window_of(p, i);
        const T *x = (const T *)p.x + a.plane * p.height * p.width;
        int64_t width = a.iw1 - a.iw0;
        double part = 0.0;
        for (int64_t e = threadIdx.x; e < (a.ih1 - a.ih0) * width; e += RT_BLOCK)
            part += (double)x[(a.ih0 + e / width) * p.width + a.iw0 + e % width];
        double sum = rt_block_sum(part, shared);
        if (threadIdx.x == 0)
            ((T *)p.out)[i] = a.count > 0 ? (T)(sum / (double)a.count) : (T)0;
    }
}

extern "C" __global__ void rt_k_avg_pool2d_wide_f32(rt_cuda_pool_params p) {
    avg_pool2d_wide<float>(p);
}
extern "C" __global__ void rt_k_avg_pool2d_wide_f64(rt_cuda_pool_params p) {
    avg_pool2d_wide<double>(p);
}
