// elementwise.cu: unary math and activations, broadcasting binary ops, the bias + activation
// epilogue of the GEMM paths, and casts between every pair of dtypes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"

// ---- unary: the formulas of ops/elementwise/kernels/unary.c, in T's own precision ----

template <typename T>
__device__ inline T clamp01(T t) { return t < (T)0 ? (T)0 : t > (T)1 ? (T)1 : t; }

template <typename T>
__device__ inline T stable_sigmoid(T v) {
    T e = exp(-fabs(v));
    return v >= (T)0 ? (T)1 / ((T)1 + e) : e / ((T)1 + e);
}

template <typename T>
__device__ inline T softplus(T v) { return (v > (T)0 ? v : (T)0) + log1p(exp(-fabs(v))); }

template <typename T>
__device__ inline void unary(const rt_cuda_unary_params &p) {
    const T *x = (const T *)p.x;
    const T alpha = (T)p.alpha, beta = (T)p.beta, lo = (T)p.lo, hi = (T)p.hi;
    RT_GRID_LOOP(i, p.n) {
        T v = x[i], r;
        switch (p.kind) {
        case RT_CUDA_ABS: r = fabs(v); break;
        case RT_CUDA_NEG: r = -v; break;
        case RT_CUDA_EXP: r = exp(v); break;
        case RT_CUDA_LOG: r = log(v); break;
        case RT_CUDA_SQRT: r = sqrt(v); break;
        case RT_CUDA_RECIPROCAL: r = (T)1 / v; break;
        case RT_CUDA_FLOOR: r = floor(v); break;
        case RT_CUDA_CEIL: r = ceil(v); break;
        case RT_CUDA_ROUND: r = rint(v); break; // halves to even
        case RT_CUDA_SIGN: r = v > (T)0 ? (T)1 : v < (T)0 ? (T)-1 : v; break;
        case RT_CUDA_SIN: r = sin(v); break;
        case RT_CUDA_COS: r = cos(v); break;
        case RT_CUDA_TAN: r = tan(v); break;
        case RT_CUDA_TANH: r = tanh(v); break;
        case RT_CUDA_ERF: r = erf(v); break;
        case RT_CUDA_SIGMOID: r = stable_sigmoid(v); break;
        case RT_CUDA_HARD_SIGMOID: r = clamp01(alpha * v + beta); break;
        case RT_CUDA_LEAKY_RELU: r = v < (T)0 ? alpha * v : v; break;
        case RT_CUDA_ELU: r = v < (T)0 ? alpha * expm1(v) : v; break;
        case RT_CUDA_SELU: r = beta * (v <= (T)0 ? alpha * expm1(v) : v); break;
        // both GELUs in forms that do not cancel for large negative v, as the CPU's
        case RT_CUDA_GELU: r = (T)0.5 * v * erfc(v * (T)-0.70710678118654752440); break;
        case RT_CUDA_GELU_TANH:
            r = v * stable_sigmoid((T)1.5957691216057308 * (v + (T)0.044715 * v * v * v));
            break;
        case RT_CUDA_SILU: r = v * stable_sigmoid(v); break;
        case RT_CUDA_SOFTPLUS: r = softplus(v); break;
        case RT_CUDA_SOFTSIGN: r = v / ((T)1 + fabs(v)); break;
        case RT_CUDA_HARD_SWISH: r = v * clamp01(v / (T)6 + (T)0.5); break;
        case RT_CUDA_MISH: r = v * tanh(softplus(v)); break;
        case RT_CUDA_CLIP: {
            T c = v < lo ? lo : v; // NaN stays NaN
            r = c > hi ? hi : c;
            break;
        }
        case RT_CUDA_RELU: r = v < (T)0 ? (T)0 : v; break;
        case RT_CUDA_ISNAN:
            ((uint8_t *)p.out)[i] = v != v;
            continue;
        case RT_CUDA_ISINF:
            ((uint8_t *)p.out)[i] = (p.detect_positive && v == (T)INFINITY) ||
                                    (p.detect_negative && v == -(T)INFINITY);
            continue;
        default: r = v; break;
        }
        ((T *)p.out)[i] = r;
    }
}

extern "C" __global__ void rt_k_unary_f32(rt_cuda_unary_params p) { unary<float>(p); }
extern "C" __global__ void rt_k_unary_f64(rt_cuda_unary_params p) { unary<double>(p); }

// ---- unary on integers: U is T's unsigned type, for the wrapping negation ----

template <typename T, typename U>
__device__ inline void unary_int(const rt_cuda_unary_int_params &p) {
    const bool is_signed = (T)-1 < (T)0;
    const T lo = is_signed ? (T)p.lo : (T)(uint64_t)p.lo, hi = is_signed ? (T)p.hi
                                                                        : (T)(uint64_t)p.hi;
    const T *x = (const T *)p.x;
    RT_GRID_LOOP(i, p.n) {
        T v = x[i], r;
        bool negative = is_signed && (int64_t)v < 0; // no unsigned comparison with 0
        switch (p.kind) {
        case RT_CUDA_ABS: r = negative ? (T)(U)((U)0 - (U)v) : v; break;
        case RT_CUDA_NEG: r = (T)(U)((U)0 - (U)v); break;
        case RT_CUDA_SIGN: r = v > (T)0 ? (T)1 : negative ? (T)-1 : (T)0; break;
        case RT_CUDA_RELU: r = v > (T)0 ? v : (T)0; break;
        case RT_CUDA_CLIP: r = v < lo ? lo : v; r = r > hi ? hi : r; break;
        default: r = v; break;
        }
        ((T *)p.out)[i] = r;
    }
}

extern "C" __global__ void rt_k_unary_int_i8(rt_cuda_unary_int_params p) {
    unary_int<int8_t, uint8_t>(p);
}
extern "C" __global__ void rt_k_unary_int_i16(rt_cuda_unary_int_params p) {
    unary_int<int16_t, uint16_t>(p);
}
extern "C" __global__ void rt_k_unary_int_i32(rt_cuda_unary_int_params p) {
    unary_int<int32_t, uint32_t>(p);
}
extern "C" __global__ void rt_k_unary_int_i64(rt_cuda_unary_int_params p) {
    unary_int<int64_t, uint64_t>(p);
}
extern "C" __global__ void rt_k_unary_int_u8(rt_cuda_unary_int_params p) {
    unary_int<uint8_t, uint8_t>(p);
}
extern "C" __global__ void rt_k_unary_int_u16(rt_cuda_unary_int_params p) {
    unary_int<uint16_t, uint16_t>(p);
}
extern "C" __global__ void rt_k_unary_int_u32(rt_cuda_unary_int_params p) {
    unary_int<uint32_t, uint32_t>(p);
}
extern "C" __global__ void rt_k_unary_int_u64(rt_cuda_unary_int_params p) {
    unary_int<uint64_t, uint64_t>(p);
}

// ---- binary with broadcasting ----

// div, pow, prelu and mod per type, the rules of ops/elementwise/kernels/binary.c and
// ops/elementwise/kernels/binary_more.c. Floats: IEEE division; pow in double, rounded to T; the
// remainder of fmod, moved into the divisor's sign for the floored form (x mod 0 is NaN). Integers
// (the host has checked that no divisor is 0): division truncates and MIN / -1 wraps to MIN; MIN
// mod -1 is 0; pow squares and multiplies, wrapping, a negative exponent giving the integer part of
// 1 / x^-y; products wrap; unsigned prelu is x.
template <typename T>
__device__ inline T rt_float_mod(T x, T y, bool floored) {
    double q = (double)y, r = fmod((double)x, q);
    if (floored && q != 0.0)
        r = r != 0.0 ? ((q < 0) != (r < 0) ? r + q : r) : copysign(0.0, q);
    return (T)r;
}

// Integer types: U is T's unsigned type (the wrapping arithmetic), SIGNED whether T is signed.
template <typename T> struct rt_int;
template <> struct rt_int<int8_t> { typedef uint8_t U; static const bool SIGNED = true; };
template <> struct rt_int<int16_t> { typedef uint16_t U; static const bool SIGNED = true; };
template <> struct rt_int<int32_t> { typedef uint32_t U; static const bool SIGNED = true; };
template <> struct rt_int<int64_t> { typedef uint64_t U; static const bool SIGNED = true; };
template <> struct rt_int<uint8_t> { typedef uint8_t U; static const bool SIGNED = false; };
template <> struct rt_int<uint16_t> { typedef uint16_t U; static const bool SIGNED = false; };
template <> struct rt_int<uint32_t> { typedef uint32_t U; static const bool SIGNED = false; };
template <> struct rt_int<uint64_t> { typedef uint64_t U; static const bool SIGNED = false; };

// x < 0 without comparing an unsigned value with 0.
template <typename T>
__device__ inline bool rt_negative(T x) { return rt_int<T>::SIGNED && (int64_t)x < 0; }

template <typename T>
__device__ inline T rt_div(T x, T y) {
    typedef typename rt_int<T>::U U;
    if (y == 0)
        return (T)0;
    if (rt_int<T>::SIGNED && y == (T)-1)
        return (T)(U)((U)0 - (U)x);
    return (T)(x / y);
}

template <typename T>
__device__ inline T rt_mod(T x, T y, bool floored) {
    T r = (y == 0 || (rt_int<T>::SIGNED && y == (T)-1)) ? (T)0 : (T)(x % y);
    return floored && r != 0 && rt_negative(r) != rt_negative(y) ? (T)(r + y) : r;
}

__device__ inline int64_t rt_int_pow(int64_t base, int64_t e) {
    if (e < 0)
        return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base, u = (uint64_t)e;
    while (u) {
        if (u & 1u)
            r *= b;
        b *= b;
        u >>= 1;
    }
    return (int64_t)r;
}

template <typename T>
__device__ inline T rt_pow(T x, T y) { return (T)rt_int_pow((int64_t)x, (int64_t)y); }

template <typename T>
__device__ inline T rt_prelu(T x, T s) {
    typedef typename rt_int<T>::U U;
    return rt_negative(x) ? (T)(U)((U)x * (U)s) : x;
}

__device__ inline float rt_div(float x, float y) { return x / y; }
__device__ inline double rt_div(double x, double y) { return x / y; }
__device__ inline float rt_mod(float x, float y, bool f) { return rt_float_mod(x, y, f); }
__device__ inline double rt_mod(double x, double y, bool f) { return rt_float_mod(x, y, f); }
// x^0.5 is sqrt(x), as numpy and torch compute it (and the CPU's pow)
__device__ inline double rt_float_pow(double x, double y) {
    return y == 0.5 ? sqrt(x) : pow(x, y);
}
__device__ inline float rt_pow(float x, float y) { return (float)rt_float_pow(x, y); }
__device__ inline double rt_pow(double x, double y) { return rt_float_pow(x, y); }
__device__ inline float rt_prelu(float x, float s) { return x < 0.0f ? x * s : x; }
__device__ inline double rt_prelu(double x, double s) { return x < 0.0 ? x * s : x; }

template <typename T>
__device__ inline void binary(const rt_cuda_binary_params &p) {
    const T *a = (const T *)p.a, *b = (const T *)p.b;
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, ao = 0, bo = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t index = rest % p.sizes[d];
            rest /= p.sizes[d];
            ao += index * p.a_strides[d];
            bo += index * p.b_strides[d];
        }
        T x = a[ao], y = b[bo];
        switch (p.kind) {
        case RT_CUDA_ADD: ((T *)p.out)[i] = x + y; break;
        case RT_CUDA_SUB: ((T *)p.out)[i] = x - y; break;
        case RT_CUDA_MUL: ((T *)p.out)[i] = x * y; break;
        case RT_CUDA_DIV: ((T *)p.out)[i] = rt_div(x, y); break;
        case RT_CUDA_LESS: ((uint8_t *)p.out)[i] = x < y; break;
        case RT_CUDA_EQUAL: ((uint8_t *)p.out)[i] = x == y; break;
        case RT_CUDA_LESS_EQUAL: ((uint8_t *)p.out)[i] = x <= y; break;
        // NaN propagates (numpy.minimum); for integers x != x is false.
        case RT_CUDA_MIN: ((T *)p.out)[i] = x != x ? x : y != y ? y : x < y ? x : y; break;
        case RT_CUDA_MAX: ((T *)p.out)[i] = x != x ? x : y != y ? y : x > y ? x : y; break;
        case RT_CUDA_POW: ((T *)p.out)[i] = rt_pow(x, y); break;
        case RT_CUDA_PRELU: ((T *)p.out)[i] = rt_prelu(x, y); break;
        case RT_CUDA_MOD_TRUNC: ((T *)p.out)[i] = rt_mod(x, y, false); break;
        case RT_CUDA_MOD_FLOOR: ((T *)p.out)[i] = rt_mod(x, y, true); break;
        case RT_CUDA_NOT: ((uint8_t *)p.out)[i] = !x; break;
        case RT_CUDA_AND: ((uint8_t *)p.out)[i] = x && y; break;
        case RT_CUDA_OR: ((uint8_t *)p.out)[i] = x || y; break;
        case RT_CUDA_XOR: ((uint8_t *)p.out)[i] = (x != 0) != (y != 0); break;
        default: break;
        }
    }
}

// ---- a zero among integer divisors ----

template <typename E>
__device__ inline void any_zero(const rt_cuda_any_zero_params &p) {
    RT_GRID_LOOP(i, p.n) {
        if (((const E *)p.x)[i] == 0)
            *p.flag = 1; // every writer writes the same value
    }
}

extern "C" __global__ void rt_k_any_zero_1(rt_cuda_any_zero_params p) { any_zero<uint8_t>(p); }
extern "C" __global__ void rt_k_any_zero_2(rt_cuda_any_zero_params p) { any_zero<uint16_t>(p); }
extern "C" __global__ void rt_k_any_zero_4(rt_cuda_any_zero_params p) { any_zero<uint32_t>(p); }
extern "C" __global__ void rt_k_any_zero_8(rt_cuda_any_zero_params p) { any_zero<uint64_t>(p); }

// ---- where: one kernel per element size ----

template <typename E>
__device__ inline void where(const rt_cuda_where_params &p) {
    const uint8_t *cond = (const uint8_t *)p.cond;
    const E *a = (const E *)p.a, *b = (const E *)p.b;
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, co = 0, ao = 0, bo = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t index = rest % p.sizes[d];
            rest /= p.sizes[d];
            co += index * p.strides[0][d];
            ao += index * p.strides[1][d];
            bo += index * p.strides[2][d];
        }
        ((E *)p.out)[i] = cond[co] ? a[ao] : b[bo];
    }
}

extern "C" __global__ void rt_k_where_1(rt_cuda_where_params p) { where<uint8_t>(p); }
extern "C" __global__ void rt_k_where_2(rt_cuda_where_params p) { where<uint16_t>(p); }
extern "C" __global__ void rt_k_where_4(rt_cuda_where_params p) { where<uint32_t>(p); }
extern "C" __global__ void rt_k_where_8(rt_cuda_where_params p) { where<uint64_t>(p); }

extern "C" __global__ void rt_k_binary_f32(rt_cuda_binary_params p) { binary<float>(p); }
extern "C" __global__ void rt_k_binary_f64(rt_cuda_binary_params p) { binary<double>(p); }
extern "C" __global__ void rt_k_binary_i32(rt_cuda_binary_params p) { binary<int32_t>(p); }
extern "C" __global__ void rt_k_binary_i64(rt_cuda_binary_params p) { binary<int64_t>(p); }
extern "C" __global__ void rt_k_binary_bool(rt_cuda_binary_params p) { binary<uint8_t>(p); }
extern "C" __global__ void rt_k_binary_i8(rt_cuda_binary_params p) { binary<int8_t>(p); }
extern "C" __global__ void rt_k_binary_i16(rt_cuda_binary_params p) { binary<int16_t>(p); }
extern "C" __global__ void rt_k_binary_u8(rt_cuda_binary_params p) { binary<uint8_t>(p); }
extern "C" __global__ void rt_k_binary_u16(rt_cuda_binary_params p) { binary<uint16_t>(p); }
extern "C" __global__ void rt_k_binary_u32(rt_cuda_binary_params p) { binary<uint32_t>(p); }
extern "C" __global__ void rt_k_binary_u64(rt_cuda_binary_params p) { binary<uint64_t>(p); }

// ---- pow with an exponent of another dtype, as ops/elementwise/kernels/binary_more.c: a float
// base in double; an integer base exact and wrapping for integer exponents (unsigned ones never
// negative), through double for float ones, truncated and saturated (NaN gives 0) ----

__device__ inline double pow_exponent_double(const void *b, int type, int64_t i) {
    switch (type) {
    case RT_CUDA_F32: return ((const float *)b)[i];
    case RT_CUDA_F64: return ((const double *)b)[i];
    case RT_CUDA_I8: return ((const int8_t *)b)[i];
    case RT_CUDA_I16: return ((const int16_t *)b)[i];
    case RT_CUDA_I32: return ((const int32_t *)b)[i];
    case RT_CUDA_I64: return (double)((const int64_t *)b)[i];
    case RT_CUDA_U8: return ((const uint8_t *)b)[i];
    case RT_CUDA_U16: return ((const uint16_t *)b)[i];
    case RT_CUDA_U32: return ((const uint32_t *)b)[i];
    default: return (double)((const uint64_t *)b)[i];
    }
}

__device__ inline uint64_t pow_exponent_bits(const void *b, int type, int64_t i) {
    switch (type) {
    case RT_CUDA_I8: return (uint64_t)(int64_t)((const int8_t *)b)[i];
    case RT_CUDA_I16: return (uint64_t)(int64_t)((const int16_t *)b)[i];
    case RT_CUDA_I32: return (uint64_t)(int64_t)((const int32_t *)b)[i];
    case RT_CUDA_I64: return (uint64_t)((const int64_t *)b)[i];
    case RT_CUDA_U8: return ((const uint8_t *)b)[i];
    case RT_CUDA_U16: return ((const uint16_t *)b)[i];
    case RT_CUDA_U32: return ((const uint32_t *)b)[i];
    default: return ((const uint64_t *)b)[i];
    }
}

__device__ inline uint64_t rt_uint_pow(uint64_t base, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1u)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

// An integer base (int32 or int64) raised to exponent i of b.
template <typename T>
__device__ inline T pow_int_base(T x, const rt_cuda_binary_params &p, int64_t i) {
    if (p.b_type == RT_CUDA_F32 || p.b_type == RT_CUDA_F64) {
        double v = pow((double)x, pow_exponent_double(p.b, p.b_type, i));
        double hi = sizeof(T) == 4 ? 2147483647.0 : 9223372036854775808.0;
        double lo = sizeof(T) == 4 ? -2147483648.0 : -9223372036854775808.0;
        if (v != v)
            return (T)0;
        if (v >= hi)
            return sizeof(T) == 4 ? (T)INT32_MAX : (T)INT64_MAX;
        if (v <= lo)
            return sizeof(T) == 4 ? (T)INT32_MIN : (T)INT64_MIN;
        return (T)v;
    }
    bool unsigned_exponent = p.b_type == RT_CUDA_U8 || p.b_type == RT_CUDA_U16 ||
                             p.b_type == RT_CUDA_U32 || p.b_type == RT_CUDA_U64;
    uint64_t e = pow_exponent_bits(p.b, p.b_type, i);
    if (unsigned_exponent)
        return (T)rt_uint_pow((uint64_t)(int64_t)x, e);
    return (T)rt_int_pow((int64_t)x, (int64_t)e);
}

template <typename T, bool FLOAT_BASE>
__device__ inline void pow_mixed(const rt_cuda_binary_params &p) {
    const T *a = (const T *)p.a;
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, ao = 0, bo = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t index = rest % p.sizes[d];
            rest /= p.sizes[d];
            ao += index * p.a_strides[d];
            bo += index * p.b_strides[d];
        }
        T x = a[ao];
        double e = pow_exponent_double(p.b, p.b_type, bo);
        ((T *)p.out)[i] = FLOAT_BASE ? (T)rt_float_pow((double)x, e) : pow_int_base(x, p, bo);
    }
}

extern "C" __global__ void rt_k_pow_mixed_f32(rt_cuda_binary_params p) {
    pow_mixed<float, true>(p);
}
extern "C" __global__ void rt_k_pow_mixed_f64(rt_cuda_binary_params p) {
    pow_mixed<double, true>(p);
}
extern "C" __global__ void rt_k_pow_mixed_i32(rt_cuda_binary_params p) {
    pow_mixed<int32_t, false>(p);
}
extern "C" __global__ void rt_k_pow_mixed_i64(rt_cuda_binary_params p) {
    pow_mixed<int64_t, false>(p);
}

// ---- bit shifts, as ops/elementwise/kernels/binary_more.c ----

// Left shifts wrap (done in uint64); a shift by the width or more (or, signed, a negative
// amount) gives 0, and right shifts of signed values are arithmetic (-1 for a negative value
// shifted out), as numpy.
template <typename T, bool SIGNED>
__device__ inline void shift(const rt_cuda_binary_params &p) {
    const T *a = (const T *)p.a, *b = (const T *)p.b;
    const uint64_t bits = 8 * sizeof(T);
    RT_GRID_LOOP(i, p.n) {
        int64_t rest = i, ao = 0, bo = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            int64_t index = rest % p.sizes[d];
            rest /= p.sizes[d];
            ao += index * p.a_strides[d];
            bo += index * p.b_strides[d];
        }
        T x = a[ao], y = b[bo];
        bool wide = (uint64_t)y >= bits; // a negative signed y converts to a huge amount
        T r;
        if (p.kind == RT_CUDA_SHIFT_LEFT)
            r = wide ? (T)0 : (T)((uint64_t)x << (uint64_t)y);
        else if (wide) // signed: the sign bit spread over every bit, -1 or 0
            r = SIGNED ? (T)(x >> (bits - 1)) : (T)0;
        else
            r = (T)(x >> y);
        ((T *)p.out)[i] = r;
    }
}

extern "C" __global__ void rt_k_shift_i8(rt_cuda_binary_params p) {
    shift<int8_t, true>(p);
}
extern "C" __global__ void rt_k_shift_i16(rt_cuda_binary_params p) {
    shift<int16_t, true>(p);
}
extern "C" __global__ void rt_k_shift_i32(rt_cuda_binary_params p) {
    shift<int32_t, true>(p);
}
extern "C" __global__ void rt_k_shift_i64(rt_cuda_binary_params p) {
    shift<int64_t, true>(p);
}
extern "C" __global__ void rt_k_shift_u8(rt_cuda_binary_params p) {
    shift<uint8_t, false>(p);
}
extern "C" __global__ void rt_k_shift_u16(rt_cuda_binary_params p) {
    shift<uint16_t, false>(p);
}
extern "C" __global__ void rt_k_shift_u32(rt_cuda_binary_params p) {
    shift<uint32_t, false>(p);
}
extern "C" __global__ void rt_k_shift_u64(rt_cuda_binary_params p) {
    shift<uint64_t, false>(p);
}

// ---- bias + activation epilogue (after a cuBLAS GEMM) ----

template <typename T>
__device__ inline void bias_act(const rt_cuda_bias_act_params &p) {
    const T *rb = (const T *)p.row_bias, *cb = (const T *)p.col_bias;
    T *out = (T *)p.out;
    RT_GRID_LOOP(i, p.n) {
        int64_t col = i % p.cols, row = i / p.cols % p.rows;
        T v = out[i];
        if (rb)
            v += rb[row];
        if (cb)
            v += cb[col];
        out[i] = rt_activate_t<T>(p.act, p.lo, p.hi, v);
    }
}

extern "C" __global__ void rt_k_bias_act_f32(rt_cuda_bias_act_params p) { bias_act<float>(p); }
extern "C" __global__ void rt_k_bias_act_f64(rt_cuda_bias_act_params p) { bias_act<double>(p); }

// ---- cast: the rules of ops/elementwise/cast.c ----
// Each element is read into one lossless carrier (double for floats, int64 for signed, uint64
// for unsigned and bool) and converted once to the destination.

struct carrier {
    int kind; // 0 double, 1 int64, 2 uint64
    double d;
    int64_t i;
    uint64_t u;
};

// A 16-bit float's NaN keeps its sign (conversions may drop it); `exponent` is the mask of
// the format's exponent field.
__device__ inline bool half_nan(uint16_t bits, uint16_t exponent) {
    return (bits & exponent) == exponent && (bits & (uint16_t)~(exponent | 0x8000)) != 0;
}

__device__ inline double nan_with_sign(int negative) { return negative ? -(double)NAN : (double)NAN; }

__device__ inline carrier load(const void *base, int64_t i, int type) {
    carrier c = {0, 0.0, 0, 0};
    switch (type) {
    case RT_CUDA_F32: c.d = ((const float *)base)[i]; break;
    case RT_CUDA_F64: c.d = ((const double *)base)[i]; break;
    case RT_CUDA_F16:
        c.d = half_nan(((const uint16_t *)base)[i], 0x7C00)
                  ? nan_with_sign(((const uint16_t *)base)[i] >> 15)
                  : (double)__half2float(((const __half *)base)[i]);
        break;
    case RT_CUDA_BF16:
        c.d = half_nan(((const uint16_t *)base)[i], 0x7F80)
                  ? nan_with_sign(((const uint16_t *)base)[i] >> 15)
                  : (double)__bfloat162float(((const __nv_bfloat16 *)base)[i]);
        break;
    case RT_CUDA_I8: c.kind = 1; c.i = ((const int8_t *)base)[i]; break;
    case RT_CUDA_I16: c.kind = 1; c.i = ((const int16_t *)base)[i]; break;
    case RT_CUDA_I32: c.kind = 1; c.i = ((const int32_t *)base)[i]; break;
    case RT_CUDA_I64: c.kind = 1; c.i = ((const int64_t *)base)[i]; break;
    case RT_CUDA_U8: c.kind = 2; c.u = ((const uint8_t *)base)[i]; break;
    case RT_CUDA_U16: c.kind = 2; c.u = ((const uint16_t *)base)[i]; break;
    case RT_CUDA_U32: c.kind = 2; c.u = ((const uint32_t *)base)[i]; break;
    case RT_CUDA_U64: c.kind = 2; c.u = ((const uint64_t *)base)[i]; break;
    case RT_CUDA_BOOL: c.kind = 2; c.u = ((const uint8_t *)base)[i] != 0; break;
    default: break;
    }
    return c;
}

// Truncation toward zero, saturating at [lo, hi]; NaN gives 0.
__device__ inline int64_t float_to_signed(double d, int64_t lo, int64_t hi) {
    if (d != d)
        return 0;
    if (d >= 9223372036854775808.0)
        return hi;
    if (d < -9223372036854775808.0)
        return lo;
    int64_t t = (int64_t)d; // in range here: truncates
    return t < lo ? lo : t > hi ? hi : t;
}

__device__ inline uint64_t float_to_unsigned(double d, uint64_t hi) {
    if (d != d || d <= -1.0)
        return 0;
    if (d >= 18446744073709551616.0)
        return hi;
    double t = trunc(d);
    if (t <= 0.0)
        return 0;
    uint64_t v = (uint64_t)t;
    return v > hi ? hi : v;
}

// The value as an int64 bit pattern: floats saturate, integers wrap modulo 2^64.
__device__ inline int64_t to_signed(const carrier &c, int64_t lo, int64_t hi) {
    if (c.kind == 0)
        return float_to_signed(c.d, lo, hi);
    return c.kind == 1 ? c.i : (int64_t)c.u;
}

__device__ inline uint64_t to_unsigned(const carrier &c, uint64_t hi) {
    if (c.kind == 0)
        return float_to_unsigned(c.d, hi);
    return c.kind == 1 ? (uint64_t)c.i : c.u;
}

__device__ inline void store(void *base, int64_t i, int type, const carrier &c) {
    if (c.kind == 0 && c.d != c.d) {
        // NaN: the quiet NaN of the format with the sign, whatever the payload (GPUs and CPUs
        // disagree on payloads; ops/elementwise/cast.c writes these).
        uint16_t sign16 = signbit(c.d) ? 0x8000 : 0;
        switch (type) {
        case RT_CUDA_F16: ((uint16_t *)base)[i] = sign16 | 0x7E00; return;
        case RT_CUDA_BF16: ((uint16_t *)base)[i] = sign16 | 0x7FC0; return;
        case RT_CUDA_F32: ((uint32_t *)base)[i] = ((uint32_t)sign16 << 16) | 0x7FC00000u; return;
        case RT_CUDA_F64:
            ((uint64_t *)base)[i] = ((uint64_t)sign16 << 48) | 0x7FF8000000000000ull;
            return;
        default: break;
        }
    }
    switch (type) {
    case RT_CUDA_F32:
        ((float *)base)[i] = c.kind == 0 ? (float)c.d : c.kind == 1 ? (float)c.i : (float)c.u;
        break;
    case RT_CUDA_F64:
        ((double *)base)[i] = c.kind == 0 ? c.d : c.kind == 1 ? (double)c.i : (double)c.u;
        break;
    case RT_CUDA_F16:
        ((__half *)base)[i] = c.kind == 0 ? __double2half(c.d)
                              : c.kind == 1 ? __ll2half_rn((long long)c.i)
                                            : __ull2half_rn((unsigned long long)c.u);
        break;
    case RT_CUDA_BF16:
        ((__nv_bfloat16 *)base)[i] = c.kind == 0 ? __double2bfloat16(c.d)
                                     : c.kind == 1 ? __ll2bfloat16_rn((long long)c.i)
                                                   : __ull2bfloat16_rn((unsigned long long)c.u);
        break;
    case RT_CUDA_I8: ((int8_t *)base)[i] = (int8_t)to_signed(c, INT8_MIN, INT8_MAX); break;
    case RT_CUDA_I16: ((int16_t *)base)[i] = (int16_t)to_signed(c, INT16_MIN, INT16_MAX); break;
    case RT_CUDA_I32: ((int32_t *)base)[i] = (int32_t)to_signed(c, INT32_MIN, INT32_MAX); break;
    case RT_CUDA_I64: ((int64_t *)base)[i] = to_signed(c, INT64_MIN, INT64_MAX); break;
    case RT_CUDA_U8: ((uint8_t *)base)[i] = (uint8_t)to_unsigned(c, UINT8_MAX); break;
    case RT_CUDA_U16: ((uint16_t *)base)[i] = (uint16_t)to_unsigned(c, UINT16_MAX); break;
    case RT_CUDA_U32: ((uint32_t *)base)[i] = (uint32_t)to_unsigned(c, UINT32_MAX); break;
    case RT_CUDA_U64: ((uint64_t *)base)[i] = to_unsigned(c, UINT64_MAX); break;
    case RT_CUDA_BOOL:
        // Non-zero is true, NaN included.
        ((uint8_t *)base)[i] = c.kind == 0 ? (c.d != 0.0) : c.kind == 1 ? c.i != 0 : c.u != 0;
        break;
    default: break;
    }
}

extern "C" __global__ void rt_k_cast(rt_cuda_cast_params p) {
    RT_GRID_LOOP(i, p.n) { store(p.out, i, p.to, load(p.x, i, p.from)); }
}
