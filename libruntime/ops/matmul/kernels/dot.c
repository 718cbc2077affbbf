/* dot.c: linear (x @ w^T + bias) of float64 (float32 takes the GEMM, gemm/) as dot products
 * of rows, parallel over tiles of the output. */
#include "ops/matmul/matmul.h"

/* Rows of x against rows of w (both contiguous along K): tiles of LINEAR_ROWS rows of x by
 * LINEAR_COLS outputs, so each row of w is read once per tile from cache for every x row. */
#define LINEAR_ROWS 8
#define LINEAR_COLS 64

typedef struct linear_job {
    const void *x, *w, *bias; /* bias may be NULL */
    void *out;
    int64_t rows, k, n;
    int64_t col_tiles;
} linear_job;

/* Dot products in 8 independent lanes: the compiler can vectorise them, and the result
 * differs from a serial sum only by rounding. */
#define DEFINE_LINEAR_TILES(sfx, T)                                                   \
    static T dot__##sfx(const T *x, const T *y, int64_t n)                            \
    {                                                                                 \
        T lanes[8] = {0};                                                             \
        int64_t i = 0;                                                                \
        for (; i + 8 <= n; i += 8)                                                    \
            for (int l = 0; l < 8; l++)                                               \
                lanes[l] += x[i + l] * y[i + l];                                      \
        T sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +                     \
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));                      \
        for (; i < n; i++)                                                            \
            sum += x[i] * y[i];                                                       \
        return sum;                                                                   \
    }                                                                                 \
                                                                                      \
    static void linear_tiles__##sfx(void *arg, size_t begin, size_t end)              \
    {                                                                                 \
        const linear_job *job = arg;                                                  \
        const T *x = job->x, *w = job->w, *bias = job->bias;                          \
        T *out = job->out;                                                            \
        int64_t k = job->k, n = job->n;                                               \
        for (size_t item = begin; item < end; item++) {                               \
            int64_t r0 = (int64_t)item / job->col_tiles * LINEAR_ROWS;                \
            int64_t c0 = (int64_t)item % job->col_tiles * LINEAR_COLS;                \
            int64_t r1 = r0 + LINEAR_ROWS < job->rows ? r0 + LINEAR_ROWS : job->rows; \
            int64_t c1 = c0 + LINEAR_COLS < n ? c0 + LINEAR_COLS : n;                 \
            for (int64_t c = c0; c < c1; c++) {                                       \
                T b = bias ? bias[c] : (T)0;                                          \
                for (int64_t r = r0; r < r1; r++)                                     \
                    out[r * n + c] = dot__##sfx(x + r * k, w + c * k, k) + b;         \
            }                                                                         \
        }                                                                             \
    }
DEFINE_LINEAR_TILES(f32, float)
DEFINE_LINEAR_TILES(f64, double)

void rt_matmul__linear_dot(rt_type type, const void *x, const void *w, const void *bias,
                           void *out, int64_t rows, int64_t k, int64_t n, int32_t threads) {
    linear_job job = {
        .x = x, .w = w, .bias = bias, .out = out, .rows = rows, .k = k, .n = n,
        .col_tiles = (n + LINEAR_COLS - 1) / LINEAR_COLS,
    };
    int64_t items = (rows + LINEAR_ROWS - 1) / LINEAR_ROWS * job.col_tiles;
    int64_t work = rt_op__mul_sat((int64_t)LINEAR_ROWS * LINEAR_COLS, k > 0 ? k : 1);
    rt_range_fn kernel = type == RT_F32 ? linear_tiles__f32 : linear_tiles__f64;
    rt_parallel__for(threads, (size_t)items, rt_op__grain(work), kernel, &job);
}
