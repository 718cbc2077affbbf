/* kernels/binary.h: the typed inner loops of the elementwise ops (kernels/binary.c).
 * The op layer (elementwise.c) handles shapes, broadcasting and threads. */
#ifndef RT_OPS_ELEMENTWISE_KERNELS_BINARY_H
#define RT_OPS_ELEMENTWISE_KERNELS_BINARY_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

typedef enum rt_binary_op {
    RT_BINARY_ADD,
    RT_BINARY_SUB,
    RT_BINARY_MUL,
    RT_BINARY_DIV,
    RT_BINARY_LESS,
    RT_BINARY_EQUAL,
    RT_BINARY_OP_COUNT
} rt_binary_op;

/* out[i] = a[i * a_stride] <op> b[i * b_stride] for i in [0, n); strides in elements. The
 * comparisons write bool (one byte, 0 or 1). out may be a or b itself (same elements). Integer
 * division by zero gives 0 here; the op layer reports it before calling. */
typedef void (*rt_binary_kernel)(void *out, const void *a, int64_t a_stride, const void *b,
                                 int64_t b_stride, int64_t n);

/* The kernel of op on inputs of `type`, or NULL when there is none. */
rt_binary_kernel rt_ops__binary_kernel(rt_binary_op op, rt_type type);

/* True when one of the n elements (elem_size bytes each: 1, 2, 4 or 8) is zero. */
bool rt_ops__any_zero(const void *data, size_t elem_size, int64_t n);

#endif
