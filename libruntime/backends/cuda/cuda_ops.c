/* cuda_ops.c: the CUDA side of the elementwise, normalisation and reduction ops, and the
 * table of every op the CUDA backend covers (movement ops in cuda_ops_movement.c, products,
 * convolutions and pooling in cuda_ops_nn.c).
 *
 * Each run first calls the op's own (CPU) prepare, which checks the arguments for the current
 * sizes and gives the outputs their sizes, exactly as the CPU run does. Prepares read no tensor
 * contents except parameters given as tensors (clip bounds, axes, shapes), which are read back
 * to host copies first (rt_cuda__with_host_params), so they work on device tensors. Then the
 * run launches on the method's stream. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/int_param.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define ARG_T(ctx, i) ((ctx)->args[i]->u.t)

/* ---- shared checks ------------------------------------------------------------------ */

rt_status rt_cuda__check_types(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                               uint32_t types, const char *expected) {
    if (types & (1u << (unsigned)t->type))
        return RT_OK;
    return rt_op__fail(ctx, RT_UNSUPPORTED, "%s has dtype %s; the CUDA kernel covers %s (run "
                       "the method on the cpu for it)", what, rt_tensor__type_name(t->type),
                       expected);
}

rt_status rt_cuda__host_params_begin(rt_op_ctx *ctx, rt_cuda_method *cm, const size_t *indices,
                                     size_t count, rt_cuda_host_params *state) {
    memset(state, 0, sizeof *state);
    size_t offsets[RT_CUDA_HOST_PARAMS], total = 0;
    for (size_t k = 0; k < count && k < RT_CUDA_HOST_PARAMS; k++) {
        size_t i = indices[k];
        if (i >= ctx->nargs || ctx->args[i]->kind != RT_VALUE_TENSOR)
            continue;
        rt_tensor_value *t = ctx->args[i]->u.t;
        bool seen = false; /* one tensor named twice is read once */
        for (size_t q = 0; q < state->count; q++)
            seen = seen || state->params[q] == t;
        if (seen)
            continue;
        state->params[state->count] = t;
        offsets[state->count++] = total;
        total += (rt_tensor__nbytes(t) + 7) / 8 * 8;
    }
    if (state->count == 0)
        return RT_OK;
    state->host = malloc(total > 0 ? total : 8);
    if (state->host == NULL) {
        state->count = 0;
        return rt_error__oom("parameters read back from the device");
    }
    const rt_cuda_driver *cu = cm->device->cu;
    rt_status status = RT_OK;
    for (size_t k = 0; k < state->count && status == RT_OK; k++) {
        size_t bytes = rt_tensor__nbytes(state->params[k]);
        if (bytes > 0)
            status = rt_cuda__check(cu->memcpy_dtoh_async(state->host + offsets[k],
                                                          (CUdeviceptr)(uintptr_t)
                                                          state->params[k]->data, bytes,
                                                          cm->stream),
                                    "reading parameters back");
    }
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading parameters back");
    if (status != RT_OK) {
        free(state->host);
        state->host = NULL;
        state->count = 0;
        return rt_op__fail(ctx, status, "could not read its tensor parameters back");
    }
    for (size_t k = 0; k < state->count; k++) {
        state->device[k] = state->params[k]->data;
        state->params[k]->data = state->host + offsets[k];
    }
    return RT_OK;
}

void rt_cuda__host_params_end(rt_cuda_host_params *state) {
    for (size_t k = 0; k < state->count; k++)
        state->params[k]->data = state->device[k];
    free(state->host);
    memset(state, 0, sizeof *state);
}

rt_status rt_cuda__with_host_params(rt_op_ctx *ctx, rt_cuda_method *cm, const size_t *indices,
                                    size_t count,
                                    rt_status (*run)(rt_op_ctx *ctx, rt_cuda_method *cm)) {
    for (size_t k = 0; k < count; k++) {
        size_t i = indices[k];
        if (i >= ctx->nargs || ctx->args[i]->kind != RT_VALUE_TENSOR)
            continue;
        for (size_t j = 0; j < ctx->nargs; j++) {
            bool is_param = false;
            for (size_t q = 0; q < count; q++)
                is_param = is_param || indices[q] == j;
            if (!is_param && ctx->args[j]->kind == RT_VALUE_TENSOR &&
                ctx->args[j]->u.t == ctx->args[i]->u.t)
                return rt_op__fail(ctx, RT_UNSUPPORTED, "argument %zu is both a parameter read "
                                   "on the host and argument %zu; on CUDA, pass a copy", i, j);
        }
    }
    rt_cuda_host_params state;
    RT_RETURN_IF_ERROR(rt_cuda__host_params_begin(ctx, cm, indices, count, &state));
    rt_status status = run(ctx, cm);
    rt_cuda__host_params_end(&state);
    return status;
}

rt_status rt_cuda__read_count(rt_op_ctx *ctx, rt_cuda_method *cm, const int64_t *device,
                             int64_t *count, const char *what) {
    const rt_cuda_driver *cu = cm->device->cu;
    rt_status status = rt_cuda__check(cu->memcpy_dtoh_async(count, (CUdeviceptr)(uintptr_t)device,
                                                           sizeof *count, cm->stream),
                                      "reading a count back");
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading a count back");
    if (status != RT_OK)
        return rt_op__fail(ctx, status, "could not read the count of %s", what);
    return RT_OK;
}

/* run_name: `run` with the listed arguments read back when they are tensors. */
#define HOST_PARAMS(run_name, run, ...)                                                  \
    static rt_status run_name(rt_op_ctx *ctx, rt_cuda_method *cm) {                      \
        static const size_t params[] = {__VA_ARGS__};                                    \
        return rt_cuda__with_host_params(ctx, cm, params, sizeof params / sizeof params[0], \
                                         run);                                          \
    }

static rt_status check_float_x(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "x", RT_TYPES_FLOAT, "float32 and float64");
}

static rt_status check_float_q(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "q", RT_TYPES_FLOAT, "float32 and float64");
}

/* abs, neg, sign, relu, clip: also their integer forms (the op's prepare narrows further). */
static rt_status check_numeric_x(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "x", RT_TYPES_NUMERIC,
                                "float32, float64 and the integer types");
}

/* ---- binary ------------------------------------------------------------------------- */

/* a op b into the last argument, the output (not: a is also b). */
static rt_status binary(rt_op_ctx *ctx, rt_cuda_method *cm, int kind) {
    const rt_tensor_value *a = ARG_T(ctx, 0), *b = ARG_T(ctx, kind == RT_CUDA_NOT ? 0 : 1);
    const rt_tensor_value *out = ARG_T(ctx, ctx->nargs - 1);
    rt_cuda_binary_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    p.kind = kind;
    int64_t sa[RT_MAX_RANK], sb[RT_MAX_RANK];
    rt_broadcast__aligned_strides(sa, a, out->rank);
    rt_broadcast__aligned_strides(sb, b, out->rank);
    /* Size-1 dimensions drop out; the kernel walks the rest in row-major order. */
    for (int32_t d = 0; d < out->rank; d++) {
        if (out->sizes[d] == 1)
            continue;
        p.sizes[p.rank] = out->sizes[d];
        p.a_strides[p.rank] = sa[d];
        p.b_strides[p.rank] = sb[d];
        p.rank++;
    }
    if (p.rank == 0) {
        p.rank = 1;
        p.sizes[0] = 1;
    }
    p.a = a->data;
    p.b = b->data;
    p.out = out->data;
    rt_cuda_kernel k;
    if (kind == RT_CUDA_POW_MIXED) { /* bases float32, float64, int32, int64 (prepare) */
        p.b_type = (int32_t)b->type;
        k = a->type == RT_F32   ? RT_CUDA_K_pow_mixed_f32
            : a->type == RT_F64 ? RT_CUDA_K_pow_mixed_f64
            : a->type == RT_I32 ? RT_CUDA_K_pow_mixed_i32 : RT_CUDA_K_pow_mixed_i64;
        return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n, 256), 1, 1, &p);
    }
    bool shift = kind == RT_CUDA_SHIFT_LEFT || kind == RT_CUDA_SHIFT_RIGHT;
    switch (shift ? (int)a->type + 100 : (int)a->type) {
    case RT_I8 + 100: k = RT_CUDA_K_shift_i8; break;
    case RT_I16 + 100: k = RT_CUDA_K_shift_i16; break;
    case RT_I32 + 100: k = RT_CUDA_K_shift_i32; break;
    case RT_I64 + 100: k = RT_CUDA_K_shift_i64; break;
    case RT_U8 + 100: k = RT_CUDA_K_shift_u8; break;
    case RT_U16 + 100: k = RT_CUDA_K_shift_u16; break;
    case RT_U32 + 100: k = RT_CUDA_K_shift_u32; break;
    case RT_U64 + 100: k = RT_CUDA_K_shift_u64; break;
    case RT_F32: k = RT_CUDA_K_binary_f32; break;
    case RT_F64: k = RT_CUDA_K_binary_f64; break;
    case RT_I8: k = RT_CUDA_K_binary_i8; break;
    case RT_I16: k = RT_CUDA_K_binary_i16; break;
    case RT_I32: k = RT_CUDA_K_binary_i32; break;
    case RT_I64: k = RT_CUDA_K_binary_i64; break;
    case RT_U8: k = RT_CUDA_K_binary_u8; break;
    case RT_U16: k = RT_CUDA_K_binary_u16; break;
    case RT_U32: k = RT_CUDA_K_binary_u32; break;
    case RT_U64: k = RT_CUDA_K_binary_u64; break;
    case RT_BOOL: k = RT_CUDA_K_binary_bool; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA binary kernel for this dtype");
    }
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n, 256), 1, 1, &p);
}

/* The op's prepare narrows these to its own dtypes (pow's base: float32, float64, int32,
 * int64). */
static rt_status check_binary(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "a", RT_TYPES_NUMERIC,
                                "float32, float64 and the integer types");
}

/* div, mod: integer divisors are checked for a 0 on the device first, the flag living in the
 * method's device scratch. */
static rt_status check_div(rt_op_ctx *ctx) {
    RT_RETURN_IF_ERROR(check_binary(ctx));
    if (rt_tensor__type_is_integer(ARG_T(ctx, 0)->type))
        rt_cuda__reserve_scratch(ctx->backend, sizeof(int64_t));
    return RT_OK;
}

/* Fails with the CPU's message when the integer b holds a 0, before anything is written. */
static rt_status check_no_zero_divisor(rt_op_ctx *ctx, rt_cuda_method *cm, const char *what) {
    const rt_tensor_value *b = ARG_T(ctx, 1), *out = ARG_T(ctx, ctx->nargs - 1);
    if (!rt_tensor__type_is_integer(b->type) || rt_tensor__numel(out) == 0)
        return RT_OK;
    const rt_cuda_driver *cu = cm->device->cu;
    rt_cuda_any_zero_params p = {rt_tensor__numel(b), b->data, cm->scratch};
    int64_t flag = 0;
    rt_status status = rt_cuda__check(cu->memset_d8_async((CUdeviceptr)(uintptr_t)p.flag, 0,
                                                          sizeof flag, cm->stream),
                                      "clearing the zero-divisor flag");
    if (status != RT_OK)
        return rt_op__fail(ctx, status, "could not check b for zeros");
    RT_RETURN_IF_ERROR(rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_any_zero_1, b->elem_size, p.n,
                                                &p));
    status = rt_cuda__check(cu->memcpy_dtoh_async(&flag, (CUdeviceptr)(uintptr_t)p.flag,
                                                  sizeof flag, cm->stream),
                            "reading the zero-divisor flag");
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream),
                                "reading the zero-divisor flag");
    if (status != RT_OK)
        return rt_op__fail(ctx, status, "could not check b for zeros");
    if (flag != 0)
        return rt_op__fail(ctx, RT_INVALID_ARGUMENT, "integer %s by zero (b holds a 0)", what);
    return RT_OK;
}

#define DEFINE_BINARY(symbol, kind)                                           \
    static rt_status run_##symbol(rt_op_ctx *ctx, rt_cuda_method *cm) {       \
        RT_RETURN_IF_ERROR(rt_ops__##symbol##_prepare(ctx));                  \
        return binary(ctx, cm, kind);                                         \
    }
DEFINE_BINARY(add, RT_CUDA_ADD)
DEFINE_BINARY(sub, RT_CUDA_SUB)
DEFINE_BINARY(mul, RT_CUDA_MUL)
DEFINE_BINARY(less, RT_CUDA_LESS)
DEFINE_BINARY(equal, RT_CUDA_EQUAL)
DEFINE_BINARY(less_equal, RT_CUDA_LESS_EQUAL)
DEFINE_BINARY(minimum, RT_CUDA_MIN)
DEFINE_BINARY(maximum, RT_CUDA_MAX)
DEFINE_BINARY(prelu, RT_CUDA_PRELU)
DEFINE_BINARY(logical_and, RT_CUDA_AND)
DEFINE_BINARY(logical_or, RT_CUDA_OR)
DEFINE_BINARY(logical_xor, RT_CUDA_XOR)
DEFINE_BINARY(logical_not, RT_CUDA_NOT)
DEFINE_BINARY(bit_shift_left, RT_CUDA_SHIFT_LEFT)
DEFINE_BINARY(bit_shift_right, RT_CUDA_SHIFT_RIGHT)

static rt_status check_equal(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "a", RT_TYPES_NUMERIC | RT_TYPE_BIT(RT_BOOL),
                                "float32, float64, the integer types and bool");
}

static rt_status check_prelu(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "x", RT_TYPES_NUMERIC,
                                "float32, float64 and the integer types");
}

static rt_status run_div(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__div_prepare(ctx));
    RT_RETURN_IF_ERROR(check_no_zero_divisor(ctx, cm, "division"));
    return binary(ctx, cm, RT_CUDA_DIV);
}

/* An exponent of another dtype than the base's goes to the pow_mixed kernels. */
static rt_status run_pow(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__pow_prepare(ctx));
    const rt_tensor_value *a = ARG_T(ctx, 0), *b = ARG_T(ctx, 1);
    if (a->type == b->type)
        return binary(ctx, cm, RT_CUDA_POW);
    return binary(ctx, cm, RT_CUDA_POW_MIXED);
}

/* ---- shape, size: host-known values written to the device -------------------------- */

static rt_status write_ints(rt_op_ctx *ctx, rt_cuda_method *cm, void *dst, const int64_t *v,
                            size_t count) {
    if (count == 0)
        return RT_OK;
    /* From pageable memory the driver takes the bytes before it returns. */
    rt_status status = rt_cuda__check(cm->device->cu->memcpy_htod_async(
                                          (CUdeviceptr)(uintptr_t)dst, v, count * sizeof *v,
                                          cm->stream),
                                      "writing to the device");
    return status == RT_OK ? RT_OK : rt_op__fail(ctx, status, "could not write the result");
}

static rt_status run_shape(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__shape_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    int64_t start;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "start", &start));
    /* prepare gave out the clamped count; the first item clamps the same way */
    start = start < 0 ? start + x->rank : start;
    start = start < 0 ? 0 : start > x->rank ? x->rank : start;
    return write_ints(ctx, cm, out->data, x->sizes + start, (size_t)out->sizes[0]);
}

static rt_status run_size(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__size_prepare(ctx));
    int64_t numel = rt_tensor__numel(ARG_T(ctx, 0));
    return write_ints(ctx, cm, ARG_T(ctx, 1)->data, &numel, 1);
}

/* ---- mod: an integer divisor of 0 is an error, found on the device before the kernel runs */

static rt_status run_mod(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__mod_prepare(ctx));
    RT_RETURN_IF_ERROR(check_no_zero_divisor(ctx, cm, "modulo"));
    bool fmod_form;
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "fmod", &fmod_form));
    return binary(ctx, cm, fmod_form ? RT_CUDA_MOD_TRUNC : RT_CUDA_MOD_FLOOR);
}

/* ---- where -------------------------------------------------------------------------- */

static rt_status run_where(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__where_prepare(ctx));
    const rt_tensor_value *out = ARG_T(ctx, 3);
    rt_cuda_where_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    int64_t strides[3][RT_MAX_RANK];
    for (int k = 0; k < 3; k++)
        rt_broadcast__aligned_strides(strides[k], ARG_T(ctx, k), out->rank);
    for (int32_t d = 0; d < out->rank; d++) {
        if (out->sizes[d] == 1)
            continue;
        p.sizes[p.rank] = out->sizes[d];
        for (int k = 0; k < 3; k++)
            p.strides[k][p.rank] = strides[k][d];
        p.rank++;
    }
    if (p.rank == 0) {
        p.rank = 1;
        p.sizes[0] = 1;
    }
    p.cond = ARG_T(ctx, 0)->data;
    p.a = ARG_T(ctx, 1)->data;
    p.b = ARG_T(ctx, 2)->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_where_1, out->elem_size, p.n, &p);
}

/* ---- unary -------------------------------------------------------------------------- */

/* A clip bound: none (no bound), an int, a double, or a one-element tensor of x's dtype
 * (float32 or float64) read back to the host (rt_cuda__with_host_params). */
static double clip_bound(const rt_op_ctx *ctx, size_t i, double none) {
    const rt_value *v = i < ctx->nargs ? ctx->args[i] : NULL;
    if (v != NULL && v->kind == RT_VALUE_INT)
        return (double)v->u.i;
    if (v != NULL && v->kind == RT_VALUE_DOUBLE)
        return v->u.d;
    if (v != NULL && v->kind == RT_VALUE_TENSOR) /* prepare checked: one element of x's dtype */
        return v->u.t->type == RT_F32 ? (double)*(const float *)v->u.t->data
                                      : *(const double *)v->u.t->data;
    return none;
}

/* An integer clip bound in x's dtype, as the CPU takes it: none is the dtype's limit, an int
 * saturates to its range, a tensor (read back to the host) holds x's dtype. Signed values as
 * int64, unsigned ones as uint64 bits. */
static int64_t int_clip_bound(const rt_op_ctx *ctx, size_t i, rt_type type, bool upper) {
    const rt_value *v = i < ctx->nargs ? ctx->args[i] : NULL;
    bool is_signed = (RT_TYPES_SIGNED >> (unsigned)type) & 1u;
    size_t bits = 8 * rt_tensor__type_size(type);
    int64_t smax = bits == 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
    int64_t smin = -smax - 1;
    uint64_t umax = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    if (v != NULL && v->kind == RT_VALUE_TENSOR) {
        const void *d = v->u.t->data;
        switch (type) {
        case RT_I8: return *(const int8_t *)d;
        case RT_I16: return *(const int16_t *)d;
        case RT_I32: return *(const int32_t *)d;
        case RT_I64: return *(const int64_t *)d;
        case RT_U8: return *(const uint8_t *)d;
        case RT_U16: return *(const uint16_t *)d;
        case RT_U32: return *(const uint32_t *)d;
        default: return (int64_t)*(const uint64_t *)d;
        }
    }
    if (v != NULL && v->kind == RT_VALUE_INT) {
        int64_t b = v->u.i;
        if (is_signed)
            return b < smin ? smin : b > smax ? smax : b;
        return b < 0 ? 0 : (uint64_t)b > umax ? (int64_t)umax : b;
    }
    if (is_signed)
        return upper ? smax : smin;
    return upper ? (int64_t)umax : 0;
}

static rt_status unary_int(rt_op_ctx *ctx, rt_cuda_method *cm, int kind) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, ctx->nargs - 1);
    rt_cuda_unary_int_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    p.kind = kind;
    if (kind == RT_CUDA_CLIP) {
        p.lo = int_clip_bound(ctx, 1, x->type, false);
        p.hi = int_clip_bound(ctx, 2, x->type, true);
    }
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k;
    switch (x->type) {
    case RT_I8: k = RT_CUDA_K_unary_int_i8; break;
    case RT_I16: k = RT_CUDA_K_unary_int_i16; break;
    case RT_I32: k = RT_CUDA_K_unary_int_i32; break;
    case RT_I64: k = RT_CUDA_K_unary_int_i64; break;
    case RT_U8: k = RT_CUDA_K_unary_int_u8; break;
    case RT_U16: k = RT_CUDA_K_unary_int_u16; break;
    case RT_U32: k = RT_CUDA_K_unary_int_u32; break;
    case RT_U64: k = RT_CUDA_K_unary_int_u64; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA integer kernel for this dtype");
    }
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n, 256), 1, 1, &p);
}

static rt_status unary(rt_op_ctx *ctx, rt_cuda_method *cm, int kind) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, ctx->nargs - 1);
    if (rt_tensor__type_is_integer(x->type))
        return unary_int(ctx, cm, kind);
    rt_cuda_unary_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    p.kind = kind;
    bool flag = false;
    switch (kind) {
    case RT_CUDA_HARD_SIGMOID:
    case RT_CUDA_SELU:
        RT_RETURN_IF_ERROR(rt_op__double(ctx, 1, "alpha", &p.alpha));
        RT_RETURN_IF_ERROR(rt_op__double(ctx, 2, "beta", &p.beta));
        break;
    case RT_CUDA_LEAKY_RELU:
    case RT_CUDA_ELU:
        RT_RETURN_IF_ERROR(rt_op__double(ctx, 1, "alpha", &p.alpha));
        break;
    case RT_CUDA_GELU:
        RT_RETURN_IF_ERROR(rt_op__bool(ctx, 1, "approximate", &flag));
        p.kind = flag ? RT_CUDA_GELU_TANH : RT_CUDA_GELU;
        break;
    case RT_CUDA_ISINF:
        RT_RETURN_IF_ERROR(rt_op__bool(ctx, 1, "detect_positive", &flag));
        p.detect_positive = flag;
        RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "detect_negative", &flag));
        p.detect_negative = flag;
        break;
    case RT_CUDA_CLIP:
        p.lo = clip_bound(ctx, 1, -INFINITY);
        p.hi = clip_bound(ctx, 2, INFINITY);
        break;
    default: break;
    }
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_unary_f32 : RT_CUDA_K_unary_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n, 256), 1, 1, &p);
}

#define DEFINE_UNARY(symbol, kind)                                            \
    static rt_status run_##symbol(rt_op_ctx *ctx, rt_cuda_method *cm) {       \
        RT_RETURN_IF_ERROR(rt_ops__##symbol##_prepare(ctx));                  \
        return unary(ctx, cm, kind);                                          \
    }
#define UNARY_OPS(X)                                                                          \
    X(abs, RT_CUDA_ABS) X(neg, RT_CUDA_NEG) X(exp, RT_CUDA_EXP) X(log, RT_CUDA_LOG)            \
    X(sqrt, RT_CUDA_SQRT) X(reciprocal, RT_CUDA_RECIPROCAL) X(floor, RT_CUDA_FLOOR)            \
    X(ceil, RT_CUDA_CEIL) X(round, RT_CUDA_ROUND) X(sign, RT_CUDA_SIGN) X(sin, RT_CUDA_SIN)    \
    X(cos, RT_CUDA_COS) X(tan, RT_CUDA_TAN) X(tanh, RT_CUDA_TANH) X(erf, RT_CUDA_ERF)          \
    X(sigmoid, RT_CUDA_SIGMOID) X(hard_sigmoid, RT_CUDA_HARD_SIGMOID)                          \
    X(leaky_relu, RT_CUDA_LEAKY_RELU) X(elu, RT_CUDA_ELU) X(selu, RT_CUDA_SELU)                \
    X(gelu, RT_CUDA_GELU) X(softplus, RT_CUDA_SOFTPLUS) X(softsign, RT_CUDA_SOFTSIGN)          \
    X(hard_swish, RT_CUDA_HARD_SWISH) X(mish, RT_CUDA_MISH) X(isnan, RT_CUDA_ISNAN)            \
    X(isinf, RT_CUDA_ISINF) X(relu, RT_CUDA_RELU) X(silu, RT_CUDA_SILU)
UNARY_OPS(DEFINE_UNARY)
static rt_status run_clip_with_host_bounds(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__clip_prepare(ctx));
    return unary(ctx, cm, RT_CUDA_CLIP);
}
HOST_PARAMS(run_clip, run_clip_with_host_bounds, 1, 2)

/* ---- softmax, log_softmax ----------------------------------------------------------- */

static rt_status softmax(rt_op_ctx *ctx, rt_cuda_method *cm, bool log) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 2);
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank > 0 ? x->rank : 1, "axis", &axis));
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    rt_cuda_softmax_params p;
    memset(&p, 0, sizeof p);
    p.outer = p.n = p.inner = 1;
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < axis)
            p.outer *= x->sizes[d];
        else if (d == axis)
            p.n = x->sizes[d];
        else
            p.inner *= x->sizes[d];
    }
    p.log = log;
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_softmax_f32 : RT_CUDA_K_softmax_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.outer * p.inner, 1), 1, 1, &p);
}

static rt_status run_softmax(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__softmax_prepare(ctx));
    return softmax(ctx, cm, false);
}

static rt_status run_log_softmax(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__log_softmax_prepare(ctx));
    return softmax(ctx, cm, true);
}

/* ---- layer_norm, rms_norm ----------------------------------------------------------- */

/* x as rows of the dims before the axis (argument axis_index) by the dims from it on. */
static rt_status norm_rows(rt_op_ctx *ctx, const rt_tensor_value *x, size_t axis_index,
                           int64_t *rows, int64_t *len) {
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, axis_index, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank, "axis", &axis));
    *rows = *len = 1;
    for (int32_t d = 0; d < x->rank; d++)
        *(d < axis ? rows : len) *= x->sizes[d];
    return RT_OK;
}

static rt_status run_layer_norm(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__layer_norm_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 5);
    rt_tensor_value *scale, *bias;
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 1, "scale", &scale));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &bias));
    rt_cuda_layer_norm_params p;
    memset(&p, 0, sizeof p);
    RT_RETURN_IF_ERROR(norm_rows(ctx, x, 3, &p.rows, &p.len));
    if (p.rows == 0)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__double(ctx, 4, "epsilon", &p.eps));
    p.x = x->data;
    p.out = out->data;
    p.scale = scale ? scale->data : NULL;
    p.bias = bias ? bias->data : NULL;
    p.scale_period = scale ? rt_tensor__numel(scale) : 1;
    p.bias_period = bias ? rt_tensor__numel(bias) : 1;
    /* A zero-length row has an empty parameter; no element of it is ever read. */
    if (p.scale_period == 0)
        p.scale_period = 1;
    if (p.bias_period == 0)
        p.bias_period = 1;
    if (ctx->nargs == 8) {
        p.mean = ARG_T(ctx, 6)->data;
        p.inv_std = ARG_T(ctx, 7)->data;
    }
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_layer_norm_f32 : RT_CUDA_K_layer_norm_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.rows, 1), 1, 1, &p);
}

static rt_status run_rms_norm(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__rms_norm_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 4);
    rt_tensor_value *scale;
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 1, "scale", &scale));
    rt_cuda_rms_norm_params p;
    memset(&p, 0, sizeof p);
    RT_RETURN_IF_ERROR(norm_rows(ctx, x, 2, &p.rows, &p.len));
    if (p.rows == 0 || p.len == 0)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__double(ctx, 3, "epsilon", &p.eps));
    p.x = x->data;
    p.out = out->data;
    p.scale = scale ? scale->data : NULL;
    p.scale_period = scale ? rt_tensor__numel(scale) : 1;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_rms_norm_f32 : RT_CUDA_K_rms_norm_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.rows, 1), 1, 1, &p);
}

/* ---- instance_norm, group_norm ------------------------------------------------------ */

static rt_status channel_norm(rt_op_ctx *ctx, rt_cuda_method *cm, bool grouped) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, grouped ? 5 : 4);
    rt_tensor_value *scale, *bias;
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 1, "scale", &scale));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &bias));
    rt_cuda_channel_norm_params p;
    memset(&p, 0, sizeof p);
    int64_t channels = x->sizes[1];
    p.groups = channels > 0 ? channels : 1;
    if (grouped)
        RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "num_groups", &p.groups));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, grouped ? 4 : 3, "epsilon", &p.eps));
    p.spatial = 1;
    for (int32_t d = 2; d < x->rank; d++)
        p.spatial *= x->sizes[d];
    p.group_channels = channels / p.groups;
    p.rows = channels > 0 ? x->sizes[0] * p.groups : 0;
    if (p.rows == 0)
        return RT_OK;
    /* prepare checked the counts: per channel, or (group_norm) both per group */
    const rt_tensor_value *param = scale ? scale : bias;
    p.per_group = param != NULL && param->sizes[0] != channels;
    p.x = x->data;
    p.out = out->data;
    p.scale = scale ? scale->data : NULL;
    p.bias = bias ? bias->data : NULL;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_channel_norm_f32
                                         : RT_CUDA_K_channel_norm_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.rows, 1), 1, 1, &p);
}

static rt_status run_instance_norm(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__instance_norm_prepare(ctx));
    return channel_norm(ctx, cm, false);
}

static rt_status run_group_norm(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__group_norm_prepare(ctx));
    return channel_norm(ctx, cm, true);
}

/* ---- reductions --------------------------------------------------------------------- */

static rt_status reduce(rt_op_ctx *ctx, rt_cuda_method *cm, int op) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    rt_int_param axes; /* an int list, or a tensor read back to the host */
    RT_RETURN_IF_ERROR(rt_op__int_param(ctx, 1, "axes", true, &axes));
    bool reduced[RT_MAX_RANK] = {false};
    for (size_t k = 0; k < axes.count; k++) { /* checked by prepare: in range, no repeats */
        int32_t d;
        RT_RETURN_IF_ERROR(rt_op__axis(ctx, rt_op__int_param_at(&axes, k), x->rank, "axes item",
                                       &d));
        reduced[d] = true;
    }
    rt_cuda_reduce_params p;
    memset(&p, 0, sizeof p);
    p.n_out = rt_tensor__numel(out);
    if (p.n_out == 0)
        return RT_OK;
    p.op = op;
    p.n_red = 1;
    for (int32_t d = 0; d < x->rank; d++) {
        if (reduced[d]) {
            p.red_sizes[p.red_rank] = x->sizes[d];
            p.red_strides[p.red_rank++] = x->strides[d];
            p.n_red *= x->sizes[d];
        } else {
            p.kept_sizes[p.kept_rank] = x->sizes[d];
            p.kept_strides[p.kept_rank++] = x->strides[d];
        }
    }
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k;
    switch (x->type) {
    case RT_F32: k = RT_CUDA_K_reduce_f32; break;
    case RT_F64: k = RT_CUDA_K_reduce_f64; break;
    case RT_I8: k = RT_CUDA_K_reduce_i8; break;
    case RT_I16: k = RT_CUDA_K_reduce_i16; break;
    case RT_I32: k = RT_CUDA_K_reduce_i32; break;
    case RT_I64: k = RT_CUDA_K_reduce_i64; break;
    case RT_U8: k = RT_CUDA_K_reduce_u8; break;
    case RT_U16: k = RT_CUDA_K_reduce_u16; break;
    case RT_U32: k = RT_CUDA_K_reduce_u32; break;
    case RT_U64: k = RT_CUDA_K_reduce_u64; break;
    case RT_BOOL: k = RT_CUDA_K_reduce_bool; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA reduction kernel for this dtype");
    }
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n_out, 1), 1, 1, &p);
}

#define DEFINE_REDUCE(symbol, op)                                             \
    static rt_status reduce_##symbol(rt_op_ctx *ctx, rt_cuda_method *cm) {    \
        RT_RETURN_IF_ERROR(rt_ops__##symbol##_prepare(ctx));                  \
        return reduce(ctx, cm, op);                                           \
    }                                                                         \
    HOST_PARAMS(run_##symbol, reduce_##symbol, 1)
#define REDUCE_OPS(X)                                                                         \
    X(reduce_sum, RT_CUDA_RSUM) X(reduce_mean, RT_CUDA_RMEAN) X(reduce_prod, RT_CUDA_RPROD)    \
    X(reduce_max, RT_CUDA_RMAX) X(reduce_min, RT_CUDA_RMIN) X(reduce_l1, RT_CUDA_RL1)          \
    X(reduce_l2, RT_CUDA_RL2) X(reduce_log_sum, RT_CUDA_RLOG_SUM)                              \
    X(reduce_log_sum_exp, RT_CUDA_RLOG_SUM_EXP) X(reduce_sum_square, RT_CUDA_RSUM_SQUARE)
REDUCE_OPS(DEFINE_REDUCE)

/* The op's prepare narrows these to its own dtypes (sum ... integers, max / min also bool). */
static rt_status check_reduce(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "x", RT_TYPES_NUMERIC | RT_TYPE_BIT(RT_BOOL),
                                "float32, float64, the integer types and bool");
}

/* ---- argmax, argmin ----------------------------------------------------------------- */

/* Floats compare as doubles, integers in their own type. */
static rt_status check_arg(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "x", RT_TYPES_NUMERIC,
                                "float32, float64 and the integer types");
}

static rt_status arg_reduce(rt_op_ctx *ctx, rt_cuda_method *cm, bool smallest) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 4);
    int64_t axis_arg;
    int32_t axis;
    bool last;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "select_last_index", &last));
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    rt_cuda_arg_params p;
    memset(&p, 0, sizeof p);
    p.outer = p.inner = 1;
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < axis)
            p.outer *= x->sizes[d];
        else if (d > axis)
            p.inner *= x->sizes[d];
    }
    p.n = x->sizes[axis];
    p.last = last;
    p.smallest = smallest;
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k;
    switch (x->type) {
    case RT_F32: k = RT_CUDA_K_arg_f32; break;
    case RT_F64: k = RT_CUDA_K_arg_f64; break;
    case RT_I8: k = RT_CUDA_K_arg_i8; break;
    case RT_I16: k = RT_CUDA_K_arg_i16; break;
    case RT_I32: k = RT_CUDA_K_arg_i32; break;
    case RT_I64: k = RT_CUDA_K_arg_i64; break;
    case RT_U8: k = RT_CUDA_K_arg_u8; break;
    case RT_U16: k = RT_CUDA_K_arg_u16; break;
    case RT_U32: k = RT_CUDA_K_arg_u32; break;
    case RT_U64: k = RT_CUDA_K_arg_u64; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA argmax kernel for this dtype");
    }
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.outer * p.inner, 1), 1, 1, &p);
}

static rt_status run_argmax(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__argmax_prepare(ctx));
    return arg_reduce(ctx, cm, false);
}

static rt_status run_argmin(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__argmin_prepare(ctx));
    return arg_reduce(ctx, cm, true);
}

/* ---- cast ------------------------------------------------------------------------- */

static rt_status run_cast(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__cast_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 1);
    rt_cuda_cast_params p = {rt_tensor__numel(out), (int32_t)x->type, (int32_t)out->type,
                             x->data, out->data};
    if (p.n == 0)
        return RT_OK;
    return rt_cuda__op_launch(ctx, cm, RT_CUDA_K_cast, rt_cuda__blocks(p.n, 256), 1, 1, &p);
}

/* ---- ops whose parameters may be tensors read at each execute ------------------------ */

HOST_PARAMS(run_reshape, rt_cuda__run_reshape, 1)
HOST_PARAMS(run_squeeze, rt_cuda__run_squeeze, 1)
HOST_PARAMS(run_unsqueeze, rt_cuda__run_unsqueeze, 1)
HOST_PARAMS(run_resize, rt_cuda__run_resize, 1, 2, 3)
HOST_PARAMS(run_expand, rt_cuda__run_expand, 1)
HOST_PARAMS(run_slice, rt_cuda__run_slice, 1, 2, 3, 4)
HOST_PARAMS(run_split, rt_cuda__run_split, 2)
HOST_PARAMS(run_tile, rt_cuda__run_tile, 1)
HOST_PARAMS(run_trilu, rt_cuda__run_trilu, 1)
HOST_PARAMS(run_pad, rt_cuda__run_pad, 1)
HOST_PARAMS(run_constant_of_shape, rt_cuda__run_constant_of_shape, 0)
HOST_PARAMS(run_one_hot, rt_cuda__run_one_hot, 1)
HOST_PARAMS(run_cumsum, rt_cuda__run_cumsum, 1)
HOST_PARAMS(run_topk, rt_cuda__run_topk, 1)

/* ---- the table ---------------------------------------------------------------------- */

/* In the op list's order (ops/ops.inc names each op's check and run). */
static const rt_cuda_op cuda_ops[] = {
#define RT_OP(name, symbol, cuda_check, cuda_run) {cuda_check, cuda_run},
#include "ops/ops.inc"
#undef RT_OP
};

const rt_cuda_op *rt_cuda__op_of(const rt_op_def *op) {
    size_t index = rt_ops__index(op);
    return index < sizeof cuda_ops / sizeof cuda_ops[0] ? &cuda_ops[index] : NULL;
}
