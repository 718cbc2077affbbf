/* tiles.c: matmul of float64 and the integer types (float32 takes the GEMM, gemm/) as plain
 * blocked loops, parallel over output tiles; integers wrap around. */
#include "ops/matmul/matmul.h"

/* Output tiles of TILE_M x TILE_N; K in slices of TILE_K so that the slice of b a tile reads
 * stays in cache while each of the tile's rows goes over it. */
#define TILE_M 8
#define TILE_N 256
#define TILE_K 128

typedef struct matmul_job {
    const rt_matmul_dims *dims;
    const void *a, *b;
    void *out;
    int64_t row_tiles, col_tiles;
} matmul_job;

/* MADD(acc, x, y) adds x * y to acc; integers wrap around in the unsigned type W. */
#define FLOAT_MADD(T, W, acc, x, y) ((acc) + (x) * (y))
#define INT_MADD(T, W, acc, x, y) ((T)((W)(acc) + (W)(x) * (W)(y)))

/* i-k-j order: the innermost loop runs along contiguous rows of b and out. */
#define DEFINE_MATMUL_TILES(sfx, T, W, MADD)                                                  \
    static void matmul_tiles__##sfx(void *arg, size_t begin, size_t end)                      \
    {                                                                                         \
        const matmul_job *job = arg;                                                          \
        const rt_matmul_dims *dims = job->dims;                                                  \
        int64_t m = dims->m, k = dims->k, n = dims->n;                                        \
        int64_t tiles = job->row_tiles * job->col_tiles;                                      \
        for (size_t item = begin; item < end; item++) {                                       \
            int64_t batch = (int64_t)item / tiles, tile = (int64_t)item % tiles;              \
            int64_t i0 = tile / job->col_tiles * TILE_M, j0 = tile % job->col_tiles * TILE_N; \
            int64_t i1 = i0 + TILE_M < m ? i0 + TILE_M : m;                                   \
            int64_t j1 = j0 + TILE_N < n ? j0 + TILE_N : n;                                   \
            int64_t a_off, b_off;                                                             \
            rt_op__matmul_batch_offsets(dims, batch, &a_off, &b_off);                            \
            const T *a = (const T *)job->a + a_off;                                           \
            const T *b = (const T *)job->b + b_off;                                           \
            T *out = (T *)job->out + batch * m * n;                                           \
            for (int64_t i = i0; i < i1; i++)                                                 \
                for (int64_t j = j0; j < j1; j++)                                             \
                    out[i * n + j] = 0;                                                       \
            for (int64_t p0 = 0; p0 < k; p0 += TILE_K) {                                      \
                int64_t p1 = p0 + TILE_K < k ? p0 + TILE_K : k;                               \
                for (int64_t i = i0; i < i1; i++) {                                           \
                    T *o = out + i * n;                                                       \
                    for (int64_t p = p0; p < p1; p++) {                                       \
                        const T x = a[i * k + p];                                             \
                        const T *brow = b + p * n;                                            \
                        for (int64_t j = j0; j < j1; j++)                                     \
                            o[j] = MADD(T, W, o[j], x, brow[j]);                              \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }
DEFINE_MATMUL_TILES(f32, float, float, FLOAT_MADD)
DEFINE_MATMUL_TILES(f64, double, double, FLOAT_MADD)
DEFINE_MATMUL_TILES(i32, int32_t, uint32_t, INT_MADD)
DEFINE_MATMUL_TILES(i64, int64_t, uint64_t, INT_MADD)

static rt_range_fn matmul_kernel_for(rt_type type) {
    switch (type) {
    case RT_F32: return matmul_tiles__f32;
    case RT_F64: return matmul_tiles__f64;
    case RT_I32: return matmul_tiles__i32;
    case RT_I64: return matmul_tiles__i64;
    default: return NULL;
    }
}

bool rt_matmul__tiles(const rt_matmul_dims *dims, rt_type type, const void *a, const void *b,
                      void *out, int32_t threads) {
    rt_range_fn kernel = matmul_kernel_for(type);
    if (!kernel)
        return false;
    matmul_job job = {
        .dims = dims,
        .a = a,
        .b = b,
        .out = out,
        .row_tiles = (dims->m + TILE_M - 1) / TILE_M,
        .col_tiles = (dims->n + TILE_N - 1) / TILE_N,
    };
    /* Each count is at most the output's element count, so the product cannot overflow. */
    int64_t items = dims->batch_count * job.row_tiles * job.col_tiles;
    int64_t work = rt_op__mul_sat((int64_t)TILE_M * TILE_N, dims->k > 0 ? dims->k : 1);
    rt_parallel__for(threads, (size_t)items, rt_op__grain(work), kernel, &job);
    return true;
}
