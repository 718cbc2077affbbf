/* scan.c: cumsum and topk along one axis of x viewed as [outer, n, inner], for float32,
 * float64 and the integer types. */
#include "ops/op_util.h"
#include "ops/reduce/kernels/scan.h"

#define BLOCK 64

/* suffix, C type, accumulator (cumsum), is-NaN test */
#define FLOAT_NAN(v) ((v) != (v))
#define NO_NAN(v) 0
#define SCAN_TYPES(X)                                                     \
    X(f32, float, double, FLOAT_NAN) X(f64, double, double, FLOAT_NAN)    \
    X(i8, int8_t, uint64_t, NO_NAN) X(i16, int16_t, uint64_t, NO_NAN)     \
    X(i32, int32_t, uint64_t, NO_NAN) X(i64, int64_t, uint64_t, NO_NAN)   \
    X(u8, uint8_t, uint64_t, NO_NAN) X(u16, uint16_t, uint64_t, NO_NAN)   \
    X(u32, uint32_t, uint64_t, NO_NAN) X(u64, uint64_t, uint64_t, NO_NAN)

typedef void (*scan_kernel)(void *arg, size_t begin, size_t end);

typedef struct cumsum_job {
    const void *x;
    void *out;
    int64_t outer, n, inner, blocks;
    bool exclusive, reverse;
} cumsum_job;

/* Items are (outer index, block of inner columns). Each element is read before the same
 * element of out is written, so out may be x. float32 sums in double; integers wrap. */
#define DEFINE_CUMSUM(sfx, T, ACC, IS_NAN)                                    \
    static void cumsum__##sfx(void *arg, size_t begin, size_t end) {          \
        const cumsum_job *job = arg;                                          \
        int64_t n = job->n, inner = job->inner;                               \
        for (size_t item = begin; item < end; item++) {                       \
            int64_t outer = (int64_t)item / job->blocks;                      \
            int64_t first = ((int64_t)item % job->blocks) * BLOCK;            \
            int64_t width = inner - first < BLOCK ? inner - first : BLOCK;    \
            const T *x = (const T *)job->x + outer * n * inner + first;       \
            T *o = (T *)job->out + outer * n * inner + first;                 \
            ACC acc[BLOCK];                                                   \
            for (int64_t c = 0; c < width; c++)                               \
                acc[c] = 0;                                                   \
            for (int64_t step = 0; step < n; step++) {                        \
                int64_t k = job->reverse ? n - 1 - step : step;               \
                for (int64_t c = 0; c < width; c++) {                         \
                    ACC v = (ACC)x[k * inner + c];                            \
                    ACC before = acc[c];                                      \
                    acc[c] += v;                                              \
                    o[k * inner + c] = (T)(job->exclusive ? before : acc[c]); \
                }                                                             \
            }                                                                 \
        }                                                                     \
    }
SCAN_TYPES(DEFINE_CUMSUM)

static scan_kernel cumsum_kernel(rt_type type) {
    switch (type) {
    case RT_F32: return cumsum__f32;
    case RT_F64: return cumsum__f64;
    case RT_I8: return cumsum__i8;
    case RT_I16: return cumsum__i16;
    case RT_I32: return cumsum__i32;
    case RT_I64: return cumsum__i64;
    case RT_U8: return cumsum__u8;
    case RT_U16: return cumsum__u16;
    case RT_U32: return cumsum__u32;
    case RT_U64: return cumsum__u64;
    default: return NULL;
    }
}

typedef struct topk_job {
    const void *x;
    void *values;
    int64_t *indices;
    int64_t outer, n, inner, k;
    bool largest;
} topk_job;

/* Items are rows (outer, inner column). The k best indices are kept as a heap with the worst
 * at the root, in the row of `indices` itself (stride inner), then heap-sorted best first.
 * Order: by value (largest or smallest first), NaN above every number, equal values by the
 * lower index; the order is total, so the result is unique. */
#define DEFINE_TOPK(sfx, T, ACC, IS_NAN)                                                    \
    static bool topk_better__##sfx(const T *x, int64_t s, int64_t i, int64_t j, bool big) { \
        T a = x[i * s], b = x[j * s];                                                       \
        bool na = IS_NAN(a), nb = IS_NAN(b);                                                \
        if (na || nb)                                                                       \
            return na && nb ? i < j : (big ? na : nb);                                      \
        if (a != b)                                                                         \
            return big ? a > b : a < b;                                                     \
        return i < j;                                                                       \
    }                                                                                       \
                                                                                            \
    /* Move h[at] down a heap of `size` whose root is the worst (h and x both stride s). */ \
    static void topk_sift__##sfx(const T *x, int64_t s, int64_t *h, int64_t size,           \
                                 int64_t at, bool big) {                                    \
        for (;;) {                                                                          \
            int64_t worst = at, l = 2 * at + 1, r = l + 1;                                  \
            if (l < size && topk_better__##sfx(x, s, h[worst * s], h[l * s], big))          \
                worst = l;                                                                  \
            if (r < size && topk_better__##sfx(x, s, h[worst * s], h[r * s], big))          \
                worst = r;                                                                  \
            if (worst == at)                                                                \
                return;                                                                     \
            int64_t t = h[at * s];                                                          \
            h[at * s] = h[worst * s];                                                       \
            h[worst * s] = t;                                                               \
            at = worst;                                                                     \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void topk__##sfx(void *arg, size_t begin, size_t end) {                          \
        const topk_job *job = arg;                                                          \
        int64_t n = job->n, s = job->inner, k = job->k;                                     \
        bool big = job->largest;                                                            \
        for (size_t row = begin; row < end; row++) {                                        \
            int64_t o = (int64_t)row / s, c = (int64_t)row % s;                             \
            const T *x = (const T *)job->x + o * n * s + c;                                 \
            int64_t *h = job->indices + o * k * s + c;                                      \
            T *v = (T *)job->values + o * k * s + c;                                        \
            for (int64_t i = 0; i < k; i++) { /* heapify the first k */                     \
                int64_t at = i;                                                             \
                h[at * s] = i;                                                              \
                for (int64_t p = (at - 1) / 2;                                              \
                     at > 0 && topk_better__##sfx(x, s, h[p * s], h[at * s], big);          \
                     at = p, p = (at - 1) / 2) {                                            \
                    int64_t t = h[p * s];                                                   \
                    h[p * s] = h[at * s];                                                   \
                    h[at * s] = t;                                                          \
                }                                                                           \
            }                                                                               \
            for (int64_t i = k; i < n && k > 0; i++) {                                      \
                if (topk_better__##sfx(x, s, i, h[0], big)) {                               \
                    h[0] = i;                                                               \
                    topk_sift__##sfx(x, s, h, k, 0, big);                                   \
                }                                                                           \
            }                                                                               \
            for (int64_t size = k - 1; size > 0; size--) { /* worst to the back */          \
                int64_t t = h[0];                                                           \
                h[0] = h[size * s];                                                         \
                h[size * s] = t;                                                            \
                topk_sift__##sfx(x, s, h, size, 0, big);                                    \
            }                                                                               \
            for (int64_t i = 0; i < k; i++)                                                 \
                v[i * s] = x[h[i * s] * s];                                                 \
        }                                                                                   \
    }
SCAN_TYPES(DEFINE_TOPK)

static scan_kernel topk_kernel(rt_type type) {
    switch (type) {
    case RT_F32: return topk__f32;
    case RT_F64: return topk__f64;
    case RT_I8: return topk__i8;
    case RT_I16: return topk__i16;
    case RT_I32: return topk__i32;
    case RT_I64: return topk__i64;
    case RT_U8: return topk__u8;
    case RT_U16: return topk__u16;
    case RT_U32: return topk__u32;
    case RT_U64: return topk__u64;
    default: return NULL;
    }
}

bool rt_reduce__cumsum(rt_type type, const void *x, void *out, int64_t outer, int64_t n,
                       int64_t inner, bool exclusive, bool reverse, int32_t threads) {
    cumsum_job job = {.x = x, .out = out, .outer = outer, .n = n, .inner = inner,
                      .blocks = (inner + BLOCK - 1) / BLOCK, .exclusive = exclusive,
                      .reverse = reverse};
    scan_kernel kernel = cumsum_kernel(type);
    if (!kernel)
        return false;
    rt_parallel__for(threads, (size_t)(outer * job.blocks), rt_op__grain(n * BLOCK), kernel,
                     &job);
    return true;
}

bool rt_reduce__topk(rt_type type, const void *x, void *values, int64_t *indices,
                     int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest,
                     int32_t threads) {
    topk_job job = {.x = x, .values = values, .indices = indices, .outer = outer, .n = n,
                    .inner = inner, .k = k, .largest = largest};
    scan_kernel kernel = topk_kernel(type);
    if (!kernel)
        return false;
    /* n log k comparisons per row, a few units of work each. */
    int64_t work = rt_op__mul_sat(n, 4);
    rt_parallel__for(threads, (size_t)(outer * inner), rt_op__grain(work), kernel, &job);
    return true;
}
