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
} rt_gemm_f32_args;

/* Scratch bytes rt_gemm_f32 needs with up to `threads` threads (packing buffers). */
size_t rt_gemm_f32_scratch_bytes(int32_t threads);

/* Compute on up to `threads` threads; `scratch` must hold rt_gemm_f32_scratch_bytes(threads)
 * bytes, 64-byte aligned. Nothing is allocated. */
void rt_gemm_f32(const rt_gemm_f32_args *args, void *scratch, int32_t threads);

/* The micro-kernel variant chosen for this CPU ("avx2_fma" or "portable"). Setting the
 * environment variable RT_PORTABLE_KERNELS=1 before first use forces the portable one. */
const char *rt_gemm_f32_variant(void);

/* ---- micro-kernels (gemm_*.c) ------------------------------------------------------------ */

#define RT_GEMM_MR 6
#define RT_GEMM_NR 16

/* acc = sum_p a[p*MR + i] * b[p*NR + j] over k; then c[i*ldc + j] = acc (or += acc) for
 * i < MR, j < NR. */
typedef void (*rt_gemm_f32_micro_fn)(int64_t k, const float *a, const float *b, float *c,
                                     int64_t ldc, int accumulate);

void rt_gemm_f32_micro__portable(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate);
void rt_gemm_f32_micro__avx2_fma(int64_t k, const float *a, const float *b, float *c,
                                 int64_t ldc, int accumulate);

#endif
