/* kernels/activation.h: the loops of relu (kernels/relu.c) and softmax (kernels/softmax.c).
 * The op layer (activation.c) handles arguments, shapes and in-place use. */
#ifndef RT_OPS_ELEMENTWISE_KERNELS_ACTIVATION_H
#define RT_OPS_ELEMENTWISE_KERNELS_ACTIVATION_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

/* out = relu(x) over numel elements; false for a dtype without a kernel. out may be x. */
bool rt_elementwise__relu(rt_type type, const void *x, void *out, int64_t numel,
                          int32_t threads);

/* Softmax over n of x viewed as [outer, n, inner], float32 or float64. out may be x. */
void rt_elementwise__softmax(rt_type type, const void *x, void *out, int64_t outer, int64_t n,
                             int64_t inner, int32_t threads);

#endif
