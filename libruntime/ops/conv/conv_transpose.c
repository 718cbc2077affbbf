/* conv_transpose.c: 2-D transposed convolution (PyTorch's conv_transpose2d, ONNX's
 * ConvTranspose) with stride, padding (per side, possibly negative), output padding, dilation
 * and groups.
 *
 * Input position (i, j) with kernel tap (p, q) adds x * w to output position
 * (i * sh - top + p * dh, j * sw - left + q * dw). Work items are bands of output rows of one
 * output plane, so each item owns the memory it writes: the item scatters every input row
 * whose taps land in its band. float32 with enough input channels per group first multiplies
 * w^T by x with the packed GEMM into a column buffer (one row per output channel and tap) and
 * then scatters the columns (col2im); otherwise each tap is applied directly. */
#include <inttypes.h>
#include <string.h>

#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct convt_dims {
    int64_t batch, channels, height, width;   /* x */
    int64_t group_out, kernel_h, kernel_w;    /* w: [channels, group_out, kH, kW] */
    int64_t out_channels, out_h, out_w;
    int64_t groups;
    int64_t stride[2], dilation[2], out_pad[2];
    int64_t pad[4]; /* top, left, bottom, right */
} convt_dims;

typedef struct convt_args {
    rt_tensor_value *x, *w, *bias, *out;
    convt_dims dims;
} convt_args;

/* ---- kernels ---------------------------------------------------------------------------- */

/* Output rows per work item. */
#define CONVT_BAND 16

typedef struct convt_job {
    const convt_dims *d;
    const void *x, *w, *bias; /* bias may be NULL */
    const float *columns;     /* GEMM path: [group_out * kH * kW, H * W] of one (image, group) */
    int64_t image, group;     /* GEMM path: which (image, group) the columns hold */
    void *out;
    int64_t bands;
} convt_job;

/* Input positions i in [0, count) whose output i * stride + offset falls in [lo_out, hi_out). */
static void input_range(int64_t offset, int64_t stride, int64_t lo_out, int64_t hi_out,
                        int64_t count, int64_t *lo, int64_t *hi) {
    *lo = rt_op__ceil_div(lo_out - offset, stride);
    *hi = rt_op__floor_div(hi_out - 1 - offset, stride) + 1;
    if (*lo < 0)
        *lo = 0;
    if (*hi > count)
        *hi = count;
}

/* The band's output rows [*row0, *row1) of plane `plane`, filled with the bias. */
#define DEFINE_BAND_START(sfx, T)                                                           \
    static T *band_start__##sfx(const convt_job *job, size_t item, int64_t *row0,          \
                                int64_t *row1, int64_t *o) {                               \
        const convt_dims *d = job->d;                                                      \
        int64_t plane = (int64_t)item / job->bands;                                        \
        *o = plane % d->out_channels;                                                      \
        *row0 = (int64_t)item % job->bands * CONVT_BAND;                                   \
        *row1 = *row0 + CONVT_BAND < d->out_h ? *row0 + CONVT_BAND : d->out_h;             \
        T *out = (T *)job->out + plane * d->out_h * d->out_w;                              \
        T b = job->bias ? ((const T *)job->bias)[*o] : (T)0;                               \
        for (int64_t k = *row0 * d->out_w; k < *row1 * d->out_w; k++)                      \
            out[k] = b;                                                                    \
        return out;                                                                        \
    }

/* out[oh, :] += scale * src[ih, :] for every input row ih of the band, for tap (kh, kw). */
#define DEFINE_SCATTER_TAP(sfx, T)                                                          \
    static void scatter_tap__##sfx(const convt_dims *d, T *out, const T *src, T scale,     \
                                   int64_t kh, int64_t kw, int64_t row0, int64_t row1) {   \
        int64_t off_h = kh * d->dilation[0] - d->pad[0];                                   \
        int64_t off_w = kw * d->dilation[1] - d->pad[1];                                   \
        int64_t ih0, ih1, iw0, iw1, sw = d->stride[1];                                     \
        input_range(off_h, d->stride[0], row0, row1, d->height, &ih0, &ih1);               \
        input_range(off_w, sw, 0, d->out_w, d->width, &iw0, &iw1);                         \
        for (int64_t ih = ih0; ih < ih1; ih++) {                                           \
            const T *s = src + ih * d->width;                                              \
            T *o = out + (ih * d->stride[0] + off_h) * d->out_w;                           \
            if (sw == 1)                                                                   \
                for (int64_t iw = iw0; iw < iw1; iw++)                                     \
                    o[iw + off_w] += scale * s[iw];                                        \
            else                                                                           \
                for (int64_t iw = iw0; iw < iw1; iw++)                                     \
                    o[iw * sw + off_w] += scale * s[iw];                                   \
        }                                                                                  \
    }

/* Direct: every input channel of the group, every tap. */
#define DEFINE_DIRECT(sfx, T)                                                               \
    static void direct_bands__##sfx(void *arg, size_t begin, size_t end) {                 \
        const convt_job *job = arg;                                                        \
        const convt_dims *d = job->d;                                                      \
        const T *x = job->x, *w = job->w;                                                  \
        int64_t group_in = d->channels / d->groups, taps = d->kernel_h * d->kernel_w;      \
        int64_t plane_in = d->height * d->width;                                           \
        for (size_t item = begin; item < end; item++) {                                    \
            int64_t row0, row1, o;                                                         \
            T *out = band_start__##sfx(job, item, &row0, &row1, &o);                       \
            int64_t n = (int64_t)item / job->bands / d->out_channels;                      \
            int64_t g = o / d->group_out, og = o % d->group_out;                           \
            for (int64_t c = g * group_in; c < (g + 1) * group_in; c++) {                  \
                const T *xp = x + (n * d->channels + c) * plane_in;                        \
                const T *wp = w + (c * d->group_out + og) * taps;                          \
                for (int64_t kh = 0; kh < d->kernel_h; kh++)                               \
                    for (int64_t kw = 0; kw < d->kernel_w; kw++)                           \
                        scatter_tap__##sfx(d, out, xp, wp[kh * d->kernel_w + kw], kh, kw,  \
                                           row0, row1);                                    \
            }                                                                              \
        }                                                                                  \
    }

DEFINE_BAND_START(f32, float)
DEFINE_BAND_START(f64, double)
DEFINE_SCATTER_TAP(f32, float)
DEFINE_SCATTER_TAP(f64, double)
DEFINE_DIRECT(f32, float)
DEFINE_DIRECT(f64, double)

/* col2im: items are bands of the group's output planes of image job->image. */
static void col2im_bands(void *arg, size_t begin, size_t end) {
    const convt_job *job = arg;
    const convt_dims *d = job->d;
    int64_t taps = d->kernel_h * d->kernel_w, plane_in = d->height * d->width;
    size_t first = (size_t)((job->image * d->out_channels + job->group * d->group_out) *
                            job->bands);
    for (size_t item = first + begin; item < first + end; item++) {
        int64_t row0, row1, o;
        float *out = band_start__f32(job, item, &row0, &row1, &o);
        const float *cols = job->columns + o % d->group_out * taps * plane_in;
        for (int64_t kh = 0; kh < d->kernel_h; kh++)
            for (int64_t kw = 0; kw < d->kernel_w; kw++)
                scatter_tap__f32(d, out, cols + (kh * d->kernel_w + kw) * plane_in, 1.0f, kh,
                                 kw, row0, row1);
    }
}

/* ---- float32 through the GEMM ----------------------------------------------------------- */

/* The GEMM's depth is the group's input channel count; below this the direct kernel wins.
 * The column buffer is capped so that huge images stay on the direct kernel. */
#define CONVT_GEMM_MIN_DEPTH 8
#define CONVT_MAX_COLUMNS_BYTES ((size_t)1 << 28)

static size_t convt_columns_bytes(const convt_dims *d) {
    int64_t n;
    if (!rt_op__mul(d->group_out, d->kernel_h * d->kernel_w, &n) ||
        !rt_op__mul(n, d->height * d->width, &n) || !rt_op__mul(n, (int64_t)sizeof(float), &n) ||
        (uint64_t)n > CONVT_MAX_COLUMNS_BYTES)
        return SIZE_MAX;
    return ((size_t)n + 63) / 64 * 64;
}

static bool convt_uses_gemm(const convt_args *a) {
    const convt_dims *d = &a->dims;
    return a->x->type == RT_F32 && d->channels / d->groups >= CONVT_GEMM_MIN_DEPTH &&
           d->height * d->width > 0 && convt_columns_bytes(d) != SIZE_MAX;
}

static int32_t convt_threads(const rt_op_ctx *ctx) {
    int32_t threads = rt_op__threads(ctx), most = rt_threadpool__hardware_threads();
    return threads < most ? threads : most;
}

static void convt_f32_gemm(const rt_op_ctx *ctx, convt_job *job) {
    const convt_dims *d = job->d;
    int64_t group_in = d->channels / d->groups, taps = d->kernel_h * d->kernel_w;
    int64_t plane_in = d->height * d->width, rows = d->group_out * taps;
    float *columns = ctx->scratch;
    size_t columns_bytes = convt_columns_bytes(d);
    void *gemm_scratch = (char *)ctx->scratch + columns_bytes;
    int32_t threads = convt_threads(ctx);
    const float *x = job->x, *w = job->w;
    job->columns = columns;
    for (job->image = 0; job->image < d->batch; job->image++) {
        for (job->group = 0; job->group < d->groups; job->group++) {
            /* columns[r, i] = sum_c w[c, r] * x[c, i] over the group's channels c. */
            rt_gemm_f32_args gemm = {
                .m = rows, .n = plane_in, .k = group_in,
                .a = w + job->group * group_in * rows, .a_row_stride = 1, .a_col_stride = rows,
                .b = x + (job->image * d->channels + job->group * group_in) * plane_in,
                .b_row_stride = plane_in, .b_col_stride = 1,
                .c = columns, .c_row_stride = plane_in,
            };
            rt_gemm__f32(&gemm, gemm_scratch, ctx->scratch_bytes - columns_bytes, threads);
            int64_t band_rows = d->out_h < CONVT_BAND ? d->out_h : CONVT_BAND;
            int64_t work = rt_op__mul_sat(rt_op__mul_sat(band_rows, d->out_w), taps);
            rt_parallel__for(threads, (size_t)(d->group_out * job->bands), rt_op__grain(work),
                             col2im_bands, job);
        }
    }
}

/* ---- op --------------------------------------------------------------------------------- */

/* padding: [h, w] or [top, left, bottom, right], each in [-(2^31 - 1), 2^31 - 1]: a negative
 * padding adds output positions (ONNX derives such pads from output_shape). */
static rt_status convt_padding(rt_op_ctx *ctx, size_t index, int64_t out[4]) {
    const int64_t *items = NULL;
    size_t count = 0;
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, index, "padding", &items, &count));
    if (count != 2 && count != 4)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "padding must have 2 items (height, width) or 4 (top, left, bottom, "
                           "right), not %zu",
                           count);
    for (size_t i = 0; i < count; i++)
        if (items[i] < -RT_OP_MAX_WINDOW_PARAM || items[i] > RT_OP_MAX_WINDOW_PARAM)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "padding item %zu is %" PRId64 "; it must be in [%" PRId64
                               ", %" PRId64 "]",
                               i, items[i], -(int64_t)RT_OP_MAX_WINDOW_PARAM,
                               (int64_t)RT_OP_MAX_WINDOW_PARAM);
    for (size_t i = 0; i < 4; i++)
        out[i] = items[count == 4 ? i : i % 2];
    return RT_OK;
}

/* Channel counts of x, w and bias against groups, for the current sizes. */
static rt_status convt_check_channels(rt_op_ctx *ctx, const convt_args *a) {
    const convt_dims *d = &a->dims;
    /* The shapes are formatted only for a message: this runs on every call. */
    char tx[RT_OP_SHAPE_TEXT], tw[RT_OP_SHAPE_TEXT];
#define TX rt_op__shape_text(a->x->sizes, 4, tx)
#define TW rt_op__shape_text(a->w->sizes, 4, tw)
    if (a->w->sizes[0] != d->channels)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "w %s must have one row per input channel of x %s", TW, TX);
    if (d->channels % d->groups != 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "groups %" PRId64 " must divide the input channels of x %s", d->groups,
                           TX);
    if (d->kernel_h < 1 || d->kernel_w < 1)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "w %s has an empty kernel", TW);
    /* Sizes beside a 0 can be anything; the kernels multiply these pairs. */
    int64_t product;
    if (!rt_op__mul(d->kernel_h, d->kernel_w, &product) ||
        !rt_op__mul(d->height, d->width, &product))
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the kernel of w %s or the image of x %s has too many elements", TW, TX);
    if (a->bias && a->bias->sizes[0] != d->out_channels)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "bias has %" PRId64 " elements, but w %s and groups %" PRId64
                           " give %" PRId64 " output channels",
                           a->bias->sizes[0], TW, d->groups, d->out_channels);
#undef TX
#undef TW
    return RT_OK;
}

/* (size - 1) * stride - pad_before - pad_after + dilation * (kernel - 1) + out_pad + 1. */
static rt_status convt_output(rt_op_ctx *ctx, const char *what, int64_t size, int64_t stride,
                              int64_t pad_before, int64_t pad_after, int64_t dilation,
                              int64_t kernel, int64_t out_pad, int64_t *out) {
    int64_t span, extent, total;
    bool ok = rt_op__mul(size, stride, &span) && rt_op__mul(dilation, kernel - 1, &extent) &&
              rt_op__add(span, extent, &total) && total < INT64_MAX / 2;
    if (!ok)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output %s overflows int64", what);
    /* All other terms are below 2^33 in magnitude. */
    int64_t length = total - stride + 1 + out_pad - pad_before - pad_after;
    if (length < 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the output %s would be %" PRId64 " (input %" PRId64 ", padding %" PRId64
                           " + %" PRId64 ")",
                           what, length, size, pad_before, pad_after);
    *out = length;
    return RT_OK;
}

static rt_status convt_setup(rt_op_ctx *ctx, convt_args *a) {
    convt_dims *d = &a->dims;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 9));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &a->w));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &a->bias));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 3, "stride", 1, d->stride));
    RT_RETURN_IF_ERROR(convt_padding(ctx, 4, d->pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 5, "output_padding", 0, d->out_pad));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 6, "dilation", 1, d->dilation));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 7, "groups", &d->groups));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 8, "out", &a->out));
    if (d->groups < 1 || d->groups > RT_OP_MAX_WINDOW_PARAM)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "groups must be in [1, %" PRId64 "], not %" PRId64,
                           (int64_t)RT_OP_MAX_WINDOW_PARAM, d->groups);
    RT_RETURN_IF_ERROR(rt_op__check_conv_tensors(ctx, a->x, a->w, a->bias, a->out));

    const int64_t *xs = a->x->sizes, *ws = a->w->sizes;
    d->batch = xs[0];
    d->channels = xs[1];
    d->height = xs[2];
    d->width = xs[3];
    d->group_out = ws[1];
    d->kernel_h = ws[2];
    d->kernel_w = ws[3];
    if (!rt_op__mul(d->group_out, d->groups, &d->out_channels))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output channel count overflows");
    RT_RETURN_IF_ERROR(convt_check_channels(ctx, a));
    RT_RETURN_IF_ERROR(convt_output(ctx, "height", d->height, d->stride[0], d->pad[0], d->pad[2],
                                    d->dilation[0], d->kernel_h, d->out_pad[0], &d->out_h));
    RT_RETURN_IF_ERROR(convt_output(ctx, "width", d->width, d->stride[1], d->pad[1], d->pad[3],
                                    d->dilation[1], d->kernel_w, d->out_pad[1], &d->out_w));
    int64_t sizes[4] = {d->batch, d->out_channels, d->out_h, d->out_w};
    return rt_op__set_output_sizes(ctx, a->out, "out", 4, sizes);
}

rt_status rt_ops__conv_transpose2d_prepare(rt_op_ctx *ctx) {
    convt_args a;
    RT_RETURN_IF_ERROR(convt_setup(ctx, &a));
    const convt_dims *d = &a.dims;
    if (convt_uses_gemm(&a))
        ctx->scratch_bytes = convt_columns_bytes(d) +
                             rt_gemm__f32_scratch_bytes(d->group_out * d->kernel_h * d->kernel_w,
                                                        d->height * d->width,
                                                        d->channels / d->groups,
                                                        rt_threadpool__hardware_threads());
    return RT_OK;
}

rt_status rt_ops__conv_transpose2d_run(rt_op_ctx *ctx) {
    convt_args a;
    RT_RETURN_IF_ERROR(convt_setup(ctx, &a));
    const convt_dims *d = &a.dims;
    if (rt_tensor__numel(a.out) == 0)
        return RT_OK;
    convt_job job = {
        .d = d, .x = a.x->data, .w = a.w->data, .bias = a.bias ? a.bias->data : NULL,
        .out = a.out->data, .bands = (d->out_h + CONVT_BAND - 1) / CONVT_BAND,
    };
    /* A dynamic x may be smaller now than at prepare: the scratch then still suffices (the
     * GEMM packs B once only if its room is there too). */
    if (convt_uses_gemm(&a) &&
        ctx->scratch_bytes >=
            convt_columns_bytes(d) +
                rt_gemm__f32_scratch_bytes(0, 0, 0, rt_threadpool__hardware_threads())) {
        convt_f32_gemm(ctx, &job);
        return RT_OK;
    }
    /* Bounded by the output's element count. */
    int64_t items = d->batch * d->out_channels * job.bands;
    int64_t band_rows = d->out_h < CONVT_BAND ? d->out_h : CONVT_BAND;
    int64_t work = rt_op__mul_sat(rt_op__mul_sat(band_rows, d->out_w),
                                  rt_op__mul_sat(d->channels / d->groups,
                                                 rt_op__mul_sat(d->kernel_h, d->kernel_w)));
    rt_range_fn kernel = a.x->type == RT_F32 ? direct_bands__f32 : direct_bands__f64;
    rt_parallel__for(rt_op__threads(ctx), (size_t)items, rt_op__grain(work), kernel, &job);
    return RT_OK;
}
