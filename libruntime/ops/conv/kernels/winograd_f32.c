/* kernels/winograd_f32.c: 3x3, stride-1 float32 convolution by Winograd's minimal filtering
 * F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
 *
 * Each 4x4 block of outputs (a tile) reads the 6x6 input patch under it. With the patch d of
 * one input channel and the kernel g of one (output, input) channel pair transformed to
 * V = B^T d B and U = G g G^T (both 6x6), the tile is A^T (sum over input channels of U . V) A,
 * with . the elementwise product: 36 multiplications per tile and channel pair where the
 * direct convolution takes 144. For each of the 36 points of the 6x6 transform, the sum over
 * input channels is a GEMM, [out channels, channels] x [channels, tiles], which runs on the
 * GEMM's own micro-kernels with U packed once at load as their A.
 *
 * Tiles are taken NR at a time, a strip (raster order over the image's tiles), the width of
 * the micro-kernel's B panel. A thread gathers a strip's patches of each channel, transforms
 * them into the 36 B panels, runs the 36 GEMMs into a buffer of its own and transforms that
 * into the output tiles, so nothing larger than a strip's panels leaves its cache. With as
 * many strips as threads, each thread's strip is a run of two blocks of output channels
 * (rt_parallel__runs): a thread done with its own strip takes the other block of a strip
 * whose thread has fallen behind, once that strip's inputs are transformed.
 *
 * The transforms cost accuracy: outputs are within about 3e-6 of the sum of |w| |x| over
 * their window, against a few times 1e-7 for the direct convolution, so only float32
 * convolutions where the saving is large take this path (RT_CONV_WINOGRAD=0 turns it off).
 * A tile whose outputs are not all finite is recomputed directly, so a NaN or infinity in
 * the input reaches only the outputs whose window holds it. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/lane_mask.h"
#include "core/multiversion.h"
#include "core/threadpool.h"
#include "ops/conv/conv.h"
#include "ops/matmul/gemm/gemm.h"
#include "ops/op_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_GATHERS 1
#endif

#define TILE 4    /* outputs per tile side */
#define PATCH 6   /* inputs per patch side: TILE + 3 - 1 */
#define POINTS 36 /* PATCH * PATCH */
#define MIN_CHANNELS 8
#define MAX_STRIP_BYTES ((size_t)64 << 20)
#define MIN_THREAD_WORK 32768 /* multiply-adds: below this a thread costs more than it saves */
/* Lanes the AVX-512 gather writes at once: a patch row is over-written by up to this many
 * lanes past a segment's end (the next segment, or nothing, then writes them). */
#define GATHER_LANES 8

typedef struct wino_layout {
    int64_t mr, nr, kc;
    int64_t tiles_w, tiles;    /* per image */
    int64_t strips;            /* per image: tiles / NR, rounded up */
    int64_t k_pad;             /* output channels rounded up to MR */
    int64_t lane_pad;          /* floats per patch row: NR and the gather's spill */
    int64_t v_point, m_point;  /* floats from one point's B panel (GEMM result) to the next */
    size_t weights_floats;     /* U of one point, packed */
    size_t patch_floats;       /* POINTS * lane_pad: one channel's patches */
    size_t v_floats, m_floats; /* a strip's 36 B panels and 36 GEMM results */
    size_t worker_floats;      /* a thread's own buffers: patches and output tiles */
    size_t strip_floats;       /* a strip's: V and M (64-byte multiples all) */
} wino_layout;

static size_t round16(size_t floats) { return (floats + 15) / 16 * 16; }

static bool layout_of(const conv_dims *d, wino_layout *l) {
    rt_gemm__f32_tile(&l->mr, &l->nr, &l->kc);
    int64_t tiles_h = (d->out_h + TILE - 1) / TILE;
    l->tiles_w = (d->out_w + TILE - 1) / TILE;
    l->k_pad = (d->out_channels + l->mr - 1) / l->mr * l->mr;
    l->lane_pad = l->nr + GATHER_LANES;
    /* A point's panel is followed by a cache line of padding: panels a power of two apart
     * would put the 36 rows a transform reads at once into the same L1 set. */
    int64_t v, m, strip;
    if (!rt_op__mul(tiles_h, l->tiles_w, &l->tiles) ||
        !rt_op__mul(d->channels, l->nr, &l->v_point) ||
        !rt_op__mul(l->k_pad, l->nr, &l->m_point) ||
        !rt_op__add(l->v_point, 16, &l->v_point) || !rt_op__add(l->m_point, 16, &l->m_point) ||
        !rt_op__mul(l->v_point, POINTS, &v) || !rt_op__mul(l->m_point, POINTS, &m) ||
        !rt_op__add(v, m, &strip) || (uint64_t)strip > MAX_STRIP_BYTES / sizeof(float))
        return false;
    l->strips = (l->tiles + l->nr - 1) / l->nr;
    l->weights_floats = rt_gemm__f32_packed_a_floats(d->out_channels, d->channels);
    l->patch_floats = round16((size_t)(POINTS * l->lane_pad));
    l->v_floats = round16((size_t)v);
    l->m_floats = round16((size_t)m);
    /* The output tiles, and slack for the AVX-512 scatter's 8-lane loads from a row's last
     * lanes past its end. */
    l->worker_floats = l->patch_floats + round16(TILE * TILE * (size_t)l->nr + 8);
    l->strip_floats = l->v_floats + l->m_floats;
    return true;
}

/* The shapes it takes, with their layout in l. */
static bool fits(const conv_dims *d, wino_layout *l) {
    return d->groups == 1 && d->kernel_h == 3 && d->kernel_w == 3 && d->stride[0] == 1 &&
           d->stride[1] == 1 && d->dilation[0] == 1 && d->dilation[1] == 1 &&
           d->channels >= MIN_CHANNELS && d->out_channels >= MIN_CHANNELS && d->out_h >= 1 &&
           d->out_w >= 1 && layout_of(d, l);
}

bool rt_conv__winograd_pays(const conv_dims *d) {
    wino_layout l;
    if (!fits(d, &l))
        return false;
    /* Multiplications per (output, input) channel pair: 36 per tile computed, every lane of
     * a strip counted, against 9 per output; the transforms, gathers and scatters add about
     * 10 per tile for each channel in and out, relative to that (fitted to measurements on
     * Zen 4, from 8 to 512 channels). Against the direct convolution near the GEMM's peak,
     * Winograd must save a third; against im2col (rows too narrow for the direct kernel),
     * which copies every input nine times, any saving will do. */
    double computed = (double)l.strips * (double)l.nr * POINTS;
    double cost = computed * (1.0 + 10.0 / (double)d->channels + 10.0 / (double)d->out_channels);
    double direct = 9.0 * (double)d->out_h * (double)d->out_w;
    return rt_conv__direct_fits(d, NULL) ? 3.0 * cost <= 2.0 * direct : cost <= direct;
}

/* ---- weights ----------------------------------------------------------------------------- */

size_t rt_conv__winograd_weights_floats(const conv_dims *d) {
    wino_layout l;
    if (!layout_of(d, &l) || l.weights_floats > SIZE_MAX / sizeof(float) / POINTS)
        return 0;
    return POINTS * l.weights_floats;
}

/* u = G g G^T for one 3x3 kernel, in double, so U is rounded once, to float, at the end. */
static void transform_kernel(const float *g, double u[POINTS]) {
    static const double G[PATCH][3] = {
        {1.0 / 4, 0, 0},
        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
        {1.0 / 24, 1.0 / 12, 1.0 / 6},
        {1.0 / 24, -1.0 / 12, 1.0 / 6},
        {0, 0, 1},
    };
    double t[PATCH][3]; /* G g */
    for (int i = 0; i < PATCH; i++)
        for (int j = 0; j < 3; j++)
            t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
    for (int i = 0; i < PATCH; i++)
        for (int j = 0; j < PATCH; j++)
            u[i * PATCH + j] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
}

bool rt_conv__winograd_weights(const conv_dims *d, const float *w, float *dst) {
    wino_layout l;
    int64_t pair_count;
    if (!layout_of(d, &l) || !rt_op__mul(d->out_channels, d->channels, &pair_count) ||
        (uint64_t)pair_count > SIZE_MAX / sizeof(float) / POINTS)
        return false;
    size_t pairs = (size_t)pair_count;
    float *matrices = malloc(pairs * POINTS * sizeof(float)); /* [point][out][in] */
    if (matrices == NULL)
        return false;
    for (size_t pair = 0; pair < pairs; pair++) {
        double u[POINTS];
        transform_kernel(w + pair * 9, u);
        for (size_t point = 0; point < POINTS; point++)
            matrices[point * pairs + pair] = (float)u[point];
    }
    for (int point = 0; point < POINTS; point++) {
        rt_gemm_f32_args gemm = {
            .m = d->out_channels, .k = d->channels,
            .a = matrices + (size_t)point * pairs, .a_row_stride = d->channels,
            .a_col_stride = 1,
        };
        rt_gemm__f32_pack_a(&gemm, dst + (size_t)point * l.weights_floats);
    }
    free(matrices);
    return true;
}

size_t rt_conv__winograd_scratch_bytes(const conv_dims *d, int32_t threads) {
    wino_layout l;
    if (!layout_of(d, &l))
        return 0;
    /* Each thread's buffers, and a strip's for each strip in flight (one per thread). */
    return (size_t)(threads > 0 ? threads : 1) * (l.worker_floats + l.strip_floats) *
           sizeof(float);
}

/* ---- transforms --------------------------------------------------------------------------- */

/* The 1-D transforms work on LANES floats at once: a vector with GCC and clang (one AVX
 * register in the x86-64-v3 clone), a float elsewhere. Loads and stores are unaligned. */
#if defined(__GNUC__)
typedef float lane_vec __attribute__((vector_size(32), aligned(4), may_alias));
#else
typedef float lane_vec;
#endif
#define LANES ((int64_t)(sizeof(lane_vec) / sizeof(float)))
#define AT(p) (*(lane_vec *)(p))
#define AT_CONST(p) (*(const lane_vec *)(p))

/* Six rows `in` apart at z, through B^T, to six rows `out` apart at o. */
static inline void input_rows(const float *z, int64_t in, float *o, int64_t out) {
    lane_vec z0 = AT_CONST(z), z1 = AT_CONST(z + in), z2 = AT_CONST(z + 2 * in),
             z3 = AT_CONST(z + 3 * in), z4 = AT_CONST(z + 4 * in), z5 = AT_CONST(z + 5 * in);
    lane_vec z4_z2 = z4 - z2, z3_z1 = z3 - z1;
    AT(o) = 4.0f * z0 - 5.0f * z2 + z4;
    AT(o + out) = (z3 + z4) - 4.0f * (z1 + z2);
    AT(o + 2 * out) = (z4 - z3) + 4.0f * (z1 - z2);
    AT(o + 3 * out) = z4_z2 + 2.0f * z3_z1;
    AT(o + 4 * out) = z4_z2 - 2.0f * z3_z1;
    AT(o + 5 * out) = 4.0f * z1 - 5.0f * z3 + z5;
}

/* Six rows `in` apart at m, through A^T, plus bias, to four rows `out` apart at o; each
 * result times zero is added to *check, which so turns NaN once one is not finite. */
static inline void output_rows(const float *m, int64_t in, float *o, int64_t out, float bias,
                               lane_vec *check) {
    lane_vec m0 = AT_CONST(m), m1 = AT_CONST(m + in), m2 = AT_CONST(m + 2 * in),
             m3 = AT_CONST(m + 3 * in), m4 = AT_CONST(m + 4 * in), m5 = AT_CONST(m + 5 * in);
    lane_vec sum12 = m1 + m2, dif12 = m1 - m2, sum34 = m3 + m4, dif34 = m3 - m4;
    lane_vec y0 = bias + (m0 + sum12 + sum34), y1 = bias + (dif12 + 2.0f * dif34),
             y2 = bias + (sum12 + 4.0f * sum34), y3 = bias + (dif12 + 8.0f * dif34 + m5);
    AT(o) = y0;
    AT(o + out) = y1;
    AT(o + 2 * out) = y2;
    AT(o + 3 * out) = y3;
    if (check != NULL)
        *check += ((y0 + y1) + (y2 + y3)) * 0.0f;
}

/* V = B^T d B for `lanes` (a multiple of LANES) patches: d + (r * 6 + s) * in_stride holds
 * element (r, s) of every lane's patch; point (i, j) of every lane goes to
 * v + (i * 6 + j) * out_stride. */
RT_MULTIVERSION static void transform_patches(const float *d, int64_t in_stride, float *v,
                                              int64_t out_stride, int64_t lanes) {
    for (int64_t l = 0; l < lanes; l += LANES) {
        float t[POINTS * LANES]; /* B^T d: (i, s) at (i * 6 + s) * LANES */
        for (int s = 0; s < PATCH; s++)
            input_rows(d + s * in_stride + l, PATCH * in_stride, t + s * LANES, PATCH * LANES);
        for (int i = 0; i < PATCH; i++)
            input_rows(t + i * PATCH * LANES, LANES, v + i * PATCH * out_stride + l, out_stride);
    }
}

/* Y = A^T M A + bias for `lanes` (a multiple of LANES) tiles: m + (i * 6 + j) * in_stride
 * holds point (i, j) of every lane's product; output (a, b) of every lane goes to
 * y + (a * 4 + b) * lanes. False when an output is not finite. */
RT_MULTIVERSION static bool transform_products(const float *m, int64_t in_stride, float bias,
                                               float *y, int64_t lanes) {
    lane_vec nan_if_not_finite = {0}; /* sums y * 0: NaN once a y is infinite or NaN */
    for (int64_t l = 0; l < lanes; l += LANES) {
        float t[TILE * PATCH * LANES]; /* A^T M: (a, j) at (a * 6 + j) * LANES */
        for (int j = 0; j < PATCH; j++)
            output_rows(m + j * in_stride + l, PATCH * in_stride, t + j * LANES, PATCH * LANES,
                        0.0f, NULL);
        for (int a = 0; a < TILE; a++)
            output_rows(t + a * PATCH * LANES, LANES, y + a * TILE * lanes + l, lanes, bias,
                        &nan_if_not_finite);
    }
    float check[LANES];
    memcpy(check, &nan_if_not_finite, sizeof check);
    for (int64_t l = 0; l < LANES; l++)
        if (check[l] != check[l])
            return false;
    return true;
}

/* ---- a strip ------------------------------------------------------------------------------ */

typedef struct wino_job {
    const conv_dims *d;
    const wino_layout *l;
    const float *x, *weights, *bias;
    const float *w; /* as given: for tiles recomputed directly */
    const rt_activation *act;
    float *out;
    float *workers, *strips; /* scratch: each thread's buffers, then each strip's */
    bool avx512, avx2; /* the gathers and scatters to use */
    int64_t items;       /* batch * strips */
    int64_t group;       /* phased: the first strip of the group in flight */
    int64_t group_size;  /* phased: strips in it */
    int64_t units;       /* phased: units of the current phase */
    int phase;
    atomic_llong next;
    int64_t out_units, unit_channels; /* runs: blocks of output channels per strip */
    atomic_int ready[RT_MAX_RUNS]; /* runs: the strip's input panels are transformed */
} wino_job;

/* Patches of `count` tiles of one tile row, from column tile tx, at lanes [0, count) of
 * d (patch row stride `stride`): element (r, s) of tile t reads x's row ty * 4 + r - pad_top,
 * column (tx + t) * 4 + s - pad_left, zero outside the image. */
static void gather_patches(const conv_dims *d, const float *x, int64_t ty, int64_t tx,
                           int64_t count, float *patches, int64_t stride) {
    for (int r = 0; r < PATCH; r++) {
        int64_t iy = ty * TILE + r - d->pad[0];
        bool inside = iy >= 0 && iy < d->height;
        const float *row = x + (inside ? iy : 0) * d->width;
        for (int s = 0; s < PATCH; s++) {
            float *dst = patches + (r * PATCH + s) * stride;
            int64_t ix = tx * TILE + s - d->pad[1];
            for (int64_t t = 0; t < count; t++, ix += TILE)
                dst[t] = inside && ix >= 0 && ix < d->width ? row[ix] : 0.0f;
        }
    }
}

#ifdef HAVE_X86_GATHERS
/* Lanes 8..15 (AVX-512F alone has no float form of this extract). */
__attribute__((target("avx512f"))) static inline __m256 upper_half(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* The same, eight tiles per step: the 34 input floats under eight patches of a row are
 * loaded as two pairs of vectors (columns first + [0, 32) and first + 4 + [0, 30)), masked to
 * the image only where the row ends inside them, and each column s of the eight patches is
 * picked from a pair with one permute. Lanes past `count` are written with what lies there
 * (up to GATHER_LANES - 1 past it). */
__attribute__((target("avx512f"))) static void gather_patches__avx512(
    const conv_dims *d, const float *x, int64_t ty, int64_t tx, int64_t count, float *patches,
    int64_t stride) {
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21,
                                           25, 29);
    const __m512i pick23 = _mm512_add_epi32(pick, _mm512_set1_epi32(2));
    int64_t rows[PATCH]; /* x's row under patch row r, or -1 in the padding */
    for (int r = 0; r < PATCH; r++) {
        int64_t iy = ty * TILE + r - d->pad[0];
        rows[r] = iy >= 0 && iy < d->height ? iy : -1;
    }
    for (int64_t t = 0; t < count; t += GATHER_LANES) {
        int64_t first = (tx + t) * TILE - d->pad[1]; /* x's column under lane 0, s = 0 */
        bool whole = first >= 0 && first + 34 <= d->width; /* no mask needed */
        __mmask16 m_lo = 0xffff, m_hi = 0xffff, m_lo4 = 0xffff, m_hi4 = 0xffff;
        if (!whole) {
            int64_t begin = -first, end = d->width - first; /* offsets inside the row */
            m_lo = rt_lane_mask__16(begin, end);
            m_hi = rt_lane_mask__16(begin - 16, end - 16);
            m_lo4 = rt_lane_mask__16(begin - 4, end - 4);
            m_hi4 = rt_lane_mask__16(begin - 20, end - 20);
        }
        float *dst = patches + t;
        for (int r = 0; r < PATCH; r++, dst += PATCH * stride) {
            __m512 lo = _mm512_setzero_ps(), hi = lo, lo4 = lo, hi4 = lo;
            const float *src = x + rows[r] * d->width + first;
            if (rows[r] >= 0 && whole) {
                lo = _mm512_loadu_ps(src);
                hi = _mm512_loadu_ps(src + 16);
                lo4 = _mm512_loadu_ps(src + 4);
                hi4 = _mm512_maskz_loadu_ps(0x3fff, src + 20); /* columns first + [20, 34) */
            } else if (rows[r] >= 0) {
                lo = _mm512_maskz_loadu_ps(m_lo, src);
                hi = _mm512_maskz_loadu_ps(m_hi, src + 16);
                lo4 = _mm512_maskz_loadu_ps(m_lo4, src + 4);
                hi4 = _mm512_maskz_loadu_ps(m_hi4, src + 20);
            }
            __m512 s01 = _mm512_permutex2var_ps(lo, pick, hi);
            __m512 s23 = _mm512_permutex2var_ps(lo, pick23, hi);
            __m512 s45 = _mm512_permutex2var_ps(lo4, pick, hi4);
            _mm256_storeu_ps(dst + 0 * stride, _mm512_castps512_ps256(s01));
            _mm256_storeu_ps(dst + 1 * stride, upper_half(s01));
            _mm256_storeu_ps(dst + 2 * stride, _mm512_castps512_ps256(s23));
            _mm256_storeu_ps(dst + 3 * stride, upper_half(s23));
            _mm256_storeu_ps(dst + 4 * stride, _mm512_castps512_ps256(s45));
            _mm256_storeu_ps(dst + 5 * stride, upper_half(s45));
        }
    }
}
#endif

#ifdef HAVE_X86_GATHERS
#define AVX2 __attribute__((target("avx2")))

/* Floats [col, col + 4) of row, zero where outside [0, width): a masked load at the row's ends
 * (masked-off lanes are never read). */
static inline __attribute__((always_inline)) AVX2 __m128 quad__avx2(const float *row,
                                                                     int64_t col, int64_t width,
                                                                     bool edge) {
    if (!edge || (col >= 0 && col + 4 <= width))
        return _mm_loadu_ps(row + col);
    const __m128i lane = _mm_add_epi32(_mm_set1_epi32((int32_t)col), _mm_setr_epi32(0, 1, 2, 3));
    __m128i inside = _mm_andnot_si128(_mm_cmpgt_epi32(_mm_setzero_si128(), lane),
                                      _mm_cmpgt_epi32(_mm_set1_epi32((int32_t)width), lane));
    return _mm_maskload_ps(row + col, inside);
}

/* gather_patches, eight tiles per step with AVX2: tile t's patch row holds columns
 * first + 4t + [0, 6), so the quads q_k at first + 4k (k = 0..8) hold its columns 0..3 (q_t)
 * and 4, 5 (q_t+1). Pairing q_k with q_k+4 in one vector's two halves makes every column s a
 * 4x4 transpose within each half. Lanes past `count` are written with what lies there, as
 * with the AVX-512 gather. */
static AVX2 void gather_patches__avx2(const conv_dims *d, const float *x, int64_t ty,
                                      int64_t tx, int64_t count, float *patches,
                                      int64_t stride) {
    const int64_t width = d->width;
    for (int64_t t = 0; t < count; t += GATHER_LANES) {
        int64_t first = (tx + t) * TILE - d->pad[1]; /* x's column under lane 0, s = 0 */
        bool edge = first < 0 || first + 36 > width;
        float *dst = patches + t;
        for (int r = 0; r < PATCH; r++, dst += PATCH * stride) {
            int64_t iy = ty * TILE + r - d->pad[0];
            if (iy < 0 || iy >= d->height) {
                for (int s = 0; s < PATCH; s++)
                    _mm256_storeu_ps(dst + s * stride, _mm256_setzero_ps());
                continue;
            }
            const float *row = x + iy * width;
            __m128 q[9];
            for (int k = 0; k < 9; k++)
                q[k] = quad__avx2(row, first + 4 * k, width, edge);
            __m256 v[5]; /* v[k] = [q_k | q_k+4] */
            for (int k = 0; k < 5; k++)
                v[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(q[k]), q[k + 4], 1);
            __m256 lo01 = _mm256_unpacklo_ps(v[0], v[1]), lo23 = _mm256_unpacklo_ps(v[2], v[3]);
            __m256 hi01 = _mm256_unpackhi_ps(v[0], v[1]), hi23 = _mm256_unpackhi_ps(v[2], v[3]);
            __m256 lo12 = _mm256_unpacklo_ps(v[1], v[2]), lo34 = _mm256_unpacklo_ps(v[3], v[4]);
            _mm256_storeu_ps(dst + 0 * stride, _mm256_shuffle_ps(lo01, lo23, 0x44));
            _mm256_storeu_ps(dst + 1 * stride, _mm256_shuffle_ps(lo01, lo23, 0xee));
            _mm256_storeu_ps(dst + 2 * stride, _mm256_shuffle_ps(hi01, hi23, 0x44));
            _mm256_storeu_ps(dst + 3 * stride, _mm256_shuffle_ps(hi01, hi23, 0xee));
            _mm256_storeu_ps(dst + 4 * stride, _mm256_shuffle_ps(lo12, lo34, 0x44));
            _mm256_storeu_ps(dst + 5 * stride, _mm256_shuffle_ps(lo12, lo34, 0xee));
        }
    }
}
#endif

/* Outputs y ((a * 4 + b) * lanes + lane) of `count` tiles of tile row ty from column tile tx,
 * at lanes [lane0, lane0 + count), into out (one channel's plane), cut at its edges. */
static void scatter_tiles(const conv_dims *d, const float *y, int64_t lanes, int64_t lane0,
                          int64_t ty, int64_t tx, int64_t count, float *out) {
    for (int a = 0; a < TILE && ty * TILE + a < d->out_h; a++) {
        float *row = out + (ty * TILE + a) * d->out_w;
        for (int b = 0; b < TILE; b++) {
            const float *src = y + (a * TILE + b) * lanes + lane0;
            int64_t ox = tx * TILE + b;
            for (int64_t t = 0; t < count && ox < d->out_w; t++, ox += TILE)
                row[ox] = src[t];
        }
    }
}

#ifdef HAVE_X86_GATHERS
/* The same, eight tiles per step: outputs b = 0..3 of a row, read as the eight-float rows the
 * transform stored (a wider load over two of them would wait for both stores to land),
 * interleaved into 32 floats with two permutes and stored, masked only at the row's end
 * (masked stores cost several times as much as plain ones on Zen 4). */
__attribute__((target("avx512f"))) static void scatter_tiles__avx512(
    const conv_dims *d, const float *y, int64_t lanes, int64_t lane0, int64_t ty, int64_t tx,
    int64_t count, float *out) {
    /* Float 4t + b of the 32 comes from lane t of row b: index 8b + t of [y0 y1 | y2 y3]. */
    const __m512i first_half = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3,
                                                 11, 19, 27);
    const __m512i second_half = _mm512_add_epi32(first_half, _mm512_set1_epi32(4));
    for (int a = 0; a < TILE && ty * TILE + a < d->out_h; a++) {
        float *row = out + (ty * TILE + a) * d->out_w;
        const float *src = y + a * TILE * lanes + lane0;
        for (int64_t t = 0; t < count; t += 8) {
            __m512 y01 = _mm512_castpd_ps(_mm512_insertf64x4(
                _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(src + t))),
                _mm256_castps_pd(_mm256_loadu_ps(src + lanes + t)), 1));
            __m512 y23 = _mm512_castpd_ps(_mm512_insertf64x4(
                _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(src + 2 * lanes + t))),
                _mm256_castps_pd(_mm256_loadu_ps(src + 3 * lanes + t)), 1));
            __m512 q[2] = {_mm512_permutex2var_ps(y01, first_half, y23),
                           _mm512_permutex2var_ps(y01, second_half, y23)};
            int64_t ox = (tx + t) * TILE; /* the row's column under q[0]'s first float */
            int64_t valid = (count - t) * TILE; /* floats of these tiles */
            if (valid > d->out_w - ox)
                valid = d->out_w - ox;
            for (int v = 0; v < 2 && 16 * v < valid; v++) {
                if (valid >= 16 * (v + 1))
                    _mm512_storeu_ps(row + ox + 16 * v, q[v]);
                else
                    _mm512_mask_storeu_ps(row + ox + 16 * v, rt_lane_mask__16(0, valid - 16 * v),
                                          q[v]);
            }
        }
    }
}
#endif

#ifdef HAVE_X86_GATHERS
/* scatter_tiles, eight tiles per step with AVX2: rows b = 0..3 of y (a tile's outputs b, one
 * lane per tile) are transposed 4x4 within each 128-bit half, which gives each tile's four
 * outputs as a quad, stored whole or, at the row's end, masked to the plane. */
static AVX2 void scatter_tiles__avx2(const conv_dims *d, const float *y, int64_t lanes,
                                     int64_t lane0, int64_t ty, int64_t tx, int64_t count,
                                     float *out) {
    const int64_t out_w = d->out_w;
    for (int a = 0; a < TILE && ty * TILE + a < d->out_h; a++) {
        float *row = out + (ty * TILE + a) * out_w;
        const float *src = y + a * TILE * lanes + lane0;
        for (int64_t t = 0; t < count; t += 8) {
            __m256 y0 = _mm256_loadu_ps(src + t), y1 = _mm256_loadu_ps(src + lanes + t),
                   y2 = _mm256_loadu_ps(src + 2 * lanes + t),
                   y3 = _mm256_loadu_ps(src + 3 * lanes + t);
            __m256 lo01 = _mm256_unpacklo_ps(y0, y1), lo23 = _mm256_unpacklo_ps(y2, y3);
            __m256 hi01 = _mm256_unpackhi_ps(y0, y1), hi23 = _mm256_unpackhi_ps(y2, y3);
            __m256 tiles[4] = {/* tile i's quad in half i / 4 of tiles[i % 4] */
                               _mm256_shuffle_ps(lo01, lo23, 0x44),
                               _mm256_shuffle_ps(lo01, lo23, 0xee),
                               _mm256_shuffle_ps(hi01, hi23, 0x44),
                               _mm256_shuffle_ps(hi01, hi23, 0xee)};
            for (int64_t i = 0; i < 8 && t + i < count; i++) {
                int64_t ox = (tx + t + i) * TILE;
                if (ox >= out_w)
                    break;
                __m128 quad = i < 4 ? _mm256_castps256_ps128(tiles[i])
                                    : _mm256_extractf128_ps(tiles[i - 4], 1);
                if (ox + 4 <= out_w) {
                    _mm_storeu_ps(row + ox, quad);
                } else {
                    __m128i keep = _mm_cmpgt_epi32(_mm_set1_epi32((int32_t)(out_w - ox)),
                                                   _mm_setr_epi32(0, 1, 2, 3));
                    _mm_maskstore_ps(row + ox, keep, quad);
                }
            }
        }
    }
}
#endif

/* Output channel o of `count` tiles from tile `first`, by the definition of the convolution.
 * Winograd mixes the whole patch into each of a tile's outputs, so a NaN or infinity in the
 * input (or one its transforms overflow to) would spread to outputs whose window does not
 * hold it; tiles with an output that is not finite are recomputed here, as the direct
 * convolution gives them. */
static void direct_tiles(const wino_job *job, const float *x, int64_t first, int64_t count,
                         int64_t o, float *plane) {
    const conv_dims *d = job->d;
    const float *w = job->w + o * d->channels * 9;
    for (int64_t t = first; t < first + count; t++) {
        int64_t y0 = t / job->l->tiles_w * TILE, x0 = t % job->l->tiles_w * TILE;
        for (int64_t oy = y0; oy < y0 + TILE && oy < d->out_h; oy++)
            for (int64_t ox = x0; ox < x0 + TILE && ox < d->out_w; ox++) {
                float sum = job->bias ? job->bias[o] : 0.0f;
                for (int64_t c = 0; c < d->channels; c++)
                    for (int64_t kh = 0; kh < 3; kh++) {
                        int64_t iy = oy + kh - d->pad[0];
                        for (int64_t kw = 0; kw < 3 && iy >= 0 && iy < d->height; kw++) {
                            int64_t ix = ox + kw - d->pad[1];
                            if (ix >= 0 && ix < d->width)
                                sum += w[(c * 3 + kh) * 3 + kw] *
                                       x[(c * d->height + iy) * d->width + ix];
                        }
                    }
                plane[oy * d->out_w + ox] = rt_activation__one(job->act, sum);
            }
    }
}

/* A run of a strip's tiles along one tile row: lanes [lane, lane + count) are tiles
 * (ty, tx .. tx + count - 1). */
typedef struct tile_run {
    int64_t lane, ty, tx, count;
} tile_run;

/* A strip: item `item` (image, strip), its tiles [first, first + count) in runs. */
typedef struct strip_at {
    int64_t image, first, count;
    const float *x; /* the image's input */
    float *out;     /* the image's output */
    int64_t num_runs;
    tile_run runs[RT_GEMM_NR_MAX];
} strip_at;

static void strip_of(const wino_job *job, int64_t item, strip_at *at) {
    const conv_dims *d = job->d;
    const wino_layout *l = job->l;
    at->image = item / l->strips;
    at->first = item % l->strips * l->nr;
    at->count = l->tiles - at->first < l->nr ? l->tiles - at->first : l->nr;
    at->x = job->x + at->image * d->channels * d->height * d->width;
    at->out = job->out + at->image * d->out_channels * d->out_h * d->out_w;
    at->num_runs = 0;
    for (int64_t lane = 0, t = at->first; lane < at->count; at->num_runs++) {
        tile_run *run = &at->runs[at->num_runs];
        run->lane = lane;
        run->ty = t / l->tiles_w;
        run->tx = t % l->tiles_w;
        run->count = l->tiles_w - run->tx < at->count - lane ? l->tiles_w - run->tx
                                                               : at->count - lane;
        lane += run->count;
        t += run->count;
    }
}

/* Channels [c0, c1) of the strip's patches into its 36 panels: V[point][channel][lane]. */
static void transform_inputs(const wino_job *job, const strip_at *at, float *worker,
                             float *strip, int64_t c0, int64_t c1) {
    const conv_dims *d = job->d;
    const wino_layout *l = job->l;
    float *patches = worker, *v = strip;
    if (at->count < l->nr) /* lanes no tile fills: zeros, so the GEMMs read no stale floats */
        for (int point = 0; point < POINTS; point++)
            memset(patches + point * l->lane_pad + at->count, 0,
                   (size_t)(l->lane_pad - at->count) * sizeof(float));
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = at->x + c * d->height * d->width;
        for (const tile_run *r = at->runs; r < at->runs + at->num_runs; r++) {
#ifdef HAVE_X86_GATHERS
            if (job->avx512)
                gather_patches__avx512(d, xc, r->ty, r->tx, r->count, patches + r->lane,
                                       l->lane_pad);
            else if (job->avx2)
                gather_patches__avx2(d, xc, r->ty, r->tx, r->count, patches + r->lane,
                                     l->lane_pad);
            else
#endif
                gather_patches(d, xc, r->ty, r->tx, r->count, patches + r->lane, l->lane_pad);
        }
        transform_patches(patches, l->lane_pad, v + c * l->nr, l->v_point, l->nr);
    }
}

/* Points [p0, p1) of the strip's GEMMs, output channels [o0, o1) (o0 a multiple of MR):
 * M[point][out channel][lane]. */
static void multiply(const wino_job *job, float *strip, int p0, int p1, int64_t o0, int64_t o1) {
    const conv_dims *d = job->d;
    const wino_layout *l = job->l;
    const float *v = strip;
    float *m = strip + l->v_floats;
    for (int point = p0; point < p1; point++) {
        const float *u = job->weights + (size_t)point * l->weights_floats;
        float *mp = m + point * l->m_point;
        for (int64_t o = o0; o < o1; o += l->mr)
            for (int64_t k0 = 0; k0 < d->channels; k0 += l->kc)
                rt_gemm__f32_packed_block(u, d->out_channels, d->channels, o, k0,
                                          v + point * l->v_point + k0 * l->nr, mp + o * l->nr,
                                          l->nr, k0 > 0);
    }
}

/* Output channels [o0, o1) of the strip's tiles, from M. */
static void transform_outputs(const wino_job *job, const strip_at *at, float *worker,
                              const float *strip, int64_t o0, int64_t o1) {
    const conv_dims *d = job->d;
    const wino_layout *l = job->l;
    const float *m = strip + l->v_floats;
    float *y = worker + l->patch_floats;
    int64_t lanes = (at->count + LANES - 1) / LANES * LANES; /* <= NR, a multiple of LANES */
    for (int64_t o = o0; o < o1; o++) {
        float *plane = at->out + o * d->out_h * d->out_w;
        if (!transform_products(m + o * l->nr, l->m_point, job->bias ? job->bias[o] : 0.0f, y,
                                lanes)) {
            direct_tiles(job, at->x, at->first, at->count, o, plane);
            continue;
        }
        if (job->act->kind != RT_ACT_NONE)
            rt_activation__apply(job->act, y, TILE * TILE * lanes);
        for (const tile_run *r = at->runs; r < at->runs + at->num_runs; r++) {
#ifdef HAVE_X86_GATHERS
            if (job->avx512)
                scatter_tiles__avx512(d, y, lanes, r->lane, r->ty, r->tx, r->count, plane);
            else if (job->avx2)
                scatter_tiles__avx2(d, y, lanes, r->lane, r->ty, r->tx, r->count, plane);
            else
#endif
                scatter_tiles(d, y, lanes, r->lane, r->ty, r->tx, r->count, plane);
        }
    }
}

/* Whole strips: each thread claims one, runs the three steps on it in its own buffers, and
 * claims the next. */
static void strip_slots(void *arg, size_t begin, size_t end) {
    wino_job *job = arg;
    const wino_layout *l = job->l;
    for (size_t slot = begin; slot < end; slot++) {
        float *worker = job->workers + slot * l->worker_floats;
        float *strip = job->strips + slot * l->strip_floats;
        for (int64_t item; (item = atomic_fetch_add(&job->next, 1)) < job->items;) {
            strip_at at;
            strip_of(job, item, &at);
            transform_inputs(job, &at, worker, strip, 0, job->d->channels);
            multiply(job, strip, 0, POINTS, 0, job->d->out_channels);
            transform_outputs(job, &at, worker, strip, 0, job->d->out_channels);
        }
    }
}

/* A strip per thread: a run is one strip's blocks of output channels. The thread holding
 * the run transforms the strip's inputs, then multiplies and transforms out a block at a
 * time; a thread done with its own strip takes blocks from the back of another's once that
 * strip's inputs are ready. Threads of equal speed each keep their strip whole. */
static void strip_run(void *arg, int32_t slot, rt_run *run) {
    wino_job *job = arg;
    const wino_layout *l = job->l;
    float *worker = job->workers + slot * l->worker_floats;
    int64_t strip_index = -1;
    strip_at at;
    float *strip = NULL;
    size_t item;
    while (rt_run__next(run, &item)) {
        int64_t index = (int64_t)item / job->out_units, unit = (int64_t)item % job->out_units;
        if (index != strip_index) { /* a run never spans two strips: this is the first item */
            strip_index = index;
            strip_of(job, index, &at);
            strip = job->strips + index * l->strip_floats;
            if (!rt_run__stolen(run)) {
                transform_inputs(job, &at, worker, strip, 0, job->d->channels);
                atomic_store_explicit(&job->ready[index], 1, memory_order_release);
            } else {
                while (!atomic_load_explicit(&job->ready[index], memory_order_acquire))
                    ;
            }
        }
        int64_t o0 = unit * job->unit_channels;
        int64_t o1 = o0 + job->unit_channels < job->d->out_channels ? o0 + job->unit_channels
                                                                    : job->d->out_channels;
        multiply(job, strip, 0, POINTS, o0, o1);
        transform_outputs(job, &at, worker, strip, o0, o1);
    }
}

/* Phased: a group of strips, fewer than would keep every thread busy, each step spread
 * over the threads (a unit is a channel, a point or an output channel of one strip). */
static void phase_slots(void *arg, size_t begin, size_t end) {
    wino_job *job = arg;
    const wino_layout *l = job->l;
    int64_t per_strip = job->units / job->group_size;
    for (size_t slot = begin; slot < end; slot++) {
        float *worker = job->workers + slot * l->worker_floats;
        for (int64_t unit; (unit = atomic_fetch_add(&job->next, 1)) < job->units;) {
            int64_t index = unit / per_strip, i = unit % per_strip;
            float *strip = job->strips + index * l->strip_floats;
            strip_at at;
            strip_of(job, job->group + index, &at);
            if (job->phase == 0)
                transform_inputs(job, &at, worker, strip, i, i + 1);
            else if (job->phase == 1)
                multiply(job, strip, (int)i, (int)i + 1, 0, job->d->out_channels);
            else
                transform_outputs(job, &at, worker, strip, i, i + 1);
        }
    }
}

void rt_conv__winograd_f32(const conv_dims *d, const float *x, const float *weights,
                           const float *w, const float *bias, const rt_activation *act,
                           float *out, void *scratch, int32_t threads) {
    wino_layout l;
    if (!layout_of(d, &l)) /* rt_conv__winograd_pays held at load: never taken */
        return;
    wino_job job = {.d = d, .l = &l, .x = x, .weights = weights, .w = w, .bias = bias, .act = act,
                    .out = out, .workers = scratch, .avx512 = rt_gemm__f32_avx512(),
                    /* The AVX2 gather compares columns as 32-bit lanes. */
                    .avx2 = strcmp(rt_gemm__f32_variant(), "avx2_fma") == 0 &&
                            d->width < (1 << 28) && d->pad[1] < (1 << 28)};
    int32_t slots = threads > 0 ? threads : 1;
    job.strips = job.workers + (size_t)slots * l.worker_floats;
    job.items = rt_op__mul_sat(d->batch, l.strips);
    /* A strip is NR tiles of 36 * channels * out channels multiply-adds each: threads for
     * at least rt_op__grain's work each. */
    int64_t strip_work = rt_op__mul_sat(rt_op__mul_sat(l.nr * POINTS, d->channels),
                                        d->out_channels);
    int64_t work = rt_op__mul_sat(strip_work, job.items);
    int64_t busy = work / MIN_THREAD_WORK;
    busy = busy < slots ? busy : slots;
    busy = busy > 0 ? busy : 1;
    /* A strip per thread: a run each (strip_run), of two blocks of output channels (finer
     * blocks would each read the strip's panels once more). */
    if (busy > 1 && job.items == busy && busy <= RT_MAX_RUNS) {
        job.unit_channels = (d->out_channels + 1) / 2;
        job.unit_channels = (job.unit_channels + l.mr - 1) / l.mr * l.mr;
        job.out_units = (d->out_channels + job.unit_channels - 1) / job.unit_channels;
        for (int64_t i = 0; i < job.items; i++)
            atomic_init(&job.ready[i], 0);
        rt_parallel__runs((int32_t)busy, (size_t)(job.items * job.out_units), strip_run, &job);
        return;
    }
    /* Whole strips, each thread claiming the next, whenever there are more strips than
     * threads, even unevenly; else (fewer strips than threads) each step of a group of strips
     * over all threads, where a lone strip would leave the other threads idle. Three strips
     * on two threads (the small CNN's second convolution with the AVX2 kernel's 24 tiles a
     * strip) took 98 us by steps, with a loop and its wait for each of the 6, and 76 by
     * whole strips, two on one thread; the model 194 against 150 us (onnxruntime 134). */
    if (busy == 1 || job.items > busy) {
        busy = busy < job.items ? busy : job.items;
        atomic_store(&job.next, 0);
        rt_parallel__for((int32_t)busy, (size_t)busy, 1, strip_slots, &job);
        return;
    }
    int64_t per_phase[3] = {d->channels, POINTS, d->out_channels};
    for (job.group = 0; job.group < job.items; job.group += busy) {
        job.group_size = job.items - job.group < busy ? job.items - job.group : busy;
        for (job.phase = 0; job.phase < 3; job.phase++) {
            job.units = job.group_size * per_phase[job.phase];
            atomic_store(&job.next, 0);
            rt_parallel__for((int32_t)busy, (size_t)busy, 1, phase_slots, &job);
        }
    }
}
