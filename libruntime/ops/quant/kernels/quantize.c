/* quantize.c: quantize_linear's and dequantize_linear's loops between float32 or float64 and
 * every integer type of RT_QUANT_TYPES, and dynamic_quantize_linear's float32 range. Elements
 * are walked in runs along x's inner dimension (x as [outer, length, inner] around the axis),
 * where a parameter's index is fixed (per tensor, per axis) or advances with the element
 * (blocked). */
#include "ops/quant/quant.h"

typedef rt_quant_layout qlayout; /* quant.h */
typedef rt_quant_param qparam;
typedef rt_quant_run_fn qrun_fn;
typedef rt_quant_linear_job qjob;

/* Index of the parameter of element (o, a, i) and its step along i. */
static void param_index(const qlayout *l, const qparam *p, int64_t o, int64_t a, int64_t i,
                        int64_t *index, int64_t *step) {
    if (p->single) {
        *index = 0, *step = 0;
    } else if (l->block == 0) {
        *index = a, *step = 0;
    } else {
        *index = (o * l->blocks + a / l->block) * l->inner + i, *step = 1;
    }
}

/* y = saturate(rint(x / s) + z), the division in x's type (as numpy computes it). */
#define DEFINE_QUANTIZE(sfx, T, RINT, OT)                                                 \
    static void quantize__##sfx(const void *xv, const void *sv, int64_t ss, const void *zv, \
                                int64_t zs, void *yv, int64_t n, int64_t lo, int64_t hi) { \
        const T *x = xv, *s = sv;                                                         \
        const OT *z = zv;                                                                 \
        OT *y = yv;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                 \
            int64_t zp = z ? (int64_t)z[i * zs] : 0;                                      \
            y[i] = (OT)rt_quant__saturate((double)RINT(x[i] / s[i * ss]), zp, lo, hi);     \
        }                                                                                 \
    }

/* y = (x - z) * s, with x first rounded to float32 and the rest in float64, then rounded to
 * the output type once: the ONNX reference's arithmetic for every x type. */
#define DEFINE_DEQUANTIZE(sfx, T, XT)                                                     \
    static void dequantize__##sfx(const void *xv, const void *sv, int64_t ss, const void *zv, \
                                  int64_t zs, void *yv, int64_t n, int64_t lo, int64_t hi) { \
        const XT *x = xv, *z = zv;                                                        \
        const T *s = sv;                                                                  \
        T *y = yv;                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                 \
            double zp = z ? (double)z[i * zs] : 0.0;                                      \
            y[i] = (T)(((double)(float)x[i] - zp) * (double)s[i * ss]);                   \
        }                                                                                 \
    }

#define DEFINE_QUANT_TYPES(sfx, T, RINT)                  \
    DEFINE_QUANTIZE(sfx##_i8, T, RINT, int8_t)            \
    DEFINE_QUANTIZE(sfx##_u8, T, RINT, uint8_t)           \
    DEFINE_QUANTIZE(sfx##_i16, T, RINT, int16_t)          \
    DEFINE_QUANTIZE(sfx##_u16, T, RINT, uint16_t)         \
    DEFINE_QUANTIZE(sfx##_i32, T, RINT, int32_t)          \
    DEFINE_DEQUANTIZE(sfx##_i8, T, int8_t)                \
    DEFINE_DEQUANTIZE(sfx##_u8, T, uint8_t)               \
    DEFINE_DEQUANTIZE(sfx##_i16, T, int16_t)              \
    DEFINE_DEQUANTIZE(sfx##_u16, T, uint16_t)             \
    DEFINE_DEQUANTIZE(sfx##_i32, T, int32_t)
DEFINE_QUANT_TYPES(f32, float, rintf)
DEFINE_QUANT_TYPES(f64, double, rint)

/* The kernel for a float type and an integer type. */
qrun_fn rt_quant__linear_kernel(bool quantize, rt_type float_type, rt_type int_type) {
    static const qrun_fn table[2][2][5] = {
        {{quantize__f32_i8, quantize__f32_u8, quantize__f32_i16, quantize__f32_u16,
          quantize__f32_i32},
         {quantize__f64_i8, quantize__f64_u8, quantize__f64_i16, quantize__f64_u16,
          quantize__f64_i32}},
        {{dequantize__f32_i8, dequantize__f32_u8, dequantize__f32_i16, dequantize__f32_u16,
          dequantize__f32_i32},
         {dequantize__f64_i8, dequantize__f64_u8, dequantize__f64_i16, dequantize__f64_u16,
          dequantize__f64_i32}},
    };
    int f = float_type == RT_F64;
    switch (int_type) {
    case RT_I8: return table[!quantize][f][0];
    case RT_U8: return table[!quantize][f][1];
    case RT_I16: return table[!quantize][f][2];
    case RT_U16: return table[!quantize][f][3];
    case RT_I32: return table[!quantize][f][4];
    default: return NULL;
    }
}

/* Elements [begin, end) of x in runs that stay inside one (outer, axis) row. */
void rt_quant__linear_runs(void *arg, size_t begin, size_t end) {
    const qjob *job = arg;
    const qlayout *l = &job->layout;
    for (int64_t pos = (int64_t)begin; pos < (int64_t)end;) {
        int64_t row = pos / l->inner, i = pos % l->inner;
        int64_t o = row / l->length, a = row % l->length;
        int64_t n = l->inner - i < (int64_t)end - pos ? l->inner - i : (int64_t)end - pos;
        int64_t si, ss, zi, zs;
        param_index(l, &job->scale, o, a, i, &si, &ss);
        param_index(l, &job->zero, o, a, i, &zi, &zs);
        const char *z = job->zero.data ? (const char *)job->zero.data + zi * job->z_size : NULL;
        job->kernel(job->x + pos * job->x_size, (const char *)job->scale.data + si * job->s_size,
                    ss, z, zs, job->y + pos * job->y_size, n, job->lo, job->hi);
        pos += n;
    }
}

/* The range of x widened to include 0; NaN elements are skipped. */
void rt_quant__min_max_f32(const float *x, int64_t n, float *lo, float *hi) {
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    *lo = mn, *hi = mx;
}
