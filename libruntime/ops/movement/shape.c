/* shape.c: reshape, squeeze, unsqueeze, transpose and concat. Any dtype; data is moved as raw
 * elements. */
#include <inttypes.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* Output dtype, writability and row-major layout of x and out, shared by the three ops. */
static rt_status check_data_op(rt_op_ctx *ctx, const rt_tensor_value *x, const char *what_x,
                               const rt_tensor_value *out) {
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, what_x));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, what_x));
    return rt_op__check_default_layout(ctx, out, "out");
}

/* ---- reshape ---------------------------------------------------------------------------- */

typedef struct reshape_args {
    rt_tensor_value *x, *out;
    rt_mv_ints shape; /* a literal list, or a tensor read at run (importers' run-time shapes) */
    size_t count;
} reshape_args;

/* The new sizes: one -1 is inferred from x's element count, which the others must divide. */
static rt_status reshape_sizes(rt_op_ctx *ctx, const reshape_args *args, int64_t *sizes) {
    int64_t numel, known = 1;
    size_t inferred = SIZE_MAX;
    char tx[RT_OP_SHAPE_TEXT], ts[RT_OP_SHAPE_TEXT];
    int64_t shape[RT_MAX_RANK];
    for (size_t i = 0; i < args->count; i++)
        shape[i] = rt_mv__ints_at(&args->shape, i);
    for (size_t i = 0; i < args->count; i++) {
        int64_t s = shape[i];
        if (s == -1 && inferred == SIZE_MAX) {
            inferred = i;
            continue;
        }
        if (s < 0)
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "shape %s may hold sizes >= 0 and a single -1",
                               rt_op__shape_text(shape, (int32_t)args->count, ts));
        if (!rt_op__mul(known, s, &known))
            return rt_op__fail(ctx, rt_op__shape_code(ctx), "shape %s overflows int64",
                               rt_op__shape_text(shape, (int32_t)args->count, ts));
        sizes[i] = s;
    }
    const rt_tensor_value *x = args->x;
    if (!rt_tensor__checked_numel(x->sizes, x->rank, &numel))
        return rt_op__fail(ctx, RT_INTERNAL, "x has an invalid shape");
    /* The shapes are formatted only for a message: this runs on every call. */
#define TX rt_op__shape_text(x->sizes, x->rank, tx)
#define TS rt_op__shape_text(shape, (int32_t)args->count, ts)
    if (inferred != SIZE_MAX) {
        if (known == 0) /* any size would do: numpy and PyTorch refuse this too */
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "cannot infer the -1 in shape %s: the other sizes multiply to 0",
                               TS);
        if (numel % known != 0)
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "cannot reshape x %s (%" PRId64 " elements) into shape %s", TX,
                               numel, TS);
        sizes[inferred] = numel / known;
    } else if (known != numel) {
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "cannot reshape x %s (%" PRId64 " elements) into shape %s (%" PRId64
                           " elements)",
                           TX, numel, TS, known);
    }
#undef TX
#undef TS
    return RT_OK;
}

/* reshape(x, shape, out) */
static rt_status reshape_setup(rt_op_ctx *ctx, reshape_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "shape", false, &args->shape));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    RT_RETURN_IF_ERROR(check_data_op(ctx, args->x, "x", args->out));
    args->count = args->shape.count;
    if (args->count > RT_MAX_RANK)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "shape has %zu sizes; the most is %d",
                           args->count, RT_MAX_RANK);
    if (args->shape.tensor)
        RT_RETURN_IF_ERROR(
            rt_op__check_disjoint(ctx, args->out, "out", args->shape.tensor, "shape"));
    if (!rt_mv__ints_known(ctx, &args->shape)) {
        if (args->out->rank != (int32_t)args->count)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "out has rank %" PRId32 ", but shape holds %zu sizes",
                               args->out->rank, args->count);
        return rt_mv__plan_at_bounds(ctx, args->out, "out");
    }
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(reshape_sizes(ctx, args, sizes));
    return rt_op__set_output_sizes(ctx, args->out, "out", (int32_t)args->count, sizes);
}

rt_status rt_ops__reshape_prepare(rt_op_ctx *ctx) {
    reshape_args args;
    return reshape_setup(ctx, &args);
}

rt_status rt_ops__reshape_run(rt_op_ctx *ctx) {
    reshape_args args;
    RT_RETURN_IF_ERROR(reshape_setup(ctx, &args));
    size_t nbytes = rt_tensor__nbytes(args.x);
    /* A planner may give out the storage of x, making the reshape free. */
    if (nbytes > 0 && args.out->data != args.x->data)
        memmove(args.out->data, args.x->data, nbytes);
    return RT_OK;
}

/* ---- squeeze, unsqueeze ------------------------------------------------------------------ */

/* squeeze(x, axes, out) drops the listed dimensions of size 1; unsqueeze(x, axes, out) inserts
 * dimensions of size 1 at the listed positions of out. The axes may be a tensor read at run
 * (ONNX gives them as graph inputs): out's rank follows from their count, its sizes from their
 * values. The elements do not move. */
typedef struct axes_args {
    rt_tensor_value *x, *out;
    rt_mv_ints axes;
} axes_args;

static rt_status axes_setup(rt_op_ctx *ctx, axes_args *args, bool insert) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "axes", false, &args->axes));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    RT_RETURN_IF_ERROR(check_data_op(ctx, args->x, "x", args->out));
    if (args->axes.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->axes.tensor, "axes"));
    int64_t rank = args->x->rank + (insert ? 1 : -1) * (int64_t)args->axes.count;
    if (rank < 0 || rank > RT_MAX_RANK || rank != args->out->rank)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%zu axes %s x of rank %" PRId32 " give rank %"
                           PRId64 ", but out has rank %" PRId32, args->axes.count,
                           insert ? "inserted into" : "removed from", args->x->rank, rank,
                           args->out->rank);
    return RT_OK;
}

/* Marks the dimensions the axes name (of a tensor of `rank` dimensions): each once, in range. */
static rt_status mark_axes(rt_op_ctx *ctx, const rt_mv_ints *axes, int32_t rank,
                           bool *marked) {
    memset(marked, 0, (size_t)rank * sizeof *marked);
    for (size_t k = 0; k < axes->count; k++) {
        int64_t a = rt_mv__ints_at(axes, k);
        if (a < -(int64_t)rank || a >= (int64_t)rank)
            return rt_op__fail(ctx, rt_op__shape_code(ctx), "axes item %zu is %" PRId64 ", out of "
                               "range for rank %" PRId32, k, a, rank);
        a += a < 0 ? rank : 0;
        if (marked[a])
            return rt_op__fail(ctx, rt_op__shape_code(ctx), "axes name dimension %" PRId64
                               " twice", a);
        marked[a] = true;
    }
    return RT_OK;
}

static rt_status axes_sizes(rt_op_ctx *ctx, axes_args *args, bool insert) {
    if (!rt_mv__ints_known(ctx, &args->axes))
        return rt_mv__plan_at_bounds(ctx, args->out, "out");
    const rt_tensor_value *x = args->x;
    int32_t rank = args->out->rank;
    bool marked[RT_MAX_RANK];
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(mark_axes(ctx, &args->axes, insert ? rank : x->rank, marked));
    if (insert) {
        for (int32_t d = 0, from = 0; d < rank; d++)
            sizes[d] = marked[d] ? 1 : x->sizes[from++];
    } else {
        for (int32_t d = 0, to = 0; d < x->rank; d++) {
            if (!marked[d])
                sizes[to++] = x->sizes[d];
            else if (x->sizes[d] != 1)
                return rt_op__fail(ctx, rt_op__shape_code(ctx), "cannot squeeze dimension %"
                                   PRId32 " of x: its size is %" PRId64 ", not 1", d,
                                   x->sizes[d]);
        }
    }
    return rt_op__set_output_sizes(ctx, args->out, "out", rank, sizes);
}

static rt_status axes_op(rt_op_ctx *ctx, bool insert, bool run) {
    axes_args args;
    RT_RETURN_IF_ERROR(axes_setup(ctx, &args, insert));
    RT_RETURN_IF_ERROR(axes_sizes(ctx, &args, insert));
    size_t nbytes = rt_tensor__nbytes(args.x);
    if (run && nbytes > 0 && args.out->data != args.x->data)
        memmove(args.out->data, args.x->data, nbytes);
    return RT_OK;
}

rt_status rt_ops__squeeze_prepare(rt_op_ctx *ctx) { return axes_op(ctx, false, false); }
rt_status rt_ops__squeeze_run(rt_op_ctx *ctx) { return axes_op(ctx, false, true); }
rt_status rt_ops__unsqueeze_prepare(rt_op_ctx *ctx) { return axes_op(ctx, true, false); }
rt_status rt_ops__unsqueeze_run(rt_op_ctx *ctx) { return axes_op(ctx, true, true); }

/* ---- transpose -------------------------------------------------------------------------- */

typedef struct transpose_args {
    rt_tensor_value *x, *out;
    int32_t perm[RT_MAX_RANK];
} transpose_args;

/* transpose(x, perm, out); perm items may be negative, as numpy allows. */
static rt_status transpose_setup(rt_op_ctx *ctx, transpose_args *args) {
    const int64_t *perm;
    size_t count;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, 1, "perm", &perm, &count));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    const rt_tensor_value *x = args->x;
    RT_RETURN_IF_ERROR(check_data_op(ctx, x, "x", args->out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", x, "x"));
    if (count != (size_t)x->rank)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "perm has %zu entries, but x has rank %" PRId32, count, x->rank);

    bool seen[RT_MAX_RANK] = {false};
    int64_t sizes[RT_MAX_RANK];
    for (int32_t i = 0; i < x->rank; i++) {
        int32_t axis;
        RT_RETURN_IF_ERROR(rt_op__axis(ctx, perm[i], x->rank, "perm item", &axis));
        if (seen[axis])
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "perm names dimension %" PRId32 " twice; it must be a permutation",
                               axis);
        seen[axis] = true;
        args->perm[i] = axis;
        sizes[i] = x->sizes[axis];
    }
    return rt_op__set_output_sizes(ctx, args->out, "out", x->rank, sizes);
}

rt_status rt_ops__transpose_prepare(rt_op_ctx *ctx) {
    transpose_args args;
    return transpose_setup(ctx, &args);
}

rt_status rt_ops__transpose_run(rt_op_ctx *ctx) {
    transpose_args args;
    RT_RETURN_IF_ERROR(transpose_setup(ctx, &args));
    const rt_tensor_value *x = args.x, *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    /* Walk out in order, reading x through its strides permuted. */
    int64_t x_strides[RT_MAX_RANK], src_strides[RT_MAX_RANK], dst_strides[RT_MAX_RANK];
    rt_tensor__dense_strides(x_strides, x->rank, x->sizes, NULL);
    rt_tensor__dense_strides(dst_strides, out->rank, out->sizes, NULL);
    for (int32_t i = 0; i < x->rank; i++)
        src_strides[i] = x_strides[args.perm[i]];
    rt_tensor__copy_strided(out->data, dst_strides, x->data, src_strides, out->rank, out->sizes,
                            out->elem_size);
    return RT_OK;
}

/* ---- concat ----------------------------------------------------------------------------- */

typedef struct concat_args {
    rt_tensor_value **xs, *out;
    size_t count;
    int32_t axis;
} concat_args;

/* Every input against the first: dtype, rank, layout, no shared memory with out. */
static rt_status concat_check_inputs(rt_op_ctx *ctx, const concat_args *args) {
    const rt_tensor_value *first = args->xs[0];
    char what[RT_OP_ITEM_NAME];
    for (size_t i = 0; i < args->count; i++) {
        const rt_tensor_value *x = args->xs[i];
        rt_op__item_name(what, "xs[", i, "]");
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, x, what, first, "xs[0]"));
        if (x->rank != first->rank)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "%s has rank %" PRId32 ", but xs[0] has rank %" PRId32, what,
                               x->rank, first->rank);
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, what));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", x, what));
    }
    return RT_OK;
}

/* The sizes of xs[0] with the axis summed over all inputs; the rest must agree. */
static rt_status concat_sizes(rt_op_ctx *ctx, const concat_args *args, int64_t *sizes) {
    const rt_tensor_value *first = args->xs[0];
    memcpy(sizes, first->sizes, (size_t)first->rank * sizeof *sizes);
    sizes[args->axis] = 0;
    for (size_t i = 0; i < args->count; i++) {
        const rt_tensor_value *x = args->xs[i];
        for (int32_t d = 0; d < x->rank; d++) {
            if (d == args->axis || x->sizes[d] == first->sizes[d])
                continue;
            char t0[RT_OP_SHAPE_TEXT], ti[RT_OP_SHAPE_TEXT];
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "xs[%zu] %s does not match xs[0] %s outside axis %" PRId32, i,
                               rt_op__shape_text(x->sizes, x->rank, ti),
                               rt_op__shape_text(first->sizes, first->rank, t0), args->axis);
        }
        if (!rt_op__add(sizes[args->axis], x->sizes[args->axis], &sizes[args->axis]))
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "the concatenated size overflows int64");
    }
    return RT_OK;
}

/* concat(xs, axis, out) */
static rt_status concat_setup(rt_op_ctx *ctx, concat_args *args) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor_list(ctx, 0, "xs", &args->xs, &args->count));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    if (args->count == 0)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "xs is empty; concat needs at least one tensor");
    RT_RETURN_IF_ERROR(check_data_op(ctx, args->xs[0], "xs[0]", args->out));
    RT_RETURN_IF_ERROR(concat_check_inputs(ctx, args));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, args->xs[0]->rank, "axis", &args->axis));
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(concat_sizes(ctx, args, sizes));
    return rt_op__set_output_sizes(ctx, args->out, "out", args->xs[0]->rank, sizes);
}

rt_status rt_ops__concat_prepare(rt_op_ctx *ctx) {
    concat_args args;
    return concat_setup(ctx, &args);
}

rt_status rt_ops__concat_run(rt_op_ctx *ctx) {
    concat_args args;
    RT_RETURN_IF_ERROR(concat_setup(ctx, &args));
    const rt_tensor_value *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    /* out is [outer, sum of the inputs' slices]: each input adds a slice of bytes to every
     * outer row. */
    int64_t outer = 1;
    for (int32_t d = 0; d < args.axis; d++)
        outer *= out->sizes[d]; /* bounded by out's element count, which is not 0 */
    size_t row_bytes = rt_tensor__nbytes(out) / (size_t)outer;
    char *dst = out->data;
    size_t offset = 0;
    for (size_t i = 0; i < args.count; i++) {
        const rt_tensor_value *x = args.xs[i];
        size_t slice = rt_tensor__nbytes(x) / (size_t)outer;
        const char *src = x->data;
        for (int64_t o = 0; o < outer && slice > 0; o++)
            memcpy(dst + (size_t)o * row_bytes + offset, src + (size_t)o * slice, slice);
        offset += slice;
    }
    return RT_OK;
}
