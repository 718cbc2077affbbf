/* max_2x2_avx512.c: the float32 2x2, stride-2 max pool with AVX-512 (max.c takes it where
 * the CPU has AVX-512). */
#include "ops/pool/pool.h"

#if RT_POOL_AVX512
#include <immintrin.h>

#include "core/lane_mask.h"

/* max_nan lane by lane: v where v > best or v is NaN, else best. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 max_nan16(__m512 best,
                                                                                 __m512 v) {
    __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                     _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(best, take, v);
}

/* The same with AVX-512, 16 outputs at a time: the two rows' maxima lane by lane, then the
 * even and odd columns of those (vpermt2ps), then their maxima; a row's last vector masked.
 * The compiler's own vectorisation of the loop above took 1.3 cycles per output. */
__attribute__((target("avx512f"))) void rt_pool__max_2x2_rows_avx512(void *arg,
                                                                          size_t begin,
                                                                          size_t end) {
    const rt_pool_job *job = arg;
    const rt_pool_dims *d = job->dims;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    /* (plane, oh) is stepped along, not divided out of each row: a division per 32-wide row
     * cost as much as its pooling. */
    int64_t plane = (int64_t)begin / d->out_h, oh = (int64_t)begin % d->out_h;
    for (size_t row = begin; row < end; row++, oh++) {
        if (oh == d->out_h) {
            plane++;
            oh = 0;
        }
        const float *top = (const float *)job->x + (plane * d->height + 2 * oh) * d->width;
        const float *bottom = top + d->width;
        float *out = (float *)job->out + plane * d->out_plane + oh * d->out_w;
        int64_t ow = 0;
        /* Whole vectors with plain loads and stores (masked ones cost several times as much
         * on AMD Zen 4), and plain maxima unless an input is NaN. */
        for (; ow + 16 <= d->out_w; ow += 16) {
            const float *t = top + 2 * ow, *b = bottom + 2 * ow;
            __m512 t0 = _mm512_loadu_ps(t), t1 = _mm512_loadu_ps(t + 16);
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
            __m512 r;
            if ((_mm512_cmp_ps_mask(t0, b0, _CMP_UNORD_Q) |
                 _mm512_cmp_ps_mask(t1, b1, _CMP_UNORD_Q)) == 0) {
                /* max returns its second operand on a tie: the first, as max_nan16 keeps */
                __m512 v0 = _mm512_max_ps(b0, t0), v1 = _mm512_max_ps(b1, t1);
                r = _mm512_max_ps(_mm512_permutex2var_ps(v0, odd, v1),
                                  _mm512_permutex2var_ps(v0, even, v1));
            } else {
                __m512 v0 = max_nan16(t0, b0), v1 = max_nan16(t1, b1);
                r = max_nan16(_mm512_permutex2var_ps(v0, even, v1),
                              _mm512_permutex2var_ps(v0, odd, v1));
            }
            _mm512_storeu_ps(out + ow, r);
        }
        if (ow < d->out_w) {
            int64_t n = d->out_w - ow; /* outputs, 2n inputs */
            __mmask16 lo = rt_lane_mask__16(0, 2 * n), hi = rt_lane_mask__16(0, 2 * n - 16);
            const float *t = top + 2 * ow, *b = bottom + 2 * ow;
            __m512 v0 = max_nan16(_mm512_maskz_loadu_ps(lo, t), _mm512_maskz_loadu_ps(lo, b));
            __m512 v1 = max_nan16(_mm512_maskz_loadu_ps(hi, t + 16),
                                  _mm512_maskz_loadu_ps(hi, b + 16));
            __m512 r = max_nan16(_mm512_permutex2var_ps(v0, even, v1),
                                 _mm512_permutex2var_ps(v0, odd, v1));
            _mm512_mask_storeu_ps(out + ow, rt_lane_mask__16(0, n), r);
        }
    }
}
#endif
