/* conv_int8.c: the integer convolution of conv_integer and qlinear_conv: 2-D cross-correlation
 * of int8 or uint8 x and w minus their zero points (x's per tensor, w's per tensor or per output
 * channel), summed in int32 with wrap-around, then stored as int32 or, with an int32 bias added,
 * requantized to int8 / uint8. Taps in the padding contribute nothing (as if padded with x's
 * zero point). Work items are tiles of one output plane summed in a local buffer, so
 * requantizing needs no scratch. */
#include <string.h>

#include "ops/conv/conv.h"
#include "ops/quant/quant.h"

typedef rt_quant_conv_job qconv_job; /* quant.h */

/* The tile of plane (n, o): rows [r0, r1), columns [c0, c1). */
typedef struct qconv_tile {
    int64_t n, o, r0, r1, c0, c1;
    int32_t w_zero;
    uint32_t acc[RT_QUANT_CONV_TILE]; /* row-major, tile_cols apart */
} qconv_tile;

#define DEFINE_QCONV_SUM(sfx, TX, TW)                                                       \
    static void tile_sum__##sfx(const qconv_job *job, qconv_tile *t) {                      \
        const conv_dims *d = job->d;                                                       \
        int64_t group_in = d->channels / d->groups, group_out = d->out_channels / d->groups; \
        int64_t plane_in = d->height * d->width, taps = d->kernel_h * d->kernel_w;          \
        int64_t sh = d->stride[0], sw = d->stride[1], cols = job->tile_cols;                \
        int64_t first = t->o / group_out * group_in;                                        \
        const int16_t xz = (int16_t)job->x_zero;                                            \
        for (int64_t c = 0; c < group_in; c++) {                                            \
            const TX *xp = (const TX *)job->x + (t->n * d->channels + first + c) * plane_in; \
            const TW *wp = (const TW *)job->w + (t->o * group_in + c) * taps;               \
            for (int64_t kh = 0; kh < d->kernel_h; kh++) {                                  \
                int64_t off_h = kh * d->dilation[0] - d->pad[0], oh0, oh1;                  \
                rt_conv__output_range(off_h, sh, d->height, d->out_h, &oh0, &oh1);          \
                oh0 = oh0 < t->r0 ? t->r0 : oh0;                                            \
                oh1 = oh1 > t->r1 ? t->r1 : oh1;                                            \
                for (int64_t kw = 0; kw < d->kernel_w; kw++) {                              \
                    int64_t off_w = kw * d->dilation[1] - d->pad[1], ow0, ow1;              \
                    rt_conv__output_range(off_w, sw, d->width, d->out_w, &ow0, &ow1);       \
                    ow0 = ow0 < t->c0 ? t->c0 : ow0;                                        \
                    ow1 = ow1 > t->c1 ? t->c1 : ow1;                                        \
                    int16_t wv = (int16_t)(wp[kh * d->kernel_w + kw] - t->w_zero);          \
                    for (int64_t oh = oh0; oh < oh1 && wv != 0; oh++) {                     \
                        const TX *xr = xp + (oh * sh + off_h) * d->width;                   \
                        uint32_t *row = t->acc + (oh - t->r0) * cols;                       \
                        if (sw == 1)                                                        \
                            for (int64_t ow = ow0; ow < ow1; ow++)                          \
                                row[ow - t->c0] +=                                          \
                                    (uint32_t)(wv * (int16_t)(xr[ow + off_w] - xz));        \
                        else                                                                \
                            for (int64_t ow = ow0; ow < ow1; ow++)                          \
                                row[ow - t->c0] +=                                          \
                                    (uint32_t)(wv * (int16_t)(xr[ow * sw + off_w] - xz));   \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }
DEFINE_QCONV_SUM(i8_i8, int8_t, int8_t)
DEFINE_QCONV_SUM(i8_u8, int8_t, uint8_t)
DEFINE_QCONV_SUM(u8_i8, uint8_t, int8_t)
DEFINE_QCONV_SUM(u8_u8, uint8_t, uint8_t)

static void tile_sum(const qconv_job *job, qconv_tile *t) {
    bool x8 = job->x_type == RT_I8, w8 = job->w_type == RT_I8;
    if (x8)
        w8 ? tile_sum__i8_i8(job, t) : tile_sum__i8_u8(job, t);
    else
        w8 ? tile_sum__u8_i8(job, t) : tile_sum__u8_u8(job, t);
}

/* Index of output channel o's entry in a per-tensor or per-channel parameter. */
static int64_t channel_index(const rt_tensor_value *p, int64_t o) {
    return rt_tensor__numel(p) == 1 ? 0 : o;
}

static void tile_store(const qconv_job *job, const qconv_tile *t) {
    const conv_dims *d = job->d;
    int64_t plane = (t->n * d->out_channels + t->o) * d->out_h * d->out_w;
    double mult = 0.0;
    uint32_t bias = job->bias ? (uint32_t)job->bias[t->o] : 0u;
    if (job->y_scale)
        mult = rt_quant__multiplier(job->scale_type, job->x_scale, 0, job->w_scale->data,
                                    channel_index(job->w_scale, t->o), job->y_scale, 0);
    for (int64_t r = t->r0; r < t->r1; r++) {
        const uint32_t *row = t->acc + (r - t->r0) * job->tile_cols;
        int64_t base = plane + r * d->out_w;
        if (!job->y_scale) {
            int32_t *o = (int32_t *)job->out + base;
            for (int64_t c = t->c0; c < t->c1; c++)
                o[c] = rt_quant__as_i32(row[c - t->c0]);
            continue;
        }
        for (int64_t c = t->c0; c < t->c1; c++) {
            int32_t acc = rt_quant__as_i32(row[c - t->c0] + bias);
            int64_t q = rt_quant__requantize(acc, mult, job->y_zero, job->lo, job->hi);
            rt_quant__store8(job->out, job->out_type, base + c, q);
        }
    }
}

void rt_quant__conv_tiles(void *arg, size_t begin, size_t end) {
    const qconv_job *job = arg;
    const conv_dims *d = job->d;
    qconv_tile t;
    int64_t tiles = job->row_tiles * job->col_tiles;
    for (size_t item = begin; item < end; item++) {
        int64_t plane = (int64_t)item / tiles, tile = (int64_t)item % tiles;
        t.n = plane / d->out_channels, t.o = plane % d->out_channels;
        t.r0 = tile / job->col_tiles * job->tile_rows;
        t.c0 = tile % job->col_tiles * job->tile_cols;
        t.r1 = t.r0 + job->tile_rows < d->out_h ? t.r0 + job->tile_rows : d->out_h;
        t.c1 = t.c0 + job->tile_cols < d->out_w ? t.c0 + job->tile_cols : d->out_w;
        t.w_zero = job->w_zero ? (int32_t)rt_quant__load_int(job->w_zero->data, job->w_zero->type,
                                                             channel_index(job->w_zero, t.o))
                               : 0;
        memset(t.acc, 0, sizeof t.acc);
        tile_sum(job, &t);
        tile_store(job, &t);
    }
}
