/* conv_depthwise.c: float32 convolution with one input channel per output channel.
 *
 * A thread takes one (image, channel) plane at a time and first copies it once into a padded,
 * stride-phase-split buffer (conv_padded.c). Every tap of every output row then reads a
 * contiguous run of that buffer, so padding costs nothing, strided convolutions vectorise like
 * unit-stride ones, and each output vector (8 columns) sums all its taps in a register before
 * one store; the activation runs on each finished row. */
#include <stdatomic.h>
#include <string.h>

#include "core/multiversion.h"
#include "core/threadpool.h"
#include "ops/conv.h"
#include "ops/op_util.h"

#define MAX_STRIDE 4
#define MAX_TAPS 64 /* kernel_h * kernel_w */

bool rt_conv__depthwise_fits(const conv_dims *d) {
    rt_conv_padded p;
    return d->channels / d->groups == 1 && d->stride[1] >= 1 && d->stride[1] <= MAX_STRIDE &&
           d->kernel_h * d->kernel_w <= MAX_TAPS && rt_conv__padded_layout(d, &p);
}

size_t rt_conv__depthwise_scratch_bytes(const conv_dims *d, int32_t threads) {
    rt_conv_padded p;
    if (!rt_conv__padded_layout(d, &p))
        return 0;
    return (size_t)(threads > 0 ? threads : 1) * (size_t)p.plane_floats * sizeof(float);
}

typedef struct depthwise_job {
    const conv_dims *d;
    const float *x, *w, *bias;
    const rt_activation *act;
    float *out, *scratch;
    rt_conv_padded layout;
    int64_t planes;
    atomic_llong next_plane;
} depthwise_job;

/* Eight floats; memcpy in and out of it compiles to unaligned vector loads and stores. */
typedef float vec8 __attribute__((vector_size(32)));

RT_MULTIVERSION static void depthwise_slots(void *arg, size_t begin, size_t end) {
    depthwise_job *job = arg;
    const conv_dims *d = job->d;
    int64_t group_out = d->out_channels / d->groups, taps = d->kernel_h * d->kernel_w;
    int64_t tap_offset[MAX_TAPS]; /* from the first row of an output row's window */
    for (int64_t kh = 0; kh < d->kernel_h; kh++)
        for (int64_t kw = 0; kw < d->kernel_w; kw++)
            tap_offset[kh * d->kernel_w + kw] = rt_conv__tap_offset(d, &job->layout, kh, kw);
    for (size_t slot = begin; slot < end; slot++) {
        float *buf = job->scratch + slot * job->layout.plane_floats;
        bool zeroed = false;
        for (int64_t plane; (plane = atomic_fetch_add(&job->next_plane, 1)) < job->planes;) {
            int64_t n = plane / d->out_channels, o = plane % d->out_channels;
            rt_conv__fill_padded(d, &job->layout,
                                 job->x + (n * d->channels + o / group_out) * d->height * d->width,
                                 buf, !zeroed);
            zeroed = true;
            const float *w = job->w + o * taps;
            float b = job->bias != NULL ? job->bias[o] : 0.0f;
            float *out = job->out + plane * d->out_h * d->out_w;
            for (int64_t oh = 0; oh < d->out_h; oh++) {
                const float *window = buf + oh * d->stride[0] * job->layout.row_floats;
                float *dst = out + oh * d->out_w;
                int64_t ow = 0;
                /* Four vectors per tap: one weight broadcast and offset serve 32 columns. */
                for (; ow + 32 <= d->out_w; ow += 32) {
                    vec8 a0 = {b, b, b, b, b, b, b, b}, a1 = a0, a2 = a0, a3 = a0;
                    for (int64_t t = 0; t < taps; t++) {
                        const float *src = window + tap_offset[t] + ow;
                        vec8 v0, v1, v2, v3;
                        memcpy(&v0, src, sizeof v0);
                        memcpy(&v1, src + 8, sizeof v1);
                        memcpy(&v2, src + 16, sizeof v2);
                        memcpy(&v3, src + 24, sizeof v3);
                        a0 += w[t] * v0;
                        a1 += w[t] * v1;
                        a2 += w[t] * v2;
                        a3 += w[t] * v3;
                    }
                    memcpy(dst + ow, &a0, sizeof a0);
                    memcpy(dst + ow + 8, &a1, sizeof a1);
                    memcpy(dst + ow + 16, &a2, sizeof a2);
                    memcpy(dst + ow + 24, &a3, sizeof a3);
                }
                for (; ow < d->out_w; ow += 8) {
                    vec8 acc = {b, b, b, b, b, b, b, b};
                    for (int64_t t = 0; t < taps; t++) {
                        vec8 v;
                        memcpy(&v, window + tap_offset[t] + ow, sizeof v);
                        acc += w[t] * v;
                    }
                    int64_t count = d->out_w - ow < 8 ? d->out_w - ow : 8;
                    memcpy(dst + ow, &acc, (size_t)count * sizeof(float));
                }
                rt_activation__apply(job->act, dst, d->out_w);
            }
        }
    }
}

void rt_conv__depthwise_f32(const conv_dims *d, const float *x, const float *w,
                            const float *bias, const rt_activation *act, float *out,
                            void *scratch, int32_t threads) {
    depthwise_job job = {.d = d, .x = x, .w = w, .bias = bias, .act = act, .out = out,
                         .scratch = scratch, .planes = d->batch * d->out_channels};
    rt_conv__padded_layout(d, &job.layout);
    atomic_init(&job.next_plane, 0);
    int64_t plane_work = rt_op__mul_sat(rt_op__mul_sat(d->out_h, d->out_w),
                                        d->kernel_h * d->kernel_w);
    /* Threads beyond one per ~32k multiply-adds of work would only add overhead. */
    int64_t useful = rt_op__mul_sat(plane_work, job.planes) / 32768 + 1;
    if (threads > useful)
        threads = (int32_t)useful;
    if (threads < 1)
        threads = 1;
    rt_parallel_for(threads, (size_t)threads, 1, depthwise_slots, &job);
}
