/* generate.c: ops that make tensors from parameters: one_hot, eye_like, constant_of_shape and
 * range. A shape-giving parameter may be a tensor read at run; the output is then planned at
 * its bounds at load, and a run whose result does not fit fails with RT_INVALID_ARGUMENT. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* The bytes of the value 1 in `type` (all types but unknown ones). */
static bool one_bytes(rt_type type, uint64_t *out) {
    union {
        float f;
        double d;
        uint64_t bits;
        uint16_t half;
    } v = {.bits = 0};
    switch (type) {
    case RT_F32: v.f = 1.0f; break;
    case RT_F64: v.d = 1.0; break;
    case RT_F16: v.half = 0x3C00; break;
    case RT_BF16: v.half = 0x3F80; break;
    case RT_I8: case RT_U8: case RT_BOOL: { uint8_t one = 1; memcpy(&v, &one, 1); break; }
    case RT_I16: case RT_U16: v.half = 1; break;
    case RT_I32: case RT_U32: { uint32_t one = 1; memcpy(&v, &one, 4); break; }
    case RT_I64: case RT_U64: v.bits = 1; break;
    default: return false;
    }
    *out = v.bits;
    return true;
}

/* ---- one_hot ---------------------------------------------------------------------------- */

typedef struct one_hot_args {
    rt_tensor_value *indices, *values, *out;
    rt_mv_ints depth;
    int32_t axis; /* in the output */
} one_hot_args;

/* one_hot(indices, depth, axis: int, values, out): out has indices' shape with `depth`
 * inserted at axis, every element values[0] (off) but values[1] (on) where the position
 * along axis equals the index (negative indices count from depth; others match nothing). */
static rt_status one_hot_setup(rt_op_ctx *ctx, one_hot_args *args) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "indices", &args->indices));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "depth", false, &args->depth));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "values", &args->values));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "out", &args->out));
    const rt_tensor_value *indices = args->indices, *values = args->values;
    rt_tensor_value *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, indices, "indices", RT_TYPES_NUMERIC,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, values, "values", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, values, "values", out));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, indices, "indices"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", indices, "indices"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", values, "values"));
    if (args->depth.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->depth.tensor, "depth"));
    if (values->rank > 1 || rt_tensor__numel(values) != 2)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "values must hold 2 elements (off, on)");
    if (indices->rank + 1 > RT_MAX_RANK)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "indices has rank %" PRId32 "; the most is %d",
                           indices->rank, RT_MAX_RANK - 1);
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, indices->rank + 1, "axis", &args->axis));
    if (!rt_mv__ints_known(ctx, &args->depth)) {
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, out, "out", indices->rank + 1));
        return rt_mv__plan_at_bounds(ctx, out, "out");
    }
    int64_t depth = args->depth.count == 1 ? rt_mv__ints_at(&args->depth, 0) : -1;
    if (depth < 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "depth must be one int >= 0");
    int64_t sizes[RT_MAX_RANK];
    for (int32_t d = 0, i = 0; d <= indices->rank; d++)
        sizes[d] = d == args->axis ? depth : indices->sizes[i++];
    return rt_op__set_output_sizes(ctx, out, "out", indices->rank + 1, sizes);
}

rt_status rt_ops__one_hot_prepare(rt_op_ctx *ctx) {
    one_hot_args args;
    return one_hot_setup(ctx, &args);
}

/* Position of indices[i] in [0, depth), or -1 when it matches none (out of range, or a float
 * that is not a whole number). */
static int64_t one_hot_position(const rt_tensor_value *t, int64_t i, int64_t depth) {
    const void *p = (const char *)t->data + (size_t)i * t->elem_size;
    double f;
    int64_t v;
    switch (t->type) {
    case RT_F32: f = *(const float *)p; goto floating;
    case RT_F64: f = *(const double *)p; goto floating;
    case RT_I8: v = *(const int8_t *)p; break;
    case RT_I16: v = *(const int16_t *)p; break;
    case RT_I32: v = *(const int32_t *)p; break;
    case RT_I64: v = *(const int64_t *)p; break;
    case RT_U8: v = *(const uint8_t *)p; break;
    case RT_U16: v = *(const uint16_t *)p; break;
    case RT_U32: v = *(const uint32_t *)p; break;
    case RT_U64: {
        uint64_t u = *(const uint64_t *)p;
        return u < (uint64_t)depth ? (int64_t)u : -1;
    }
    default: return -1;
    }
    if (v < 0)
        v = v < -depth ? -1 : v + depth;
    return v < depth ? v : -1;
floating:
    if (!(f == floor(f)) || f < -(double)depth || f >= (double)depth)
        return -1; /* also NaN */
    v = (int64_t)f;
    return v < 0 ? v + depth : v;
}

rt_status rt_ops__one_hot_run(rt_op_ctx *ctx) {
    one_hot_args args;
    RT_RETURN_IF_ERROR(one_hot_setup(ctx, &args));
    const rt_tensor_value *indices = args.indices, *out = args.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t depth = out->sizes[args.axis], inner = 1;
    for (int32_t d = args.axis; d < indices->rank; d++)
        inner *= indices->sizes[d];
    size_t elem = out->elem_size;
    const char *off = args.values->data, *on = off + elem;
    rt_mv__fill(out->data, off, rt_tensor__numel(out), elem);
    int64_t count = rt_tensor__numel(indices);
    for (int64_t i = 0; i < count; i++) {
        int64_t at = one_hot_position(indices, i, depth);
        if (at >= 0) /* out is [outer, depth, inner] */
            rt_mv__copy_elem((char *)out->data +
                                 (size_t)(((i / inner) * depth + at) * inner + i % inner) * elem,
                             on, elem);
    }
    return RT_OK;
}

/* ---- eye_like --------------------------------------------------------------------------- */

/* eye_like(x, k: int, out): out (x's 2-D shape, any dtype) is 1 where column = row + k. */
static rt_status eye_like_setup(rt_op_ctx *ctx, rt_tensor_value **out, int64_t *k) {
    rt_tensor_value *x;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "k", k));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", out));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, x, "x", 2));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, *out, "out", RT_TYPES_ALL, "any dtype"));
    int64_t sizes[2] = {x->sizes[0], x->sizes[1]};
    return rt_op__set_output_sizes(ctx, *out, "out", 2, sizes);
}

rt_status rt_ops__eye_like_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *out;
    int64_t k;
    return eye_like_setup(ctx, &out, &k);
}

rt_status rt_ops__eye_like_run(rt_op_ctx *ctx) {
    rt_tensor_value *out;
    int64_t k;
    RT_RETURN_IF_ERROR(eye_like_setup(ctx, &out, &k));
    size_t nbytes = rt_tensor__nbytes(out);
    if (nbytes == 0)
        return RT_OK;
    uint64_t one;
    if (!one_bytes(out->type, &one))
        return rt_op__fail(ctx, RT_INTERNAL, "no 1 for dtype %s", rt_tensor__type_name(out->type));
    memset(out->data, 0, nbytes);
    int64_t rows = out->sizes[0], cols = out->sizes[1];
    if (k >= cols || k <= -rows)
        return RT_OK; /* no diagonal inside; and i + k below cannot overflow */
    for (int64_t i = 0; i < rows; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < cols)
            memcpy((char *)out->data + (size_t)(i * cols + j) * out->elem_size, &one,
                   out->elem_size);
    }
    return RT_OK;
}

/* ---- constant_of_shape ------------------------------------------------------------------ */

typedef struct const_args {
    rt_tensor_value *value, *out;
    rt_mv_ints shape;
} const_args;

/* constant_of_shape(shape, value, out): out of `shape` filled with value's one element. */
static rt_status constant_of_shape_setup(rt_op_ctx *ctx, const_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 0, "shape", false, &args->shape));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "value", &args->value));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->value, "value", RT_TYPES_ALL,
                                            "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, args->value, "value", args->out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->value, "value"));
    if (args->shape.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->shape.tensor,
                                                 "shape"));
    if (rt_tensor__numel(args->value) != 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "value must hold exactly one element");
    if (!rt_mv__ints_known(ctx, &args->shape))
        return rt_mv__plan_at_bounds(ctx, args->out, "out");
    rt_status code = rt_op__shape_code(ctx);
    if (args->shape.count > RT_MAX_RANK)
        return rt_op__fail(ctx, code, "shape has %zu items; the most is %d", args->shape.count,
                           RT_MAX_RANK);
    int64_t sizes[RT_MAX_RANK];
    for (size_t d = 0; d < args->shape.count; d++) {
        sizes[d] = rt_mv__ints_at(&args->shape, d);
        if (sizes[d] < 0)
            return rt_op__fail(ctx, code, "shape item %zu is %" PRId64 "; sizes must be >= 0", d,
                               sizes[d]);
    }
    return rt_op__set_output_sizes(ctx, args->out, "out", (int32_t)args->shape.count, sizes);
}

rt_status rt_ops__constant_of_shape_prepare(rt_op_ctx *ctx) {
    const_args args;
    return constant_of_shape_setup(ctx, &args);
}

rt_status rt_ops__constant_of_shape_run(rt_op_ctx *ctx) {
    const_args args;
    RT_RETURN_IF_ERROR(constant_of_shape_setup(ctx, &args));
    rt_mv__fill(args.out->data, args.value->data, rt_tensor__numel(args.out),
                args.out->elem_size);
    return RT_OK;
}

/* ---- range ------------------------------------------------------------------------------ */

typedef struct range_args {
    rt_tensor_value *start, *limit, *delta, *out;
} range_args;

#define RANGE_TYPES (RT_TYPES_NUMERIC)

/* range(start, limit, delta, out): one-element tensors of out's dtype; out is 1-D, usually
 * dynamic: its length max(ceil((limit - start) / delta), 0) is known only at run. */
static rt_status range_setup(rt_op_ctx *ctx, range_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "start", &args->start));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "limit", &args->limit));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "delta", &args->delta));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &args->out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->out, "out", RANGE_TYPES,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->out, "out", 1));
    rt_tensor_value *params[3] = {args->start, args->limit, args->delta};
    static const char *const names[3] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; i++) {
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, params[i], names[i], args->out, "out"));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", params[i], names[i]));
        if (rt_tensor__numel(params[i]) != 1)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s must hold exactly one element",
                               names[i]);
    }
    return RT_OK;
}

rt_status rt_ops__range_prepare(rt_op_ctx *ctx) {
    range_args args;
    RT_RETURN_IF_ERROR(range_setup(ctx, &args));
    return rt_mv__plan_at_bounds(ctx, args.out, "out");
}

/* Length of an integer range; the values are taken as signed or unsigned 64-bit. */
static int64_t range_count_int(uint64_t start, uint64_t limit, uint64_t delta, bool is_signed) {
    bool up = is_signed ? (int64_t)delta > 0 : true;
    bool ahead = is_signed ? (int64_t)limit > (int64_t)start : limit > start;
    bool behind = is_signed ? (int64_t)limit < (int64_t)start : false;
    uint64_t count = 0;
    if (up && ahead)
        count = (limit - start - 1) / delta + 1;
    else if (!up && behind)
        count = (start - limit - 1) / ((uint64_t)0 - delta) + 1;
    return count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)count; /* then beyond any bound */
}

#define RANGE_INT(T, SIGNED)                                                             \
    do {                                                                                 \
        T s = *(const T *)args.start->data, l = *(const T *)args.limit->data;            \
        T dl = *(const T *)args.delta->data;                                             \
        if (dl == 0)                                                                     \
            return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "delta is 0");                   \
        count = range_count_int((uint64_t)(SIGNED ? (uint64_t)(int64_t)s : (uint64_t)s), \
                                (uint64_t)(SIGNED ? (uint64_t)(int64_t)l : (uint64_t)l), \
                                (uint64_t)(SIGNED ? (uint64_t)(int64_t)dl : (uint64_t)dl), \
                                SIGNED);                                                 \
        RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, args.out, "out", 1, &count));      \
        T *o = args.out->data;                                                           \
        uint64_t v = (uint64_t)s;                                                        \
        for (int64_t i = 0; i < count; i++, v += (uint64_t)dl)                           \
            o[i] = (T)v;                                                                 \
    } while (0)

#define RANGE_FLOAT(T)                                                                   \
    do {                                                                                 \
        double s = *(const T *)args.start->data, l = *(const T *)args.limit->data;       \
        double dl = *(const T *)args.delta->data;                                        \
        if (dl == 0)                                                                     \
            return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "delta is 0");                   \
        double n = ceil((l - s) / dl);                                                   \
        if (!(n <= (double)args.out->bounds[0]))                                         \
            n = n > 0 ? (double)args.out->bounds[0] + 1 : 0; /* NaN: 0 */               \
        count = n > 0 ? (int64_t)n : 0;                                                  \
        RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, args.out, "out", 1, &count));      \
        T *o = args.out->data;                                                           \
        for (int64_t i = 0; i < count; i++)                                              \
            o[i] = (T)(s + (double)i * dl);                                              \
    } while (0)

rt_status rt_ops__range_run(rt_op_ctx *ctx) {
    range_args args;
    RT_RETURN_IF_ERROR(range_setup(ctx, &args));
    int64_t count = 0;
    switch (args.out->type) {
    case RT_F32: RANGE_FLOAT(float); break;
    case RT_F64: RANGE_FLOAT(double); break;
    case RT_I8: RANGE_INT(int8_t, true); break;
    case RT_I16: RANGE_INT(int16_t, true); break;
    case RT_I32: RANGE_INT(int32_t, true); break;
    case RT_I64: RANGE_INT(int64_t, true); break;
    case RT_U8: RANGE_INT(uint8_t, false); break;
    case RT_U16: RANGE_INT(uint16_t, false); break;
    case RT_U32: RANGE_INT(uint32_t, false); break;
    case RT_U64: RANGE_INT(uint64_t, false); break;
    default:
        return rt_op__fail(ctx, RT_INTERNAL, "no range kernel for dtype %s",
                           rt_tensor__type_name(args.out->type));
    }
    return RT_OK;
}
