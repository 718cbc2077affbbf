/* introspect.c: shape, size and non_zero: ops whose results describe their input (its current
 * sizes, or where it is nonzero) rather than transform it.
 *
 * non_zero is the pattern for a data-dependent output shape: the output is dynamic and planned
 * for the largest possible result ([rank, numel] at x's bounds); each run counts first, gives
 * the output its actual sizes with rt_op__set_output_sizes, then writes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* ---- shape ------------------------------------------------------------------------------ */

typedef struct shape_args {
    rt_tensor_value *x, *out;
    int32_t first, count;
} shape_args;

/* shape(x, start: int, end: int, out): out (int64, 1-D) = x's current sizes[start:end],
 * start and end clamped as ONNX Shape does (negative counts from the end). */
static rt_status shape_setup(rt_op_ctx *ctx, shape_args *args) {
    int64_t start, end;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "start", &start));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "end", &end));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &args->out));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, args->out, "out", RT_I64));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, args->out, "out"));
    int64_t rank = args->x->rank;
    start = start < 0 ? start + rank : start;
    end = end < 0 ? end + rank : end;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    args->first = (int32_t)start;
    args->count = (int32_t)(end > start ? end - start : 0);
    int64_t size = args->count;
    return rt_op__set_output_sizes(ctx, args->out, "out", 1, &size);
}

rt_status rt_ops__shape_prepare(rt_op_ctx *ctx) {
    shape_args args;
    return shape_setup(ctx, &args);
}

rt_status rt_ops__shape_run(rt_op_ctx *ctx) {
    shape_args args;
    RT_RETURN_IF_ERROR(shape_setup(ctx, &args));
    /* x's sizes are copied first: out may even be x (its sizes are not its data). */
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, args.x->sizes + args.first, (size_t)args.count * sizeof *sizes);
    if (args.count > 0)
        memcpy(args.out->data, sizes, (size_t)args.count * sizeof *sizes);
    return RT_OK;
}

/* ---- size ------------------------------------------------------------------------------- */

/* size(x, out): out (int64, 0-d) = x's current element count. */
static rt_status size_setup(rt_op_ctx *ctx, rt_tensor_value **x, rt_tensor_value **out) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "out", out));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, *out, "out", RT_I64));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    int64_t no_sizes[1] = {0};
    return rt_op__set_output_sizes(ctx, *out, "out", 0, no_sizes);
}

rt_status rt_ops__size_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    return size_setup(ctx, &x, &out);
}

rt_status rt_ops__size_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(size_setup(ctx, &x, &out));
    int64_t numel = rt_tensor__numel(x);
    memcpy(out->data, &numel, sizeof numel);
    return RT_OK;
}

/* ---- non_zero --------------------------------------------------------------------------- */

/* non_zero(x, out): out (int64) is [rank, n], column j the index of the j-th nonzero element
 * of x in row-major order (numpy.nonzero stacked). Planned as [rank, numel of x's bounds]. */
static rt_status non_zero_setup(rt_op_ctx *ctx, rt_tensor_value **x, rt_tensor_value **out) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "out", out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, *x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, *out, "out", RT_I64));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, *out, "out", 2));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, *out, "out", *x, "x"));
    if ((*x)->rank < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "x has rank 0; non_zero needs rank >= 1");
    if (ctx->preparing) {
        int64_t numel;
        if (!rt_tensor__checked_numel((*x)->bounds, (*x)->rank, &numel))
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "x has an invalid shape");
        if ((*out)->bounds[0] != (*x)->rank || (*out)->bounds[1] < numel) {
            char t[RT_OP_SHAPE_TEXT];
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "out is planned as %s; it needs [%" PRId32
                               ", %" PRId64 "] (x's rank and element count) to hold every case",
                               rt_op__shape_text((*out)->bounds, 2, t), (*x)->rank, numel);
        }
    }
    return RT_OK;
}

rt_status rt_ops__non_zero_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(non_zero_setup(ctx, &x, &out));
    return rt_mv__plan_at_bounds(ctx, out, "out");
}

/* Element i of x is not zero: for floats -0.0 is zero and NaN is not; otherwise any nonzero
 * byte counts. */
static bool is_nonzero(const rt_tensor_value *x, int64_t i) {
    const char *p = (const char *)x->data + (size_t)i * x->elem_size;
    switch (x->type) {
    case RT_F32: return *(const float *)p != 0.0f;
    case RT_F64: return *(const double *)p != 0.0;
    case RT_F16:
    case RT_BF16: return (*(const uint16_t *)p & 0x7FFFu) != 0;
    default: break;
    }
    for (uint32_t b = 0; b < x->elem_size; b++)
        if (p[b])
            return true;
    return false;
}

rt_status rt_ops__non_zero_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(non_zero_setup(ctx, &x, &out));
    int64_t numel = rt_tensor__numel(x), count = 0;
    for (int64_t i = 0; i < numel; i++)
        count += is_nonzero(x, i);
    int64_t sizes[2] = {x->rank, count};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, out, "out", 2, sizes));
    int64_t *o = out->data, j = 0;
    for (int64_t i = 0; i < numel && j < count; i++) {
        if (!is_nonzero(x, i))
            continue;
        int64_t rest = i;
        for (int32_t d = x->rank - 1; d >= 0; d--) {
            o[d * count + j] = rest % x->sizes[d];
            rest /= x->sizes[d];
        }
        j++;
    }
    return RT_OK;
}
