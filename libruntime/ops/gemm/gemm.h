/* gemm.h: single-precision matrix multiplication with packed panels and register-blocked
 * micro-kernels, the core under matmul, linear and conv2d.
 *
 * C[m, n] = bias + sum_k A[m, k] * B[k, n], where A and B have any element strides (so a
 * transposed operand costs nothing extra) and C is row-major with its own row stride. */
#ifndef RT_OPS_GEMM_H
#define RT_OPS_GEMM_H

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
    /* A or B packed ahead of time (rt_gemm_f32_pack_a/_b with the same m, n, k), or NULL to
     * pack slices on the fly. Constant weights are packed once, when a method is loaded. */
    const float *packed_a, *packed_b;
} rt_gemm_f32_args;

/* Scratch bytes rt_gemm_f32 needs with up to `threads` threads (packing buffers). */
size_t rt_gemm_f32_scratch_bytes(int32_t threads);

/* Compute on up to `threads` threads; `scratch` must hold rt_gemm_f32_scratch_bytes(threads)
 * bytes, 64-byte aligned. Nothing is allocated. */
void rt_gemm_f32(const rt_gemm_f32_args *args, void *scratch, int32_t threads);

/* Floats a whole packed A (m x k) or B (k x n) takes, and the packing itself, which reads
 * args->a (or args->b) with its strides. The layout is the driver's: KC-deep slices, each
 * holding every MR-row (NR-column) panel zero-padded at the edge. */
size_t rt_gemm_f32_packed_a_floats(int64_t m, int64_t k);
size_t rt_gemm_f32_packed_b_floats(int64_t k, int64_t n);
void rt_gemm_f32_pack_a(const rt_gemm_f32_args *args, float *dst);
void rt_gemm_f32_pack_b(const rt_gemm_f32_args *args, float *dst);

/* The micro-kernel chosen for this CPU ("avx512", "avx2_fma" or "portable"). The environment
 * variable RT_GEMM_KERNEL (one of those names) read at first use forces one the CPU supports;
 * RT_PORTABLE_KERNELS=1 forces the portable one. Packed layouts follow the kernel's tile, so
 * they are made and used in the same process. */
const char *rt_gemm_f32_variant(void);

/* ---- micro-kernels (gemm_*.c) ------------------------------------------------------------ */

/* acc = sum_p a[p*MR + i] * b[p*NR + j] over k; then for i < MR, j < NR:
 *   c[i*ldc + j] = acc + c[i*ldc + j]               when accumulate, else
 *   c[i*ldc + j] = acc + row_bias[i] + col_bias[j]  (a NULL bias counts as zero),
 * so the first slice writes the biases and later ones add to it, with no separate pass. */
typedef void (*rt_gemm_f32_micro_fn)(int64_t k, const float *a, const float *b, float *c,
                                     int64_t ldc, int accumulate, const float *row_bias,
                                     const float *col_bias);

/* The largest tile any kernel has (edge blocks are computed in a buffer this big). */
#define RT_GEMM_MR_MAX 8
#define RT_GEMM_NR_MAX 32

/* The portable kernel's tile, also the AVX2 one's. */
#define RT_GEMM_MR 4
#define RT_GEMM_NR 24

void rt_gemm_f32_micro__portable(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias);
void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate, const float *row_bias,
                                 const float *col_bias);
/* 8 x 32; x86-64 builds with GCC or clang only. */
void rt_gemm_f32_micro__avx512(int64_t k, const float *a, const float *b, float *c,
                               int64_t ldc, int accumulate, const float *row_bias,
                               const float *col_bias);

#endif
