/* quant.h: the quantization family: helpers shared by the operators (quant.c, quant_matmul.c,
 * quant_conv.c) and their kernels (kernels/), the jobs the operators hand those kernels, and
 * the plans of the integer products for another backend.
 *
 * Rounding is round half to even (rint in the default rounding mode) and every result
 * saturates to its integer type; NaN gives the zero point rather than undefined behaviour. */
#ifndef RT_OPS_QUANT_H
#define RT_OPS_QUANT_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/threadpool.h"
#include "ops/conv/conv.h"
#include "ops/matmul/matmul.h"
#include "ops/op_util.h"

/* Integer types a quantized tensor may have. */
#define RT_QUANT_TYPES                                                                   \
    (RT_TYPE_BIT(RT_I8) | RT_TYPE_BIT(RT_U8) | RT_TYPE_BIT(RT_I16) | RT_TYPE_BIT(RT_U16) | \
     RT_TYPE_BIT(RT_I32))
#define RT_QUANT_TYPES_TEXT "int8, uint8, int16, uint16 and int32"
/* Operands of the integer matmul and convolution. */
#define RT_QUANT8_TYPES (RT_TYPE_BIT(RT_I8) | RT_TYPE_BIT(RT_U8))

static inline void rt_quant__range(rt_type type, int64_t *lo, int64_t *hi) {
    switch (type) {
    case RT_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case RT_U8: *lo = 0; *hi = UINT8_MAX; break;
    case RT_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case RT_U16: *lo = 0; *hi = UINT16_MAX; break;
    default: *lo = INT32_MIN; *hi = INT32_MAX; break;
    }
}

/* Element i of a tensor of one of RT_QUANT_TYPES. */
static inline int64_t rt_quant__load_int(const void *data, rt_type type, int64_t i) {
    switch (type) {
    case RT_I8: return ((const int8_t *)data)[i];
    case RT_U8: return ((const uint8_t *)data)[i];
    case RT_I16: return ((const int16_t *)data)[i];
    case RT_U16: return ((const uint16_t *)data)[i];
    default: return ((const int32_t *)data)[i];
    }
}

/* The value of an optional per-tensor zero point (absent: 0). While preparing, a value the
 * method writes (an input, an intermediate) holds nothing yet, and on a CUDA method its memory
 * is on the device, out of the host's reach: it reads as 0 then, and run reads it again. */
static inline int64_t rt_quant__scalar_zero_point(const rt_op_ctx *ctx,
                                                  const rt_tensor_value *zp) {
    if (zp == NULL || (ctx->preparing && zp->writable))
        return 0;
    return rt_quant__load_int(zp->data, zp->type, 0);
}

/* The int32 whose bits are u (wrap-around), without implementation-defined conversions. */
static inline int32_t rt_quant__as_i32(uint32_t u) {
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) - INT32_MAX - 1;
}

/* A rounded value r plus zero point zp, saturated to [lo, hi]; NaN gives zp. */
static inline int64_t rt_quant__saturate(double r, int64_t zp, int64_t lo, int64_t hi) {
    if (isnan(r))
        return zp < lo ? lo : zp > hi ? hi : zp;
    double v = r + (double)zp;
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

/* ONNX QLinearMatMul / QLinearConv: rint(acc * multiplier + zp), saturated. The product and the sum
 * are two float64 operations, as in the ONNX reference (numpy promotes int32 times float32 to
 * float64). The build allows contraction (-ffp-contract=fast), but its callers
 * (kernels/matmul_int8.c, conv_int8.c) are compiled for the baseline ISA, which has no fma to
 * contract into. */
static inline int64_t rt_quant__requantize(int32_t acc, double multiplier, int64_t zp,
                                           int64_t lo, int64_t hi) {
    double v = (double)acc * multiplier;
    v = v + (double)zp;
    if (isnan(v))
        return zp < lo ? lo : zp > hi ? hi : zp;
    return rt_quant__saturate(rint(v), 0, lo, hi);
}

/* (s1[i1] * s2[i2]) / s3[i3] computed in the scales' type (float32 or float64), as the ONNX
 * reference computes the requantization multiplier. */
static inline double rt_quant__multiplier(rt_type type, const void *s1, int64_t i1,
                                          const void *s2, int64_t i2, const void *s3,
                                          int64_t i3) {
    if (type == RT_F32) {
        float m = ((const float *)s1)[i1] * ((const float *)s2)[i2];
        m = m / ((const float *)s3)[i3];
        return m;
    }
    double m = ((const double *)s1)[i1] * ((const double *)s2)[i2];
    return m / ((const double *)s3)[i3];
}

/* Store v (in the type's range) as element i of an int8 or uint8 tensor. */
static inline void rt_quant__store8(void *data, rt_type type, int64_t i, int64_t v) {
    if (type == RT_I8)
        ((int8_t *)data)[i] = (int8_t)v;
    else
        ((uint8_t *)data)[i] = (uint8_t)v;
}

/* A per-tensor parameter: one element, rank 0 or 1. */
static inline rt_status rt_quant__check_single(rt_op_ctx *ctx, const rt_tensor_value *t,
                                               const char *what) {
    if (t && (t->rank > 1 || rt_tensor__numel(t) != 1)) {
        char text[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s has shape %s; it must have one element (rank 0 or 1)", what,
                           rt_op__shape_text(t->sizes, t->rank, text));
    }
    return RT_OK;
}

/* An input tensor the op reads (NULL: absent): row-major, not the output's memory. */
static inline rt_status rt_quant__check_read(rt_op_ctx *ctx, const rt_tensor_value *t,
                                             const char *what, const rt_tensor_value *out) {
    if (!t)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, t, what));
    return rt_op__check_disjoint(ctx, out, "out", t, what);
}

/* ---- the plans of the integer products, for another backend (the CUDA one) --------------- */

/* A zero point or scale of matmul_integer / qlinear_matmul: element (batch, row or column j)
 * is at data[sum(batch index * batch_strides) + j * stride]. */
typedef struct rt_quant_mm_param {
    const void *data; /* NULL: absent */
    rt_type type;
    int64_t stride;
    int64_t batch_strides[RT_MAX_RANK]; /* aligned to the output's batch dimensions */
} rt_quant_mm_param;

typedef struct rt_quant_mm_plan {
    rt_matmul_dims dims;
    rt_type a_type, b_type, scale_type, out_type;
    rt_quant_mm_param za, zb, sa, sb; /* zero points; scales (qlinear_matmul only) */
    const void *y_scale;              /* NULL: int32 out (matmul_integer) */
    int64_t y_zero, lo, hi;
} rt_quant_mm_plan;

/* The instruction's arguments checked for the current sizes, out's sizes set, and the plan
 * (requant: qlinear_matmul, else matmul_integer). Reads y_zero_point's element. */
rt_status rt_quant__matmul_plan(rt_op_ctx *ctx, bool requant, rt_quant_mm_plan *plan);

typedef struct rt_quant_conv_plan {
    int64_t batch, channels, height, width;   /* x */
    int64_t out_channels, kernel_h, kernel_w; /* w */
    int64_t out_h, out_w, groups;
    int64_t stride[2], dilation[2], pad[4];   /* pad: top, left, bottom, right */
    rt_type x_type, w_type, scale_type, out_type;
    int32_t x_zero;
    const rt_tensor_value *w_zero;  /* NULL, one element or one per output channel */
    const rt_tensor_value *w_scale; /* qlinear_conv: one element or one per output channel */
    const void *x_scale, *y_scale;  /* y_scale NULL: int32 out (conv_integer) */
    const int32_t *bias;            /* may be NULL */
    int64_t y_zero, lo, hi;
} rt_quant_conv_plan;

/* As rt_quant__matmul_plan for conv_integer / qlinear_conv. Reads x_zero_point's and
 * y_zero_point's elements. */
rt_status rt_quant__conv_plan(rt_op_ctx *ctx, bool requant, rt_quant_conv_plan *plan);

/* ---- quantize_linear, dequantize_linear (quant.c, kernels/quantize.c) ------------------- */

typedef struct rt_quant_layout {
    int64_t outer, length, inner; /* x as [outer, length, inner] around axis */
    int64_t block, blocks;        /* blocked: block size and ceil(length / block); else 0 */
} rt_quant_layout;

/* A parameter's view: `single` (one element) or laid out along the quantization axis. */
typedef struct rt_quant_param {
    const void *data; /* NULL: an absent zero point (0) */
    rt_type type;
    bool single;
} rt_quant_param;

/* A run of n elements with the scale (zero point) index advancing by ss (zs) per element. */
typedef void (*rt_quant_run_fn)(const void *x, const void *s, int64_t ss, const void *z,
                                int64_t zs, void *y, int64_t n, int64_t lo, int64_t hi);

/* The run kernel that quantizes (quantize true) or dequantizes between a float type (float32,
 * float64) and an integer type of RT_QUANT_TYPES; NULL for another integer type. */
rt_quant_run_fn rt_quant__linear_kernel(bool quantize, rt_type float_type, rt_type int_type);

typedef struct rt_quant_linear_job {
    rt_quant_run_fn kernel;
    rt_quant_layout layout;
    rt_quant_param scale, zero;
    const char *x;
    char *y;
    size_t x_size, y_size, s_size, z_size; /* element bytes */
    int64_t lo, hi;
} rt_quant_linear_job;

/* Elements [begin, end) of x (an rt_range_fn over rt_quant_linear_job), in runs that stay
 * inside one (outer, axis) row. */
void rt_quant__linear_runs(void *arg, size_t begin, size_t end);

/* dynamic_quantize_linear: the range of x's n float32 elements widened to include 0; NaN
 * elements are skipped. */
void rt_quant__min_max_f32(const float *x, int64_t n, float *lo, float *hi);

/* ---- matmul_integer, qlinear_matmul (quant_matmul.c, kernels/matmul_int8.c) ------------- */

/* Output tiles of RT_QUANT_MM_TILE_M x RT_QUANT_MM_TILE_N. */
#define RT_QUANT_MM_TILE_M 16
#define RT_QUANT_MM_TILE_N 128

typedef struct rt_quant_mm_job {
    const rt_matmul_dims *d;
    const void *a, *b;
    rt_type a_type, b_type;
    rt_quant_mm_param za, zb, sa, sb; /* zero points; scales (qlinear_matmul only) */
    const void *y_scale;              /* NULL: store int32 (matmul_integer) */
    rt_type scale_type;
    int64_t y_zero, lo, hi;
    void *out;
    rt_type out_type;
    int64_t row_tiles, col_tiles;
} rt_quant_mm_job;

/* Work items batch * (row_tiles * col_tiles) + tile: tiles of one batch entry's output matrix
 * (an rt_range_fn over rt_quant_mm_job). */
void rt_quant__matmul_tiles(void *arg, size_t begin, size_t end);

/* ---- conv_integer, qlinear_conv (quant_conv.c, kernels/conv_int8.c) --------------------- */

/* A tile holds at most RT_QUANT_CONV_TILE outputs: up to RT_QUANT_CONV_COLS columns of as many
 * rows as fit. */
#define RT_QUANT_CONV_TILE 2048
#define RT_QUANT_CONV_COLS 256

typedef struct rt_quant_conv_job {
    const conv_dims *d;
    const void *x, *w;
    rt_type x_type, w_type;
    int32_t x_zero;
    const rt_tensor_value *w_zero; /* NULL, one element or one per output channel */
    /* qlinear_conv only (y_scale NULL for conv_integer): */
    const void *x_scale, *y_scale;
    const rt_tensor_value *w_scale;
    const int32_t *bias; /* may be NULL */
    rt_type scale_type;
    int64_t y_zero, lo, hi;
    void *out;
    rt_type out_type;
    int64_t tile_rows, tile_cols, row_tiles, col_tiles;
} rt_quant_conv_job;

/* Work items (n * out_channels + o) * (row_tiles * col_tiles) + tile: tiles of one output plane
 * (an rt_range_fn over rt_quant_conv_job). */
void rt_quant__conv_tiles(void *arg, size_t begin, size_t end);

#endif
