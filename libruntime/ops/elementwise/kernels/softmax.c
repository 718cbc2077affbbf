/* softmax.c: softmax of float32 and float64 over one axis of x viewed as [outer, n, inner].
 * Subtracting the maximum keeps exp finite; float32 sums accumulate in double. */
#include <math.h>

#include "core/multiversion.h"
#include "ops/elementwise/kernels/activation.h"
#include "ops/fast_exp.h"
#include "ops/op_util.h"

typedef struct softmax_job {
    const void *x;
    void *out;
    int64_t outer, n, inner;
} softmax_job;

/* Columns of the inner dimension are done SOFTMAX_BLOCK at a time, so that every pass reads
 * contiguous runs and keeps its maxima and sums on the stack. */
#define SOFTMAX_BLOCK 64

/* T: element type, ACC: the type sums accumulate in, EXP: exp for T. Items are rows
 * (inner == 1) or (outer, column block) pairs. Subtracting the maximum keeps exp finite. */
#define DEFINE_SOFTMAX_ROWS(sfx, T, ACC, EXP)                                              \
    static void softmax_rows__##sfx(void *arg, size_t begin, size_t end)                   \
    {                                                                                      \
        const softmax_job *job = arg;                                                      \
        int64_t n = job->n;                                                                \
        for (size_t row = begin; row < end; row++) {                                       \
            const T *x = (const T *)job->x + (int64_t)row * n;                             \
            T *o = (T *)job->out + (int64_t)row * n;                                       \
            T max = -(T)INFINITY;                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                max = x[k] > max ? x[k] : max;                                             \
            for (int64_t k = 0; k < n; k++) /* no carried sum here: this loop vectorises */ \
                o[k] = EXP(x[k] - max);                                                    \
            ACC sum = 0;                                                                   \
            for (int64_t k = 0; k < n; k++)                                                \
                sum += o[k];                                                               \
            const T scale = (T)(1 / sum);                                                  \
            for (int64_t k = 0; k < n; k++)                                                \
                o[k] = o[k] * scale;                                                       \
        }                                                                                  \
    }

#define DEFINE_SOFTMAX_COLUMNS(sfx, T, ACC, EXP)                                           \
    static void softmax_columns__##sfx(void *arg, size_t begin, size_t end)                \
    {                                                                                      \
        const softmax_job *job = arg;                                                      \
        int64_t n = job->n, inner = job->inner;                                            \
        int64_t blocks = (inner + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;                      \
        for (size_t item = begin; item < end; item++) {                                    \
            int64_t o_index = (int64_t)item / blocks;                                      \
            int64_t first = ((int64_t)item % blocks) * SOFTMAX_BLOCK;                      \
            int64_t width = inner - first < SOFTMAX_BLOCK ? inner - first : SOFTMAX_BLOCK; \
            const T *x = (const T *)job->x + o_index * n * inner + first;                  \
            T *o = (T *)job->out + o_index * n * inner + first;                            \
            T max[SOFTMAX_BLOCK];                                                          \
            ACC sum[SOFTMAX_BLOCK];                                                        \
            for (int64_t c = 0; c < width; c++) {                                          \
                max[c] = -(T)INFINITY;                                                     \
                sum[c] = 0;                                                                \
            }                                                                              \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++) {                                      \
                    T v = x[k * inner + c];                                                \
                    max[c] = v > max[c] ? v : max[c];                                      \
                }                                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++) {                                      \
                    T e = EXP(x[k * inner + c] - max[c]);                                  \
                    o[k * inner + c] = e;                                                  \
                    sum[c] += e;                                                           \
                }                                                                          \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++)                                        \
                    o[k * inner + c] = (T)(o[k * inner + c] / sum[c]);                     \
        }                                                                                  \
    }
DEFINE_SOFTMAX_ROWS(f64, double, double, exp)
DEFINE_SOFTMAX_COLUMNS(f32, float, double, rt_fast_exp__f32)
DEFINE_SOFTMAX_COLUMNS(f64, double, double, exp)

/* float32 rows, the common case (attention scores): the maximum and the sum (in double) run
 * in eight independent lanes so both loops vectorise. NaN handling is
 * the generic kernel's: a NaN never wins the maximum and then poisons the sum. */
RT_MULTIVERSION static void softmax_rows_lanes__f32(void *arg, size_t begin, size_t end) {
    const softmax_job *job = arg;
    int64_t n = job->n, body = n / 8 * 8;
    for (size_t row = begin; row < end; row++) {
        const float *x = (const float *)job->x + (int64_t)row * n;
        float *o = (float *)job->out + (int64_t)row * n;
        float lanes[8];
        for (int j = 0; j < 8; j++)
            lanes[j] = -INFINITY;
        for (int64_t k = 0; k < body; k += 8)
            for (int j = 0; j < 8; j++)
                lanes[j] = x[k + j] > lanes[j] ? x[k + j] : lanes[j];
        float max = -INFINITY;
        for (int j = 0; j < 8; j++)
            max = lanes[j] > max ? lanes[j] : max;
        for (int64_t k = body; k < n; k++)
            max = x[k] > max ? x[k] : max;
        for (int64_t k = 0; k < n; k++)
            o[k] = rt_fast_exp__f32(x[k] - max);
        double sums[8] = {0};
        for (int64_t k = 0; k < body; k += 8)
            for (int j = 0; j < 8; j++)
                sums[j] += o[k + j];
        double sum = 0;
        for (int j = 0; j < 8; j++)
            sum += sums[j];
        for (int64_t k = body; k < n; k++)
            sum += o[k];
        const float scale = (float)(1 / sum);
        for (int64_t k = 0; k < n; k++)
            o[k] = o[k] * scale;
    }
}

void rt_elementwise__softmax(rt_type type, const void *x, void *out, int64_t outer, int64_t n,
                             int64_t inner, int32_t threads) {
    softmax_job job = {.x = x, .out = out, .outer = outer, .n = n, .inner = inner};
    bool is_f32 = type == RT_F32;
    if (inner == 1) {
        rt_parallel__for(threads, (size_t)outer, rt_op__grain(n),
                         is_f32 ? softmax_rows_lanes__f32 : softmax_rows__f64, &job);
    } else {
        int64_t blocks = (inner + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
        rt_parallel__for(threads, (size_t)(outer * blocks), rt_op__grain(n * SOFTMAX_BLOCK),
                         is_f32 ? softmax_columns__f32 : softmax_columns__f64, &job);
    }
}
