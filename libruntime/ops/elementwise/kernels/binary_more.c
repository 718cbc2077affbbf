/* kernels/binary_more.c: typed loops of pow, mod, min, max, less_equal, and, or, xor and where.
 *
 * Each binary kernel is generated from one expression of the two operands p and q. Integer
 * results that can overflow (pow) are computed in uint64_t, so they wrap around instead of
 * overflowing (signed overflow is undefined). */
#include <math.h>

#include "ops/elementwise/kernels/binary_more.h"

/* Loop over n elements; the common stride patterns get their own loop so the compiler can
 * vectorise them (strides are 1 for a dense operand, 0 for a broadcast one). */
#define DEFINE_BINARY(name, TA, TB, OUT_T, EXPR)                                       \
    static void name(void *out, const void *const *in, const int64_t *st, int64_t n) { \
        OUT_T *o = out;                                                                \
        const TA *x = in[0];                                                           \
        const TB *y = in[1];                                                           \
        int64_t sa = st[0], sb = st[1];                                                \
        if (sa == 1 && sb == 1) {                                                      \
            for (int64_t i = 0; i < n; i++) {                                          \
                TA p = x[i];                                                           \
                TB q = y[i];                                                           \
                o[i] = (OUT_T)(EXPR);                                                  \
            }                                                                          \
        } else if (sa == 1 && sb == 0) {                                               \
            const TB q = y[0];                                                         \
            for (int64_t i = 0; i < n; i++) {                                          \
                TA p = x[i];                                                           \
                o[i] = (OUT_T)(EXPR);                                                  \
            }                                                                          \
        } else if (sa == 0 && sb == 1) {                                               \
            const TA p = x[0];                                                         \
            for (int64_t i = 0; i < n; i++) {                                          \
                TB q = y[i];                                                           \
                o[i] = (OUT_T)(EXPR);                                                  \
            }                                                                          \
        } else {                                                                       \
            for (int64_t i = 0; i < n; i++) {                                          \
                TA p = x[i * sa];                                                      \
                TB q = y[i * sb];                                                      \
                o[i] = (OUT_T)(EXPR);                                                  \
            }                                                                          \
        }                                                                              \
    }

/* suffix, C type */
#define FLOAT_TYPES(X) X(f32, float) X(f64, double)
#define SIGNED_TYPES(X) X(i8, int8_t) X(i16, int16_t) X(i32, int32_t) X(i64, int64_t)
#define UNSIGNED_TYPES(X) X(u8, uint8_t) X(u16, uint16_t) X(u32, uint32_t) X(u64, uint64_t)
#define INTEGER_TYPES(X) SIGNED_TYPES(X) UNSIGNED_TYPES(X)
#define NUMERIC_TYPES(X) FLOAT_TYPES(X) INTEGER_TYPES(X)

/* ---- mod -------------------------------------------------------------------------------- */

/* numpy's float remainder: fmod, moved into the divisor's sign; a zero takes the divisor's
 * sign; x mod 0 is NaN (from fmod). */
#define DEFINE_FLOAT_MOD(sfx, T)                                            \
    static inline T mod_floor__##sfx(T p, T q) {                            \
        T m = (T)fmod(p, q);                                                \
        if (q == 0)                                                         \
            return m;                                                       \
        if (m != 0)                                                         \
            return (q < 0) != (m < 0) ? (T)(m + q) : m;                     \
        return (T)copysign(0.0, q);                                         \
    }                                                                       \
    DEFINE_BINARY(binary_mod_floor__##sfx, T, T, T, mod_floor__##sfx(p, q)) \
    DEFINE_BINARY(binary_mod_trunc__##sfx, T, T, T, fmod(p, q))
FLOAT_TYPES(DEFINE_FLOAT_MOD)

/* x % 0 gives 0 so that a missed check cannot trap; MIN % -1 is 0 (the C expression would
 * overflow). |r| < |q| with opposite signs, so r + q cannot overflow. */
#define DEFINE_SIGNED_MOD(sfx, T)                                           \
    static inline T mod_trunc__##sfx(T p, T q) {                            \
        return (q == 0 || q == -1) ? (T)0 : (T)(p % q);                     \
    }                                                                       \
    static inline T mod_floor__##sfx(T p, T q) {                            \
        T r = mod_trunc__##sfx(p, q);                                       \
        return (r != 0 && (r < 0) != (q < 0)) ? (T)(r + q) : r;             \
    }                                                                       \
    DEFINE_BINARY(binary_mod_floor__##sfx, T, T, T, mod_floor__##sfx(p, q)) \
    DEFINE_BINARY(binary_mod_trunc__##sfx, T, T, T, mod_trunc__##sfx(p, q))
SIGNED_TYPES(DEFINE_SIGNED_MOD)

#define DEFINE_UNSIGNED_MOD(sfx, T)                                     \
    DEFINE_BINARY(binary_mod_floor__##sfx, T, T, T, q == 0 ? 0 : p % q) \
    DEFINE_BINARY(binary_mod_trunc__##sfx, T, T, T, q == 0 ? 0 : p % q)
UNSIGNED_TYPES(DEFINE_UNSIGNED_MOD)

/* ---- min, max, less_equal --------------------------------------------------------------- */

/* NaN propagates (numpy.minimum, ONNX Min). */
#define DEFINE_FLOAT_MINMAX(sfx, T)                                                    \
    DEFINE_BINARY(binary_min__##sfx, T, T, T, p != p ? p : q != q ? q : p < q ? p : q) \
    DEFINE_BINARY(binary_max__##sfx, T, T, T, p != p ? p : q != q ? q : p > q ? p : q)
FLOAT_TYPES(DEFINE_FLOAT_MINMAX)

#define DEFINE_INT_MINMAX(sfx, T)                            \
    DEFINE_BINARY(binary_min__##sfx, T, T, T, p < q ? p : q) \
    DEFINE_BINARY(binary_max__##sfx, T, T, T, p > q ? p : q)
INTEGER_TYPES(DEFINE_INT_MINMAX)

#define DEFINE_LESS_EQUAL(sfx, T) DEFINE_BINARY(binary_less_equal__##sfx, T, T, uint8_t, p <= q)
NUMERIC_TYPES(DEFINE_LESS_EQUAL)

/* ---- logic (bool: any non-zero byte is true) -------------------------------------------- */

DEFINE_BINARY(binary_and__bool, uint8_t, uint8_t, uint8_t, (p != 0) & (q != 0))
DEFINE_BINARY(binary_or__bool, uint8_t, uint8_t, uint8_t, (p != 0) | (q != 0))
DEFINE_BINARY(binary_xor__bool, uint8_t, uint8_t, uint8_t, (p != 0) != (q != 0))

/* ---- bit shifts (unsigned; widened first so no shift of a promoted int can overflow) ----- */

#define DEFINE_SHIFT(sfx, T)                                                                  \
    DEFINE_BINARY(binary_shift_left__##sfx, T, T, T,                                         \
                  q >= 8 * sizeof(T) ? (T)0 : (T)((uint64_t)p << q))                         \
    DEFINE_BINARY(binary_shift_right__##sfx, T, T, T,                                        \
                  q >= 8 * sizeof(T) ? (T)0 : (T)((uint64_t)p >> q))
UNSIGNED_TYPES(DEFINE_SHIFT)

/* Signed: left shifts wrap (done unsigned); right shifts are arithmetic, as numpy's, and a
 * shift by the width or more (or a negative amount) gives 0, or -1 for a negative value. */
#define DEFINE_SIGNED_SHIFT(sfx, T)                                                           \
    DEFINE_BINARY(binary_shift_left__##sfx, T, T, T,                                         \
                  (uint64_t)q >= 8 * sizeof(T) ? (T)0 : (T)((uint64_t)p << q))               \
    DEFINE_BINARY(binary_shift_right__##sfx, T, T, T,                                        \
                  (uint64_t)q >= 8 * sizeof(T) ? (T)(p < 0 ? -1 : 0) : (T)(p >> q))
SIGNED_TYPES(DEFINE_SIGNED_SHIFT)

/* ---- table ------------------------------------------------------------------------------ */

#define ENTRY(op, type, fn) [op][type] = fn,
#define NUMERIC_ENTRIES(sfx, type)                            \
    ENTRY(RT_MORE_MOD_FLOOR, type, binary_mod_floor__##sfx)   \
    ENTRY(RT_MORE_MOD_TRUNC, type, binary_mod_trunc__##sfx)   \
    ENTRY(RT_MORE_MIN, type, binary_min__##sfx)               \
    ENTRY(RT_MORE_MAX, type, binary_max__##sfx)               \
    ENTRY(RT_MORE_LESS_EQUAL, type, binary_less_equal__##sfx)

#define SHIFT_ENTRIES(sfx, type)                              \
    ENTRY(RT_MORE_SHIFT_LEFT, type, binary_shift_left__##sfx) \
    ENTRY(RT_MORE_SHIFT_RIGHT, type, binary_shift_right__##sfx)

static const rt_nary_kernel more_kernels[RT_MORE_OP_COUNT][RT_TYPE_COUNT] = {
    NUMERIC_ENTRIES(f32, RT_F32)
    NUMERIC_ENTRIES(f64, RT_F64)
    NUMERIC_ENTRIES(i8, RT_I8)
    NUMERIC_ENTRIES(i16, RT_I16)
    NUMERIC_ENTRIES(i32, RT_I32)
    NUMERIC_ENTRIES(i64, RT_I64)
    NUMERIC_ENTRIES(u8, RT_U8)
    NUMERIC_ENTRIES(u16, RT_U16)
    NUMERIC_ENTRIES(u32, RT_U32)
    NUMERIC_ENTRIES(u64, RT_U64)
    ENTRY(RT_MORE_AND, RT_BOOL, binary_and__bool)
    ENTRY(RT_MORE_OR, RT_BOOL, binary_or__bool)
    ENTRY(RT_MORE_XOR, RT_BOOL, binary_xor__bool)
    SHIFT_ENTRIES(i8, RT_I8)
    SHIFT_ENTRIES(i16, RT_I16)
    SHIFT_ENTRIES(i32, RT_I32)
    SHIFT_ENTRIES(i64, RT_I64)
    SHIFT_ENTRIES(u8, RT_U8)
    SHIFT_ENTRIES(u16, RT_U16)
    SHIFT_ENTRIES(u32, RT_U32)
    SHIFT_ENTRIES(u64, RT_U64)
};

rt_nary_kernel rt_ops__more_kernel(rt_more_op op, rt_type type) {
    if ((int)op < 0 || op >= RT_MORE_OP_COUNT || (int)type < 0 || type >= RT_TYPE_COUNT)
        return NULL;
    return more_kernels[op][type];
}

/* ---- pow -------------------------------------------------------------------------------- */

/* Square and multiply, wrapping modulo 2^64 (and so modulo 2^bits after truncation). */
static inline uint64_t ipow_unsigned(uint64_t base, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1u)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

/* A negative exponent gives the integer part of 1 / base^-e: 1 and -1 stay exact, anything
 * else truncates to 0 (0 included, rather than a division by zero). */
static inline uint64_t ipow_signed(int64_t base, int64_t e) {
    if (e >= 0)
        return ipow_unsigned((uint64_t)base, (uint64_t)e);
    if (base == 1)
        return 1u;
    if (base == -1)
        return (e & 1) ? UINT64_MAX : 1u;
    return 0u;
}

/* A float result into an integer base type: truncated toward zero, saturated at the type's
 * range, NaN to 0 (a C conversion out of range would be undefined). */
static inline int32_t saturate_i32(double v) {
    if (v != v)
        return 0;
    if (v >= 2147483647.0)
        return INT32_MAX;
    if (v <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)v;
}

static inline int64_t saturate_i64(double v) {
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

/* Float bases: the power in double, rounded to the base's type; x^0.5 is sqrt(x), as numpy
 * and torch compute it (sqrt(-0) = -0 and sqrt(-inf) = NaN, where C's pow gives +0 and +inf). */
static inline double float_pow(double x, double y) { return y == 0.5 ? sqrt(x) : pow(x, y); }
#define FLOAT_POW(B, BT, E, ET) DEFINE_BINARY(pow__##B##_##E, BT, ET, BT, float_pow(p, (double)q))
#define FLOAT_BASE(X, B, BT)                                              \
    X(B, BT, f32, float) X(B, BT, f64, double) X(B, BT, i8, int8_t)       \
    X(B, BT, i16, int16_t) X(B, BT, i32, int32_t) X(B, BT, i64, int64_t)  \
    X(B, BT, u8, uint8_t) X(B, BT, u16, uint16_t) X(B, BT, u32, uint32_t) \
    X(B, BT, u64, uint64_t)
FLOAT_BASE(FLOAT_POW, f32, float)
FLOAT_BASE(FLOAT_POW, f64, double)

/* Integer bases: exact (wrapping) for integer exponents, through double for float ones. */
#define INT_POW_FLOAT(B, BT, E, ET)                                                    \
    DEFINE_BINARY(pow__##B##_##E, BT, ET, BT, saturate_##B(pow((double)p, (double)q)))
#define INT_POW_SIGNED(B, BT, E, ET)                                               \
    DEFINE_BINARY(pow__##B##_##E, BT, ET, BT, ipow_signed((int64_t)p, (int64_t)q))
#define INT_POW_UNSIGNED(B, BT, E, ET)                                                          \
    DEFINE_BINARY(pow__##B##_##E, BT, ET, BT, ipow_unsigned((uint64_t)(int64_t)p, (uint64_t)q))
#define INT_BASE(B, BT)                                                           \
    INT_POW_FLOAT(B, BT, f32, float) INT_POW_FLOAT(B, BT, f64, double)            \
    INT_POW_SIGNED(B, BT, i8, int8_t) INT_POW_SIGNED(B, BT, i16, int16_t)         \
    INT_POW_SIGNED(B, BT, i32, int32_t) INT_POW_SIGNED(B, BT, i64, int64_t)       \
    INT_POW_UNSIGNED(B, BT, u8, uint8_t) INT_POW_UNSIGNED(B, BT, u16, uint16_t)   \
    INT_POW_UNSIGNED(B, BT, u32, uint32_t) INT_POW_UNSIGNED(B, BT, u64, uint64_t)
INT_BASE(i32, int32_t)
INT_BASE(i64, int64_t)

#define POW_ROW(B)                                                                       \
    {                                                                                    \
        [RT_F32] = pow__##B##_f32, [RT_F64] = pow__##B##_f64, [RT_I8] = pow__##B##_i8,   \
        [RT_I16] = pow__##B##_i16, [RT_I32] = pow__##B##_i32, [RT_I64] = pow__##B##_i64, \
        [RT_U8] = pow__##B##_u8, [RT_U16] = pow__##B##_u16, [RT_U32] = pow__##B##_u32,   \
        [RT_U64] = pow__##B##_u64,                                                       \
    }

static const rt_nary_kernel pow_kernels[4][RT_TYPE_COUNT] = {
    POW_ROW(f32), POW_ROW(f64), POW_ROW(i32), POW_ROW(i64),
};

rt_nary_kernel rt_ops__pow_kernel(rt_type base, rt_type exponent) {
    if ((int)exponent < 0 || exponent >= RT_TYPE_COUNT)
        return NULL;
    switch (base) {
    case RT_F32: return pow_kernels[0][exponent];
    case RT_F64: return pow_kernels[1][exponent];
    case RT_I32: return pow_kernels[2][exponent];
    case RT_I64: return pow_kernels[3][exponent];
    default: return NULL;
    }
}

/* float32 to one constant power (the exponent, as a double, is the second input with stride
 * 0): the exponents models use get a few float or double operations instead of pow(). */
#define DEFINE_POW_F32(name, EXPR)                                                           \
    static void pow_f32__##name(void *out, const void *const *in, const int64_t *st,        \
                                int64_t n) {                                                \
        float *o = out;                                                                     \
        const float *x = in[0];                                                             \
        const double q = *(const double *)in[1];                                            \
        (void)q;                                                                            \
        if (st[0] == 1) {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                               \
                float p = x[i];                                                             \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                float p = x[i * st[0]];                                                     \
                o[i] = (EXPR);                                                              \
            }                                                                               \
        }                                                                                   \
    }
DEFINE_POW_F32(square, p * p)
DEFINE_POW_F32(cube, (float)((double)p * p * p))
/* x^0.5 is sqrt(x), as in float_pow; x^-0.5 keeps pow's special cases. */
DEFINE_POW_F32(sqrt, sqrtf(p))
DEFINE_POW_F32(rsqrt, p == 0 ? INFINITY : p == -INFINITY ? 0.0f : (float)(1.0 / sqrt((double)p)))
DEFINE_POW_F32(reciprocal, 1.0f / p)

/* Square and multiply in double (exact up to a few roundings far below float's), then the
 * reciprocal for a negative exponent. */
static inline float pow_f32_integer(float base, double exponent) {
    double r = 1.0, b = base;
    for (uint32_t e = (uint32_t)fabs(exponent); e; e >>= 1) {
        if (e & 1u)
            r *= b;
        b *= b;
    }
    return (float)(exponent < 0 ? 1.0 / r : r);
}
DEFINE_POW_F32(integer, pow_f32_integer(p, q))

rt_nary_kernel rt_ops__pow_f32_constant_kernel(double exponent) {
    if (exponent == 2)
        return pow_f32__square;
    if (exponent == 3)
        return pow_f32__cube;
    if (exponent == 0.5)
        return pow_f32__sqrt;
    if (exponent == -0.5)
        return pow_f32__rsqrt;
    if (exponent == -1)
        return pow_f32__reciprocal;
    if (exponent == floor(exponent) && fabs(exponent) <= 64)
        return pow_f32__integer;
    return NULL;
}

/* ---- where ------------------------------------------------------------------------------ */

/* Moves raw elements, so one kernel per element size serves every dtype. */
#define DEFINE_WHERE(name, T)                                                          \
    static void name(void *out, const void *const *in, const int64_t *st, int64_t n) { \
        T *o = out;                                                                    \
        const uint8_t *c = in[0];                                                      \
        const T *x = in[1], *y = in[2];                                                \
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {                                  \
            for (int64_t i = 0; i < n; i++)                                            \
                o[i] = c[i] ? x[i] : y[i];                                             \
            return;                                                                    \
        }                                                                              \
        for (int64_t i = 0; i < n; i++)                                                \
            o[i] = c[i * st[0]] ? x[i * st[1]] : y[i * st[2]];                         \
    }
DEFINE_WHERE(where__1, uint8_t)
DEFINE_WHERE(where__2, uint16_t)
DEFINE_WHERE(where__4, uint32_t)
DEFINE_WHERE(where__8, uint64_t)

rt_nary_kernel rt_ops__where_kernel(size_t elem_size) {
    switch (elem_size) {
    case 1: return where__1;
    case 2: return where__2;
    case 4: return where__4;
    case 8: return where__8;
    default: return NULL;
    }
}
