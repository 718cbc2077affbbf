/* max.c: max pooling of every numeric dtype, output row by output row, and the float32 2x2
 * window with stride 2 as its own loop. */
#include <math.h>

#include "core/multiversion.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"
#include "ops/pool/pool.h"

/* Taps t in [0, kernel) with start + t * dilation in [0, size). */
static void tap_range(int64_t start, int64_t dilation, int64_t kernel, int64_t size,
                      int64_t *lo, int64_t *hi) {
    *lo = rt_op__ceil_div(-start, dilation);
    *hi = rt_op__floor_div(size - 1 - start, dilation) + 1;
    if (*lo < 0)
        *lo = 0;
    if (*hi > kernel)
        *hi = kernel;
}

/* Output columns [lo, hi) whose whole window lies inside the row: they need no clipping. */
static void interior_columns(const rt_pool_dims *d, int64_t *lo, int64_t *hi) {
    int64_t reach = (d->kernel[1] - 1) * d->dilation[1];
    *lo = rt_op__ceil_div(d->pad[1], d->stride[1]);
    *hi = rt_op__floor_div(d->width - 1 - reach + d->pad[1], d->stride[1]) + 1;
    if (*hi > d->out_w)
        *hi = d->out_w;
    if (*lo > *hi)
        *lo = *hi = 0;
}

/* out[ow] = max(out[ow], xs[ow * step]) over [lo, hi), NaN winning. */
#define MAX_INTO(T, IS_NAN, out, xs, step, lo, hi)                                       \
    do {                                                                                 \
        for (int64_t ow = (lo); ow < (hi); ow++) {                                       \
            T v_ = (xs)[ow * (step)], best_ = (out)[ow];                                 \
            (out)[ow] = v_ > best_ || IS_NAN(v_) ? v_ : best_;                           \
        }                                                                                \
    } while (0)

/* Padding never wins: a window with no input element gives LOWEST (-inf for floats). NaN
 * propagates, as in PyTorch. Interior columns run tap by tap over the whole row span, without
 * a division per output; the few edge columns clip their windows one by one. */
#define DEFINE_MAX_POOL(sfx, T, LOWEST, IS_NAN)                                          \
    static T max_window__##sfx(const rt_pool_dims *d, const T *x, int64_t h0, int64_t kh0,  \
                               int64_t kh1, int64_t ow)                                  \
    {                                                                                    \
        int64_t w0 = ow * d->stride[1] - d->pad[1], kw0, kw1;                            \
        tap_range(w0, d->dilation[1], d->kernel[1], d->width, &kw0, &kw1);               \
        T best = LOWEST;                                                                 \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                         \
            const T *xr = x + (h0 + kh * d->dilation[0]) * d->width;                     \
            for (int64_t kw = kw0; kw < kw1; kw++) {                                     \
                T v = xr[w0 + kw * d->dilation[1]];                                      \
                if (v > best || IS_NAN(v))                                               \
                    best = v;                                                            \
            }                                                                            \
        }                                                                                \
        return best;                                                                     \
    }                                                                                    \
    RT_MULTIVERSION static void max_pool_rows__##sfx(void *arg, size_t begin, size_t end) \
    {                                                                                    \
        const rt_pool_job *job = arg;                                                       \
        const rt_pool_dims *d = job->dims;                                                  \
        int64_t lo, hi, sw = d->stride[1];                                               \
        interior_columns(d, &lo, &hi);                                                   \
        for (size_t row = begin; row < end; row++) {                                     \
            int64_t plane = (int64_t)row / d->out_h, oh = (int64_t)row % d->out_h;       \
            const T *x = (const T *)job->x + plane * d->height * d->width;               \
            T *out = (T *)job->out + plane * d->out_plane + oh * d->out_w;               \
            int64_t h0 = oh * d->stride[0] - d->pad[0], kh0, kh1;                        \
            tap_range(h0, d->dilation[0], d->kernel[0], d->height, &kh0, &kh1);          \
            for (int64_t ow = 0; ow < lo; ow++)                                          \
                out[ow] = max_window__##sfx(d, x, h0, kh0, kh1, ow);                     \
            for (int64_t ow = hi; ow < d->out_w; ow++)                                   \
                out[ow] = max_window__##sfx(d, x, h0, kh0, kh1, ow);                     \
            for (int64_t ow = lo; ow < hi; ow++)                                         \
                out[ow] = LOWEST;                                                        \
            for (int64_t kh = kh0; kh < kh1; kh++) {                                     \
                const T *xr = x + (h0 + kh * d->dilation[0]) * d->width - d->pad[1];     \
                for (int64_t kw = 0; kw < d->kernel[1]; kw++) {                          \
                    const T *xs = xr + kw * d->dilation[1];                              \
                    /* Branch-free, so it vectorises; strides 1 and 2 as constants, which  \
                     * turns the strided reads into shuffles instead of scalar loads. */   \
                    if (sw == 2)                                                         \
                        MAX_INTO(T, IS_NAN, out, xs, 2, lo, hi);                         \
                    else if (sw == 1)                                                    \
                        MAX_INTO(T, IS_NAN, out, xs, 1, lo, hi);                         \
                    else                                                                 \
                        MAX_INTO(T, IS_NAN, out, xs, sw, lo, hi);                        \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }
#define FLOAT_IS_NAN(v) isnan(v)
#define INT_IS_NAN(v) false
DEFINE_MAX_POOL(f32, float, -INFINITY, FLOAT_IS_NAN)
DEFINE_MAX_POOL(f64, double, -(double)INFINITY, FLOAT_IS_NAN)
DEFINE_MAX_POOL(i8, int8_t, INT8_MIN, INT_IS_NAN)
DEFINE_MAX_POOL(i16, int16_t, INT16_MIN, INT_IS_NAN)
DEFINE_MAX_POOL(i32, int32_t, INT32_MIN, INT_IS_NAN)
DEFINE_MAX_POOL(i64, int64_t, INT64_MIN, INT_IS_NAN)
DEFINE_MAX_POOL(u8, uint8_t, 0, INT_IS_NAN)
DEFINE_MAX_POOL(u16, uint16_t, 0, INT_IS_NAN)
DEFINE_MAX_POOL(u32, uint32_t, 0, INT_IS_NAN)
DEFINE_MAX_POOL(u64, uint64_t, 0, INT_IS_NAN)

/* The common 2x2 window with stride 2 and every window inside the image, in float32: one
 * pass per output row with constant offsets, which the compiler turns into vector loads and
 * shuffles (the general loop costs a division or two per row and a pass per tap). */
static inline float max_nan(float best, float v) { return v > best || isnan(v) ? v : best; }

RT_MULTIVERSION static void max_pool_2x2_rows__f32(void *arg, size_t begin, size_t end) {
    const rt_pool_job *job = arg;
    const rt_pool_dims *d = job->dims;
    for (size_t row = begin; row < end; row++) {
        int64_t plane = (int64_t)row / d->out_h, oh = (int64_t)row % d->out_h;
        const float *top = (const float *)job->x + (plane * d->height + 2 * oh) * d->width;
        const float *bottom = top + d->width;
        float *out = (float *)job->out + plane * d->out_plane + oh * d->out_w;
        for (int64_t ow = 0; ow < d->out_w; ow++)
            out[ow] = max_nan(max_nan(max_nan(top[2 * ow], top[2 * ow + 1]), bottom[2 * ow]),
                              bottom[2 * ow + 1]);
    }
}

static bool is_inner_2x2(const rt_pool_dims *d) {
    return d->kernel[0] == 2 && d->kernel[1] == 2 && d->stride[0] == 2 && d->stride[1] == 2 &&
           d->dilation[0] == 1 && d->dilation[1] == 1 && d->pad[0] == 0 && d->pad[1] == 0 &&
           d->pad[2] == 0 && d->pad[3] == 0 && 2 * d->out_h <= d->height &&
           2 * d->out_w <= d->width;
}

/* The float32 kernel for these dims: the 2x2 loops where they apply. */
static rt_range_fn max_pool_f32_kernel(const rt_pool_dims *d) {
    if (!is_inner_2x2(d))
        return max_pool_rows__f32;
#if RT_POOL_AVX512
    if (rt_gemm__f32_avx512())
        return rt_pool__max_2x2_rows_avx512;
#endif
    return max_pool_2x2_rows__f32;
}

rt_range_fn rt_pool__max_kernel(rt_type type, const rt_pool_dims *d) {
    switch (type) {
    case RT_F32: return max_pool_f32_kernel(d);
    case RT_F64: return max_pool_rows__f64;
    case RT_I8: return max_pool_rows__i8;
    case RT_I16: return max_pool_rows__i16;
    case RT_I32: return max_pool_rows__i32;
    case RT_I64: return max_pool_rows__i64;
    case RT_U8: return max_pool_rows__u8;
    case RT_U16: return max_pool_rows__u16;
    case RT_U32: return max_pool_rows__u32;
    case RT_U64: return max_pool_rows__u64;
    default: return NULL;
    }
}

void rt_pool__max_f32_rows(const rt_pool_dims *d, const float *x, float *out, size_t begin,
                           size_t end) {
    rt_pool_job job = {.dims = d, .x = x, .out = out};
    max_pool_f32_kernel(d)(&job, begin, end);
}

void rt_pool__max_f32(const rt_pool_dims *d, const float *x, float *out, int32_t threads) {
    rt_pool__rows(d, max_pool_f32_kernel(d), x, out, threads);
}

