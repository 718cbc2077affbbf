/* movement.c: the argument helpers of movement.h, shared by the data-movement ops (their copy
 * loops are kernels/copy.c). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops/movement/movement.h"

rt_status rt_mv__check_data_op(rt_op_ctx *ctx, const rt_tensor_value *x, const char *what_x,
                               const rt_tensor_value *out) {
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, what_x));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, what_x));
    return rt_op__check_default_layout(ctx, out, "out");
}

rt_status rt_mv__check_index_tensor(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                                    const rt_tensor_value *out) {
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, t, what, RT_TYPES_INDEX, "int32 and int64"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, t, what));
    return out ? rt_op__check_disjoint(ctx, out, "out", t, what) : RT_OK;
}

/* ---- int parameters --------------------------------------------------------------------- */

rt_status rt_mv__ints(rt_op_ctx *ctx, size_t index, const char *what, bool optional,
                      rt_mv_ints *out) {
    memset(out, 0, sizeof *out);
    if (index >= ctx->nargs || !ctx->args || !ctx->args[index])
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "argument %zu (%s) is missing: the instruction has %zu arguments",
                           index, what, ctx->nargs);
    const rt_value *v = ctx->args[index];
    switch (v->kind) {
    case RT_VALUE_NONE:
        if (!optional)
            break;
        return RT_OK;
    case RT_VALUE_INT:
        out->single = v->u.i;
        out->items = &out->single;
        out->count = 1;
        out->present = true;
        return RT_OK;
    case RT_VALUE_INT_LIST:
        if (v->u.ints.count > 0 && !v->u.ints.items)
            break;
        out->items = v->u.ints.items;
        out->count = v->u.ints.count;
        out->present = true;
        return RT_OK;
    case RT_VALUE_TENSOR: {
        const rt_tensor_value *t = v->u.t;
        if (!t)
            break;
        RT_RETURN_IF_ERROR(rt_mv__check_index_tensor(ctx, t, what, NULL));
        if (t->rank > 1)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s is a tensor of rank %" PRId32
                               "; it must have rank 0 or 1", what, t->rank);
        out->tensor = t;
        out->count = (size_t)rt_tensor__numel(t);
        out->present = true;
        return RT_OK;
    }
    default:
        break;
    }
    return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                       "argument %zu (%s) must be an int list or an int32/int64 tensor%s, not %s",
                       index, what, optional ? " or none" : "", rt_value__kind_name(v->kind));
}

/* ---- double parameters ------------------------------------------------------------------ */

rt_status rt_mv__doubles(rt_op_ctx *ctx, size_t index, const char *what,
                         const rt_tensor_value *out, rt_mv_doubles *v) {
    memset(v, 0, sizeof *v);
    if (index >= ctx->nargs || !ctx->args || !ctx->args[index])
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "argument %zu (%s) is missing: the instruction has %zu arguments",
                           index, what, ctx->nargs);
    const rt_value *arg = ctx->args[index];
    switch (arg->kind) {
    case RT_VALUE_INT_LIST: /* [] written as ints */
        if (arg->u.ints.count != 0)
            break;
        return RT_OK;
    case RT_VALUE_DOUBLE_LIST:
        if (arg->u.doubles.count > 0 && !arg->u.doubles.items)
            break;
        v->items = arg->u.doubles.items;
        v->count = arg->u.doubles.count;
        return RT_OK;
    case RT_VALUE_TENSOR: {
        const rt_tensor_value *t = arg->u.t;
        if (!t)
            break;
        RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, t, what, RT_TYPES_FLOAT,
                                                "float32 and float64"));
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, t, what));
        if (t->rank > 1)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s is a tensor of rank %" PRId32
                               "; it must have rank 0 or 1", what, t->rank);
        /* Ops check the count against their other arguments at load: it must not vary. */
        if (t->dynamic)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s is a dynamic tensor; its item "
                               "count must be fixed", what);
        if (out)
            RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", t, what));
        v->tensor = t;
        v->count = (size_t)rt_tensor__numel(t);
        return RT_OK;
    }
    default:
        break;
    }
    return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                       "argument %zu (%s) must be a double list or a float32/float64 tensor, "
                       "not %s", index, what, rt_value__kind_name(arg->kind));
}

rt_status rt_mv__plan_at_bounds(rt_op_ctx *ctx, rt_tensor_value *out, const char *what) {
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, out->bounds, sizeof sizes);
    return rt_op__set_output_sizes(ctx, out, what, out->rank, sizes);
}

const char *rt_mv__position_text(int64_t flat, int32_t rank, const int64_t *sizes,
                                 char buf[RT_OP_SHAPE_TEXT]) {
    int64_t index[RT_MAX_RANK];
    for (int32_t d = rank - 1; d >= 0; d--) {
        index[d] = sizes[d] > 0 ? flat % sizes[d] : 0;
        flat = sizes[d] > 0 ? flat / sizes[d] : 0;
    }
    return rt_op__shape_text(index, rank, buf);
}
