/* kernels/vmath.c: the float32 array math of vmath.h, compiled from one set of formulas
 * (vmath_impl.h, GCC vector types) three times: for AVX-512, for AVX2 and for the baseline,
 * which is the portable fallback on every CPU. The variant is chosen once, at first use.
 *
 * This file is compiled without floating-point contraction (CMakeLists.txt): no variant fuses
 * a multiply and an add that another does not, so all three perform the same IEEE operations
 * and give bit-identical results. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/isa.h"
#include "ops/elementwise/kernels/vmath.h"

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the baseline's registers */

#define VM_LANES 16
typedef float vm_f __attribute__((vector_size(VM_LANES * 4)));
typedef int32_t vm_i __attribute__((vector_size(VM_LANES * 4)));
typedef double vm_d __attribute__((vector_size(VM_LANES * 8)));
typedef int64_t vm_l __attribute__((vector_size(VM_LANES * 8)));
#define VM_SPLAT(c) ((vm_f){0} + (c)) /* +0 for -0: write -VM_SPLAT(0.0f) */
#define VM_SPLAT_I(c) ((vm_i){0} + (c))

/* R(t) of the erfc fit, erfc(z) = t exp(-z^2 + R(t)) with t = 1 / (1 + z / 2), highest degree
 * first (scripts/fit_vmath.py; below 1.5e-9 relative for z in [0.45, 10.1]). */
#define VM_ERFC_TERMS 10
static const double VM_ERFC_R[VM_ERFC_TERMS] = {
    0.2548932494279913,  -1.1985530780103777, 2.209008595805331,   -1.9045092093452414,
    0.7808021300810805,  -0.3924727702442553, 0.14977045126625327, 0.3659180962156595,
    1.0007098281157112,  -1.2655362612305674};

#define VM_TARGET
#define VM(name) vm_portable_##name
#include "ops/elementwise/kernels/vmath_impl.h"
#undef VM
#undef VM_TARGET

#if defined(__x86_64__) && defined(__GNUC__)
#define VM_X86 1
#define VM_TARGET __attribute__((target("avx2")))
#define VM(name) vm_avx2_##name
#include "ops/elementwise/kernels/vmath_impl.h"
#undef VM
#undef VM_TARGET

#define VM_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define VM(name) vm_avx512_##name
#include "ops/elementwise/kernels/vmath_impl.h"
#undef VM
#undef VM_TARGET
#endif

static const rt_vmath_kernel *chosen = vm_portable_kernels;
static const char *chosen_name = "portable";
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    rt_isa isa = rt_isa__choose("RT_VMATH_KERNEL", false);
#ifdef VM_X86
    chosen = isa == RT_ISA_AVX512 ? vm_avx512_kernels
             : isa == RT_ISA_AVX2 ? vm_avx2_kernels
                                  : vm_portable_kernels;
#else
    isa = RT_ISA_PORTABLE;
#endif
    chosen_name = rt_isa__name(isa);
}

rt_vmath_kernel rt_vmath__kernel(rt_vmath_fn fn) {
    pthread_once(&choose_once, choose);
    return chosen[fn];
}

const char *rt_vmath__variant(void) {
    pthread_once(&choose_once, choose);
    return chosen_name;
}
