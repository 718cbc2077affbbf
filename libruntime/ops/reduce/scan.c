/* scan.c: cumsum and topk along one axis.
 *
 * Both view x as [outer, n, inner] with the op running along n. cumsum may run in place (out
 * the same tensor as x); topk needs outputs apart from x. cumsum's axis and topk's k are an
 * int or a one-element integer tensor read at each execute (ops/int_param.h). */
#include <inttypes.h>
#include <string.h>

#include "ops/int_param.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define BLOCK 64

/* suffix, C type, accumulator (cumsum), is-NaN test */
#define FLOAT_NAN(v) ((v) != (v))
#define NO_NAN(v) 0
#define SCAN_TYPES(X)                                                     \
    X(f32, float, double, FLOAT_NAN) X(f64, double, double, FLOAT_NAN)    \
    X(i8, int8_t, uint64_t, NO_NAN) X(i16, int16_t, uint64_t, NO_NAN)     \
    X(i32, int32_t, uint64_t, NO_NAN) X(i64, int64_t, uint64_t, NO_NAN)   \
    X(u8, uint8_t, uint64_t, NO_NAN) X(u16, uint16_t, uint64_t, NO_NAN)   \
    X(u32, uint32_t, uint64_t, NO_NAN) X(u64, uint64_t, uint64_t, NO_NAN)

typedef void (*scan_kernel)(void *arg, size_t begin, size_t end);

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

typedef struct cumsum_job {
    const void *x;
    void *out;
    int64_t outer, n, inner, blocks;
    bool exclusive, reverse;
} cumsum_job;

/* Items are (outer index, block of inner columns). Each element is read before the same
 * element of out is written, so out may be x. float32 sums in double; integers wrap. */
#define DEFINE_CUMSUM(sfx, T, ACC, IS_NAN)                                    \
    static void cumsum__##sfx(void *arg, size_t begin, size_t end) {          \
        const cumsum_job *job = arg;                                          \
        int64_t n = job->n, inner = job->inner;                               \
        for (size_t item = begin; item < end; item++) {                       \
            int64_t outer = (int64_t)item / job->blocks;                      \
            int64_t first = ((int64_t)item % job->blocks) * BLOCK;            \
            int64_t width = inner - first < BLOCK ? inner - first : BLOCK;    \
            const T *x = (const T *)job->x + outer * n * inner + first;       \
            T *o = (T *)job->out + outer * n * inner + first;                 \
            ACC acc[BLOCK];                                                   \
            for (int64_t c = 0; c < width; c++)                               \
                acc[c] = 0;                                                   \
            for (int64_t step = 0; step < n; step++) {                        \
                int64_t k = job->reverse ? n - 1 - step : step;               \
                for (int64_t c = 0; c < width; c++) {                         \
                    ACC v = (ACC)x[k * inner + c];                            \
                    ACC before = acc[c];                                      \
                    acc[c] += v;                                              \
                    o[k * inner + c] = (T)(job->exclusive ? before : acc[c]); \
                }                                                             \
            }                                                                 \
        }                                                                     \
    }
SCAN_TYPES(DEFINE_CUMSUM)

static scan_kernel cumsum_kernel(rt_type type) {
    switch (type) {
    case RT_F32: return cumsum__f32;
    case RT_F64: return cumsum__f64;
    case RT_I8: return cumsum__i8;
    case RT_I16: return cumsum__i16;
    case RT_I32: return cumsum__i32;
    case RT_I64: return cumsum__i64;
    case RT_U8: return cumsum__u8;
    case RT_U16: return cumsum__u16;
    case RT_U32: return cumsum__u32;
    case RT_U64: return cumsum__u64;
    default: return NULL;
    }
}

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
    cumsum_job job = {.x = args.x->data, .out = args.out->data, .exclusive = args.exclusive,
                      .reverse = args.reverse};
    split_axis(args.x, args.dim, &job.outer, &job.n, &job.inner);
    job.blocks = (job.inner + BLOCK - 1) / BLOCK;
    scan_kernel kernel = cumsum_kernel(args.x->type);
    if (!kernel) /* the type checks in setup make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args.x->type));
    rt_parallel__for(rt_op__threads(ctx), (size_t)(job.outer * job.blocks),
                     rt_op__grain(job.n * BLOCK), kernel, &job);
    return RT_OK;
}

/* ---- topk ------------------------------------------------------------------------------- */

typedef struct topk_job {
    const void *x;
    void *values;
    int64_t *indices;
    int64_t outer, n, inner, k;
    bool largest;
} topk_job;

/* Items are rows (outer, inner column). The k best indices are kept as a heap with the worst
 * at the root, in the row of `indices` itself (stride inner), then heap-sorted best first.
 * Order: by value (largest or smallest first), NaN above every number, equal values by the
 * lower index; the order is total, so the result is unique. */
#define DEFINE_TOPK(sfx, T, ACC, IS_NAN)                                                    \
    static bool topk_better__##sfx(const T *x, int64_t s, int64_t i, int64_t j, bool big) { \
        T a = x[i * s], b = x[j * s];                                                       \
        bool na = IS_NAN(a), nb = IS_NAN(b);                                                \
        if (na || nb)                                                                       \
            return na && nb ? i < j : (big ? na : nb);                                      \
        if (a != b)                                                                         \
            return big ? a > b : a < b;                                                     \
        return i < j;                                                                       \
    }                                                                                       \
                                                                                            \
    /* Move h[at] down a heap of `size` whose root is the worst (h and x both stride s). */ \
    static void topk_sift__##sfx(const T *x, int64_t s, int64_t *h, int64_t size,           \
                                 int64_t at, bool big) {                                    \
        for (;;) {                                                                          \
            int64_t worst = at, l = 2 * at + 1, r = l + 1;                                  \
            if (l < size && topk_better__##sfx(x, s, h[worst * s], h[l * s], big))          \
                worst = l;                                                                  \
            if (r < size && topk_better__##sfx(x, s, h[worst * s], h[r * s], big))          \
                worst = r;                                                                  \
            if (worst == at)                                                                \
                return;                                                                     \
            int64_t t = h[at * s];                                                          \
            h[at * s] = h[worst * s];                                                       \
            h[worst * s] = t;                                                               \
            at = worst;                                                                     \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void topk__##sfx(void *arg, size_t begin, size_t end) {                          \
        const topk_job *job = arg;                                                          \
        int64_t n = job->n, s = job->inner, k = job->k;                                     \
        bool big = job->largest;                                                            \
        for (size_t row = begin; row < end; row++) {                                        \
            int64_t o = (int64_t)row / s, c = (int64_t)row % s;                             \
            const T *x = (const T *)job->x + o * n * s + c;                                 \
            int64_t *h = job->indices + o * k * s + c;                                      \
            T *v = (T *)job->values + o * k * s + c;                                        \
            for (int64_t i = 0; i < k; i++) { /* heapify the first k */                     \
                int64_t at = i;                                                             \
                h[at * s] = i;                                                              \
                for (int64_t p = (at - 1) / 2;                                              \
                     at > 0 && topk_better__##sfx(x, s, h[p * s], h[at * s], big);          \
                     at = p, p = (at - 1) / 2) {                                            \
                    int64_t t = h[p * s];                                                   \
                    h[p * s] = h[at * s];                                                   \
                    h[at * s] = t;                                                          \
                }                                                                           \
            }                                                                               \
            for (int64_t i = k; i < n && k > 0; i++) {                                      \
                if (topk_better__##sfx(x, s, i, h[0], big)) {                               \
                    h[0] = i;                                                               \
                    topk_sift__##sfx(x, s, h, k, 0, big);                                   \
                }                                                                           \
            }                                                                               \
            for (int64_t size = k - 1; size > 0; size--) { /* worst to the back */          \
                int64_t t = h[0];                                                           \
                h[0] = h[size * s];                                                         \
                h[size * s] = t;                                                            \
                topk_sift__##sfx(x, s, h, size, 0, big);                                    \
            }                                                                               \
            for (int64_t i = 0; i < k; i++)                                                 \
                v[i * s] = x[h[i * s] * s];                                                 \
        }                                                                                   \
    }
SCAN_TYPES(DEFINE_TOPK)

static scan_kernel topk_kernel(rt_type type) {
    switch (type) {
    case RT_F32: return topk__f32;
    case RT_F64: return topk__f64;
    case RT_I8: return topk__i8;
    case RT_I16: return topk__i16;
    case RT_I32: return topk__i32;
    case RT_I64: return topk__i64;
    case RT_U8: return topk__u8;
    case RT_U16: return topk__u16;
    case RT_U32: return topk__u32;
    case RT_U64: return topk__u64;
    default: return NULL;
    }
}

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
    topk_job job = {.x = args.x->data, .values = args.values->data,
                    .indices = args.indices->data, .largest = args.largest};
    split_axis(args.x, args.axis, &job.outer, &job.n, &job.inner);
    job.k = args.values->sizes[args.axis];
    scan_kernel kernel = topk_kernel(args.x->type);
    if (!kernel) /* the type checks in setup make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args.x->type));
    /* n log k comparisons per row, a few units of work each. */
    int64_t work = rt_op__mul_sat(job.n, 4);
    rt_parallel__for(rt_op__threads(ctx), (size_t)(job.outer * job.inner), rt_op__grain(work),
                     kernel, &job);
    return RT_OK;
}
