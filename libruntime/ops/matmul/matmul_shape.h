/* matmul_shape.h: numpy.matmul shapes (1-D operands, broadcast batch dimensions), shared by
 * matmul and the quantized matmul ops. */
#ifndef RT_OPS_MATMUL_SHAPE_H
#define RT_OPS_MATMUL_SHAPE_H

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

#endif
