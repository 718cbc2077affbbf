/* kernels/scan.h: the loops of cumsum and topk (kernels/scan.c); the op layer (scan.c)
 * reads and checks the arguments and sizes the outputs. */
#ifndef RT_OPS_REDUCE_KERNELS_SCAN_H
#define RT_OPS_REDUCE_KERNELS_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

/* Cumulative sums along n; out may be x. float32 sums in double; integers wrap. False for a
 * dtype without a kernel. */
bool rt_reduce__cumsum(rt_type type, const void *x, void *out, int64_t outer, int64_t n,
                       int64_t inner, bool exclusive, bool reverse, int32_t threads);

/* The k best of each row along n into values and indices ([outer, k, inner]), best first:
 * by value, NaN above every number, equal values by the lower index. False for a dtype
 * without a kernel. */
bool rt_reduce__topk(rt_type type, const void *x, void *values, int64_t *indices,
                     int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest,
                     int32_t threads);

#endif
