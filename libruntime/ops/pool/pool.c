/* pool.c: max_pool2d and avg_pool2d over [N, C, H, W], with PyTorch's output sizes (floor or
 * ceil mode) and padding rules. Work items are output rows. */
#include <inttypes.h>
#include <math.h>

#include "core/lane_mask.h"
#include "core/multiversion.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/pool/pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_POOL 1
#endif

typedef struct pool_job {
    const rt_pool_dims *dims;
    const void *x;
    void *out;
} pool_job;

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

/* ---- max -------------------------------------------------------------------------------- */

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
        const pool_job *job = arg;                                                       \
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
    const pool_job *job = arg;
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

#ifdef HAVE_AVX512_POOL
/* max_nan lane by lane: v where v > best or v is NaN, else best. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 max_nan16(__m512 best,
                                                                                 __m512 v) {
    __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                     _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(best, take, v);
}

/* The same with AVX-512, 16 outputs at a time: the two rows' maxima lane by lane, then the
 * even and odd columns of those (vpermt2ps), then their maxima; a row's last vector masked.
 * The compiler's own vectorisation of the loop above took 1.3 cycles per output. */
__attribute__((target("avx512f"))) static void max_pool_2x2_rows__avx512(void *arg,
                                                                          size_t begin,
                                                                          size_t end) {
    const pool_job *job = arg;
    const rt_pool_dims *d = job->dims;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    /* (plane, oh) is stepped along, not divided out of each row: a division per 32-wide row
     * cost as much as its pooling. */
    int64_t plane = (int64_t)begin / d->out_h, oh = (int64_t)begin % d->out_h;
    for (size_t row = begin; row < end; row++, oh++) {
        if (oh == d->out_h) {
            plane++;
            oh = 0;
        }
        const float *top = (const float *)job->x + (plane * d->height + 2 * oh) * d->width;
        const float *bottom = top + d->width;
        float *out = (float *)job->out + plane * d->out_plane + oh * d->out_w;
        int64_t ow = 0;
        /* Whole vectors with plain loads and stores (masked ones cost several times as much
         * on AMD Zen 4), and plain maxima unless an input is NaN. */
        for (; ow + 16 <= d->out_w; ow += 16) {
            const float *t = top + 2 * ow, *b = bottom + 2 * ow;
            __m512 t0 = _mm512_loadu_ps(t), t1 = _mm512_loadu_ps(t + 16);
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
            __m512 r;
            if ((_mm512_cmp_ps_mask(t0, b0, _CMP_UNORD_Q) |
                 _mm512_cmp_ps_mask(t1, b1, _CMP_UNORD_Q)) == 0) {
                /* max returns its second operand on a tie: the first, as max_nan16 keeps */
                __m512 v0 = _mm512_max_ps(b0, t0), v1 = _mm512_max_ps(b1, t1);
                r = _mm512_max_ps(_mm512_permutex2var_ps(v0, odd, v1),
                                  _mm512_permutex2var_ps(v0, even, v1));
            } else {
                __m512 v0 = max_nan16(t0, b0), v1 = max_nan16(t1, b1);
                r = max_nan16(_mm512_permutex2var_ps(v0, even, v1),
                              _mm512_permutex2var_ps(v0, odd, v1));
            }
            _mm512_storeu_ps(out + ow, r);
        }
        if (ow < d->out_w) {
            int64_t n = d->out_w - ow; /* outputs, 2n inputs */
            __mmask16 lo = rt_lane_mask__16(0, 2 * n), hi = rt_lane_mask__16(0, 2 * n - 16);
            const float *t = top + 2 * ow, *b = bottom + 2 * ow;
            __m512 v0 = max_nan16(_mm512_maskz_loadu_ps(lo, t), _mm512_maskz_loadu_ps(lo, b));
            __m512 v1 = max_nan16(_mm512_maskz_loadu_ps(hi, t + 16),
                                  _mm512_maskz_loadu_ps(hi, b + 16));
            __m512 r = max_nan16(_mm512_permutex2var_ps(v0, even, v1),
                                 _mm512_permutex2var_ps(v0, odd, v1));
            _mm512_mask_storeu_ps(out + ow, rt_lane_mask__16(0, n), r);
        }
    }
}
#endif

static bool is_inner_2x2(const rt_pool_dims *d) {
    return d->kernel[0] == 2 && d->kernel[1] == 2 && d->stride[0] == 2 && d->stride[1] == 2 &&
           d->dilation[0] == 1 && d->dilation[1] == 1 && d->pad[0] == 0 && d->pad[1] == 0 &&
           d->pad[2] == 0 && d->pad[3] == 0 && 2 * d->out_h <= d->height &&
           2 * d->out_w <= d->width;
}

static rt_range_fn max_pool_kernel_for(rt_type type) {
    switch (type) {
    case RT_F32: return max_pool_rows__f32;
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

/* ---- avg -------------------------------------------------------------------------------- */

/* Sums of one window row. float32 adds in 32 independent lanes (so the loop vectorises into
 * four vector sums, not bound by the latency of one chain of adds: with eight lanes, one
 * chain, global pooling ran at a vector add per 4 cycles), folded to 8 lanes for the rest of
 * the row, and those combined in double. */
static inline double row_sum_f32(const float *x, int64_t n) {
    float wide[32] = {0}, lanes[8];
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 32; j++)
            wide[j] += x[i + j];
    for (int j = 0; j < 8; j++)
        lanes[j] = (wide[j] + wide[j + 8]) + (wide[j + 16] + wide[j + 24]);
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lanes[j] += x[i + j];
    double sum = 0;
    for (int j = 0; j < 8; j++)
        sum += lanes[j];
    for (; i < n; i++)
        sum += x[i];
    return sum;
}

static inline double row_sum_f64(const double *x, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    return sum;
}

/* The divisor is the window clipped to the padded input (count_include_pad) or the number of
 * input elements in it; a window with nothing to count gives 0. */
#define DEFINE_AVG_POOL(sfx, T, ACC, ROW_SUM)                                                 \
    RT_MULTIVERSION static void avg_pool_rows__##sfx(void *arg, size_t begin, size_t end)     \
    {                                                                                         \
        const pool_job *job = arg;                                                            \
        const rt_pool_dims *d = job->dims;                                                       \
        for (size_t row = begin; row < end; row++) {                                          \
            int64_t plane = (int64_t)row / d->out_h, oh = (int64_t)row % d->out_h;            \
            const T *x = (const T *)job->x + plane * d->height * d->width;                    \
            T *out = (T *)job->out + (int64_t)row * d->out_w;                                 \
            int64_t h0 = oh * d->stride[0] - d->pad[0];                                       \
            int64_t h1 = h0 + d->kernel[0];                                                   \
            if (h1 > d->height + d->pad[2])                                                   \
                h1 = d->height + d->pad[2];                                                   \
            int64_t padded_h = h1 - h0;                                                       \
            int64_t ih0 = h0 > 0 ? h0 : 0, ih1 = h1 < d->height ? h1 : d->height;             \
            for (int64_t ow = 0; ow < d->out_w; ow++) {                                       \
                int64_t w0 = ow * d->stride[1] - d->pad[1];                                   \
                int64_t w1 = w0 + d->kernel[1];                                               \
                if (w1 > d->width + d->pad[3])                                                \
                    w1 = d->width + d->pad[3];                                                \
                int64_t padded_w = w1 - w0;                                                   \
                int64_t iw0 = w0 > 0 ? w0 : 0, iw1 = w1 < d->width ? w1 : d->width;           \
                ACC sum = 0;                                                                  \
                if (iw0 == 0 && iw1 == d->width) /* whole rows (global pooling): one run */    \
                    sum = ih1 > ih0 ? ROW_SUM(x + ih0 * d->width, (ih1 - ih0) * d->width) : 0; \
                else                                                                          \
                    for (int64_t ih = ih0; ih < ih1; ih++)                                    \
                        sum += ROW_SUM(x + ih * d->width + iw0, iw1 - iw0);                   \
                int64_t real_h = ih1 > ih0 ? ih1 - ih0 : 0;                                   \
                int64_t real_w = iw1 > iw0 ? iw1 - iw0 : 0;                                   \
                int64_t count = d->count_include_pad ? padded_h * padded_w : real_h * real_w; \
                out[ow] = count > 0 ? (T)(sum / (ACC)count) : (T)0;                           \
            }                                                                                 \
        }                                                                                     \
    }
DEFINE_AVG_POOL(f32, float, double, row_sum_f32)
DEFINE_AVG_POOL(f64, double, double, row_sum_f64)

/* ---- ops -------------------------------------------------------------------------------- */

typedef struct pool_args {
    rt_tensor_value *x, *out;
    rt_pool_dims dims;
} pool_args;

/* The output sizes for an input of height x width, once the window parameters are in d. */
static rt_status window_sizes(rt_op_ctx *ctx, int64_t height, int64_t width, rt_pool_dims *d) {
    d->height = height;
    d->width = width;
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "height", d->height, d->pad[0], d->pad[2],
                                            d->kernel[0], d->stride[0], d->dilation[0],
                                            d->ceil_mode, &d->out_h));
    RT_RETURN_IF_ERROR(rt_op__window_output(ctx, "width", d->width, d->pad[1], d->pad[3],
                                            d->kernel[1], d->stride[1], d->dilation[1],
                                            d->ceil_mode, &d->out_w));
    d->out_plane = rt_op__mul_sat(d->out_h, d->out_w);
    return RT_OK;
}

/* Tensor checks and the output shape, once the window parameters are in args->dims. */
static rt_status pool_shape(rt_op_ctx *ctx, pool_args *args, uint32_t types,
                            const char *expected) {
    rt_pool_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->x, "x", types, expected));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->out, "out", args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->x, "x", 4));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->x, "x"));

    const int64_t *xs = args->x->sizes;
    if (!rt_op__mul(xs[0], xs[1], &d->planes))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the batch and channel sizes overflow");
    RT_RETURN_IF_ERROR(window_sizes(ctx, xs[2], xs[3], d));
    int64_t sizes[4] = {xs[0], xs[1], d->out_h, d->out_w};
    return rt_op__set_output_sizes(ctx, args->out, "out", 4, sizes);
}

/* Every output row through `kernel`, on up to `threads` threads. */
static void pool_rows(const rt_pool_dims *d, rt_range_fn kernel, const void *x, void *out,
                      int32_t threads) {
    pool_job job = {.dims = d, .x = x, .out = out};
    int64_t work = rt_op__mul_sat(d->out_w, rt_op__mul_sat(d->kernel[0], d->kernel[1]));
    rt_parallel__for(threads, (size_t)rt_op__mul_sat(d->planes, d->out_h), rt_op__grain(work),
                     kernel, &job);
}

static rt_status run_pool(rt_op_ctx *ctx, const pool_args *args, rt_range_fn kernel) {
    const rt_pool_dims *d = &args->dims;
    if (rt_tensor__numel(args->out) == 0)
        return RT_OK;
    if (!kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args->x->type));
    pool_rows(d, kernel, args->x->data, args->out->data, rt_op__threads(ctx));
    return RT_OK;
}

/* max_pool2d's (kernel, stride, padding, dilation, ceil_mode) from arguments first.. */
static rt_status max_window_params(rt_op_ctx *ctx, size_t first, rt_pool_dims *d) {
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first, "kernel", 1, d->kernel));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first + 1, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, first + 2, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, first + 3, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, first + 4, "ceil_mode", &d->ceil_mode));
    d->count_include_pad = false;
    return RT_OK;
}

rt_status rt_pool__max_window(rt_op_ctx *ctx, size_t first, int64_t height, int64_t width,
                              rt_pool_dims *d) {
    RT_RETURN_IF_ERROR(max_window_params(ctx, first, d));
    return window_sizes(ctx, height, width, d);
}

/* The float32 kernel for these dims: the 2x2 loops where they apply. */
static rt_range_fn max_pool_f32_kernel(const rt_pool_dims *d) {
    if (!is_inner_2x2(d))
        return max_pool_rows__f32;
#ifdef HAVE_AVX512_POOL
    if (rt_gemm__f32_avx512())
        return max_pool_2x2_rows__avx512;
#endif
    return max_pool_2x2_rows__f32;
}

void rt_pool__max_f32_rows(const rt_pool_dims *d, const float *x, float *out, size_t begin,
                           size_t end) {
    pool_job job = {.dims = d, .x = x, .out = out};
    max_pool_f32_kernel(d)(&job, begin, end);
}

void rt_pool__max_f32(const rt_pool_dims *d, const float *x, float *out, int32_t threads) {
    pool_rows(d, max_pool_f32_kernel(d), x, out, threads);
}

/* max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, out) */
static rt_status max_pool_setup(rt_op_ctx *ctx, pool_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(max_window_params(ctx, 1, &args->dims));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "out", &args->out));
    return pool_shape(ctx, args, RT_TYPES_NUMERIC, "float32, float64 and the integer types");
}

rt_status rt_ops__max_pool2d_prepare(rt_op_ctx *ctx) {
    pool_args args;
    return max_pool_setup(ctx, &args);
}

rt_status rt_ops__max_pool2d_run(rt_op_ctx *ctx) {
    pool_args args;
    RT_RETURN_IF_ERROR(max_pool_setup(ctx, &args));
    if (args.x->type == RT_F32)
        return run_pool(ctx, &args, max_pool_f32_kernel(&args.dims));
    return run_pool(ctx, &args, max_pool_kernel_for(args.x->type));
}

/* avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, out) */
static rt_status avg_pool_setup(rt_op_ctx *ctx, pool_args *args) {
    rt_pool_dims *d = &args->dims;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 1, "kernel", 1, d->kernel));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 2, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, 3, "padding", d->pad));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 4, "ceil_mode", &d->ceil_mode));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 5, "count_include_pad", &d->count_include_pad));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "out", &args->out));
    d->dilation[0] = d->dilation[1] = 1;
    return pool_shape(ctx, args, RT_TYPES_FLOAT, "float32 and float64");
}

rt_status rt_ops__avg_pool2d_prepare(rt_op_ctx *ctx) {
    pool_args args;
    return avg_pool_setup(ctx, &args);
}

rt_status rt_ops__avg_pool2d_run(rt_op_ctx *ctx) {
    pool_args args;
    RT_RETURN_IF_ERROR(avg_pool_setup(ctx, &args));
    return run_pool(ctx, &args,
                    args.x->type == RT_F32 ? avg_pool_rows__f32 : avg_pool_rows__f64);
}
