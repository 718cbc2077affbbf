/* unique.h: unique's problem (generate/unique.c reads it from the arguments) and its kernel
 * (kernels/unique.c), which the CUDA backend mirrors (backends/cuda/kernels/unique.cu). */
#ifndef RT_OPS_UNIQUE_H
#define RT_OPS_UNIQUE_H

#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"
#include "tensor.h"

/* x viewed as [outer, n, inner] around the axis; slice j is x[:, j, :]. */
typedef struct rt_unique_problem {
    rt_type type;
    size_t elem_size;
    const void *x;
    int64_t outer, n, inner;
    bool sorted; /* the unique slices in ascending order, else in order of first occurrence */
} rt_unique_problem;

/* Where the results go: y [outer, u, inner], indices and counts [u], inverse [n] (int64). */
typedef struct rt_unique_outputs {
    void *y;
    int64_t *indices, *inverse, *counts;
} rt_unique_outputs;

/* Reads and checks unique's arguments into a problem (x's current sizes), its four outputs and
 * the axis. */
rt_status rt_unique__problem(rt_op_ctx *ctx, rt_unique_problem *p, rt_tensor_value *outs[4],
                             int32_t *axis);
/* The outputs' sizes for `groups` distinct slices. */
rt_status rt_unique__set_sizes(rt_op_ctx *ctx, rt_tensor_value *const outs[4], int32_t axis,
                               int64_t groups);

size_t rt_unique__scratch_bytes(int64_t n);

/* The number u of distinct slices, with the outputs written. Slices compare element by
 * element in row-major order; NaN equals NaN and comes after every number. */
int64_t rt_unique__run(const rt_unique_problem *p, const rt_unique_outputs *out, void *scratch);

#endif
