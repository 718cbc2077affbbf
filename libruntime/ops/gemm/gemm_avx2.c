/* gemm_avx2.c: the 6x16 micro-kernel with AVX2 + FMA: twelve 8-wide accumulators, two B
 * vectors and one broadcast A value live per step, which fills the sixteen ymm registers. */
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define RT_TARGET __attribute__((target("avx2,fma")))

RT_TARGET void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                           int64_t ldc, int accumulate, const float *row_bias,
                                           const float *col_bias) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_load_ps(b);
        const __m256 b1 = _mm256_load_ps(b + 8);
        __m256 ai = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(ai, b0, c00);
        c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(ai, b0, c10);
        c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(ai, b0, c20);
        c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(ai, b0, c30);
        c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(ai, b0, c40);
        c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(ai, b0, c50);
        c51 = _mm256_fmadd_ps(ai, b1, c51);
        a += RT_GEMM_MR;
        b += RT_GEMM_NR;
    }
    __m256 rows[RT_GEMM_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                                  {c30, c31}, {c40, c41}, {c50, c51}};
    __m256 col0 = _mm256_setzero_ps(), col1 = _mm256_setzero_ps();
    if (!accumulate && col_bias != NULL) {
        col0 = _mm256_loadu_ps(col_bias);
        col1 = _mm256_loadu_ps(col_bias + 8);
    }
    for (int i = 0; i < RT_GEMM_MR; i++) {
        float *row = c + i * ldc;
        if (accumulate) {
            rows[i][0] = _mm256_add_ps(rows[i][0], _mm256_loadu_ps(row));
            rows[i][1] = _mm256_add_ps(rows[i][1], _mm256_loadu_ps(row + 8));
        } else {
            __m256 r = row_bias != NULL ? _mm256_broadcast_ss(row_bias + i) : _mm256_setzero_ps();
            rows[i][0] = _mm256_add_ps(rows[i][0], _mm256_add_ps(r, col0));
            rows[i][1] = _mm256_add_ps(rows[i][1], _mm256_add_ps(r, col1));
        }
        _mm256_storeu_ps(row, rows[i][0]);
        _mm256_storeu_ps(row + 8, rows[i][1]);
    }
}

#else

/* Not an x86 build: the dispatcher never selects this variant. */
void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias) {
    rt_gemm_f32_micro__portable(k, a, b, c, ldc, accumulate, row_bias, col_bias);
}

#endif
