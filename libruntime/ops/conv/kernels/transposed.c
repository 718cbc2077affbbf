/* transposed.c: 2-D transposed convolution, float32 and float64.
 *
 * Input position (i, j) with kernel tap (p, q) adds x * w to output position
 * (i * sh - top + p * dh, j * sw - left + q * dw). Work items are bands of output rows of one
 * output plane, so each item owns the memory it writes: the item scatters every input row
 * whose taps land in its band. The GEMM form multiplies w^T by x with the packed GEMM into a
 * column buffer (one row per output channel and tap) and then scatters the columns (col2im);
 * the direct form applies each tap itself. */
#include <stdint.h>

#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

typedef rt_convt_dims convt_dims;

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

/* The column buffer is capped so that huge images stay on the direct form. */
#define CONVT_MAX_COLUMNS_BYTES ((size_t)1 << 28)

size_t rt_conv__transpose_columns_bytes(const rt_convt_dims *d) {
    int64_t n;
    if (!rt_op__mul(d->group_out, d->kernel_h * d->kernel_w, &n) ||
        !rt_op__mul(n, d->height * d->width, &n) || !rt_op__mul(n, (int64_t)sizeof(float), &n) ||
        (uint64_t)n > CONVT_MAX_COLUMNS_BYTES)
        return SIZE_MAX;
    return ((size_t)n + 63) / 64 * 64;
}

static void gemm_f32(convt_job *job, void *scratch, size_t scratch_bytes, int32_t threads) {
    const convt_dims *d = job->d;
    int64_t group_in = d->channels / d->groups, taps = d->kernel_h * d->kernel_w;
    int64_t plane_in = d->height * d->width, rows = d->group_out * taps;
    float *columns = scratch;
    size_t columns_bytes = rt_conv__transpose_columns_bytes(d);
    void *gemm_scratch = (char *)scratch + columns_bytes;
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
            rt_gemm__f32(&gemm, gemm_scratch, scratch_bytes - columns_bytes, threads);
            int64_t band_rows = d->out_h < CONVT_BAND ? d->out_h : CONVT_BAND;
            int64_t work = rt_op__mul_sat(rt_op__mul_sat(band_rows, d->out_w), taps);
            rt_parallel__for(threads, (size_t)(d->group_out * job->bands), rt_op__grain(work),
                             col2im_bands, job);
        }
    }
}

void rt_conv__transpose(const rt_convt_dims *d, rt_type type, const void *x, const void *w,
                        const void *bias, void *out, void *scratch, size_t scratch_bytes,
                        int32_t threads) {
    convt_job job = {
        .d = d, .x = x, .w = w, .bias = bias, .out = out,
        .bands = (d->out_h + CONVT_BAND - 1) / CONVT_BAND,
    };
    if (scratch != NULL) {
        gemm_f32(&job, scratch, scratch_bytes, threads);
        return;
    }
    /* Bounded by the output's element count. */
    int64_t items = d->batch * d->out_channels * job.bands;
    int64_t band_rows = d->out_h < CONVT_BAND ? d->out_h : CONVT_BAND;
    int64_t work = rt_op__mul_sat(rt_op__mul_sat(band_rows, d->out_w),
                                  rt_op__mul_sat(d->channels / d->groups,
                                                 rt_op__mul_sat(d->kernel_h, d->kernel_w)));
    rt_range_fn kernel = type == RT_F32 ? direct_bands__f32 : direct_bands__f64;
    rt_parallel__for(threads, (size_t)items, rt_op__grain(work), kernel, &job);
}
