/* kernels/unary.c: typed loops of the unary math and activation ops, prelu, log_softmax and
 * hardmax.
 *
 * Float kernels compute in their own precision (float32's transcendentals in the vector math
 * of kernels/vmath.h, float64's through libm); every formula keeps NaN as NaN. Integer
 * negation and abs compute in an unsigned type, so the most negative value wraps to itself
 * instead of overflowing. */
#include <math.h>

#include "ops/elementwise/kernels/unary.h"
#include "ops/elementwise/kernels/vmath.h"

/* suffix, C type, unsigned type the arithmetic wraps in */
#define SIGNED_TYPES(X)                                                         \
    X(i8, int8_t, uint32_t) X(i16, int16_t, uint32_t) X(i32, int32_t, uint32_t) \
    X(i64, int64_t, uint64_t)
#define UNSIGNED_TYPES(X)                                                          \
    X(u8, uint8_t, uint32_t) X(u16, uint16_t, uint32_t) X(u32, uint32_t, uint32_t) \
    X(u64, uint64_t, uint64_t)

/* The libm function for each float type: FN_f32(exp) is expf, FN_f64(exp) is exp. */
#define FN_f32(name) name##f
#define FN_f64(name) name

/* ---- float helpers ---------------------------------------------------------------------- */

#define DEFINE_FLOAT_HELPERS(sfx, T, FN)                                     \
    /* exp of a non-positive argument cannot overflow */                      \
    static inline T sigmoid__##sfx(T v) {                                     \
        T e = FN(exp)(-FN(fabs)(v));                                          \
        return v >= 0 ? 1 / (1 + e) : e / (1 + e);                            \
    }                                                                         \
    /* log(1 + e^v) = max(v, 0) + log1p(e^-|v|), finite for large |v| */     \
    static inline T softplus__##sfx(T v) {                                    \
        return (v > 0 ? v : 0) + FN(log1p)(FN(exp)(-FN(fabs)(v)));            \
    }                                                                         \
    /* Comparisons rather than fmin/fmax, which would turn NaN into a bound */ \
    static inline T clamp01__##sfx(T t) {                                     \
        return t < 0 ? 0 : t > 1 ? 1 : t;                                     \
    }
DEFINE_FLOAT_HELPERS(f32, float, FN_f32)
DEFINE_FLOAT_HELPERS(f64, double, FN_f64)

/* ---- elementwise loops ------------------------------------------------------------------ */

/* A loop over n elements; EXPR is a function of the element v and, for floats, of the
 * parameters alpha and beta converted to T. */
#define DEFINE_FLOAT_UNARY(name, T, OUT_T, EXPR)                                      \
    static void name(void *out, const void *x, size_t n, const rt_unary_params *p) { \
        OUT_T *o = out;                                                               \
        const T *in = x;                                                              \
        const T alpha = (T)p->alpha, beta = (T)p->beta;                               \
        (void)alpha;                                                                  \
        (void)beta;                                                                   \
        for (size_t i = 0; i < n; i++) {                                              \
            T v = in[i];                                                              \
            o[i] = (OUT_T)(EXPR);                                                     \
        }                                                                             \
    }

#define DEFINE_INT_UNARY(name, T, EXPR)                                               \
    static void name(void *out, const void *x, size_t n, const rt_unary_params *p) { \
        T *o = out;                                                                   \
        const T *in = x;                                                              \
        (void)p;                                                                      \
        for (size_t i = 0; i < n; i++) {                                              \
            T v = in[i];                                                              \
            o[i] = (T)(EXPR);                                                         \
        }                                                                             \
    }

/* min(max(v, lo), hi): NaN stays NaN, and lo > hi gives hi everywhere (numpy.clip). */
#define DEFINE_CLIP(sfx, T)                                                                \
    static void clip__##sfx(void *out, const void *x, size_t n, const rt_unary_params *p) { \
        T *o = out;                                                                        \
        const T *in = x;                                                                   \
        const T lo = p->lo.sfx, hi = p->hi.sfx;                                            \
        for (size_t i = 0; i < n; i++) {                                                   \
            T v = in[i] < lo ? lo : in[i];                                                 \
            o[i] = v > hi ? hi : v;                                                        \
        }                                                                                  \
    }

/* 1/sqrt(2) and sqrt(2/pi) for gelu. */
#define INV_SQRT2 0.70710678118654752440
#define SQRT_2_OVER_PI 0.79788456080286535588

#define DEFINE_FLOAT_KINDS(sfx, T, FN)                                                        \
    DEFINE_FLOAT_UNARY(abs__##sfx, T, T, FN(fabs)(v))                                         \
    DEFINE_FLOAT_UNARY(neg__##sfx, T, T, -v)                                                  \
    DEFINE_FLOAT_UNARY(sqrt__##sfx, T, T, FN(sqrt)(v))                                        \
    DEFINE_FLOAT_UNARY(reciprocal__##sfx, T, T, 1 / v)                                        \
    DEFINE_FLOAT_UNARY(floor__##sfx, T, T, FN(floor)(v))                                      \
    DEFINE_FLOAT_UNARY(ceil__##sfx, T, T, FN(ceil)(v))                                        \
    /* nearbyint rounds halves to even in the default rounding mode */                        \
    DEFINE_FLOAT_UNARY(round__##sfx, T, T, FN(nearbyint)(v))                                  \
    DEFINE_FLOAT_UNARY(sign__##sfx, T, T, v > 0 ? 1 : v < 0 ? -1 : v)                         \
    DEFINE_FLOAT_UNARY(sin__##sfx, T, T, FN(sin)(v))                                          \
    DEFINE_FLOAT_UNARY(cos__##sfx, T, T, FN(cos)(v))                                          \
    DEFINE_FLOAT_UNARY(tan__##sfx, T, T, FN(tan)(v))                                          \
    DEFINE_FLOAT_UNARY(hard_sigmoid__##sfx, T, T, clamp01__##sfx(alpha * v + beta))           \
    DEFINE_FLOAT_UNARY(leaky_relu__##sfx, T, T, v < 0 ? alpha * v : v)                        \
    DEFINE_FLOAT_UNARY(elu__##sfx, T, T, v < 0 ? alpha * FN(expm1)(v) : v)                    \
    DEFINE_FLOAT_UNARY(selu__##sfx, T, T, beta * (v <= 0 ? alpha * FN(expm1)(v) : v))         \
    DEFINE_FLOAT_UNARY(softsign__##sfx, T, T, v / (1 + FN(fabs)(v)))                          \
    DEFINE_FLOAT_UNARY(hard_swish__##sfx, T, T, v * clamp01__##sfx(v / 6 + (T)0.5))           \
    DEFINE_FLOAT_UNARY(mish__##sfx, T, T, v * FN(tanh)(softplus__##sfx(v)))                   \
    DEFINE_FLOAT_UNARY(isnan__##sfx, T, uint8_t, v != v)                                      \
    DEFINE_FLOAT_UNARY(isinf__##sfx, T, uint8_t,                                              \
                       (p->detect_positive && v == (T)INFINITY) ||                            \
                           (p->detect_negative && v == -(T)INFINITY))                         \
    DEFINE_CLIP(sfx, T)
DEFINE_FLOAT_KINDS(f32, float, FN_f32)
DEFINE_FLOAT_KINDS(f64, double, FN_f64)

/* Transcendental kinds: float64 through libm; float32 through the vector math, a few ulp
 * from the exact result (kernels/vmath.h). */
DEFINE_FLOAT_UNARY(exp__f64, double, double, exp(v))
DEFINE_FLOAT_UNARY(log__f64, double, double, log(v))
DEFINE_FLOAT_UNARY(tanh__f64, double, double, tanh(v))
DEFINE_FLOAT_UNARY(erf__f64, double, double, erf(v))
DEFINE_FLOAT_UNARY(sigmoid__kf64, double, double, sigmoid__f64(v))
DEFINE_FLOAT_UNARY(gelu__f64, double, double, 0.5 * v * erfc(-v * INV_SQRT2))
DEFINE_FLOAT_UNARY(gelu_tanh__f64, double, double,
                   v * sigmoid__f64(2 * SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))
DEFINE_FLOAT_UNARY(softplus__kf64, double, double, softplus__f64(v))
DEFINE_FLOAT_UNARY(silu__f64, double, double, v * sigmoid__f64(v))

#define DEFINE_VMATH_UNARY(name, fn)                                                      \
    static void name(void *out, const void *x, size_t n, const rt_unary_params *p) {     \
        (void)p;                                                                          \
        rt_vmath__kernel(fn)(out, x, n);                                                  \
    }
DEFINE_VMATH_UNARY(exp__f32, RT_VMATH_EXP)
DEFINE_VMATH_UNARY(log__f32, RT_VMATH_LOG)
DEFINE_VMATH_UNARY(tanh__f32, RT_VMATH_TANH)
DEFINE_VMATH_UNARY(erf__f32, RT_VMATH_ERF)
DEFINE_VMATH_UNARY(sigmoid__kf32, RT_VMATH_SIGMOID)
DEFINE_VMATH_UNARY(gelu__f32, RT_VMATH_GELU)
DEFINE_VMATH_UNARY(gelu_tanh__f32, RT_VMATH_GELU_TANH)
DEFINE_VMATH_UNARY(softplus__kf32, RT_VMATH_SOFTPLUS)
DEFINE_VMATH_UNARY(silu__f32, RT_VMATH_SILU)

#define DEFINE_SIGNED_KINDS(sfx, T, W)                                      \
    DEFINE_INT_UNARY(abs__##sfx, T, v < 0 ? (T)(0u - (W)v) : v)             \
    DEFINE_INT_UNARY(neg__##sfx, T, 0u - (W)v)                              \
    DEFINE_INT_UNARY(sign__##sfx, T, (v > 0) - (v < 0))                     \
    DEFINE_CLIP(sfx, T)
SIGNED_TYPES(DEFINE_SIGNED_KINDS)

#define DEFINE_UNSIGNED_KINDS(sfx, T, W)                    \
    DEFINE_INT_UNARY(abs__##sfx, T, v)                      \
    DEFINE_INT_UNARY(sign__##sfx, T, v != 0)                \
    DEFINE_CLIP(sfx, T)
UNSIGNED_TYPES(DEFINE_UNSIGNED_KINDS)

/* Any non-zero byte is true, whatever wrote it. */
DEFINE_INT_UNARY(not__bool, uint8_t, v == 0)

/* ---- kernel table ----------------------------------------------------------------------- */

#define ENTRY(kind, type, fn) [kind][type] = fn,
#define FLOAT_ENTRIES(sfx, type)                                    \
    ENTRY(RT_UNARY_ABS, type, abs__##sfx)                           \
    ENTRY(RT_UNARY_NEG, type, neg__##sfx)                           \
    ENTRY(RT_UNARY_EXP, type, exp__##sfx)                           \
    ENTRY(RT_UNARY_LOG, type, log__##sfx)                           \
    ENTRY(RT_UNARY_SQRT, type, sqrt__##sfx)                         \
    ENTRY(RT_UNARY_RECIPROCAL, type, reciprocal__##sfx)             \
    ENTRY(RT_UNARY_FLOOR, type, floor__##sfx)                       \
    ENTRY(RT_UNARY_CEIL, type, ceil__##sfx)                         \
    ENTRY(RT_UNARY_ROUND, type, round__##sfx)                       \
    ENTRY(RT_UNARY_SIGN, type, sign__##sfx)                         \
    ENTRY(RT_UNARY_SIN, type, sin__##sfx)                           \
    ENTRY(RT_UNARY_COS, type, cos__##sfx)                           \
    ENTRY(RT_UNARY_TAN, type, tan__##sfx)                           \
    ENTRY(RT_UNARY_TANH, type, tanh__##sfx)                         \
    ENTRY(RT_UNARY_ERF, type, erf__##sfx)                           \
    ENTRY(RT_UNARY_SIGMOID, type, sigmoid__k##sfx)                  \
    ENTRY(RT_UNARY_HARD_SIGMOID, type, hard_sigmoid__##sfx)         \
    ENTRY(RT_UNARY_LEAKY_RELU, type, leaky_relu__##sfx)             \
    ENTRY(RT_UNARY_ELU, type, elu__##sfx)                           \
    ENTRY(RT_UNARY_SELU, type, selu__##sfx)                         \
    ENTRY(RT_UNARY_GELU, type, gelu__##sfx)                         \
    ENTRY(RT_UNARY_GELU_TANH, type, gelu_tanh__##sfx)               \
    ENTRY(RT_UNARY_SOFTPLUS, type, softplus__k##sfx)                \
    ENTRY(RT_UNARY_SOFTSIGN, type, softsign__##sfx)                 \
    ENTRY(RT_UNARY_HARD_SWISH, type, hard_swish__##sfx)             \
    ENTRY(RT_UNARY_MISH, type, mish__##sfx)                         \
    ENTRY(RT_UNARY_SILU, type, silu__##sfx)                         \
    ENTRY(RT_UNARY_CLIP, type, clip__##sfx)                         \
    ENTRY(RT_UNARY_ISNAN, type, isnan__##sfx)                       \
    ENTRY(RT_UNARY_ISINF, type, isinf__##sfx)
#define SIGNED_ENTRIES(sfx, type)                                   \
    ENTRY(RT_UNARY_ABS, type, abs__##sfx)                           \
    ENTRY(RT_UNARY_NEG, type, neg__##sfx)                           \
    ENTRY(RT_UNARY_SIGN, type, sign__##sfx)                         \
    ENTRY(RT_UNARY_CLIP, type, clip__##sfx)
#define UNSIGNED_ENTRIES(sfx, type)                                 \
    ENTRY(RT_UNARY_ABS, type, abs__##sfx)                           \
    ENTRY(RT_UNARY_SIGN, type, sign__##sfx)                         \
    ENTRY(RT_UNARY_CLIP, type, clip__##sfx)

static const rt_unary_kernel unary_kernels[RT_UNARY_KIND_COUNT][RT_TYPE_COUNT] = {
    FLOAT_ENTRIES(f32, RT_F32)
    FLOAT_ENTRIES(f64, RT_F64)
    SIGNED_ENTRIES(i8, RT_I8)
    SIGNED_ENTRIES(i16, RT_I16)
    SIGNED_ENTRIES(i32, RT_I32)
    SIGNED_ENTRIES(i64, RT_I64)
    UNSIGNED_ENTRIES(u8, RT_U8)
    UNSIGNED_ENTRIES(u16, RT_U16)
    UNSIGNED_ENTRIES(u32, RT_U32)
    UNSIGNED_ENTRIES(u64, RT_U64)
    ENTRY(RT_UNARY_NOT, RT_BOOL, not__bool)
};

rt_unary_kernel rt_ops__unary_kernel(rt_unary_kind kind, rt_type type) {
    if ((int)kind < 0 || kind >= RT_UNARY_KIND_COUNT || (int)type < 0 || type >= RT_TYPE_COUNT)
        return NULL;
    return unary_kernels[kind][type];
}

/* ---- prelu ------------------------------------------------------------------------------ */

#define DEFINE_PRELU(sfx, T, NEG_EXPR)                                                \
    static void prelu__##sfx(void *out, const void *x, const void *slope, int64_t ss, \
                             int64_t n) {                                             \
        T *o = out;                                                                   \
        const T *in = x, *s = slope;                                                  \
        for (int64_t i = 0; i < n; i++) {                                             \
            T v = in[i], a = s[i * ss];                                               \
            o[i] = v < 0 ? (T)(NEG_EXPR) : v;                                         \
        }                                                                             \
    }
DEFINE_PRELU(f32, float, v * a)
DEFINE_PRELU(f64, double, v * a)
#define DEFINE_SIGNED_PRELU(sfx, T, W) DEFINE_PRELU(sfx, T, (W)v * (W)a)
SIGNED_TYPES(DEFINE_SIGNED_PRELU)

/* Unsigned x is never negative: prelu copies it. */
#define DEFINE_UNSIGNED_PRELU(sfx, T, W)                                              \
    static void prelu__##sfx(void *out, const void *x, const void *slope, int64_t ss, \
                             int64_t n) {                                             \
        T *o = out;                                                                   \
        const T *in = x;                                                              \
        (void)slope;                                                                  \
        (void)ss;                                                                     \
        for (int64_t i = 0; i < n; i++)                                               \
            o[i] = in[i];                                                             \
    }
UNSIGNED_TYPES(DEFINE_UNSIGNED_PRELU)

rt_prelu_kernel rt_ops__prelu_kernel(rt_type type) {
    switch (type) {
    case RT_F32: return prelu__f32;
    case RT_F64: return prelu__f64;
    case RT_I8: return prelu__i8;
    case RT_I16: return prelu__i16;
    case RT_I32: return prelu__i32;
    case RT_I64: return prelu__i64;
    case RT_U8: return prelu__u8;
    case RT_U16: return prelu__u16;
    case RT_U32: return prelu__u32;
    case RT_U64: return prelu__u64;
    default: return NULL;
    }
}

/* ---- log_softmax and hardmax ------------------------------------------------------------ */

/* log_softmax: (x - max) - log(sum(exp(x - max))); the subtraction comes first so that large
 * inputs keep their precision. The sum accumulates in double. hardmax: 1 at the first maximum
 * (a NaN counts as the maximum, as numpy.argmax), 0 elsewhere. */
#define DEFINE_AXIS_KERNELS(sfx, T, FN)                                                     \
    static void log_softmax__##sfx(void *out, const void *x, int64_t n, int64_t inner,     \
                                   size_t begin, size_t end) {                             \
        for (size_t line = begin; line < end; line++) {                                    \
            int64_t start = ((int64_t)line / inner) * n * inner + (int64_t)line % inner;   \
            const T *in = (const T *)x + start;                                            \
            T *o = (T *)out + start;                                                       \
            T max = -(T)INFINITY;                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                max = in[k * inner] > max ? in[k * inner] : max;                           \
            double sum = 0;                                                                \
            for (int64_t k = 0; k < n; k++)                                                \
                sum += FN(exp)(in[k * inner] - max);                                       \
            T log_sum = (T)log(sum);                                                       \
            for (int64_t k = 0; k < n; k++)                                                \
                o[k * inner] = (in[k * inner] - max) - log_sum;                            \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    static void hardmax__##sfx(void *out, const void *x, int64_t n, int64_t inner,         \
                               size_t begin, size_t end) {                                 \
        for (size_t line = begin; line < end; line++) {                                    \
            int64_t start = ((int64_t)line / inner) * n * inner + (int64_t)line % inner;   \
            const T *in = (const T *)x + start;                                            \
            T *o = (T *)out + start;                                                       \
            int64_t best = 0;                                                              \
            T best_value = in[0];                                                          \
            for (int64_t k = 1; k < n; k++) {                                              \
                T v = in[k * inner];                                                       \
                if (v > best_value || (v != v && best_value == best_value)) {              \
                    best = k;                                                              \
                    best_value = v;                                                        \
                }                                                                          \
            }                                                                              \
            for (int64_t k = 0; k < n; k++)                                                \
                o[k * inner] = 0;                                                          \
            o[best * inner] = 1;                                                           \
        }                                                                                  \
    }
DEFINE_AXIS_KERNELS(f32, float, FN_f32)
DEFINE_AXIS_KERNELS(f64, double, FN_f64)

rt_axis_kernel rt_ops__log_softmax_kernel(rt_type type) {
    return type == RT_F32 ? log_softmax__f32 : type == RT_F64 ? log_softmax__f64 : NULL;
}

rt_axis_kernel rt_ops__hardmax_kernel(rt_type type) {
    return type == RT_F32 ? hardmax__f32 : type == RT_F64 ? hardmax__f64 : NULL;
}
