/* standardize.c: rows brought to mean 0 and variance 1, then scaled and shifted, in float32
 * and float64 (layer_norm, instance_norm, group_norm), or to root mean square 1 (rms_norm).
 * A row's mean and variance come from one pass with sums in double, shifted by the row's first
 * element so that a large common offset does not cancel. Each row is read completely before
 * it is written, so out may be x. */
#include <math.h>

#include "ops/norm/norm.h"

/* An empty row has no mean: NaN, as numpy's mean of nothing. The sums run in STAT_LANES
 * independent lanes, which the compiler can vectorise without reassociating anything (a single
 * float64 accumulator would make the pass latency-bound). */
#define STAT_LANES 8
#define DEFINE_ROW_STATS(sfx, T)                                                            \
    static void row_stats__##sfx(const T *x, int64_t n, double eps, double *mean,          \
                                 double *inv_std) {                                        \
        if (n == 0) {                                                                      \
            *mean = NAN;                                                                   \
            *inv_std = NAN;                                                                \
            return;                                                                        \
        }                                                                                  \
        double shift = (double)x[0], sum = 0, squares = 0;                                 \
        double sums[STAT_LANES] = {0}, sq[STAT_LANES] = {0};                               \
        int64_t k = 0;                                                                     \
        for (; k + STAT_LANES <= n; k += STAT_LANES) {                                     \
            double d[STAT_LANES];                                                          \
            for (int j = 0; j < STAT_LANES; j++)                                           \
                d[j] = (double)x[k + j] - shift;                                           \
            for (int j = 0; j < STAT_LANES; j++)                                           \
                sums[j] += d[j];                                                           \
            for (int j = 0; j < STAT_LANES; j++)                                           \
                sq[j] += d[j] * d[j];                                                      \
        }                                                                                  \
        for (int j = 0; j < STAT_LANES; j++) {                                             \
            sum += sums[j];                                                                \
            squares += sq[j];                                                              \
        }                                                                                  \
        for (; k < n; k++) {                                                               \
            double d = (double)x[k] - shift;                                               \
            sum += d;                                                                      \
            squares += d * d;                                                              \
        }                                                                                  \
        double m = sum / (double)n, var = squares / (double)n - m * m;                     \
        *mean = shift + m;                                                                 \
        *inv_std = 1.0 / sqrt((var > 0 ? var : 0) + eps);                                  \
    }

/* Equal periods (the usual case, including absent parameters) run as a nested loop the
 * compiler can vectorise; different ones keep a wrapping index each. */
#define DEFINE_LAYER_ROWS(sfx, T)                                                           \
    static void layer_rows__##sfx(void *arg, size_t begin, size_t end) {                   \
        const rt_norm_job *job = arg;                                                         \
        int64_t len = job->len;                                                            \
        const T *sc = job->scale, *bi = job->bias;                                         \
        int64_t ps = sc ? job->scale_period : len, pb = bi ? job->bias_period : len;       \
        for (size_t r = begin; r < end; r++) {                                             \
            const T *x = (const T *)job->x + (int64_t)r * len;                             \
            T *o = (T *)job->out + (int64_t)r * len;                                       \
            double mean, inv;                                                              \
            row_stats__##sfx(x, len, job->eps, &mean, &inv);                               \
            if (job->mean) {                                                               \
                ((T *)job->mean)[r] = (T)mean;                                             \
                ((T *)job->inv_std)[r] = (T)inv;                                           \
            }                                                                              \
            T m = (T)mean, s = (T)inv;                                                     \
            if (ps == pb) {                                                                \
                for (int64_t base = 0; base < len; base += ps)                             \
                    for (int64_t j = 0; j < ps; j++) {                                     \
                        T v = (x[base + j] - m) * s;                                       \
                        o[base + j] = (sc ? v * sc[j] : v) + (bi ? bi[j] : (T)0);          \
                    }                                                                      \
                continue;                                                                  \
            }                                                                              \
            for (int64_t k = 0, js = 0, jb = 0; k < len; k++) {                            \
                T v = (x[k] - m) * s;                                                      \
                o[k] = (sc ? v * sc[js] : v) + (bi ? bi[jb] : (T)0);                       \
                js = js + 1 == ps ? 0 : js + 1;                                            \
                jb = jb + 1 == pb ? 0 : jb + 1;                                            \
            }                                                                              \
        }                                                                                  \
    }

#define DEFINE_CHANNEL_ROWS(sfx, T)                                                         \
    static void channel_rows__##sfx(void *arg, size_t begin, size_t end) {                 \
        const rt_norm_job *job = arg;                                                         \
        const T *sc = job->scale, *bi = job->bias;                                         \
        int64_t len = job->len, spatial = job->spatial;                                    \
        for (size_t r = begin; r < end; r++) {                                             \
            const T *x = (const T *)job->x + (int64_t)r * len;                             \
            T *o = (T *)job->out + (int64_t)r * len;                                       \
            double mean, inv;                                                              \
            row_stats__##sfx(x, len, job->eps, &mean, &inv);                               \
            T m = (T)mean, s = (T)inv;                                                     \
            int64_t g = (int64_t)r % job->groups;                                          \
            for (int64_t c = 0; c < job->group_channels; c++) {                            \
                int64_t p = job->per_group ? g : g * job->group_channels + c;              \
                T a = sc ? s * sc[p] : s, b = bi ? bi[p] : (T)0;                           \
                const T *xc = x + c * spatial;                                             \
                T *oc = o + c * spatial;                                                   \
                for (int64_t k = 0; k < spatial; k++)                                      \
                    oc[k] = (xc[k] - m) * a + b;                                           \
            }                                                                              \
        }                                                                                  \
    }

/* rms_norm: x / sqrt(mean(x^2) + eps) * scale, the squares summed in double lanes as above
 * (no shift: the root mean square is taken about 0). An empty row is left empty. */
#define DEFINE_RMS_ROWS(sfx, T)                                                             \
    static void rms_rows__##sfx(void *arg, size_t begin, size_t end) {                     \
        const rt_norm_job *job = arg;                                                       \
        int64_t len = job->len;                                                            \
        const T *sc = job->scale;                                                          \
        int64_t ps = sc ? job->scale_period : len;                                         \
        for (size_t r = begin; r < end && len > 0; r++) {                                  \
            const T *x = (const T *)job->x + (int64_t)r * len;                             \
            T *o = (T *)job->out + (int64_t)r * len;                                       \
            double sq[STAT_LANES] = {0}, squares = 0;                                      \
            int64_t k = 0;                                                                 \
            for (; k + STAT_LANES <= len; k += STAT_LANES)                                 \
                for (int j = 0; j < STAT_LANES; j++)                                       \
                    sq[j] += (double)x[k + j] * (double)x[k + j];                          \
            for (int j = 0; j < STAT_LANES; j++)                                           \
                squares += sq[j];                                                          \
            for (; k < len; k++)                                                           \
                squares += (double)x[k] * (double)x[k];                                    \
            T s = (T)(1.0 / sqrt(squares / (double)len + job->eps));                       \
            for (int64_t base = 0; base < len; base += ps)                                 \
                for (int64_t j = 0; j < ps; j++)                                           \
                    o[base + j] = sc ? x[base + j] * s * sc[j] : x[base + j] * s;          \
        }                                                                                  \
    }

DEFINE_ROW_STATS(f32, float)
DEFINE_ROW_STATS(f64, double)
DEFINE_RMS_ROWS(f32, float)
DEFINE_RMS_ROWS(f64, double)
DEFINE_LAYER_ROWS(f32, float)
DEFINE_LAYER_ROWS(f64, double)
DEFINE_CHANNEL_ROWS(f32, float)
DEFINE_CHANNEL_ROWS(f64, double)

rt_range_fn rt_norm__layer_rows(rt_type type) {
    return type == RT_F32 ? layer_rows__f32 : layer_rows__f64;
}

rt_range_fn rt_norm__rms_rows(rt_type type) {
    return type == RT_F32 ? rms_rows__f32 : rms_rows__f64;
}

rt_range_fn rt_norm__channel_rows(rt_type type) {
    return type == RT_F32 ? channel_rows__f32 : channel_rows__f64;
}
