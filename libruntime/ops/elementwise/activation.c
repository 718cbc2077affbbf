/* activation.c: relu and softmax. Both may run in place (out the same tensor as x). */
#include <math.h>
#include <string.h>

#include "core/multiversion.h"
#include "ops/fast_exp.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* Checks the common shape of unary ops: x and out of one dtype in `types`, row-major, out
 * writable and given x's current sizes. */
static rt_status unary_setup(rt_op_ctx *ctx, size_t out_index, uint32_t types,
                             const char *expected, rt_tensor_value **x, rt_tensor_value **out) {
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, out_index, "out", out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, *x, "x", types, expected));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, *out, "out", *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *out, "out"));
    int64_t sizes[RT_MAX_RANK];
    int32_t rank = (*x)->rank;
    memcpy(sizes, (*x)->sizes, sizeof sizes);
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, *out, "out", *x, "x", rank, sizes));
    return rt_op__set_output_sizes(ctx, *out, "out", rank, sizes);
}

/* ---- relu ------------------------------------------------------------------------------- */

typedef void (*relu_kernel)(void *out, const void *x, size_t begin, size_t end);

/* x < 0 ? 0 : x keeps NaN as NaN, like PyTorch. */
#define DEFINE_RELU(name, T)                                             \
    static void name(void *out, const void *x, size_t begin, size_t end) \
    {                                                                    \
        T *o = out;                                                      \
        const T *v = x;                                                  \
        for (size_t i = begin; i < end; i++)                             \
            o[i] = v[i] < 0 ? (T)0 : v[i];                               \
    }
DEFINE_RELU(relu__f32, float)
DEFINE_RELU(relu__f64, double)
DEFINE_RELU(relu__i8, int8_t)
DEFINE_RELU(relu__i16, int16_t)
DEFINE_RELU(relu__i32, int32_t)
DEFINE_RELU(relu__i64, int64_t)

static relu_kernel relu_kernel_for(rt_type type) {
    switch (type) {
    case RT_F32: return relu__f32;
    case RT_F64: return relu__f64;
    case RT_I8: return relu__i8;
    case RT_I16: return relu__i16;
    case RT_I32: return relu__i32;
    case RT_I64: return relu__i64;
    default: return NULL;
    }
}

typedef struct relu_job {
    relu_kernel kernel;
    void *out;
    const void *x;
} relu_job;

static void relu_range(void *arg, size_t begin, size_t end) {
    const relu_job *job = arg;
    job->kernel(job->out, job->x, begin, end);
}

#define RELU_TYPES (RT_TYPES_FLOAT | RT_TYPES_SIGNED)
#define RELU_TYPES_TEXT "float32, float64 and the signed integer types"

rt_status rt_ops__relu_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    return unary_setup(ctx, 1, RELU_TYPES, RELU_TYPES_TEXT, &x, &out);
}

rt_status rt_ops__relu_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(unary_setup(ctx, 1, RELU_TYPES, RELU_TYPES_TEXT, &x, &out));
    relu_job job = {relu_kernel_for(x->type), out->data, x->data};
    if (!job.kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no relu kernel for dtype %s",
                           rt_tensor__type_name(x->type));
    int64_t numel = rt_tensor__numel(out);
    if (numel > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)numel, rt_op__grain(1), relu_range, &job);
    return RT_OK;
}

/* ---- softmax ---------------------------------------------------------------------------- */

/* x viewed as [outer, n, inner] with the softmax taken over n. */
typedef struct softmax_job {
    const void *x;
    void *out;
    int64_t outer, n, inner;
} softmax_job;

/* Columns of the inner dimension are done SOFTMAX_BLOCK at a time, so that every pass reads
 * contiguous runs and keeps its maxima and sums on the stack. */
#define SOFTMAX_BLOCK 64

/* T: element type, ACC: the type sums accumulate in, EXP: exp for T. Items are rows
 * (inner == 1) or (outer, column block) pairs. Subtracting the maximum keeps exp finite. */
#define DEFINE_SOFTMAX_ROWS(sfx, T, ACC, EXP)                                              \
    static void softmax_rows__##sfx(void *arg, size_t begin, size_t end)                   \
    {                                                                                      \
        const softmax_job *job = arg;                                                      \
        int64_t n = job->n;                                                                \
        for (size_t row = begin; row < end; row++) {                                       \
            const T *x = (const T *)job->x + (int64_t)row * n;                             \
            T *o = (T *)job->out + (int64_t)row * n;                                       \
            T max = -(T)INFINITY;                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                max = x[k] > max ? x[k] : max;                                             \
            for (int64_t k = 0; k < n; k++) /* no carried sum here: this loop vectorises */ \
                o[k] = EXP(x[k] - max);                                                    \
            ACC sum = 0;                                                                   \
            for (int64_t k = 0; k < n; k++)                                                \
                sum += o[k];                                                               \
            const T scale = (T)(1 / sum);                                                  \
            for (int64_t k = 0; k < n; k++)                                                \
                o[k] = o[k] * scale;                                                       \
        }                                                                                  \
    }

#define DEFINE_SOFTMAX_COLUMNS(sfx, T, ACC, EXP)                                           \
    static void softmax_columns__##sfx(void *arg, size_t begin, size_t end)                \
    {                                                                                      \
        const softmax_job *job = arg;                                                      \
        int64_t n = job->n, inner = job->inner;                                            \
        int64_t blocks = (inner + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;                      \
        for (size_t item = begin; item < end; item++) {                                    \
            int64_t o_index = (int64_t)item / blocks;                                      \
            int64_t first = ((int64_t)item % blocks) * SOFTMAX_BLOCK;                      \
            int64_t width = inner - first < SOFTMAX_BLOCK ? inner - first : SOFTMAX_BLOCK; \
            const T *x = (const T *)job->x + o_index * n * inner + first;                  \
            T *o = (T *)job->out + o_index * n * inner + first;                            \
            T max[SOFTMAX_BLOCK];                                                          \
            ACC sum[SOFTMAX_BLOCK];                                                        \
            for (int64_t c = 0; c < width; c++) {                                          \
                max[c] = -(T)INFINITY;                                                     \
                sum[c] = 0;                                                                \
            }                                                                              \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++) {                                      \
                    T v = x[k * inner + c];                                                \
                    max[c] = v > max[c] ? v : max[c];                                      \
                }                                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++) {                                      \
                    T e = EXP(x[k * inner + c] - max[c]);                                  \
                    o[k * inner + c] = e;                                                  \
                    sum[c] += e;                                                           \
                }                                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++)                                        \
                    o[k * inner + c] = (T)(o[k * inner + c] / sum[c]);                     \
        }                                                                                  \
    }
DEFINE_SOFTMAX_ROWS(f64, double, double, exp)
DEFINE_SOFTMAX_COLUMNS(f32, float, double, rt_fast_exp__f32)
DEFINE_SOFTMAX_COLUMNS(f64, double, double, exp)

/* float32 rows, the common case (attention scores): the maximum and the sum (in double) run
 * in eight independent lanes so both loops vectorise. NaN handling is
 * the generic kernel's: a NaN never wins the maximum and then poisons the sum. */
RT_MULTIVERSION static void softmax_rows_lanes__f32(void *arg, size_t begin, size_t end) {
    const softmax_job *job = arg;
    int64_t n = job->n, body = n / 8 * 8;
    for (size_t row = begin; row < end; row++) {
        const float *x = (const float *)job->x + (int64_t)row * n;
        float *o = (float *)job->out + (int64_t)row * n;
        float lanes[8];
        for (int j = 0; j < 8; j++)
            lanes[j] = -INFINITY;
        for (int64_t k = 0; k < body; k += 8)
            for (int j = 0; j < 8; j++)
                lanes[j] = x[k + j] > lanes[j] ? x[k + j] : lanes[j];
        float max = -INFINITY;
        for (int j = 0; j < 8; j++)
            max = lanes[j] > max ? lanes[j] : max;
        for (int64_t k = body; k < n; k++)
            max = x[k] > max ? x[k] : max;
        for (int64_t k = 0; k < n; k++)
            o[k] = rt_fast_exp__f32(x[k] - max);
        double sums[8] = {0};
        for (int64_t k = 0; k < body; k += 8)
            for (int j = 0; j < 8; j++)
                sums[j] += o[k + j];
        double sum = 0;
        for (int j = 0; j < 8; j++)
            sum += sums[j];
        for (int64_t k = body; k < n; k++)
            sum += o[k];
        const float scale = (float)(1 / sum);
        for (int64_t k = 0; k < n; k++)
            o[k] = o[k] * scale;
    }
}

typedef struct softmax_args {
    rt_tensor_value *x, *out;
    int32_t axis;
} softmax_args;

static rt_status softmax_setup(rt_op_ctx *ctx, softmax_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(unary_setup(ctx, 2, RT_TYPES_FLOAT, "float32 and float64", &args->x,
                                   &args->out));
    /* A 0-d tensor is one element: axis 0 or -1 (PyTorch accepts both). */
    int32_t rank = args->x->rank > 0 ? args->x->rank : 1;
    return rt_op__axis(ctx, axis, rank, "axis", &args->axis);
}

rt_status rt_ops__softmax_prepare(rt_op_ctx *ctx) {
    softmax_args args;
    return softmax_setup(ctx, &args);
}

rt_status rt_ops__softmax_run(rt_op_ctx *ctx) {
    softmax_args args;
    RT_RETURN_IF_ERROR(softmax_setup(ctx, &args));
    const rt_tensor_value *x = args.x;
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    /* The products are bounded by the element count of x, which is not 0. */
    softmax_job job = {.x = x->data, .out = args.out->data, .outer = 1, .n = 1, .inner = 1};
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < args.axis)
            job.outer *= x->sizes[d];
        else if (d == args.axis)
            job.n = x->sizes[d];
        else
            job.inner *= x->sizes[d];
    }

    bool is_f32 = x->type == RT_F32;
    int32_t threads = rt_op__threads(ctx);
    if (job.inner == 1) {
        rt_parallel__for(threads, (size_t)job.outer, rt_op__grain(job.n),
                         is_f32 ? softmax_rows_lanes__f32 : softmax_rows__f64, &job);
    } else {
        int64_t blocks = (job.inner + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
        rt_parallel__for(threads, (size_t)(job.outer * blocks),
                         rt_op__grain(job.n * SOFTMAX_BLOCK),
                         is_f32 ? softmax_columns__f32 : softmax_columns__f64, &job);
    }
    return RT_OK;
}
