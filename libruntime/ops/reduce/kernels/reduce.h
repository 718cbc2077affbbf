/* kernels/reduce.h: the typed loops of the reductions (kernels/reduce.c). The op layer
 * (reduce.c) checks arguments, builds the geometry below and runs the kernel in parallel. */
#ifndef RT_OPS_REDUCE_KERNELS_REDUCE_H
#define RT_OPS_REDUCE_KERNELS_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef enum rt_reduce_op {
    RT_REDUCE_SUM,
    RT_REDUCE_MEAN,
    RT_REDUCE_PROD,
    RT_REDUCE_MAX,
    RT_REDUCE_MIN,
    RT_REDUCE_L1,
    RT_REDUCE_L2,
    RT_REDUCE_LOG_SUM,
    RT_REDUCE_LOG_SUM_EXP,
    RT_REDUCE_SUM_SQUARE,
    RT_REDUCE_OP_COUNT
} rt_reduce_op;

/* Columns of an innermost kept run handled together by one work item. */
#define RT_REDUCE_BLOCK 64

/* x with size-1 dimensions dropped and neighbours of the same kind (kept or reduced) merged.
 * The innermost merged dimension, of length `inner`, is contiguous in x:
 * - inner_reduced: each output element reduces runs of `inner` elements, one per position of
 *   the other reduced dimensions; work items are output elements;
 * - otherwise `inner` neighbouring output elements share every reduced position; work items
 *   are (outer output index, block of RT_REDUCE_BLOCK columns).
 * The kept arrays exclude an innermost kept run, the reduced arrays an innermost reduced one;
 * both list dimensions outermost first, with strides in elements of x. */
typedef struct rt_reduce_geom {
    bool inner_reduced;
    int64_t inner;
    int32_t nkept, nred;
    int64_t kept_sizes[RT_MAX_RANK], kept_strides[RT_MAX_RANK];
    int64_t red_sizes[RT_MAX_RANK], red_strides[RT_MAX_RANK];
    int64_t positions; /* product of red_sizes */
    int64_t count;     /* elements reduced into each output: positions * (inner or 1) */
    int64_t blocks;    /* column blocks per outer index (when !inner_reduced) */
} rt_reduce_geom;

typedef struct rt_reduce_job {
    rt_reduce_geom geom;
    const void *x;
    void *out;
} rt_reduce_job;

/* A parallel-for body over work items (see rt_reduce_geom); arg is an rt_reduce_job. */
typedef void (*rt_reduce_kernel)(void *arg, size_t begin, size_t end);

/* The kernel of op for x of `type`, or NULL when there is none. */
rt_reduce_kernel rt_ops__reduce_kernel(rt_reduce_op op, rt_type type);

/* Offset in x of kept (outer) output index `index`. */
static inline int64_t rt_reduce__kept_offset(const rt_reduce_geom *g, int64_t index) {
    int64_t off = 0;
    for (int32_t d = g->nkept - 1; d >= 0; d--) {
        off += (index % g->kept_sizes[d]) * g->kept_strides[d];
        index /= g->kept_sizes[d];
    }
    return off;
}

/* Advance the reduced position `idx` (offset *off) by one, row-major. */
static inline void rt_reduce__next(const rt_reduce_geom *g, int64_t *idx, int64_t *off) {
    for (int32_t d = g->nred - 1; d >= 0; d--) {
        *off += g->red_strides[d];
        if (++idx[d] < g->red_sizes[d])
            return;
        *off -= g->red_sizes[d] * g->red_strides[d];
        idx[d] = 0;
    }
}

/* ---- argmax / argmin -------------------------------------------------------------------- */

/* x viewed as [outer, n, inner]; out (int64) as [outer, inner]. Work items are (outer index,
 * block of RT_REDUCE_BLOCK inner columns). n >= 1. */
typedef struct rt_arg_job {
    const void *x;
    int64_t *out;
    int64_t outer, n, inner, blocks;
    bool last; /* ties go to the last index instead of the first */
} rt_arg_job;

/* argmax (max = true) or argmin over x of `type`, or NULL when there is none. */
rt_reduce_kernel rt_ops__arg_kernel(bool max, rt_type type);

#endif
