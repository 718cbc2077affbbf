/* binary_more.c: pow, mod, min, max, less_equal, and, or, xor (numpy broadcasting of two
 * inputs) and where (of three).
 *
 * The output may be one of the inputs (in place) when that input already has the result's
 * shape and element size. The typed loops are in kernels/binary_more.c. */
#include <inttypes.h>
#include <string.h>

#include "ops/elementwise/kernels/binary_more.h"
#include "ops/broadcast.h"
#include "ops/elementwise/kernels/binary.h" /* rt_ops__any_zero */
#include "ops/op_util.h"
#include "ops/ops.h"

#define MAX_INPUTS RT_BROADCAST_MAX_INPUTS

/* ---- broadcasting ------------------------------------------------------------------------ */

static rt_status broadcast_fail(rt_op_ctx *ctx, rt_tensor_value *const *in,
                                const char *const *what, int32_t j, int32_t k, int32_t dim,
                                int64_t sj, int64_t sk) {
    char tj[RT_OP_SHAPE_TEXT], tk[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, rt_op__shape_code(ctx),
                       "%s %s and %s %s cannot be broadcast together (dimension %" PRId32
                       ": %" PRId64 " vs %" PRId64 ")",
                       what[j], rt_op__shape_text(in[j]->sizes, in[j]->rank, tj), what[k],
                       rt_op__shape_text(in[k]->sizes, in[k]->rank, tk), dim, sj, sk);
}

/* numpy broadcasting of every input's current sizes; fails naming the inputs involved. */
static rt_status broadcast_all(rt_op_ctx *ctx, rt_tensor_value *const *in, const char *const *what,
                               int32_t inputs, int32_t *out_rank, int64_t *out_sizes) {
    int32_t rank = 0;
    for (int32_t k = 0; k < inputs; k++)
        rank = in[k]->rank > rank ? in[k]->rank : rank;
    for (int32_t i = 0; i < rank; i++) {
        int64_t size = 1;
        int32_t from = -1;
        for (int32_t k = 0; k < inputs; k++) {
            int32_t d = i - (rank - in[k]->rank);
            int64_t s = d >= 0 ? in[k]->sizes[d] : 1;
            if (s == 1 || s == size)
                continue;
            if (size != 1)
                return broadcast_fail(ctx, in, what, from, k, i - rank, size, s);
            size = s;
            from = k;
        }
        out_sizes[i] = size;
    }
    *out_rank = rank;
    return RT_OK;
}

/* ---- parallel driver -------------------------------------------------------------------- */

typedef struct nary_job {
    const rt_broadcast_plan *plan;
    rt_nary_kernel kernel;
    char *out;
    size_t out_size; /* element bytes */
    const char *in[MAX_INPUTS];
    size_t in_size[MAX_INPUTS];
} nary_job;

/* Result elements [begin, end) in row-major order, one innermost run at a time. */
static void nary_range(void *arg, size_t begin, size_t end) {
    const nary_job *job = arg;
    const rt_broadcast_plan *plan = job->plan;
    int32_t last = plan->rank - 1, inputs = plan->inputs;
    int64_t index[RT_MAX_RANK], off[MAX_INPUTS] = {0}, inner[MAX_INPUTS];
    int64_t rest = (int64_t)begin;
    for (int32_t d = last; d >= 0; d--) {
        index[d] = rest % plan->sizes[d];
        rest /= plan->sizes[d];
        for (int32_t k = 0; k < inputs; k++)
            off[k] += index[d] * plan->strides[k][d];
    }
    for (int32_t k = 0; k < inputs; k++)
        inner[k] = plan->strides[k][last];
    for (int64_t pos = (int64_t)begin; pos < (int64_t)end;) {
        int64_t n = plan->sizes[last] - index[last];
        if (n > (int64_t)end - pos)
            n = (int64_t)end - pos;
        const void *ptrs[MAX_INPUTS];
        for (int32_t k = 0; k < inputs; k++)
            ptrs[k] = job->in[k] + (size_t)off[k] * job->in_size[k];
        job->kernel(job->out + (size_t)pos * job->out_size, ptrs, inner, n);
        pos += n;
        index[last] += n;
        for (int32_t k = 0; k < inputs; k++)
            off[k] += n * inner[k];
        /* Carry into the outer dimensions. */
        for (int32_t d = last; d > 0 && index[d] == plan->sizes[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
            for (int32_t k = 0; k < inputs; k++)
                off[k] += plan->strides[k][d - 1] - plan->sizes[d] * plan->strides[k][d];
        }
    }
}

/* ---- setup shared by every op ----------------------------------------------------------- */

typedef struct nary_args {
    int32_t inputs;
    rt_tensor_value *in[MAX_INPUTS];
    rt_tensor_value *out;
} nary_args;

/* Reads the inputs (arguments 0 .. inputs-1) and the output (the last argument). */
static rt_status read_args(rt_op_ctx *ctx, size_t nargs, int32_t inputs, const char *const *what,
                           nary_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, nargs));
    args->inputs = inputs;
    for (int32_t k = 0; k < inputs; k++)
        RT_RETURN_IF_ERROR(rt_op__tensor(ctx, (size_t)k, what[k], &args->in[k]));
    return rt_op__tensor(ctx, nargs - 1, "out", &args->out);
}

/* Layouts, writability, the broadcast shape, in-place rules; gives out its sizes. Dtypes are
 * checked by the caller before. */
static rt_status finish_setup(rt_op_ctx *ctx, const char *const *what, nary_args *args) {
    rt_tensor_value *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    for (int32_t k = 0; k < args->inputs; k++)
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->in[k], what[k]));
    int32_t rank = 0;
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(broadcast_all(ctx, args->in, what, args->inputs, &rank, sizes));
    for (int32_t k = 0; k < args->inputs; k++)
        RT_RETURN_IF_ERROR(
            rt_op__check_in_place_ok(ctx, out, "out", args->in[k], what[k], rank, sizes));
    return rt_op__set_output_sizes(ctx, out, "out", rank, sizes);
}

static rt_status run_kernel(rt_op_ctx *ctx, const nary_args *args, rt_nary_kernel kernel) {
    const rt_tensor_value *out = args->out;
    int64_t numel = rt_tensor__numel(out);
    if (numel == 0)
        return RT_OK;
    if (!kernel) /* the type checks in setup make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args->in[args->inputs - 1]->type));
    rt_broadcast_plan plan;
    rt_broadcast__plan(&plan, (const rt_tensor_value *const *)args->in, args->inputs, out->rank,
                       out->sizes);
    nary_job job = {.plan = &plan, .kernel = kernel, .out = out->data,
                    .out_size = out->elem_size};
    for (int32_t k = 0; k < args->inputs; k++) {
        job.in[k] = args->in[k]->data;
        job.in_size[k] = args->in[k]->elem_size;
    }
    rt_parallel__for(rt_op__threads(ctx), (size_t)numel, rt_op__grain(1), nary_range, &job);
    return RT_OK;
}

static const char *const AB[] = {"a", "b"};

/* ---- pow -------------------------------------------------------------------------------- */

#define POW_BASE_TYPES                                           \
    (RT_TYPES_FLOAT | RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64))

/* pow(a, b, out): b may have any float or integer dtype; out has a's. */
static rt_status pow_setup(rt_op_ctx *ctx, nary_args *args) {
    RT_RETURN_IF_ERROR(read_args(ctx, 3, 2, AB, args));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->in[0], "a", POW_BASE_TYPES,
                                            "float32, float64, int32 and int64"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->in[1], "b", RT_TYPES_NUMERIC,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->out, "out", args->in[0], "a"));
    return finish_setup(ctx, AB, args);
}

rt_status rt_ops__pow_prepare(rt_op_ctx *ctx) {
    nary_args args;
    return pow_setup(ctx, &args);
}

/* The value of a one-element tensor of a float or 32/64-bit integer type, as a double. */
static bool single_value(const rt_tensor_value *t, double *value) {
    if (rt_tensor__numel(t) != 1)
        return false;
    switch (t->type) {
    case RT_F32: *value = *(const float *)t->data; return true;
    case RT_F64: *value = *(const double *)t->data; return true;
    case RT_I32: *value = *(const int32_t *)t->data; return true;
    case RT_I64: *value = (double)*(const int64_t *)t->data; return true;
    default: return false;
    }
}

rt_status rt_ops__pow_run(rt_op_ctx *ctx) {
    nary_args args;
    RT_RETURN_IF_ERROR(pow_setup(ctx, &args));
    double exponent;
    rt_nary_kernel constant = NULL;
    if (args.in[0]->type == RT_F32 && single_value(args.in[1], &exponent))
        constant = rt_ops__pow_f32_constant_kernel(exponent);
    if (constant) { /* the exponent passed as a double of one element */
        rt_tensor_value as_double = *args.in[1];
        as_double.type = RT_F64;
        as_double.elem_size = sizeof exponent;
        as_double.data = &exponent;
        args.in[1] = &as_double;
        return run_kernel(ctx, &args, constant);
    }
    return run_kernel(ctx, &args, rt_ops__pow_kernel(args.in[0]->type, args.in[1]->type));
}

/* ---- mod -------------------------------------------------------------------------------- */

typedef struct mod_args {
    nary_args t;
    bool fmod;
} mod_args;

/* mod(a, b, fmod, out) */
static rt_status mod_setup(rt_op_ctx *ctx, mod_args *args) {
    RT_RETURN_IF_ERROR(read_args(ctx, 4, 2, AB, &args->t));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "fmod", &args->fmod));
    const nary_args *t = &args->t;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, t->in[0], "a", RT_TYPES_NUMERIC,
                                            "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, t->in[0], "a", t->in[1], "b"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, t->out, "out", t->in[0], "a"));
    return finish_setup(ctx, AB, &args->t);
}

rt_status rt_ops__mod_prepare(rt_op_ctx *ctx) {
    mod_args args;
    return mod_setup(ctx, &args);
}

rt_status rt_ops__mod_run(rt_op_ctx *ctx) {
    mod_args args;
    RT_RETURN_IF_ERROR(mod_setup(ctx, &args));
    const rt_tensor_value *b = args.t.in[1];
    /* Checked before writing anything, so a failure leaves out (maybe a or b) intact. */
    if (rt_tensor__numel(args.t.out) > 0 && rt_tensor__type_is_integer(b->type) &&
        rt_ops__any_zero(b->data, b->elem_size, rt_tensor__numel(b)))
        return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "integer modulo by zero (b holds a 0)");
    rt_more_op op = args.fmod ? RT_MORE_MOD_TRUNC : RT_MORE_MOD_FLOOR;
    return run_kernel(ctx, &args.t, rt_ops__more_kernel(op, args.t.in[0]->type));
}

/* ---- min, max, less_equal, and, or, xor ------------------------------------------------- */

static rt_status simple_setup(rt_op_ctx *ctx, rt_more_op op, nary_args *args) {
    RT_RETURN_IF_ERROR(read_args(ctx, 3, 2, AB, args));
    rt_tensor_value *a = args->in[0];
    bool logic = op == RT_MORE_AND || op == RT_MORE_OR || op == RT_MORE_XOR;
    bool shift = op == RT_MORE_SHIFT_LEFT || op == RT_MORE_SHIFT_RIGHT;
    if (logic)
        RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, a, "a", RT_TYPE_BIT(RT_BOOL), "bool"));
    else if (shift)
        RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, a, "a", RT_TYPES_INTEGER,
                                                "the integer types"));
    else
        RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, a, "a", RT_TYPES_NUMERIC,
                                                "float32, float64 and the integer types"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, a, "a", args->in[1], "b"));
    if (logic || op == RT_MORE_LESS_EQUAL)
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, args->out, "out", RT_BOOL));
    else
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->out, "out", a, "a"));
    return finish_setup(ctx, AB, args);
}

static rt_status simple_prepare(rt_op_ctx *ctx, rt_more_op op) {
    nary_args args;
    return simple_setup(ctx, op, &args);
}

static rt_status simple_run(rt_op_ctx *ctx, rt_more_op op) {
    nary_args args;
    RT_RETURN_IF_ERROR(simple_setup(ctx, op, &args));
    return run_kernel(ctx, &args, rt_ops__more_kernel(op, args.in[0]->type));
}

#define DEFINE_SIMPLE_OP(symbol, op)                                                         \
    rt_status rt_ops__##symbol##_prepare(rt_op_ctx *ctx) { return simple_prepare(ctx, op); } \
    rt_status rt_ops__##symbol##_run(rt_op_ctx *ctx) { return simple_run(ctx, op); }

DEFINE_SIMPLE_OP(minimum, RT_MORE_MIN)
DEFINE_SIMPLE_OP(maximum, RT_MORE_MAX)
DEFINE_SIMPLE_OP(less_equal, RT_MORE_LESS_EQUAL)
DEFINE_SIMPLE_OP(logical_and, RT_MORE_AND)
DEFINE_SIMPLE_OP(logical_or, RT_MORE_OR)
DEFINE_SIMPLE_OP(logical_xor, RT_MORE_XOR)
DEFINE_SIMPLE_OP(bit_shift_left, RT_MORE_SHIFT_LEFT)
DEFINE_SIMPLE_OP(bit_shift_right, RT_MORE_SHIFT_RIGHT)

/* ---- where ------------------------------------------------------------------------------ */

static const char *const WHERE_NAMES[] = {"cond", "a", "b"};

#define WHERE_TYPES (RT_TYPES_NUMERIC | RT_TYPE_BIT(RT_BOOL))

/* where(cond, a, b, out) */
static rt_status where_setup(rt_op_ctx *ctx, nary_args *args) {
    RT_RETURN_IF_ERROR(read_args(ctx, 4, 3, WHERE_NAMES, args));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, args->in[0], "cond", RT_BOOL));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->in[1], "a", WHERE_TYPES,
                                            "float32, float64, the integer types and bool"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->in[1], "a", args->in[2], "b"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->out, "out", args->in[1], "a"));
    return finish_setup(ctx, WHERE_NAMES, args);
}

rt_status rt_ops__where_prepare(rt_op_ctx *ctx) {
    nary_args args;
    return where_setup(ctx, &args);
}

rt_status rt_ops__where_run(rt_op_ctx *ctx) {
    nary_args args;
    RT_RETURN_IF_ERROR(where_setup(ctx, &args));
    return run_kernel(ctx, &args, rt_ops__where_kernel(args.out->elem_size));
}
