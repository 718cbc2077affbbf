/* conv_direct.c: float32 convolution (one group) on the GEMM micro-kernels without im2col.
 *
 * The image is copied once into zero-padded, stride-phase-split planes (conv_padded.c). For a
 * block of NR outputs along one output row, the reduction index p = (channel, kh, kw) then reads
 * NR contiguous floats at a fixed offset from the block's first window, so the micro-kernel
 * takes B's rows straight from the planes (rt_gemm_f32_gathered_block) while A is the weights
 * packed once at load. Nothing the size of the column matrix is written, and the input rows a
 * block reads stay in L1 across every panel of output channels.
 *
 * A pointwise convolution (1x1, stride 1, no padding) needs no copy at all: its blocks run
 * along the whole plane of x, each channel one B row, and only a partial last block, whose
 * reads would pass the end of x, is copied aside. */
#include <string.h>

#include "core/threadpool.h"
#include "ops/conv.h"
#include "ops/gemm/gemm.h"
#include "ops/op_util.h"

#define MAX_STRIDE 4
#define MAX_IMAGE_BYTES ((size_t)64 << 20)
#define MIN_DEPTH 16

/* Float offsets of each reduction index's first read, and the padded image, in scratch. */
typedef struct direct_layout {
    bool pointwise;       /* read x in place */
    rt_conv_padded plane; /* otherwise */
    int64_t depth;        /* channels * kernel_h * kernel_w */
    int64_t rows, row_len; /* blocks run along `rows` rows of `row_len` outputs */
    size_t offsets_bytes;  /* depth int64s, rounded to 64 bytes (twice when pointwise) */
    size_t image_floats;   /* the padded planes; pointwise: the last block's copy */
} direct_layout;

static bool is_pointwise(const conv_dims *d) {
    return d->kernel_h == 1 && d->kernel_w == 1 && d->stride[0] == 1 && d->stride[1] == 1 &&
           d->pad[0] == 0 && d->pad[1] == 0 && d->pad[2] == 0 && d->pad[3] == 0;
}

static bool direct_layout_of(const conv_dims *d, direct_layout *l) {
    int64_t mr, nr, kc, taps, depth, floats;
    rt_gemm_f32_tile(&mr, &nr, &kc);
    l->pointwise = is_pointwise(d);
    if (d->groups != 1 || d->stride[1] < 1 || d->stride[1] > MAX_STRIDE ||
        (!l->pointwise && !rt_conv__padded_layout(d, &l->plane)) ||
        !rt_op__mul(d->kernel_h, d->kernel_w, &taps) || !rt_op__mul(d->channels, taps, &depth) ||
        !rt_op__mul(d->channels, l->pointwise ? nr : l->plane.plane_floats, &floats) ||
        (uint64_t)floats > MAX_IMAGE_BYTES / sizeof(float) ||
        (uint64_t)depth > MAX_IMAGE_BYTES / sizeof(int64_t))
        return false;
    l->depth = depth;
    l->rows = l->pointwise ? 1 : d->out_h;
    l->row_len = l->pointwise ? d->out_h * d->out_w : d->out_w;
    l->offsets_bytes = ((size_t)depth * sizeof(int64_t) + 63) / 64 * 64 * (l->pointwise ? 2 : 1);
    l->image_floats = (size_t)floats;
    return true;
}

bool rt_conv__direct_fits(const conv_dims *d) {
    direct_layout l;
    if (!direct_layout_of(d, &l) || l.depth < MIN_DEPTH || l.row_len < 1)
        return false;
    /* Blocks run NR columns along one output row: a row much narrower than NR would waste
     * most of each block, where im2col's columns run on across rows. At most a quarter. */
    int64_t mr, nr, kc;
    rt_gemm_f32_tile(&mr, &nr, &kc);
    int64_t computed = (l.row_len + nr - 1) / nr * nr;
    return 4 * (computed - l.row_len) <= computed;
}

size_t rt_conv__direct_scratch_bytes(const conv_dims *d) {
    direct_layout l;
    if (!direct_layout_of(d, &l))
        return 0;
    return l.offsets_bytes + l.image_floats * sizeof(float);
}

typedef struct direct_job {
    const conv_dims *d;
    const direct_layout *l;
    const float *x, *packed_w, *bias;
    const rt_activation *act;
    float *out, *image;
    const int64_t *offsets;
    const int64_t *tail_offsets; /* pointwise: the last block's copy, row p at p * NR */
    const float *clamp;          /* the activation as the kernels' clamp, or NULL */
    bool act_pass;               /* an activation the kernels cannot apply */
    float clamp_values[2];
    int64_t mr, nr, kc, blocks_per_row, row_step;
} direct_job;

static void fill_channels(void *arg, size_t begin, size_t end) {
    const direct_job *job = arg;
    const conv_dims *d = job->d;
    for (size_t c = begin; c < end; c++)
        rt_conv__fill_padded(d, &job->l->plane, job->x + (int64_t)c * d->height * d->width,
                             job->image + c * job->l->plane.plane_floats, true);
}

/* Pointwise: the partial last block's columns of every channel, zero-padded to NR. */
static void copy_tail(const direct_job *job) {
    int64_t plane = job->l->row_len, first = (job->blocks_per_row - 1) * job->nr;
    for (int64_t c = 0; c < job->d->channels; c++) {
        float *row = job->image + c * job->nr;
        memcpy(row, job->x + c * plane + first, (size_t)(plane - first) * sizeof(float));
        memset(row + (plane - first), 0, (size_t)(job->nr - (plane - first)) * sizeof(float));
    }
}

/* Items are (row, block of NR columns); each runs every panel of output channels. */
static void run_blocks(void *arg, size_t begin, size_t end) {
    const direct_job *job = arg;
    const conv_dims *d = job->d;
    const direct_layout *l = job->l;
    int64_t plane_out = d->out_h * d->out_w;
    for (size_t item = begin; item < end; item++) {
        int64_t row = (int64_t)item / job->blocks_per_row;
        int64_t col = (int64_t)item % job->blocks_per_row * job->nr;
        int64_t cols = l->row_len - col < job->nr ? l->row_len - col : job->nr;
        const float *window = job->image + row * job->row_step + col;
        const int64_t *offsets = job->offsets;
        if (l->pointwise) {
            window = job->x + col;
            if (cols < job->nr) {
                window = job->image;
                offsets = job->tail_offsets;
            }
        }
        for (int64_t o = 0; o < d->out_channels; o += job->mr) {
            int64_t rows = d->out_channels - o < job->mr ? d->out_channels - o : job->mr;
            float *c = job->out + o * plane_out + row * l->row_len + col;
            for (int64_t p0 = 0; p0 < l->depth; p0 += job->kc)
                rt_gemm_f32_gathered_block(job->packed_w, d->out_channels, l->depth, o, p0,
                                           window, offsets + p0, c, plane_out, rows, cols,
                                           p0 > 0, job->bias,
                                           p0 + job->kc >= l->depth ? job->clamp : NULL);
            /* Relu and Clip were applied by the last kernels (job->clamp); others here. */
            for (int64_t r = 0; r < rows && job->act_pass; r++)
                rt_activation__apply(job->act, c + r * plane_out, cols);
        }
    }
}

void rt_conv__direct_f32(const conv_dims *d, const float *x, const float *packed_w,
                         const float *bias, const rt_activation *act, float *out, void *scratch,
                         int32_t threads) {
    direct_layout l;
    if (!direct_layout_of(d, &l)) /* rt_conv__direct_fits(d) held: never taken */
        return;
    int64_t *offsets = scratch;
    direct_job job = {.d = d, .l = &l, .packed_w = packed_w, .bias = bias, .act = act,
                      .image = (float *)((char *)scratch + l.offsets_bytes), .offsets = offsets};
    rt_gemm_f32_tile(&job.mr, &job.nr, &job.kc);
    if (rt_gemm_f32_clamp_of(act, job.clamp_values))
        job.clamp = job.clamp_values;
    else
        job.act_pass = act->kind != RT_ACT_NONE;
    job.blocks_per_row = (l.row_len + job.nr - 1) / job.nr;
    if (l.pointwise) {
        int64_t *tail = offsets + l.offsets_bytes / 2 / sizeof(int64_t);
        for (int64_t c = 0; c < d->channels; c++) {
            offsets[c] = c * d->height * d->width;
            tail[c] = c * job.nr;
        }
        job.tail_offsets = tail;
    } else {
        job.row_step = d->stride[0] * l.plane.row_floats;
        int64_t taps = d->kernel_h * d->kernel_w;
        for (int64_t c = 0; c < d->channels; c++)
            for (int64_t kh = 0; kh < d->kernel_h; kh++)
                for (int64_t kw = 0; kw < d->kernel_w; kw++)
                    offsets[c * taps + kh * d->kernel_w + kw] =
                        c * l.plane.plane_floats + rt_conv__tap_offset(d, &l.plane, kh, kw);
    }
    int64_t items = l.rows * job.blocks_per_row;
    int64_t item_work = rt_op__mul_sat(rt_op__mul_sat(job.nr, d->out_channels), l.depth);
    for (int64_t n = 0; n < d->batch; n++) {
        job.x = x + n * d->channels * d->height * d->width;
        job.out = out + n * d->out_channels * d->out_h * d->out_w;
        if (!l.pointwise)
            rt_parallel_for(threads, (size_t)d->channels, rt_op__grain(d->height * d->width),
                            fill_channels, &job);
        else if (l.row_len % job.nr != 0)
            copy_tail(&job);
        rt_parallel_for(threads, (size_t)items, rt_op__grain(item_work), run_blocks, &job);
    }
}
