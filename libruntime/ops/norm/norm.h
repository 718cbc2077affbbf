/* norm.h: the normalisation family: the operators (norm.c) hand their kernels (kernels/) one
 * of these jobs, whose work items are rows (layer, instance and group norm) or blocks of
 * columns (lp_norm). */
#ifndef RT_OPS_NORM_H
#define RT_OPS_NORM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "tensor.h"

typedef struct rt_norm_job {
    const void *x, *scale, *bias; /* scale, bias may be NULL */
    void *out, *mean, *inv_std;   /* mean, inv_std: layer_norm's optional outputs, or NULL */
    int64_t len;                  /* elements per row */
    double eps;
    /* layer_norm: scale and bias repeat along the row with these periods. */
    int64_t scale_period, bias_period;
    /* instance_norm, group_norm: row r is group r % groups of its image; the group's channels
     * are `spatial` elements each; scale and bias hold one value per channel, or per group. */
    int64_t groups, group_channels, spatial;
    bool per_group;
} rt_norm_job;

/* Rows of x through (x - mean) * inv_std * scale + bias, for float32 or float64: layer_norm's
 * (scale and bias by period) and instance / group norm's (by channel or group). */
rt_range_fn rt_norm__layer_rows(rt_type type);
/* Rows of x through x / sqrt(mean(x^2) + eps) * scale (rms_norm; scale by period, no bias). */
rt_range_fn rt_norm__rms_rows(rt_type type);
rt_range_fn rt_norm__channel_rows(rt_type type);

/* x viewed as [outer, n, inner], normalised over n. Columns of the inner dimension are done
 * RT_NORM_LP_BLOCK at a time so that every pass reads contiguous runs. */
#define RT_NORM_LP_BLOCK 64

typedef struct rt_norm_lp_job {
    const void *x;
    void *out;
    int64_t n, inner, blocks;
    int64_t p;
} rt_norm_lp_job;

/* Work items outer * blocks + block, for float32 or float64. */
rt_range_fn rt_norm__lp_blocks(rt_type type);

#endif
