/* transpose8.h: an 8 x 8 float transpose in AVX registers (unpack, shuffle, then swap the
 * 128-bit halves): out[j] is lane j of each of in[0..8). For x86-64 builds with GCC or clang,
 * from functions whose target includes AVX (the GEMM's A packing, the transposed stores of
 * conv/kernels/pixels_f32.c). */
#ifndef RT_CORE_TRANSPOSE8_H
#define RT_CORE_TRANSPOSE8_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static inline __attribute__((always_inline, target("avx"))) void rt_transpose8x8(
    const __m256 in[8], __m256 out[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(in[i], in[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(in[i], in[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; j++) {
        out[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        out[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}
#endif

#endif
