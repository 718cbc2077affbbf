/* kernels/pixels_f32.c: a pointwise convolution (1x1, stride 1, no padding, one group) on a small
 * plane, computed with the pixels as the GEMM's rows: out^T[pixel, o] = x^T[pixel, c] @
 * w^T[c, o].
 *
 * The other way round (kernels/direct_f32.c: output channels as rows, pixels in blocks of the
 * kernel's NR columns) suits large planes, but a 7x7 plane of 49 pixels then fills only 49 of
 * 64 columns, 14x14 fills 196 of 208, and each block of pixels streams every weight again:
 * 4 MB a block for 1024 -> 1024 channels, twice past L2. Here the pixels go in blocks of MR
 * (8: 49 in 56), the weights are packed once at load as B panels of NR output channels and
 * streamed once per call, and x^T, packed per call, is the small operand that stays in L2.
 * Each MR x NR tile is summed in a buffer and stored transposed into the output planes.
 *
 * Inside MobileNet v1 (full depth) at 1 thread, old/new per op in one interleaved run: the five
 * 512 -> 512 layers on 14x14 1,185/1,045 us each, 512 -> 1024 on 7x7 836/609, 1024 -> 1024 on
 * 7x7 1,726/1,197; the model 14.7/12.5 ms. At 2 threads 9.28/8.38 ms.
 *
 * Threads split the work one of two ways (rt_conv__pixels_f32): by pixels, each packing and
 * computing its own share, or, where the weights are many times x^T, by panels of output
 * channels after packing x^T together. */
#include "core/threadpool.h"
#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

#include <sched.h>
#include <stdatomic.h>

#define MAX_PLANE 256              /* pixels: 16x16 and below */
#define MIN_OUT_CHANNELS 64        /* a B panel of NR channels wastes little of them */
#define MIN_WEIGHT_FLOATS (1 << 17) /* 0.5 MB: where the other way streams them per block */
#define MAX_XT_FLOATS (1 << 20)    /* 4 MB: x^T, packed per call */
#define GROUP_BLOCKS 4             /* blocks of pixels summed together, 4 KB of tiles */
#define WHOLE_GROUP_BLOCKS 8       /* or all of them, up to 8 (7x7's 7) */
#define SHARED_XT_RATIO 8          /* weights past 8x x^T: threads split panels, not pixels */

/* MobileNet's 256 -> 512 channels on 14x14 (0.5 MB of weights) took the same time either
 * way at 1 thread (610 us this way against 613), and at 2 threads 263 against 293 inside
 * MobileNet v1: the other way's bands of 32-pixel blocks cut 98 pixels a thread into 128
 * columns, where this way splits the 25 blocks of 8. */
bool rt_conv__pixels_pay(const conv_dims *d) {
    int64_t plane = d->out_h * d->out_w, mr, nr, kc;
    rt_gemm__f32_tile(&mr, &nr, &kc);
    /* With the AVX2 kernel's 4 x 24 tiles, planes of more than 3 blocks go through the GEMM
     * driver (conv.c), faster there. On Zen 3 at 1 thread, this way / the direct path with
     * blocks packed per thread (tried; the GEMM driver was faster still) / onnxruntime:
     * 256 -> 512 on 14x14 660 / 610 / 591 us, 512 -> 512 on 14x14 1,267 / 1,219 / 1,176,
     * even at 2 threads; 1024 -> 1024 on 7x7 this way still 1,318 / 1,431 / 1,146. */
    int64_t max_plane = mr < 8 ? 3 * nr : MAX_PLANE;
    return rt_conv__is_pointwise(d) && d->groups == 1 && plane >= 1 && plane <= max_plane &&
           d->out_channels >= MIN_OUT_CHANNELS && d->channels >= 1 &&
           (double)d->channels * (double)d->out_channels >= MIN_WEIGHT_FLOATS &&
           (double)rt_gemm__f32_packed_a_floats(plane, d->channels) <= MAX_XT_FLOATS;
}

/* w^T in panels of NR output channels, each packed whole as its own B (a panel's every depth
 * slice after the last), so a call streams each panel's weights from one address on: with the
 * GEMM's layout (a slice of every panel, then the next slice) a panel came in 24 KB pieces far
 * apart, which the hardware prefetcher restarts on. Inside MobileNet v1 at 1 thread, old/new:
 * 1024 -> 1024 on 7x7 1,207/1,139 us, 512 -> 512 on 14x14 1,018/985; the model 12.37/12.06 ms
 * (2 threads 6.90/6.73). Software prefetch of the next panel, with the GEMM's layout, measured
 * 1 to 4% slower (Zen 4, a burst of prefetches per panel; see panel_pixels for the one kept). */
static int64_t panel_channels(void) {
    int64_t mr, nr, kc;
    rt_gemm__f32_tile(&mr, &nr, &kc);
    return nr;
}

/* One panel's w^T: NR output channels, every depth. */
static size_t panel_floats(const conv_dims *d) {
    return rt_gemm__f32_packed_b_floats(d->channels, panel_channels());
}

size_t rt_conv__pixels_weights_floats(const conv_dims *d) {
    int64_t nr = panel_channels(), panels = (d->out_channels + nr - 1) / nr;
    return (size_t)panels * panel_floats(d);
}

void rt_conv__pixels_weights(const conv_dims *d, const float *w, float *dst) {
    int64_t nr = panel_channels();
    size_t floats = panel_floats(d);
    for (int64_t o = 0; o < d->out_channels; o += nr) {
        /* w[o, c] read as w^T[c, o]: k = c, n = o. */
        rt_gemm_f32_args wt = {.k = d->channels,
                               .n = d->out_channels - o < nr ? d->out_channels - o : nr,
                               .b = w + o * d->channels, .b_row_stride = 1,
                               .b_col_stride = d->channels};
        rt_gemm__f32_pack_b(&wt, dst + (size_t)(o / nr) * floats);
    }
}

size_t rt_conv__pixels_scratch_bytes(const conv_dims *d) {
    return rt_gemm__f32_packed_a_floats(d->out_h * d->out_w, d->channels) * sizeof(float);
}

typedef struct pixels_job {
    const conv_dims *d;
    const float *x;         /* one image's input */
    float *xt;              /* its x^T, packed whole, or share by share */
    const float *wt, *bias; /* w^T packed */
    const rt_activation *act;
    float clamp[2];
    bool clamped; /* act is a clamp, applied in the store */
    float *out;
    int64_t plane, mr, nr, kc;
    size_t panel_floats; /* one panel's w^T, as rt_conv__pixels_weights lays them out */
    int64_t panels, blocks, shares, slices;
    atomic_int ready[RT_MAX_RUNS];    /* by pixels: share s's x^T is packed */
    atomic_llong next_slice, packed;  /* by panels: KC-deep slices of x^T claimed, packed */
    atomic_llong next_panel;          /* by panels: panels claimed */
} pixels_job;

/* The tile's pixels [i, i + pixels) by channels [o, o + channels), summed in tile (row per
 * pixel, NR apart), into the output planes with the bias and the clamp. */
static void store_transposed(const pixels_job *job, const float *tile, int64_t i, int64_t o,
                             int64_t pixels, int64_t channels) {
    for (int64_t c = 0; c < channels; c++) {
        float *row = job->out + (o + c) * job->plane + i;
        float b = job->bias != NULL ? job->bias[o + c] : 0.0f;
        for (int64_t p = 0; p < pixels; p++) {
            float v = tile[p * job->nr + c] + b;
            if (job->clamped) /* Clip's scalar form, NaN kept, as the kernels' epilogue */
                v = v < job->clamp[0] ? job->clamp[0] : v > job->clamp[1] ? job->clamp[1] : v;
            row[p] = v;
        }
        if (!job->clamped)
            rt_activation__apply(job->act, row, pixels);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "core/transpose8.h"
#define HAVE_AVX_STORE 1
#define AVX __attribute__((target("avx2")))

/* store_transposed for the AVX-512 kernel's 8 x 32 tiles (so AVX is there): eight channels at
 * a time, an 8 x 8 transpose in registers, then the bias, the clamp (max and min return their
 * second operand for a NaN, which is kept) and one store of the block's pixels per channel. */
static AVX void store_transposed8(const pixels_job *job, const float *tile, int64_t i,
                                  int64_t o, int64_t pixels, int64_t channels) {
    const __m256 lo = _mm256_set1_ps(job->clamp[0]), hi = _mm256_set1_ps(job->clamp[1]);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)pixels), lanes);
    for (int64_t c0 = 0; c0 < channels; c0 += 8) {
        __m256 r[8], col[8];
        for (int p = 0; p < 8; p++) /* rows past the block's pixels were not computed */
            r[p] = p < pixels ? _mm256_load_ps(tile + p * 32 + c0) : _mm256_setzero_ps();
        rt_transpose8x8(r, col);
        int64_t group = channels - c0 < 8 ? channels - c0 : 8;
        for (int64_t c = 0; c < group; c++) {
            float *row = job->out + (o + c0 + c) * job->plane + i;
            __m256 v = _mm256_add_ps(col[c], _mm256_set1_ps(job->bias != NULL
                                                                ? job->bias[o + c0 + c]
                                                                : 0.0f));
            if (job->clamped)
                v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
            if (pixels == 8)
                _mm256_storeu_ps(row, v);
            else
                _mm256_maskstore_ps(row, keep, v);
            if (!job->clamped)
                rt_activation__apply(job->act, row, pixels);
        }
    }
}

/* store_transposed for the AVX2 kernel's 4 x 24 tiles: four channels at a time, a 4 x 4
 * transpose, then the bias, the clamp and one store of the block's pixels per channel (35%
 * of a 256 -> 512 channel layer on 14x14 went to the scalar loop). */
static AVX void store_transposed4(const pixels_job *job, const float *tile, int64_t i,
                                  int64_t o, int64_t pixels, int64_t channels) {
    const __m128 lo = _mm_set1_ps(job->clamp[0]), hi = _mm_set1_ps(job->clamp[1]);
    const __m128i keep = _mm_cmpgt_epi32(_mm_set1_epi32((int)pixels), _mm_setr_epi32(0, 1, 2, 3));
    for (int64_t c0 = 0; c0 < channels; c0 += 4) {
        __m128 r[4];
        for (int p = 0; p < 4; p++) /* rows past the block's pixels: not wanted */
            r[p] = p < pixels ? _mm_load_ps(tile + p * 24 + c0) : _mm_setzero_ps();
        _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
        int64_t group = channels - c0 < 4 ? channels - c0 : 4;
        for (int64_t c = 0; c < group; c++) {
            float *row = job->out + (o + c0 + c) * job->plane + i;
            __m128 v = _mm_add_ps(r[c], _mm_set1_ps(job->bias != NULL ? job->bias[o + c0 + c]
                                                                      : 0.0f));
            if (job->clamped) /* max and min return their second operand for a NaN */
                v = _mm_min_ps(hi, _mm_max_ps(lo, v));
            if (pixels == 4)
                _mm_storeu_ps(row, v);
            else
                _mm_maskstore_ps(row, keep, v);
            if (!job->clamped)
                rt_activation__apply(job->act, row, pixels);
        }
    }
}
#endif

/* One panel of NR output channels for pixels [i0, i1), whose x^T is packed at xt (as
 * rt_gemm__f32_pack_a packs those pixels alone). A panel's depth slice of w^T (KC x NR floats)
 * serves a group of pixel blocks from L1 before the next slice (one block at a time through
 * every slice read it from L2 for each block: 1 to 3% slower on MobileNet's 14x14 and 7x7
 * layers). A group is 4 blocks, or every block where there are at most 8, so each slice is
 * read from memory once and by no other group (MobileNet v1's 7x7 layers at 1 thread, 4 and
 * 3 blocks / all 7: 537/527 and 1,066/1,051 us; 6 to 8 blocks in the 14x14 layers' groups
 * were no faster). A last block of fewer than MR pixels computes only its own rows where the
 * kernel can (7x7: 49 pixels, 6 blocks of 8 and one of 1; 6 to 8%). */
static void panel_pixels(const pixels_job *job, const float *xt, int64_t i0, int64_t i1,
                         int64_t panel) {
    const conv_dims *d = job->d;
    int64_t depth = d->channels, pixels = i1 - i0;
    int64_t blocks = (pixels + job->mr - 1) / job->mr;
    int64_t tile_floats = job->mr * job->nr;
    int64_t group = (blocks <= WHOLE_GROUP_BLOCKS ? blocks : GROUP_BLOCKS) * job->mr;
    float tiles[WHOLE_GROUP_BLOCKS * RT_GEMM_MR_MAX * RT_GEMM_NR_MAX]
        __attribute__((aligned(64)));
    int64_t o = panel * job->nr;
    int64_t channels = d->out_channels - o < job->nr ? d->out_channels - o : job->nr;
    const float *wt = job->wt + (size_t)panel * job->panel_floats;
    /* The weights ahead, fetched into L2 a line a depth step by the AVX-512 kernel: the rest
     * of this panel from its second slice, then the next panel (another thread may take it:
     * harmless; a last call's lines may pass the end of the weights, and a prefetch never
     * faults). Inside a model the weights come from L3 or memory, and the first block of
     * each slice had waited on them: on a Xeon (Sapphire Rapids family, 2 MB of L2), six
     * chained 512 -> 512 layers on 14x14 took 1,424/1,317 us a layer without/with, 1024 ->
     * 1024 on 7x7 1,514/1,231 (medians, call by call); MobileNet v1 at 1 thread went from
     * 1.13 to 1.06 times onnxruntime. */
    size_t ahead = (size_t)job->kc * (size_t)job->nr;
    size_t ahead_end = (size_t)(panel + 1 < job->panels ? 2 : 1) * job->panel_floats;
    for (int64_t g0 = 0; g0 < pixels; g0 += group) {
        int64_t g1 = pixels - g0 < group ? pixels : g0 + group;
        for (int64_t p0 = 0; p0 < depth; p0 += job->kc) {
            int64_t kc = depth - p0 < job->kc ? depth - p0 : job->kc;
            for (int64_t i = g0; i < g1; i += job->mr) {
                const float *prefetch = ahead < ahead_end ? wt + ahead : NULL;
                ahead += (size_t)kc * RT_FLOATS_PER_LINE;
                rt_gemm__f32_packed_rows_block(xt, pixels, wt, channels, depth, i, 0, p0,
                                               tiles + (i - g0) / job->mr * tile_floats,
                                               job->nr, p0 > 0,
                                               pixels - i < job->mr ? pixels - i : job->mr,
                                               prefetch);
            }
        }
        for (int64_t i = g0; i < g1; i += job->mr) {
            const float *tile = tiles + (i - g0) / job->mr * tile_floats;
            int64_t rows = pixels - i < job->mr ? pixels - i : job->mr;
#ifdef HAVE_AVX_STORE
            if (job->mr == 8 && job->nr == 32) {
                store_transposed8(job, tile, i0 + i, o, rows, channels);
                continue;
            }
            if (job->mr == 4 && job->nr == 24) {
                store_transposed4(job, tile, i0 + i, o, rows, channels);
                continue;
            }
#endif
            store_transposed(job, tile, i0 + i, o, rows, channels);
        }
    }
}

/* x^T for pixels [i0, i1): x[c, pixel] read as x^T[pixel, c] (m = pixels, k = channels). */
static rt_gemm_f32_args xt_of(const pixels_job *job, int64_t i0, int64_t i1) {
    return (rt_gemm_f32_args){.m = i1 - i0, .k = job->d->channels, .a = job->x + i0,
                              .a_row_stride = 1, .a_col_stride = job->plane};
}

/* The first pixel of share s: whole blocks of MR, split evenly, so each share's x^T packed
 * alone starts at that pixel times the depth, and its blocks are the whole plane's. */
static int64_t share_start(const pixels_job *job, int64_t s) {
    int64_t start = job->blocks * s / job->shares * job->mr;
    return start < job->plane ? start : job->plane;
}

/* By pixels: a run per thread, its share's panels (item share * panels + panel). Its holder
 * packs the share's x^T on the first item and computes every panel for those pixels, so no
 * thread waits for another, and what a thread packs and stores stays in its cache (the next
 * pointwise layer reads its share of the pixels again), but every thread streams all the
 * weights. A thread done early takes panels from the back of another's run once that share's
 * x^T is ready. */
static void share_run(void *arg, int32_t slot, rt_run *run) {
    (void)slot;
    pixels_job *job = arg;
    int64_t share = -1, i0 = 0, i1 = 0;
    float *xt = NULL;
    size_t item;
    while (rt_run__next(run, &item)) {
        int64_t s = (int64_t)item / job->panels;
        if (s != share) { /* a run holds one share's panels: its first item */
            share = s;
            i0 = share_start(job, s);
            i1 = share_start(job, s + 1);
            xt = job->xt + i0 * job->d->channels;
            if (!rt_run__stolen(run)) {
                rt_gemm_f32_args a = xt_of(job, i0, i1);
                rt_gemm__f32_pack_a(&a, xt);
                atomic_store_explicit(&job->ready[s], 1, memory_order_release);
            } else {
                while (!atomic_load_explicit(&job->ready[s], memory_order_acquire))
                    sched_yield();
            }
        }
        panel_pixels(job, xt, i0, i1, (int64_t)item % job->panels);
    }
}

/* By panels: the threads pack x^T a KC-deep slice at a time, wait until every slice is
 * packed (only for slices another thread is packing), then claim panels for the whole plane.
 * Each panel's weights are streamed once in all. */
static void panel_slots(void *arg, size_t begin, size_t end) {
    pixels_job *job = arg;
    rt_gemm_f32_args xt = xt_of(job, 0, job->plane);
    for (size_t slot = begin; slot < end; slot++) {
        for (long long s; (s = atomic_fetch_add(&job->next_slice, 1)) < job->slices;) {
            rt_gemm__f32_pack_a_slices(&xt, s, s + 1, job->xt);
            atomic_fetch_add_explicit(&job->packed, 1, memory_order_release);
        }
        while (atomic_load_explicit(&job->packed, memory_order_acquire) < job->slices)
            sched_yield();
        for (long long panel; (panel = atomic_fetch_add(&job->next_panel, 1)) < job->panels;)
            panel_pixels(job, job->xt, 0, job->plane, panel);
    }
}

void rt_conv__pixels_f32(const conv_dims *d, const float *x, const float *wt, const float *bias,
                         const rt_activation *act, float *out, void *scratch, int32_t threads) {
    pixels_job job = {.d = d, .wt = wt, .bias = bias, .act = act, .xt = scratch,
                      .plane = d->out_h * d->out_w};
    rt_gemm__f32_tile(&job.mr, &job.nr, &job.kc);
    job.panel_floats = panel_floats(d);
    job.clamped = rt_gemm__f32_clamp_of(act, job.clamp);
    job.panels = (d->out_channels + job.nr - 1) / job.nr;
    job.blocks = (job.plane + job.mr - 1) / job.mr;
    job.slices = (d->channels + job.kc - 1) / job.kc;
    threads = threads > 1 ? threads : 1;
    /* By pixels each thread streams every weight; by panels x^T is packed once for all, and
     * each thread reads what the others packed. MobileNet v1 at 2 threads, per layer, by
     * pixels / by panels / the caller packing x^T alone (then panels): 512 -> 512 channels
     * on 14x14 (1 MB of weights, x^T 0.4 MB) 540/570/600 us; 1024 -> 1024 on 7x7 (4 MB, x^T
     * 0.2 MB) 623/612/665. */
    double weight_floats = (double)d->channels * (double)d->out_channels;
    double xt_floats = (double)job.plane * (double)d->channels;
    job.shares = weight_floats <= SHARED_XT_RATIO * xt_floats ? threads : 1;
    job.shares = job.shares < job.blocks ? job.shares : job.blocks;
    job.shares = job.shares < RT_MAX_RUNS ? job.shares : RT_MAX_RUNS;
    for (int64_t n = 0; n < d->batch; n++) {
        job.x = x + n * d->channels * job.plane;
        job.out = out + n * d->out_channels * job.plane;
        if (job.shares > 1) {
            for (int64_t s = 0; s < job.shares; s++)
                atomic_init(&job.ready[s], 0);
            rt_parallel__runs((int32_t)job.shares, (size_t)(job.shares * job.panels), share_run,
                              &job);
            continue;
        }
        atomic_init(&job.next_slice, 0);
        atomic_init(&job.packed, 0);
        atomic_init(&job.next_panel, 0);
        rt_parallel__for(threads, (size_t)threads, 1, panel_slots, &job);
    }
}
