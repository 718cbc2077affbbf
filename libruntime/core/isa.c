/* isa.c: the choice of isa.h, from cpuid (GCC's __builtin_cpu_supports) and the environment. */
#include "core/isa.h"

#include <stdlib.h>
#include <string.h>

static bool env_is(const char *name, const char *value) {
    const char *set = getenv(name);
    return set != NULL && strcmp(set, value) == 0;
}

rt_isa rt_isa__choose(const char *env_name, bool avx2_needs_fma) {
    const char *portable = getenv("RT_PORTABLE_KERNELS");
    if ((portable != NULL && portable[0] != '\0' && portable[0] != '0') ||
        env_is(env_name, "portable"))
        return RT_ISA_PORTABLE;
#if defined(__x86_64__) && defined(__GNUC__)
    const char *wanted = getenv(env_name);
    bool any = wanted == NULL || wanted[0] == '\0';
    __builtin_cpu_init();
    if ((any || env_is(env_name, "avx512")) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        return RT_ISA_AVX512;
    if ((any || env_is(env_name, "avx2")) && __builtin_cpu_supports("avx2") &&
        (!avx2_needs_fma || __builtin_cpu_supports("fma")))
        return RT_ISA_AVX2;
#else
    (void)avx2_needs_fma;
#endif
    return RT_ISA_PORTABLE;
}

const char *rt_isa__name(rt_isa isa) {
    return isa == RT_ISA_AVX512 ? "avx512" : isa == RT_ISA_AVX2 ? "avx2" : "portable";
}
