/* gemm_avx512.c: the 8x32 micro-kernel with AVX-512F: sixteen 16-wide accumulators, two B
 * vectors and one broadcast A value live per step, half of the 32 zmm registers. On CPUs that
 * split a 512-bit FMA in two (AMD Zen 4) the arithmetic peak is the AVX2 one; the gain is half
 * the instructions per FMA, which leaves the front end room to keep both FMA pipes busy. */
#include "ops/matmul/gemm/gemm.h"

#include "core/lane_mask.h"
#include "core/transpose8.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 8
#define NR 32
#define TALL RT_GEMM_TALL /* rt_gemm_f32_gather12__avx512_pairs's panels */

/* Kernels start on a cache line, so their inner loops sit where they do in every build: with
 * the functions moved by 32 bytes (an unrelated function added before them), the model
 * convolutions measured 5 to 10% slower. */
#define KERNEL __attribute__((target("avx512f"), aligned(64)))

/* Masks of the first `cols` (<= 32) of a row's two 16-float vectors. */
static inline __attribute__((always_inline, target("avx512f"))) void column_masks(
    int64_t cols, __mmask16 *m0, __mmask16 *m1) {
    *m0 = rt_lane_mask__16(0, cols);
    *m1 = rt_lane_mask__16(0, cols - 16);
}

/* A finished row of C: the clamp (max and min return their second operand for a NaN, so it
 * is kept; Relu's upper bound, +inf, is skipped), then the masked stores. */
static inline __attribute__((always_inline, target("avx512f"))) void store_row(
    float *c, __mmask16 m0, __mmask16 m1, __m512 r0, __m512 r1, const float *clamp) {
    if (clamp != NULL) {
        const __m512 lo = _mm512_set1_ps(clamp[0]);
        r0 = _mm512_max_ps(lo, r0);
        r1 = _mm512_max_ps(lo, r1);
        if (clamp[1] != INFINITY) {
            const __m512 hi = _mm512_set1_ps(clamp[1]);
            r0 = _mm512_min_ps(hi, r0);
            r1 = _mm512_min_ps(hi, r1);
        }
    }
    _mm512_mask_storeu_ps(c, m0, r0);
    _mm512_mask_storeu_ps(c + 16, m1, r1);
}

/* 16 floats from p (any alignment) with their even (odd) lanes copied into the odd (even)
 * ones, each in one load. From C the compiler loads the vector once and shuffles it for both,
 * and a shuffle takes the port of one of the two FMA units; with the address as an asm
 * memory operand it kept every sum in memory. The asm reads memory it does not declare: B is
 * only ever written before a kernel is called (the kernels are entered through pointers,
 * never inlined into code that packs B), so no store to it can move past these loads. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 even_columns(
    const float *p) {
    __m512 v;
    __asm__("vmovsldup (%1), %0" : "=v"(v) : "r"(p));
    return v;
}

static inline __attribute__((always_inline, target("avx512f"))) __m512 odd_columns(
    const float *p) {
    __m512 v;
    __asm__("vmovshdup (%1), %0" : "=v"(v) : "r"(p));
    return v;
}

/* Row i of C from its sums: C added (accumulate), or the biases (the first slice), then the
 * clamp and the masked stores. */
static inline __attribute__((always_inline, target("avx512f"))) void finish_row(
    float *row, __mmask16 m0, __mmask16 m1, __m512 r0, __m512 r1, int accumulate,
    const float *row_bias, int i, bool col, __m512 col0, __m512 col1, const float *clamp) {
    if (accumulate) {
        r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, row));
        r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, row + 16));
    } else {
        if (row_bias != NULL) {
            const __m512 r = _mm512_set1_ps(row_bias[i]);
            r0 = _mm512_add_ps(r0, r);
            r1 = _mm512_add_ps(r1, r);
        }
        if (col) {
            r0 = _mm512_add_ps(r0, col0);
            r1 = _mm512_add_ps(r1, col1);
        }
    }
    store_row(row, m0, m1, r0, r1, clamp);
}

/* Past one depth step: A's next `a_step` values (its panel's height), B's next packed row
 * (gathered rows are found by offset), and the next line to prefetch. */
static inline __attribute__((always_inline, target("avx512f"))) void next_step(
    const float **a, int a_step, const float **b, bool gathered, const float **prefetch) {
    *a += a_step;
    if (!gathered)
        *b += NR;
    if (*prefetch != NULL) {
        _mm_prefetch((const char *)*prefetch, _MM_HINT_T1);
        *prefetch += RT_FLOATS_PER_LINE;
    }
}

/* Gathered B rows (a pointwise convolution reads x in place) lie a plane apart, each on a page
 * of its own, where the hardware prefetchers do not follow them, so each load waited on L2:
 * step p fetches row p + GATHER_AHEAD into L1. On a Xeon (Sapphire Rapids family), chains of
 * pointwise layers took 0.91 of the time on 56x56 with 128 channels, 0.85 on 112x112 with 64,
 * 0.97 on 28x28 with 256 at 1 thread, 0.83 to 0.95 at 2 (4 to 16 steps ahead were alike);
 * inside MobileNet, where a depthwise layer has just written x, 0.92 to 1.0 a layer. */
#define GATHER_AHEAD 16

static inline __attribute__((always_inline, target("avx512f"))) void fetch_gathered_row(
    const float *b, const int64_t *b_offsets, int64_t p, int64_t k, int halves) {
    if (p + GATHER_AHEAD >= k)
        return;
    const float *row = b + b_offsets[p + GATHER_AHEAD];
    _mm_prefetch((const char *)row, _MM_HINT_T0);
    if (halves == 2)
        _mm_prefetch((const char *)(row + 16), _MM_HINT_T0);
}

/* A pair of A's values (rows 2i and 2i + 1 of a packed step) in every pair of lanes. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 row_pair(
    const float *a) {
    double pair;
    memcpy(&pair, a, sizeof pair);
    return _mm512_castpd_ps(_mm512_set1_pd(pair));
}

/* B's row p is b + p * NR (a packed panel) or, with offsets, b + b_offsets[p]. Only C's
 * first `cols` columns are read and written (masked), and only that many column biases; with
 * `halves` 1 (a constant, cols <= 16) only the first 16 columns are computed at all, and only
 * the first `rows` (a constant: MR, fewer, or TALL in a panel of that height) rows of C, of
 * which the first `stored` are stored. With `prefetch` (NULL: a constant in the callers that
 * have none), step p also fetches the p-th line from prefetch into L2.
 *
 * Rows go one at a time (each A value broadcast against the two B vectors) or, with `paired`,
 * in pairs: one 8-byte broadcast puts rows 2i and 2i + 1 in alternate lanes, against each B
 * vector with its even columns duplicated and, in a second sum, its odd ones, so a step loads
 * 4 B vectors and 4 A pairs for 16 multiply-adds instead of 2 and 8 (the same products summed
 * in the same order: the results are identical). The paired sums are unshuffled into rows
 * once, at the end. On a Xeon (Sapphire Rapids family) the paired kernel ran 4 to 8% faster in
 * L1 by the medians, and rt_gemm__f32 3 to 6% faster at n = 128 to 1024 against OpenBLAS in
 * the same process. The direct convolution's tall panels take a 12-row tile (below); the
 * pixel rows (conv/kernels/pixels_f32.c), whose B is in L1, took 0.95 to 1.02 of the time
 * with it (not taken). The duplicating loads are shuffles, which AMD's CPUs run beside their FMAs,
 * unmeasured there: gemm.c takes the paired form on Intel CPUs. */
static inline __attribute__((always_inline, target("avx512f"))) void micro_rows(
    int64_t k, const float *a, const float *b, const int64_t *b_offsets, float *c, int64_t ldc,
    int accumulate, const float *row_bias, const float *col_bias, const float *clamp,
    int64_t cols, int halves, int rows, const float *prefetch, int paired, int64_t stored) {
    const int a_step = rows > MR ? rows : MR;
    __mmask16 m0, m1;
    column_masks(cols, &m0, &m1);
    /* Only the additions there is something to add: with a small k (a 27-deep convolution)
     * the epilogue is a fifth of a call. */
    const bool col = !accumulate && col_bias != NULL;
    __m512 col0 = _mm512_setzero_ps(), col1 = _mm512_setzero_ps();
    if (col) {
        col0 = _mm512_maskz_loadu_ps(m0, col_bias);
        col1 = _mm512_maskz_loadu_ps(m1, col_bias + 16);
    }
    if (!paired) {
        __m512 acc[TALL][2];
        for (int i = 0; i < rows; i++)
            acc[i][0] = acc[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
        for (int64_t p = 0; p < k; p++) {
            const float *row = b_offsets != NULL ? b + b_offsets[p] : b;
            if (b_offsets != NULL)
                fetch_gathered_row(b, b_offsets, p, k, halves);
            const __m512 b0 = _mm512_loadu_ps(row);
            const __m512 b1 = halves == 1 ? _mm512_setzero_ps() : _mm512_loadu_ps(row + 16);
#pragma GCC unroll 12
            for (int i = 0; i < rows; i++) {
                const __m512 ai = _mm512_set1_ps(a[i]);
                acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
                if (halves == 2)
                    acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
            }
            next_step(&a, a_step, &b, b_offsets != NULL, &prefetch);
        }
#pragma GCC unroll 12
        for (int i = 0; i < rows; i++)
            if (i < stored)
                finish_row(c + i * ldc, m0, m1, acc[i][0], acc[i][1], accumulate, row_bias, i,
                           col, col0, col1, clamp);
        return;
    }
    const int pairs = (rows + 1) / 2; /* an odd last row pairs with padding, not stored */
    __m512 even[TALL / 2][2], odd[TALL / 2][2];
    for (int i = 0; i < pairs; i++)
        even[i][0] = even[i][1] = odd[i][0] = odd[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t p = 0; p < k; p++) {
        const float *row = b_offsets != NULL ? b + b_offsets[p] : b;
        if (b_offsets != NULL)
            fetch_gathered_row(b, b_offsets, p, k, halves);
        const __m512 e0 = even_columns(row), o0 = odd_columns(row);
        const __m512 e1 = halves == 1 ? _mm512_setzero_ps() : even_columns(row + 16);
        const __m512 o1 = halves == 1 ? _mm512_setzero_ps() : odd_columns(row + 16);
#pragma GCC unroll 6
        for (int i = 0; i < pairs; i++) {
            const __m512 ai = row_pair(a + 2 * i);
            even[i][0] = _mm512_fmadd_ps(ai, e0, even[i][0]);
            odd[i][0] = _mm512_fmadd_ps(ai, o0, odd[i][0]);
            if (halves == 2) {
                even[i][1] = _mm512_fmadd_ps(ai, e1, even[i][1]);
                odd[i][1] = _mm512_fmadd_ps(ai, o1, odd[i][1]);
            }
        }
        next_step(&a, a_step, &b, b_offsets != NULL, &prefetch);
    }
    /* Row 2i: the even sums' even lanes and the odd sums' even lanes moved up one; row 2i + 1:
     * the even sums' odd lanes moved down one and the odd sums' odd lanes. */
#pragma GCC unroll 6
    for (int i = 0; i < pairs; i++) {
        if (2 * i >= stored)
            break;
        __m512 upper[2], lower[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            upper[h] = _mm512_mask_moveldup_ps(even[i][h], 0xAAAA, odd[i][h]);
            lower[h] = _mm512_mask_movehdup_ps(odd[i][h], 0x5555, even[i][h]);
        }
        finish_row(c + 2 * i * ldc, m0, m1, upper[0], upper[1], accumulate, row_bias, 2 * i,
                   col, col0, col1, clamp);
        if (2 * i + 1 < rows && 2 * i + 1 < stored)
            finish_row(c + (2 * i + 1) * ldc, m0, m1, lower[0], lower[1], accumulate, row_bias,
                       2 * i + 1, col, col0, col1, clamp);
    }
}

static inline __attribute__((always_inline, target("avx512f"))) void micro(
    int64_t k, const float *a, const float *b, const int64_t *b_offsets, float *c, int64_t ldc,
    int accumulate, const float *row_bias, const float *col_bias, const float *clamp,
    int64_t cols, int halves, int paired) {
    micro_rows(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, cols, halves,
               MR, NULL, paired, MR);
}

/* Rows a[0..8) (row stride lda, unit column stride), columns [0, k), into an 8-row panel:
 * dst[p * 8 + r] = a[r * lda + p]. Eight columns at a time are an 8 x 8 transpose in
 * registers; packing with scalar stores took 7 to 12% of a 32-row product's time. */
KERNEL void rt_gemm_f32_pack_a8__avx512(const float *a, int64_t lda, int64_t k, float *dst) {
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 rows[8], columns[8];
        for (int i = 0; i < 8; i++)
            rows[i] = _mm256_loadu_ps(a + i * lda + p);
        rt_transpose8x8(rows, columns);
        for (int j = 0; j < 8; j++)
            _mm256_storeu_ps(dst + (p + j) * 8, columns[j]);
    }
    for (; p < k; p++)
        for (int i = 0; i < 8; i++)
            dst[p * 8 + i] = a[i * lda + p];
}

KERNEL void rt_gemm_f32_row__avx512(
    int64_t k, const float *a, int64_t a_stride, const float *b, float *c, int accumulate,
    float row_bias, const float *col_bias, const float *clamp, int64_t cols) {
    __mmask16 m0, m1;
    column_masks(cols, &m0, &m1);
    /* Four sums per vector over interleaved depths: one chain would wait on each FMA. */
    __m512 acc[4][2];
    for (int u = 0; u < 4; u++)
        acc[u][0] = acc[u][1] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 4 <= k; p += 4) {
        /* B is read once here, usually from memory (a batch-1 layer's weights), and the
         * hardware prefetcher starts over at each page: fetch the 8 lines 32 steps (4 KB)
         * ahead, past the panel into the next one, which follows it in the packing (past
         * the last, a prefetch never faults). A 1024 ->
         * 1000 linear layer (4 MB of weights) on a Xeon: 0.93 of the time without, 0.79
         * with the weights evicted between calls (16 steps ahead: 0.94 / 0.84). */
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++)
            _mm_prefetch((const char *)(b + (p + 32) * NR + l * RT_FLOATS_PER_LINE),
                         _MM_HINT_T0);
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            const __m512 av = _mm512_set1_ps(a[(p + u) * a_stride]);
            acc[u][0] = _mm512_fmadd_ps(av, _mm512_load_ps(b + (p + u) * NR), acc[u][0]);
            acc[u][1] = _mm512_fmadd_ps(av, _mm512_load_ps(b + (p + u) * NR + 16), acc[u][1]);
        }
    }
    for (; p < k; p++) {
        const __m512 av = _mm512_set1_ps(a[p * a_stride]);
        acc[0][0] = _mm512_fmadd_ps(av, _mm512_load_ps(b + p * NR), acc[0][0]);
        acc[0][1] = _mm512_fmadd_ps(av, _mm512_load_ps(b + p * NR + 16), acc[0][1]);
    }
    __m512 r0 = _mm512_add_ps(_mm512_add_ps(acc[0][0], acc[1][0]),
                              _mm512_add_ps(acc[2][0], acc[3][0]));
    __m512 r1 = _mm512_add_ps(_mm512_add_ps(acc[0][1], acc[1][1]),
                              _mm512_add_ps(acc[2][1], acc[3][1]));
    __m512 base0, base1;
    if (accumulate) {
        base0 = _mm512_maskz_loadu_ps(m0, c);
        base1 = _mm512_maskz_loadu_ps(m1, c + 16);
    } else {
        base0 = base1 = _mm512_set1_ps(row_bias);
        if (col_bias != NULL) {
            base0 = _mm512_add_ps(base0, _mm512_maskz_loadu_ps(m0, col_bias));
            base1 = _mm512_add_ps(base1, _mm512_maskz_loadu_ps(m1, col_bias + 16));
        }
    }
    store_row(c, m0, m1, _mm512_add_ps(r0, base0), _mm512_add_ps(r1, base1), clamp);
}

/* The kernel's entry points, with rows one at a time (suffix avx512) or in pairs
 * (avx512_pairs). */
#define DEFINE_ENTRIES(sfx, paired)                                                            \
    KERNEL void rt_gemm_f32_micro__##sfx(int64_t k, const float *a, const float *b, float *c,  \
                                         int64_t ldc, int accumulate, const float *row_bias,   \
                                         const float *col_bias, const float *clamp) {          \
        micro(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, NR, 2, paired);     \
    }                                                                                          \
                                                                                               \
    KERNEL void rt_gemm_f32_gather__##sfx(                                                     \
        int64_t k, const float *a, const float *b, const int64_t *b_offsets, float *c,         \
        int64_t ldc, int accumulate, const float *row_bias, const float *col_bias,             \
        const float *clamp) {                                                                  \
        micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, NR, 2,        \
              paired);                                                                         \
    }                                                                                          \
                                                                                               \
    /* A block of 16 columns or fewer (a row of 112 outputs ends in one) does half the work. */ \
    KERNEL void rt_gemm_f32_cols__##sfx(                                                       \
        int64_t k, const float *a, const float *b, const int64_t *b_offsets, float *c,         \
        int64_t ldc, int accumulate, const float *row_bias, const float *col_bias,             \
        const float *clamp, int64_t cols) {                                                    \
        if (b_offsets != NULL && cols <= 16)                                                   \
            micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 1,  \
                  paired);                                                                     \
        else if (b_offsets != NULL)                                                            \
            micro(k, a, b, b_offsets, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 2,  \
                  paired);                                                                     \
        else if (cols <= 16)                                                                   \
            micro(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 1,       \
                  paired);                                                                     \
        else                                                                                   \
            micro(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, cols, 2,       \
                  paired);                                                                     \
    }                                                                                          \
                                                                                               \
    /* The first `rows` (1 to 8) rows of a whole-width block, packed A and B, biases and clamp \
     * as the micro-kernel's: a short last block of rows multiplies only its own (one row of   \
     * eight: 1/8 of the arithmetic), and writes C in place instead of through a copy. With    \
     * `prefetch`, k lines from there are fetched into L2 along the way, one a step. Each case \
     * twice, so the loops without a prefetch have none. */                                    \
    KERNEL void rt_gemm_f32_rows__##sfx(int64_t k, const float *a, const float *b, float *c,   \
                                        int64_t ldc, int accumulate, const float *row_bias,    \
                                        const float *col_bias, const float *clamp,             \
                                        int64_t rows, const float *prefetch) {                 \
        switch (rows + (prefetch != NULL ? MR : 0)) {                                          \
            ROWS_CASE(1, paired)                                                               \
            ROWS_CASE(2, paired)                                                               \
            ROWS_CASE(3, paired)                                                               \
            ROWS_CASE(4, paired)                                                               \
            ROWS_CASE(5, paired)                                                               \
            ROWS_CASE(6, paired)                                                               \
            ROWS_CASE(7, paired)                                                               \
        case 2 * MR:                                                                           \
            micro_rows(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, NR, 2, MR, \
                       prefetch, paired, MR);                                                  \
            break;                                                                             \
        default:                                                                               \
            micro(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, NR, 2, paired); \
        }                                                                                      \
    }

#define ROWS_CASE(r, paired)                                                                   \
    case r:                                                                                    \
        micro_rows(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, NR, 2, r,      \
                   NULL, paired, r);                                                           \
        break;                                                                                 \
    case r + MR:                                                                               \
        micro_rows(k, a, b, NULL, c, ldc, accumulate, row_bias, col_bias, clamp, NR, 2, r,      \
                   prefetch, paired, r);                                                       \
        break;

DEFINE_ENTRIES(avx512, 0)
DEFINE_ENTRIES(avx512_pairs, 1)

/* A tall panel (TALL rows, packed TALL to a depth step) against gathered B rows, paired: 24
 * sums, so each B vector loaded serves 12 rows instead of 8, a third less of B to read per
 * multiply-add, where B comes from L2 or further (the direct convolution reads x in place). On
 * a Xeon (Sapphire Rapids family), inside MobileNet v1, per layer call by call against the
 * 8-row panels: the direct path's pointwise layers took 0.87 to 0.96 of the time at 2 threads
 * and, through this VM's noise, about as much at 1; its first 3x3 convolution (27 deep) was
 * unchanged. A whole block takes the copy with constant masks: with masks computed for every
 * block, the 32- and 64-deep layers took up to 1.17 times as long. Only the first `rows` rows
 * of C are stored, and its first `cols` columns. */
KERNEL void rt_gemm_f32_gather12__avx512_pairs(int64_t k, const float *a, const float *b,
                                               const int64_t *b_offsets, float *c, int64_t ldc,
                                               int accumulate, const float *row_bias,
                                               const float *clamp, int64_t rows, int64_t cols) {
    if (rows == TALL && cols == NR) /* a whole block: its masks and row count constants */
        micro_rows(k, a, b, b_offsets, c, ldc, accumulate, row_bias, NULL, clamp, NR, 2, TALL,
                   NULL, 1, TALL);
    else if (cols <= 16)
        micro_rows(k, a, b, b_offsets, c, ldc, accumulate, row_bias, NULL, clamp, cols, 1, TALL,
                   NULL, 1, rows);
    else
        micro_rows(k, a, b, b_offsets, c, ldc, accumulate, row_bias, NULL, clamp, cols, 2, TALL,
                   NULL, 1, rows);
}

#endif
