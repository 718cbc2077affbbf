/* lp.c: lp_norm's kernel (p = 1 or 2) in float32 and float64, sums in double. */
#include <math.h>

#include "ops/norm/norm.h"

#define LP_BLOCK RT_NORM_LP_BLOCK

/* A zero norm gives 0 (ONNX's reference), not 0 / 0. Division (not a reciprocal) keeps tiny
 * norms finite. */
#define DEFINE_LP(sfx, T)                                                                   \
    static void lp_blocks__##sfx(void *arg, size_t begin, size_t end) {                    \
        const rt_norm_lp_job *job = arg;                                                           \
        int64_t n = job->n, inner = job->inner;                                            \
        for (size_t item = begin; item < end; item++) {                                    \
            int64_t outer = (int64_t)item / job->blocks;                                   \
            int64_t first = (int64_t)item % job->blocks * LP_BLOCK;                        \
            int64_t width = inner - first < LP_BLOCK ? inner - first : LP_BLOCK;           \
            const T *x = (const T *)job->x + outer * n * inner + first;                    \
            T *o = (T *)job->out + outer * n * inner + first;                              \
            double acc[LP_BLOCK];                                                          \
            for (int64_t c = 0; c < width; c++)                                            \
                acc[c] = 0;                                                                \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++) {                                      \
                    double v = (double)x[k * inner + c];                                   \
                    acc[c] += job->p == 1 ? fabs(v) : v * v;                               \
                }                                                                          \
            for (int64_t c = 0; c < width; c++) /* a norm of 0 divides 0s: give 0s */      \
                acc[c] = acc[c] == 0 ? 1 : job->p == 1 ? acc[c] : sqrt(acc[c]);            \
            for (int64_t k = 0; k < n; k++)                                                \
                for (int64_t c = 0; c < width; c++)                                        \
                    o[k * inner + c] = (T)((double)x[k * inner + c] / acc[c]);             \
        }                                                                                  \
    }
DEFINE_LP(f32, float)
DEFINE_LP(f64, double)


rt_range_fn rt_norm__lp_blocks(rt_type type) {
    return type == RT_F32 ? lp_blocks__f32 : lp_blocks__f64;
}
