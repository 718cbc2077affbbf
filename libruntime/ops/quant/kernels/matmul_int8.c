/* matmul_int8.c: the integer matrix product of matmul_integer and qlinear_matmul, int8 or
 * uint8 a times int8 or uint8 b, each minus its zero points (per tensor, per row of a, per
 * column of b), summed in int32 with wrap-around, then stored as int32 or requantized to int8 /
 * uint8 with the scales. Work items are output tiles of one batch entry, summed in a local
 * buffer, so requantizing needs no scratch. */
#include <string.h>

#include "ops/quant/quant.h"

#define TILE_M RT_QUANT_MM_TILE_M
#define TILE_N RT_QUANT_MM_TILE_N

typedef rt_quant_mm_param qmm_param; /* quant.h */
typedef rt_quant_mm_job qmm_job;

/* One tile: rows [i0, i1), columns [j0, j1), K from 0; za per row, zb per column of it. */
typedef struct qmm_tile {
    const void *a, *b; /* this batch entry's matrices */
    int64_t k, n, i0, i1, j0, j1;
    int16_t za[TILE_M], zb[TILE_N];
    uint32_t acc[TILE_M * TILE_N];
} qmm_tile;

/* Offset of p's elements for the output batch entry at `index`. */
static int64_t param_offset(const qmm_param *p, const int64_t *index, int32_t rank) {
    int64_t off = 0;
    for (int32_t i = 0; i < rank; i++)
        off += index[i] * p->batch_strides[i];
    return off;
}

/* K-outer: each row of b, minus its zero points, is widened once into int16 and added into
 * all the tile's rows; the int16 x int16 products vectorise without 32-bit multiplies.
 * Operands minus zero points lie in [-255, 255], so the int16 values and int32 products are
 * exact; only the sums wrap. */
#define DEFINE_QMM_SUM(sfx, TA, TB)                                                       \
    static void tile_sum__##sfx(qmm_tile *t) {                                            \
        const TA *a = t->a;                                                               \
        const TB *b = t->b;                                                               \
        int64_t width = t->j1 - t->j0, rows = t->i1 - t->i0;                              \
        int16_t brow[TILE_N];                                                             \
        for (int64_t p = 0; p < t->k; p++) {                                              \
            const TB *bp = b + p * t->n + t->j0;                                          \
            for (int64_t j = 0; j < width; j++)                                           \
                brow[j] = (int16_t)(bp[j] - t->zb[j]);                                    \
            for (int64_t r = 0; r < rows; r++) {                                          \
                int16_t x = (int16_t)(a[(t->i0 + r) * t->k + p] - t->za[r]);              \
                uint32_t *row = t->acc + r * TILE_N;                                      \
                for (int64_t j = 0; j < width; j++)                                       \
                    row[j] += (uint32_t)((int32_t)x * brow[j]);                           \
            }                                                                             \
        }                                                                                 \
    }
DEFINE_QMM_SUM(i8_i8, int8_t, int8_t)
DEFINE_QMM_SUM(i8_u8, int8_t, uint8_t)
DEFINE_QMM_SUM(u8_i8, uint8_t, int8_t)
DEFINE_QMM_SUM(u8_u8, uint8_t, uint8_t)

static void tile_sum(const qmm_job *job, qmm_tile *t) {
    bool a8 = job->a_type == RT_I8, b8 = job->b_type == RT_I8;
    if (a8)
        b8 ? tile_sum__i8_i8(t) : tile_sum__i8_u8(t);
    else
        b8 ? tile_sum__u8_i8(t) : tile_sum__u8_u8(t);
}

/* The tile's zero points: one per row of a, one per column of b. */
static void tile_zero_points(const qmm_job *job, qmm_tile *t, int64_t za_off, int64_t zb_off) {
    for (int64_t i = t->i0; i < t->i1; i++)
        t->za[i - t->i0] = job->za.data ? (int16_t)rt_quant__load_int(
                                              job->za.data, job->za.type,
                                              za_off + i * job->za.stride)
                                        : 0;
    for (int64_t j = t->j0; j < t->j1; j++)
        t->zb[j - t->j0] = job->zb.data ? (int16_t)rt_quant__load_int(
                                              job->zb.data, job->zb.type,
                                              zb_off + j * job->zb.stride)
                                        : 0;
}

/* Store the tile of output matrix `out_off`: int32, or requantized with the scales at the
 * given offsets. */
static void tile_store(const qmm_job *job, const qmm_tile *t, int64_t out_off, int64_t sa_off,
                       int64_t sb_off) {
    int64_t n = job->d->n;
    for (int64_t i = t->i0; i < t->i1; i++) {
        const uint32_t *row = t->acc + (i - t->i0) * TILE_N;
        int64_t base = out_off + i * n;
        if (!job->y_scale) {
            int32_t *o = (int32_t *)job->out + base;
            for (int64_t j = t->j0; j < t->j1; j++)
                o[j] = rt_quant__as_i32(row[j - t->j0]);
            continue;
        }
        int64_t ia = sa_off + i * job->sa.stride;
        for (int64_t j = t->j0; j < t->j1; j++) {
            double mult = rt_quant__multiplier(job->scale_type, job->sa.data, ia, job->sb.data,
                                               sb_off + j * job->sb.stride, job->y_scale, 0);
            int64_t q = rt_quant__requantize(rt_quant__as_i32(row[j - t->j0]), mult,
                                             job->y_zero, job->lo, job->hi);
            rt_quant__store8(job->out, job->out_type, base + j, q);
        }
    }
}

void rt_quant__matmul_tiles(void *arg, size_t begin, size_t end) {
    const qmm_job *job = arg;
    const rt_matmul_dims *d = job->d;
    qmm_tile t;
    int64_t tiles = job->row_tiles * job->col_tiles;
    for (size_t item = begin; item < end; item++) {
        int64_t batch = (int64_t)item / tiles, tile = (int64_t)item % tiles;
        int64_t index[RT_MAX_RANK], rest = batch, a_off = 0, b_off = 0;
        for (int32_t i = d->batch_rank - 1; i >= 0; i--) {
            index[i] = rest % d->batch_sizes[i];
            rest /= d->batch_sizes[i];
            a_off += index[i] * d->a_batch_strides[i];
            b_off += index[i] * d->b_batch_strides[i];
        }
        t.a = (const char *)job->a + a_off; /* one-byte elements */
        t.b = (const char *)job->b + b_off;
        t.k = d->k, t.n = d->n;
        t.i0 = tile / job->col_tiles * TILE_M, t.j0 = tile % job->col_tiles * TILE_N;
        t.i1 = t.i0 + TILE_M < d->m ? t.i0 + TILE_M : d->m;
        t.j1 = t.j0 + TILE_N < d->n ? t.j0 + TILE_N : d->n;
        tile_zero_points(job, &t, param_offset(&job->za, index, d->batch_rank),
                         param_offset(&job->zb, index, d->batch_rank));
        memset(t.acc, 0, sizeof t.acc);
        tile_sum(job, &t);
        tile_store(job, &t, batch * d->m * d->n, param_offset(&job->sa, index, d->batch_rank),
                   param_offset(&job->sb, index, d->batch_rank));
    }
}
