/* scan.c: the cumsum and topk operators along one axis (the loops: kernels/scan.c).
 *
 * Both view x as [outer, n, inner] with the op running along n. cumsum may run in place (out
 * the same tensor as x); topk needs outputs apart from x. cumsum's axis and topk's k are an
 * int or a one-element integer tensor read at each execute (ops/int_param.h). */
#include <inttypes.h>
#include <string.h>

#include "ops/int_param.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/reduce/kernels/scan.h"

static void split_axis(const rt_tensor_value *x, int32_t axis, int64_t *outer, int64_t *n,
                       int64_t *inner) {
    *outer = *inner = 1;
    *n = x->sizes[axis];
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < axis)
            *outer *= x->sizes[d];
        else if (d > axis)
            *inner *= x->sizes[d];
    }
}

/* ---- cumsum ----------------------------------------------------------------------------- */

typedef struct cumsum_args {
    rt_tensor_value *x, *out;
    rt_int_param axis;
    bool exclusive, reverse;
    int32_t dim; /* the axis, normalised; valid when axis.known */
} cumsum_args;

/* cumsum(x, axis, exclusive, reverse, out) */
static rt_status cumsum_setup(rt_op_ctx *ctx, cumsum_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int_param(ctx, 1, "axis", false, &args->axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "exclusive", &args->exclusive));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "reverse", &args->reverse));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_NUMERIC,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    args->dim = 0;
    if (args->axis.known) {
        int64_t axis = rt_op__int_param_at(&args->axis, 0);
        /* Only an axis read from a tensor at run can be newly out of range. */
        if (!ctx->preparing && (axis < -(int64_t)x->rank || axis >= (int64_t)x->rank))
            return rt_op__fail(ctx, RT_INVALID_ARGUMENT,
                               "axis %" PRId64 " is out of range for x of rank %" PRId32, axis,
                               x->rank);
        RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &args->dim));
    } else if (x->rank < 1) {
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "x has rank 0; cumsum needs rank >= 1");
    }
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, x->sizes, sizeof sizes);
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", x, "x", x->rank, sizes));
    return rt_op__set_output_sizes(ctx, out, "out", x->rank, sizes);
}

rt_status rt_ops__cumsum_prepare(rt_op_ctx *ctx) {
    cumsum_args args;
    return cumsum_setup(ctx, &args);
}

rt_status rt_ops__cumsum_run(rt_op_ctx *ctx) {
    cumsum_args args;
    RT_RETURN_IF_ERROR(cumsum_setup(ctx, &args));
    if (rt_tensor__numel(args.x) == 0)
        return RT_OK;
    int64_t outer, n, inner;
    split_axis(args.x, args.dim, &outer, &n, &inner);
    if (!rt_reduce__cumsum(args.x->type, args.x->data, args.out->data, outer, n, inner,
                           args.exclusive, args.reverse, rt_op__threads(ctx)))
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s", /* setup's checks */
                           rt_tensor__type_name(args.x->type));
    return RT_OK;
}

/* ---- topk ------------------------------------------------------------------------------- */

typedef struct topk_args {
    rt_tensor_value *x, *values, *indices;
    rt_int_param k;
    int32_t axis;
    bool largest, sorted;
} topk_args;

/* topk(x, k, axis, largest, sorted, values, indices) */
static rt_status topk_setup(rt_op_ctx *ctx, topk_args *args) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int_param(ctx, 1, "k", false, &args->k));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "largest", &args->largest));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 4, "sorted", &args->sorted));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 5, "values", &args->values));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "indices", &args->indices));
    rt_tensor_value *x = args->x, *values = args->values, *indices = args->indices;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_NUMERIC,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, values, "values", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, indices, "indices", RT_I64));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, values, "values"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, indices, "indices"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, values, "values"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, indices, "indices"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, values, "values", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, indices, "indices", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, indices, "indices", values, "values"));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &args->axis));
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, x->sizes, sizeof sizes);
    if (args->k.known) {
        int64_t k = rt_op__int_param_at(&args->k, 0), n = x->sizes[args->axis];
        if (k < 0 || k > n)
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "k is %" PRId64 "; it must be in [0, %" PRId64
                               "] (the size of axis %" PRId32 " of x)",
                               k, n, args->axis);
        sizes[args->axis] = k;
    } else {
        /* k from an input: the outputs' planned sizes stand in until it is known. */
        sizes[args->axis] = values->rank == x->rank ? values->bounds[args->axis] : 0;
    }
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, values, "values", x->rank, sizes));
    return rt_op__set_output_sizes(ctx, indices, "indices", x->rank, sizes);
}

rt_status rt_ops__topk_prepare(rt_op_ctx *ctx) {
    topk_args args;
    return topk_setup(ctx, &args);
}

rt_status rt_ops__topk_run(rt_op_ctx *ctx) {
    topk_args args;
    RT_RETURN_IF_ERROR(topk_setup(ctx, &args));
    if (rt_tensor__numel(args.values) == 0)
        return RT_OK;
    int64_t outer, n, inner;
    split_axis(args.x, args.axis, &outer, &n, &inner);
    if (!rt_reduce__topk(args.x->type, args.x->data, args.values->data, args.indices->data,
                         outer, n, inner, args.values->sizes[args.axis], args.largest,
                         rt_op__threads(ctx)))
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s", /* setup's checks */
                           rt_tensor__type_name(args.x->type));
    return RT_OK;
}
