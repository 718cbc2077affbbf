/* kernels/unary.h: the typed loops of the unary math and activation ops (kernels/unary.c).
 * The op layer (unary.c) handles arguments, shapes and threads. */
#ifndef RT_OPS_ELEMENTWISE_KERNELS_UNARY_H
#define RT_OPS_ELEMENTWISE_KERNELS_UNARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef enum rt_unary_kind {
    RT_UNARY_ABS,
    RT_UNARY_NEG,
    RT_UNARY_EXP,
    RT_UNARY_LOG,
    RT_UNARY_SQRT,
    RT_UNARY_RECIPROCAL,
    RT_UNARY_FLOOR,
    RT_UNARY_CEIL,
    RT_UNARY_ROUND,
    RT_UNARY_SIGN,
    RT_UNARY_SIN,
    RT_UNARY_COS,
    RT_UNARY_TAN,
    RT_UNARY_TANH,
    RT_UNARY_ERF,
    RT_UNARY_SIGMOID,
    RT_UNARY_HARD_SIGMOID,
    RT_UNARY_LEAKY_RELU,
    RT_UNARY_ELU,
    RT_UNARY_SELU,
    RT_UNARY_GELU,
    RT_UNARY_GELU_TANH,
    RT_UNARY_SOFTPLUS,
    RT_UNARY_SOFTSIGN,
    RT_UNARY_HARD_SWISH,
    RT_UNARY_MISH,
    RT_UNARY_SILU, /* x * sigmoid(x) */
    RT_UNARY_CLIP,
    RT_UNARY_ISNAN,
    RT_UNARY_ISINF,
    RT_UNARY_NOT,
    RT_UNARY_KIND_COUNT
} rt_unary_kind;

/* One element of any dtype (clip bounds); bool is the byte u8. */
typedef union rt_unary_scalar {
    float f32;
    double f64;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
} rt_unary_scalar;

typedef struct rt_unary_params {
    double alpha; /* hard_sigmoid, leaky_relu, elu, selu */
    double beta;  /* hard_sigmoid; selu's gamma */
    bool detect_positive, detect_negative; /* isinf */
    rt_unary_scalar lo, hi;                /* clip, in x's dtype */
} rt_unary_params;

/* out[i] = f(x[i]) for i in [0, n). out may be x itself (same elements). isnan and isinf
 * write bool bytes; every other kind writes x's dtype. */
typedef void (*rt_unary_kernel)(void *out, const void *x, size_t n, const rt_unary_params *p);

/* The kernel of kind on x of `type`, or NULL when there is none. */
rt_unary_kernel rt_ops__unary_kernel(rt_unary_kind kind, rt_type type);

/* prelu: out[i] = x[i] < 0 ? x[i] * slope[i * slope_stride] : x[i] for i in [0, n). */
typedef void (*rt_prelu_kernel)(void *out, const void *x, const void *slope,
                                 int64_t slope_stride, int64_t n);
rt_prelu_kernel rt_ops__prelu_kernel(rt_type type);

/* log_softmax and hardmax over lines of n elements `inner` apart: line l starts at
 * (l / inner) * n * inner + l % inner. Lines [begin, end) are done; out may be x. */
typedef void (*rt_axis_kernel)(void *out, const void *x, int64_t n, int64_t inner,
                               size_t begin, size_t end);
rt_axis_kernel rt_ops__log_softmax_kernel(rt_type type);
rt_axis_kernel rt_ops__hardmax_kernel(rt_type type);

#endif
