/* op_util.c: argument access, checks and error messages shared by every op (ops/op.h), and
 * the kernel helpers of ops/op_util.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "ops/op.h"
#include "ops/op_util.h"

/* ---- errors ----------------------------------------------------------------------------- */

static rt_status set_error(rt_status code, const char *fmt, ...) RT_PRINTF(2, 3);

static rt_status set_error(rt_status code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    rt_status status = rt_error__vset(code, fmt, args);
    va_end(args);
    return status;
}

rt_status rt_op__fail(rt_op_ctx *ctx, rt_status code, const char *fmt, ...) {
    /* Kernel messages are one short sentence with at most a few shapes; longer ones are cut. */
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    const char *method = ctx && ctx->method_name ? ctx->method_name : "?";
    const char *op = ctx && ctx->op_name ? ctx->op_name : "?";
    uint32_t instruction = ctx ? ctx->instruction : 0;
    return set_error(code, "method '%s': instruction %" PRIu32 " (%s): %s", method, instruction,
                     op, message);
}

const char *rt_op__item_name(char buf[RT_OP_ITEM_NAME], const char *prefix, size_t i,
                             const char *suffix) {
    char digits[24];
    size_t n = 0, used = 0;
    do
        digits[n++] = (char)('0' + i % 10);
    while ((i /= 10) > 0);
    for (; *prefix && used < RT_OP_ITEM_NAME - 1; prefix++)
        buf[used++] = *prefix;
    while (n > 0 && used < RT_OP_ITEM_NAME - 1)
        buf[used++] = digits[--n];
    for (; *suffix && used < RT_OP_ITEM_NAME - 1; suffix++)
        buf[used++] = *suffix;
    buf[used] = '\0';
    return buf;
}

const char *rt_op__shape_text(const int64_t *sizes, int32_t rank, char buf[RT_OP_SHAPE_TEXT]) {
    size_t used = 0;
    buf[used++] = '[';
    for (int32_t i = 0; i < rank && i < RT_MAX_RANK; i++) {
        int n = snprintf(buf + used, RT_OP_SHAPE_TEXT - used, "%s%" PRId64, i ? ", " : "",
                         sizes[i]);
        if (n < 0 || (size_t)n >= RT_OP_SHAPE_TEXT - used - 1)
            break; /* cannot happen for RT_MAX_RANK sizes; stop rather than overrun */
        used += (size_t)n;
    }
    buf[used++] = ']';
    buf[used] = '\0';
    return buf;
}

static const char *type_name(const rt_tensor_value *t) {
    const char *name = rt_tensor__type_name(t->type);
    return name ? name : "unknown";
}

/* ---- arguments -------------------------------------------------------------------------- */

rt_status rt_op__expect_nargs(rt_op_ctx *ctx, size_t n) {
    if (ctx->nargs != n)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "expects %zu arguments, but the instruction has %zu", n, ctx->nargs);
    return RT_OK;
}

/* The value of argument i, or a failure naming it when the instruction has no such argument. */
static rt_status arg_value(rt_op_ctx *ctx, size_t i, const char *what, rt_value **out) {
    if (i >= ctx->nargs || !ctx->args || !ctx->args[i])
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "argument %zu (%s) is missing: the instruction has %zu arguments", i,
                           what, ctx->nargs);
    *out = ctx->args[i];
    return RT_OK;
}

static rt_status wrong_kind(rt_op_ctx *ctx, size_t i, const char *what, const char *expected,
                            const rt_value *v) {
    return rt_op__fail(ctx, RT_INVALID_PROGRAM, "argument %zu (%s) must be %s, not %s", i,
                       what, expected, rt_value__kind_name(v->kind));
}

rt_status rt_op__tensor(rt_op_ctx *ctx, size_t i, const char *what, rt_tensor_value **out) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind != RT_VALUE_TENSOR || !v->u.t)
        return wrong_kind(ctx, i, what, "a tensor", v);
    *out = v->u.t;
    return RT_OK;
}

rt_status rt_op__optional_tensor(rt_op_ctx *ctx, size_t i, const char *what,
                                 rt_tensor_value **out) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind == RT_VALUE_NONE) {
        *out = NULL;
        return RT_OK;
    }
    if (v->kind != RT_VALUE_TENSOR || !v->u.t)
        return wrong_kind(ctx, i, what, "a tensor or none", v);
    *out = v->u.t;
    return RT_OK;
}

rt_status rt_op__int(rt_op_ctx *ctx, size_t i, const char *what, int64_t *out) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind != RT_VALUE_INT)
        return wrong_kind(ctx, i, what, "an int", v);
    *out = v->u.i;
    return RT_OK;
}

/* An int is accepted where a double is expected: builders write 1 for 1.0. */
rt_status rt_op__double(rt_op_ctx *ctx, size_t i, const char *what, double *out) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind == RT_VALUE_DOUBLE)
        *out = v->u.d;
    else if (v->kind == RT_VALUE_INT)
        *out = (double)v->u.i;
    else
        return wrong_kind(ctx, i, what, "a double", v);
    return RT_OK;
}

/* An int of 0 or 1 is accepted where a bool is expected (Python's bool is an int). */
rt_status rt_op__bool(rt_op_ctx *ctx, size_t i, const char *what, bool *out) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind == RT_VALUE_BOOL)
        *out = v->u.b;
    else if (v->kind == RT_VALUE_INT && (v->u.i == 0 || v->u.i == 1))
        *out = v->u.i == 1;
    else
        return wrong_kind(ctx, i, what, "a bool", v);
    return RT_OK;
}

rt_status rt_op__int_list(rt_op_ctx *ctx, size_t i, const char *what, const int64_t **items,
                          size_t *count) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind != RT_VALUE_INT_LIST || (v->u.ints.count > 0 && !v->u.ints.items))
        return wrong_kind(ctx, i, what, "an int list", v);
    *items = v->u.ints.items;
    *count = v->u.ints.count;
    return RT_OK;
}

rt_status rt_op__double_list(rt_op_ctx *ctx, size_t i, const char *what, const double **items,
                             size_t *count) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind == RT_VALUE_INT_LIST && v->u.ints.count == 0) { /* [] written as ints */
        *items = NULL;
        *count = 0;
        return RT_OK;
    }
    if (v->kind != RT_VALUE_DOUBLE_LIST || (v->u.doubles.count > 0 && !v->u.doubles.items))
        return wrong_kind(ctx, i, what, "a double list", v);
    *items = v->u.doubles.items;
    *count = v->u.doubles.count;
    return RT_OK;
}

rt_status rt_op__tensor_list(rt_op_ctx *ctx, size_t i, const char *what,
                             rt_tensor_value ***items, size_t *count) {
    rt_value *v = NULL;
    RT_RETURN_IF_ERROR(arg_value(ctx, i, what, &v));
    if (v->kind != RT_VALUE_TENSOR_LIST || (v->u.tensors.count > 0 && !v->u.tensors.items))
        return wrong_kind(ctx, i, what, "a tensor list", v);
    for (size_t k = 0; k < v->u.tensors.count; k++)
        if (!v->u.tensors.items[k])
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "argument %zu (%s): item %zu is not a tensor", i, what, k);
    *items = v->u.tensors.items;
    *count = v->u.tensors.count;
    return RT_OK;
}

/* ---- checks ----------------------------------------------------------------------------- */

/* Dtype, rank, layout and writability are fixed by the program, so these checks run in prepare
 * only: execute does no type checking. Shapes are re-checked at run (dynamic sizes). */

rt_status rt_op__check_type(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                            rt_type type) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    if (t->type != type) {
        const char *expected = rt_tensor__type_name(type);
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s has dtype %s, but must be %s", what,
                           type_name(t), expected ? expected : "unknown");
    }
    return RT_OK;
}

rt_status rt_op__check_same_type(rt_op_ctx *ctx, const rt_tensor_value *a, const char *what_a,
                                 const rt_tensor_value *b, const char *what_b) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    if (a->type != b->type)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s has dtype %s, but %s has dtype %s; they must match", what_a,
                           type_name(a), what_b, type_name(b));
    return RT_OK;
}

rt_status rt_op__check_rank(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                            int32_t rank) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    if (t->rank != rank)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s has rank %" PRId32 ", but must have rank %" PRId32, what, t->rank,
                           rank);
    return RT_OK;
}

rt_status rt_op__check_type_in(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                               uint32_t types, const char *expected) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    bool known = t->type >= 0 && t->type < RT_TYPE_COUNT;
    if (!known || !(types & RT_TYPE_BIT(t->type)))
        return rt_op__fail(ctx, RT_UNSUPPORTED, "%s has dtype %s; this op supports %s", what,
                           type_name(t), expected);
    return RT_OK;
}

rt_status rt_op__check_float(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    return rt_op__check_type_in(ctx, t, what, RT_TYPES_FLOAT, "float32 and float64");
}

rt_status rt_op__check_writable(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    if (!t->writable)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s is read-only (a constant) and cannot be written", what);
    return RT_OK;
}

rt_status rt_op__check_default_layout(rt_op_ctx *ctx, const rt_tensor_value *t,
                                      const char *what) {
    if (!ctx->preparing)
        return RT_OK; /* verified at load; dtypes and ranks cannot change */
    if (!rt_tensor__default_dim_order(t))
        return rt_op__fail(ctx, RT_UNSUPPORTED,
                           "%s has a non-default dim order; this op needs row-major tensors", what);
    return RT_OK;
}

rt_status rt_op__axis(rt_op_ctx *ctx, int64_t axis, int32_t rank, const char *what,
                      int32_t *out) {
    if (rank <= 0)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s %" PRId64 " needs a tensor of rank >= 1, not rank 0",
                           what, axis);
    if (axis < -(int64_t)rank || axis >= (int64_t)rank)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s %" PRId64 " is out of range for rank %" PRId32 " (valid: %" PRId32
                           " to %" PRId32 ")",
                           what, axis, rank, -rank, rank - 1);
    *out = (int32_t)(axis < 0 ? axis + rank : axis);
    return RT_OK;
}

/* ---- shapes ----------------------------------------------------------------------------- */

rt_status rt_op__set_output_sizes(rt_op_ctx *ctx, rt_tensor_value *out, const char *what,
                                  int32_t rank, const int64_t *sizes) {
    char have[RT_OP_SHAPE_TEXT], want[RT_OP_SHAPE_TEXT];
    if (rank != out->rank || rank < 0 || rank > RT_MAX_RANK)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s has rank %" PRId32 ", but the result has rank %" PRId32, what,
                           out->rank, rank);
    for (int32_t i = 0; i < rank; i++) {
        bool fits = out->dynamic ? sizes[i] >= 0 && sizes[i] <= out->bounds[i]
                                 : sizes[i] == out->bounds[i];
        if (fits)
            continue;
        rt_op__shape_text(sizes, rank, have);
        rt_op__shape_text(out->bounds, rank, want);
        if (out->dynamic)
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "the result has shape %s, beyond the bounds %s planned for %s", have,
                               want, what);
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the result has shape %s, but %s is planned with shape %s", have, what,
                           want);
    }
    memmove(out->sizes, sizes, (size_t)rank * sizeof *sizes); /* sizes may be out->sizes */
    rt_tensor__update_strides(out);
    if (ctx->preparing)
        out->written = true; /* set_input must then never bind the caller's memory to it */
    return RT_OK;
}

rt_status rt_op__broadcast_shape(rt_op_ctx *ctx, const rt_tensor_value *a,
                                 const rt_tensor_value *b, int32_t *out_rank, int64_t *out_sizes) {
    int32_t rank = a->rank > b->rank ? a->rank : b->rank;
    for (int32_t i = 0; i < rank; i++) {
        /* Align trailing dimensions; a missing leading dimension acts as size 1. */
        int32_t ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        int64_t sa = ia >= 0 ? a->sizes[ia] : 1;
        int64_t sb = ib >= 0 ? b->sizes[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char ta[RT_OP_SHAPE_TEXT], tb[RT_OP_SHAPE_TEXT];
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "a %s and b %s cannot be broadcast together (dimension %" PRId32
                               ": %" PRId64 " vs %" PRId64 ")",
                               rt_op__shape_text(a->sizes, a->rank, ta),
                               rt_op__shape_text(b->sizes, b->rank, tb), i - rank, sa, sb);
        }
        out_sizes[i] = sa == 1 ? sb : sa;
    }
    *out_rank = rank;
    return RT_OK;
}

/* ---- window parameters ------------------------------------------------------------------ */

rt_status rt_op__int_pair(rt_op_ctx *ctx, size_t index, const char *what, int64_t min_value,
                          int64_t out[2]) {
    const int64_t *items = NULL;
    size_t count = 0;
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, index, what, &items, &count));
    if (count != 2)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s must have 2 items (height, width), not %zu",
                           what, count);
    for (size_t i = 0; i < 2; i++) {
        if (items[i] < min_value || items[i] > RT_OP_MAX_WINDOW_PARAM)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "%s [%" PRId64 ", %" PRId64 "] must be in [%" PRId64
                               ", %" PRId64 "]", what, items[0], items[1], min_value,
                               (int64_t)RT_OP_MAX_WINDOW_PARAM);
        out[i] = items[i];
    }
    return RT_OK;
}

rt_status rt_op__padding(rt_op_ctx *ctx, size_t index, const char *what, int64_t out[4]) {
    const int64_t *items = NULL;
    size_t count = 0;
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, index, what, &items, &count));
    if (count != 2 && count != 4)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s must have 2 items (height, width) or 4 (top, left, bottom, "
                           "right), not %zu",
                           what, count);
    for (size_t i = 0; i < count; i++)
        if (items[i] < 0 || items[i] > RT_OP_MAX_WINDOW_PARAM)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                               "%s item %zu is %" PRId64 "; it must be in [0, %" PRId64 "]",
                               what, i, items[i], (int64_t)RT_OP_MAX_WINDOW_PARAM);
    out[0] = items[0];
    out[1] = items[1];
    out[2] = count == 4 ? items[2] : items[0];
    out[3] = count == 4 ? items[3] : items[1];
    return RT_OK;
}

rt_status rt_op__window_output(rt_op_ctx *ctx, const char *what, int64_t size,
                               int64_t pad_before, int64_t pad_after, int64_t kernel,
                               int64_t stride, int64_t dilation, bool ceil_mode, int64_t *out) {
    int64_t extent, padded;
    bool ok = rt_op__mul(dilation, kernel - 1, &extent) && rt_op__add(extent, 1, &extent) &&
              rt_op__add(size, pad_before, &padded) && rt_op__add(padded, pad_after, &padded);
    if (!ok)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the %s of the window or of the padded input overflows int64", what);
    int64_t span = padded - extent; /* no overflow: both are >= 0 */
    if (ceil_mode) {
        if (span > INT64_MAX - (stride - 1))
            return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output %s overflows int64", what);
        span += stride - 1;
    }
    int64_t length = rt_op__floor_div(span, stride) + 1;
    /* PyTorch: in ceil mode a last window starting in the trailing padding is dropped. */
    if (ceil_mode && length > 0 && (length - 1) * stride >= size + pad_before)
        length--;
    if (length < 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the input %s %" PRId64 " (padded: %" PRId64
                           ") is too small for a window spanning %" PRId64,
                           what, size, padded, extent);
    *out = length;
    return RT_OK;
}

/* ---- aliasing --------------------------------------------------------------------------- */

static bool ranges_overlap(const void *p, size_t np, const void *q, size_t nq) {
    if (!p || !q || np == 0 || nq == 0)
        return false;
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + nq && b < a + np;
}

/* Bytes at the planned bounds: what the home storage holds. */
static size_t bound_bytes(const rt_tensor_value *t) {
    int64_t n;
    if (!rt_tensor__checked_numel(t->bounds, t->rank, &n) || !rt_op__mul(n, t->elem_size, &n))
        return SIZE_MAX; /* cannot be planned; treat it as overlapping everything */
    return (size_t)n;
}

/* Home storage (planned) or current data overlapping, at either's extent. */
static bool shares_memory(const rt_tensor_value *a, const rt_tensor_value *b) {
    return a == b || ranges_overlap(a->home, bound_bytes(a), b->home, bound_bytes(b)) ||
           ranges_overlap(a->data, rt_tensor__nbytes(a), b->data, rt_tensor__nbytes(b));
}

rt_status rt_op__check_disjoint(rt_op_ctx *ctx, const rt_tensor_value *out,
                                const char *what_out, const rt_tensor_value *in,
                                const char *what_in) {
    if (shares_memory(out, in))
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s shares memory with the input %s; this op cannot work in place",
                           what_out, what_in);
    return RT_OK;
}

rt_status rt_op__check_outputs(rt_op_ctx *ctx, rt_tensor_value *const *outs,
                               const char *const *names, size_t count,
                               const rt_tensor_value *x, const char *what_x) {
    for (size_t i = 0; i < count; i++) {
        RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, outs[i], names[i]));
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, outs[i], names[i]));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, outs[i], names[i], x, what_x));
        for (size_t j = 0; j < i; j++)
            RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, outs[i], names[i], outs[j], names[j]));
    }
    return RT_OK;
}

/* Where the contents are: the bound data, or the home storage before anything is bound. */
static const void *storage(const rt_tensor_value *t) {
    return t->data ? t->data : t->home;
}

rt_status rt_op__check_in_place_ok(rt_op_ctx *ctx, const rt_tensor_value *out,
                                   const char *what_out, const rt_tensor_value *in,
                                   const char *what_in, int32_t rank, const int64_t *sizes) {
    int64_t numel;
    if (!rt_tensor__checked_numel(sizes, rank, &numel) ||
        !rt_op__mul(numel, out->elem_size, &numel))
        numel = INT64_MAX;
    bool same_start = out == in || (storage(out) && storage(out) == storage(in));
    bool overlap = same_start || ranges_overlap(storage(out), (size_t)numel, storage(in),
                                                rt_tensor__nbytes(in));
    if (!overlap)
        return RT_OK;
    /* Element i is read before element i is written, and no other element is involved. */
    bool exact = same_start && out->elem_size == in->elem_size && in->rank == rank &&
                 memcmp(in->sizes, sizes, (size_t)rank * sizeof *sizes) == 0;
    if (!exact)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s shares memory with %s without holding the same elements (in place "
                           "needs the result's shape and element size)",
                           what_out, what_in);
    return RT_OK;
}

rt_status rt_op__activation(rt_op_ctx *ctx, size_t index, rt_activation *out) {
    int64_t kind = 0;
    double lo = 0.0, hi = 0.0;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, index, "activation", &kind));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, index + 1, "activation lo", &lo));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, index + 2, "activation hi", &hi));
    if (kind < 0 || kind >= RT_ACT_COUNT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "unknown fused activation %" PRId64, kind);
    if (kind == RT_ACT_CLIP && !(lo <= hi))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "clip bounds [%g, %g] are empty or NaN", lo,
                           hi);
    *out = (rt_activation){(int32_t)kind, (float)lo, (float)hi};
    return RT_OK;
}

rt_status rt_op__check_conv_tensors(rt_op_ctx *ctx, const rt_tensor_value *x,
                                    const rt_tensor_value *w, const rt_tensor_value *bias,
                                    const rt_tensor_value *out) {
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, w, "w", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, x, "x", 4));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, w, "w", 4));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, w, "w"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", w, "w"));
    if (!bias)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, bias, "bias", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, bias, "bias", 1));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, bias, "bias"));
    return rt_op__check_disjoint(ctx, out, "out", bias, "bias");
}

rt_status rt_op__check_conv_groups(rt_op_ctx *ctx, const rt_tensor_value *x,
                                   const rt_tensor_value *w, int64_t groups) {
    /* The shapes are formatted only for a message: this runs on every call. */
    char tx[RT_OP_SHAPE_TEXT], tw[RT_OP_SHAPE_TEXT];
    int64_t channels = x->sizes[1], out_channels = w->sizes[0];
    if (channels % groups != 0 || out_channels % groups != 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "groups %" PRId64 " must divide the input channels of x %s and the "
                           "output channels of w %s",
                           groups, rt_op__shape_text(x->sizes, 4, tx),
                           rt_op__shape_text(w->sizes, 4, tw));
    if (w->sizes[1] != channels / groups)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "w %s must have %" PRId64 " input channels per group for x %s and "
                           "groups %" PRId64,
                           rt_op__shape_text(w->sizes, 4, tw), channels / groups,
                           rt_op__shape_text(x->sizes, 4, tx), groups);
    if (w->sizes[2] < 1 || w->sizes[3] < 1)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "w %s has an empty kernel",
                           rt_op__shape_text(w->sizes, 4, tw));
    return RT_OK;
}

void *rt_op__alloc_state(rt_op_ctx *ctx, size_t bytes) {
    if (!ctx->preparing || ctx->state != NULL || bytes == 0 || bytes > ctx->state_budget)
        return NULL;
    void *state = rt_alloc__aligned(bytes);
    if (state == NULL)
        return NULL;
    ctx->state = state;
    ctx->free_state = rt_alloc__free;
    ctx->state_budget -= bytes;
    return state;
}

void rt_op__free_state(rt_op_ctx *ctx, size_t bytes) {
    if (ctx->state == NULL)
        return;
    ctx->free_state(ctx->state);
    ctx->state = NULL;
    ctx->free_state = NULL;
    ctx->state_budget += bytes;
}
