/* resize.h: resize's interpolation tables, for its kernel (kernels/interpolate.c) and for a
 * backend that interpolates elsewhere (the CUDA backend uploads them): built on the host
 * exactly as the CPU run builds them. */
#ifndef RT_OPS_RESIZE_H
#define RT_OPS_RESIZE_H

#include "ops/op.h"
#include "tensor.h"

/* Per dimension d of out: for output coordinate o, taps[d] source offsets (elements of x,
 * dense row-major, already times the dimension's stride) at table[offsets_at[d] + o * taps[d]
 * + k], their weights (doubles, bit-stored in the int64 slots) at weights_at[d] likewise, and
 * at table[outside_at[d] + o] 1 where tf_crop_and_resize puts o outside the input. */
typedef struct rt_resize_tables {
    int32_t rank;
    bool nearest;         /* one tap of weight 1: a gather, any dtype */
    double extrapolation; /* the value of outside positions (linear and cubic) */
    uint64_t fill;        /* its bits in x's dtype (nearest) */
    int64_t taps[RT_MAX_RANK];
    int64_t offsets_at[RT_MAX_RANK], weights_at[RT_MAX_RANK], outside_at[RT_MAX_RANK];
    int64_t *table; /* malloc'ed; the caller frees it */
    size_t table_bytes;
} rt_resize_tables;

/* The CPU run's view of the tables, for the interpolation kernel (kernels/interpolate.c). */
typedef struct rt_resize_job {
    const rt_tensor_value *x, *out;
    const int64_t *taps; /* per dimension of out */
    double extrapolation;
    int64_t *offsets[RT_MAX_RANK];
    double *weights[RT_MAX_RANK];
    int64_t *outside[RT_MAX_RANK];
    int32_t active[RT_MAX_RANK]; /* dimensions with more than one tap */
    int32_t num_active;
} rt_resize_job;

/* Linear or cubic interpolation of job->x (float32 or float64) into job->out. */
void rt_resize__interpolate(const rt_resize_job *job, int32_t threads);

/* The tables of resize's instruction `ctx` for the current sizes (its arguments checked and
 * out's sizes set, as by its run). The CPU run fails when table_bytes exceeds the scratch its
 * prepare planned from out's bounds (a dynamic x can change the taps); so must a backend. An
 * empty out gives no table. */
rt_status rt_ops__resize_tables(rt_op_ctx *ctx, rt_resize_tables *out);

#endif
