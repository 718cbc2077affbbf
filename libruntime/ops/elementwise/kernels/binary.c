/* kernels/binary.c: typed loops of add, sub, mul, div, less and equal.
 *
 * Each kernel is generated from one expression of the two operands p and q. Integer add, sub
 * and mul compute in an unsigned type of at least int's width, so they wrap around instead of
 * overflowing (signed overflow is undefined, and uint16 * uint16 would promote to int). */
#include "ops/elementwise/kernels/binary.h"

/* Loop over n elements; the common stride patterns get their own loop so the compiler can
 * vectorise them (strides are 1 for a dense operand, 0 for a broadcast one). */
#define DEFINE_BINARY(name, T, OUT_T, EXPR)                                           \
    static void name(void *out, const void *a, int64_t sa, const void *b, int64_t sb, \
                     int64_t n)                                                       \
    {                                                                                 \
        OUT_T *o = out;                                                               \
        const T *x = a, *y = b;                                                       \
        if (sa == 1 && sb == 1) {                                                     \
            for (int64_t i = 0; i < n; i++) {                                         \
                T p = x[i], q = y[i];                                                 \
                o[i] = (OUT_T)(EXPR);                                                 \
            }                                                                         \
        } else if (sa == 1 && sb == 0) {                                              \
            const T q = y[0];                                                         \
            for (int64_t i = 0; i < n; i++) {                                         \
                T p = x[i];                                                           \
                o[i] = (OUT_T)(EXPR);                                                 \
            }                                                                         \
        } else if (sa == 0 && sb == 1) {                                              \
            const T p = x[0];                                                         \
            for (int64_t i = 0; i < n; i++) {                                         \
                T q = y[i];                                                           \
                o[i] = (OUT_T)(EXPR);                                                 \
            }                                                                         \
        } else {                                                                      \
            for (int64_t i = 0; i < n; i++) {                                         \
                T p = x[i * sa], q = y[i * sb];                                       \
                o[i] = (OUT_T)(EXPR);                                                 \
            }                                                                         \
        }                                                                             \
    }

/* suffix, C type, unsigned type the arithmetic wraps in */
#define FLOAT_TYPES(X) X(f32, float, float) X(f64, double, double)
#define SIGNED_TYPES(X)                                                         \
    X(i8, int8_t, uint32_t) X(i16, int16_t, uint32_t) X(i32, int32_t, uint32_t) \
    X(i64, int64_t, uint64_t)
#define UNSIGNED_TYPES(X)                                                          \
    X(u8, uint8_t, uint32_t) X(u16, uint16_t, uint32_t) X(u32, uint32_t, uint32_t) \
    X(u64, uint64_t, uint64_t)
#define INTEGER_TYPES(X) SIGNED_TYPES(X) UNSIGNED_TYPES(X)
#define NUMERIC_TYPES(X) FLOAT_TYPES(X) INTEGER_TYPES(X)

/* ---- arithmetic ------------------------------------------------------------------------- */

#define DEFINE_FLOAT_ARITH(sfx, T, W)             \
    DEFINE_BINARY(binary_add__##sfx, T, T, p + q) \
    DEFINE_BINARY(binary_sub__##sfx, T, T, p - q) \
    DEFINE_BINARY(binary_mul__##sfx, T, T, p * q) \
    DEFINE_BINARY(binary_div__##sfx, T, T, p / q)
FLOAT_TYPES(DEFINE_FLOAT_ARITH)

#define DEFINE_INT_ARITH(sfx, T, W)                     \
    DEFINE_BINARY(binary_add__##sfx, T, T, (W)p + (W)q) \
    DEFINE_BINARY(binary_sub__##sfx, T, T, (W)p - (W)q) \
    DEFINE_BINARY(binary_mul__##sfx, T, T, (W)p * (W)q)
INTEGER_TYPES(DEFINE_INT_ARITH)

/* Truncating division; MIN / -1 wraps to MIN (negating in the unsigned type), x / 0 gives 0
 * so that a missed check cannot trap. */
#define DEFINE_SIGNED_DIV(sfx, T, W) \
    DEFINE_BINARY(binary_div__##sfx, T, T, q == 0 ? 0 : q == -1 ? (T)(0u - (W)p) : p / q)
SIGNED_TYPES(DEFINE_SIGNED_DIV)

#define DEFINE_UNSIGNED_DIV(sfx, T, W) DEFINE_BINARY(binary_div__##sfx, T, T, q == 0 ? 0 : p / q)
UNSIGNED_TYPES(DEFINE_UNSIGNED_DIV)

/* ---- comparisons ------------------------------------------------------------------------ */

#define DEFINE_COMPARE(sfx, T, W)                        \
    DEFINE_BINARY(binary_less__##sfx, T, uint8_t, p < q) \
    DEFINE_BINARY(binary_equal__##sfx, T, uint8_t, p == q)
NUMERIC_TYPES(DEFINE_COMPARE)

/* Any non-zero byte is true, whatever wrote it. */
DEFINE_BINARY(binary_equal__bool, uint8_t, uint8_t, (p != 0) == (q != 0))

/* ---- table ------------------------------------------------------------------------------ */

#define ENTRY(op, type, fn) [op][type] = fn,
#define ARITH_ENTRIES(sfx, type)                    \
    ENTRY(RT_BINARY_ADD, type, binary_add__##sfx)   \
    ENTRY(RT_BINARY_SUB, type, binary_sub__##sfx)   \
    ENTRY(RT_BINARY_MUL, type, binary_mul__##sfx)   \
    ENTRY(RT_BINARY_DIV, type, binary_div__##sfx)   \
    ENTRY(RT_BINARY_LESS, type, binary_less__##sfx) \
    ENTRY(RT_BINARY_EQUAL, type, binary_equal__##sfx)

static const rt_binary_kernel binary_kernels[RT_BINARY_OP_COUNT][RT_TYPE_COUNT] = {
    ARITH_ENTRIES(f32, RT_F32)
    ARITH_ENTRIES(f64, RT_F64)
    ARITH_ENTRIES(i8, RT_I8)
    ARITH_ENTRIES(i16, RT_I16)
    ARITH_ENTRIES(i32, RT_I32)
    ARITH_ENTRIES(i64, RT_I64)
    ARITH_ENTRIES(u8, RT_U8)
    ARITH_ENTRIES(u16, RT_U16)
    ARITH_ENTRIES(u32, RT_U32)
    ARITH_ENTRIES(u64, RT_U64)
    ENTRY(RT_BINARY_EQUAL, RT_BOOL, binary_equal__bool)
};

rt_binary_kernel rt_ops__binary_kernel(rt_binary_op op, rt_type type) {
    if ((int)op < 0 || op >= RT_BINARY_OP_COUNT || (int)type < 0 || type >= RT_TYPE_COUNT)
        return NULL;
    return binary_kernels[op][type];
}

/* ---- zero scan (integer division) ------------------------------------------------------- */

#define DEFINE_ANY_ZERO(name, T)                  \
    static bool name(const void *data, int64_t n) \
    {                                             \
        const T *x = data;                        \
        bool zero = false;                        \
        for (int64_t i = 0; i < n; i++)           \
            zero |= x[i] == 0;                    \
        return zero;                              \
    }
DEFINE_ANY_ZERO(any_zero__u8, uint8_t)
DEFINE_ANY_ZERO(any_zero__u16, uint16_t)
DEFINE_ANY_ZERO(any_zero__u32, uint32_t)
DEFINE_ANY_ZERO(any_zero__u64, uint64_t)

bool rt_ops__any_zero(const void *data, size_t elem_size, int64_t n) {
    switch (elem_size) {
    case 1: return any_zero__u8(data, n);
    case 2: return any_zero__u16(data, n);
    case 4: return any_zero__u32(data, n);
    case 8: return any_zero__u64(data, n);
    default: return false;
    }
}
