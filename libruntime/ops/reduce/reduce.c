/* reduce.c: reduce_sum, reduce_mean, reduce_prod, reduce_max, reduce_min, reduce_l1,
 * reduce_l2, reduce_log_sum, reduce_log_sum_exp, reduce_sum_square (over a list of axes, with
 * keepdims) and argmax, argmin (over one axis, int64 indices).
 *
 * The axes of a reduction are an int list or a 1-D integer tensor read at each execute; an
 * empty list reduces nothing (numpy's axis=()), so the op maps each element (sum_square gives
 * x * x). The typed loops are in kernels/reduce.c. */
#include <inttypes.h>
#include <string.h>

#include "ops/int_param.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/reduce/kernels/reduce.h"

/* ---- reductions ------------------------------------------------------------------------- */

static uint32_t reduce_types(rt_reduce_op op, const char **text) {
    switch (op) {
    case RT_REDUCE_SUM:
    case RT_REDUCE_PROD:
    case RT_REDUCE_L1:
    case RT_REDUCE_SUM_SQUARE:
        *text = "float32, float64 and the integer types";
        return RT_TYPES_NUMERIC;
    case RT_REDUCE_MAX:
    case RT_REDUCE_MIN:
        *text = "float32, float64, the integer types and bool";
        return RT_TYPES_NUMERIC | RT_TYPE_BIT(RT_BOOL);
    default:
        *text = "float32 and float64";
        return RT_TYPES_FLOAT;
    }
}

typedef struct reduce_args {
    rt_tensor_value *x, *out;
    rt_int_param axes;
    bool keepdims;
    bool reduced[RT_MAX_RANK];
} reduce_args;

/* Marks the axes in reduced[]; fails on an axis out of range or named twice. */
static rt_status read_axes(rt_op_ctx *ctx, const rt_int_param *axes, int32_t rank,
                           bool *reduced) {
    memset(reduced, 0, RT_MAX_RANK * sizeof *reduced);
    for (size_t k = 0; k < axes->count; k++) {
        int64_t a = rt_op__int_param_at(axes, k);
        if (a < -(int64_t)rank || a >= (int64_t)rank)
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "axes item %zu is %" PRId64 ", out of range for x of rank %" PRId32
                               " (valid: %" PRId32 " to %" PRId32 ")",
                               k, a, rank, -rank, rank - 1);
        int32_t d = (int32_t)(a < 0 ? a + rank : a);
        if (reduced[d])
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "axes names dimension %" PRId32 " more than once", d);
        reduced[d] = true;
    }
    return RT_OK;
}

/* reduce_*(x, axes, keepdims, out) */
static rt_status reduce_setup(rt_op_ctx *ctx, rt_reduce_op op, reduce_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int_param(ctx, 1, "axes", true, &args->axes));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "keepdims", &args->keepdims));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    const char *text;
    uint32_t types = reduce_types(op, &text);
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", types, text));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    if (args->axes.count > (size_t)x->rank)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "axes has %zu items, but x has rank %" PRId32,
                           args->axes.count, x->rank);
    if (!args->axes.known) {
        /* Axes from an input: only the rank can be checked before the values exist. */
        int32_t rank = args->keepdims ? x->rank : x->rank - (int32_t)args->axes.count;
        if (out->rank != rank)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "out has rank %" PRId32 ", but the result has rank %" PRId32,
                               out->rank, rank);
        return rt_op__set_output_sizes(ctx, out, "out", out->rank, out->bounds);
    }
    RT_RETURN_IF_ERROR(read_axes(ctx, &args->axes, x->rank, args->reduced));
    int64_t sizes[RT_MAX_RANK];
    int32_t rank = 0;
    for (int32_t d = 0; d < x->rank; d++) {
        if (!args->reduced[d])
            sizes[rank++] = x->sizes[d];
        else if (args->keepdims)
            sizes[rank++] = 1;
    }
    return rt_op__set_output_sizes(ctx, out, "out", rank, sizes);
}

/* See rt_reduce_geom: drop size-1 dimensions, merge neighbours of one kind, split off the
 * innermost run. */
static void build_geom(rt_reduce_geom *g, const rt_tensor_value *x, const bool *reduced) {
    int64_t strides[RT_MAX_RANK], sizes[RT_MAX_RANK], merged[RT_MAX_RANK];
    bool kind[RT_MAX_RANK];
    rt_tensor__dense_strides(strides, x->rank, x->sizes, NULL);
    int32_t n = 0;
    for (int32_t d = 0; d < x->rank; d++) {
        if (x->sizes[d] == 1)
            continue;
        if (n > 0 && kind[n - 1] == reduced[d] && merged[n - 1] == strides[d] * x->sizes[d]) {
            sizes[n - 1] *= x->sizes[d];
            merged[n - 1] = strides[d];
            continue;
        }
        sizes[n] = x->sizes[d];
        merged[n] = strides[d];
        kind[n] = reduced[d];
        n++;
    }
    memset(g, 0, sizeof *g);
    g->inner = 1;
    if (n > 0) {
        n--;
        g->inner = sizes[n];
        g->inner_reduced = kind[n];
    }
    g->positions = 1;
    for (int32_t i = 0; i < n; i++) {
        if (kind[i]) {
            g->red_sizes[g->nred] = sizes[i];
            g->red_strides[g->nred++] = merged[i];
            g->positions *= sizes[i];
        } else {
            g->kept_sizes[g->nkept] = sizes[i];
            g->kept_strides[g->nkept++] = merged[i];
        }
    }
    g->count = g->positions * (g->inner_reduced ? g->inner : 1);
    g->blocks = g->inner_reduced ? 1 : (g->inner + RT_REDUCE_BLOCK - 1) / RT_REDUCE_BLOCK;
}

static rt_status reduce_prepare(rt_op_ctx *ctx, rt_reduce_op op) {
    reduce_args args;
    return reduce_setup(ctx, op, &args);
}

static rt_status reduce_run(rt_op_ctx *ctx, rt_reduce_op op) {
    reduce_args args;
    RT_RETURN_IF_ERROR(reduce_setup(ctx, op, &args));
    int64_t numel = rt_tensor__numel(args.out);
    if (numel == 0)
        return RT_OK;
    rt_reduce_job job = {.x = args.x->data, .out = args.out->data};
    build_geom(&job.geom, args.x, args.reduced);
    rt_reduce_kernel kernel = rt_ops__reduce_kernel(op, args.x->type);
    if (!kernel) /* the type checks in setup make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args.x->type));
    const rt_reduce_geom *g = &job.geom;
    /* Whole output rows per item when the inner run is kept: numel / inner rows. */
    int64_t items = g->inner_reduced ? numel : numel / g->inner * g->blocks;
    int64_t work = g->inner_reduced ? g->count : g->count * RT_REDUCE_BLOCK;
    rt_parallel__for(rt_op__threads(ctx), (size_t)items, rt_op__grain(work), kernel, &job);
    return RT_OK;
}

#define DEFINE_REDUCE_OP(symbol, op)                                                         \
    rt_status rt_ops__##symbol##_prepare(rt_op_ctx *ctx) { return reduce_prepare(ctx, op); } \
    rt_status rt_ops__##symbol##_run(rt_op_ctx *ctx) { return reduce_run(ctx, op); }

DEFINE_REDUCE_OP(reduce_sum, RT_REDUCE_SUM)
DEFINE_REDUCE_OP(reduce_mean, RT_REDUCE_MEAN)
DEFINE_REDUCE_OP(reduce_prod, RT_REDUCE_PROD)
DEFINE_REDUCE_OP(reduce_max, RT_REDUCE_MAX)
DEFINE_REDUCE_OP(reduce_min, RT_REDUCE_MIN)
DEFINE_REDUCE_OP(reduce_l1, RT_REDUCE_L1)
DEFINE_REDUCE_OP(reduce_l2, RT_REDUCE_L2)
DEFINE_REDUCE_OP(reduce_log_sum, RT_REDUCE_LOG_SUM)
DEFINE_REDUCE_OP(reduce_log_sum_exp, RT_REDUCE_LOG_SUM_EXP)
DEFINE_REDUCE_OP(reduce_sum_square, RT_REDUCE_SUM_SQUARE)

/* ---- argmax, argmin --------------------------------------------------------------------- */

typedef struct arg_args {
    rt_tensor_value *x, *out;
    int32_t axis;
    bool keepdims, last;
} arg_args;

/* argmax(x, axis, keepdims, select_last_index, out), argmin likewise */
static rt_status arg_setup(rt_op_ctx *ctx, arg_args *args) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "keepdims", &args->keepdims));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "select_last_index", &args->last));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_NUMERIC,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, out, "out", RT_I64));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &args->axis));
    int64_t sizes[RT_MAX_RANK], others = 1;
    int32_t rank = 0;
    for (int32_t d = 0; d < x->rank; d++) {
        if (d != args->axis) {
            sizes[rank++] = x->sizes[d];
            others = rt_op__mul_sat(others, x->sizes[d]);
        } else if (args->keepdims) {
            sizes[rank++] = 1;
        }
    }
    if (x->sizes[args->axis] == 0 && others > 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "axis %" PRId32 " of x has size 0: there is no index to return",
                           args->axis);
    return rt_op__set_output_sizes(ctx, out, "out", rank, sizes);
}

rt_status rt_ops__argmax_prepare(rt_op_ctx *ctx) {
    arg_args args;
    return arg_setup(ctx, &args);
}

rt_status rt_ops__argmin_prepare(rt_op_ctx *ctx) {
    arg_args args;
    return arg_setup(ctx, &args);
}

static rt_status arg_run(rt_op_ctx *ctx, bool max) {
    arg_args args;
    RT_RETURN_IF_ERROR(arg_setup(ctx, &args));
    const rt_tensor_value *x = args.x;
    if (rt_tensor__numel(args.out) == 0)
        return RT_OK;
    rt_arg_job job = {.x = x->data, .out = args.out->data, .outer = 1, .inner = 1,
                      .last = args.last};
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < args.axis)
            job.outer *= x->sizes[d];
        else if (d == args.axis)
            job.n = x->sizes[d];
        else
            job.inner *= x->sizes[d];
    }
    job.blocks = (job.inner + RT_REDUCE_BLOCK - 1) / RT_REDUCE_BLOCK;
    rt_reduce_kernel kernel = rt_ops__arg_kernel(max, x->type);
    if (!kernel) /* the type checks in setup make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(x->type));
    rt_parallel__for(rt_op__threads(ctx), (size_t)(job.outer * job.blocks),
                     rt_op__grain(job.n * RT_REDUCE_BLOCK), kernel, &job);
    return RT_OK;
}

rt_status rt_ops__argmax_run(rt_op_ctx *ctx) {
    return arg_run(ctx, true);
}

rt_status rt_ops__argmin_run(rt_op_ctx *ctx) {
    return arg_run(ctx, false);
}
