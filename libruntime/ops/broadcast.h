/* broadcast.h: how an elementwise op walks its broadcast inputs (elementwise.c, binary_more.c). */
#ifndef RT_OPS_BROADCAST_H
#define RT_OPS_BROADCAST_H

#include "value.h"

#define RT_BROADCAST_MAX_INPUTS 3

/* The result's shape with each input's strides (0 where it is broadcast), after dropping
 * size-1 dimensions and merging dimensions every input walks contiguously. */
typedef struct rt_broadcast_plan {
    int32_t rank; /* >= 1 */
    int32_t inputs;
    int64_t sizes[RT_MAX_RANK];
    int64_t strides[RT_BROADCAST_MAX_INPUTS][RT_MAX_RANK];
} rt_broadcast_plan;

/* Row-major strides of t aligned to the trailing dimensions of a result of rank `rank` (0
 * where t is broadcast). */
void rt_broadcast__aligned_strides(int64_t *out, const rt_tensor_value *t, int32_t rank);

/* The plan of `inputs` dense tensors broadcast to a result of the given rank and sizes
 * (which they must broadcast to). */
void rt_broadcast__plan(rt_broadcast_plan *plan, const rt_tensor_value *const *in,
                        int32_t inputs, int32_t rank, const int64_t *sizes);

#endif
