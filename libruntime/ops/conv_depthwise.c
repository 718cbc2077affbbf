/* conv_depthwise.c: float32 convolution with one input channel per output channel.
 *
 * Each output row is computed in chunks of up to CHUNK columns. For every
 * kernel row the needed span of the input row is copied once into `stride` phase buffers
 * (phase r holds columns stride * i + r, zero outside the image), which turns every tap into a
 * contiguous run: no per-pixel bounds checks, padding for free, and strided convolutions
 * vectorise like unit-stride ones. Eight outputs at a time then sum every tap in a register,
 * and the activation runs on the chunk while it is in L1. */
#include <string.h>

#include "core/multiversion.h"
#include "core/threadpool.h"
#include "ops/conv.h"
#include "ops/op_util.h"

#define CHUNK 128       /* output columns per accumulator */
#define MAX_STRIDE 4
#define MAX_REACH 64    /* (kernel_w - 1) * dilation_w */
#define MAX_KERNEL_W 16
#define MAX_KERNEL_H 8
#define BAND 8          /* output rows per work item */

bool rt_conv__depthwise_fits(const conv_dims *d) {
    return d->channels / d->groups == 1 && d->stride[1] >= 1 && d->stride[1] <= MAX_STRIDE &&
           d->kernel_h <= MAX_KERNEL_H && d->kernel_w <= MAX_KERNEL_W && (d->kernel_w - 1) * d->dilation[1] <= MAX_REACH;
}

typedef struct depthwise_job {
    const conv_dims *d;
    const float *x, *w, *bias;
    const rt_activation *act;
    float *out;
    int64_t bands;
} depthwise_job;

/* phase[r][i] = row[s * (first + i) + r - pad_left], or 0 outside [0, width), i < count:
 * zeros, one run of copies, zeros. */
static inline __attribute__((always_inline)) void fill_phases(const conv_dims *d, const float *row, int64_t first, int64_t count,
                        float *phases, int64_t phase_len) {
    int64_t s = d->stride[1];
    for (int64_t r = 0; r < s; r++) {
        float *ph = phases + r * phase_len;
        int64_t col0 = s * first + r - d->pad[1]; /* the column of i = 0 */
        int64_t lo = col0 >= 0 ? 0 : rt_op__ceil_div(-col0, s);
        int64_t hi = d->width > col0 ? rt_op__ceil_div(d->width - col0, s) : 0;
        if (hi > count)
            hi = count;
        if (lo > hi)
            lo = hi;
        memset(ph, 0, (size_t)lo * sizeof(float));
        if (s == 1) {
            memcpy(ph + lo, row + (col0 + lo), (size_t)(hi - lo) * sizeof(float));
        } else {
            for (int64_t i = lo; i < hi; i++)
                ph[i] = row[col0 + s * i];
        }
        memset(ph + hi, 0, (size_t)(count - hi) * sizeof(float));
    }
}

/* Eight floats; memcpy in and out of it compiles to unaligned vector loads and stores. */
typedef float vec8 __attribute__((vector_size(32)));

RT_MULTIVERSION static void depthwise_rows(void *arg, size_t begin, size_t end) {
    const depthwise_job *job = arg;
    const conv_dims *d = job->d;
    int64_t s = d->stride[1], group_out = d->out_channels / d->groups;
    int64_t kh_count = d->kernel_h, kw_count = d->kernel_w;
    int64_t reach_q = (kw_count - 1) * d->dilation[1] / s; /* extra phase entries */
    int64_t phase_len = CHUNK + reach_q;
    float phases[MAX_KERNEL_H][MAX_STRIDE * (CHUNK + MAX_REACH)] __attribute__((aligned(64)));
    const float *taps[MAX_KERNEL_H * MAX_KERNEL_W]; /* where each live tap reads the chunk */
    float weights[MAX_KERNEL_H * MAX_KERNEL_W];
    int64_t tap_offset[MAX_KERNEL_W], tap_phase[MAX_KERNEL_W];
    for (int64_t kw = 0; kw < kw_count; kw++) {
        tap_offset[kw] = kw * d->dilation[1] / s;
        tap_phase[kw] = kw * d->dilation[1] % s;
    }
    for (size_t item = begin; item < end; item++) {
        int64_t plane = (int64_t)item / job->bands, band = (int64_t)item % job->bands;
        int64_t n = plane / d->out_channels, o = plane % d->out_channels;
        const float *x = job->x + (n * d->channels + o / group_out) * d->height * d->width;
        const float *w = job->w + o * kh_count * kw_count;
        float b = job->bias != NULL ? job->bias[o] : 0.0f;
        float *out = job->out + plane * d->out_h * d->out_w;
        int64_t row1 = (band + 1) * BAND < d->out_h ? (band + 1) * BAND : d->out_h;
        for (int64_t oh = band * BAND; oh < row1; oh++) {
            for (int64_t ow0 = 0; ow0 < d->out_w; ow0 += CHUNK) {
                int64_t count = d->out_w - ow0 < CHUNK ? d->out_w - ow0 : CHUNK;
                int64_t span = count + reach_q, start = ow0 - d->pad[1];
                /* The input rows this output row reads; rows in the padding add nothing. */
                int ntaps = 0;
                for (int64_t kh = 0; kh < kh_count; kh++) {
                    int64_t ih = oh * d->stride[0] - d->pad[0] + kh * d->dilation[0];
                    if (ih < 0 || ih >= d->height)
                        continue;
                    const float *row = x + ih * d->width, *base = phases[kh];
                    int64_t len = phase_len;
                    if (s == 1 && start >= 0 && start + span <= d->width) {
                        base = row + start; /* inside the image: read the row itself */
                        len = 0;
                    } else {
                        fill_phases(d, row, ow0, span, phases[kh], phase_len);
                    }
                    for (int64_t kw = 0; kw < kw_count; kw++) {
                        taps[ntaps] = base + tap_phase[kw] * len + tap_offset[kw];
                        weights[ntaps++] = w[kh * kw_count + kw];
                    }
                }
                /* Eight outputs at a time, every tap accumulated in a register. */
                float *dst = out + oh * d->out_w + ow0;
                int64_t i = 0;
                for (; i + 8 <= count; i += 8) {
                    vec8 acc = {b, b, b, b, b, b, b, b};
                    for (int t = 0; t < ntaps; t++) {
                        vec8 v;
                        memcpy(&v, taps[t] + i, sizeof v);
                        acc += weights[t] * v;
                    }
                    memcpy(dst + i, &acc, sizeof acc);
                }
                for (; i < count; i++) {
                    float acc = b;
                    for (int t = 0; t < ntaps; t++)
                        acc += weights[t] * taps[t][i];
                    dst[i] = acc;
                }
                rt_activation__apply(job->act, dst, count);
            }
        }
    }
}

void rt_conv__depthwise_f32(const conv_dims *d, const float *x, const float *w,
                            const float *bias, const rt_activation *act, float *out,
                            int32_t threads) {
    depthwise_job job = {d, x, w, bias, act, out, (d->out_h + BAND - 1) / BAND};
    /* Bounded by the output's element count. */
    int64_t items = d->batch * d->out_channels * job.bands;
    int64_t rows = d->out_h < BAND ? d->out_h : BAND;
    int64_t work = rt_op__mul_sat(rt_op__mul_sat(rows, d->out_w),
                                  rt_op__mul_sat(d->kernel_h, d->kernel_w));
    rt_parallel_for(threads, (size_t)items, rt_op__grain(work), depthwise_rows, &job);
}
