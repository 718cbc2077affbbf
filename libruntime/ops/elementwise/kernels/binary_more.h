/* kernels/binary_more.h: the typed inner loops of pow, mod, min, max, less_equal, and, or,
 * xor and where (kernels/binary_more.c). The op layer (binary_more.c) handles shapes,
 * broadcasting and threads. */
#ifndef RT_OPS_ELEMENTWISE_KERNELS_BINARY_MORE_H
#define RT_OPS_ELEMENTWISE_KERNELS_BINARY_MORE_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef enum rt_more_op {
    RT_MORE_MOD_FLOOR, /* mod with fmod = 0: the sign of the divisor (Python, numpy.mod) */
    RT_MORE_MOD_TRUNC, /* mod with fmod = 1: the sign of the dividend (C fmod, numpy.fmod) */
    RT_MORE_MIN,
    RT_MORE_MAX,
    RT_MORE_LESS_EQUAL,
    RT_MORE_AND,
    RT_MORE_OR,
    RT_MORE_XOR,
    RT_MORE_SHIFT_LEFT,  /* integer types; see kernels/binary_more.c for out-of-range shifts */
    RT_MORE_SHIFT_RIGHT,
    RT_MORE_OP_COUNT
} rt_more_op;

/* out[i] = f(in[0][i * strides[0]], in[1][i * strides[1]], ...) for i in [0, n); strides in
 * elements. out may be an input itself (same elements). */
typedef void (*rt_nary_kernel)(void *out, const void *const *in, const int64_t *strides,
                               int64_t n);

/* The kernel of op on two inputs of `type`, or NULL when there is none. Integer mod by zero
 * gives 0 here; the op layer reports it before calling. */
rt_nary_kernel rt_ops__more_kernel(rt_more_op op, rt_type type);

/* pow with a base of `base` (float32, float64, int32, int64) and an exponent of any float or
 * integer type; NULL for other types. */
rt_nary_kernel rt_ops__pow_kernel(rt_type base, rt_type exponent);

/* float32 to the power `exponent`, for an exponent of one element: its kernel takes the
 * exponent as a double second input (stride 0). NULL where the generic kernel serves (an
 * exponent that is neither 0.5, -0.5 nor an integer of magnitude <= 64). */
rt_nary_kernel rt_ops__pow_f32_constant_kernel(double exponent);

/* where(cond, a, b) moving elements of elem_size bytes (1, 2, 4 or 8); NULL otherwise. */
rt_nary_kernel rt_ops__where_kernel(size_t elem_size);

#endif
