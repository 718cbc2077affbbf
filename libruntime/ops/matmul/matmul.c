/* matmul.c: the matmul (numpy.matmul) and linear (x @ w^T + bias) operators: float32 runs on
 * the packed GEMM (gemm/), with constant operands packed once at load; other dtypes on the
 * loops in kernels/. */
#include <inttypes.h>
#include <string.h>

#include "ops/matmul/gemm/gemm.h"
#include "ops/matmul/matmul.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* ---- matmul: op ------------------------------------------------------------------------- */

#define MATMUL_TYPES (RT_TYPES_FLOAT | RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64))

typedef struct matmul_args {
    rt_tensor_value *a, *b, *out;
    rt_matmul_dims dims;
} matmul_args;

static rt_status matmul_setup(rt_op_ctx *ctx, matmul_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 3));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "a", &args->a));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "b", &args->b));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "out", &args->out));
    rt_tensor_value *a = args->a, *b = args->b, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, a, "a", MATMUL_TYPES,
                                            "float32, float64, int32 and int64"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, a, "a", b, "b"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", a, "a"));
    if (a->rank < 1 || b->rank < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "a has rank %" PRId32 " and b rank %" PRId32
                           "; matmul needs both at least 1-D",
                           a->rank, b->rank);
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, a, "a"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, b, "b"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", a, "a"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", b, "b"));

    int32_t rank;
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(rt_op__matmul_shape(ctx, a, b, &args->dims, &rank, sizes));
    return rt_op__set_output_sizes(ctx, out, "out", rank, sizes);
}

/* float32 goes through the packed GEMM; its packing buffers come from the method's scratch,
 * sized for as many threads as the pool can ever give one call (m = 0: B is packed ahead). */
static void request_gemm_scratch(rt_op_ctx *ctx, int64_t m, int64_t n, int64_t k) {
    ctx->scratch_bytes = rt_gemm__f32_scratch_bytes(m, n, k, rt_threadpool__hardware_threads());
}

static rt_gemm_f32_args matmul_gemm(const matmul_args *args, int64_t batch) {
    const rt_matmul_dims *d = &args->dims;
    int64_t a_off, b_off;
    rt_op__matmul_batch_offsets(d, batch, &a_off, &b_off);
    return (rt_gemm_f32_args){
        .m = d->m, .n = d->n, .k = d->k,
        .a = (const float *)args->a->data + a_off, .a_row_stride = d->k, .a_col_stride = 1,
        .b = (const float *)args->b->data + b_off, .b_row_stride = d->n, .b_col_stride = 1,
        .c = (float *)args->out->data + batch * d->m * d->n, .c_row_stride = d->n,
    };
}

/* b is the same matrix for every batch (a constant weight, maybe broadcast): pack it once. */
static bool matmul_b_is_shared(const matmul_args *args) {
    const rt_matmul_dims *d = &args->dims;
    int64_t a_off, b_off, a_last, b_last;
    rt_op__matmul_batch_offsets(d, 0, &a_off, &b_off);
    rt_op__matmul_batch_offsets(d, d->batch_count - 1, &a_last, &b_last);
    return b_off == b_last;
}

static void matmul_f32(const rt_op_ctx *ctx, const matmul_args *args) {
    int32_t threads = rt_op__slot_threads(ctx);
    for (int64_t batch = 0; batch < args->dims.batch_count; batch++) {
        rt_gemm_f32_args g = matmul_gemm(args, batch);
        g.packed_b = ctx->state;
        rt_gemm__f32(&g, ctx->scratch, ctx->scratch_bytes, threads);
    }
}

rt_status rt_ops__matmul_prepare(rt_op_ctx *ctx) {
    matmul_args args;
    RT_RETURN_IF_ERROR(matmul_setup(ctx, &args));
    if (args.a->type != RT_F32)
        return RT_OK;
    const rt_matmul_dims *d = &args.dims;
    bool pack_ahead = rt_op__is_constant(args.b) && d->batch_count > 0 && matmul_b_is_shared(&args);
    request_gemm_scratch(ctx, pack_ahead ? 0 : d->m, d->n, d->k);
    if (pack_ahead) {
        rt_gemm_f32_args g = matmul_gemm(&args, 0);
        float *packed =
            rt_op__alloc_state(ctx, rt_gemm__f32_packed_b_floats(d->k, d->n) * sizeof(float));
        if (packed != NULL)
            rt_gemm__f32_pack_b(&g, packed);
    }
    return RT_OK;
}

rt_status rt_ops__matmul_run(rt_op_ctx *ctx) {
    matmul_args args;
    RT_RETURN_IF_ERROR(matmul_setup(ctx, &args));
    const rt_matmul_dims *dims = &args.dims;
    if (dims->batch_count == 0 || dims->m == 0 || dims->n == 0)
        return RT_OK;
    if (args.a->type == RT_F32) {
        matmul_f32(ctx, &args);
        return RT_OK;
    }
    if (!rt_matmul__tiles(dims, args.a->type, args.a->data, args.b->data, args.out->data,
                          rt_op__threads(ctx)))
        return rt_op__fail(ctx, RT_INTERNAL, "no matmul kernel for dtype %s",
                           rt_tensor__type_name(args.a->type));
    return RT_OK;
}

/* ---- linear ----------------------------------------------------------------------------- */

typedef struct linear_args {
    rt_tensor_value *x, *w, *bias, *out;
    int64_t rows, k, n;
    rt_activation act; /* linear_act only */
} linear_args;

static rt_status linear_check_types(rt_op_ctx *ctx, const linear_args *args) {
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->w, "w", args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->out, "out", args->x, "x"));
    if (args->x->rank < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "x has rank 0; linear needs at least 1-D input");
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->w, "w", 2));
    if (args->bias) {
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, args->bias, "bias", args->x, "x"));
        RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->bias, "bias", 1));
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->bias, "bias"));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->bias, "bias"));
    }
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->w, "w"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, args->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->x, "x"));
    return rt_op__check_disjoint(ctx, args->out, "out", args->w, "w");
}

/* linear(x, w, bias, out) and linear_act(x, w, bias, activation, lo, hi, out). */
static rt_status linear_setup(rt_op_ctx *ctx, linear_args *args, bool fused) {
    size_t out_index = fused ? 6 : 3;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, out_index + 1));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "w", &args->w));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &args->bias));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, out_index, "out", &args->out));
    RT_RETURN_IF_ERROR(linear_check_types(ctx, args));
    args->act = (rt_activation){RT_ACT_NONE, 0.0f, 0.0f};
    if (fused) {
        RT_RETURN_IF_ERROR(rt_op__activation(ctx, 3, &args->act));
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, args->x, "x", RT_F32));
    }

    const rt_tensor_value *x = args->x, *w = args->w;
    args->k = x->sizes[x->rank - 1];
    args->n = w->sizes[0];
    char tx[RT_OP_SHAPE_TEXT], tw[RT_OP_SHAPE_TEXT];
    if (w->sizes[1] != args->k)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "x %s and w %s do not match: w must be [out_features, %" PRId64 "]",
                           rt_op__shape_text(x->sizes, x->rank, tx),
                           rt_op__shape_text(w->sizes, w->rank, tw), args->k);
    if (args->bias && args->bias->sizes[0] != args->n)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "bias has %" PRId64 " elements, but w %s has %" PRId64
                           " output features",
                           args->bias->sizes[0], rt_op__shape_text(w->sizes, w->rank, tw), args->n);

    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, x->sizes, (size_t)x->rank * sizeof *sizes);
    sizes[x->rank - 1] = args->n;
    if (!rt_tensor__checked_numel(x->sizes, x->rank - 1, &args->rows))
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the leading dimensions of x overflow int64");
    return rt_op__set_output_sizes(ctx, args->out, "out", x->rank, sizes);
}

/* x [rows, K] @ w^T: w read as a [K, N] matrix with row stride 1 and column stride K. */
static rt_gemm_f32_args linear_gemm(const rt_op_ctx *ctx, const linear_args *args) {
    return (rt_gemm_f32_args){
        .m = args->rows, .n = args->n, .k = args->k,
        .a = args->x->data, .a_row_stride = args->k, .a_col_stride = 1,
        .b = args->w->data, .b_row_stride = 1, .b_col_stride = args->k,
        .c = args->out->data, .c_row_stride = args->n,
        .column_bias = args->bias ? args->bias->data : NULL,
        .activation = args->act,
        .packed_b = ctx->state,
    };
}

static rt_status linear_prepare(rt_op_ctx *ctx, bool fused) {
    linear_args args;
    RT_RETURN_IF_ERROR(linear_setup(ctx, &args, fused));
    if (args.x->type != RT_F32)
        return RT_OK;
    request_gemm_scratch(ctx, rt_op__is_constant(args.w) ? 0 : args.rows, args.n, args.k);
    /* Constant weights are packed once here instead of on every call. */
    if (rt_op__is_constant(args.w)) {
        rt_gemm_f32_args g = linear_gemm(ctx, &args);
        float *packed = rt_op__alloc_state(
            ctx, rt_gemm__f32_packed_b_floats(args.k, args.n) * sizeof(float));
        if (packed != NULL)
            rt_gemm__f32_pack_b(&g, packed);
    }
    return RT_OK;
}

static void linear_f32(const rt_op_ctx *ctx, const linear_args *args) {
    rt_gemm_f32_args g = linear_gemm(ctx, args);
    rt_gemm__f32(&g, ctx->scratch, ctx->scratch_bytes, rt_op__slot_threads(ctx));
}

static rt_status linear_run(rt_op_ctx *ctx, bool fused) {
    linear_args args;
    RT_RETURN_IF_ERROR(linear_setup(ctx, &args, fused));
    if (args.rows == 0 || args.n == 0)
        return RT_OK;
    if (args.x->type == RT_F32) {
        linear_f32(ctx, &args);
        return RT_OK;
    }
    rt_matmul__linear_dot(args.x->type, args.x->data, args.w->data,
                          args.bias ? args.bias->data : NULL, args.out->data, args.rows, args.k,
                          args.n, rt_op__threads(ctx));
    return RT_OK;
}

rt_status rt_ops__linear_prepare(rt_op_ctx *ctx) { return linear_prepare(ctx, false); }

rt_status rt_ops__linear_run(rt_op_ctx *ctx) { return linear_run(ctx, false); }

rt_status rt_ops__linear_act_prepare(rt_op_ctx *ctx) { return linear_prepare(ctx, true); }

rt_status rt_ops__linear_act_run(rt_op_ctx *ctx) { return linear_run(ctx, true); }
