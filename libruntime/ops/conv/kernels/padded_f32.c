/* kernels/padded_f32.c: input planes copied once into a zero-padded buffer split by horizontal
 * stride phase (phase r of padded row i holds the padded columns stride * j + r), which the
 * direct convolution kernels read as contiguous runs for every tap. */
#include <string.h>

#include "core/lane_mask.h"
#include "core/multiversion.h"
#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_FILL 1
#endif

#define MAX_PLANE_BYTES ((size_t)64 << 20)

bool rt_conv__padded_layout(const conv_dims *d, rt_conv_padded *out) {
    int64_t s = d->stride[1], width, floats;
    if (s < 1 || !rt_op__add(d->height, d->pad[0], &out->rows) ||
        !rt_op__add(out->rows, d->pad[2], &out->rows) ||
        !rt_op__add(d->width, d->pad[1], &width) || !rt_op__add(width, d->pad[3], &width))
        return false;
    out->phase_len = ((width + s - 1) / s + 8 + 7) / 8 * 8;
    out->row_floats = s * out->phase_len;
    if (!rt_op__mul(out->rows, out->row_floats, &floats) ||
        (uint64_t)floats > MAX_PLANE_BYTES / sizeof(float))
        return false;
    /* 32 floats of slack: a kernel may read a whole 32-column block past the last row's end
     * (into lanes it discards). Rounded up to keep every plane 64-byte aligned. */
    out->plane_floats = (floats + RT_CONV_PADDED_SLACK + 15) / 16 * 16;
    return true;
}

int64_t rt_conv__tap_offset(const conv_dims *d, const rt_conv_padded *p, int64_t kh,
                            int64_t kw) {
    int64_t s = d->stride[1], col = kw * d->dilation[1];
    return kh * d->dilation[0] * p->row_floats + col % s * p->phase_len + col / s;
}

/* Stride 2, the common case: padded column pc = iw + pad goes to phase pc % 2, index pc / 2.
 * The middle runs as one loop over column pairs, which the compiler vectorises (a strided run
 * per phase would be scalar). */
static inline void split_pairs(const float *src, int64_t width, int64_t pad, float *even,
                               float *odd) {
    int64_t pc = pad, end = pad + width;
    if (pc % 2 == 1 && pc < end) {
        odd[pc / 2] = src[pc - pad];
        pc++;
    }
    int64_t j0 = pc / 2, pairs = (end - pc) / 2;
    const float *from = src + (pc - pad);
    float *e = even + j0, *o = odd + j0;
    for (int64_t j = 0; j < pairs; j++) {
        e[j] = from[2 * j];
        o[j] = from[2 * j + 1];
    }
    pc += 2 * pairs;
    if (pc < end)
        even[pc / 2] = src[pc - pad];
}

/* Input row src into padded row `row`, its data places only. */
static inline void copy_row(const conv_dims *d, const rt_conv_padded *p, const float *src,
                            float *row) {
    int64_t s = d->stride[1], len = p->phase_len;
    if (s == 1) {
        memcpy(row + d->pad[1], src, (size_t)d->width * sizeof(float));
        return;
    }
    if (s == 2) {
        split_pairs(src, d->width, d->pad[1], row, row + len);
        return;
    }
    /* Phase r takes the columns iw with (iw + pad_left) % s == r: a strided run each. */
    for (int64_t r = 0; r < s; r++) {
        int64_t first = ((r - d->pad[1]) % s + s) % s; /* the first such iw */
        float *dst = row + r * len + (first + d->pad[1]) / s;
        for (int64_t k = 0, iw = first; iw < d->width; k++, iw += s)
            dst[k] = src[iw];
    }
}

/* Where each phase of a padded row holds data: phase r holds padded column s * j + r, data
 * for j in [first[r], end[r]) (those columns in [pad_left, pad_left + width)), zeros before
 * and after. The same for every row that holds an image row, so found once per fill. */
#define MAX_PHASES 16
typedef struct phase_runs {
    int64_t first[MAX_PHASES], end[MAX_PHASES];
} phase_runs;

static void find_phase_runs(const conv_dims *d, phase_runs *runs) {
    int64_t s = d->stride[1];
    for (int64_t r = 0; r < s && r < MAX_PHASES; r++) {
        int64_t first = rt_op__ceil_div(d->pad[1] - r, s);
        int64_t end = rt_op__floor_div(d->pad[1] + d->width - 1 - r, s) + 1;
        runs->first[r] = first < 0 ? 0 : first;
        runs->end[r] = end < runs->first[r] ? runs->first[r] : end;
    }
}

/* Everything of padded row i but its data places. */
static void zero_row(const conv_dims *d, const rt_conv_padded *p, const phase_runs *runs,
                     int64_t i, float *row) {
    int64_t s = d->stride[1], len = p->phase_len;
    if (i < d->pad[0] || i >= d->pad[0] + d->height || s > MAX_PHASES) {
        memset(row, 0, (size_t)p->row_floats * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < s; r++) {
        float *phase = row + r * len;
        for (int64_t j = 0; j < runs->first[r]; j++)
            phase[j] = 0.0f;
        for (int64_t j = runs->end[r]; j < len; j++)
            phase[j] = 0.0f;
    }
}

RT_MULTIVERSION void rt_conv__fill_padded_rows(const conv_dims *d, const rt_conv_padded *p,
                                               const float *x, float *buf, int64_t row0,
                                               int64_t row1) {
    int64_t ih0 = row0 - d->pad[0] > 0 ? row0 - d->pad[0] : 0;
    int64_t ih1 = row1 - d->pad[0] < d->height ? row1 - d->pad[0] : d->height;
    for (int64_t ih = ih0; ih < ih1; ih++)
        copy_row(d, p, x + ih * d->width, buf + (ih + d->pad[0]) * p->row_floats);
}

#ifdef HAVE_AVX512_FILL
/* Stride 1: a padded row is x's row shifted right by pad_left, zeros around it. Each 16-float
 * piece of it is one load masked to the lanes that hold x and one store: no call, no branch
 * per row end (a memset and a memcpy of a few floats each cost more than the data). */
__attribute__((target("avx512f"))) static void fill_band_stride1__avx512(
    const conv_dims *d, const rt_conv_padded *p, const float *x, float *band, int64_t row0,
    int64_t row1) {
    int64_t left = d->pad[1], width = d->width, len = p->row_floats;
    for (int64_t i = row0; i < row1; i++) {
        float *row = band + (i - row0) * len;
        int64_t ih = i - d->pad[0];
        bool data = ih >= 0 && ih < d->height;
        const float *src = x + (data ? ih : 0) * width - left; /* src[c]: padded column c */
        for (int64_t c = 0; c < len; c += 16) {
            __mmask16 take = data ? rt_lane_mask__16(left - c, left + width - c) : 0;
            _mm512_storeu_ps(row + c, _mm512_maskz_loadu_ps(take, src + c));
        }
    }
}
#endif

RT_MULTIVERSION void rt_conv__fill_padded_band(const conv_dims *d, const rt_conv_padded *p,
                                               const float *x, float *band, int64_t row0,
                                               int64_t row1) {
#ifdef HAVE_AVX512_FILL
    if (d->stride[1] == 1 && rt_gemm__f32_avx512()) {
        fill_band_stride1__avx512(d, p, x, band, row0, row1);
        memset(band + (row1 - row0) * p->row_floats, 0, RT_CONV_PADDED_SLACK * sizeof(float));
        return;
    }
#endif
    memset(band + (row1 - row0) * p->row_floats, 0, RT_CONV_PADDED_SLACK * sizeof(float));
    phase_runs runs;
    find_phase_runs(d, &runs);
    for (int64_t i = row0; i < row1; i++) {
        float *row = band + (i - row0) * p->row_floats;
        zero_row(d, p, &runs, i, row);
        if (i >= d->pad[0] && i < d->pad[0] + d->height)
            copy_row(d, p, x + (i - d->pad[0]) * d->width, row);
    }
}

void rt_conv__zero_padding(const conv_dims *d, const rt_conv_padded *p, float *buf) {
    phase_runs runs;
    find_phase_runs(d, &runs);
    for (int64_t i = 0; i < p->rows; i++)
        zero_row(d, p, &runs, i, buf + i * p->row_floats);
    int64_t used = p->rows * p->row_floats;
    memset(buf + used, 0, (size_t)(p->plane_floats - used) * sizeof(float));
}

void rt_conv__fill_padded(const conv_dims *d, const rt_conv_padded *p, const float *x,
                          float *buf, bool zero) {
    if (zero)
        rt_conv__zero_padding(d, p, buf);
    rt_conv__fill_padded_rows(d, p, x, buf, 0, p->rows);
}
