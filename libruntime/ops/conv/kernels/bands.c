/* bands.c: the convolution every other algorithm falls back to, in float32 and float64: each
 * output plane is accumulated one (input channel, kernel tap) at a time over the range of
 * output positions whose input tap lies inside the image, so padding costs nothing and needs
 * no scratch buffer. Work is split into bands of output rows. */
#include "core/multiversion.h"
#include "ops/conv/conv.h"
#include "ops/op_util.h"

/* Output rows per work item. */
#define CONV_BAND 16

typedef struct conv_job {
    const conv_dims *dims;
    const void *x, *w, *bias; /* bias may be NULL */
    void *out;
    int64_t bands;
} conv_job;

#define DEFINE_CONV_BANDS(sfx, T)                                                            \
    RT_MULTIVERSION static void conv_bands__##sfx(void *arg, size_t begin, size_t end)       \
    {                                                                                        \
        const conv_job *job = arg;                                                           \
        const conv_dims *d = job->dims;                                                      \
        const T *x = job->x, *w = job->w, *bias = job->bias;                                 \
        int64_t group_in = d->channels / d->groups, group_out = d->out_channels / d->groups; \
        int64_t plane_in = d->height * d->width, plane_out = d->out_h * d->out_w;            \
        int64_t taps = d->kernel_h * d->kernel_w;                                            \
        int64_t sh = d->stride[0], sw = d->stride[1];                                        \
        for (size_t item = begin; item < end; item++) {                                      \
            int64_t plane = (int64_t)item / job->bands; /* n * out_channels + o */           \
            int64_t band = (int64_t)item % job->bands;                                       \
            int64_t n = plane / d->out_channels, o = plane % d->out_channels;                \
            int64_t row0 = band * CONV_BAND;                                                 \
            int64_t row1 = row0 + CONV_BAND < d->out_h ? row0 + CONV_BAND : d->out_h;        \
            T *out = (T *)job->out + plane * plane_out;                                      \
            T b = bias ? bias[o] : (T)0;                                                     \
            for (int64_t i = row0 * d->out_w; i < row1 * d->out_w; i++)                      \
                out[i] = b;                                                                  \
            int64_t first_channel = o / group_out * group_in;                                \
            for (int64_t c = 0; c < group_in; c++) {                                         \
                const T *xp = x + (n * d->channels + first_channel + c) * plane_in;          \
                const T *wp = w + (o * group_in + c) * taps;                                 \
                for (int64_t kh = 0; kh < d->kernel_h; kh++) {                               \
                    int64_t off_h = kh * d->dilation[0] - d->pad[0];                         \
                    int64_t oh0, oh1;                                                        \
                    rt_conv__output_range(off_h, sh, d->height, d->out_h, &oh0, &oh1);       \
                    if (oh0 < row0)                                                          \
                        oh0 = row0;                                                          \
                    if (oh1 > row1)                                                          \
                        oh1 = row1;                                                          \
                    for (int64_t kw = 0; kw < d->kernel_w; kw++) {                           \
                        int64_t off_w = kw * d->dilation[1] - d->pad[1];                     \
                        int64_t ow0, ow1;                                                    \
                        rt_conv__output_range(off_w, sw, d->width, d->out_w, &ow0, &ow1);    \
                        const T wv = wp[kh * d->kernel_w + kw];                              \
                        for (int64_t oh = oh0; oh < oh1; oh++) {                             \
                            const T *xr = xp + (oh * sh + off_h) * d->width;                 \
                            T *orow = out + oh * d->out_w;                                   \
                            if (sw == 1)                                                     \
                                for (int64_t ow = ow0; ow < ow1; ow++)                       \
                                    orow[ow] += wv * xr[ow + off_w];                         \
                            else                                                             \
                                for (int64_t ow = ow0; ow < ow1; ow++)                       \
                                    orow[ow] += wv * xr[ow * sw + off_w];                    \
                        }                                                                    \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_CONV_BANDS(f32, float)
DEFINE_CONV_BANDS(f64, double)

typedef struct activation_job {
    const rt_activation *act;
    float *out;
} activation_job;

static void activation_range(void *arg, size_t begin, size_t end) {
    const activation_job *job = arg;
    rt_activation__apply(job->act, job->out + begin, (int64_t)(end - begin));
}

void rt_conv__bands(const conv_dims *d, rt_type type, const void *x, const void *w,
                    const void *bias, const rt_activation *act, void *out, int32_t threads) {
    conv_job job = {
        .dims = d,
        .x = x,
        .w = w,
        .bias = bias,
        .out = out,
        .bands = (d->out_h + CONV_BAND - 1) / CONV_BAND,
    };
    /* Bounded by the output's element count. */
    int64_t items = d->batch * d->out_channels * job.bands;
    int64_t band_rows = d->out_h < CONV_BAND ? d->out_h : CONV_BAND;
    int64_t work = rt_op__mul_sat(rt_op__mul_sat(band_rows, d->out_w),
                                  rt_op__mul_sat(d->channels / d->groups,
                                                 rt_op__mul_sat(d->kernel_h, d->kernel_w)));
    rt_range_fn kernel = type == RT_F32 ? conv_bands__f32 : conv_bands__f64;
    rt_parallel__for(threads, (size_t)items, rt_op__grain(work), kernel, &job);
    if (act->kind != RT_ACT_NONE) {
        /* The bands accumulate in place; activate in a second pass. */
        activation_job second = {act, out};
        int64_t numel = rt_op__mul_sat(rt_op__mul_sat(d->batch, d->out_channels),
                                       rt_op__mul_sat(d->out_h, d->out_w));
        rt_parallel__for(threads, (size_t)numel, rt_op__grain(4), activation_range, &second);
    }
}

