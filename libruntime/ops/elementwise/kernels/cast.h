/* kernels/cast.h: the loops of cast (kernels/cast.c); the op layer (cast.c) checks the
 * arguments and copies equal dtypes bit for bit. */
#ifndef RT_OPS_ELEMENTWISE_KERNELS_CAST_H
#define RT_OPS_ELEMENTWISE_KERNELS_CAST_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* numel elements of x (dtype `from`) converted into out (dtype `to`, different), each result
 * rounded once; out may be x when the element sizes are equal. */
void rt_elementwise__cast(rt_type from, rt_type to, const void *x, void *out, int64_t numel,
                          size_t x_size, size_t out_size, int32_t threads);

#endif
