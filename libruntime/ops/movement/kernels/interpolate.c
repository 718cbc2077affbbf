/* interpolate.c: resize's linear and cubic interpolation in float32 and float64, from the
 * per-dimension tap tables the operator builds (resize.c): an output element sums the products
 * of its dimensions' taps, in float64. A row of the last dimension multiplies out the other
 * dimensions' taps once and reuses them along the row. */
#include "ops/movement/resize.h"
#include "ops/op_util.h"

/* Out element at multi-index o: sum over the active dimensions' taps. */
static double interpolate(const rt_resize_job *job, const int64_t *o, const char *x, bool is_f32) {
    int32_t rank = job->x->rank;
    int64_t fixed = 0;
    for (int32_t d = 0; d < rank; d++) {
        if (job->outside[d][o[d]])
            return job->extrapolation;
        if (job->taps[d] == 1)
            fixed += job->offsets[d][o[d]];
    }
    int64_t k[RT_MAX_RANK] = {0};
    double acc = 0;
    for (;;) {
        int64_t offset = fixed;
        double w = 1;
        for (int32_t i = 0; i < job->num_active; i++) {
            int32_t d = job->active[i];
            int64_t at = o[d] * job->taps[d] + k[i];
            offset += job->offsets[d][at];
            w *= job->weights[d][at];
        }
        acc += w * (is_f32 ? (double)((const float *)(const void *)x)[offset]
                           : ((const double *)(const void *)x)[offset]);
        int32_t i = job->num_active - 1;
        for (; i >= 0; i--) {
            if (++k[i] < job->taps[job->active[i]])
                break;
            k[i] = 0;
        }
        if (i < 0)
            return acc;
    }
}

/* The taps of every dimension but the last, multiplied out for one row of the output. */
#define ROW_COMBOS 256

typedef struct row_taps {
    int64_t offset[ROW_COMBOS];
    double weight[ROW_COMBOS];
    int64_t count;
} row_taps;

/* false when the row needs more than ROW_COMBOS combinations; *outside for a row that some
 * outer dimension extrapolates. */
static bool row_combos(const rt_resize_job *job, const int64_t *o, row_taps *t, bool *outside) {
    t->count = 1;
    t->offset[0] = 0;
    t->weight[0] = 1;
    *outside = false;
    for (int32_t d = 0; d < job->x->rank - 1; d++) {
        if (job->outside[d][o[d]]) {
            *outside = true;
            return true;
        }
        int64_t n = job->taps[d];
        const int64_t *off = job->offsets[d] + o[d] * n;
        const double *w = job->weights[d] + o[d] * n;
        if (n == 1) {
            for (int64_t c = 0; c < t->count; c++)
                t->offset[c] += off[0];
            continue;
        }
        if (t->count * n > ROW_COMBOS)
            return false;
        /* Expand in place from the end: entry c becomes entries c * n ... c * n + n - 1. */
        for (int64_t c = t->count - 1; c >= 0; c--) {
            int64_t base = t->offset[c];
            double weight = t->weight[c];
            for (int64_t k = n - 1; k >= 0; k--) {
                t->offset[c * n + k] = base + off[k];
                t->weight[c * n + k] = weight * w[k];
            }
        }
        t->count *= n;
    }
    return true;
}

/* One output row of the last dimension: the row's combinations times the last one's taps. */
#define DEFINE_RESIZE_ROW(sfx, T)                                                            \
    static void resize_row__##sfx(const rt_resize_job *job, const row_taps *t, T *dst) {       \
        int32_t last = job->x->rank - 1;                                                      \
        int64_t width = job->out->sizes[last], n = job->taps[last];                             \
        const T *x = job->x->data;                                                            \
        for (int64_t j = 0; j < width; j++) {                                               \
            if (job->outside[last][j]) {                                                    \
                dst[j] = (T)job->extrapolation;                                               \
                continue;                                                                   \
            }                                                                               \
            const int64_t *off = job->offsets[last] + j * n;                                \
            const double *w = job->weights[last] + j * n;                                   \
            double acc = 0;                                                                 \
            for (int64_t c = 0; c < t->count; c++) {                                        \
                const T *src = x + t->offset[c];                                            \
                double part = 0;                                                            \
                for (int64_t k = 0; k < n; k++)                                             \
                    part += w[k] * (double)src[off[k]];                                     \
                acc += t->weight[c] * part;                                                 \
            }                                                                               \
            dst[j] = (T)acc;                                                                \
        }                                                                                   \
    }
DEFINE_RESIZE_ROW(f32, float)
DEFINE_RESIZE_ROW(f64, double)

/* Rows of the output's last dimension. */
static void resize_range(void *arg, size_t begin, size_t end) {
    const rt_resize_job *job = arg;
    const rt_tensor_value *out = job->out;
    int32_t last = out->rank - 1;
    int64_t width = out->sizes[last];
    bool is_f32 = out->type == RT_F32;
    row_taps taps;
    for (size_t row = begin; row < end; row++) {
        int64_t o[RT_MAX_RANK], rest = (int64_t)row;
        for (int32_t d = last - 1; d >= 0; d--) {
            o[d] = rest % out->sizes[d];
            rest /= out->sizes[d];
        }
        bool outside;
        size_t first = row * (size_t)width;
        if (row_combos(job, o, &taps, &outside) && !outside) {
            if (is_f32)
                resize_row__f32(job, &taps, (float *)out->data + first);
            else
                resize_row__f64(job, &taps, (double *)out->data + first);
            continue;
        }
        /* An extrapolated row, or too many combinations: element by element. */
        for (int64_t j = 0; j < width; j++) {
            o[last] = j;
            double v = interpolate(job, o, job->x->data, is_f32);
            if (is_f32)
                ((float *)out->data)[first + (size_t)j] = (float)v;
            else
                ((double *)out->data)[first + (size_t)j] = v;
        }
    }
}

void rt_resize__interpolate(const rt_resize_job *job, int32_t threads) {
    int64_t work = 1;
    for (int32_t i = 0; i < job->num_active; i++)
        work = rt_op__mul_sat(work, job->taps[job->active[i]]);
    int64_t width = job->out->sizes[job->out->rank - 1];
    rt_parallel__for(threads, (size_t)(rt_tensor__numel(job->out) / width),
                     rt_op__grain(rt_op__mul_sat(work * 2, width)), resize_range,
                     (void *)job);
}
