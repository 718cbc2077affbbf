/* pad.c: pad (constant, reflect, edge, wrap; negative pads crop), tile and expand. Any dtype.
 *
 * All three map every output index, dimension by dimension, to a source index (or to the fill
 * value) and copy through those maps (movement.c); the maps live in scratch sized at load for
 * the planned output. Pads, repeats and shape may be literal int lists or int32/int64 tensors
 * read at run, the output then planned at its bounds. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* Pads and repeats beyond this are refused, so that sizes plus pads never overflow. */
#define PAD_LIMIT (INT64_MAX / 4)

/* Common end of the three ops' setup: the output's shape now, or its bounds in prepare while
 * a tensor parameter is unknown. */
static rt_status finish_setup(rt_op_ctx *ctx, rt_tensor_value *out, int32_t rank,
                              const int64_t *sizes) {
    return rt_op__set_output_sizes(ctx, out, "out", rank, sizes);
}

static rt_status request_maps(rt_op_ctx *ctx, const rt_tensor_value *out) {
    ctx->scratch_bytes = rt_mv__maps_bytes(out->rank, out->bounds);
    return RT_OK;
}

static rt_status layout_maps(rt_op_ctx *ctx, const rt_tensor_value *out, int64_t **maps) {
    if (!rt_mv__maps_layout(ctx, out->rank, out->sizes, maps))
        return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
    return RT_OK;
}

/* ---- pad -------------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP, PAD_MODE_COUNT };
static const char *const pad_mode_names[] = {"constant", "reflect", "edge", "wrap"};

typedef struct pad_args {
    rt_tensor_value *x, *value, *out;
    rt_mv_ints pads;
    int64_t mode;
    int64_t begin[RT_MAX_RANK], end[RT_MAX_RANK];
} pad_args;

/* Output sizes; every pad read and checked. */
static rt_status pad_sizes(rt_op_ctx *ctx, pad_args *args, int64_t *sizes) {
    const rt_tensor_value *x = args->x;
    rt_status code = rt_op__shape_code(ctx);
    if (args->pads.count != 2 * (size_t)x->rank)
        return rt_op__fail(ctx, code, "pads has %zu items; x of rank %" PRId32 " needs %" PRId32
                           " (all begins, then all ends)", args->pads.count, x->rank, 2 * x->rank);
    for (int32_t d = 0; d < x->rank; d++) {
        int64_t b = rt_mv__ints_at(&args->pads, (size_t)d);
        int64_t e = rt_mv__ints_at(&args->pads, (size_t)(d + x->rank));
        if (b < -PAD_LIMIT || b > PAD_LIMIT || e < -PAD_LIMIT || e > PAD_LIMIT)
            return rt_op__fail(ctx, code, "pads of dimension %" PRId32 " (%" PRId64 ", %" PRId64
                               ") are too large", d, b, e);
        int64_t kept = x->sizes[d] + (b < 0 ? b : 0) + (e < 0 ? e : 0);
        if (kept < 0)
            return rt_op__fail(ctx, code, "pads (%" PRId64 ", %" PRId64 ") crop more than the %"
                               PRId64 " elements of dimension %" PRId32, b, e, x->sizes[d], d);
        sizes[d] = kept + (b > 0 ? b : 0) + (e > 0 ? e : 0);
        if (args->mode != PAD_CONSTANT && kept == 0 && sizes[d] > 0)
            return rt_op__fail(ctx, code, "%s padding needs elements to repeat, but dimension %"
                               PRId32 " keeps none", pad_mode_names[args->mode], d);
        args->begin[d] = b;
        args->end[d] = e;
    }
    return RT_OK;
}

/* pad(x, pads, mode: int, value: tensor | none, out) */
static rt_status pad_setup(rt_op_ctx *ctx, pad_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "pads", false, &args->pads));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "mode", &args->mode));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 3, "value", &args->value));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, x, "x", out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    if (args->pads.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->pads.tensor, "pads"));
    if (args->mode < 0 || args->mode >= PAD_MODE_COUNT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "mode %" PRId64 " must be 0 (constant), 1 "
                           "(reflect), 2 (edge) or 3 (wrap)", args->mode);
    if (args->value) {
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->value, "value", x, "x"));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->value, "value"));
        if (rt_tensor__numel(args->value) != 1)
            return rt_op__fail(ctx, rt_op__shape_code(ctx), "value has %" PRId64
                               " elements; it must hold exactly one",
                               rt_tensor__numel(args->value));
    }
    if (!rt_mv__ints_known(ctx, &args->pads)) {
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, out, "out", x->rank));
        return rt_mv__plan_at_bounds(ctx, out, "out");
    }
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(pad_sizes(ctx, args, sizes));
    return finish_setup(ctx, out, x->rank, sizes);
}

rt_status rt_ops__pad_prepare(rt_op_ctx *ctx) {
    pad_args args;
    RT_RETURN_IF_ERROR(pad_setup(ctx, &args));
    return request_maps(ctx, args.out);
}

/* Source index in [0, kept) of position j (relative to the kept part) for the non-constant
 * modes; kept >= 1. */
static int64_t pad_source(int64_t mode, int64_t j, int64_t kept) {
    if (mode == PAD_EDGE)
        return j < 0 ? 0 : j >= kept ? kept - 1 : j;
    if (mode == PAD_WRAP) {
        int64_t m = j % kept;
        return m < 0 ? m + kept : m;
    }
    /* reflect: period 2 * (kept - 1), as numpy.pad repeats reflections of a short axis */
    if (kept == 1)
        return 0;
    int64_t period = 2 * (kept - 1), m = j % period;
    m = m < 0 ? m + period : m;
    return m < kept ? m : period - m;
}

rt_status rt_ops__pad_run(rt_op_ctx *ctx) {
    pad_args args;
    RT_RETURN_IF_ERROR(pad_setup(ctx, &args));
    const rt_tensor_value *x = args.x, *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t *maps[RT_MAX_RANK], strides[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(layout_maps(ctx, out, maps));
    rt_tensor__dense_strides(strides, x->rank, x->sizes, NULL);
    /* Crop first (negative pads), then pad around what is kept (as onnxruntime does). */
    for (int32_t d = 0; d < out->rank; d++) {
        int64_t b = args.begin[d], e = args.end[d];
        int64_t skip = b < 0 ? -b : 0, lead = b > 0 ? b : 0;
        int64_t kept = x->sizes[d] - skip - (e < 0 ? -e : 0);
        for (int64_t i = 0; i < out->sizes[d]; i++) {
            int64_t j = i - lead;
            if (j < 0 || j >= kept)
                j = args.mode == PAD_CONSTANT ? -1 : pad_source(args.mode, j, kept);
            maps[d][i] = j < 0 ? -1 : (skip + j) * strides[d];
        }
    }
    static const uint64_t zero = 0;
    const void *fill = args.value ? args.value->data : &zero;
    rt_mv__map_copy(ctx, out->data, x->data, out->rank, out->sizes, maps, fill, out->elem_size);
    return RT_OK;
}

/* ---- tile ------------------------------------------------------------------------------- */

typedef struct tile_args {
    rt_tensor_value *x, *out;
    rt_mv_ints repeats;
} tile_args;

/* tile(x, repeats, out): out.shape[d] = x.shape[d] * repeats[d]. */
static rt_status tile_setup(rt_op_ctx *ctx, tile_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "repeats", false, &args->repeats));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, x, "x", out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    if (args->repeats.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->repeats.tensor,
                                                 "repeats"));
    if (!rt_mv__ints_known(ctx, &args->repeats)) {
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, out, "out", x->rank));
        return rt_mv__plan_at_bounds(ctx, out, "out");
    }
    rt_status code = rt_op__shape_code(ctx);
    if (args->repeats.count != (size_t)x->rank)
        return rt_op__fail(ctx, code, "repeats has %zu items, but x has rank %" PRId32,
                           args->repeats.count, x->rank);
    int64_t sizes[RT_MAX_RANK];
    for (int32_t d = 0; d < x->rank; d++) {
        int64_t r = rt_mv__ints_at(&args->repeats, (size_t)d);
        if (r < 0)
            return rt_op__fail(ctx, code, "repeats item %" PRId32 " is %" PRId64
                               "; repeats must be >= 0", d, r);
        if (!rt_op__mul(x->sizes[d], r, &sizes[d]))
            return rt_op__fail(ctx, code, "dimension %" PRId32 " repeated %" PRId64
                               " times overflows int64", d, r);
    }
    return finish_setup(ctx, out, x->rank, sizes);
}

rt_status rt_ops__tile_prepare(rt_op_ctx *ctx) {
    tile_args args;
    RT_RETURN_IF_ERROR(tile_setup(ctx, &args));
    return request_maps(ctx, args.out);
}

rt_status rt_ops__tile_run(rt_op_ctx *ctx) {
    tile_args args;
    RT_RETURN_IF_ERROR(tile_setup(ctx, &args));
    const rt_tensor_value *x = args.x, *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t *maps[RT_MAX_RANK], strides[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(layout_maps(ctx, out, maps));
    rt_tensor__dense_strides(strides, x->rank, x->sizes, NULL);
    for (int32_t d = 0; d < out->rank; d++)
        for (int64_t i = 0; i < out->sizes[d]; i++)
            maps[d][i] = (i % x->sizes[d]) * strides[d]; /* out not empty: sizes[d] > 0 */
    rt_mv__map_copy(ctx, out->data, x->data, out->rank, out->sizes, maps, NULL, out->elem_size);
    return RT_OK;
}

/* ---- expand ----------------------------------------------------------------------------- */

typedef struct expand_args {
    rt_tensor_value *x, *out;
    rt_mv_ints shape;
} expand_args;

/* ONNX Expand: x and shape broadcast both ways (a 1 in shape keeps x's size). */
static rt_status expand_sizes(rt_op_ctx *ctx, const expand_args *args, int32_t *rank,
                              int64_t *sizes) {
    const rt_tensor_value *x = args->x;
    rt_status code = rt_op__shape_code(ctx);
    size_t n = args->shape.count;
    if (n > RT_MAX_RANK)
        return rt_op__fail(ctx, code, "shape has %zu items; the most is %d", n, RT_MAX_RANK);
    int32_t r = x->rank > (int32_t)n ? x->rank : (int32_t)n;
    for (int32_t d = 0; d < r; d++) {
        int32_t dx = d - (r - x->rank), ds = d - (r - (int32_t)n);
        int64_t sx = dx >= 0 ? x->sizes[dx] : 1;
        int64_t ss = ds >= 0 ? rt_mv__ints_at(&args->shape, (size_t)ds) : 1;
        if (ss < 0)
            return rt_op__fail(ctx, code, "shape item %" PRId32 " is %" PRId64
                               "; sizes must be >= 0", ds, ss);
        if (sx != ss && sx != 1 && ss != 1) {
            char tx[RT_OP_SHAPE_TEXT];
            return rt_op__fail(ctx, code, "x %s cannot be expanded: dimension %" PRId32
                               " is %" PRId64 ", shape asks for %" PRId64,
                               rt_op__shape_text(x->sizes, x->rank, tx), d, sx, ss);
        }
        sizes[d] = ss == 1 ? sx : ss;
    }
    *rank = r;
    return RT_OK;
}

/* expand(x, shape, out) */
static rt_status expand_setup(rt_op_ctx *ctx, expand_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "shape", false, &args->shape));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, x, "x", out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    if (args->shape.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->shape.tensor, "shape"));
    if (!rt_mv__ints_known(ctx, &args->shape)) {
        if (out->rank < x->rank)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "out has rank %" PRId32 ", below x's %"
                               PRId32, out->rank, x->rank);
        return rt_mv__plan_at_bounds(ctx, out, "out");
    }
    int32_t rank = 0;
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(expand_sizes(ctx, args, &rank, sizes));
    return finish_setup(ctx, out, rank, sizes);
}

rt_status rt_ops__expand_prepare(rt_op_ctx *ctx) {
    expand_args args;
    RT_RETURN_IF_ERROR(expand_setup(ctx, &args));
    return request_maps(ctx, args.out);
}

rt_status rt_ops__expand_run(rt_op_ctx *ctx) {
    expand_args args;
    RT_RETURN_IF_ERROR(expand_setup(ctx, &args));
    const rt_tensor_value *x = args.x, *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t *maps[RT_MAX_RANK], strides[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(layout_maps(ctx, out, maps));
    rt_tensor__dense_strides(strides, x->rank, x->sizes, NULL);
    int32_t lead = out->rank - x->rank;
    for (int32_t d = 0; d < out->rank; d++) {
        bool broadcast = d < lead || x->sizes[d - lead] == 1;
        for (int64_t i = 0; i < out->sizes[d]; i++)
            maps[d][i] = broadcast ? 0 : i * strides[d - lead];
    }
    rt_mv__map_copy(ctx, out->data, x->data, out->rank, out->sizes, maps, NULL, out->elem_size);
    return RT_OK;
}
