/* kernels/attention.c: the attention kernels. Tiles (attention_impl.h) run on the pool, one
 * per (batch, kv head, block of queries). float32 (attention_f32.h) forms its two products per
 * key block on the packed GEMM or, small, as register-blocked loops, and its exponentials with
 * the vector math; it is compiled for AVX-512, AVX2 and the baseline, one chosen at first use
 * (RT_ATTENTION_KERNEL=portable|avx2|avx512 or RT_PORTABLE_KERNELS=1 force one). float64
 * runs plain loops. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/isa.h"
#include "core/threadpool.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/kernels/vmath.h"
#include "ops/matmul/gemm/gemm.h"


/* ---- float32, once per instruction set ---------------------------------------------------- */

#define ATTN(name) attn_f32_portable_##name
#define ATTN_LANES 4
#include "ops/attention/kernels/attention_f32.h"
#undef ATTN_LANES
#undef ATTN

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_X86 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ATTN(name) attn_f32_avx2_##name
#define ATTN_LANES 8
#include "ops/attention/kernels/attention_f32.h"
#undef ATTN_LANES
#undef ATTN
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
#define ATTN(name) attn_f32_avx512_##name
#define ATTN_LANES 16
#include "ops/attention/kernels/attention_f32.h"
#undef ATTN_LANES
#undef ATTN
#pragma GCC pop_options
#endif

static rt_run_fn f32_run = attn_f32_portable_run;
static const char *f32_variant = "portable";
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    rt_isa isa = rt_isa__choose("RT_ATTENTION_KERNEL", true);
#ifdef ATTN_X86
    f32_run = isa == RT_ISA_AVX512 ? attn_f32_avx512_run
              : isa == RT_ISA_AVX2 ? attn_f32_avx2_run
                                   : attn_f32_portable_run;
#else
    isa = RT_ISA_PORTABLE;
#endif
    f32_variant = rt_isa__name(isa);
}

const char *rt_attn__f32_variant(void) {
    pthread_once(&choose_once, choose);
    return f32_variant;
}

size_t rt_attn__f32_slot_bytes(int64_t rows, int64_t head_dim, int64_t v_dim) {
    attn_f32_portable_slot sl;
    size_t scores = rt_gemm__f32_scratch_bytes(rows, RT_ATTN_KEY_BLOCK, head_dim, 1);
    size_t values = rt_gemm__f32_scratch_bytes(rows, v_dim, RT_ATTN_KEY_BLOCK, 1);
    return attn_f32_portable_carve(&sl, NULL, rows, head_dim, v_dim) +
           (scores > values ? scores : values);
}

void rt_attn__f32(const rt_attn_job *job, int32_t threads) {
    pthread_once(&choose_once, choose);
    int64_t tiles = (job->q_len + job->tile_queries - 1) / job->tile_queries;
    rt_parallel__runs(threads, (size_t)(job->batch * job->kv_heads * tiles), f32_run,
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

static double attn_f64_row_max(const double *x, int64_t n) {
    double top = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        top = x[j] > top ? x[j] : top;
    return top;
}

static double attn_f64_row_sum(const double *x, int64_t n) {
    double sum = 0;
    for (int64_t j = 0; j < n; j++)
        sum += x[j];
    return sum;
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
            sl->s[r * n + j] = acc;
        }
}

static void attn_f64_values(attn_f64_slot *sl, int64_t rows, int64_t n, const double *v,
                            int64_t key_stride) {
    for (int64_t r = 0; r < rows; r++) {
        double *t = sl->t + r * sl->v_dim;
        for (int64_t c = 0; c < sl->v_dim; c++)
            t[c] = 0;
        for (int64_t j = 0; j < n; j++) {
            double p = sl->s[r * n + j];
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
