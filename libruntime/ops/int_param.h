/* int_param.h: integer parameters that a program may give either as values (an int, an int
 * list) or as a small integer tensor whose contents are read at each execute (ONNX passes
 * axes, k and axis as tensors that may be graph inputs). Used by the reductions, argmax,
 * cumsum and topk. */
#ifndef RT_OPS_INT_PARAM_H
#define RT_OPS_INT_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"

typedef struct rt_int_param {
    const rt_tensor_value *tensor; /* NULL: the values are in `items` */
    const int64_t *items;
    size_t count;
    int64_t single; /* storage for an int argument */
    bool known;     /* false while preparing with a tensor that is not a constant */
} rt_int_param;

/* Argument i as an int (list = false) or an int list (list = true), or as an int32 or int64
 * tensor that is not dynamic: rank 0 or 1 with exactly one element for an int, rank 1 for a
 * list. count is the number of items either way. */
rt_status rt_op__int_param(rt_op_ctx *ctx, size_t i, const char *what, bool list,
                           rt_int_param *out);

/* Item k (< count); only meaningful when p->known. */
int64_t rt_op__int_param_at(const rt_int_param *p, size_t k);

#endif
