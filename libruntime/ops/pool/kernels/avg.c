/* avg.c: average pooling in float32 and float64, output row by output row. */
#include "core/multiversion.h"
#include "ops/op_util.h"
#include "ops/pool/pool.h"

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
        const rt_pool_job *job = arg;                                                            \
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

rt_range_fn rt_pool__avg_kernel(rt_type type) {
    return type == RT_F32 ? avg_pool_rows__f32 : type == RT_F64 ? avg_pool_rows__f64 : NULL;
}
