/* elementwise.c: add, sub, mul, div, less, equal (numpy broadcasting) and copy.
 *
 * The output may be one of the inputs (in place) when that input already has the result's
 * shape and element size. The typed loops are in kernels/binary.c. */
#include <string.h>

#include "ops/broadcast.h"
#include "ops/elementwise/kernels/binary.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* ---- parallel driver -------------------------------------------------------------------- */

typedef struct binary_job {
    const rt_broadcast_plan *plan;
    rt_binary_kernel kernel;
    char *out;
    const char *a;
    const char *b;
    size_t out_size, a_size, b_size; /* element bytes */
} binary_job;

/* Result elements [begin, end) in row-major order, one innermost run at a time. */
static void binary_range(void *arg, size_t begin, size_t end) {
    const binary_job *job = arg;
    const rt_broadcast_plan *plan = job->plan;
    int32_t last = plan->rank - 1;
    int64_t index[RT_MAX_RANK];
    int64_t a_off = 0, b_off = 0, rest = (int64_t)begin;
    for (int32_t d = last; d >= 0; d--) {
        index[d] = rest % plan->sizes[d];
        rest /= plan->sizes[d];
        a_off += index[d] * plan->strides[0][d];
        b_off += index[d] * plan->strides[1][d];
    }
    for (int64_t pos = (int64_t)begin; pos < (int64_t)end;) {
        int64_t n = plan->sizes[last] - index[last];
        if (n > (int64_t)end - pos)
            n = (int64_t)end - pos;
        job->kernel(job->out + (size_t)pos * job->out_size, job->a + (size_t)a_off * job->a_size,
                    plan->strides[0][last], job->b + (size_t)b_off * job->b_size,
                    plan->strides[1][last], n);
        pos += n;
        index[last] += n;
        a_off += n * plan->strides[0][last];
        b_off += n * plan->strides[1][last];
        /* Carry into the outer dimensions. */
        for (int32_t d = last; d > 0 && index[d] == plan->sizes[d]; d--) {
            index[d] = 0;
            a_off -= plan->sizes[d] * plan->strides[0][d];
            b_off -= plan->sizes[d] * plan->strides[1][d];
            index[d - 1]++;
            a_off += plan->strides[0][d - 1];
            b_off += plan->strides[1][d - 1];
        }
    }
}

/* ---- binary ops ------------------------------------------------------------------------- */

static bool is_comparison(rt_binary_op op) {
    return op == RT_BINARY_LESS || op == RT_BINARY_EQUAL;
}

static uint32_t supported_types(rt_binary_op op, const char **text) {
    if (op == RT_BINARY_EQUAL) {
        *text = "float32, float64, the integer types and bool";
        return RT_TYPES_NUMERIC | RT_TYPE_BIT(RT_BOOL);
    }
    *text = "float32, float64 and the integer types";
    return RT_TYPES_NUMERIC;
}

typedef struct binary_args {
    rt_tensor_value *a, *b, *out;
} binary_args;

/* Checks every argument and gives the output its shape for the current input sizes. */
static rt_status binary_setup(rt_op_ctx *ctx, rt_binary_op op, binary_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "a", &args->a));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "b", &args->b));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    rt_tensor_value *a = args->a, *b = args->b, *out = args->out;

    const char *expected;
    uint32_t types = supported_types(op, &expected);
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, a, "a", types, expected));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, a, "a", b, "b"));
    if (is_comparison(op))
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, out, "out", RT_BOOL));
    else
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", a, "a"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, a, "a"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, b, "b"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));

    int32_t rank;
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(rt_op__broadcast_shape(ctx, a, b, &rank, sizes));
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", a, "a", rank, sizes));
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", b, "b", rank, sizes));
    return rt_op__set_output_sizes(ctx, out, "out", rank, sizes);
}

static rt_status binary_prepare(rt_op_ctx *ctx, rt_binary_op op) {
    binary_args args;
    return binary_setup(ctx, op, &args);
}

static rt_status binary_run(rt_op_ctx *ctx, rt_binary_op op) {
    binary_args args;
    RT_RETURN_IF_ERROR(binary_setup(ctx, op, &args));
    const rt_tensor_value *a = args.a, *b = args.b, *out = args.out;
    int64_t numel = rt_tensor__numel(out);
    if (numel == 0)
        return RT_OK;
    /* Checked before writing anything, so a failed division leaves out (maybe a or b) intact. */
    if (op == RT_BINARY_DIV && rt_tensor__type_is_integer(b->type) &&
        rt_ops__any_zero(b->data, b->elem_size, rt_tensor__numel(b)))
        return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "integer division by zero (b holds a 0)");

    rt_broadcast_plan plan;
    const rt_tensor_value *operands[2] = {a, b};
    rt_broadcast__plan(&plan, operands, 2, out->rank, out->sizes);
    binary_job job = {
        .plan = &plan,
        .kernel = rt_ops__binary_kernel(op, a->type),
        .out = out->data,
        .a = a->data,
        .b = b->data,
        .out_size = out->elem_size,
        .a_size = a->elem_size,
        .b_size = b->elem_size,
    };
    if (!job.kernel) /* the type checks above make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(a->type));
    rt_parallel__for(rt_op__threads(ctx), (size_t)numel, rt_op__grain(1), binary_range, &job);
    return RT_OK;
}

#define DEFINE_BINARY_OP(symbol, op)                                                         \
    rt_status rt_ops__##symbol##_prepare(rt_op_ctx *ctx) { return binary_prepare(ctx, op); } \
    rt_status rt_ops__##symbol##_run(rt_op_ctx *ctx) { return binary_run(ctx, op); }

DEFINE_BINARY_OP(add, RT_BINARY_ADD)
DEFINE_BINARY_OP(sub, RT_BINARY_SUB)
DEFINE_BINARY_OP(mul, RT_BINARY_MUL)
DEFINE_BINARY_OP(div, RT_BINARY_DIV)
DEFINE_BINARY_OP(less, RT_BINARY_LESS)
DEFINE_BINARY_OP(equal, RT_BINARY_EQUAL)

/* ---- copy ------------------------------------------------------------------------------- */

static rt_status copy_setup(rt_op_ctx *ctx, rt_tensor_value **x, rt_tensor_value **out) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "out", out));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, *out, "out", *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    /* Row-major on both sides keeps the copy a memcpy. */
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *out, "out"));
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, (*x)->sizes, sizeof sizes);
    return rt_op__set_output_sizes(ctx, *out, "out", (*x)->rank, sizes);
}

rt_status rt_ops__copy_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    return copy_setup(ctx, &x, &out);
}

rt_status rt_ops__copy_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(copy_setup(ctx, &x, &out));
    size_t nbytes = rt_tensor__nbytes(x);
    /* memmove: nothing stops a planner from overlapping the two. */
    if (nbytes > 0 && out->data != x->data)
        memmove(out->data, x->data, nbytes);
    return RT_OK;
}
