/* kernels/attention.c: the attention kernels. Tiles (attention_impl.h) run on the pool, one
 * per (batch, kv head, block of queries); float32 forms its two products per key block with
 * the packed GEMM and its exponentials with the vector math, float64 with plain loops. */
#include <math.h>
#include <string.h>

#include "core/threadpool.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/kernels/vmath.h"
#include "ops/matmul/gemm/gemm.h"

/* ---- float32 ------------------------------------------------------------------------------ */

#define ATTN_T float
#define ATTN(name) attn_f32_##name

typedef struct attn_f32_slot attn_f32_slot;
static void attn_f32_scores(attn_f32_slot *sl, int64_t rows, int64_t n, const float *k,
                            int64_t key_stride);
static void attn_f32_values(attn_f32_slot *sl, int64_t rows, int64_t n, const float *v,
                            int64_t key_stride);

static void attn_f32_exp_row(float *x, size_t n) { rt_vmath__kernel(RT_VMATH_EXP)(x, x, n); }
static void attn_f32_tanh_row(float *x, size_t n) { rt_vmath__kernel(RT_VMATH_TANH)(x, x, n); }

#include "ops/attention/kernels/attention_impl.h"

static void attn_f32_scores(attn_f32_slot *sl, int64_t rows, int64_t n, const float *k,
                            int64_t key_stride) {
    if (sl->head_dim == 0) {
        for (int64_t r = 0; r < rows; r++)
            memset(sl->s + r * RT_ATTN_KEY_BLOCK, 0, (size_t)n * sizeof(float));
        return;
    }
    rt_gemm_f32_args g = {.m = rows, .n = n, .k = sl->head_dim,
                          .a = sl->q, .a_row_stride = sl->head_dim, .a_col_stride = 1,
                          .b = k, .b_row_stride = 1, .b_col_stride = key_stride,
                          .c = sl->s, .c_row_stride = RT_ATTN_KEY_BLOCK};
    rt_gemm__f32(&g, sl->gemm, sl->gemm_bytes, 1);
}

static void attn_f32_values(attn_f32_slot *sl, int64_t rows, int64_t n, const float *v,
                            int64_t key_stride) {
    rt_gemm_f32_args g = {.m = rows, .n = sl->v_dim, .k = n,
                          .a = sl->s, .a_row_stride = RT_ATTN_KEY_BLOCK, .a_col_stride = 1,
                          .b = v, .b_row_stride = key_stride, .b_col_stride = 1,
                          .c = sl->t, .c_row_stride = sl->v_dim};
    rt_gemm__f32(&g, sl->gemm, sl->gemm_bytes, 1);
}

#undef ATTN
#undef ATTN_T

size_t rt_attn__f32_slot_bytes(int64_t rows, int64_t head_dim, int64_t v_dim) {
    attn_f32_slot sl;
    size_t scores = rt_gemm__f32_scratch_bytes(rows, RT_ATTN_KEY_BLOCK, head_dim, 1);
    size_t values = rt_gemm__f32_scratch_bytes(rows, v_dim, RT_ATTN_KEY_BLOCK, 1);
    return attn_f32_carve(&sl, NULL, rows, head_dim, v_dim) + (scores > values ? scores : values);
}

void rt_attn__f32(const rt_attn_job *job, int32_t threads) {
    int64_t tiles = (job->q_len + job->tile_queries - 1) / job->tile_queries;
    rt_parallel__runs(threads, (size_t)(job->batch * job->kv_heads * tiles), attn_f32_run,
                      (void *)job);
}

/* ---- float64 ------------------------------------------------------------------------------ */

#define ATTN_T double
#define ATTN(name) attn_f64_##name

typedef struct attn_f64_slot attn_f64_slot;
static void attn_f64_scores(attn_f64_slot *sl, int64_t rows, int64_t n, const double *k,
                            int64_t key_stride);
static void attn_f64_values(attn_f64_slot *sl, int64_t rows, int64_t n, const double *v,
                            int64_t key_stride);

static void attn_f64_exp_row(double *x, size_t n) {
    for (size_t j = 0; j < n; j++)
        x[j] = exp(x[j]);
}

static void attn_f64_tanh_row(double *x, size_t n) {
    for (size_t j = 0; j < n; j++)
        x[j] = tanh(x[j]);
}

#include "ops/attention/kernels/attention_impl.h"

static void attn_f64_scores(attn_f64_slot *sl, int64_t rows, int64_t n, const double *k,
                            int64_t key_stride) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            const double *q = sl->q + r * sl->head_dim, *kj = k + j * key_stride;
            double acc = 0;
            for (int64_t c = 0; c < sl->head_dim; c++)
                acc += q[c] * kj[c];
            sl->s[r * RT_ATTN_KEY_BLOCK + j] = acc;
        }
}

static void attn_f64_values(attn_f64_slot *sl, int64_t rows, int64_t n, const double *v,
                            int64_t key_stride) {
    for (int64_t r = 0; r < rows; r++) {
        double *t = sl->t + r * sl->v_dim;
        for (int64_t c = 0; c < sl->v_dim; c++)
            t[c] = 0;
        for (int64_t j = 0; j < n; j++) {
            double p = sl->s[r * RT_ATTN_KEY_BLOCK + j];
            for (int64_t c = 0; c < sl->v_dim; c++)
                t[c] += p * v[j * key_stride + c];
        }
    }
}

#undef ATTN
#undef ATTN_T

size_t rt_attn__f64_slot_bytes(int64_t rows, int64_t head_dim, int64_t v_dim) {
    attn_f64_slot sl;
    return attn_f64_carve(&sl, NULL, rows, head_dim, v_dim);
}

void rt_attn__f64(const rt_attn_job *job, int32_t threads) {
    int64_t tiles = (job->q_len + job->tile_queries - 1) / job->tile_queries;
    rt_parallel__runs(threads, (size_t)(job->batch * job->kv_heads * tiles), attn_f64_run,
                      (void *)job);
}
