/* copy.c: the copies the data-movement ops are made of (movement.h): fills, runs of rows,
 * copies through per-dimension offset maps (pad, tile, expand, slice, gather-like ops) and
 * strided copies, split over threads. */
#include <string.h>

#include "ops/movement/movement.h"

void rt_mv__fill(void *dst, const void *value, int64_t n, size_t elem_size) {
    if (n <= 0)
        return;
    char *d = dst;
    memcpy(d, value, elem_size);
    /* Doubling copies: log2(n) memcpy calls. */
    int64_t done = 1;
    while (done < n) {
        int64_t chunk = done < n - done ? done : n - done;
        memcpy(d + (size_t)done * elem_size, d, (size_t)chunk * elem_size);
        done += chunk;
    }
}

typedef struct rows_job {
    char *dst;
    const char *src;
    size_t dst_stride, src_stride, bytes;
} rows_job;

static void rows_range(void *arg, size_t begin, size_t end) {
    const rows_job *job = arg;
    for (size_t r = begin; r < end; r++)
        memcpy(job->dst + r * job->dst_stride, job->src + r * job->src_stride, job->bytes);
}

void rt_mv__copy_rows(const rt_op_ctx *ctx, char *dst, size_t dst_stride, const char *src,
                      size_t src_stride, int64_t rows, size_t bytes) {
    if (rows <= 0 || bytes == 0)
        return;
    rows_job job = {dst, src, dst_stride, src_stride, bytes};
    rt_parallel__for(rt_op__threads(ctx), (size_t)rows, rt_op__grain((int64_t)bytes / 4 + 1),
                     rows_range, &job);
}

/* ---- map copy --------------------------------------------------------------------------- */

size_t rt_mv__maps_bytes(int32_t rank, const int64_t *bounds) {
    int64_t total = 0;
    for (int32_t d = 0; d < rank; d++)
        if (!rt_op__add(total, bounds[d], &total))
            return SIZE_MAX;
    int64_t bytes;
    if (!rt_op__mul(total, (int64_t)sizeof(int64_t), &bytes) || (uint64_t)bytes > SIZE_MAX)
        return SIZE_MAX;
    return (size_t)bytes;
}

bool rt_mv__maps_layout(const rt_op_ctx *ctx, int32_t rank, const int64_t *sizes,
                        int64_t **maps) {
    size_t need = rt_mv__maps_bytes(rank, sizes);
    if (need > ctx->scratch_bytes || (need > 0 && !ctx->scratch))
        return false;
    int64_t *next = ctx->scratch;
    for (int32_t d = 0; d < rank; d++) {
        maps[d] = next;
        next += sizes[d];
    }
    return true;
}

typedef struct map_job {
    char *out;
    const char *src;
    int32_t rank; /* >= 1 */
    const int64_t *sizes;
    int64_t *const *maps;
    const void *fill;
    size_t elem;
    bool inner_contiguous; /* maps[rank-1][k] == maps[rank-1][0] + k, all >= 0 */
} map_job;

/* One row of the innermost dimension, starting at source offset base. */
static void map_row(const map_job *job, char *dst, int64_t base) {
    int64_t n = job->sizes[job->rank - 1];
    const int64_t *map = job->maps[job->rank - 1];
    size_t elem = job->elem;
    if (base < 0) {
        rt_mv__fill(dst, job->fill, n, elem);
        return;
    }
    if (job->inner_contiguous) {
        memcpy(dst, job->src + (size_t)(base + map[0]) * elem, (size_t)n * elem);
        return;
    }
#define MAP_LOOP(T)                                                    \
    do {                                                               \
        T *d = (T *)(void *)dst;                                       \
        const T *s = (const T *)(const void *)job->src + base;         \
        T f;                                                           \
        memcpy(&f, job->fill, sizeof f);                               \
        for (int64_t k = 0; k < n; k++)                                \
            d[k] = map[k] >= 0 ? s[map[k]] : f;                        \
    } while (0)
    switch (elem) {
    case 1: MAP_LOOP(uint8_t); return;
    case 2: MAP_LOOP(uint16_t); return;
    case 4: MAP_LOOP(uint32_t); return;
    case 8: MAP_LOOP(uint64_t); return;
    default: break;
    }
#undef MAP_LOOP
    for (int64_t k = 0; k < n; k++) {
        const void *from = map[k] >= 0 ? job->src + (size_t)(base + map[k]) * elem : job->fill;
        memcpy(dst + (size_t)k * elem, from, elem);
    }
}

static void map_range(void *arg, size_t begin, size_t end) {
    const map_job *job = arg;
    int32_t outer = job->rank - 1;
    int64_t n = job->sizes[outer];
    for (size_t row = begin; row < end; row++) {
        int64_t rest = (int64_t)row, base = 0;
        for (int32_t d = outer - 1; d >= 0; d--) {
            int64_t m = job->maps[d][rest % job->sizes[d]];
            rest /= job->sizes[d];
            if (m < 0 || base < 0)
                base = -1;
            else
                base += m;
        }
        map_row(job, job->out + row * (size_t)n * job->elem, base);
    }
}

void rt_mv__map_copy(const rt_op_ctx *ctx, void *out, const void *src, int32_t rank,
                     const int64_t *sizes, int64_t *const *maps, const void *fill,
                     size_t elem_size) {
    int64_t numel = 1;
    for (int32_t d = 0; d < rank; d++)
        numel *= sizes[d]; /* the output's element count: no overflow */
    if (numel == 0)
        return;
    if (rank == 0) {
        memcpy(out, src, elem_size);
        return;
    }
    static const uint64_t zero = 0; /* the fill when none is given: all bytes 0 */
    map_job job = {out, src, rank, sizes, maps, fill ? fill : &zero, elem_size, true};
    const int64_t *inner = maps[rank - 1];
    for (int64_t k = 0; k < sizes[rank - 1] && job.inner_contiguous; k++)
        job.inner_contiguous = inner[k] >= 0 && inner[k] == inner[0] + k;
    int64_t n = sizes[rank - 1];
    rt_parallel__for(rt_op__threads(ctx), (size_t)(numel / n), rt_op__grain(n), map_range, &job);
}

/* ---- strided copy ----------------------------------------------------------------------- */

typedef struct strided_job {
    char *dst;
    const char *src;
    const int64_t *src_strides;
    int32_t rank;
    const int64_t *sizes;
    size_t elem;
    int64_t dst_row; /* elements per index of the first dimension in dst */
} strided_job;

static void strided_range(void *arg, size_t begin, size_t end) {
    const strided_job *job = arg;
    int64_t sizes[RT_MAX_RANK], dst_strides[RT_MAX_RANK];
    memcpy(sizes, job->sizes, (size_t)job->rank * sizeof *sizes);
    sizes[0] = (int64_t)(end - begin);
    rt_tensor__dense_strides(dst_strides, job->rank, job->sizes, NULL);
    const char *src = job->src + (int64_t)begin * job->src_strides[0] * (int64_t)job->elem;
    char *dst = job->dst + (size_t)begin * (size_t)job->dst_row * job->elem;
    rt_tensor__copy_strided(dst, dst_strides, src, job->src_strides, job->rank, sizes,
                            job->elem);
}

void rt_mv__strided_copy(const rt_op_ctx *ctx, void *dst, const void *src,
                         const int64_t *src_strides, int32_t rank, const int64_t *sizes,
                         size_t elem_size) {
    int64_t numel = 1;
    for (int32_t d = 0; d < rank; d++)
        numel *= sizes[d];
    if (numel == 0)
        return;
    if (rank == 0) {
        memcpy(dst, src, elem_size);
        return;
    }
    strided_job job = {dst, src, src_strides, rank, sizes, elem_size, numel / sizes[0]};
    rt_parallel__for(rt_op__threads(ctx), (size_t)sizes[0], rt_op__grain(job.dst_row),
                     strided_range, &job);
}
