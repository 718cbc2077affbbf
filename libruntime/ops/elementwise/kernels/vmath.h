/* kernels/vmath.h: float32 math over arrays at full vector width (exp, log, tanh, erf,
 * sigmoid, silu, the two GELUs, softplus), for the unary ops and the fused activations.
 *
 * Every function is accurate to a few ulp over the whole float range (NaN and infinities
 * included; tests/test_vmath.py checks each against numpy in float64), and every instruction
 * set variant gives bit-identical results. */
#ifndef RT_OPS_ELEMENTWISE_KERNELS_VMATH_H
#define RT_OPS_ELEMENTWISE_KERNELS_VMATH_H

#include <stddef.h>

typedef enum rt_vmath_fn {
    RT_VMATH_EXP,
    RT_VMATH_LOG,
    RT_VMATH_TANH,
    RT_VMATH_ERF,
    RT_VMATH_SIGMOID,
    RT_VMATH_SILU,      /* x * sigmoid(x) */
    RT_VMATH_GELU,      /* x * Phi(x), with erf */
    RT_VMATH_GELU_TANH, /* the tanh approximation of GELU */
    RT_VMATH_SOFTPLUS,  /* log(1 + exp(x)) */
    RT_VMATH_FN_COUNT
} rt_vmath_fn;

/* out[i] = fn(x[i]) for i < n; out may be x. */
typedef void (*rt_vmath_kernel)(float *out, const float *x, size_t n);

/* The kernel of the variant chosen for this CPU, once, at first use: avx512, avx2 or portable
 * (RT_PORTABLE_KERNELS=1, or RT_VMATH_KERNEL=portable|avx2|avx512 where the CPU has it). */
rt_vmath_kernel rt_vmath__kernel(rt_vmath_fn fn);

/* The name of that variant. */
const char *rt_vmath__variant(void);

#endif
