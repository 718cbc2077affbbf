/* gemm.h: single-precision matrix multiplication with packed panels and register-blocked
 * micro-kernels, the core under matmul, linear and conv2d.
 *
 * C[m, n] = bias + sum_k A[m, k] * B[k, n], where A and B have any element strides (so a
 * transposed operand costs nothing extra) and C is row-major with its own row stride. */
#ifndef RT_OPS_GEMM_H
#define RT_OPS_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/fused_activation.h"

typedef struct rt_gemm_f32_args {
    int64_t m, n, k;
    const float *a;
    int64_t a_row_stride, a_col_stride; /* elements */
    const float *b;
    int64_t b_row_stride, b_col_stride;
    float *c;
    int64_t c_row_stride;
    const float *column_bias; /* bias[n] added to every row, or NULL */
    const float *row_bias;    /* bias[m] added to every column, or NULL */
    rt_activation activation; /* applied to each finished tile (zero: none) */
    /* A or B packed ahead of time (rt_gemm__f32_pack_a/_b with the same m, n, k), or NULL to
     * pack slices on the fly. Constant weights are packed once, when a method is loaded. */
    const float *packed_a, *packed_b;
} rt_gemm_f32_args;

/* Floats in a 64-byte cache line: packing alignment, and the step of the kernels' prefetches
 * (one line per depth step). */
#define RT_FLOATS_PER_LINE 16

/* Fetches a block of C (`rows` rows of `cols` floats, row stride ldc) for writing, ahead of
 * the kernel call that stores it. A layer's output is often cold (written last in the
 * previous run, its lines since evicted by the weights), and a store that misses waits for
 * its line: a 32 -> 64 pointwise layer on 112x112 (K = 32, 3.2 MB of output) went from
 * 915-971 to 779-813 us by the minimums with the next column panel's block fetched before
 * each micro-kernel call (Zen 2, a C harness). */
static inline void rt_gemm__f32_prefetch_c(const float *c, int64_t ldc, int64_t rows,
                                           int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        __builtin_prefetch(c + r * ldc, 1, 3);
        __builtin_prefetch(c + r * ldc + cols - 1, 1, 3);
    }
}

/* Scratch bytes for an m x n x k product on up to `threads` threads: a packing buffer per
 * thread, plus room to pack B once for every row tile when there are several (bounded). */
size_t rt_gemm__f32_scratch_bytes(int64_t m, int64_t n, int64_t k, int32_t threads);

/* Compute on up to `threads` threads with `scratch_bytes` of 64-byte aligned scratch, at
 * least rt_gemm__f32_scratch_bytes(0, 0, 0, threads); more (as that function asks for this
 * shape) lets B be packed once. Nothing is allocated. */
void rt_gemm__f32(const rt_gemm_f32_args *args, void *scratch, size_t scratch_bytes,
                  int32_t threads);

/* Floats a whole packed A (m x k) or B (k x n) takes, and the packing itself, which reads
 * args->a (or args->b) with its strides. The layout is the driver's: KC-deep slices, each
 * holding every MR-row (NR-column) panel zero-padded at the edge. */
size_t rt_gemm__f32_packed_a_floats(int64_t m, int64_t k);
size_t rt_gemm__f32_packed_b_floats(int64_t k, int64_t n);
void rt_gemm__f32_pack_a(const rt_gemm_f32_args *args, float *dst);
/* KC-deep slices [first, end) of what rt_gemm__f32_pack_a lays out at dst (each slice is
 * written where the whole packing would write it), so threads may pack slices apiece. */
void rt_gemm__f32_pack_a_slices(const rt_gemm_f32_args *args, int64_t first, int64_t end,
                                float *dst);
void rt_gemm__f32_pack_b(const rt_gemm_f32_args *args, float *dst);

/* ---- gathered B: direct convolution on the same kernels ----------------------------------- */

/* The chosen kernel's tile: rows of an A panel (MR) and columns of a B block (NR); and the
 * depth of the slices packed A is cut into (KC). */
void rt_gemm__f32_tile(int64_t *mr, int64_t *nr, int64_t *kc);

/* Tall panels, for an A packed once and read by many blocks of gathered B (the direct
 * convolution's weights): where the kernel has a tall form (the paired AVX-512 one), panels of
 * 12 rows and then at most two of 8 (rows padded to a multiple of 4 make 12a + 8b exactly, so
 * no panel computes more than 3 padding rows; 8 for m <= 4), each 12 or 8 floats to a depth
 * step; elsewhere the GEMM's MR-row panels. Laid out as rt_gemm__f32_pack_a lays them out
 * (KC-deep slices of every panel, the panel at row i starting i * kc into its slice).
 * rt_gemm__f32_tall_rows is 12 where the tall form is, 0 where not. */
int64_t rt_gemm__f32_tall_rows(void);
/* Rows of the panel that starts at row i of an m-row A. */
int64_t rt_gemm__f32_tall_panel(int64_t m, int64_t i);
size_t rt_gemm__f32_tall_a_floats(int64_t m, int64_t k);
void rt_gemm__f32_pack_a_tall(const rt_gemm_f32_args *args, float *dst);

/* One block of C, rows [i, i + rows) and columns [0, cols) from c (cols <= NR): c (+)= A x B
 * over the packed-A slice starting at depth p0 (A packed whole by rt_gemm__f32_pack_a_tall
 * with m rows and depth k; rows i to i + rows are the first of the panel at row i, `panel` =
 * rt_gemm__f32_tall_panel(m, i) rows high), where B's row p0 + q is the NR floats at
 * b + b_offsets[q]. All NR floats of every B row are read, whatever `cols`. The first slice
 * (accumulate 0) writes row_bias[i + r] (NULL: zero) plus the product, later ones add to C;
 * clamp (the last slice's, or NULL) as the micro-kernels take it. */
void rt_gemm__f32_gathered_block(const float *packed_a, int64_t m, int64_t k, int64_t i,
                                 int64_t panel, int64_t p0, const float *b,
                                 const int64_t *b_offsets, float *c, int64_t ldc, int64_t rows,
                                 int64_t cols, int accumulate, const float *row_bias,
                                 const float *clamp);

/* One whole MR x NR block of C from packed panels: c (+)= A x B over the packed-A slice
 * starting at depth p0 (A packed whole by rt_gemm__f32_pack_a with m rows and depth k, row i
 * a multiple of MR), with B's rows p0 + q the NR floats at b + q * NR. The first slice
 * (accumulate 0) writes the product, later ones add to C. For products the caller lays out
 * itself (the Winograd convolution's 36 small GEMMs), padded to whole blocks. */
void rt_gemm__f32_packed_block(const float *packed_a, int64_t m, int64_t k, int64_t i,
                               int64_t p0, const float *b, float *c, int64_t ldc,
                               int accumulate);

/* One MR x NR block of C with both operands packed whole (rt_gemm__f32_pack_a with m rows,
 * rt_gemm__f32_pack_b with n columns, depth k): c (+)= A x B over the slice starting at depth
 * p0, for rows [i, i + MR) and columns [j, j + NR) (i and j multiples of MR and NR; c is
 * row-major with ldc, NR wide). The first slice (accumulate 0) writes the product, later ones
 * add to it. Rows past `rows` (<= MR) are not wanted: with the AVX-512 kernel only those rows
 * are computed and written, otherwise all MR are (so c must have room for them). With
 * `prefetch` (NULL: none), the AVX-512 kernel also fetches into L2 one line from there a depth
 * step (as many lines as the slice is deep), for a later call; the others ignore it. */
void rt_gemm__f32_packed_rows_block(const float *packed_a, int64_t m, const float *packed_b,
                                    int64_t n, int64_t k, int64_t i, int64_t j, int64_t p0,
                                    float *c, int64_t ldc, int accumulate, int64_t rows,
                                    const float *prefetch);

/* The micro-kernel chosen for this CPU ("avx512_pairs" on Intel CPUs with AVX-512, "avx512"
 * on others, "avx2_fma" or "portable"). The environment variable RT_GEMM_KERNEL (one of those
 * names) read at first use forces one the CPU supports;
 * RT_PORTABLE_KERNELS=1 forces the portable one. Packed layouts follow the kernel's tile, so
 * they are made and used in the same process. */
const char *rt_gemm__f32_variant(void);

/* Whether that kernel is an AVX-512 one (either form): other AVX-512 loops (the depthwise
 * convolutions) follow the same choice, so the same variables force them off. */
bool rt_gemm__f32_avx512(void);

/* ---- micro-kernels (gemm_*.c) ------------------------------------------------------------ */

/* acc = sum_p a[p*MR + i] * b[p*NR + j] over k; then for i < MR, j < NR:
 *   c[i*ldc + j] = acc + c[i*ldc + j]               when accumulate, else
 *   c[i*ldc + j] = acc + row_bias[i] + col_bias[j]  (a NULL bias counts as zero),
 * so the first slice writes the biases and later ones add to it, with no separate pass; and
 * with clamp = {lo, hi} (the last slice of a Relu or Clip), min(max(that, lo), hi), NaN kept,
 * so the activation costs no pass over C either. */
typedef void (*rt_gemm_f32_micro_fn)(int64_t k, const float *a, const float *b, float *c,
                                     int64_t ldc, int accumulate, const float *row_bias,
                                     const float *col_bias, const float *clamp);

/* The same with B's row p read from b + b_offsets[p] (NR floats, any alignment) instead of a
 * packed panel: a convolution's input rows, read in place. */
typedef void (*rt_gemm_f32_gather_fn)(int64_t k, const float *a, const float *b,
                                      const int64_t *b_offsets, float *c, int64_t ldc,
                                      int accumulate, const float *row_bias,
                                      const float *col_bias, const float *clamp);

/* The same for a block of C only `cols` (< NR) wide, with B packed (b_offsets NULL) or
 * gathered: C and the column bias are read and written in those columns only. */
typedef void (*rt_gemm_f32_cols_fn)(int64_t k, const float *a, const float *b,
                                    const int64_t *b_offsets, float *c, int64_t ldc,
                                    int accumulate, const float *row_bias,
                                    const float *col_bias, const float *clamp, int64_t cols);

/* The clamp {lo, hi} an activation is, for the kernels' epilogue: Relu (0, +inf) and Clip
 * with lo <= hi (whose scalar form then agrees with min(max(x, lo), hi), NaN included);
 * false for the others, which take a pass over each finished tile. */
bool rt_gemm__f32_clamp_of(const rt_activation *act, float clamp[2]);

/* The largest tile any kernel has (edge blocks are computed in a buffer this big). */
#define RT_GEMM_MR_MAX 8
#define RT_GEMM_NR_MAX 32

/* Rows of a tall panel (rt_gemm__f32_pack_a_tall), where the kernel has that form. */
#define RT_GEMM_TALL 12

/* The portable kernel's tile, also the AVX2 one's. */
#define RT_GEMM_MR 4
#define RT_GEMM_NR 24

void rt_gemm_f32_micro__portable(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias, const float *clamp);
void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias, const float *clamp);
/* The AVX2 kernel for a block of C only `cols` (< 24) wide (as rt_gemm_f32_cols__avx512);
 * x86 builds only. */
void rt_gemm_f32_cols__avx2_fma(int64_t k, const float *a, const float *b,
                                const int64_t *b_offsets, float *c, int64_t ldc, int accumulate,
                                const float *row_bias, const float *col_bias,
                                const float *clamp, int64_t cols);
/* Four whole rows of a row-major A (row stride lda), columns [0, k), packed as one 4-row
 * panel (dst[p * 4 + r]), with AVX; x86 builds only. */
void rt_gemm_f32_pack_a4__avx2(const float *a, int64_t lda, int64_t k, float *dst);
/* 8 x 32; x86-64 builds with GCC or clang only. Each AVX-512 entry point comes in two forms
 * (gemm_avx512.c): rows one at a time (avx512) or in pairs (avx512_pairs). */
void rt_gemm_f32_micro__avx512(int64_t k, const float *a, const float *b, float *c,
                               int64_t ldc, int accumulate, const float *row_bias,
                               const float *col_bias, const float *clamp);
void rt_gemm_f32_micro__avx512_pairs(int64_t k, const float *a, const float *b, float *c,
                                     int64_t ldc, int accumulate, const float *row_bias,
                                     const float *col_bias, const float *clamp);
void rt_gemm_f32_gather__portable(int64_t k, const float *a, const float *b,
                                  const int64_t *b_offsets, float *c, int64_t ldc,
                                  int accumulate, const float *row_bias, const float *col_bias,
                                  const float *clamp);
void rt_gemm_f32_gather__avx2_fma(int64_t k, const float *a, const float *b,
                                  const int64_t *b_offsets, float *c, int64_t ldc,
                                  int accumulate, const float *row_bias, const float *col_bias,
                                  const float *clamp);
void rt_gemm_f32_gather__avx512(int64_t k, const float *a, const float *b,
                                const int64_t *b_offsets, float *c, int64_t ldc, int accumulate,
                                const float *row_bias, const float *col_bias,
                                const float *clamp);
void rt_gemm_f32_gather12__avx512_pairs(int64_t k, const float *a, const float *b,
                                        const int64_t *b_offsets, float *c, int64_t ldc,
                                        int accumulate, const float *row_bias,
                                        const float *clamp, int64_t rows, int64_t cols);
void rt_gemm_f32_gather__avx512_pairs(int64_t k, const float *a, const float *b,
                                      const int64_t *b_offsets, float *c, int64_t ldc,
                                      int accumulate, const float *row_bias,
                                      const float *col_bias, const float *clamp);
/* One row of C, `cols` (<= 32) wide, against a packed 32-column B panel: c (+)= sum over
 * p < k of a[p * a_stride] * b[p * 32 + j], with the first slice's biases (accumulate 0) and
 * the clamp as the micro-kernels take them. For products of fewer rows than the micro-kernel's
 * 8, which would multiply zero rows for the rest (a batch-1 linear layer: 8x the work). */
void rt_gemm_f32_row__avx512(int64_t k, const float *a, int64_t a_stride, const float *b,
                             float *c, int accumulate, float row_bias, const float *col_bias,
                             const float *clamp, int64_t cols);
/* Eight whole rows of a row-major A (row stride lda), columns [0, k), packed as one 8-row
 * panel (dst[p * 8 + r]), with AVX. */
void rt_gemm_f32_pack_a8__avx512(const float *a, int64_t lda, int64_t k, float *dst);
/* The AVX-512 kernel's first `rows` (1 to 8) rows (packed A and B, whole width; biases and
 * clamp as the micro-kernel takes them), fetching k lines from `prefetch` (NULL: none) into
 * L2 along the way, one a depth step. */
void rt_gemm_f32_rows__avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                              int accumulate, const float *row_bias, const float *col_bias,
                              const float *clamp, int64_t rows, const float *prefetch);
void rt_gemm_f32_rows__avx512_pairs(int64_t k, const float *a, const float *b, float *c,
                                    int64_t ldc, int accumulate, const float *row_bias,
                                    const float *col_bias, const float *clamp, int64_t rows,
                                    const float *prefetch);
/* The AVX-512 kernel (packed B, or gathered with b_offsets) for a block of C only `cols`
 * (< 32) wide: masked loads and stores of C and of the column bias, so a partial block needs
 * no copy aside. */
void rt_gemm_f32_cols__avx512(int64_t k, const float *a, const float *b,
                              const int64_t *b_offsets, float *c, int64_t ldc, int accumulate,
                              const float *row_bias, const float *col_bias, const float *clamp,
                              int64_t cols);
void rt_gemm_f32_cols__avx512_pairs(int64_t k, const float *a, const float *b,
                                    const int64_t *b_offsets, float *c, int64_t ldc,
                                    int accumulate, const float *row_bias,
                                    const float *col_bias, const float *clamp, int64_t cols);

#endif
