/* kernels/reduce.c: typed loops of the reductions and of argmax / argmin.
 *
 * Each reduction is an accumulator (ACC), its start value (INIT), a step folding one element v
 * into acc (STEP) and the result from acc and the element count (FINAL). float32 accumulates
 * sums and products in double, float64 in double (in order, not pairwise); integers
 * accumulate in uint64_t, so they wrap around modulo 2^bits like the result type would.
 * max and min propagate NaN. */
#include <math.h>
#include <string.h>

#include "ops/reduce/kernels/reduce.h"

#define BLOCK RT_REDUCE_BLOCK

/* Independent accumulators over a contiguous run: the loop vectorises, and float sums add in
 * LANES interleaved partial sums (more accurate than one running sum). */
#define LANES 8

/* Both layouts of rt_reduce_geom. COMBINE folds the accumulator `other` into acc; in FINAL,
 * `count` is the number of elements reduced. */
#define DEFINE_REDUCE(name, T, ACC, INIT, STEP, COMBINE, FINAL)                  \
    static void name(void *arg, size_t begin, size_t end) {                      \
        const rt_reduce_job *job = arg;                                          \
        const rt_reduce_geom *g = &job->geom;                                    \
        const T *x = job->x;                                                     \
        T *o = job->out;                                                         \
        const double count = (double)g->count;                                   \
        int64_t idx[RT_MAX_RANK];                                                \
        (void)count;                                                             \
        for (size_t item = begin; item < end; item++) {                          \
            int64_t outer = (int64_t)item, first = 0, width = LANES, off = 0;    \
            if (!g->inner_reduced) {                                             \
                outer = (int64_t)item / g->blocks;                               \
                first = ((int64_t)item % g->blocks) * BLOCK;                     \
                width = g->inner - first < BLOCK ? g->inner - first : BLOCK;     \
            }                                                                    \
            const T *base = x + rt_reduce__kept_offset(g, outer) + first;        \
            ACC accs[BLOCK];                                                     \
            memset(idx, 0, sizeof idx);                                          \
            for (int64_t c = 0; c < width; c++)                                  \
                accs[c] = (INIT);                                                \
            for (int64_t r = 0; r < g->positions; r++) {                         \
                const T *p = base + off;                                         \
                if (g->inner_reduced) {                                          \
                    int64_t k = 0;                                               \
                    for (; k + LANES <= g->inner; k += LANES)                    \
                        for (int64_t c = 0; c < LANES; c++) {                    \
                            ACC acc = accs[c];                                   \
                            T v = p[k + c];                                      \
                            STEP;                                                \
                            accs[c] = acc;                                       \
                        }                                                        \
                    for (; k < g->inner; k++) {                                  \
                        ACC acc = accs[0];                                       \
                        T v = p[k];                                              \
                        STEP;                                                    \
                        accs[0] = acc;                                           \
                    }                                                            \
                } else {                                                         \
                    for (int64_t c = 0; c < width; c++) {                        \
                        ACC acc = accs[c];                                       \
                        T v = p[c];                                              \
                        STEP;                                                    \
                        accs[c] = acc;                                           \
                    }                                                            \
                }                                                                \
                rt_reduce__next(g, idx, &off);                                   \
            }                                                                    \
            if (g->inner_reduced) {                                              \
                for (int64_t c = 1; c < LANES; c++) {                            \
                    ACC acc = accs[0], other = accs[c];                          \
                    COMBINE;                                                     \
                    accs[0] = acc;                                               \
                }                                                                \
                width = 1;                                                       \
            }                                                                    \
            T *dst = g->inner_reduced ? o + item : o + outer * g->inner + first; \
            for (int64_t c = 0; c < width; c++) {                                \
                ACC acc = accs[c];                                               \
                dst[c] = (T)(FINAL);                                             \
            }                                                                    \
        }                                                                        \
    }

#define ADD acc += other
#define MUL acc *= other

/* suffix, C type, lowest value, highest value */
#define FLOAT_TYPES(X) X(f32, float, -INFINITY, INFINITY) X(f64, double, -INFINITY, INFINITY)
#define SIGNED_TYPES(X)                                                         \
    X(i8, int8_t, INT8_MIN, INT8_MAX) X(i16, int16_t, INT16_MIN, INT16_MAX)     \
    X(i32, int32_t, INT32_MIN, INT32_MAX) X(i64, int64_t, INT64_MIN, INT64_MAX)
#define UNSIGNED_TYPES(X)                                           \
    X(u8, uint8_t, 0, UINT8_MAX) X(u16, uint16_t, 0, UINT16_MAX)    \
    X(u32, uint32_t, 0, UINT32_MAX) X(u64, uint64_t, 0, UINT64_MAX)

/* ---- float types ------------------------------------------------------------------------ */

#define FLOAT_MAX acc = (other > acc || other != other) ? other : acc
#define FLOAT_MIN acc = (other < acc || other != other) ? other : acc
#define DEFINE_FLOAT_REDUCE(sfx, T, LO, HI)                                                 \
    DEFINE_REDUCE(reduce_sum__##sfx, T, double, 0.0, acc += v, ADD, acc)                    \
    DEFINE_REDUCE(reduce_mean__##sfx, T, double, 0.0, acc += v, ADD, acc / count)           \
    DEFINE_REDUCE(reduce_prod__##sfx, T, double, 1.0, acc *= v, MUL, acc)                   \
    DEFINE_REDUCE(reduce_l1__##sfx, T, double, 0.0, acc += fabs((double)v), ADD, acc)       \
    DEFINE_REDUCE(reduce_l2__##sfx, T, double, 0.0, acc += (double)v * v, ADD, sqrt(acc))   \
    DEFINE_REDUCE(reduce_log_sum__##sfx, T, double, 0.0, acc += v, ADD, log(acc))           \
    DEFINE_REDUCE(reduce_sum_square__##sfx, T, double, 0.0, acc += (double)v * v, ADD, acc) \
    DEFINE_REDUCE(reduce_max__##sfx, T, T, LO, acc = ((v > acc) | (v != v)) ? v : acc,      \
                  FLOAT_MAX, acc)                                                           \
    DEFINE_REDUCE(reduce_min__##sfx, T, T, HI, acc = ((v < acc) | (v != v)) ? v : acc,      \
                  FLOAT_MIN, acc)
FLOAT_TYPES(DEFINE_FLOAT_REDUCE)

/* log(sum(exp(v))) as m + log(sum(exp(v - m))) with m the maximum, so exp cannot overflow;
 * exp in the element type (EXP), the sum in double. An infinite or NaN maximum (an empty
 * reduction included: -inf) is the result itself. */
#define DEFINE_LOG_SUM_EXP(sfx, T, EXP)                                                     \
    static void reduce_log_sum_exp__##sfx(void *arg, size_t begin, size_t end) {            \
        const rt_reduce_job *job = arg;                                                     \
        const rt_reduce_geom *g = &job->geom;                                               \
        const T *x = job->x;                                                                \
        T *o = job->out;                                                                    \
        int64_t idx[RT_MAX_RANK];                                                           \
        for (size_t item = begin; item < end; item++) {                                     \
            int64_t outer = (int64_t)item, first = 0, width = 1;                            \
            if (!g->inner_reduced) {                                                        \
                outer = (int64_t)item / g->blocks;                                          \
                first = ((int64_t)item % g->blocks) * BLOCK;                                \
                width = g->inner - first < BLOCK ? g->inner - first : BLOCK;                \
            }                                                                               \
            const T *base = x + rt_reduce__kept_offset(g, outer) + first;                   \
            int64_t run = g->inner_reduced ? g->inner : 1, step = g->inner_reduced ? 0 : 1; \
            T max[BLOCK];                                                                   \
            double sum[BLOCK];                                                              \
            for (int64_t c = 0; c < width; c++) {                                           \
                max[c] = -(T)INFINITY;                                                      \
                sum[c] = 0.0;                                                               \
            }                                                                               \
            memset(idx, 0, sizeof idx);                                                     \
            for (int64_t r = 0, off = 0; r < g->positions; r++) {                           \
                for (int64_t c = 0; c < width; c++) {                                       \
                    const T *p = base + off + c * step;                                     \
                    T m = max[c];                                                           \
                    for (int64_t k = 0; k < run; k++)                                       \
                        m = ((p[k] > m) | (p[k] != p[k])) ? p[k] : m;                       \
                    max[c] = m;                                                             \
                }                                                                           \
                rt_reduce__next(g, idx, &off);                                              \
            }                                                                               \
            memset(idx, 0, sizeof idx);                                                     \
            for (int64_t r = 0, off = 0; r < g->positions; r++) {                           \
                for (int64_t c = 0; c < width; c++) {                                       \
                    const T *p = base + off + c * step;                                     \
                    T m = max[c];                                                           \
                    double s = 0.0;                                                         \
                    for (int64_t k = 0; k < run; k++)                                       \
                        s += EXP(p[k] - m);                                                 \
                    sum[c] += s;                                                            \
                }                                                                           \
                rt_reduce__next(g, idx, &off);                                              \
            }                                                                               \
            T *dst = g->inner_reduced ? o + item : o + outer * g->inner + first;            \
            for (int64_t c = 0; c < width; c++)                                             \
                dst[c] = isfinite(max[c]) ? (T)(max[c] + log(sum[c])) : max[c];             \
        }                                                                                   \
    }
DEFINE_LOG_SUM_EXP(f32, float, expf)
DEFINE_LOG_SUM_EXP(f64, double, exp)


/* ---- integer types and bool ------------------------------------------------------------- */

#define INT_MAX_OF acc = other > acc ? other : acc
#define INT_MIN_OF acc = other < acc ? other : acc
#define DEFINE_INT_REDUCE(sfx, T, LO, HI)                                                \
    DEFINE_REDUCE(reduce_sum__##sfx, T, uint64_t, 0u, acc += (uint64_t)v, ADD, acc)      \
    DEFINE_REDUCE(reduce_prod__##sfx, T, uint64_t, 1u, acc *= (uint64_t)v, MUL, acc)     \
    DEFINE_REDUCE(reduce_sum_square__##sfx, T, uint64_t, 0u,                             \
                  acc += (uint64_t)v * (uint64_t)v, ADD, acc)                            \
    DEFINE_REDUCE(reduce_max__##sfx, T, T, LO, acc = v > acc ? v : acc, INT_MAX_OF, acc) \
    DEFINE_REDUCE(reduce_min__##sfx, T, T, HI, acc = v < acc ? v : acc, INT_MIN_OF, acc)
SIGNED_TYPES(DEFINE_INT_REDUCE)
UNSIGNED_TYPES(DEFINE_INT_REDUCE)

/* |v| in the unsigned accumulator: |MIN| wraps to MIN, like the result type would. */
#define DEFINE_SIGNED_L1(sfx, T, LO, HI)                                   \
    DEFINE_REDUCE(reduce_l1__##sfx, T, uint64_t, 0u,                       \
                  acc += v < 0 ? 0u - (uint64_t)v : (uint64_t)v, ADD, acc)
SIGNED_TYPES(DEFINE_SIGNED_L1)

#define DEFINE_UNSIGNED_L1(sfx, T, LO, HI)                               \
    DEFINE_REDUCE(reduce_l1__##sfx, T, uint64_t, 0u, acc += v, ADD, acc)
UNSIGNED_TYPES(DEFINE_UNSIGNED_L1)

/* bool: max is "any", min is "all"; any non-zero byte is true. */
DEFINE_REDUCE(reduce_max__bool, uint8_t, uint8_t, 0u, acc |= v != 0, acc |= other, acc)
DEFINE_REDUCE(reduce_min__bool, uint8_t, uint8_t, 1u, acc &= v != 0, acc &= other, acc)

/* ---- table ------------------------------------------------------------------------------ */

#define ENTRY(op, type, fn) [op][type] = fn,
#define COMMON_ENTRIES(sfx, type)                               \
    ENTRY(RT_REDUCE_SUM, type, reduce_sum__##sfx)               \
    ENTRY(RT_REDUCE_PROD, type, reduce_prod__##sfx)             \
    ENTRY(RT_REDUCE_MAX, type, reduce_max__##sfx)               \
    ENTRY(RT_REDUCE_MIN, type, reduce_min__##sfx)               \
    ENTRY(RT_REDUCE_L1, type, reduce_l1__##sfx)                 \
    ENTRY(RT_REDUCE_SUM_SQUARE, type, reduce_sum_square__##sfx)
#define FLOAT_ENTRIES(sfx, type)                                  \
    COMMON_ENTRIES(sfx, type)                                     \
    ENTRY(RT_REDUCE_MEAN, type, reduce_mean__##sfx)               \
    ENTRY(RT_REDUCE_L2, type, reduce_l2__##sfx)                   \
    ENTRY(RT_REDUCE_LOG_SUM, type, reduce_log_sum__##sfx)         \
    ENTRY(RT_REDUCE_LOG_SUM_EXP, type, reduce_log_sum_exp__##sfx)

static const rt_reduce_kernel reduce_kernels[RT_REDUCE_OP_COUNT][RT_TYPE_COUNT] = {
    FLOAT_ENTRIES(f32, RT_F32)
    FLOAT_ENTRIES(f64, RT_F64)
    COMMON_ENTRIES(i8, RT_I8)
    COMMON_ENTRIES(i16, RT_I16)
    COMMON_ENTRIES(i32, RT_I32)
    COMMON_ENTRIES(i64, RT_I64)
    COMMON_ENTRIES(u8, RT_U8)
    COMMON_ENTRIES(u16, RT_U16)
    COMMON_ENTRIES(u32, RT_U32)
    COMMON_ENTRIES(u64, RT_U64)
    ENTRY(RT_REDUCE_MAX, RT_BOOL, reduce_max__bool)
    ENTRY(RT_REDUCE_MIN, RT_BOOL, reduce_min__bool)
};

rt_reduce_kernel rt_ops__reduce_kernel(rt_reduce_op op, rt_type type) {
    if ((int)op < 0 || op >= RT_REDUCE_OP_COUNT || (int)type < 0 || type >= RT_TYPE_COUNT)
        return NULL;
    return reduce_kernels[op][type];
}

/* ---- argmax / argmin -------------------------------------------------------------------- */

/* BETTER(v, b): v replaces the best b so far. NaN counts as the extreme in both directions
 * (numpy.argmax and argmin return the first NaN); `last` also lets equal values replace. */
#define DEFINE_ARG(name, T, IS_NAN, OP, OP_EQ)                                          \
    static void name(void *arg, size_t begin, size_t end) {                             \
        const rt_arg_job *job = arg;                                                    \
        int64_t n = job->n, inner = job->inner;                                         \
        for (size_t item = begin; item < end; item++) {                                 \
            int64_t outer = (int64_t)item / job->blocks;                                \
            int64_t first = ((int64_t)item % job->blocks) * BLOCK;                      \
            int64_t width = inner - first < BLOCK ? inner - first : BLOCK;              \
            const T *x = (const T *)job->x + outer * n * inner + first;                 \
            T best[BLOCK];                                                              \
            int64_t at[BLOCK];                                                          \
            for (int64_t c = 0; c < width; c++) {                                       \
                best[c] = x[c];                                                         \
                at[c] = 0;                                                              \
            }                                                                           \
            for (int64_t k = 1; k < n; k++) {                                           \
                const T *row = x + k * inner;                                           \
                for (int64_t c = 0; c < width; c++) {                                   \
                    T v = row[c], b = best[c];                                          \
                    bool better = job->last ? (IS_NAN(v) || v OP_EQ b)                  \
                                            : (IS_NAN(v) ? !IS_NAN(b) : v OP b);        \
                    if (better) {                                                       \
                        best[c] = v;                                                    \
                        at[c] = k;                                                      \
                    }                                                                   \
                }                                                                       \
            }                                                                           \
            memcpy(job->out + outer * inner + first, at, (size_t)width * sizeof at[0]); \
        }                                                                               \
    }

#define FLOAT_NAN(v) ((v) != (v))
#define NO_NAN(v) 0
#define DEFINE_FLOAT_ARG(sfx, T, LO, HI)           \
    DEFINE_ARG(argmax__##sfx, T, FLOAT_NAN, >, >=) \
    DEFINE_ARG(argmin__##sfx, T, FLOAT_NAN, <, <=)
#define DEFINE_INT_ARG(sfx, T, LO, HI)          \
    DEFINE_ARG(argmax__##sfx, T, NO_NAN, >, >=) \
    DEFINE_ARG(argmin__##sfx, T, NO_NAN, <, <=)
FLOAT_TYPES(DEFINE_FLOAT_ARG)
SIGNED_TYPES(DEFINE_INT_ARG)
UNSIGNED_TYPES(DEFINE_INT_ARG)

#define ARG_ENTRIES(sfx, type) [type] = {argmin__##sfx, argmax__##sfx},

static const rt_reduce_kernel arg_kernels[RT_TYPE_COUNT][2] = {
    ARG_ENTRIES(f32, RT_F32) ARG_ENTRIES(f64, RT_F64) ARG_ENTRIES(i8, RT_I8)
    ARG_ENTRIES(i16, RT_I16) ARG_ENTRIES(i32, RT_I32) ARG_ENTRIES(i64, RT_I64)
    ARG_ENTRIES(u8, RT_U8) ARG_ENTRIES(u16, RT_U16) ARG_ENTRIES(u32, RT_U32)
    ARG_ENTRIES(u64, RT_U64)
};

rt_reduce_kernel rt_ops__arg_kernel(bool max, rt_type type) {
    if ((int)type < 0 || type >= RT_TYPE_COUNT)
        return NULL;
    return arg_kernels[type][max ? 1 : 0];
}
