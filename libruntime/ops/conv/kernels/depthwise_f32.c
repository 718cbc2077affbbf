/* kernels/depthwise_f32.c: float32 convolution with one input channel per output channel.
 *
 * A thread takes one (image, channel) plane at a time. In general it copies the plane into a
 * padded, stride-phase-split buffer (kernels/padded_f32.c), a few rows ahead of the outputs reading
 * them, so they are read back from L1. Every tap of every output row then reads a contiguous
 * run of that buffer, so padding costs nothing, strided convolutions vectorise like
 * unit-stride ones, and each output vector (8 columns) sums all its taps in a register before
 * one store. With AVX-512 or AVX2, 3x3 kernels with stride 1 or 2 (MobileNet's) skip the
 * copy: they read the plane itself with masked loads at its edges and make the taps by
 * shifting and permuting loaded vectors. Relu and Clip are applied to the sums before the
 * store; other activations run on each finished group of rows. */
#include <stdatomic.h>
#include <string.h>

#include "core/lane_mask.h"
#include "core/multiversion.h"
#include "core/threadpool.h"
#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

/* Plain target attributes, not clones: the fuzzing build (RT_NO_MULTIVERSION) keeps them. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_DEPTHWISE 1
#endif

#define MAX_STRIDE 4
#define MAX_TAPS 64 /* kernel_h * kernel_w */

bool rt_conv__depthwise_fits(const conv_dims *d) {
    rt_conv_padded p;
    return d->channels / d->groups == 1 && d->stride[1] >= 1 && d->stride[1] <= MAX_STRIDE &&
           d->kernel_h * d->kernel_w <= MAX_TAPS && rt_conv__padded_layout(d, &p);
}

size_t rt_conv__depthwise_scratch_bytes(const conv_dims *d, int32_t threads) {
    rt_conv_padded p;
    if (!rt_conv__padded_layout(d, &p))
        return 0;
    return (size_t)(threads > 0 ? threads : 1) * (size_t)p.plane_floats * sizeof(float);
}

typedef struct depthwise_job depthwise_job;

/* Output rows [oh, oh + rows) (rows 1 to the job's step_rows) of one plane, from its padded
 * buffer. */
typedef void (*depthwise_rows_fn)(const depthwise_job *job, const float *buf, const float *w,
                                  float b, int64_t oh, int64_t rows, float *dst);

struct depthwise_job {
    const conv_dims *d;
    conv_dims padded_dims; /* d, or d with stride[1] 1: the buffer is not phase-split */
    const float *x, *w, *bias;
    const rt_activation *act;
    const float *clamp; /* the activation as {lo, hi} for the blocks to apply, or NULL */
    float clamp_values[2];
    float *out, *scratch;
    rt_conv_padded layout;
    int64_t tap_offset[MAX_TAPS]; /* split_rows': from an output row's first window row */
    depthwise_rows_fn rows_fn;
    int64_t step_rows; /* output rows per rows_fn call */
    int32_t pair_index[3][16]; /* k3_pair_rows with stride 2: each tap's permute */
    uint16_t pair_keep[3];     /* and its lanes inside the image */
    bool reads_x;      /* rows_fn reads the input plane itself, not a padded copy */
    int64_t planes, planes_per_claim;
    atomic_llong next_plane;
};

/* Eight floats; memcpy in and out of it compiles to unaligned vector loads and stores. */
typedef float vec8 __attribute__((vector_size(32)));
typedef int32_t mask8 __attribute__((vector_size(32)));

/* Clip's scalar form, v < lo ? lo : v > hi ? hi : v (NaN kept), lane by lane, in place (a
 * vector argument or result would change the ABI of the non-AVX clone). */
static inline __attribute__((always_inline)) void clamp8(vec8 *v, const vec8 *lo,
                                                         const vec8 *hi) {
    mask8 below = *v < *lo, above = *v > *hi;
    mask8 bits = ((mask8)*v & ~below) | ((mask8)*lo & below);
    *v = (vec8)((bits & ~above) | ((mask8)*hi & above));
}

/* Output rows `rows` (1 or 2) x 32 columns from `window` (the first row's window, the next
 * `row_step` floats further): four vectors per row and tap, so one weight broadcast serves 64
 * columns and eight independent sums hide the FMA latency. A partial block (`cols` < 32) is
 * summed whole, its reads staying inside the padded plane, and only its columns are kept. */
static inline __attribute__((always_inline)) void depthwise_block(
    const float *window, int64_t row_step, const int64_t *tap_offset, const float *w,
    int64_t taps, float b, int64_t rows, float *dst, int64_t dst_stride, int64_t cols,
    const float *clamp) {
    vec8 a0 = {b, b, b, b, b, b, b, b}, a1 = a0, a2 = a0, a3 = a0;
    vec8 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t t = 0; t < taps; t++) {
        const float *src = window + tap_offset[t];
        vec8 x0, x1, x2, x3;
        memcpy(&x0, src, sizeof x0);
        memcpy(&x1, src + 8, sizeof x1);
        memcpy(&x2, src + 16, sizeof x2);
        memcpy(&x3, src + 24, sizeof x3);
        a0 += w[t] * x0;
        a1 += w[t] * x1;
        a2 += w[t] * x2;
        a3 += w[t] * x3;
        if (rows == 2) {
            src += row_step;
            memcpy(&x0, src, sizeof x0);
            memcpy(&x1, src + 8, sizeof x1);
            memcpy(&x2, src + 16, sizeof x2);
            memcpy(&x3, src + 24, sizeof x3);
            b0 += w[t] * x0;
            b1 += w[t] * x1;
            b2 += w[t] * x2;
            b3 += w[t] * x3;
        }
    }
    if (clamp != NULL) {
        vec8 lo = {clamp[0], clamp[0], clamp[0], clamp[0], clamp[0], clamp[0], clamp[0],
                   clamp[0]};
        vec8 hi = {clamp[1], clamp[1], clamp[1], clamp[1], clamp[1], clamp[1], clamp[1],
                   clamp[1]};
        clamp8(&a0, &lo, &hi), clamp8(&a1, &lo, &hi), clamp8(&a2, &lo, &hi);
        clamp8(&a3, &lo, &hi), clamp8(&b0, &lo, &hi), clamp8(&b1, &lo, &hi);
        clamp8(&b2, &lo, &hi), clamp8(&b3, &lo, &hi);
    }
    if (cols == 32) {
        memcpy(dst, &a0, sizeof a0);
        memcpy(dst + 8, &a1, sizeof a1);
        memcpy(dst + 16, &a2, sizeof a2);
        memcpy(dst + 24, &a3, sizeof a3);
        if (rows == 2) {
            dst += dst_stride;
            memcpy(dst, &b0, sizeof b0);
            memcpy(dst + 8, &b1, sizeof b1);
            memcpy(dst + 16, &b2, sizeof b2);
            memcpy(dst + 24, &b3, sizeof b3);
        }
        return;
    }
    vec8 block[2][4] = {{a0, a1, a2, a3}, {b0, b1, b2, b3}};
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + r * dst_stride, block[r], (size_t)cols * sizeof(float));
}

/* The phase-split buffer: 32 columns at a time through depthwise_block. */
RT_MULTIVERSION static void split_rows(const depthwise_job *job, const float *buf,
                                       const float *w, float b, int64_t oh, int64_t rows,
                                       float *dst) {
    const conv_dims *d = job->d;
    int64_t taps = d->kernel_h * d->kernel_w, row_step = d->stride[0] * job->layout.row_floats;
    for (int64_t ow = 0; ow < d->out_w; ow += 32) {
        const float *window = buf + oh * row_step + ow;
        int64_t cols = d->out_w - ow < 32 ? d->out_w - ow : 32;
        /* Two calls, so each inlined copy has a constant row count. */
        if (rows == 2)
            depthwise_block(window, row_step, job->tap_offset, w, taps, b, 2, dst + ow,
                            d->out_w, cols, job->clamp);
        else
            depthwise_block(window, row_step, job->tap_offset, w, taps, b, 1, dst + ow,
                            d->out_w, cols, job->clamp);
    }
}

/* The thread body: each slot claims planes and has job->rows_fn compute them step_rows rows
 * at a time, padding each plane into the slot's buffer a few rows ahead of the outputs first
 * unless rows_fn reads the plane itself. */
static void depthwise_slots(void *arg, size_t begin, size_t end) {
    depthwise_job *job = arg;
    const conv_dims *d = job->d;
    int64_t group_out = d->out_channels / d->groups, taps = d->kernel_h * d->kernel_w;
    for (size_t slot = begin; slot < end; slot++) {
        float *buf = job->scratch + slot * job->layout.plane_floats;
        bool zeroed = false;
        for (int64_t plane = 0, claimed_end = 0;; plane++) {
            if (plane == claimed_end) {
                plane = atomic_fetch_add(&job->next_plane, job->planes_per_claim);
                claimed_end = plane + job->planes_per_claim;
            }
            if (plane >= job->planes)
                break;
            int64_t n = plane / d->out_channels, o = plane % d->out_channels;
            const float *x = job->x + (n * d->channels + o / group_out) * d->height * d->width;
            if (!zeroed && !job->reads_x)
                rt_conv__zero_padding(&job->padded_dims, &job->layout, buf);
            zeroed = true;
            int64_t filled = 0; /* padded rows [0, filled) hold this plane */
            const float *w = job->w + o * taps;
            float b = job->bias != NULL ? job->bias[o] : 0.0f;
            float *out = job->out + plane * d->out_h * d->out_w;
            for (int64_t oh = 0; oh < d->out_h; oh += job->step_rows) {
                int64_t rows = d->out_h - oh < job->step_rows ? d->out_h - oh : job->step_rows;
                /* Pad the rows these outputs read just before reading them, so they are
                 * still in L1 (a whole padded plane often is not). */
                int64_t need = (oh + rows - 1) * d->stride[0] +
                               (d->kernel_h - 1) * d->dilation[0] + 1;
                if (need > filled && !job->reads_x) {
                    rt_conv__fill_padded_rows(&job->padded_dims, &job->layout, x, buf, filled,
                                              need);
                    filled = need;
                }
                float *dst = out + oh * d->out_w;
                job->rows_fn(job, job->reads_x ? x : buf, w, b, oh, rows, dst);
                if (job->clamp == NULL)
                    rt_activation__apply(job->act, dst, rows * d->out_w);
            }
        }
    }
}

#ifdef HAVE_X86_DEPTHWISE
#define AVX512 __attribute__((target("avx512f")))

/* Rows x 32 sums of a block into output rows `dst_stride` floats apart, the first `cols`
 * columns of each (cut at the row's end), clamped first when asked: max and min return their
 * second operand when either is NaN, so NaN is kept. */
static inline __attribute__((always_inline)) AVX512 void store_block(
    __m512 acc[4][2], int64_t rows, float *dst, int64_t dst_stride, int64_t cols,
    const float *clamp) {
    const __mmask16 m0 = rt_lane_mask__16(0, cols), m1 = rt_lane_mask__16(0, cols - 16);
    const __m512 lo = _mm512_set1_ps(clamp != NULL ? clamp[0] : 0.0f);
    const __m512 hi = _mm512_set1_ps(clamp != NULL ? clamp[1] : 0.0f);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t v = 0; v < 2; v++) {
            __m512 y = acc[r][v];
            if (clamp != NULL)
                y = _mm512_min_ps(hi, _mm512_max_ps(lo, y));
            _mm512_mask_storeu_ps(dst + r * dst_stride + 16 * v, v == 0 ? m0 : m1, y);
        }
}

/* Horizontal stride 2, dilation 1, with AVX-512: the plane is padded without the phase split
 * (a plain row copy), and each tap's every-other column is picked out of two loaded vectors by
 * one two-source permute, so no pass splits the phases in memory (which, for stride 2, cost as
 * much as the arithmetic). Outputs (rows 1 or 2) x 32 columns: four independent sums. */
static inline __attribute__((always_inline)) AVX512 void stride2_block(
    const float *window, int64_t row_step, int64_t kh_step, int64_t kernel_h, int64_t kernel_w,
    const float *w, float b, int64_t rows, float *dst, int64_t dst_stride, int64_t cols,
    const float *clamp) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    __m512 a0 = _mm512_set1_ps(b), a1 = a0, c0 = a0, c1 = a0;
    for (int64_t kh = 0; kh < kernel_h; kh++) {
        const float *row = window + kh * kh_step;
        for (int64_t kw = 0; kw < kernel_w; kw++) {
            const float *src = row + (kw & ~(int64_t)1);
            const __m512i pick = kw & 1 ? odd : even;
            const __m512 wv = _mm512_set1_ps(w[kh * kernel_w + kw]);
            a0 = _mm512_fmadd_ps(wv, _mm512_permutex2var_ps(_mm512_loadu_ps(src), pick,
                                                            _mm512_loadu_ps(src + 16)), a0);
            a1 = _mm512_fmadd_ps(wv, _mm512_permutex2var_ps(_mm512_loadu_ps(src + 32), pick,
                                                            _mm512_loadu_ps(src + 48)), a1);
            if (rows == 2) {
                src += row_step;
                c0 = _mm512_fmadd_ps(wv, _mm512_permutex2var_ps(_mm512_loadu_ps(src), pick,
                                                                _mm512_loadu_ps(src + 16)), c0);
                c1 = _mm512_fmadd_ps(wv, _mm512_permutex2var_ps(_mm512_loadu_ps(src + 32), pick,
                                                                _mm512_loadu_ps(src + 48)), c1);
            }
        }
    }
    __m512 acc[4][2] = {{a0, a1}, {c0, c1}};
    store_block(acc, rows, dst, dst_stride, cols, clamp);
}

static AVX512 void stride2_rows(const depthwise_job *job, const float *buf, const float *w,
                                float b, int64_t oh, int64_t rows, float *dst) {
    const conv_dims *d = job->d;
    int64_t row_step = d->stride[0] * job->layout.row_floats;
    int64_t kh_step = d->dilation[0] * job->layout.row_floats;
    for (int64_t ow = 0; ow < d->out_w; ow += 32) {
        const float *window = buf + oh * row_step + 2 * ow;
        int64_t cols = d->out_w - ow < 32 ? d->out_w - ow : 32;
        if (rows == 2)
            stride2_block(window, row_step, kh_step, d->kernel_h, d->kernel_w, w, b, 2,
                          dst + ow, d->out_w, cols, job->clamp);
        else
            stride2_block(window, row_step, kh_step, d->kernel_h, d->kernel_w, w, b, 1,
                          dst + ow, d->out_w, cols, job->clamp);
    }
}

/* The unsplit plane must hold a block's reads: a block of the last row reads up to 64 floats
 * past 2 * (its first output) plus the kernel's width, past the row's end into the plane's
 * slack, which is made that long (the scratch holds a split plane, which is larger). */
static bool stride2_fits(const conv_dims *d, rt_conv_padded *unsplit_layout) {
    rt_conv_padded split;
    if (d->stride[1] != 2 || d->dilation[1] != 1 || !rt_gemm__f32_avx512() ||
        !rt_conv__padded_layout(d, &split))
        return false;
    conv_dims unsplit = *d;
    unsplit.stride[1] = 1;
    if (!rt_conv__padded_layout(&unsplit, unsplit_layout))
        return false;
    int64_t reach = 2 * ((d->out_w - 1) / 32 * 32) + (d->kernel_w - 1) + 64;
    int64_t floats = unsplit_layout->rows * unsplit_layout->row_floats;
    if (reach > unsplit_layout->row_floats)
        floats += reach - unsplit_layout->row_floats;
    floats = (floats + 15) / 16 * 16;
    if (floats > split.plane_floats)
        return false;
    if (floats > unsplit_layout->plane_floats)
        unsplit_layout->plane_floats = floats;
    return true;
}

/* 3x3, stride 1 or 2, dilation 1 with AVX-512, straight from x (no padded copy): up to
 * four output rows x 32 columns at a time. Each input row a block reads is loaded once, the
 * lanes outside the image masked to zero (the padding; a masked lane is never read), and its
 * taps are made from those vectors in registers: for stride 1, kw = 1, 2 are the vectors
 * shifted by one and two lanes (valignd); for stride 2, output column j reads input columns
 * 2j, 2j + 1, 2j + 2, so the taps are the even lanes, the odd lanes and the even lanes
 * shifted by one (vpermt2ps, valignd). Each input row feeds every output row that reads it.
 * That is 9 multiply-adds per output vector against under 3 loads, where reading each tap of
 * a padded copy took 9 loads, half of them split across cache lines, after the copy itself. */

/* The taps kw = 0, 1, 2 of the block's `vectors` (a constant: 2, or 1 for a last block of 16
 * columns or fewer) 16-column output vectors, from the input row at `row` (its first column
 * read) with `in_image` masking its 16-float vectors. */
static inline __attribute__((always_inline)) AVX512 void k3_taps(const float *row,
                                                                 const __mmask16 *in_image,
                                                                 int64_t stride, int vectors,
                                                                 __m512 tap[2][3]) {
    if (stride == 1) {
        __m512i x0 = _mm512_castps_si512(_mm512_maskz_loadu_ps(in_image[0], row));
        __m512i x1 = _mm512_castps_si512(_mm512_maskz_loadu_ps(in_image[1], row + 16));
        tap[0][0] = _mm512_castsi512_ps(x0);
        tap[0][1] = _mm512_castsi512_ps(_mm512_alignr_epi32(x1, x0, 1));
        tap[0][2] = _mm512_castsi512_ps(_mm512_alignr_epi32(x1, x0, 2));
        if (vectors == 1)
            return;
        __m512i x2 = _mm512_castps_si512(_mm512_maskz_loadu_ps(in_image[2], row + 32));
        tap[1][0] = _mm512_castsi512_ps(x1);
        tap[1][1] = _mm512_castsi512_ps(_mm512_alignr_epi32(x2, x1, 1));
        tap[1][2] = _mm512_castsi512_ps(_mm512_alignr_epi32(x2, x1, 2));
        return;
    }
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    __m512 x0 = _mm512_maskz_loadu_ps(in_image[0], row);
    __m512 x1 = _mm512_maskz_loadu_ps(in_image[1], row + 16);
    __m512 x2 = _mm512_maskz_loadu_ps(vectors == 1 ? in_image[2] & 1 : in_image[2], row + 32);
    __m512 e0 = _mm512_permutex2var_ps(x0, even, x1);
    tap[0][0] = e0;
    tap[0][1] = _mm512_permutex2var_ps(x0, odd, x1);
    if (vectors == 1) { /* the last tap's column 32 is x2's first */
        tap[0][2] = _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(x2), _mm512_castps_si512(e0), 1));
        return;
    }
    __m512 x3 = _mm512_maskz_loadu_ps(in_image[3], row + 48);
    __m512 x4 = _mm512_maskz_loadu_ps(in_image[4] & 1, row + 64); /* one column is read */
    __m512 e1 = _mm512_permutex2var_ps(x2, even, x3);
    tap[0][2] = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(e1), _mm512_castps_si512(e0), 1));
    tap[1][0] = e1;
    tap[1][1] = _mm512_permutex2var_ps(x2, odd, x3);
    tap[1][2] = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(x4), _mm512_castps_si512(e1), 1));
}

static inline __attribute__((always_inline)) AVX512 void k3_block(
    const depthwise_job *job, const float *x, const __m512 *wv, float b, int64_t oh,
    int64_t rows, int64_t ow, float *dst, int64_t stride, int vectors) {
    const conv_dims *d = job->d;
    int64_t col0 = stride * ow - d->pad[1];
    __mmask16 in_image[5];
    /* Columns [0, width) of the image (the same as rt_lane_mask__16 of those bounds, written
     * out: through the helper the stride-2 layers measured 3 to 5% slower). */
    for (int64_t v = 0; v < (stride == 1 ? 3 : 5); v++) {
        int64_t first = col0 + 16 * v, lo = first < 0 ? -first : 0;
        int64_t hi = d->width - first > 16 ? 16 : d->width - first;
        in_image[v] = hi <= lo ? 0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
    }
    __m512 acc[4][2];
    for (int64_t r = 0; r < rows; r++)
        acc[r][0] = acc[r][1] = _mm512_set1_ps(b);
#pragma GCC unroll 9
    for (int64_t ir = 0; ir < stride * (rows - 1) + 3; ir++) {
        int64_t ih = stride * oh + ir - d->pad[0];
        if (ih < 0 || ih >= d->height) /* a padding row: zeros add nothing */
            continue;
        __m512 tap[2][3];
        k3_taps(x + ih * d->width + col0, in_image, stride, vectors, tap);
#pragma GCC unroll 4
        for (int64_t r = 0; r < rows; r++) {
            int64_t kh = ir - stride * r; /* output row r reads input row ir at kernel row kh */
            if (kh < 0 || kh > 2)
                continue;
#pragma GCC unroll 2
            for (int64_t v = 0; v < vectors; v++)
#pragma GCC unroll 3
                for (int64_t kw = 0; kw < 3; kw++)
                    acc[r][v] = _mm512_fmadd_ps(wv[kh * 3 + kw], tap[v][kw], acc[r][v]);
        }
    }
    /* With one vector, the second's columns are masked off. */
    store_block(acc, rows, dst + ow, d->out_w, d->out_w - ow < 32 ? d->out_w - ow : 32,
                job->clamp);
}

/* block(...) with the row count (1 to 4) a constant in each inlined copy, so its loops
 * unroll: the AVX-512 and AVX2 blocks take the same arguments. */
#define K3_CONSTANT_ROWS(block, job, x, w, b, oh, rows, ow, dst, stride, vectors)               \
    switch (rows) {                                                                            \
    case 4: block(job, x, w, b, oh, 4, ow, dst, stride, vectors); break;                       \
    case 3: block(job, x, w, b, oh, 3, ow, dst, stride, vectors); break;                       \
    case 2: block(job, x, w, b, oh, 2, ow, dst, stride, vectors); break;                       \
    default: block(job, x, w, b, oh, 1, ow, dst, stride, vectors);                             \
    }

static inline __attribute__((always_inline)) AVX512 void k3_block_rows(
    const depthwise_job *job, const float *x, const __m512 *wv, float b, int64_t oh,
    int64_t rows, int64_t ow, float *dst, int64_t stride, int vectors) {
    K3_CONSTANT_ROWS(k3_block, job, x, wv, b, oh, rows, ow, dst, stride, vectors)
}

/* `x` here is the input plane itself. */
static inline __attribute__((always_inline)) AVX512 void k3_rows(
    const depthwise_job *job, const float *x, const float *w, float b, int64_t oh,
    int64_t rows, float *dst, int64_t stride) {
    __m512 wv[9];
    for (int64_t t = 0; t < 9; t++)
        wv[t] = _mm512_set1_ps(w[t]);
    for (int64_t ow = 0; ow < job->d->out_w; ow += 32) {
        /* A last block of 16 columns or fewer (a row of 14, 28 or 112) computes one vector. */
        if (job->d->out_w - ow > 16)
            k3_block_rows(job, x, wv, b, oh, rows, ow, dst, stride, 2);
        else
            k3_block_rows(job, x, wv, b, oh, rows, ow, dst, stride, 1);
    }
}

static AVX512 void k3s1_rows(const depthwise_job *job, const float *x, const float *w,
                             float b, int64_t oh, int64_t rows, float *dst) {
    k3_rows(job, x, w, b, oh, rows, dst, 1);
}

static AVX512 void k3s2_rows(const depthwise_job *job, const float *x, const float *w,
                             float b, int64_t oh, int64_t rows, float *dst) {
    k3_rows(job, x, w, b, oh, rows, dst, 2);
}

/* 3x3 on planes at most PAIR_MAX_WIDTH outputs wide, straight from x: two output rows to a
 * vector, each in 8 lanes, where a row to a vector left 9 of 16 lanes idle on a 7x7 plane
 * (MobileNet's last layers). An input row's columns sit in lanes 0 to 7 (or 8 to 15) with the
 * lanes past the image zero. With stride 1 and one column of padding each side, the taps
 * kw = 0, 2 are the vector shifted up and down one lane: a row's zero lane 7 (it is at most 7
 * wide) is the padding both ways, and the other row's lanes never mix in. With stride 2, each
 * tap is one two-source permute of two loaded rows (16 columns each), its lanes left of the
 * image zeroed. Output lanes 7 and 15 are computed and never stored. A small plane is done in
 * one call, and with stride 1 a pair of input rows serves two output pairs (kh = 2, then 0).
 * MobileNet v1's layers alone at 1 thread, old/new: 512 channels of 14x14 with stride 2, 40/28
 * us; 1024 of 7x7, 52/45 (onnxruntime: 21 and 31 inside the model). */
#define PAIR_MAX_WIDTH 7

static inline __attribute__((always_inline)) AVX512 void k3_pair_rows(
    const depthwise_job *job, const float *x, const float *w, float b, int64_t oh,
    int64_t rows, float *dst, int64_t stride) {
    const conv_dims *d = job->d;
    const __m512 zero = _mm512_setzero_ps();
    const __mmask16 in_row = (__mmask16)((1u << (d->width < 16 ? d->width : 16)) - 1);
    const __mmask16 out_row = (__mmask16)((1u << d->out_w) - 1);
    const __mmask16 two_rows = (__mmask16)((1u << (2 * d->width < 16 ? 2 * d->width : 16)) - 1);
    __m512 wv[9];
    for (int t = 0; t < 9; t++)
        wv[t] = _mm512_set1_ps(w[t]);
    __m512i pick[3];
    for (int kw = 0; kw < 3 && stride == 2; kw++)
        pick[kw] = _mm512_loadu_si512(job->pair_index[kw]);
    const __m512 lo = _mm512_set1_ps(job->clamp != NULL ? job->clamp[0] : 0.0f);
    const __m512 hi = _mm512_set1_ps(job->clamp != NULL ? job->clamp[1] : 0.0f);
    __m512 kept[3] = {zero, zero, zero}; /* stride 1: the taps of input rows kept_row and on */
    int64_t kept_row = INT64_MIN;
    for (int64_t r = 0; r < rows; r += 2) {
        bool pair = rows - r > 1;
        __m512 acc = _mm512_set1_ps(b);
        for (int64_t kh = 0; kh < 3; kh++) {
            int64_t ih0 = stride * (oh + r) - d->pad[0] + kh, ih1 = ih0 + stride;
            bool have0 = ih0 >= 0 && ih0 < d->height, have1 = pair && ih1 >= 0 && ih1 < d->height;
            if (!have0 && !have1) /* padding rows: zeros add nothing */
                continue;
            __m512 tap[3];
            if (stride == 1 && ih0 == kept_row) { /* the last pair's kh = 2 rows */
                tap[0] = kept[0], tap[1] = kept[1], tap[2] = kept[2];
            } else if (stride == 1) {
                /* Rows ih0 and ih1 = ih0 + 1 are 2 * width floats in a row: one load, spread
                 * to lanes 0 to 7 and 8 to 15. */
                __m512 v;
                if (have0 && have1)
                    v = _mm512_maskz_expand_ps((__mmask16)(in_row | in_row << 8),
                                               _mm512_maskz_loadu_ps(two_rows, x + ih0 * d->width));
                else if (have0)
                    v = _mm512_maskz_loadu_ps(in_row, x + ih0 * d->width);
                else
                    v = _mm512_maskz_expand_ps((__mmask16)(in_row << 8),
                                               _mm512_maskz_loadu_ps(in_row, x + ih1 * d->width));
                __m512i vi = _mm512_castps_si512(v), zi = _mm512_castps_si512(zero);
                tap[0] = _mm512_castsi512_ps(_mm512_alignr_epi32(vi, zi, 15));
                tap[1] = v;
                tap[2] = _mm512_castsi512_ps(_mm512_alignr_epi32(zi, vi, 1));
                if (kh == 2 && pair) {
                    kept[0] = tap[0], kept[1] = tap[1], kept[2] = tap[2];
                    kept_row = ih0;
                }
            } else {
                __m512 a = have0 ? _mm512_maskz_loadu_ps(in_row, x + ih0 * d->width) : zero;
                __m512 c = have1 ? _mm512_maskz_loadu_ps(in_row, x + ih1 * d->width) : zero;
                for (int kw = 0; kw < 3; kw++)
                    tap[kw] = _mm512_maskz_permutex2var_ps(job->pair_keep[kw], a, pick[kw], c);
            }
            for (int kw = 0; kw < 3; kw++)
                acc = _mm512_fmadd_ps(wv[kh * 3 + kw], tap[kw], acc);
        }
        if (job->clamp != NULL) /* max and min return their second operand for a NaN */
            acc = _mm512_min_ps(hi, _mm512_max_ps(lo, acc));
        float *row = dst + r * d->out_w;
        _mm512_mask_storeu_ps(row, out_row, acc);
        if (pair) /* lanes 8 on to the next row, which starts out_w floats on */
            _mm512_mask_storeu_ps(row + d->out_w - 8, (__mmask16)(out_row << 8), acc);
    }
}

/* k3_pair_rows' permutes for stride 2: output column j, tap kw reads input column
 * 2j - pad + kw, in lane j from the first row and 8 + j from the second. */
static void pair_permutes(depthwise_job *job) {
    for (int kw = 0; kw < 3; kw++) {
        job->pair_keep[kw] = 0;
        for (int j = 0; j < 8; j++) {
            int64_t col = 2 * j - job->d->pad[1] + kw;
            bool inside = col >= 0 && col <= 15;
            job->pair_index[kw][j] = inside ? (int32_t)col : 0;
            job->pair_index[kw][8 + j] = inside ? (int32_t)(16 + col) : 0;
            if (inside)
                job->pair_keep[kw] |= (uint16_t)(0x101u << j);
        }
    }
}

static AVX512 void k3s1_pair_rows(const depthwise_job *job, const float *x, const float *w,
                                  float b, int64_t oh, int64_t rows, float *dst) {
    k3_pair_rows(job, x, w, b, oh, rows, dst, 1);
}

static AVX512 void k3s2_pair_rows(const depthwise_job *job, const float *x, const float *w,
                                  float b, int64_t oh, int64_t rows, float *dst) {
    k3_pair_rows(job, x, w, b, oh, rows, dst, 2);
}

/* ---- 3x3, stride 1 or 2, with AVX2 + FMA ------------------------------------------------ */

#define AVX2 __attribute__((target("avx2,fma")))

/* The AVX-512 blocks' scheme in 8-float vectors: straight from x, up to four output rows by
 * 16 columns a block, each input row loaded once per block and its taps fed to every output
 * row that reads it. Taps come from unaligned loads (stride 1: columns c, c + 1, c + 2) or
 * from two-source shuffles of them (stride 2); in a block at the plane's left or right edge,
 * masked loads read only the image's columns and give zeros for the padding. */

/* The lanes of 8 floats from column c on that are inside [0, width): at a block on the
 * plane's edge, its loads read only those (masked lanes are zero and never read). */
static inline __attribute__((always_inline)) AVX2 __m256i in_image__avx2(int64_t c,
                                                                          int64_t width) {
    const __m256i col = _mm256_add_epi32(_mm256_set1_epi32((int32_t)c),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)width), col));
}

/* Each vector's loads, from these columns (past the vector's first input column) of every
 * input row it reads, by stride: stride 1 the taps themselves, stride 2 the two pairs of 8
 * that the even and odd lanes come from. */
static const int64_t k3_load_offsets__avx2[2][4] = {{0, 1, 2, 0}, {0, 8, 2, 10}};

/* The loads of vector v at (v, l): bit 4v + l of a block's `masked` set. */
#define LOAD_BIT(v, l) (1u << (4 * (v) + (l)))

/* Output rows [oh, oh + rows) by `vectors` (1 or 2, a constant) 8-column vectors, from
 * columns first[0] and first[1]. With stride 2 the taps of output columns j come from
 * even or odd lanes: vshufps takes them within 128-bit halves, which leaves each sum's
 * columns in the order 0, 1, 4, 5, 2, 3, 6, 7, put right by one vpermpd before the store.
 * The loads in `masked` (a constant) read only the image's columns and give zeros for the
 * padding; only those hold a mask, so the sums keep their registers. */
static inline __attribute__((always_inline)) AVX2 void k3_block_body__avx2(
    const depthwise_job *job, const float *x, const float *w, float b, int64_t oh,
    int64_t rows, const int64_t first[2], float *dst, int64_t stride, int vectors,
    unsigned masked) {
    const conv_dims *d = job->d;
    /* Locals: read through d, each would be loaded again after every store. */
    const int64_t width = d->width, height = d->height, pad_top = d->pad[0];
    const int64_t out_w = d->out_w;
    const int64_t col[2] = {stride * first[0] - d->pad[1], stride * first[1] - d->pad[1]};
    const int64_t(*offsets)[4] = k3_load_offsets__avx2;
    __m256i mask[2][4];
    for (int v = 0; v < vectors; v++)
        for (int l = 0; l < 4; l++)
            if (masked & LOAD_BIT(v, l))
                mask[v][l] = in_image__avx2(col[v] + offsets[stride - 1][l], width);
    __m256 acc[4][2];
    for (int64_t r = 0; r < rows; r++)
        acc[r][0] = acc[r][1] = _mm256_set1_ps(b);
#pragma GCC unroll 9
    for (int64_t ir = 0; ir < stride * (rows - 1) + 3; ir++) {
        int64_t ih = stride * oh + ir - pad_top;
        if (ih < 0 || ih >= height) /* a padding row: zeros add nothing */
            continue;
        const float *row = x + ih * width;
        /* A vector's taps go into every row's sums before the next vector's are loaded:
         * fewer registers live. */
#pragma GCC unroll 2
        for (int v = 0; v < vectors; v++) {
            const float *src = row + col[v];
            __m256 tap[3], in[4];
            for (int l = 0; l < (stride == 1 ? 3 : 4); l++)
                in[l] = masked & LOAD_BIT(v, l)
                            ? _mm256_maskload_ps(src + offsets[stride - 1][l], mask[v][l])
                            : _mm256_loadu_ps(src + offsets[stride - 1][l]);
            if (stride == 1) {
                tap[0] = in[0], tap[1] = in[1], tap[2] = in[2];
            } else {
                tap[0] = _mm256_shuffle_ps(in[0], in[1], 0x88); /* columns c + 2j */
                tap[1] = _mm256_shuffle_ps(in[0], in[1], 0xdd); /* c + 2j + 1 */
                tap[2] = _mm256_shuffle_ps(in[2], in[3], 0x88); /* c + 2j + 2 */
            }
#pragma GCC unroll 4
            for (int64_t r = 0; r < rows; r++) {
                int64_t kh = ir - stride * r; /* output row r reads input row ir at row kh */
                if (kh < 0 || kh > 2)
                    continue;
#pragma GCC unroll 3
                for (int64_t kw = 0; kw < 3; kw++)
                    acc[r][v] = _mm256_fmadd_ps(_mm256_broadcast_ss(w + kh * 3 + kw), tap[kw],
                                                acc[r][v]);
            }
        }
    }
    const __m256 lo = _mm256_set1_ps(job->clamp != NULL ? job->clamp[0] : 0.0f);
    const __m256 hi = _mm256_set1_ps(job->clamp != NULL ? job->clamp[1] : 0.0f);
    for (int64_t r = 0; r < rows; r++)
        for (int v = 0; v < vectors; v++) {
            int64_t cols = out_w - first[v] < 8 ? out_w - first[v] : 8;
            __m256 y = acc[r][v];
            if (stride == 2)
                y = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(y), 0xd8));
            if (job->clamp != NULL) /* max and min return their second operand for a NaN */
                y = _mm256_min_ps(hi, _mm256_max_ps(lo, y));
            float *out = dst + r * out_w + first[v];
            if (cols == 8)
                _mm256_storeu_ps(out, y);
            else /* a plane narrower than a vector */
                _mm256_maskstore_ps(out, _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)cols),
                                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5,
                                                                              6, 7)),
                                    y);
        }
}

/* The block of `vectors` vectors from column ow, the second no further right than the plane's
 * last 8 columns (it then overlaps the first: both store the same sums). The loads that reach
 * past the plane's left or right edge are masked: a copy of the body masks none, one the
 * first and last loads (all a plane with one column of padding needs at either edge), one
 * every load (wider padding, narrow planes). */
static inline __attribute__((always_inline)) AVX2 void k3_block__avx2(
    const depthwise_job *job, const float *x, const float *w, float b, int64_t oh,
    int64_t rows, int64_t ow, float *dst, int64_t stride, int vectors) {
    const int64_t out_w = job->d->out_w, width = job->d->width;
    int64_t first[2] = {ow, ow + 8 < out_w - 8 ? ow + 8 : out_w - 8};
    const int64_t(*offsets)[4] = k3_load_offsets__avx2;
    const int loads = stride == 1 ? 3 : 4;
    unsigned need = 0;
    for (int v = 0; v < vectors; v++)
        for (int l = 0; l < loads; l++) {
            int64_t c = stride * first[v] - job->d->pad[1] + offsets[stride - 1][l];
            if (c < 0 || c + 8 > width)
                need |= LOAD_BIT(v, l);
        }
    /* A mask that passes every lane (the other end's, in a block at one edge) costs only the
     * masked load: one copy serves both ends, where one for each end doubled the code. */
    const unsigned ends = LOAD_BIT(0, 0) | LOAD_BIT(vectors - 1, loads - 1);
    if (need == 0)
        k3_block_body__avx2(job, x, w, b, oh, rows, first, dst, stride, vectors, 0);
    else if ((need & ~ends) == 0)
        k3_block_body__avx2(job, x, w, b, oh, rows, first, dst, stride, vectors, ends);
    else
        k3_block_body__avx2(job, x, w, b, oh, rows, first, dst, stride, vectors, 0xff);
}

static inline __attribute__((always_inline)) AVX2 void k3_block_rows__avx2(
    const depthwise_job *job, const float *x, const float *w, float b, int64_t oh,
    int64_t rows, int64_t ow, float *dst, int64_t stride, int vectors) {
    K3_CONSTANT_ROWS(k3_block__avx2, job, x, w, b, oh, rows, ow, dst, stride, vectors)
}

/* Output rows [oh, oh + rows), four at a time: a whole plane per call (job->step_rows). */
static inline __attribute__((always_inline)) AVX2 void k3_rows__avx2(
    const depthwise_job *job, const float *x, const float *w, float b, int64_t oh,
    int64_t rows, float *dst, int64_t stride) {
    const conv_dims *d = job->d;
    for (int64_t r = oh; r < oh + rows; r += 4) {
        int64_t step = oh + rows - r < 4 ? oh + rows - r : 4;
        float *out = dst + (r - oh) * d->out_w;
        int64_t next_rows = oh + rows - (r + 4);
        /* Blocks of 16 columns; a last one of 9 to 15 overlaps itself (k3_block__avx2), one
         * of 8 or fewer is a vector over the plane's last 8 columns. */
        for (int64_t ow = 0; ow < d->out_w; ow += 16) {
            /* The same block of the next four rows, ahead of its stores: a layer's output is
             * often cold (gemm.h). */
            if (next_rows > 0)
                rt_gemm__f32_prefetch_c(out + 4 * d->out_w + ow, d->out_w,
                                        next_rows < 4 ? next_rows : 4,
                                        d->out_w - ow < 16 ? d->out_w - ow : 16);
            if (d->out_w - ow > 8)
                k3_block_rows__avx2(job, x, w, b, r, step, ow, out, stride, 2);
            else
                k3_block_rows__avx2(job, x, w, b, r, step, d->out_w >= 8 ? d->out_w - 8 : 0,
                                    out, stride, 1);
        }
    }
}

static AVX2 void k3s1_rows__avx2(const depthwise_job *job, const float *x, const float *w,
                                 float b, int64_t oh, int64_t rows, float *dst) {
    k3_rows__avx2(job, x, w, b, oh, rows, dst, 1);
}

static AVX2 void k3s2_rows__avx2(const depthwise_job *job, const float *x, const float *w,
                                 float b, int64_t oh, int64_t rows, float *dst) {
    k3_rows__avx2(job, x, w, b, oh, rows, dst, 2);
}

/* 3x3 kernels, dilation 1, the same stride both ways: 1 or 2. */
static depthwise_rows_fn k3_rows_for(const conv_dims *d) {
    if (d->kernel_h != 3 || d->kernel_w != 3 || d->dilation[0] != 1 || d->dilation[1] != 1 ||
        d->stride[0] != d->stride[1] || (d->stride[0] != 1 && d->stride[0] != 2))
        return NULL;
    if (rt_gemm__f32_avx512()) {
        if (d->out_w <= PAIR_MAX_WIDTH) {
            if (d->stride[0] == 1 && d->pad[1] == 1 && d->out_w == d->width)
                return k3s1_pair_rows;
            if (d->stride[0] == 2)
                return k3s2_pair_rows;
        }
        return d->stride[0] == 1 ? k3s1_rows : k3s2_rows;
    }
    /* The AVX2 blocks compare columns as 32-bit lanes. */
    if (strcmp(rt_gemm__f32_variant(), "avx2_fma") == 0 && d->width < (1 << 28) &&
        d->pad[1] < (1 << 28))
        return d->stride[0] == 1 ? k3s1_rows__avx2 : k3s2_rows__avx2;
    return NULL;
}
#endif

void rt_conv__depthwise_f32(const conv_dims *d, const float *x, const float *w,
                            const float *bias, const rt_activation *act, float *out,
                            void *scratch, int32_t threads) {
    depthwise_job job = {.d = d, .padded_dims = *d, .x = x, .w = w, .bias = bias, .act = act,
                         .out = out, .scratch = scratch, .rows_fn = split_rows, .step_rows = 2,
                         .planes = d->batch * d->out_channels};
    rt_conv__padded_layout(d, &job.layout);
    if (rt_gemm__f32_clamp_of(act, job.clamp_values))
        job.clamp = job.clamp_values;
    for (int64_t kh = 0; kh < d->kernel_h; kh++)
        for (int64_t kw = 0; kw < d->kernel_w; kw++)
            job.tap_offset[kh * d->kernel_w + kw] = rt_conv__tap_offset(d, &job.layout, kh, kw);
    atomic_init(&job.next_plane, 0);
    int64_t plane_work = rt_op__mul_sat(rt_op__mul_sat(d->out_h, d->out_w),
                                        d->kernel_h * d->kernel_w);
    /* Threads beyond one per ~32k multiply-adds of work would only add overhead. */
    int64_t useful = rt_op__mul_sat(plane_work, job.planes) / 32768 + 1;
    if (threads > useful)
        threads = (int32_t)useful;
    if (threads < 1)
        threads = 1;
    /* Small planes are claimed several at a time: a claim per 28x28 plane made the counter's
     * cache line bounce between the cores more often than the planes took to compute (no gain
     * from a second thread). About 64k multiply-adds a claim, and four claims per thread. */
    job.planes_per_claim = 65536 / (plane_work > 0 ? plane_work : 1);
    if (job.planes_per_claim > job.planes / (4 * (int64_t)threads))
        job.planes_per_claim = job.planes / (4 * (int64_t)threads);
    if (job.planes_per_claim < 1)
        job.planes_per_claim = 1;
#ifdef HAVE_X86_DEPTHWISE
    rt_conv_padded unsplit;
    depthwise_rows_fn k3 = k3_rows_for(d);
    if (k3 != NULL) {
        job.rows_fn = k3;
        job.step_rows = 4;
        job.reads_x = true;
        if (k3 == k3s2_pair_rows)
            pair_permutes(&job);
        if (k3 == k3s1_pair_rows || k3 == k3s2_pair_rows || k3 == k3s1_rows__avx2 ||
            k3 == k3s2_rows__avx2)
            job.step_rows = d->out_h + 1; /* a plane whole, in one call */
    } else if (stride2_fits(d, &unsplit)) { /* its plane is no larger than the split one */
        job.layout = unsplit;
        job.padded_dims.stride[1] = 1;
        job.rows_fn = stride2_rows;
    }
#endif
    rt_parallel__for(threads, (size_t)threads, 1, depthwise_slots, &job);
}
