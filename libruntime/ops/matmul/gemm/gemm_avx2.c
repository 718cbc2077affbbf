/* gemm_avx2.c: the 4x24 micro-kernel with AVX2 + FMA: twelve 8-wide accumulators, three B
 * vectors and one broadcast A value live per step, which fills the sixteen ymm registers.
 * Four rows (rather than six by sixteen columns) fit the row counts of real layers, which are
 * multiples of 4 far more often than of 6, without padded rows of wasted work. */
#include "ops/matmul/gemm/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define RT_TARGET __attribute__((target("avx2,fma")))

/* The first `cols` (<= 24) lanes of a row's three 8-float vectors, as maskload / maskstore
 * masks. */
static inline __attribute__((always_inline)) RT_TARGET void column_masks(int64_t cols,
                                                                         __m256i mask[3]) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int v = 0; v < 3; v++)
        mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(cols - 8 * v)), lanes);
}

/* B's row p is b + p * NR (a packed panel) or, with offsets, b + b_offsets[p]. With `vectors`
 * (a constant) under 3, only the first 8 or 16 columns are computed at all; with `masked`,
 * C and the column bias are read and written in the first `cols` columns only (B's rows are
 * read whole either way). Named accumulators: as an array GCC kept them on the stack (a
 * third of the speed). */
static inline __attribute__((always_inline)) RT_TARGET void micro(
    int64_t k, const float *a, const float *b, const int64_t *b_offsets, float *c, int64_t ldc,
    int accumulate, const float *row_bias, const float *col_bias, const float *clamp,
    int64_t cols, int vectors, bool masked) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c02 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(), c12 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c22 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c32 = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const float *row = b_offsets != NULL ? b + b_offsets[p] : b;
        const __m256 b0 = b_offsets != NULL ? _mm256_loadu_ps(row) : _mm256_load_ps(row);
        const __m256 b1 = vectors < 2         ? _mm256_setzero_ps()
                          : b_offsets != NULL ? _mm256_loadu_ps(row + 8)
                                              : _mm256_load_ps(row + 8);
        const __m256 b2 = vectors < 3         ? _mm256_setzero_ps()
                          : b_offsets != NULL ? _mm256_loadu_ps(row + 16)
                                              : _mm256_load_ps(row + 16);
        __m256 ai = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(ai, b0, c00);
        if (vectors >= 2)
            c01 = _mm256_fmadd_ps(ai, b1, c01);
        if (vectors >= 3)
            c02 = _mm256_fmadd_ps(ai, b2, c02);
        ai = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(ai, b0, c10);
        if (vectors >= 2)
            c11 = _mm256_fmadd_ps(ai, b1, c11);
        if (vectors >= 3)
            c12 = _mm256_fmadd_ps(ai, b2, c12);
        ai = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(ai, b0, c20);
        if (vectors >= 2)
            c21 = _mm256_fmadd_ps(ai, b1, c21);
        if (vectors >= 3)
            c22 = _mm256_fmadd_ps(ai, b2, c22);
        ai = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(ai, b0, c30);
        if (vectors >= 2)
            c31 = _mm256_fmadd_ps(ai, b1, c31);
        if (vectors >= 3)
            c32 = _mm256_fmadd_ps(ai, b2, c32);
        a += RT_GEMM_MR;
        if (b_offsets == NULL)
            b += RT_GEMM_NR;
    }
    __m256 rows[RT_GEMM_MR][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22},
                                  {c30, c31, c32}};
    __m256i mask[3];
    column_masks(masked ? cols : RT_GEMM_NR, mask);
    __m256 col[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    if (!accumulate && col_bias != NULL)
        for (int v = 0; v < vectors; v++)
            col[v] = masked ? _mm256_maskload_ps(col_bias + 8 * v, mask[v])
                            : _mm256_loadu_ps(col_bias + 8 * v);
    for (int i = 0; i < RT_GEMM_MR; i++) {
        float *out = c + i * ldc;
        __m256 r = !accumulate && row_bias != NULL ? _mm256_broadcast_ss(row_bias + i)
                                                   : _mm256_setzero_ps();
        for (int v = 0; v < vectors; v++) {
            __m256 base = !accumulate ? _mm256_add_ps(r, col[v])
                          : masked    ? _mm256_maskload_ps(out + 8 * v, mask[v])
                                      : _mm256_loadu_ps(out + 8 * v);
            __m256 y = _mm256_add_ps(rows[i][v], base);
            if (clamp != NULL) /* max / min return their second operand for a NaN */
                y = _mm256_min_ps(_mm256_broadcast_ss(clamp + 1),
                                  _mm256_max_ps(_mm256_broadcast_ss(clamp), y));
            if (masked)
                _mm256_maskstore_ps(out + 8 * v, mask[v], y);
            else
                _mm256_storeu_ps(out + 8 * v, y);
        }
    }
}

RT_TARGET void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                           int64_t ldc, int accumulate, const float *row_bias,
                                           const float *col_bias, const float *clamp) {
    micro(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, RT_GEMM_NR, 3,
          false);
}

RT_TARGET void rt_gemm_f32_gather__avx2_fma(int64_t k, const float *a, const float *b,
                                            const int64_t *b_offsets, float *c, int64_t ldc,
                                            int accumulate, const float *row_bias,
                                            const float *col_bias, const float *clamp) {
    micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, RT_GEMM_NR, 3,
          false);
}

/* A block of C only `cols` (< 24) wide, B packed (b_offsets NULL) or gathered: masked loads
 * and stores of C and the column bias, so the edge block of a row of 112 outputs (16
 * columns) needs no copy aside, and a block of 16 or 8 columns computes only those. */
RT_TARGET void rt_gemm_f32_cols__avx2_fma(int64_t k, const float *a, const float *b,
                                          const int64_t *b_offsets, float *c, int64_t ldc,
                                          int accumulate, const float *row_bias,
                                          const float *col_bias, const float *clamp,
                                          int64_t cols) {
    if (cols <= 8)
        micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 1, true);
    else if (cols <= 16)
        micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 2, true);
    else
        micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 3, true);
}

/* Rows a[0..4) (row stride lda, unit column stride), columns [0, k), into a 4-row panel:
 * dst[p * 4 + r] = a[r * lda + p]. Eight columns at a time: two 4 x 4 transposes of the
 * rows' halves, where scalar stores took 4 to 5% of a 1024^3 product. */
RT_TARGET void rt_gemm_f32_pack_a4__avx2(const float *a, int64_t lda, int64_t k, float *dst) {
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 r0 = _mm256_loadu_ps(a + p), r1 = _mm256_loadu_ps(a + lda + p);
        __m256 r2 = _mm256_loadu_ps(a + 2 * lda + p), r3 = _mm256_loadu_ps(a + 3 * lda + p);
        /* Within each 128-bit half: the 4 x 4 transpose of columns p..p+3 (low) and
         * p+4..p+7 (high). */
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        __m256 c0 = _mm256_shuffle_ps(t0, t2, 0x44), c1 = _mm256_shuffle_ps(t0, t2, 0xee);
        __m256 c2 = _mm256_shuffle_ps(t1, t3, 0x44), c3 = _mm256_shuffle_ps(t1, t3, 0xee);
        /* c0 holds columns p (low) and p + 4 (high), c1 p + 1 and p + 5, and so on. */
        _mm256_storeu_ps(dst + p * 4, _mm256_permute2f128_ps(c0, c1, 0x20));
        _mm256_storeu_ps(dst + p * 4 + 8, _mm256_permute2f128_ps(c2, c3, 0x20));
        _mm256_storeu_ps(dst + p * 4 + 16, _mm256_permute2f128_ps(c0, c1, 0x31));
        _mm256_storeu_ps(dst + p * 4 + 24, _mm256_permute2f128_ps(c2, c3, 0x31));
    }
    for (; p < k; p++)
        for (int r = 0; r < 4; r++)
            dst[p * 4 + r] = a[r * lda + p];
}

#else

/* Not an x86 build: the dispatcher never selects these variants (nor refers to the
 * columns kernel). */
void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias, const float *clamp) {
    rt_gemm_f32_micro__portable(k, a, b, c, ldc, accumulate, row_bias, col_bias, clamp);
}

void rt_gemm_f32_gather__avx2_fma(int64_t k, const float *a, const float *b,
                                  const int64_t *b_offsets, float *c, int64_t ldc,
                                  int accumulate, const float *row_bias,
                                  const float *col_bias, const float *clamp) {
    rt_gemm_f32_gather__portable(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias,
                                 clamp);
}

#endif
