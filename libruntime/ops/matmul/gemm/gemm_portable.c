/* gemm_portable.c: the C micro-kernel for CPUs without AVX2/FMA, and the reference the
 * vector kernels are tested against. */
#include "ops/matmul/gemm/gemm.h"

#include <stddef.h>

/* B's row p is b + p * NR (a packed panel) or, with offsets, b + b_offsets[p]. */
static void micro(int64_t k, const float *a, const float *b, const int64_t *b_offsets, float *c,
                  int64_t ldc, int accumulate, const float *row_bias, const float *col_bias,
                  const float *clamp) {
    float acc[RT_GEMM_MR][RT_GEMM_NR] = {{0}};
    for (int64_t p = 0; p < k; p++) {
        const float *ap = a + p * RT_GEMM_MR;
        const float *bp = b_offsets != NULL ? b + b_offsets[p] : b + p * RT_GEMM_NR;
        for (int i = 0; i < RT_GEMM_MR; i++)
            for (int j = 0; j < RT_GEMM_NR; j++)
                acc[i][j] += ap[i] * bp[j];
    }
    for (int i = 0; i < RT_GEMM_MR; i++) {
        float *row = c + i * ldc;
        for (int j = 0; j < RT_GEMM_NR; j++) {
            float base = accumulate ? row[j]
                                    : (row_bias ? row_bias[i] : 0.0f) +
                                          (col_bias ? col_bias[j] : 0.0f);
            float v = acc[i][j] + base;
            if (clamp != NULL) /* as Clip's scalar form, NaN kept */
                v = v < clamp[0] ? clamp[0] : v > clamp[1] ? clamp[1] : v;
            row[j] = v;
        }
    }
}

void rt_gemm_f32_micro__portable(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias, const float *clamp) {
    micro(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp);
}

void rt_gemm_f32_gather__portable(int64_t k, const float *a, const float *b,
                                  const int64_t *b_offsets, float *c, int64_t ldc,
                                  int accumulate, const float *row_bias,
                                  const float *col_bias, const float *clamp) {
    micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp);
}
