/* isa.h: which instruction-set variant of a kernel compiled several times to run: the best this
 * CPU has, unless the environment forces one (RT_PORTABLE_KERNELS=1 for every such kernel, or
 * the kernel's own variable = portable | avx2 | avx512, which a CPU lacking it ignores). */
#ifndef RT_CORE_ISA_H
#define RT_CORE_ISA_H

#include <stdbool.h>

typedef enum rt_isa { RT_ISA_PORTABLE = 0, RT_ISA_AVX2, RT_ISA_AVX512 } rt_isa;

/* avx2_needs_fma: the AVX2 variant also uses FMA instructions. */
rt_isa rt_isa__choose(const char *env_name, bool avx2_needs_fma);

const char *rt_isa__name(rt_isa isa);

#endif
