/* kernels/attention_f32.h: the float32 attention kernel, included by kernels/attention.c once
 * per instruction set (ATTN(name) names this copy): the products of a key block, as
 * register-blocked loops where they are small and on the packed GEMM otherwise, and the tile
 * loop of attention_impl.h around them. */
#ifndef RT_ATTN_F32_ONCE
#define RT_ATTN_F32_ONCE
/* Products this small (a few thousand multiply-adds) cost less as register-blocked loops than
 * the GEMM's packing: the tiny heads of small models. */
#define ATTN_DIRECT_MACS 8192
/* Nor do products whose short side (the head size) is this small: the GEMM packs the long
 * sides for a few multiply-adds each. */
#define ATTN_DIRECT_DEPTH 0
#endif

/* One register of floats on this copy's instruction set (ATTN_LANES, set by the includer):
 * wider GCC vectors than the registers go through the stack. */
typedef float ATTN(vf) __attribute__((vector_size(ATTN_LANES * sizeof(float))));
typedef int32_t ATTN(vi) __attribute__((vector_size(ATTN_LANES * sizeof(float))));

#define ATTN_T float

/* The first `count` (<= ATTN_LANES) floats at p, zeros after. */
static inline __attribute__((always_inline)) ATTN(vf) ATTN(load_lanes)(const float *p,
                                                                      int64_t count) {
    ATTN(vf) v = {0};
    if (count == ATTN_LANES)
        memcpy(&v, p, sizeof v);
    else
        for (int64_t i = 0; i < count; i++)
            v[i] = p[i];
    return v;
}

static inline __attribute__((always_inline)) void ATTN(store_lanes)(float *p, ATTN(vf) v,
                                                                    int64_t count) {
    if (count == ATTN_LANES)
        memcpy(p, &v, sizeof v);
    else
        for (int64_t i = 0; i < count; i++)
            p[i] = v[i];
}

typedef struct ATTN(slot) ATTN(slot);
static void ATTN(scores)(ATTN(slot) *sl, int64_t rows, int64_t n, const float *k,
                         int64_t key_stride);
static void ATTN(values)(ATTN(slot) *sl, int64_t rows, int64_t n, const float *v,
                         int64_t key_stride);

/* exp of one register of scores already shifted by their row's largest (so <= 0, -inf or
 * NaN): exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 in [-ln 2 / 2, ln 2 / 2]
 * (ln 2 in two parts), exp(r) by its degree-6 Taylor polynomial (relative error 1.2e-7 on that
 * interval: about 2 ulp). Below -87.3 (a result under 2^-126, negligible next to the row's
 * largest term, 1) it gives 0; NaN stays NaN. A quarter of vmath's accurate exp's cost, which
 * a softmax, summing terms of at most 1, does not need. */
static inline __attribute__((always_inline)) ATTN(vf) ATTN(exp_shifted)(ATTN(vf) x) {
    const float lowest = -87.3365f, shifter = 12582912.0f; /* 1.5 * 2^23: rounds to integer */
    ATTN(vi) underflow = x < lowest;
    x = (ATTN(vf))(((ATTN(vi))x & ~underflow) | ((ATTN(vi))(x - x + lowest) & underflow));
    ATTN(vf) shifted = x * 1.44269504f + shifter, k = shifted - shifter;
    ATTN(vf) r = x - k * 0.693145752f - k * 1.42860677e-6f;
    ATTN(vf) p = r * (1.0f / 720) + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    ATTN(vi) scale = ((ATTN(vi))shifted - (ATTN(vi))(shifted - shifted + shifter) + 127) << 23;
    return (ATTN(vf))((ATTN(vi))(p * (ATTN(vf))scale) & ~underflow);
}

static void ATTN(exp_row)(float *x, size_t n) {
    size_t j = 0;
    for (; j + ATTN_LANES <= n; j += ATTN_LANES) {
        ATTN(vf) v;
        memcpy(&v, x + j, sizeof v);
        v = ATTN(exp_shifted)(v);
        memcpy(x + j, &v, sizeof v);
    }
    if (j < n) {
        ATTN(vf) v = ATTN(load_lanes)(x + j, (int64_t)(n - j));
        ATTN(store_lanes)(x + j, ATTN(exp_shifted)(v), (int64_t)(n - j));
    }
}
static void ATTN(tanh_row)(float *x, size_t n) { rt_vmath__kernel(RT_VMATH_TANH)(x, x, n); }

/* Reductions over lanes (a serial maxss / addss chain costs 4 cycles an element). */
static float ATTN(row_max)(const float *x, int64_t n) {
    ATTN(vf) acc = {0};
    acc -= (float)INFINITY;
    int64_t j = 0;
    for (; j + ATTN_LANES <= n; j += ATTN_LANES) {
        ATTN(vf) v;
        memcpy(&v, x + j, sizeof v);
        ATTN(vi) wins = v > acc; /* lanes of -1 where v is larger (never for a NaN) */
        acc = (ATTN(vf))(((ATTN(vi))v & wins) | ((ATTN(vi))acc & ~wins));
    }
    float top = -(float)INFINITY;
    for (int i = 0; i < ATTN_LANES; i++)
        top = acc[i] > top ? acc[i] : top;
    for (; j < n; j++)
        top = x[j] > top ? x[j] : top;
    return top;
}

static float ATTN(row_sum)(const float *x, int64_t n) {
    ATTN(vf) acc = {0};
    int64_t j = 0;
    for (; j + ATTN_LANES <= n; j += ATTN_LANES) {
        ATTN(vf) v;
        memcpy(&v, x + j, sizeof v);
        acc += v;
    }
    float sum = 0;
    for (int i = 0; i < ATTN_LANES; i++)
        sum += acc[i];
    for (; j < n; j++)
        sum += x[j];
    return sum;
}

#include "ops/attention/kernels/attention_impl.h"


/* s[r][j] = q[r] . k[j]: K^T first (keys along lanes, zero past n), so no sum across lanes. */
static void ATTN(scores_direct)(ATTN(slot) *sl, int64_t rows, int64_t n, const float *k,
                          int64_t key_stride) {
    int64_t d = sl->head_dim, width = (n + ATTN_LANES - 1) / ATTN_LANES * ATTN_LANES;
    for (int64_t c = 0; c < d; c++) {
        float *kt = sl->kt + c * width;
        for (int64_t j = 0; j < n; j++)
            kt[j] = k[j * key_stride + c];
        for (int64_t j = n; j < width; j++)
            kt[j] = 0;
    }
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) /* four rows share each load of K^T */
        for (int64_t j0 = 0; j0 < n; j0 += ATTN_LANES) {
            ATTN(vf) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            const float *q = sl->q + r * d;
            for (int64_t c = 0; c < d; c++) {
                ATTN(vf) kv;
                memcpy(&kv, sl->kt + c * width + j0, sizeof kv);
                a0 += q[c] * kv;
                a1 += q[d + c] * kv;
                a2 += q[2 * d + c] * kv;
                a3 += q[3 * d + c] * kv;
            }
            int64_t count = n - j0 < ATTN_LANES ? n - j0 : ATTN_LANES;
            ATTN(store_lanes)(sl->s + r * n + j0, a0, count);
            ATTN(store_lanes)(sl->s + (r + 1) * n + j0, a1, count);
            ATTN(store_lanes)(sl->s + (r + 2) * n + j0, a2, count);
            ATTN(store_lanes)(sl->s + (r + 3) * n + j0, a3, count);
        }
    for (; r < rows; r++)
        for (int64_t j0 = 0; j0 < n; j0 += ATTN_LANES) {
            ATTN(vf) acc = {0};
            for (int64_t c = 0; c < d; c++) {
                ATTN(vf) kv;
                memcpy(&kv, sl->kt + c * width + j0, sizeof kv);
                acc += sl->q[r * d + c] * kv;
            }
            ATTN(store_lanes)(sl->s + r * n + j0, acc, n - j0 < ATTN_LANES ? n - j0 : ATTN_LANES);
        }
}

/* t[r] = sum_j p[r][j] v[j]: v's columns along lanes. */
static void ATTN(values_direct)(ATTN(slot) *sl, int64_t rows, int64_t n, const float *v,
                                int64_t key_stride) {
    int64_t dv = sl->v_dim, r = 0;
    for (; r + 4 <= rows; r += 4) /* four rows share each load of v */
        for (int64_t c0 = 0; c0 < dv; c0 += ATTN_LANES) {
            int64_t count = dv - c0 < ATTN_LANES ? dv - c0 : ATTN_LANES;
            ATTN(vf) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            const float *p = sl->s + r * n;
            for (int64_t j = 0; j < n; j++) {
                ATTN(vf) vj = ATTN(load_lanes)(v + j * key_stride + c0, count);
                a0 += p[j] * vj;
                a1 += p[n + j] * vj;
                a2 += p[2 * n + j] * vj;
                a3 += p[3 * n + j] * vj;
            }
            ATTN(store_lanes)(sl->t + r * dv + c0, a0, count);
            ATTN(store_lanes)(sl->t + (r + 1) * dv + c0, a1, count);
            ATTN(store_lanes)(sl->t + (r + 2) * dv + c0, a2, count);
            ATTN(store_lanes)(sl->t + (r + 3) * dv + c0, a3, count);
        }
    for (; r < rows; r++)
        for (int64_t c0 = 0; c0 < dv; c0 += ATTN_LANES) {
            int64_t count = dv - c0 < ATTN_LANES ? dv - c0 : ATTN_LANES;
            ATTN(vf) acc = {0};
            const float *p = sl->s + r * n;
            for (int64_t j = 0; j < n; j++)
                acc += p[j] * ATTN(load_lanes)(v + j * key_stride + c0, count);
            ATTN(store_lanes)(sl->t + r * dv + c0, acc, count);
        }
}

static void ATTN(scores)(ATTN(slot) *sl, int64_t rows, int64_t n, const float *k,
                            int64_t key_stride) {
    if (sl->head_dim <= ATTN_DIRECT_DEPTH || rows * n * sl->head_dim <= ATTN_DIRECT_MACS) {
        ATTN(scores_direct)(sl, rows, n, k, key_stride);
        return;
    }
    rt_gemm_f32_args g = {.m = rows, .n = n, .k = sl->head_dim,
                          .a = sl->q, .a_row_stride = sl->head_dim, .a_col_stride = 1,
                          .b = k, .b_row_stride = 1, .b_col_stride = key_stride,
                          .c = sl->s, .c_row_stride = n};
    rt_gemm__f32(&g, sl->gemm, sl->gemm_bytes, 1);
}

static void ATTN(values)(ATTN(slot) *sl, int64_t rows, int64_t n, const float *v,
                            int64_t key_stride) {
    if (sl->v_dim <= ATTN_DIRECT_DEPTH || rows * n * sl->v_dim <= ATTN_DIRECT_MACS) {
        ATTN(values_direct)(sl, rows, n, v, key_stride);
        return;
    }
    rt_gemm_f32_args g = {.m = rows, .n = sl->v_dim, .k = n,
                          .a = sl->s, .a_row_stride = n, .a_col_stride = 1,
                          .b = v, .b_row_stride = key_stride, .b_col_stride = 1,
                          .c = sl->t, .c_row_stride = sl->v_dim};
    rt_gemm__f32(&g, sl->gemm, sl->gemm_bytes, 1);
}

#undef ATTN_T
