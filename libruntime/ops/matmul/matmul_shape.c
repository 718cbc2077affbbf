/* matmul_shape.c: numpy.matmul shapes, see matmul_shape.h. */
#include <inttypes.h>
#include <string.h>

#include "ops/matmul/matmul.h"

/* Matrix strides (elements) of t's batch dimensions, aligned to a batch of rank `rank`. */
static void batch_strides(int64_t *out, const int64_t *sizes, int32_t t_batch_rank,
                          int64_t matrix_elems, int32_t rank) {
    int64_t stride = matrix_elems;
    for (int32_t i = rank - 1; i >= 0; i--) {
        int32_t d = i - (rank - t_batch_rank);
        if (d < 0) {
            out[i] = 0;
            continue;
        }
        out[i] = sizes[d] == 1 ? 0 : stride;
        stride *= sizes[d];
    }
}

rt_status rt_op__matmul_shape(rt_op_ctx *ctx, const rt_tensor_value *a,
                             const rt_tensor_value *b, rt_matmul_dims *dims, int32_t *out_rank, int64_t *out_sizes) {
    /* A 1-D operand is a row (a) or column (b) whose dimension is dropped from the result. */
    bool a_vector = a->rank == 1, b_vector = b->rank == 1;
    int32_t a_batch = a_vector ? 0 : a->rank - 2, b_batch = b_vector ? 0 : b->rank - 2;
    dims->m = a_vector ? 1 : a->sizes[a->rank - 2];
    dims->k = a->sizes[a->rank - 1];
    int64_t k_b = b_vector ? b->sizes[0] : b->sizes[b->rank - 2];
    dims->n = b_vector ? 1 : b->sizes[b->rank - 1];
    if (k_b != dims->k) {
        char ta[RT_OP_SHAPE_TEXT], tb[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "a %s and b %s do not match: a has %" PRId64 " columns, b has %" PRId64
                           " rows",
                           rt_op__shape_text(a->sizes, a->rank, ta),
                           rt_op__shape_text(b->sizes, b->rank, tb), dims->k, k_b);
    }

    int32_t rank = a_batch > b_batch ? a_batch : b_batch;
    dims->batch_rank = rank;
    dims->batch_count = 1;
    for (int32_t i = 0; i < rank; i++) {
        int32_t da = i - (rank - a_batch), db = i - (rank - b_batch);
        int64_t sa = da >= 0 ? a->sizes[da] : 1, sb = db >= 0 ? b->sizes[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char ta[RT_OP_SHAPE_TEXT], tb[RT_OP_SHAPE_TEXT];
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "the batch dimensions of a %s and b %s cannot be broadcast together",
                               rt_op__shape_text(a->sizes, a->rank, ta),
                               rt_op__shape_text(b->sizes, b->rank, tb));
        }
        dims->batch_sizes[i] = sa == 1 ? sb : sa;
        if (!rt_op__mul(dims->batch_count, dims->batch_sizes[i], &dims->batch_count))
            return rt_op__fail(ctx, rt_op__shape_code(ctx), "the batch dimensions overflow int64");
    }
    batch_strides(dims->a_batch_strides, a->sizes, a_batch, dims->m * dims->k, rank);
    batch_strides(dims->b_batch_strides, b->sizes, b_batch, dims->k * dims->n, rank);

    int32_t r = rank;
    memcpy(out_sizes, dims->batch_sizes, (size_t)rank * sizeof *out_sizes);
    if (!a_vector)
        out_sizes[r++] = dims->m;
    if (!b_vector)
        out_sizes[r++] = dims->n;
    *out_rank = r;
    return RT_OK;
}

void rt_op__matmul_batch_offsets(const rt_matmul_dims *dims, int64_t batch, int64_t *a_off, int64_t *b_off) {
    *a_off = *b_off = 0;
    for (int32_t d = dims->batch_rank - 1; d >= 0; d--) {
        int64_t i = batch % dims->batch_sizes[d];
        batch /= dims->batch_sizes[d];
        *a_off += i * dims->a_batch_strides[d];
        *b_off += i * dims->b_batch_strides[d];
    }
}

