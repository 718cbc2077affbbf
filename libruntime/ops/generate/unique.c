/* unique.c: the unique operator (ONNX Unique, numpy.unique along an axis).
 *
 * unique(x, axis, sorted, y, indices, inverse_indices, counts): the distinct slices of x along
 * `axis` (an importer flattens x for the axis-less form) into y, each one's first index, for
 * every slice the position of its value in y, and how often each occurs. A data-dependent
 * size: y, indices and counts are planned for every slice distinct (x's bounds) and sized at
 * each run. The sort and grouping are kernels/unique.c. */
#include <inttypes.h>
#include <string.h>

#include "ops/generate/unique.h"
#include "ops/movement/movement.h"
#include "ops/ops.h"

#define UNIQUE_TYPES (RT_TYPES_NUMERIC | RT_TYPE_BIT(RT_BOOL))

typedef struct unique_args {
    rt_tensor_value *x, *outs[4]; /* y, indices, inverse_indices, counts */
    int32_t axis;
    bool sorted;
} unique_args;

static const char *const OUT_NAMES[4] = {"y", "indices", "inverse_indices", "counts"};

static rt_status unique_setup(rt_op_ctx *ctx, unique_args *a) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "sorted", &a->sorted));
    for (int k = 0; k < 4; k++)
        RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3 + (size_t)k, OUT_NAMES[k], &a->outs[k]));
    const rt_tensor_value *x = a->x;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", UNIQUE_TYPES,
                                            "float32, float64, bool and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    if (x->rank < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "x has rank 0; unique needs rank >= 1");
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &a->axis));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, a->outs[0], "y", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, a->outs[0], "y", x->rank));
    for (int k = 1; k < 4; k++) {
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, a->outs[k], OUT_NAMES[k], RT_I64));
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, a->outs[k], OUT_NAMES[k], 1));
    }
    RT_RETURN_IF_ERROR(rt_op__check_outputs(ctx, a->outs, OUT_NAMES, 4, x, "x"));
    if (!ctx->preparing)
        return RT_OK;
    /* Planned for every slice distinct: y at x's bounds, the index outputs at its axis. */
    bool fits = true;
    for (int32_t d = 0; d < x->rank; d++)
        fits = fits && a->outs[0]->bounds[d] >= x->bounds[d];
    for (int k = 1; k < 4; k++)
        fits = fits && a->outs[k]->bounds[0] >= x->bounds[a->axis];
    if (!fits) {
        char tx[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "the outputs are planned smaller than x %s "
                           "needs: y at least x's shape, the others at least [%" PRId64 "]",
                           rt_op__shape_text(x->bounds, x->rank, tx), x->bounds[a->axis]);
    }
    return RT_OK;
}

rt_status rt_ops__unique_prepare(rt_op_ctx *ctx) {
    unique_args a;
    RT_RETURN_IF_ERROR(unique_setup(ctx, &a));
    ctx->scratch_bytes = rt_unique__scratch_bytes(a.x->bounds[a.axis]);
    for (int k = 0; k < 4; k++)
        RT_RETURN_IF_ERROR(rt_mv__plan_at_bounds(ctx, a.outs[k], OUT_NAMES[k]));
    return RT_OK;
}

rt_status rt_unique__problem(rt_op_ctx *ctx, rt_unique_problem *p, rt_tensor_value *outs[4],
                            int32_t *axis) {
    unique_args a;
    RT_RETURN_IF_ERROR(unique_setup(ctx, &a));
    const rt_tensor_value *x = a.x;
    *p = (rt_unique_problem){.type = x->type, .elem_size = x->elem_size, .x = x->data,
                             .outer = 1, .n = x->sizes[a.axis], .inner = 1,
                             .sorted = a.sorted};
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < a.axis)
            p->outer *= x->sizes[d];
        else if (d > a.axis)
            p->inner *= x->sizes[d];
    }
    memcpy(outs, a.outs, sizeof a.outs);
    *axis = a.axis;
    return RT_OK;
}

rt_status rt_unique__set_sizes(rt_op_ctx *ctx, rt_tensor_value *const outs[4], int32_t axis,
                               int64_t groups) {
    const rt_tensor_value *x = ctx->args[0]->u.t;
    int64_t sizes[RT_MAX_RANK], n = x->sizes[axis];
    memcpy(sizes, x->sizes, sizeof sizes);
    sizes[axis] = groups;
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, outs[0], "y", x->rank, sizes));
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, outs[1], "indices", 1, &groups));
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, outs[2], "inverse_indices", 1, &n));
    return rt_op__set_output_sizes(ctx, outs[3], "counts", 1, &groups);
}

rt_status rt_ops__unique_run(rt_op_ctx *ctx) {
    rt_unique_problem p;
    rt_tensor_value *outs[4];
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_unique__problem(ctx, &p, outs, &axis));
    if (rt_unique__scratch_bytes(p.n) > ctx->scratch_bytes)
        return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
    rt_unique_outputs out = {outs[0]->data, outs[1]->data, outs[2]->data, outs[3]->data};
    int64_t groups = p.n > 0 ? rt_unique__run(&p, &out, ctx->scratch) : 0;
    return rt_unique__set_sizes(ctx, outs, axis, groups);
}
