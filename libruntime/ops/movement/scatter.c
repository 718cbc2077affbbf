/* scatter.c: scatter_elements and scatter_nd (ONNX ScatterElements, Scatter, ScatterND).
 *
 * out starts as a copy of data (out may be data itself), then every update is combined into
 * the element its index names: replaced (reduction none, any dtype) or combined with add,
 * mul, max or min (float and integer types; integers wrap around). Updates are applied in
 * index order, so with reduction none the last duplicate wins. Every index is checked before
 * anything is written. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

typedef enum scatter_reduction {
    REDUCE_NONE = 0,
    REDUCE_ADD,
    REDUCE_MUL,
    REDUCE_MAX,
    REDUCE_MIN,
    REDUCE_COUNT
} scatter_reduction;

/* dst[i] = dst[i] <op> src[i] for i in [0, n). */
typedef void (*apply_fn)(void *dst, const void *src, int64_t n);

/* W: the type the arithmetic runs in (uint64_t for integers: wrap-around, no overflow UB). */
#define DEFINE_APPLY(sfx, T, W)                                                \
    static void add__##sfx(void *dst, const void *src, int64_t n) {           \
        T *d = dst;                                                            \
        const T *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = (T)((W)d[i] + (W)s[i]);                                     \
    }                                                                          \
    static void mul__##sfx(void *dst, const void *src, int64_t n) {           \
        T *d = dst;                                                            \
        const T *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = (T)((W)d[i] * (W)s[i]);                                     \
    }                                                                          \
    /* NaN wins both comparisons, as numpy's maximum and minimum. */           \
    static void max__##sfx(void *dst, const void *src, int64_t n) {           \
        T *d = dst;                                                            \
        const T *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = (s[i] > d[i] || s[i] != s[i]) ? s[i] : d[i];                \
    }                                                                          \
    static void min__##sfx(void *dst, const void *src, int64_t n) {           \
        T *d = dst;                                                            \
        const T *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = (s[i] < d[i] || s[i] != s[i]) ? s[i] : d[i];                \
    }
DEFINE_APPLY(f32, float, float)
DEFINE_APPLY(f64, double, double)
DEFINE_APPLY(i8, int8_t, uint64_t)
DEFINE_APPLY(i16, int16_t, uint64_t)
DEFINE_APPLY(i32, int32_t, uint64_t)
DEFINE_APPLY(i64, int64_t, uint64_t)
DEFINE_APPLY(u8, uint8_t, uint64_t)
DEFINE_APPLY(u16, uint16_t, uint64_t)
DEFINE_APPLY(u32, uint32_t, uint64_t)
DEFINE_APPLY(u64, uint64_t, uint64_t)

#define APPLY_ROW(sfx) {add__##sfx, mul__##sfx, max__##sfx, min__##sfx}

static apply_fn apply_for(rt_type type, scatter_reduction reduction) {
    static const apply_fn table[][4] = {
        [RT_F32] = APPLY_ROW(f32), [RT_F64] = APPLY_ROW(f64), [RT_I8] = APPLY_ROW(i8),
        [RT_I16] = APPLY_ROW(i16), [RT_I32] = APPLY_ROW(i32), [RT_I64] = APPLY_ROW(i64),
        [RT_U8] = APPLY_ROW(u8),   [RT_U16] = APPLY_ROW(u16), [RT_U32] = APPLY_ROW(u32),
        [RT_U64] = APPLY_ROW(u64),
    };
    if (reduction <= REDUCE_NONE || reduction >= REDUCE_COUNT || type < 0 ||
        type >= (rt_type)(sizeof table / sizeof table[0]))
        return NULL;
    return table[type][reduction - 1];
}

typedef struct scatter_args {
    rt_tensor_value *data, *indices, *updates, *out;
    scatter_reduction reduction;
    apply_fn apply; /* NULL for reduction none */
} scatter_args;

/* Arguments 0-2 (data, indices, updates), the reduction at `reduction_index` and out last. */
static rt_status scatter_common(rt_op_ctx *ctx, size_t reduction_index, scatter_args *args) {
    int64_t reduction;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "data", &args->data));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "indices", &args->indices));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "updates", &args->updates));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, reduction_index, "reduction", &reduction));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, reduction_index + 1, "out", &args->out));
    rt_tensor_value *data = args->data, *out = args->out;
    if (reduction < REDUCE_NONE || reduction >= REDUCE_COUNT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "reduction %" PRId64 " must be 0 (none), "
                           "1 (add), 2 (mul), 3 (max) or 4 (min)", reduction);
    args->reduction = (scatter_reduction)reduction;
    if (args->reduction == REDUCE_NONE) {
        RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, data, "data", RT_TYPES_ALL, "any dtype"));
        args->apply = NULL;
    } else {
        RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, data, "data", RT_TYPES_NUMERIC,
                                                "float32, float64 and the integer types with "
                                                "a reduction"));
        args->apply = apply_for(data->type, args->reduction);
        if (!args->apply)
            return rt_op__fail(ctx, RT_INTERNAL, "no scatter kernel for dtype %s",
                               rt_tensor__type_name(data->type));
    }
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, data, "data", out));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->updates, "updates", data, "data"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->updates, "updates"));
    RT_RETURN_IF_ERROR(rt_mv__check_index_tensor(ctx, args->indices, "indices", out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->updates, "updates"));
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, data->sizes, sizeof sizes);
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", data, "data", data->rank,
                                                sizes));
    return rt_op__set_output_sizes(ctx, out, "out", data->rank, sizes);
}

static rt_status index_out_of_range(rt_op_ctx *ctx, const rt_tensor_value *indices,
                                    int64_t flat, int64_t value, int64_t limit, int32_t dim) {
    char pos[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, RT_INVALID_ARGUMENT,
                       "indices%s is %" PRId64 ", out of range for dimension %" PRId32
                       " of data, of size %" PRId64 " (valid: %" PRId64 " to %" PRId64 ")",
                       rt_mv__position_text(flat, indices->rank, indices->sizes, pos), value, dim,
                       limit, -limit, limit - 1);
}

/* out = data, unless out is data's own storage. */
static void copy_data(const scatter_args *args) {
    size_t nbytes = rt_tensor__nbytes(args->data);
    if (nbytes > 0 && args->out->data != args->data->data)
        memmove(args->out->data, args->data->data, nbytes);
}

static void apply_one(const scatter_args *args, int64_t out_offset, int64_t update_offset,
                      int64_t n) {
    size_t elem = args->out->elem_size;
    char *dst = (char *)args->out->data + (size_t)out_offset * elem;
    const char *src = (const char *)args->updates->data + (size_t)update_offset * elem;
    if (args->apply)
        args->apply(dst, src, n);
    else
        memcpy(dst, src, (size_t)n * elem);
}

/* ---- scatter_elements ------------------------------------------------------------------- */

/* scatter_elements(data, indices, updates, axis: int, reduction: int, out) */
static rt_status scatter_elements_setup(rt_op_ctx *ctx, scatter_args *args, int32_t *axis) {
    int64_t axis_arg;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 6));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(scatter_common(ctx, 4, args));
    const rt_tensor_value *data = args->data, *indices = args->indices;
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, data->rank, "axis", axis));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, indices, "indices", data->rank));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->updates, "updates", data->rank));
    char ti[RT_OP_SHAPE_TEXT], tu[RT_OP_SHAPE_TEXT], td[RT_OP_SHAPE_TEXT];
    for (int32_t d = 0; d < data->rank; d++) {
        if (args->updates->sizes[d] != indices->sizes[d])
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "updates %s and indices %s must have the same shape",
                               rt_op__shape_text(args->updates->sizes, data->rank, tu),
                               rt_op__shape_text(indices->sizes, data->rank, ti));
        if (d != *axis && indices->sizes[d] > data->sizes[d])
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "indices %s is larger than data %s in dimension %" PRId32
                               " (only the axis may be larger)",
                               rt_op__shape_text(indices->sizes, data->rank, ti),
                               rt_op__shape_text(data->sizes, data->rank, td), d);
    }
    return RT_OK;
}

rt_status rt_ops__scatter_elements_prepare(rt_op_ctx *ctx) {
    scatter_args args;
    int32_t axis;
    return scatter_elements_setup(ctx, &args, &axis);
}

rt_status rt_ops__scatter_elements_run(rt_op_ctx *ctx) {
    scatter_args args;
    int32_t axis;
    RT_RETURN_IF_ERROR(scatter_elements_setup(ctx, &args, &axis));
    const rt_tensor_value *indices = args.indices, *out = args.out;
    int64_t count = rt_tensor__numel(indices), dim = out->sizes[axis];
    for (int64_t i = 0; i < count; i++) {
        int64_t v = rt_mv__index_at(indices, i);
        if (v < -dim || v >= dim)
            return index_out_of_range(ctx, indices, i, v, dim, axis);
    }
    copy_data(&args);
    int64_t strides[RT_MAX_RANK];
    rt_tensor__dense_strides(strides, out->rank, out->sizes, NULL);
    /* Sequential: updates to one element must be combined in order. */
    for (int64_t i = 0; i < count; i++) {
        int64_t rest = i, offset = 0;
        for (int32_t d = out->rank - 1; d >= 0; d--) {
            int64_t at = rest % indices->sizes[d];
            rest /= indices->sizes[d];
            if (d == axis) {
                at = rt_mv__index_at(indices, i);
                at = at < 0 ? at + dim : at;
            }
            offset += at * strides[d];
        }
        apply_one(&args, offset, i, 1);
    }
    return RT_OK;
}

/* ---- scatter_nd ------------------------------------------------------------------------- */

/* scatter_nd(data, indices, updates, reduction: int, out): indices [..., k] names slices
 * data[i_0, ..., i_{k-1}]; updates has shape indices.shape[:-1] + data.shape[k:]. */
static rt_status scatter_nd_setup(rt_op_ctx *ctx, scatter_args *args, int32_t *k_out) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(scatter_common(ctx, 3, args));
    const rt_tensor_value *data = args->data, *indices = args->indices, *updates = args->updates;
    int32_t q = indices->rank, r = data->rank;
    if (q < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "indices needs rank >= 1");
    int64_t k = indices->sizes[q - 1];
    if (k > r)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "indices has %" PRId64 " items per "
                           "index, but data has rank %" PRId32, k, r);
    if (q - 1 + r - k > RT_MAX_RANK)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "updates would need rank %" PRId64
                           "; the most is %d", q - 1 + r - k, RT_MAX_RANK);
    int64_t expected[RT_MAX_RANK];
    int32_t n = 0;
    for (int32_t d = 0; d < q - 1; d++)
        expected[n++] = indices->sizes[d];
    for (int32_t d = (int32_t)k; d < r; d++)
        expected[n++] = data->sizes[d];
    bool same = updates->rank == n;
    for (int32_t d = 0; same && d < n; d++)
        same = updates->sizes[d] == expected[d];
    if (!same) {
        char tu[RT_OP_SHAPE_TEXT], te[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "updates has shape %s, but indices and data need %s",
                           rt_op__shape_text(updates->sizes, updates->rank, tu),
                           rt_op__shape_text(expected, n, te));
    }
    *k_out = (int32_t)k;
    return RT_OK;
}

rt_status rt_ops__scatter_nd_prepare(rt_op_ctx *ctx) {
    scatter_args args;
    int32_t k;
    return scatter_nd_setup(ctx, &args, &k);
}

rt_status rt_ops__scatter_nd_run(rt_op_ctx *ctx) {
    scatter_args args;
    int32_t k;
    RT_RETURN_IF_ERROR(scatter_nd_setup(ctx, &args, &k));
    const rt_tensor_value *indices = args.indices, *out = args.out;
    int64_t count = rt_tensor__numel(indices);
    for (int64_t i = 0; i < count; i++) {
        int32_t j = (int32_t)(i % k);
        int64_t v = rt_mv__index_at(indices, i), dim = out->sizes[j];
        if (v < -dim || v >= dim)
            return index_out_of_range(ctx, indices, i, v, dim, j);
    }
    copy_data(&args);
    int64_t strides[RT_MAX_RANK], slice = 1;
    rt_tensor__dense_strides(strides, out->rank, out->sizes, NULL);
    for (int32_t d = k; d < out->rank; d++)
        slice *= out->sizes[d];
    int64_t tuples = k > 0 ? count / k : rt_tensor__numel(args.updates) / (slice ? slice : 1);
    if (slice == 0)
        return RT_OK;
    for (int64_t t = 0; t < tuples; t++) {
        int64_t offset = 0;
        for (int32_t j = 0; j < k; j++) {
            int64_t v = rt_mv__index_at(indices, t * k + j);
            offset += (v < 0 ? v + out->sizes[j] : v) * strides[j];
        }
        apply_one(&args, offset, t * slice, slice);
    }
    return RT_OK;
}
