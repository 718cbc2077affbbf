/* multiversion.h: RT_MULTIVERSION compiles a hot loop twice, for x86-64-v3 (AVX2 + FMA) and for
 * the baseline, and picks one when the library loads (GCC/clang target_clones, resolved through
 * an ifunc). The library itself stays buildable for any x86-64 and runs on CPUs without AVX2.
 * Elsewhere, or where ifuncs are unavailable, it expands to nothing. */
#ifndef RT_CORE_MULTIVERSION_H
#define RT_CORE_MULTIVERSION_H

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && \
    !defined(RT_NO_MULTIVERSION)
#define RT_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RT_MULTIVERSION
#endif

#endif
