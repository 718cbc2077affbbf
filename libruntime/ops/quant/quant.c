/* quant.c: quantize_linear, dequantize_linear and dynamic_quantize_linear (ONNX's
 * QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear) for the integer types.
 *
 * A scale or zero point is per tensor (one element), per axis (1-D along `axis`) or blocked
 * (x's rank, `axis` cut into blocks of block_size). The loops view x as [outer, length, inner]
 * around `axis` and walk it in runs along `inner`, where a parameter's index is fixed (per
 * tensor, per axis) or advances with the element (blocked). */
#include <string.h>

#include "ops/ops.h"
#include "ops/quant/quant.h"

/* ---- parameter layout ------------------------------------------------------------------- */

typedef struct qlayout {
    int64_t outer, length, inner; /* x as [outer, length, inner] around axis */
    int64_t block, blocks;        /* blocked: block size and ceil(length / block); else 0 */
} qlayout;

/* A parameter's view: `single` (one element) or laid out along the quantization axis. */
typedef struct qparam {
    const void *data; /* NULL: an absent zero point (0) */
    rt_type type;
    bool single;
} qparam;

/* Index of the parameter of element (o, a, i) and its step along i. */
static void param_index(const qlayout *l, const qparam *p, int64_t o, int64_t a, int64_t i,
                        int64_t *index, int64_t *step) {
    if (p->single) {
        *index = 0, *step = 0;
    } else if (l->block == 0) {
        *index = a, *step = 0;
    } else {
        *index = (o * l->blocks + a / l->block) * l->inner + i, *step = 1;
    }
}

/* Check one parameter against x (current sizes) and fill its view. */
static rt_status param_setup(rt_op_ctx *ctx, const rt_tensor_value *p, const char *what,
                             const rt_tensor_value *x, int64_t axis, int64_t block,
                             qparam *out) {
    out->data = p ? p->data : NULL;
    out->type = p ? p->type : RT_I32;
    out->single = true;
    if (!p)
        return RT_OK;
    /* The shapes are formatted only for a message: this runs on every call. */
    char tp[RT_OP_SHAPE_TEXT], tx[RT_OP_SHAPE_TEXT];
    if (rt_tensor__numel(p) == 1 && (p->rank <= 1 || (block > 0 && p->rank == x->rank)))
        return RT_OK;
    out->single = false;
    int32_t ax;
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, x->rank, "axis", &ax));
    if (block == 0) {
        if (p->rank != 1 || p->sizes[0] != x->sizes[ax])
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "%s %s must have one element or be 1-D of length %" PRId64
                               " (x %s along axis %" PRId32 ")",
                               what, rt_op__shape_text(p->sizes, p->rank, tp), x->sizes[ax],
                               rt_op__shape_text(x->sizes, x->rank, tx), ax);
        return RT_OK;
    }
    bool ok = p->rank == x->rank;
    for (int32_t d = 0; ok && d < x->rank; d++) {
        int64_t want = d == ax ? rt_op__ceil_div(x->sizes[d], block) : x->sizes[d];
        ok = p->sizes[d] == want;
    }
    if (!ok)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s %s must have x's shape %s with axis %" PRId32
                           " cut into blocks of %" PRId64,
                           what, rt_op__shape_text(p->sizes, p->rank, tp),
                           rt_op__shape_text(x->sizes, x->rank, tx), ax, block);
    return RT_OK;
}

static void layout_setup(const rt_tensor_value *x, int64_t axis, int64_t block,
                         const qparam *a, const qparam *b, qlayout *l) {
    l->block = block;
    l->outer = 1, l->length = 1, l->inner = rt_tensor__numel(x), l->blocks = 0;
    if (a->single && b->single)
        return; /* one run over all of x */
    int32_t ax = (int32_t)(axis < 0 ? axis + x->rank : axis); /* checked by param_setup */
    l->length = x->sizes[ax];
    l->outer = 1, l->inner = 1;
    for (int32_t d = 0; d < ax; d++)
        l->outer *= x->sizes[d];
    for (int32_t d = ax + 1; d < x->rank; d++)
        l->inner *= x->sizes[d];
    l->blocks = block > 0 ? rt_op__ceil_div(l->length, block) : 0;
}

/* ---- kernels ---------------------------------------------------------------------------- */

/* A run of n elements with the scale (zero point) index advancing by ss (zs) per element. */
typedef void (*qrun_fn)(const void *x, const void *s, int64_t ss, const void *z, int64_t zs,
                        void *y, int64_t n, int64_t lo, int64_t hi);

/* y = saturate(rint(x / s) + z), the division in x's type (as numpy computes it). */
#define DEFINE_QUANTIZE(sfx, T, RINT, OT)                                                 \
    static void quantize__##sfx(const void *xv, const void *sv, int64_t ss, const void *zv, \
                                int64_t zs, void *yv, int64_t n, int64_t lo, int64_t hi) { \
        const T *x = xv, *s = sv;                                                         \
        const OT *z = zv;                                                                 \
        OT *y = yv;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                 \
            int64_t zp = z ? (int64_t)z[i * zs] : 0;                                      \
            y[i] = (OT)rt_quant__saturate((double)RINT(x[i] / s[i * ss]), zp, lo, hi);     \
        }                                                                                 \
    }

/* y = (x - z) * s, with x first rounded to float32 and the rest in float64, then rounded to
 * the output type once: the ONNX reference's arithmetic for every x type. */
#define DEFINE_DEQUANTIZE(sfx, T, XT)                                                     \
    static void dequantize__##sfx(const void *xv, const void *sv, int64_t ss, const void *zv, \
                                  int64_t zs, void *yv, int64_t n, int64_t lo, int64_t hi) { \
        const XT *x = xv, *z = zv;                                                        \
        const T *s = sv;                                                                  \
        T *y = yv;                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                 \
            double zp = z ? (double)z[i * zs] : 0.0;                                      \
            y[i] = (T)(((double)(float)x[i] - zp) * (double)s[i * ss]);                   \
        }                                                                                 \
    }

#define DEFINE_QUANT_TYPES(sfx, T, RINT)                  \
    DEFINE_QUANTIZE(sfx##_i8, T, RINT, int8_t)            \
    DEFINE_QUANTIZE(sfx##_u8, T, RINT, uint8_t)           \
    DEFINE_QUANTIZE(sfx##_i16, T, RINT, int16_t)          \
    DEFINE_QUANTIZE(sfx##_u16, T, RINT, uint16_t)         \
    DEFINE_QUANTIZE(sfx##_i32, T, RINT, int32_t)          \
    DEFINE_DEQUANTIZE(sfx##_i8, T, int8_t)                \
    DEFINE_DEQUANTIZE(sfx##_u8, T, uint8_t)               \
    DEFINE_DEQUANTIZE(sfx##_i16, T, int16_t)              \
    DEFINE_DEQUANTIZE(sfx##_u16, T, uint16_t)             \
    DEFINE_DEQUANTIZE(sfx##_i32, T, int32_t)
DEFINE_QUANT_TYPES(f32, float, rintf)
DEFINE_QUANT_TYPES(f64, double, rint)

/* The kernel for a float type and an integer type. */
static qrun_fn kernel_for(bool quantize, rt_type float_type, rt_type int_type) {
    static const qrun_fn table[2][2][5] = {
        {{quantize__f32_i8, quantize__f32_u8, quantize__f32_i16, quantize__f32_u16,
          quantize__f32_i32},
         {quantize__f64_i8, quantize__f64_u8, quantize__f64_i16, quantize__f64_u16,
          quantize__f64_i32}},
        {{dequantize__f32_i8, dequantize__f32_u8, dequantize__f32_i16, dequantize__f32_u16,
          dequantize__f32_i32},
         {dequantize__f64_i8, dequantize__f64_u8, dequantize__f64_i16, dequantize__f64_u16,
          dequantize__f64_i32}},
    };
    int f = float_type == RT_F64;
    switch (int_type) {
    case RT_I8: return table[!quantize][f][0];
    case RT_U8: return table[!quantize][f][1];
    case RT_I16: return table[!quantize][f][2];
    case RT_U16: return table[!quantize][f][3];
    case RT_I32: return table[!quantize][f][4];
    default: return NULL;
    }
}

typedef struct qjob {
    qrun_fn kernel;
    qlayout layout;
    qparam scale, zero;
    const char *x;
    char *y;
    size_t x_size, y_size, s_size, z_size; /* element bytes */
    int64_t lo, hi;
} qjob;

/* Elements [begin, end) of x in runs that stay inside one (outer, axis) row. */
static void qjob_range(void *arg, size_t begin, size_t end) {
    const qjob *job = arg;
    const qlayout *l = &job->layout;
    for (int64_t pos = (int64_t)begin; pos < (int64_t)end;) {
        int64_t row = pos / l->inner, i = pos % l->inner;
        int64_t o = row / l->length, a = row % l->length;
        int64_t n = l->inner - i < (int64_t)end - pos ? l->inner - i : (int64_t)end - pos;
        int64_t si, ss, zi, zs;
        param_index(l, &job->scale, o, a, i, &si, &ss);
        param_index(l, &job->zero, o, a, i, &zi, &zs);
        const char *z = job->zero.data ? (const char *)job->zero.data + zi * job->z_size : NULL;
        job->kernel(job->x + pos * job->x_size, (const char *)job->scale.data + si * job->s_size,
                    ss, z, zs, job->y + pos * job->y_size, n, job->lo, job->hi);
        pos += n;
    }
}

/* ---- quantize_linear, dequantize_linear ------------------------------------------------- */

typedef struct qargs {
    rt_tensor_value *x, *scale, *zero, *out;
    int64_t axis, block;
    qjob job;
} qargs;

static rt_status check_tensors(rt_op_ctx *ctx, const qargs *q, bool quantize) {
    const rt_tensor_value *ints = quantize ? q->out : q->x;
    const rt_tensor_value *floats = quantize ? q->x : q->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->x, "x", quantize ? RT_TYPES_FLOAT
                                            : RT_QUANT_TYPES, quantize ? "float32 and float64"
                                            : RT_QUANT_TYPES_TEXT));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->out, "out", quantize ? RT_QUANT_TYPES
                                            : RT_TYPES_FLOAT, quantize ? RT_QUANT_TYPES_TEXT
                                            : "float32 and float64"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->scale, "scale", floats,
                                              quantize ? "x" : "out"));
    if (q->zero)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->zero, "zero_point", ints,
                                                  quantize ? "out" : "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, q->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, q->out, "out"));
    RT_RETURN_IF_ERROR(rt_quant__check_read(ctx, q->x, "x", q->out));
    RT_RETURN_IF_ERROR(rt_quant__check_read(ctx, q->scale, "scale", q->out));
    return rt_quant__check_read(ctx, q->zero, "zero_point", q->out);
}

/* (de)quantize(x, scale, zero_point: tensor | none, axis: int, block_size: int, out) */
static rt_status q_setup(rt_op_ctx *ctx, qargs *q, bool quantize) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 6));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &q->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "scale", &q->scale));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "zero_point", &q->zero));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "axis", &q->axis));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "block_size", &q->block));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 5, "out", &q->out));
    if (q->block < 0)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "block_size must be >= 0, not %" PRId64,
                           q->block);
    RT_RETURN_IF_ERROR(check_tensors(ctx, q, quantize));

    qjob *job = &q->job;
    RT_RETURN_IF_ERROR(param_setup(ctx, q->scale, "scale", q->x, q->axis, q->block, &job->scale));
    RT_RETURN_IF_ERROR(param_setup(ctx, q->zero, "zero_point", q->x, q->axis, q->block,
                                   &job->zero));
    layout_setup(q->x, q->axis, q->block, &job->scale, &job->zero, &job->layout);
    rt_type float_type = quantize ? q->x->type : q->out->type;
    rt_type int_type = quantize ? q->out->type : q->x->type;
    job->kernel = kernel_for(quantize, float_type, int_type);
    if (!job->kernel)
        return rt_op__fail(ctx, RT_INTERNAL, "no kernel for %s", rt_tensor__type_name(int_type));
    rt_quant__range(int_type, &job->lo, &job->hi);
    job->x = q->x->data;
    job->y = q->out->data;
    job->x_size = q->x->elem_size;
    job->y_size = q->out->elem_size;
    job->s_size = q->scale->elem_size;
    job->z_size = q->zero ? q->zero->elem_size : 0;
    return rt_op__set_output_sizes(ctx, q->out, "out", q->x->rank, q->x->sizes);
}

static rt_status q_run(rt_op_ctx *ctx, bool quantize) {
    qargs q;
    RT_RETURN_IF_ERROR(q_setup(ctx, &q, quantize));
    int64_t n = rt_tensor__numel(q.x);
    if (n > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)n, rt_op__grain(4), qjob_range, &q.job);
    return RT_OK;
}

rt_status rt_ops__quantize_linear_prepare(rt_op_ctx *ctx) {
    qargs q;
    return q_setup(ctx, &q, true);
}

rt_status rt_ops__quantize_linear_run(rt_op_ctx *ctx) { return q_run(ctx, true); }

rt_status rt_ops__dequantize_linear_prepare(rt_op_ctx *ctx) {
    qargs q;
    return q_setup(ctx, &q, false);
}

rt_status rt_ops__dequantize_linear_run(rt_op_ctx *ctx) { return q_run(ctx, false); }

/* ---- dynamic_quantize_linear ------------------------------------------------------------ */

typedef struct dql_args {
    rt_tensor_value *x, *y, *scale, *zero;
} dql_args;

static rt_status dql_check(rt_op_ctx *ctx, const dql_args *d) {
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->x, "x", RT_F32));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->y, "y", RT_U8));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->scale, "y_scale", RT_F32));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, d->zero, "y_zero_point", RT_U8));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, d->scale, "y_scale", 0));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, d->zero, "y_zero_point", 0));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, d->x, "x"));
    rt_tensor_value *outs[3] = {d->y, d->scale, d->zero};
    const char *names[3] = {"y", "y_scale", "y_zero_point"};
    for (int i = 0; i < 3; i++) {
        RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, outs[i], names[i]));
        RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, outs[i], names[i]));
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, outs[i], names[i], d->x, "x"));
        for (int j = 0; j < i; j++)
            RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, outs[i], names[i], outs[j], names[j]));
    }
    return RT_OK;
}

/* dynamic_quantize_linear(x, y, y_scale, y_zero_point) */
static rt_status dql_setup(rt_op_ctx *ctx, dql_args *d) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &d->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "y", &d->y));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "y_scale", &d->scale));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "y_zero_point", &d->zero));
    RT_RETURN_IF_ERROR(dql_check(ctx, d));
    int64_t none[1] = {0};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, d->scale, "y_scale", 0, none));
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, d->zero, "y_zero_point", 0, none));
    return rt_op__set_output_sizes(ctx, d->y, "y", d->x->rank, d->x->sizes);
}

rt_status rt_ops__dynamic_quantize_linear_prepare(rt_op_ctx *ctx) {
    dql_args d;
    return dql_setup(ctx, &d);
}

/* The range of x widened to include 0; NaN elements are skipped. */
static void dql_range(const float *x, int64_t n, float *lo, float *hi) {
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    *lo = mn, *hi = mx;
}

/* ONNX's formula, in float32 as its reference computes it:
 * scale = (max(0, max x) - min(0, min x)) / 255 (1 / 255 when both are 0),
 * zero_point = rint(clamp(0 - min / scale, 0, 255)), y = saturate(rint(x / scale) + zp). */
rt_status rt_ops__dynamic_quantize_linear_run(rt_op_ctx *ctx) {
    dql_args d;
    RT_RETURN_IF_ERROR(dql_setup(ctx, &d));
    int64_t n = rt_tensor__numel(d.x);
    float mn, mx;
    dql_range(d.x->data, n, &mn, &mx);
    float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
    float zp = 0.0f - mn / scale;
    zp = zp > 255.0f ? 255.0f : zp < 0.0f ? 0.0f : zp;
    uint8_t zp8 = (uint8_t)rt_quant__saturate((double)rintf(zp), 0, 0, 255);
    *(float *)d.scale->data = scale;
    *(uint8_t *)d.zero->data = zp8;
    qjob job = {
        .kernel = quantize__f32_u8,
        .layout = {.outer = 1, .length = 1, .inner = n},
        .scale = {.data = &scale, .type = RT_F32, .single = true},
        .zero = {.data = &zp8, .type = RT_U8, .single = true},
        .x = d.x->data,
        .y = d.y->data,
        .x_size = sizeof(float), .y_size = 1, .s_size = sizeof(float), .z_size = 1,
        .lo = 0, .hi = 255,
    };
    if (n > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)n, rt_op__grain(4), qjob_range, &job);
    return RT_OK;
}
