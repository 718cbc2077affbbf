/* activation.c: the relu and softmax operators. Both may run in place (out the same tensor as
 * x); the loops are kernels/relu.c and kernels/softmax.c. */
#include <string.h>

#include "ops/elementwise/kernels/activation.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* Checks the common shape of unary ops: x and out of one dtype in `types`, row-major, out
 * writable and given x's current sizes. */
static rt_status unary_setup(rt_op_ctx *ctx, size_t out_index, uint32_t types,
                             const char *expected, rt_tensor_value **x, rt_tensor_value **out) {
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, out_index, "out", out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, *x, "x", types, expected));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, *out, "out", *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *out, "out"));
    int64_t sizes[RT_MAX_RANK];
    int32_t rank = (*x)->rank;
    memcpy(sizes, (*x)->sizes, sizeof sizes);
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, *out, "out", *x, "x", rank, sizes));
    return rt_op__set_output_sizes(ctx, *out, "out", rank, sizes);
}

/* ---- relu ------------------------------------------------------------------------------- */

#define RELU_TYPES (RT_TYPES_FLOAT | RT_TYPES_SIGNED)
#define RELU_TYPES_TEXT "float32, float64 and the signed integer types"

rt_status rt_ops__relu_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    return unary_setup(ctx, 1, RELU_TYPES, RELU_TYPES_TEXT, &x, &out);
}

rt_status rt_ops__relu_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(unary_setup(ctx, 1, RELU_TYPES, RELU_TYPES_TEXT, &x, &out));
    if (!rt_elementwise__relu(x->type, x->data, out->data, rt_tensor__numel(out),
                              rt_op__threads(ctx)))
        return rt_op__fail(ctx, RT_INTERNAL, "no relu kernel for dtype %s",
                           rt_tensor__type_name(x->type));
    return RT_OK;
}

/* ---- softmax ---------------------------------------------------------------------------- */

typedef struct softmax_args {
    rt_tensor_value *x, *out;
    int32_t axis;
} softmax_args;

static rt_status softmax_setup(rt_op_ctx *ctx, softmax_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(unary_setup(ctx, 2, RT_TYPES_FLOAT, "float32 and float64", &args->x,
                                   &args->out));
    /* A 0-d tensor is one element: axis 0 or -1 (PyTorch accepts both). */
    int32_t rank = args->x->rank > 0 ? args->x->rank : 1;
    return rt_op__axis(ctx, axis, rank, "axis", &args->axis);
}

rt_status rt_ops__softmax_prepare(rt_op_ctx *ctx) {
    softmax_args args;
    return softmax_setup(ctx, &args);
}

rt_status rt_ops__softmax_run(rt_op_ctx *ctx) {
    softmax_args args;
    RT_RETURN_IF_ERROR(softmax_setup(ctx, &args));
    const rt_tensor_value *x = args.x;
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    /* The products are bounded by the element count of x, which is not 0. */
    int64_t outer = 1, n = 1, inner = 1;
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < args.axis)
            outer *= x->sizes[d];
        else if (d == args.axis)
            n = x->sizes[d];
        else
            inner *= x->sizes[d];
    }
    rt_elementwise__softmax(x->type, x->data, args.out->data, outer, n, inner,
                            rt_op__threads(ctx));
    return RT_OK;
}
