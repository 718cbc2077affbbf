/* unary.c: elementwise math and activations (abs ... not, clip), prelu, log_softmax and
 * hardmax.
 *
 * Every op here may run in place (out the same storage as x) when out holds as many bytes per
 * element as x. The typed loops are in kernels/unary.c. */
#include <math.h>
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/elementwise/kernels/unary.h"

/* ---- the elementwise kinds -------------------------------------------------------------- */

typedef struct unary_info {
    size_t nparams;  /* parameters between x and out */
    uint32_t types;  /* dtypes of x */
    const char *types_text;
    bool bool_out;   /* out is bool rather than x's dtype */
    int64_t cost;    /* rough work per element, for the parallel grain */
} unary_info;

#define FLOATS RT_TYPES_FLOAT, "float32 and float64"
#define FLOATS_SIGNED \
    RT_TYPES_FLOAT | RT_TYPES_SIGNED, "float32, float64 and the signed integer types"
#define NUMERIC RT_TYPES_NUMERIC, "float32, float64 and the integer types"

static const unary_info unary_infos[RT_UNARY_KIND_COUNT] = {
    [RT_UNARY_ABS] = {0, NUMERIC, false, 1},
    [RT_UNARY_NEG] = {0, FLOATS_SIGNED, false, 1},
    [RT_UNARY_EXP] = {0, FLOATS, false, 16},
    [RT_UNARY_LOG] = {0, FLOATS, false, 16},
    [RT_UNARY_SQRT] = {0, FLOATS, false, 4},
    [RT_UNARY_RECIPROCAL] = {0, FLOATS, false, 4},
    [RT_UNARY_FLOOR] = {0, FLOATS, false, 1},
    [RT_UNARY_CEIL] = {0, FLOATS, false, 1},
    [RT_UNARY_ROUND] = {0, FLOATS, false, 1},
    [RT_UNARY_SIGN] = {0, NUMERIC, false, 1},
    [RT_UNARY_SIN] = {0, FLOATS, false, 16},
    [RT_UNARY_COS] = {0, FLOATS, false, 16},
    [RT_UNARY_TAN] = {0, FLOATS, false, 16},
    [RT_UNARY_TANH] = {0, FLOATS, false, 16},
    [RT_UNARY_ERF] = {0, FLOATS, false, 16},
    [RT_UNARY_SIGMOID] = {0, FLOATS, false, 16},
    [RT_UNARY_HARD_SIGMOID] = {2, FLOATS, false, 1},
    [RT_UNARY_LEAKY_RELU] = {1, FLOATS, false, 1},
    [RT_UNARY_ELU] = {1, FLOATS, false, 16},
    [RT_UNARY_SELU] = {2, FLOATS, false, 16},
    [RT_UNARY_GELU] = {1, FLOATS, false, 16},
    [RT_UNARY_GELU_TANH] = {1, FLOATS, false, 16},
    [RT_UNARY_SOFTPLUS] = {0, FLOATS, false, 16},
    [RT_UNARY_SOFTSIGN] = {0, FLOATS, false, 4},
    [RT_UNARY_HARD_SWISH] = {0, FLOATS, false, 1},
    [RT_UNARY_MISH] = {0, FLOATS, false, 32},
    [RT_UNARY_SILU] = {0, FLOATS, false, 16},
    [RT_UNARY_CLIP] = {2, NUMERIC, false, 1},
    [RT_UNARY_ISNAN] = {0, FLOATS, true, 1},
    [RT_UNARY_ISINF] = {2, FLOATS, true, 1},
    [RT_UNARY_NOT] = {0, RT_TYPE_BIT(RT_BOOL), "bool", false, 1},
};

typedef struct unary_args {
    rt_tensor_value *x, *out;
} unary_args;

/* x and out (the last argument) of an op whose out has x's shape: dtypes, layout, aliasing,
 * and out's sizes for this execution. */
static rt_status unary_tensors(rt_op_ctx *ctx, uint32_t types, const char *types_text,
                               bool bool_out, unary_args *args) {
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, ctx->nargs - 1, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", types, types_text));
    if (bool_out)
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, out, "out", RT_BOOL));
    else
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, x->sizes, sizeof sizes);
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", x, "x", x->rank, sizes));
    return rt_op__set_output_sizes(ctx, out, "out", x->rank, sizes);
}

/* ---- clip bounds ------------------------------------------------------------------------ */

/* The lowest (upper false) or highest value of a dtype: no bound. */
static void scalar_limit(rt_type type, bool upper, rt_unary_scalar *s) {
    switch (type) {
    case RT_F32: s->f32 = upper ? INFINITY : -INFINITY; break;
    case RT_F64: s->f64 = upper ? INFINITY : -INFINITY; break;
    case RT_I8: s->i8 = upper ? INT8_MAX : INT8_MIN; break;
    case RT_I16: s->i16 = upper ? INT16_MAX : INT16_MIN; break;
    case RT_I32: s->i32 = upper ? INT32_MAX : INT32_MIN; break;
    case RT_I64: s->i64 = upper ? INT64_MAX : INT64_MIN; break;
    case RT_U8: s->u8 = upper ? UINT8_MAX : 0; break;
    case RT_U16: s->u16 = upper ? UINT16_MAX : 0; break;
    case RT_U32: s->u32 = upper ? UINT32_MAX : 0; break;
    case RT_U64: s->u64 = upper ? UINT64_MAX : 0; break;
    default: break;
    }
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* An int bound in x's dtype, saturated to the dtype's range: it bounds exactly as before. */
static void scalar_from_int(rt_type type, int64_t v, rt_unary_scalar *s) {
    int64_t u = v < 0 ? 0 : v; /* for the unsigned types */
    switch (type) {
    case RT_F32: s->f32 = (float)v; break;
    case RT_F64: s->f64 = (double)v; break;
    case RT_I8: s->i8 = (int8_t)clamp_i64(v, INT8_MIN, INT8_MAX); break;
    case RT_I16: s->i16 = (int16_t)clamp_i64(v, INT16_MIN, INT16_MAX); break;
    case RT_I32: s->i32 = (int32_t)clamp_i64(v, INT32_MIN, INT32_MAX); break;
    case RT_I64: s->i64 = v; break;
    case RT_U8: s->u8 = (uint8_t)clamp_i64(u, 0, UINT8_MAX); break;
    case RT_U16: s->u16 = (uint16_t)clamp_i64(u, 0, UINT16_MAX); break;
    case RT_U32: s->u32 = (uint32_t)clamp_i64(u, 0, UINT32_MAX); break;
    case RT_U64: s->u64 = (uint64_t)u; break;
    default: break;
    }
}

/* Argument i of clip: a one-element tensor of x's dtype, an int, a double (float x only), or
 * none for no bound. */
static rt_status clip_bound(rt_op_ctx *ctx, size_t i, const char *what, const rt_tensor_value *x,
                            bool upper, rt_unary_scalar *s) {
    rt_value *v = i < ctx->nargs ? ctx->args[i] : NULL;
    int32_t kind = v ? v->kind : RT_VALUE_NONE;
    bool is_float = x->type == RT_F32 || x->type == RT_F64;
    if (kind == RT_VALUE_NONE) {
        scalar_limit(x->type, upper, s);
    } else if (kind == RT_VALUE_INT) {
        scalar_from_int(x->type, v->u.i, s);
    } else if (kind == RT_VALUE_DOUBLE && is_float) {
        if (x->type == RT_F32)
            s->f32 = (float)v->u.d;
        else
            s->f64 = v->u.d;
    } else if (kind == RT_VALUE_DOUBLE) {
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s is a double, but x has the integer dtype %s: pass an int or a "
                           "tensor",
                           what, rt_tensor__type_name(x->type));
    } else if (kind == RT_VALUE_TENSOR && v->u.t) {
        const rt_tensor_value *t = v->u.t;
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, t, what, x, "x"));
        if (rt_tensor__numel(t) != 1)
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "%s must hold exactly one element, not %lld", what,
                               (long long)rt_tensor__numel(t));
        if (!ctx->preparing) /* the contents are only there at run */
            memcpy(s, t->data, t->elem_size);
    } else {
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "argument %zu (%s) must be a tensor, an int, a double or none, not %s",
                           i, what, rt_value__kind_name(kind));
    }
    return RT_OK;
}

/* ---- elementwise ops -------------------------------------------------------------------- */

/* The parameters of kind (arguments 1 .. nparams); gelu picks its tanh form here. */
static rt_status unary_params(rt_op_ctx *ctx, rt_unary_kind *kind, const rt_tensor_value *x,
                              rt_unary_params *p) {
    bool tanh_form = false;
    switch (*kind) {
    case RT_UNARY_HARD_SIGMOID:
        RT_RETURN_IF_ERROR(rt_op__double(ctx, 1, "alpha", &p->alpha));
        return rt_op__double(ctx, 2, "beta", &p->beta);
    case RT_UNARY_LEAKY_RELU:
    case RT_UNARY_ELU:
        return rt_op__double(ctx, 1, "alpha", &p->alpha);
    case RT_UNARY_SELU:
        RT_RETURN_IF_ERROR(rt_op__double(ctx, 1, "alpha", &p->alpha));
        return rt_op__double(ctx, 2, "gamma", &p->beta);
    case RT_UNARY_GELU:
        RT_RETURN_IF_ERROR(rt_op__bool(ctx, 1, "approximate", &tanh_form));
        *kind = tanh_form ? RT_UNARY_GELU_TANH : RT_UNARY_GELU;
        return RT_OK;
    case RT_UNARY_ISINF:
        RT_RETURN_IF_ERROR(rt_op__bool(ctx, 1, "detect_positive", &p->detect_positive));
        return rt_op__bool(ctx, 2, "detect_negative", &p->detect_negative);
    case RT_UNARY_CLIP:
        RT_RETURN_IF_ERROR(clip_bound(ctx, 1, "min", x, false, &p->lo));
        return clip_bound(ctx, 2, "max", x, true, &p->hi);
    default:
        return RT_OK;
    }
}

typedef struct unary_job {
    rt_unary_kernel kernel;
    const rt_unary_params *params;
    char *out;
    const char *x;
    size_t out_size, x_size; /* element bytes */
} unary_job;

static void unary_range(void *arg, size_t begin, size_t end) {
    const unary_job *job = arg;
    job->kernel(job->out + begin * job->out_size, job->x + begin * job->x_size, end - begin,
                job->params);
}

static rt_status unary_op(rt_op_ctx *ctx, rt_unary_kind kind, bool run) {
    const unary_info *info = &unary_infos[kind];
    unary_args args;
    rt_unary_params params;
    memset(&params, 0, sizeof params);
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, info->nparams + 2));
    RT_RETURN_IF_ERROR(unary_tensors(ctx, info->types, info->types_text, info->bool_out, &args));
    RT_RETURN_IF_ERROR(unary_params(ctx, &kind, args.x, &params));
    if (!run)
        return RT_OK;
    unary_job job = {rt_ops__unary_kernel(kind, args.x->type), &params, args.out->data,
                     args.x->data, args.out->elem_size, args.x->elem_size};
    if (!job.kernel) /* the type checks in prepare make this unreachable */
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args.x->type));
    int64_t numel = rt_tensor__numel(args.out);
    if (numel > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)numel, rt_op__grain(info->cost),
                         unary_range, &job);
    return RT_OK;
}

#define DEFINE_UNARY_OP(symbol, kind)                     \
    rt_status rt_ops__##symbol##_prepare(rt_op_ctx *ctx) { \
        return unary_op(ctx, kind, false);                 \
    }                                                      \
    rt_status rt_ops__##symbol##_run(rt_op_ctx *ctx) {     \
        return unary_op(ctx, kind, true);                  \
    }

DEFINE_UNARY_OP(abs, RT_UNARY_ABS)
DEFINE_UNARY_OP(neg, RT_UNARY_NEG)
DEFINE_UNARY_OP(exp, RT_UNARY_EXP)
DEFINE_UNARY_OP(log, RT_UNARY_LOG)
DEFINE_UNARY_OP(sqrt, RT_UNARY_SQRT)
DEFINE_UNARY_OP(reciprocal, RT_UNARY_RECIPROCAL)
DEFINE_UNARY_OP(floor, RT_UNARY_FLOOR)
DEFINE_UNARY_OP(ceil, RT_UNARY_CEIL)
DEFINE_UNARY_OP(round, RT_UNARY_ROUND)
DEFINE_UNARY_OP(sign, RT_UNARY_SIGN)
DEFINE_UNARY_OP(sin, RT_UNARY_SIN)
DEFINE_UNARY_OP(cos, RT_UNARY_COS)
DEFINE_UNARY_OP(tan, RT_UNARY_TAN)
DEFINE_UNARY_OP(tanh, RT_UNARY_TANH)
DEFINE_UNARY_OP(erf, RT_UNARY_ERF)
DEFINE_UNARY_OP(sigmoid, RT_UNARY_SIGMOID)
DEFINE_UNARY_OP(hard_sigmoid, RT_UNARY_HARD_SIGMOID)
DEFINE_UNARY_OP(leaky_relu, RT_UNARY_LEAKY_RELU)
DEFINE_UNARY_OP(elu, RT_UNARY_ELU)
DEFINE_UNARY_OP(selu, RT_UNARY_SELU)
DEFINE_UNARY_OP(gelu, RT_UNARY_GELU)
DEFINE_UNARY_OP(softplus, RT_UNARY_SOFTPLUS)
DEFINE_UNARY_OP(softsign, RT_UNARY_SOFTSIGN)
DEFINE_UNARY_OP(hard_swish, RT_UNARY_HARD_SWISH)
DEFINE_UNARY_OP(mish, RT_UNARY_MISH)
DEFINE_UNARY_OP(silu, RT_UNARY_SILU)
DEFINE_UNARY_OP(clip, RT_UNARY_CLIP)
DEFINE_UNARY_OP(isnan, RT_UNARY_ISNAN)
DEFINE_UNARY_OP(isinf, RT_UNARY_ISINF)
DEFINE_UNARY_OP(logical_not, RT_UNARY_NOT)

/* ---- prelu ------------------------------------------------------------------------------ */

/* x's shape with slope's strides (0 where slope is broadcast), size-1 dimensions dropped and
 * neighbours merged where slope walks them as one. */
typedef struct prelu_plan {
    int32_t rank; /* >= 1 */
    int64_t sizes[RT_MAX_RANK];
    int64_t slope_strides[RT_MAX_RANK];
} prelu_plan;

static void plan_prelu(prelu_plan *plan, const rt_tensor_value *x, const rt_tensor_value *slope) {
    int64_t dense[RT_MAX_RANK];
    rt_tensor__dense_strides(dense, slope->rank, slope->sizes, NULL);
    int32_t lead = x->rank - slope->rank, n = 0;
    for (int32_t i = 0; i < x->rank; i++) {
        int64_t size = x->sizes[i];
        int32_t d = i - lead;
        int64_t stride = d >= 0 && slope->sizes[d] != 1 ? dense[d] : 0;
        if (size == 1)
            continue;
        if (n > 0 && plan->slope_strides[n - 1] == stride * size) {
            plan->sizes[n - 1] *= size;
            plan->slope_strides[n - 1] = stride;
            continue;
        }
        plan->sizes[n] = size;
        plan->slope_strides[n] = stride;
        n++;
    }
    if (n == 0) {
        plan->sizes[0] = 1;
        plan->slope_strides[0] = 0;
        n = 1;
    }
    plan->rank = n;
}

typedef struct prelu_job {
    const prelu_plan *plan;
    rt_prelu_kernel kernel;
    char *out;
    const char *x, *slope;
    size_t elem_size;
} prelu_job;

/* Elements [begin, end) of x, one innermost run at a time. */
static void prelu_range(void *arg, size_t begin, size_t end) {
    const prelu_job *job = arg;
    const prelu_plan *plan = job->plan;
    int32_t last = plan->rank - 1;
    int64_t index[RT_MAX_RANK], s_off = 0, rest = (int64_t)begin;
    for (int32_t d = last; d >= 0; d--) {
        index[d] = rest % plan->sizes[d];
        rest /= plan->sizes[d];
        s_off += index[d] * plan->slope_strides[d];
    }
    for (int64_t pos = (int64_t)begin; pos < (int64_t)end;) {
        int64_t n = plan->sizes[last] - index[last];
        if (n > (int64_t)end - pos)
            n = (int64_t)end - pos;
        job->kernel(job->out + (size_t)pos * job->elem_size, job->x + (size_t)pos * job->elem_size,
                    job->slope + (size_t)s_off * job->elem_size, plan->slope_strides[last], n);
        pos += n;
        index[last] += n;
        s_off += n * plan->slope_strides[last];
        for (int32_t d = last; d > 0 && index[d] == plan->sizes[d]; d--) {
            index[d] = 0;
            s_off -= plan->sizes[d] * plan->slope_strides[d];
            index[d - 1]++;
            s_off += plan->slope_strides[d - 1];
        }
    }
}

static rt_status prelu_op(rt_op_ctx *ctx, bool run) {
    unary_args args;
    rt_tensor_value *slope;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "slope", &slope));
    RT_RETURN_IF_ERROR(unary_tensors(ctx, NUMERIC, false, &args));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, slope, "slope", args.x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, slope, "slope"));
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, args.out, "out", slope, "slope",
                                                args.x->rank, args.x->sizes));
    /* slope broadcasts to x (ONNX's unidirectional broadcasting): the result is x's shape. */
    int32_t rank;
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(rt_op__broadcast_shape(ctx, args.x, slope, &rank, sizes));
    if (rank != args.x->rank || memcmp(sizes, args.x->sizes, (size_t)rank * sizeof *sizes)) {
        char ts[RT_OP_SHAPE_TEXT], tx[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "slope %s must broadcast to the shape of x %s",
                           rt_op__shape_text(slope->sizes, slope->rank, ts),
                           rt_op__shape_text(args.x->sizes, args.x->rank, tx));
    }
    if (!run || rt_tensor__numel(args.out) == 0)
        return RT_OK;
    prelu_plan plan;
    plan_prelu(&plan, args.x, slope);
    prelu_job job = {&plan, rt_ops__prelu_kernel(args.x->type), args.out->data, args.x->data,
                     slope->data, args.x->elem_size};
    if (!job.kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(args.x->type));
    rt_parallel__for(rt_op__threads(ctx), (size_t)rt_tensor__numel(args.out), rt_op__grain(1),
                     prelu_range, &job);
    return RT_OK;
}

rt_status rt_ops__prelu_prepare(rt_op_ctx *ctx) {
    return prelu_op(ctx, false);
}

rt_status rt_ops__prelu_run(rt_op_ctx *ctx) {
    return prelu_op(ctx, true);
}

/* ---- log_softmax and hardmax ------------------------------------------------------------ */

typedef struct axis_job {
    rt_axis_kernel kernel;
    void *out;
    const void *x;
    int64_t n, inner;
} axis_job;

static void axis_range(void *arg, size_t begin, size_t end) {
    const axis_job *job = arg;
    job->kernel(job->out, job->x, job->n, job->inner, begin, end);
}

/* x, axis, out: the op over the lines of x along axis. */
static rt_status axis_op(rt_op_ctx *ctx, rt_axis_kernel (*kernel_for)(rt_type), bool run) {
    unary_args args;
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(unary_tensors(ctx, FLOATS, false, &args));
    /* A 0-d tensor is one element: axis 0 or -1, as softmax. */
    const rt_tensor_value *x = args.x;
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank > 0 ? x->rank : 1, "axis", &axis));
    if (!run || rt_tensor__numel(x) == 0)
        return RT_OK;
    /* The products are bounded by the element count of x, which is not 0. */
    axis_job job = {kernel_for(x->type), args.out->data, x->data, 1, 1};
    int64_t outer = 1;
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < axis)
            outer *= x->sizes[d];
        else if (d == axis)
            job.n = x->sizes[d];
        else
            job.inner *= x->sizes[d];
    }
    if (!job.kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for dtype %s",
                           rt_tensor__type_name(x->type));
    rt_parallel__for(rt_op__threads(ctx), (size_t)(outer * job.inner), rt_op__grain(job.n * 4),
                     axis_range, &job);
    return RT_OK;
}

rt_status rt_ops__log_softmax_prepare(rt_op_ctx *ctx) {
    return axis_op(ctx, rt_ops__log_softmax_kernel, false);
}

rt_status rt_ops__log_softmax_run(rt_op_ctx *ctx) {
    return axis_op(ctx, rt_ops__log_softmax_kernel, true);
}

rt_status rt_ops__hardmax_prepare(rt_op_ctx *ctx) {
    return axis_op(ctx, rt_ops__hardmax_kernel, false);
}

rt_status rt_ops__hardmax_run(rt_op_ctx *ctx) {
    return axis_op(ctx, rt_ops__hardmax_kernel, true);
}
