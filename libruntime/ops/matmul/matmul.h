/* matmul.h: the matmul family: numpy.matmul shapes (1-D operands, broadcast batch dimensions),
 * shared by matmul and the quantized matmul ops (matmul_shape.c), and the loops for the dtypes
 * the float32 GEMM (gemm/) does not take (kernels/). */
#ifndef RT_OPS_MATMUL_H
#define RT_OPS_MATMUL_H

#include "ops/op_util.h"

/* The problem as a batch of [M, K] @ [K, N] products, with each operand's matrix stride per
 * batch dimension (0 where it is broadcast). */
typedef struct rt_matmul_dims {
    int64_t m, k, n;
    int32_t batch_rank;
    int64_t batch_sizes[RT_MAX_RANK];
    int64_t a_batch_strides[RT_MAX_RANK]; /* elements */
    int64_t b_batch_strides[RT_MAX_RANK];
    int64_t batch_count;
} rt_matmul_dims;

/* The problem for a @ b, and the output shape (rank and sizes); fails naming both shapes. */
rt_status rt_op__matmul_shape(rt_op_ctx *ctx, const rt_tensor_value *a,
                             const rt_tensor_value *b, rt_matmul_dims *dims, int32_t *out_rank,
                             int64_t *out_sizes);

/* Offsets (elements) of the a and b matrices of batch entry `batch`. */
void rt_op__matmul_batch_offsets(const rt_matmul_dims *dims, int64_t batch, int64_t *a_off,
                                 int64_t *b_off);

/* a @ b for float64, int32 or int64 (false for another dtype), on up to `threads` threads. */
bool rt_matmul__tiles(const rt_matmul_dims *dims, rt_type type, const void *a, const void *b,
                      void *out, int32_t threads);

/* out[rows, n] = x[rows, k] @ w[n, k]^T + bias (bias may be NULL), float32 or float64. */
void rt_matmul__linear_dot(rt_type type, const void *x, const void *w, const void *bias,
                           void *out, int64_t rows, int64_t k, int64_t n, int32_t threads);

#endif
