/* kernels/cast.c: the loops of cast, converting between every pair of dtypes.
 *
 * Each source element is read as one of three carriers, without loss: a double for the float
 * types (float16 and bfloat16 included), an int64 for the signed types, a uint64 for the
 * unsigned types and bool (0 or 1). Each destination has one conversion per carrier, so every
 * result is rounded exactly once:
 * - to float32/float64: C's conversion (round to nearest even);
 * - to float16/bfloat16: round to nearest even in portable C (half_round below), overflow to
 *   ±inf, NaN stays NaN;
 * - float to integer: truncation toward zero, saturating at the dtype's limits; NaN gives 0
 *   (numpy leaves these cases undefined);
 * - integer to integer: wrap-around (modulo 2^bits), as numpy's astype;
 * - to bool: non-zero is true (NaN included); from bool: 0 or 1. */
#include <math.h>
#include <string.h>

#include "ops/elementwise/kernels/cast.h"
#include "ops/op_util.h"

_Static_assert(sizeof(double) == sizeof(uint64_t), "double must be IEEE 754 binary64");

/* ---- float16 and bfloat16 --------------------------------------------------------------- */

/* A 16-bit binary float: sign, exponent field, mant_bits of mantissa. */
typedef struct half_format {
    int32_t mant_bits;
    int32_t emin;     /* exponent of the smallest normal number */
    uint16_t inf;     /* +inf bits (exponent field all ones) */
    uint16_t nan;     /* a quiet NaN */
} half_format;

static const half_format F16 = {10, -14, 0x7C00, 0x7E00};
static const half_format BF16 = {7, -126, 0x7F80, 0x7FC0};

/* Position of the highest set bit of v > 0. */
static int32_t msb_index(uint64_t v) {
    int32_t index = 0;
    for (int32_t step = 32; step > 0; step /= 2)
        if (v >> step) {
            v >>= step;
            index += step;
        }
    return index;
}

/* The value (-1)^negative * sig * 2^lsb_exp rounded to nearest even in format f. The
 * encoding of a finite half is ((e - emin) << mant_bits) + r, where 2^e is the value's binade
 * (clamped to emin for subnormals) and r the value in units of 2^(e - mant_bits): a rounding
 * carry in r moves into the exponent by itself. */
static uint16_t half_round(bool negative, uint64_t sig, int32_t lsb_exp, const half_format *f) {
    uint16_t sign = negative ? 0x8000 : 0;
    if (sig == 0)
        return sign;
    int32_t e = msb_index(sig) + lsb_exp;
    if (e < f->emin)
        e = f->emin;
    int32_t shift = e - f->mant_bits - lsb_exp; /* bits of sig below the unit */
    uint64_t r;
    if (shift <= 0) {
        r = sig << -shift; /* exact: at most mant_bits + 1 bits */
    } else if (shift > 64) {
        r = 0; /* below half a unit */
    } else {
        uint64_t rest = shift == 64 ? sig : sig & ((UINT64_C(1) << shift) - 1);
        uint64_t half = UINT64_C(1) << (shift - 1);
        r = shift == 64 ? 0 : sig >> shift;
        if (rest > half || (rest == half && (r & 1)))
            r++;
    }
    int64_t bits = (int64_t)(e - f->emin) * ((int64_t)1 << f->mant_bits) + (int64_t)r;
    return (uint16_t)(sign | (bits >= f->inf ? f->inf : bits));
}

static uint16_t half_from_double(double d, const half_format *f) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    bool negative = (bits >> 63) != 0;
    int32_t exponent = (int32_t)((bits >> 52) & 0x7FF);
    uint64_t mant = bits & ((UINT64_C(1) << 52) - 1);
    if (exponent == 0x7FF)
        return (uint16_t)((negative ? 0x8000 : 0) | (mant ? f->nan : f->inf));
    if (exponent == 0) /* double subnormal */
        return half_round(negative, mant, -1074, f);
    return half_round(negative, mant | (UINT64_C(1) << 52), exponent - 1075, f);
}

static uint16_t half_from_i64(int64_t v, const half_format *f) {
    uint64_t magnitude = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    return half_round(v < 0, magnitude, 0, f);
}

static uint16_t half_from_u64(uint64_t v, const half_format *f) {
    return half_round(false, v, 0, f);
}

static double f16_to_double(uint16_t h) {
    int32_t field = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    double v;
    if (field == 0x1F)
        v = mant ? NAN : INFINITY;
    else if (field == 0)
        v = ldexp((double)mant, -24);
    else
        v = ldexp((double)(mant | 0x400), field - 25);
    return (h & 0x8000) ? -v : v;
}

/* bfloat16 is the top half of a float32. */
static double bf16_to_double(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---- float to integer ------------------------------------------------------------------- */

/* Truncation toward zero, saturating; NaN gives 0. The limits compare in double: an int64
 * limit rounds to ±2^63, which is exactly where saturation must start. */
static int64_t i64_from_double(double d, int64_t lo, int64_t hi) {
    if (d != d)
        return 0;
    if (d <= (double)lo)
        return lo;
    if (d >= (double)hi)
        return hi;
    return (int64_t)d;
}

static uint64_t u64_from_double(double d, uint64_t hi) {
    if (d != d || d <= 0)
        return 0;
    if (d >= (double)hi)
        return hi;
    return (uint64_t)d;
}

/* ---- the conversion table --------------------------------------------------------------- */

/* Reading a source element into its carrier: F (double), S (int64) or U (uint64). */
#define READ_f32(v) ((double)(v))
#define READ_f64(v) (v)
#define READ_f16(v) f16_to_double(v)
#define READ_bf16(v) bf16_to_double(v)
#define READ_i8(v) ((int64_t)(v))
#define READ_i16(v) ((int64_t)(v))
#define READ_i32(v) ((int64_t)(v))
#define READ_i64(v) (v)
#define READ_u8(v) ((uint64_t)(v))
#define READ_u16(v) ((uint64_t)(v))
#define READ_u32(v) ((uint64_t)(v))
#define READ_u64(v) (v)
#define READ_b8(v) ((uint64_t)((v) != 0))

/* Writing a carrier into a destination element: WRITE_<dst>_<carrier>. C's conversions to
 * float32 and float64 round to nearest even. */
#define WRITE_f32_F(v) ((float)(v))
#define WRITE_f32_S(v) ((float)(v))
#define WRITE_f32_U(v) ((float)(v))
#define WRITE_f64_F(v) ((double)(v))
#define WRITE_f64_S(v) ((double)(v))
#define WRITE_f64_U(v) ((double)(v))
#define WRITE_f16_F(v) half_from_double(v, &F16)
#define WRITE_f16_S(v) half_from_i64(v, &F16)
#define WRITE_f16_U(v) half_from_u64(v, &F16)
#define WRITE_bf16_F(v) half_from_double(v, &BF16)
#define WRITE_bf16_S(v) half_from_i64(v, &BF16)
#define WRITE_bf16_U(v) half_from_u64(v, &BF16)
/* Float to integer truncates and saturates. */
#define WRITE_i8_F(v) ((int8_t)i64_from_double(v, INT8_MIN, INT8_MAX))
#define WRITE_i16_F(v) ((int16_t)i64_from_double(v, INT16_MIN, INT16_MAX))
#define WRITE_i32_F(v) ((int32_t)i64_from_double(v, INT32_MIN, INT32_MAX))
#define WRITE_i64_F(v) i64_from_double(v, INT64_MIN, INT64_MAX)
#define WRITE_u8_F(v) ((uint8_t)u64_from_double(v, UINT8_MAX))
#define WRITE_u16_F(v) ((uint16_t)u64_from_double(v, UINT16_MAX))
#define WRITE_u32_F(v) ((uint32_t)u64_from_double(v, UINT32_MAX))
#define WRITE_u64_F(v) u64_from_double(v, UINT64_MAX)
/* Integer to integer wraps: through uint64, then narrowing modulo 2^bits (C leaves narrowing
 * to a signed type implementation-defined; every supported compiler wraps). */
#define WRITE_i8_S(v) ((int8_t)(uint64_t)(v))
#define WRITE_i16_S(v) ((int16_t)(uint64_t)(v))
#define WRITE_i32_S(v) ((int32_t)(uint64_t)(v))
#define WRITE_i64_S(v) ((int64_t)(v))
#define WRITE_u8_S(v) ((uint8_t)(uint64_t)(v))
#define WRITE_u16_S(v) ((uint16_t)(uint64_t)(v))
#define WRITE_u32_S(v) ((uint32_t)(uint64_t)(v))
#define WRITE_u64_S(v) ((uint64_t)(v))
#define WRITE_i8_U WRITE_i8_S
#define WRITE_i16_U WRITE_i16_S
#define WRITE_i32_U WRITE_i32_S
#define WRITE_i64_U(v) ((int64_t)(v))
#define WRITE_u8_U WRITE_u8_S
#define WRITE_u16_U WRITE_u16_S
#define WRITE_u32_U WRITE_u32_S
#define WRITE_u64_U WRITE_u64_S
#define WRITE_b8_F(v) ((uint8_t)((v) != 0))
#define WRITE_b8_S(v) ((uint8_t)((v) != 0))
#define WRITE_b8_U(v) ((uint8_t)((v) != 0))

/* suffix, C type, carrier, rt_type. The list exists twice, for sources and for destinations,
 * because a macro cannot expand inside its own expansion. */
#define SOURCE_TYPES(X)                                                                     \
    X(f32, float, F, RT_F32) X(f64, double, F, RT_F64) X(f16, uint16_t, F, RT_F16)          \
    X(bf16, uint16_t, F, RT_BF16) X(i8, int8_t, S, RT_I8) X(i16, int16_t, S, RT_I16)        \
    X(i32, int32_t, S, RT_I32) X(i64, int64_t, S, RT_I64) X(u8, uint8_t, U, RT_U8)          \
    X(u16, uint16_t, U, RT_U16) X(u32, uint32_t, U, RT_U32) X(u64, uint64_t, U, RT_U64)     \
    X(b8, uint8_t, U, RT_BOOL)
#define DEST_TYPES(X, s, ST, carrier, type)                                                 \
    X(s, ST, carrier, type, f32, float, RT_F32) X(s, ST, carrier, type, f64, double, RT_F64) \
    X(s, ST, carrier, type, f16, uint16_t, RT_F16)                                          \
    X(s, ST, carrier, type, bf16, uint16_t, RT_BF16)                                        \
    X(s, ST, carrier, type, i8, int8_t, RT_I8) X(s, ST, carrier, type, i16, int16_t, RT_I16) \
    X(s, ST, carrier, type, i32, int32_t, RT_I32)                                           \
    X(s, ST, carrier, type, i64, int64_t, RT_I64)                                           \
    X(s, ST, carrier, type, u8, uint8_t, RT_U8)                                             \
    X(s, ST, carrier, type, u16, uint16_t, RT_U16)                                          \
    X(s, ST, carrier, type, u32, uint32_t, RT_U32)                                          \
    X(s, ST, carrier, type, u64, uint64_t, RT_U64)                                          \
    X(s, ST, carrier, type, b8, uint8_t, RT_BOOL)

typedef void (*cast_kernel)(void *out, const void *x, size_t n);

#define DEFINE_CAST(s, ST, carrier, s_type, d, DT, d_type)             \
    static void cast__##s##__##d(void *out, const void *x, size_t n) { \
        DT *o = out;                                                   \
        const ST *in = x;                                              \
        for (size_t i = 0; i < n; i++)                                 \
            o[i] = WRITE_##d##_##carrier(READ_##s(in[i]));             \
    }
#define DEFINE_CASTS_FROM(s, ST, carrier, type) DEST_TYPES(DEFINE_CAST, s, ST, carrier, type)
SOURCE_TYPES(DEFINE_CASTS_FROM)

#define CAST_ENTRY(s, ST, carrier, s_type, d, DT, d_type) [s_type][d_type] = cast__##s##__##d,
#define CAST_ENTRIES_FROM(s, ST, carrier, type) DEST_TYPES(CAST_ENTRY, s, ST, carrier, type)
static const cast_kernel cast_kernels[RT_TYPE_COUNT][RT_TYPE_COUNT] = {
    SOURCE_TYPES(CAST_ENTRIES_FROM)
};

typedef struct cast_job {
    cast_kernel kernel;
    char *out;
    const char *x;
    size_t out_size, x_size; /* element bytes */
} cast_job;

static void cast_range(void *arg, size_t begin, size_t end) {
    const cast_job *job = arg;
    job->kernel(job->out + begin * job->out_size, job->x + begin * job->x_size, end - begin);
}

void rt_elementwise__cast(rt_type from, rt_type to, const void *x, void *out, int64_t numel,
                          size_t x_size, size_t out_size, int32_t threads) {
    cast_job job = {cast_kernels[from][to], out, x, out_size, x_size};
    rt_parallel__for(threads, (size_t)numel, rt_op__grain(4), cast_range, &job);
}
