/* kernels/direct_f32.c: float32 convolution (one group) on the GEMM micro-kernels without im2col.
 *
 * Each thread works through a run of output rows (rt_parallel__runs: one run per thread, from
 * whose back a thread done with its own takes rows), a band of rows at a time: it copies the
 * input rows the band reads, of every channel, into zero-padded, stride-phase-split rows
 * (kernels/padded_f32.c) in its own buffer. For a block of NR outputs along one output row, the
 * reduction index p = (channel, kh, kw) then reads NR contiguous floats at a fixed offset from
 * the block's first window, so the micro-kernel takes B's rows straight from the buffer
 * (rt_gemm__f32_gathered_block) while A is the weights packed once at load, in tall panels
 * where the kernel has them (12 rows: each B row loaded serves more outputs). Nothing the size
 * of the column matrix is written; the band stays in the cache of the core that wrote it and
 * reads it (a shared padded image, each call written by one core and read by all, cost more
 * than the arithmetic with two threads). Where a thread's output passes L2, blocks are
 * computed a panel of output channels at a time over sweeps of blocks whose inputs fit in L2,
 * so each panel's rows are written in long runs rather than a few floats in every channel at
 * once.
 *
 * A pointwise convolution (1x1, stride 1, no padding) needs no copy at all: its blocks run
 * along the whole plane of x, each channel one B row, and only a partial last block, whose
 * reads would pass the end of x, is copied aside.
 *
 * A max pool after the convolution (conv2d_act_max_pool2d) makes the bands bands of pooled
 * rows: the convolution rows one pooled row reads go to a small buffer of the thread's, which
 * stays in L1, and are pooled from there, so the unpooled result is never written out. */
#include <string.h>

#include "core/threadpool.h"
#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

#define MAX_STRIDE 4
#define MAX_IMAGE_BYTES ((size_t)64 << 20)
#define MIN_DEPTH 16
#define BAND_TARGET_FLOATS (64 * 1024) /* 256 KB: a band of every channel, in L2 */
#define OUTPUT_IN_L2_FLOATS (256 * 1024) /* 1 MB: a thread's output that L2 holds */
#define SWEEP_IN_L1_FLOATS (4 * 1024)   /* 16 KB: a sweep's B rows for the 4-row kernel */

/* Float offsets of each reduction index's first read in scratch, then the buffers. */
typedef struct direct_layout {
    bool pointwise;       /* read x in place */
    rt_conv_padded plane; /* otherwise */
    int64_t depth;        /* channels * kernel_h * kernel_w */
    int64_t rows, row_len; /* blocks run along `rows` rows of `row_len` outputs */
    int64_t band_rows;     /* output rows per band (pooled rows with a pool) */
    int64_t window_rows;   /* with a pool: convolution rows one pooled row reads, at most */
    size_t pool_floats;    /* with a pool: each thread's buffer of those rows */
    int64_t band_plane;    /* floats per channel in a band buffer: its padded rows and slack */
    size_t offsets_bytes;  /* depth int64s, rounded to 64 bytes (twice when pointwise) */
    size_t buffer_floats;  /* each thread's band buffer; pointwise: the last block's copy */
} direct_layout;

/* Padded input rows a band of `rows` output rows reads. */
static int64_t band_input_rows(const conv_dims *d, int64_t rows) {
    return (rows - 1) * d->stride[0] + (d->kernel_h - 1) * d->dilation[0] + 1;
}

static int64_t band_plane_floats(const conv_dims *d, const rt_conv_padded *p, int64_t rows) {
    return (band_input_rows(d, rows) * p->row_floats + RT_CONV_PADDED_SLACK + 15) / 16 * 16;
}

/* Rows per band, of `total` rows, each reading `step` output rows, on `threads` threads: a
 * band per thread, so few input rows are padded twice and each thread's output is one run of
 * rows (which the next op, cut the same way, then reads from its own cache: two bands a
 * thread measured 2 to 4% slower on the small CNN); fewer rows where a band of every channel
 * would not stay in L2. */
static int64_t band_rows_for(const conv_dims *d, const rt_conv_padded *p, int64_t total,
                             int64_t step, int32_t threads) {
    int64_t bands = threads > 1 ? threads : 1;
    int64_t rows = (total + bands - 1) / bands;
    int64_t fit = (BAND_TARGET_FLOATS / d->channels - RT_CONV_PADDED_SLACK - 15) /
                      p->row_floats - (d->kernel_h - 1) * d->dilation[0] - 1;
    fit = fit < 0 ? 1 : (fit / d->stride[0] + 1) / step;
    return rows < 1 ? 1 : rows < fit ? rows : fit < 1 ? 1 : fit;
}

/* Pooled rows [q0, q1) read convolution rows [*c0, *c1), cut to the image (empty when every
 * window lies in the padding). */
static void pooled_rows_read(const conv_dims *d, const rt_pool_dims *pool, int64_t window_rows,
                             int64_t q0, int64_t q1, int64_t *c0, int64_t *c1) {
    int64_t first = q0 * pool->stride[0] - pool->pad[0];
    int64_t end = (q1 - 1) * pool->stride[0] - pool->pad[0] + window_rows;
    *c0 = first < 0 ? 0 : first > d->out_h ? d->out_h : first;
    *c1 = end > d->out_h ? d->out_h : end < *c0 ? *c0 : end;
}

static bool direct_layout_of(const conv_dims *d, const rt_pool_dims *pool, int32_t threads,
                             direct_layout *l) {
    int64_t mr, nr, kc, taps, depth, floats;
    rt_gemm__f32_tile(&mr, &nr, &kc);
    l->pointwise = rt_conv__is_pointwise(d);
    /* The padded layout of a whole plane bounds every band's. */
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
    l->buffer_floats = (size_t)floats;
    l->pool_floats = 0;
    if (l->pointwise)
        return pool == NULL;
    if (pool == NULL) {
        l->band_rows = band_rows_for(d, &l->plane, d->out_h, 1, threads);
        l->band_plane = band_plane_floats(d, &l->plane, l->band_rows);
    } else {
        /* Windows that overlap in height would have their shared rows computed twice. */
        l->window_rows = (pool->kernel[0] - 1) * pool->dilation[0] + 1;
        int64_t pooled_floats;
        if (l->window_rows > pool->stride[0] ||
            !rt_op__mul(l->window_rows, l->row_len, &pooled_floats) ||
            !rt_op__mul(d->out_channels, pooled_floats, &pooled_floats) ||
            (uint64_t)pooled_floats > MAX_IMAGE_BYTES / sizeof(float))
            return false;
        l->pool_floats = (size_t)(pooled_floats + 15) / 16 * 16;
        l->band_rows = band_rows_for(d, &l->plane, pool->out_h, pool->stride[0], threads);
        l->band_plane = band_plane_floats(
            d, &l->plane, (l->band_rows - 1) * pool->stride[0] + l->window_rows);
    }
    l->buffer_floats = (size_t)(d->channels * l->band_plane);
    return true;
}

bool rt_conv__direct_fits(const conv_dims *d, const rt_pool_dims *pool) {
    direct_layout l;
    if (!direct_layout_of(d, pool, 1, &l) || l.depth < MIN_DEPTH || l.row_len < 1 ||
        d->out_h < 1)
        return false;
    int64_t mr, nr, kc;
    rt_gemm__f32_tile(&mr, &nr, &kc);
    /* With the AVX2 kernel's 4-row panels, pointwise layers run faster through the GEMM
     * driver, which packs x once for all row tiles and keeps a block of weights in L2 across
     * the blocks of pixels: on Zen 3 at 1 thread, against onnxruntime call by call, this path
     * / the GEMM, MobileNet's 32 -> 64 on 112x112 1.03 / 0.95, 128 -> 128 on 56x56 1.04 /
     * 0.97, 256 -> 256 on 28x28 1.02 / 0.96, 512 -> 512 on 14x14 1.05 / 1.02; reduced
     * MobileNet 1.04 / 1.00. With the AVX-512 kernel this path measured the faster (Zen 4). */
    if (l.pointwise && mr < 8)
        return false;
    /* Blocks run NR columns along one output row: a row much narrower than NR would waste
     * most of each block, where im2col's columns run on across rows. At most a quarter. */
    int64_t computed = (l.row_len + nr - 1) / nr * nr;
    return 4 * (computed - l.row_len) <= computed;
}

size_t rt_conv__direct_scratch_bytes(const conv_dims *d, const rt_pool_dims *pool,
                                     int32_t threads) {
    /* The most any thread count up to `threads` takes: bands are taller with fewer threads. */
    size_t most = 0;
    for (int32_t t = 1; t <= (threads > 0 ? threads : 1); t++) {
        direct_layout l;
        if (!direct_layout_of(d, pool, t, &l))
            return 0;
        size_t bytes = l.offsets_bytes + (l.pointwise ? 1 : (size_t)t) *
                                             (l.buffer_floats + l.pool_floats) * sizeof(float);
        most = bytes > most ? bytes : most;
    }
    return most;
}

typedef struct direct_job {
    const conv_dims *d;
    const direct_layout *l;
    const float *x, *packed_w, *bias;
    const rt_activation *act;
    const rt_pool_dims *pool; /* or NULL */
    float *out, *buffers;
    const int64_t *offsets;
    const int64_t *tail_offsets; /* pointwise: the last block's copy, row p at p * NR */
    const float *clamp;          /* the activation as the kernels' clamp, or NULL */
    bool act_pass;               /* an activation the kernels cannot apply */
    float clamp_values[2];
    int64_t mr, nr, kc, blocks_per_row, row_step;
    int64_t sweep_cols; /* columns computed panel by panel (compute_blocks), a multiple of NR */
} direct_job;

/* Outputs [col0, col1) of one output row (blocks of NR, the last cut at the row's end), every
 * panel of output channels; block `col` reads from window0 + (col - col0), B's row p at
 * offsets[p] from there. The row of channel o starts at out + o * ldc. Each sweep of blocks
 * (job->sweep_cols) is computed panel by panel: the panel's rows are then written in runs of
 * a sweep, not NR floats at a time in every channel at once, and the sweep's input stays in
 * L2 for the next panel. */
static void compute_blocks(const direct_job *job, const float *window0, const int64_t *offsets,
                           float *out, int64_t ldc, int64_t col0, int64_t col1) {
    const conv_dims *d = job->d;
    const direct_layout *l = job->l;
    for (int64_t sweep = col0; sweep < col1; sweep += job->sweep_cols) {
        int64_t sweep_end = col1 - sweep < job->sweep_cols ? col1 : sweep + job->sweep_cols;
        for (int64_t o = 0, panel; o < d->out_channels; o += panel) {
            panel = rt_gemm__f32_tall_panel(d->out_channels, o);
            int64_t rows = d->out_channels - o < panel ? d->out_channels - o : panel;
            for (int64_t col = sweep; col < sweep_end; col += job->nr) {
                int64_t cols = sweep_end - col < job->nr ? sweep_end - col : job->nr;
                const float *window = window0 + (col - col0);
                float *c = out + o * ldc + col;
                for (int64_t p0 = 0; p0 < l->depth; p0 += job->kc)
                    rt_gemm__f32_gathered_block(job->packed_w, d->out_channels, l->depth, o,
                                                panel, p0, window, offsets + p0, c, ldc, rows,
                                                cols, p0 > 0, job->bias,
                                                p0 + job->kc >= l->depth ? job->clamp : NULL);
                /* Relu and Clip were applied by the last kernels (job->clamp); others here. */
                for (int64_t r = 0; r < rows && job->act_pass; r++)
                    rt_activation__apply(job->act, c + r * ldc, cols);
            }
        }
    }
}

/* Pointwise: the partial last block's columns of every channel, zero-padded to NR. */
static void copy_tail(const direct_job *job) {
    int64_t plane = job->l->row_len, first = (job->blocks_per_row - 1) * job->nr;
    for (int64_t c = 0; c < job->d->channels; c++) {
        float *row = job->buffers + c * job->nr;
        memcpy(row, job->x + c * plane + first, (size_t)(plane - first) * sizeof(float));
        memset(row + (plane - first), 0, (size_t)(job->nr - (plane - first)) * sizeof(float));
    }
}

/* Pointwise blocks [begin, end) along the whole plane of x, read in place but for a partial
 * last block (copied aside). */
static void pointwise_blocks(void *arg, size_t begin, size_t end) {
    const direct_job *job = arg;
    int64_t plane = job->l->row_len, col0 = (int64_t)begin * job->nr;
    int64_t col1 = (int64_t)end * job->nr < plane ? (int64_t)end * job->nr : plane;
    int64_t whole_end = plane / job->nr * job->nr; /* where a partial block starts */
    if (col0 < whole_end)
        compute_blocks(job, job->x + col0, job->offsets, job->out, plane, col0,
                       col1 < whole_end ? col1 : whole_end);
    if (col1 > whole_end)
        compute_blocks(job, job->buffers, job->tail_offsets, job->out, plane, whole_end, col1);
}

/* Pads the input rows that output rows [row0, row0 + rows) read, of every channel, into buf. */
static void fill_band(const direct_job *job, float *buf, int64_t row0, int64_t rows) {
    const conv_dims *d = job->d;
    int64_t first = row0 * d->stride[0], last = first + band_input_rows(d, rows);
    for (int64_t c = 0; c < d->channels; c++)
        rt_conv__fill_padded_band(d, &job->l->plane, job->x + c * d->height * d->width,
                                  buf + c * job->l->band_plane, first, last);
}

/* Output row `row` (of a band starting at row0, padded in buf), every channel's. */
static void compute_row(const direct_job *job, const float *buf, int64_t row0, int64_t row,
                        float *out, int64_t ldc) {
    compute_blocks(job, buf + (row - row0) * job->row_step, job->offsets, out, ldc, 0,
                   job->l->row_len);
}

/* Pooled rows [q0, q1), their convolution rows padded in buf from row c0: each pooled row's
 * rows of every channel into `rows` ([channel][row][column]), then pooled from there. */
static void pool_band(const direct_job *job, const float *buf, int64_t c0, int64_t q0,
                      int64_t q1, float *rows) {
    const conv_dims *d = job->d;
    const rt_pool_dims *pool = job->pool;
    int64_t width = job->l->row_len;
    for (int64_t q = q0; q < q1; q++) {
        int64_t a, b;
        pooled_rows_read(d, pool, job->l->window_rows, q, q + 1, &a, &b);
        for (int64_t r = a; r < b; r++)
            compute_row(job, buf, c0, r, rows + (r - a) * width, (b - a) * width);
        rt_pool_dims one = *pool; /* this pooled row of every channel, from `rows` */
        one.planes = d->out_channels;
        one.height = b - a;
        one.out_h = 1;
        one.pad[0] = a - (q * pool->stride[0] - pool->pad[0]);
        rt_pool__max_f32_rows(&one, rows, job->out + q * pool->out_w, 0,
                              (size_t)d->out_channels);
    }
}

/* The thread body: a run of output rows (pooled rows with a pool). The thread pads the input
 * rows of up to a band of them at a time into its own buffer, as far as its run reaches then
 * (rows another thread takes from its back later were padded for nothing, which is cheap),
 * and computes them from there. */
static void band_run(void *arg, int32_t slot, rt_run *run) {
    direct_job *job = arg;
    const conv_dims *d = job->d;
    const direct_layout *l = job->l;
    float *buf = job->buffers + slot * (l->buffer_floats + l->pool_floats);
    int64_t band_end = 0, c0 = 0; /* rows [.., band_end) are padded, from conv row c0 */
    size_t item;
    while (rt_run__next(run, &item)) {
        int64_t row = (int64_t)item;
        if (row >= band_end) {
            int64_t back = (int64_t)rt_run__back(run); /* past row: thieves take from beyond */
            band_end = back - row < l->band_rows ? back : row + l->band_rows;
            if (job->pool == NULL) {
                c0 = row;
                fill_band(job, buf, row, band_end - row);
            } else {
                int64_t c1;
                pooled_rows_read(d, job->pool, l->window_rows, row, band_end, &c0, &c1);
                if (c1 > c0)
                    fill_band(job, buf, c0, c1 - c0);
            }
        }
        if (job->pool != NULL)
            pool_band(job, buf, c0, row, row + 1, buf + l->buffer_floats);
        else
            compute_row(job, buf, c0, row, job->out + row * l->row_len, d->out_h * d->out_w);
    }
}

void rt_conv__direct_f32(const conv_dims *d, const float *x, const float *packed_w,
                         const float *bias, const rt_activation *act, const rt_pool_dims *pool,
                         float *out, void *scratch, int32_t threads) {
    direct_layout l;
    if (!direct_layout_of(d, pool, threads, &l)) /* rt_conv__direct_fits held: never taken */
        return;
    int64_t *offsets = scratch;
    direct_job job = {.d = d, .l = &l, .packed_w = packed_w, .bias = bias, .act = act,
                      .pool = pool, .buffers = (float *)((char *)scratch + l.offsets_bytes),
                      .offsets = offsets};
    rt_gemm__f32_tile(&job.mr, &job.nr, &job.kc);
    if (rt_gemm__f32_clamp_of(act, job.clamp_values))
        job.clamp = job.clamp_values;
    else
        job.act_pass = act->kind != RT_ACT_NONE;
    job.blocks_per_row = (l.row_len + job.nr - 1) / job.nr;
    int64_t total = pool != NULL ? pool->out_h : d->out_h, bands = 1;
    if (l.pointwise) {
        int64_t *tail = offsets + l.offsets_bytes / 2 / sizeof(int64_t);
        for (int64_t c = 0; c < d->channels; c++) {
            offsets[c] = c * d->height * d->width;
            tail[c] = c * job.nr;
        }
        job.tail_offsets = tail;
    } else {
        job.row_step = d->stride[0] * l.plane.row_floats;
        bands = (total + l.band_rows - 1) / l.band_rows;
        int64_t taps = d->kernel_h * d->kernel_w;
        for (int64_t c = 0; c < d->channels; c++)
            for (int64_t kh = 0; kh < d->kernel_h; kh++)
                for (int64_t kw = 0; kw < d->kernel_w; kw++)
                    offsets[c * taps + kh * d->kernel_w + kw] =
                        c * l.band_plane + rt_conv__tap_offset(d, &l.plane, kh, kw);
    }
    int64_t block_work = rt_op__mul_sat(rt_op__mul_sat(job.nr, d->out_channels), l.depth);
    /* Bands of little work go to fewer threads, as rt_parallel__for's grain would have it. */
    int64_t band_work = rt_op__mul_sat(
        block_work, job.blocks_per_row * l.band_rows * (pool != NULL ? l.window_rows : 1));
    int64_t bands_per_chunk = (int64_t)rt_op__grain(band_work), busy = threads;
    if (!l.pointwise && busy > (bands + bands_per_chunk - 1) / bands_per_chunk)
        busy = (bands + bands_per_chunk - 1) / bands_per_chunk;
    /* Where each thread's share of the output passes L2, sweeps of blocks whose B rows take
     * about BAND_TARGET_FLOATS, which stay in L2 while each panel of output channels passes
     * over them. Otherwise (or into a pool's small buffer) block by block, every panel over a
     * block's B rows in L1: sweeps cost 3 to 15% on layers whose output stayed in L2. The
     * AVX2 kernel's panels are 4 rows, not 8, so each B row is read twice as often per
     * multiply-add, and its sweeps are kept to L1: on Zen 3 (512 KB of L2), at 1 thread,
     * MobileNet's 128 -> 128 channels on 56x56 took 1,856/1,606 us with sweeps of 256/16
     * KB, 32 -> 64 on 112x112 1,570/1,090 (onnxruntime 1,346 and 1,150). */
    int64_t out_floats = rt_op__mul_sat(d->out_channels, rt_op__mul_sat(d->out_h, d->out_w));
    int64_t sweep_floats = job.mr < 8 ? SWEEP_IN_L1_FLOATS : BAND_TARGET_FLOATS;
    int64_t sweep_blocks = sweep_floats / rt_op__mul_sat(l.depth, job.nr);
    if (pool != NULL || out_floats / (busy > 1 ? busy : 1) <= OUTPUT_IN_L2_FLOATS ||
        sweep_blocks < 1)
        sweep_blocks = 1;
    job.sweep_cols = sweep_blocks * job.nr;
    for (int64_t n = 0; n < d->batch; n++) {
        job.x = x + n * d->channels * d->height * d->width;
        job.out = out + n * d->out_channels *
                            (pool != NULL ? pool->out_plane : d->out_h * d->out_w);
        if (l.pointwise) {
            if (l.row_len % job.nr != 0)
                copy_tail(&job);
            rt_parallel__for(threads, (size_t)job.blocks_per_row, rt_op__grain(block_work),
                             pointwise_blocks, &job);
            continue;
        }
        rt_parallel__runs((int32_t)busy, (size_t)total, band_run, &job);
    }
}
