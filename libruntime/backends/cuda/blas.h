/* blas.h: cuBLAS, loaded with dlopen when installed, for float32 / float64 matrix products.
 * Absent, the backend uses its own tiled kernel (kernels/gemm.cu). */
#ifndef RT_CUDA_BLAS_H
#define RT_CUDA_BLAS_H

#include <stdbool.h>

#include "backends/cuda/driver.h"

typedef struct rt_cuda_blas rt_cuda_blas;

/* A handle bound to `stream` (call with the device's context current), or NULL when cuBLAS
 * is not available; never an error, since the fallback kernel covers every case. */
rt_cuda_blas *rt_cuda__blas_create(CUstream stream);
void rt_cuda__blas_destroy(rt_cuda_blas *blas);

/* Row-major C[m, n] = A[m, k] @ B[k, n], `batch` times with element strides between the
 * matrices of a, b and c (0: the same matrix each time). trans_b: b is stored as [n, k]
 * (row-major), as linear's weight. double_precision picks float64 over float32. */
typedef struct rt_cuda_blas_gemm {
    int64_t m, n, k, batch;
    int64_t a_batch_stride, b_batch_stride, c_batch_stride;
    bool trans_b;
    bool double_precision;
    const void *a, *b;
    void *c;
} rt_cuda_blas_gemm;

rt_status rt_cuda__blas_gemm(rt_cuda_blas *blas, const rt_cuda_blas_gemm *g, const char *what);

/* "cuBLAS <version>" or why it is not used (static storage). */
const char *rt_cuda__blas_status(void);

#endif
