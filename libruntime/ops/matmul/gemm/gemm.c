/* gemm.c: the blocked GEMM driver (after Goto and BLIS): C is cut into tiles of up to MC rows
 * and NC columns; for each KC-deep slice the micro-kernel runs over a tile's A block in MR-row
 * panels and its B block in NR-column panels, all zero-padded at the edges. A, when several
 * column tiles read it, and B, when several row tiles do, are packed once for all of them by
 * all threads (B in column strips) as far as the scratch has room; otherwise each tile packs
 * its own blocks, repeating that work once per tile that reads them. Threads claim the units
 * of work (a panel to pack, a tile to compute) from one counter. */
#include "ops/matmul/gemm/gemm.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"

#define MC 192 /* rows of A per block: 144 KB at KC = 192 (L2) */
#define KC 192 /* depth of a slice: one B micro-panel is 24 KB with NR = 32 (L1) */
#define NC_MAX 528 /* columns of B per block (rounded down to a multiple of NR): 396 KB */
#define SLOT_FLOATS ((size_t)MC * KC + (size_t)KC * NC_MAX)
#define SHARED_MAX_FLOATS ((size_t)4 << 20) /* 16 MB: A, or a strip of B, packed for all tiles */
#define MIN_FLOPS_PER_THREAD 200000.0
#define TALL RT_GEMM_TALL

/* The kernel chosen for this CPU and its tile; packing follows the tile. */
static rt_gemm_f32_micro_fn micro_kernel;
static rt_gemm_f32_gather_fn gather_kernel;
/* The vector kernels' extra entries, NULL with the portable one: full-height blocks of C
 * narrower than NR (else computed aside and copied), and whole MR-row A panels packed with
 * AVX (pack_a_panel). */
static rt_gemm_f32_cols_fn cols_kernel;
static void (*pack_a_panel)(const float *a, int64_t lda, int64_t k, float *dst);
static void (*row_kernel)(int64_t k, const float *a, int64_t a_stride, const float *b, float *c,
                          int accumulate, float row_bias, const float *col_bias,
                          const float *clamp, int64_t cols); /* products of fewer than MR rows */
static void (*rows_kernel)(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                           int accumulate, const float *row_bias, const float *col_bias,
                           const float *clamp, int64_t rows,
                           const float *prefetch); /* blocks of up to MR rows */
/* The tall form of gather_kernel (12-row panels), or NULL. */
static void (*gather12_kernel)(int64_t k, const float *a, const float *b,
                               const int64_t *b_offsets, float *c, int64_t ldc, int accumulate,
                               const float *row_bias, const float *clamp, int64_t rows,
                               int64_t cols);
static const char *micro_variant;
static int64_t MR, NR;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static void use_kernel(rt_gemm_f32_micro_fn fn, rt_gemm_f32_gather_fn gather, const char *name,
                       int64_t mr, int64_t nr) {
    micro_kernel = fn;
    gather_kernel = gather;
    micro_variant = name;
    MR = mr;
    NR = nr;
}

static bool env_says(const char *name, const char *value) {
    const char *set = getenv(name);
    return set != NULL && strcmp(set, value) == 0;
}

static void select_micro_kernel(void) {
    const char *force = getenv("RT_PORTABLE_KERNELS");
    bool portable = (force != NULL && force[0] != '\0' && force[0] != '0') ||
                    env_says("RT_GEMM_KERNEL", "portable");
    const char *wanted = getenv("RT_GEMM_KERNEL");
    bool any = wanted == NULL || wanted[0] == '\0';
    use_kernel(rt_gemm_f32_micro__portable, rt_gemm_f32_gather__portable, "portable",
               RT_GEMM_MR, RT_GEMM_NR);
    if (portable)
        return;
#if defined(__x86_64__) && defined(__GNUC__)
    /* Rows in pairs where measured faster (Intel), one at a time elsewhere (gemm_avx512.c). */
    bool pairs = env_says("RT_GEMM_KERNEL", "avx512_pairs") ||
                 (any && __builtin_cpu_is("intel"));
    if ((any || pairs || env_says("RT_GEMM_KERNEL", "avx512")) &&
        __builtin_cpu_supports("avx512f")) {
        if (pairs) {
            use_kernel(rt_gemm_f32_micro__avx512_pairs, rt_gemm_f32_gather__avx512_pairs,
                       "avx512_pairs", 8, 32);
            cols_kernel = rt_gemm_f32_cols__avx512_pairs;
            rows_kernel = rt_gemm_f32_rows__avx512_pairs;
            gather12_kernel = rt_gemm_f32_gather12__avx512_pairs;
        } else {
            use_kernel(rt_gemm_f32_micro__avx512, rt_gemm_f32_gather__avx512, "avx512", 8, 32);
            cols_kernel = rt_gemm_f32_cols__avx512;
            rows_kernel = rt_gemm_f32_rows__avx512;
        }
        pack_a_panel = rt_gemm_f32_pack_a8__avx512;
        row_kernel = rt_gemm_f32_row__avx512;
        return;
    }
#endif
#if defined(__x86_64__) || defined(__i386__)
    if ((any || env_says("RT_GEMM_KERNEL", "avx2_fma")) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma")) {
        use_kernel(rt_gemm_f32_micro__avx2_fma, rt_gemm_f32_gather__avx2_fma, "avx2_fma",
                   RT_GEMM_MR, RT_GEMM_NR);
        cols_kernel = rt_gemm_f32_cols__avx2_fma;
        pack_a_panel = rt_gemm_f32_pack_a4__avx2;
    }
#endif
    (void)any;
}

const char *rt_gemm__f32_variant(void) {
    pthread_once(&select_once, select_micro_kernel);
    return micro_variant;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

static size_t slots_bytes(int32_t threads) {
    return (size_t)(threads > 0 ? threads : 1) * SLOT_FLOATS * sizeof(float);
}

/* Room for A packed once (whole, if not too big) and for B packed once (in strips of at most
 * SHARED_MAX_FLOATS): only worth it when more than one tile reads them. */
static size_t shared_a_floats(int64_t m, int64_t n, int64_t k) {
    double whole = (double)round_up(m, MR) * (double)k;
    return n > NR && k > 0 && whole <= (double)SHARED_MAX_FLOATS
               ? (size_t)round_up((int64_t)whole, RT_FLOATS_PER_LINE)
               : 0;
}

static size_t shared_b_floats(int64_t m, int64_t n, int64_t k) {
    if (m <= MC || n <= 0 || k <= 0)
        return 0;
    double whole = (double)k * (double)round_up(n, NR);
    return whole < (double)SHARED_MAX_FLOATS ? (size_t)whole : SHARED_MAX_FLOATS;
}

bool rt_gemm__f32_avx512(void) { return strncmp(rt_gemm__f32_variant(), "avx512", 6) == 0; }

size_t rt_gemm__f32_scratch_bytes(int64_t m, int64_t n, int64_t k, int32_t threads) {
    pthread_once(&select_once, select_micro_kernel);
    return slots_bytes(threads) + (shared_a_floats(m, n, k) + shared_b_floats(m, n, k)) *
                                      sizeof(float);
}

/* The work is a sequence of phases, each a range of units claimed from one counter: packing
 * the shared A (one MR-row panel per unit), then per column strip of B, packing it (one
 * NR-column panel per unit) and computing its tiles. A unit starts only once every unit of
 * the earlier phases is done; those are all claimed by running threads, so the wait is short
 * and cannot deadlock, even when the pool runs every slot on the calling thread. */
enum { PHASE_PACK_A, PHASE_PACK_B, PHASE_TILES };

typedef struct gemm_plan {
    const rt_gemm_f32_args *g;
    float *scratch; /* one packing slot per thread */
    int64_t mc, m_tiles;          /* rows per tile (at most MC) and row tiles */
    int64_t nc, n_tiles;          /* columns per tile and column tiles of all C */
    const float *packed_a;        /* the caller's, or shared_a once packed, or NULL */
    bool rows_by_one;             /* under MR rows: row_kernel, A read in place */
    float *shared_a, *shared_b;   /* where A and a strip of B are packed, or NULL */
    int64_t strip_tiles;          /* column tiles per strip (all of them without shared_b) */
    int64_t strips, phases;
    atomic_llong next_unit, units_done;
} gemm_plan;

typedef struct gemm_phase {
    int kind;
    int64_t units;
    /* The strip: its first column, its padded width and its column tiles; and B packed ahead
     * for it (the caller's or the shared strip) or NULL. */
    int64_t b_j0, b_pad, n_tiles;
    const float *packed_b;
} gemm_phase;

/* A transposed A (unit row stride): a panel's column is a run of MR floats. Two panels at a
 * time (a cache line of source per depth), with fixed-size copies for the kernels' heights,
 * a vector move each: a memcpy call per 32 bytes, one panel at a time, was most of the
 * packing of x^T in conv/kernels/pixels_f32.c. (Depth by depth across every panel was slower
 * still: as many write streams as panels, 4 KB apart.) Returns the rows packed (whole panels). */
static int64_t pack_a_transposed(const rt_gemm_f32_args *g, int64_t i0, int64_t mc, int64_t p0,
                                 int64_t kc, float *dst) {
    int64_t whole = mc / MR, panel = 0;
    const float *a = g->a + i0 + p0 * g->a_col_stride;
    for (; MR == 8 && panel + 2 <= whole; panel += 2) {
        float *first = dst + panel * kc * 8, *second = first + kc * 8;
        const float *src = a + panel * 8;
        for (int64_t p = 0; p < kc; p++) {
            memcpy(first + p * 8, src + p * g->a_col_stride, 8 * sizeof(float));
            memcpy(second + p * 8, src + p * g->a_col_stride + 8, 8 * sizeof(float));
        }
    }
    for (; panel < whole; panel++)
        for (int64_t p = 0; p < kc; p++)
            memcpy(dst + (panel * kc + p) * MR, a + panel * MR + p * g->a_col_stride,
                   (size_t)MR * sizeof(float));
    return whole * MR;
}

/* A panel `height` floats to a depth step from the first `rows` rows at a (g's strides), depths
 * [0, kc), zeros in the rows past them. */
static void pack_rows(const rt_gemm_f32_args *g, const float *a, int64_t rows, int64_t height,
                      int64_t kc, float *dst) {
    for (int64_t r = 0; r < height; r++) {
        const float *src = a + r * g->a_row_stride;
        for (int64_t p = 0; p < kc; p++)
            dst[p * height + r] = r < rows ? src[p * g->a_col_stride] : 0.0f;
    }
}

static void pack_a(const rt_gemm_f32_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                   float *dst) {
    int64_t first = 0;
    if (g->a_row_stride == 1) {
        first = pack_a_transposed(g, i0, mc, p0, kc, dst);
        dst += first * kc;
    }
    for (int64_t ir = first; ir < mc; ir += MR) {
        int64_t rows = min64(MR, mc - ir);
        const float *a = g->a + (i0 + ir) * g->a_row_stride + p0 * g->a_col_stride;
        if (rows == MR && g->a_col_stride == 1 && pack_a_panel != NULL) {
            pack_a_panel(a, g->a_row_stride, kc, dst);
            dst += kc * MR;
            continue;
        }
        pack_rows(g, a, rows, MR, kc, dst);
        dst += kc * MR;
    }
}

/* One packed row of a B panel: a fixed-size copy for the kernels' widths, which the compiler
 * turns into a few vector moves (a memcpy call per 96- or 128-byte row cost 2.5% of a
 * 1024^3 product). */
static inline void copy_panel_row(float *dst, const float *src) {
    if (NR == 32)
        memcpy(dst, src, 32 * sizeof(float));
    else if (NR == 24)
        memcpy(dst, src, 24 * sizeof(float));
    else
        memcpy(dst, src, (size_t)NR * sizeof(float));
}

static void pack_b(const rt_gemm_f32_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                   float *dst) {
    int64_t whole = g->b_col_stride == 1 ? nc / NR : 0; /* panels copied row by row */
    /* Row by row across the whole panels: each row of B is read once, in one run. */
    for (int64_t p = 0; p < kc && whole > 0; p++) {
        const float *b = g->b + (p0 + p) * g->b_row_stride + j0;
        for (int64_t panel = 0; panel < whole; panel++)
            copy_panel_row(dst + (panel * kc + p) * NR, b + panel * NR);
    }
    dst += whole * kc * NR;
    for (int64_t jr = whole * NR; jr < nc; jr += NR) {
        int64_t cols = min64(NR, nc - jr);
        const float *b = g->b + p0 * g->b_row_stride + (j0 + jr) * g->b_col_stride;
        /* Column by column: reads along a column are contiguous for a transposed B. */
        for (int64_t j = 0; j < NR; j++) {
            const float *src = b + j * g->b_col_stride;
            for (int64_t p = 0; p < kc; p++)
                dst[p * NR + j] = j < cols ? src[p * g->b_row_stride] : 0.0f;
        }
        dst += kc * NR;
    }
}

/* K = 0: C = bias (or zero), then the activation. */
static void init_tile(const rt_gemm_f32_args *g, int64_t i0, int64_t mc, int64_t j0,
                      int64_t nc) {
    for (int64_t i = 0; i < mc; i++) {
        float *row = g->c + (i0 + i) * g->c_row_stride + j0;
        float r = g->row_bias != NULL ? g->row_bias[i0 + i] : 0.0f;
        for (int64_t j = 0; j < nc; j++)
            row[j] = r + (g->column_bias != NULL ? g->column_bias[j0 + j] : 0.0f);
        rt_activation__apply(&g->activation, row, nc);
    }
}

bool rt_gemm__f32_clamp_of(const rt_activation *act, float clamp[2]) {
    if (act->kind == RT_ACT_RELU) {
        clamp[0] = 0.0f;
        clamp[1] = INFINITY;
        return true;
    }
    if (act->kind == RT_ACT_CLIP && act->lo <= act->hi) {
        clamp[0] = act->lo;
        clamp[1] = act->hi;
        return true;
    }
    return false;
}

/* Clip's scalar form, which the vector kernels' min(max(x, lo), hi) agrees with. */
static inline float clamped(float v, const float *clamp) {
    return clamp == NULL ? v : v < clamp[0] ? clamp[0] : v > clamp[1] ? clamp[1] : v;
}

/* A micro-tile at the edge of C: the full block is computed aside and only the part inside C
 * kept, so the kernel never writes (or reads biases) past the matrix. */
static void edge_block(const rt_gemm_f32_args *g, int64_t kc, const float *pa, const float *pb,
                       int64_t i, int64_t j, int64_t rows, int64_t cols, int accumulate,
                       const float *clamp) {
    if (rows == MR && cols_kernel != NULL) {
        cols_kernel(kc, pa, pb, NULL, g->c + i * g->c_row_stride + j, g->c_row_stride,
                    accumulate, g->row_bias != NULL ? g->row_bias + i : NULL,
                    g->column_bias != NULL ? g->column_bias + j : NULL, clamp, cols);
        return;
    }
    float edge[RT_GEMM_MR_MAX * RT_GEMM_NR_MAX];
    micro_kernel(kc, pa, pb, edge, NR, 0, NULL, NULL, NULL);
    for (int64_t r = 0; r < rows; r++) {
        float *c = g->c + (i + r) * g->c_row_stride + j;
        float base = g->row_bias != NULL ? g->row_bias[i + r] : 0.0f;
        for (int64_t s = 0; s < cols; s++) {
            float start = accumulate ? c[s]
                                     : base + (g->column_bias != NULL ? g->column_bias[j + s]
                                                                      : 0.0f);
            c[s] = clamped(start + edge[r * NR + s], clamp);
        }
    }
}

/* One KC-deep slice of a tile, rows [i0, i0 + mc) by columns [j0, j0 + nc), from packed A
 * (pa) and B (pb) panels.
 *
 * Each B panel is read from memory once per slice (a tile's B block is packed ahead, and far
 * larger than L2 for n = 2048) and then from L1 by every A panel; the first call waits for its
 * 24 KB while the hardware prefetchers, which see no L2 misses once the panel is in L1, have
 * stopped. So where the kernel can fetch along the way (AVX-512), the first calls on each
 * panel fetch the next one into L2, a line a depth step (two calls for a 32-column panel). On
 * a Xeon (Sapphire Rapids family) at 1 thread, against OpenBLAS call by call in one process,
 * n = 1024 went from 0.95-0.99 of its speed to 1.04-1.06 and n = 2048 from 0.82-0.86 to
 * 0.97-1.10; against the same build without, n = 256 to 2048 took 0.98 of the time at 2
 * threads. */
static void slice_by_panels(const rt_gemm_f32_args *g, int64_t kc, const float *pa,
                            const float *pb, int64_t i0, int64_t mc, int64_t j0, int64_t nc,
                            int accumulate, const float *clamp) {
    const int64_t fetching_calls = NR / RT_FLOATS_PER_LINE; /* a line a step, NR floats a step */
    for (int64_t jr = 0; jr < nc; jr += NR) {
        int64_t cols = min64(NR, nc - jr), j = j0 + jr;
        const float *col_bias = g->column_bias != NULL ? g->column_bias + j : NULL;
        const float *next_panel = jr + NR < nc ? pb + (jr + NR) * kc : NULL;
        for (int64_t ir = 0, call = 0; ir < mc; ir += MR, call++) {
            int64_t rows = min64(MR, mc - ir), i = i0 + ir;
            float *c = g->c + i * g->c_row_stride + j;
            const float *row_bias = g->row_bias != NULL ? g->row_bias + i : NULL;
            if (jr + NR < nc)
                rt_gemm__f32_prefetch_c(c + NR, g->c_row_stride, rows, min64(NR, nc - jr - NR));
            if (cols == NR && rows_kernel != NULL) {
                const float *fetch = next_panel != NULL && call < fetching_calls
                                         ? next_panel + call * kc * RT_FLOATS_PER_LINE
                                         : NULL;
                rows_kernel(kc, pa + ir * kc, pb + jr * kc, c, g->c_row_stride, accumulate,
                            row_bias, col_bias, clamp, rows, fetch);
            } else if (rows == MR && cols == NR)
                micro_kernel(kc, pa + ir * kc, pb + jr * kc, c, g->c_row_stride, accumulate,
                             row_bias, col_bias, clamp);
            else
                edge_block(g, kc, pa + ir * kc, pb + jr * kc, i, j, rows, cols, accumulate,
                           clamp);
        }
    }
}

/* The same with A read in place one row at a time (under MR rows in all), the slice starting
 * at depth p0. */
static void slice_by_rows(const rt_gemm_f32_args *g, int64_t p0, int64_t kc, const float *pb,
                          int64_t i0, int64_t mc, int64_t j0, int64_t nc, int accumulate,
                          const float *clamp) {
    for (int64_t jr = 0; jr < nc; jr += NR) {
        int64_t cols = min64(NR, nc - jr), j = j0 + jr;
        for (int64_t i = i0; i < i0 + mc; i++)
            row_kernel(kc, g->a + i * g->a_row_stride + p0 * g->a_col_stride, g->a_col_stride,
                       pb + jr * kc, g->c + i * g->c_row_stride + j, accumulate,
                       g->row_bias != NULL ? g->row_bias[i] : 0.0f,
                       g->column_bias != NULL ? g->column_bias + j : NULL, clamp, cols);
    }
}

static void run_tile(const gemm_plan *plan, const gemm_phase *strip, int64_t tile,
                     float *slot) {
    const rt_gemm_f32_args *g = plan->g;
    int64_t i0 = tile / strip->n_tiles * plan->mc;
    int64_t j0 = strip->b_j0 + tile % strip->n_tiles * plan->nc;
    int64_t mc = min64(plan->mc, g->m - i0), nc = min64(plan->nc, g->n - j0);
    if (mc <= 0 || nc <= 0)
        return;
    if (g->k == 0) {
        init_tile(g, i0, mc, j0, nc);
        return;
    }
    float clamp_values[2];
    bool fused = rt_gemm__f32_clamp_of(&g->activation, clamp_values);
    int64_t m_pad = round_up(g->m, MR);
    for (int64_t p0 = 0; p0 < g->k; p0 += KC) {
        int64_t kc = min64(KC, g->k - p0);
        const float *pa = NULL, *pb;
        if (plan->rows_by_one) {
            /* A is read in place, row by row. */
        } else if (plan->packed_a != NULL) {
            pa = plan->packed_a + p0 * m_pad + i0 * kc;
        } else {
            pack_a(g, i0, mc, p0, kc, slot);
            pa = slot;
        }
        if (strip->packed_b != NULL) {
            pb = strip->packed_b + p0 * strip->b_pad + (j0 - strip->b_j0) * kc;
        } else {
            pack_b(g, p0, kc, j0, nc, slot + (size_t)MC * KC);
            pb = slot + (size_t)MC * KC;
        }
        int accumulate = p0 > 0;
        /* Relu and Clip are applied by the last slice's kernels. */
        const float *clamp = fused && p0 + kc == g->k ? clamp_values : NULL;
        if (plan->rows_by_one)
            slice_by_rows(g, p0, kc, pb, i0, mc, j0, nc, accumulate, clamp);
        else
            slice_by_panels(g, kc, pa, pb, i0, mc, j0, nc, accumulate, clamp);
    }
    /* The tile is final: activate it while it is still in cache (other activations). */
    for (int64_t i = 0; i < mc && g->activation.kind != RT_ACT_NONE && !fused; i++)
        rt_activation__apply(&g->activation, g->c + (i0 + i) * g->c_row_stride + j0, nc);
}

size_t rt_gemm__f32_packed_a_floats(int64_t m, int64_t k) {
    pthread_once(&select_once, select_micro_kernel);
    return (size_t)round_up(m, MR) * (size_t)k;
}

size_t rt_gemm__f32_packed_b_floats(int64_t k, int64_t n) {
    pthread_once(&select_once, select_micro_kernel);
    return (size_t)k * (size_t)round_up(n, NR);
}

/* Slice by slice, every panel: the offsets run_tile computes for packed_a / packed_b. */
void rt_gemm__f32_pack_a(const rt_gemm_f32_args *g, float *dst) {
    rt_gemm__f32_pack_a_slices(g, 0, (g->k + KC - 1) / KC, dst);
}

void rt_gemm__f32_pack_a_slices(const rt_gemm_f32_args *g, int64_t first, int64_t end,
                                float *dst) {
    pthread_once(&select_once, select_micro_kernel);
    int64_t m_pad = round_up(g->m, MR);
    for (int64_t p0 = first * KC; p0 < g->k && p0 < end * KC; p0 += KC)
        pack_a(g, 0, g->m, p0, min64(KC, g->k - p0), dst + p0 * m_pad);
}

void rt_gemm__f32_pack_b(const rt_gemm_f32_args *g, float *dst) {
    pthread_once(&select_once, select_micro_kernel);
    int64_t n_pad = round_up(g->n, NR);
    for (int64_t p0 = 0; p0 < g->k; p0 += KC)
        pack_b(g, p0, min64(KC, g->k - p0), 0, g->n, dst + p0 * n_pad);
}

void rt_gemm__f32_tile(int64_t *mr, int64_t *nr, int64_t *kc) {
    pthread_once(&select_once, select_micro_kernel);
    *mr = MR;
    *nr = NR;
    *kc = KC;
}

/* A block of gathered B against the MR-row panel at a (rows <= MR, cols <= NR). */
static void gathered_panel(int64_t kc, const float *a, const float *b, const int64_t *b_offsets,
                           float *c, int64_t ldc, int64_t rows, int64_t cols, int accumulate,
                           const float *bias, const float *clamp) {
    if (rows == MR && cols == NR) {
        gather_kernel(kc, a, b, b_offsets, c, ldc, accumulate, bias, NULL, clamp);
        return;
    }
    if (rows == MR && cols_kernel != NULL) {
        cols_kernel(kc, a, b, b_offsets, c, ldc, accumulate, bias, NULL, clamp, cols);
        return;
    }
    float edge[RT_GEMM_MR_MAX * RT_GEMM_NR_MAX];
    gather_kernel(kc, a, b, b_offsets, edge, NR, 0, NULL, NULL, NULL);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t s = 0; s < cols; s++) {
            float start = accumulate ? c[r * ldc + s] : bias != NULL ? bias[r] : 0.0f;
            c[r * ldc + s] = clamped(start + edge[r * NR + s], clamp);
        }
}

/* ---- tall panels -------------------------------------------------------------------------- */

int64_t rt_gemm__f32_tall_rows(void) {
    pthread_once(&select_once, select_micro_kernel);
    return gather12_kernel != NULL ? TALL : 0;
}

/* Rows m takes in tall panels: a multiple of 4 (at least 8), which is 12a + 8b with b <= 2. */
static int64_t tall_rows_padded(int64_t m) { return m <= 8 ? 8 : round_up(m, 4); }

/* Rows m takes in rt_gemm__f32_pack_a_tall's layout: tall panels, or the GEMM's (the kernels
 * already chosen). */
static int64_t tall_layout_rows(int64_t m) {
    return gather12_kernel != NULL ? tall_rows_padded(m) : round_up(m, MR);
}

int64_t rt_gemm__f32_tall_panel(int64_t m, int64_t i) {
    if (rt_gemm__f32_tall_rows() == 0)
        return MR;
    /* fours = 3a + 2b: b = 0, 2 or 1 for fours = 0, 1, 2 mod 3, the 8-row panels last. */
    int64_t padded = tall_rows_padded(m), short_panels = (3 - padded / 4 % 3) % 3;
    return i < padded - 8 * short_panels ? TALL : 8;
}

size_t rt_gemm__f32_tall_a_floats(int64_t m, int64_t k) {
    pthread_once(&select_once, select_micro_kernel);
    return (size_t)tall_layout_rows(m) * (size_t)k;
}

void rt_gemm__f32_pack_a_tall(const rt_gemm_f32_args *g, float *dst) {
    if (rt_gemm__f32_tall_rows() == 0) {
        rt_gemm__f32_pack_a(g, dst);
        return;
    }
    int64_t m_pad = tall_rows_padded(g->m);
    for (int64_t p0 = 0; p0 < g->k; p0 += KC) {
        int64_t kc = min64(KC, g->k - p0);
        for (int64_t i = 0, h; i < m_pad; i += h) { /* every panel starts inside A */
            h = rt_gemm__f32_tall_panel(g->m, i);
            pack_rows(g, g->a + i * g->a_row_stride + p0 * g->a_col_stride,
                      min64(h, g->m - i), h, kc, dst + p0 * m_pad + i * kc);
        }
    }
}

void rt_gemm__f32_gathered_block(const float *packed_a, int64_t m, int64_t k, int64_t i,
                                 int64_t panel, int64_t p0, const float *b,
                                 const int64_t *b_offsets, float *c, int64_t ldc, int64_t rows,
                                 int64_t cols, int accumulate, const float *row_bias,
                                 const float *clamp) {
    int64_t kc = min64(KC, k - p0);
    const float *a = packed_a + p0 * tall_layout_rows(m) + i * kc;
    const float *bias = row_bias != NULL ? row_bias + i : NULL;
    if (panel == TALL)
        gather12_kernel(kc, a, b, b_offsets, c, ldc, accumulate, bias, clamp, rows, cols);
    else
        gathered_panel(kc, a, b, b_offsets, c, ldc, rows, cols, accumulate, bias, clamp);
}

void rt_gemm__f32_packed_block(const float *packed_a, int64_t m, int64_t k, int64_t i,
                               int64_t p0, const float *b, float *c, int64_t ldc,
                               int accumulate) {
    int64_t kc = min64(KC, k - p0);
    micro_kernel(kc, packed_a + p0 * round_up(m, MR) + i * kc, b, c, ldc, accumulate, NULL, NULL,
                 NULL);
}

void rt_gemm__f32_packed_rows_block(const float *packed_a, int64_t m, const float *packed_b,
                                    int64_t n, int64_t k, int64_t i, int64_t j, int64_t p0,
                                    float *c, int64_t ldc, int accumulate, int64_t rows,
                                    const float *prefetch) {
    /* The offsets rt_gemm__f32_pack_a / _pack_b lay the slice's panels out at. */
    int64_t kc = min64(KC, k - p0);
    const float *a = packed_a + p0 * round_up(m, MR) + i * kc;
    const float *b = packed_b + p0 * round_up(n, NR) + j * kc;
    if (rows_kernel != NULL)
        rows_kernel(kc, a, b, c, ldc, accumulate, NULL, NULL, NULL, rows, prefetch);
    else
        micro_kernel(kc, a, b, c, ldc, accumulate, NULL, NULL, NULL);
}

static gemm_phase phase_at(const gemm_plan *plan, int64_t index) {
    const rt_gemm_f32_args *g = plan->g;
    gemm_phase ph = {.kind = PHASE_PACK_A, .units = round_up(g->m, MR) / MR};
    if (plan->shared_a != NULL && index-- == 0)
        return ph;
    int64_t strip = plan->shared_b != NULL ? index / 2 : 0;
    ph.b_j0 = strip * plan->strip_tiles * plan->nc;
    ph.n_tiles = min64(plan->strip_tiles, plan->n_tiles - strip * plan->strip_tiles);
    ph.b_pad = round_up(min64(ph.n_tiles * plan->nc, g->n - ph.b_j0), NR);
    ph.packed_b = plan->shared_b != NULL ? plan->shared_b : g->packed_b;
    if (plan->shared_b != NULL && index % 2 == 0) {
        ph.kind = PHASE_PACK_B;
        ph.units = ph.b_pad / NR;
    } else {
        ph.kind = PHASE_TILES;
        ph.units = plan->m_tiles * ph.n_tiles;
    }
    return ph;
}

/* One panel of A or of the strip of B, every slice of it: the layout packed_a / packed_b
 * have (slice-major, panels in order within a slice). */
static void pack_panel(const gemm_plan *plan, const gemm_phase *ph, int64_t unit) {
    const rt_gemm_f32_args *g = plan->g;
    for (int64_t p0 = 0; p0 < g->k; p0 += KC) {
        int64_t kc = min64(KC, g->k - p0);
        if (ph->kind == PHASE_PACK_A) {
            int64_t i = unit * MR;
            pack_a(g, i, min64(MR, g->m - i), p0, kc,
                   plan->shared_a + p0 * round_up(g->m, MR) + i * kc);
        } else {
            int64_t j = ph->b_j0 + unit * NR;
            pack_b(g, p0, kc, j, min64(NR, g->n - j),
                   plan->shared_b + p0 * ph->b_pad + unit * NR * kc);
        }
    }
}

/* Each slot (one packing buffer) claims units until none are left, so a thread that joins
 * late takes fewer instead of making the others wait for its share. */
static void run_slots(void *ctx, size_t begin, size_t end) {
    gemm_plan *plan = ctx;
    for (size_t slot = begin; slot < end; slot++) {
        int64_t index = 0, start = 0;
        gemm_phase ph = phase_at(plan, 0);
        for (;;) {
            int64_t u = atomic_fetch_add(&plan->next_unit, 1);
            while (index < plan->phases && u >= start + ph.units) {
                start += ph.units;
                if (++index < plan->phases)
                    ph = phase_at(plan, index);
            }
            if (index == plan->phases)
                break;
            /* No unit of this phase finishes before this wait, so a count of `start` finished
             * units means every earlier one has. */
            while (atomic_load_explicit(&plan->units_done, memory_order_acquire) < start)
                ;
            if (ph.kind == PHASE_TILES)
                run_tile(plan, &ph, u - start, plan->scratch + slot * SLOT_FLOATS);
            else
                pack_panel(plan, &ph, u - start);
            atomic_fetch_add_explicit(&plan->units_done, 1, memory_order_release);
        }
    }
}

/* The most panels one thread computes when `threads` equal threads claim the tiles in order,
 * each taking the next when its last is done (run_slots): row tiles of `per_row` column tiles,
 * `per` panels each but the last of a row, `last`. */
static int64_t busiest_thread(int64_t tiles, int64_t per_row, int64_t per, int64_t last,
                              int32_t threads) {
    int64_t load[64] = {0}, busiest = 0;
    for (int64_t t = 0; t < tiles; t++) {
        int64_t idle = 0;
        for (int64_t i = 1; i < threads; i++)
            idle = load[i] < load[idle] ? i : idle;
        load[idle] += t % per_row == per_row - 1 ? last : per;
        busiest = load[idle] > busiest ? load[idle] : busiest;
    }
    return busiest;
}

/* Too few tiles to keep every thread busy: column tiles of `per` NR-wide panels, at least two
 * tiles a thread where the panels allow, with the fewest panels on the busiest thread (ties:
 * the widest tiles; at most four tiles a thread are tried). A width alone had cut n = 128
 * into tiles of 2, 2 and 1 panels: one of two threads did two thirds of the work. */
static int64_t finer_columns(int64_t n, int64_t m_tiles, int32_t threads) {
    int64_t panels = (n + NR - 1) / NR;
    int64_t want = (2 * (int64_t)threads + m_tiles - 1) / m_tiles;
    int64_t best = (panels + want - 1) / want, best_load = INT64_MAX;
    if (threads > 64) /* past busiest_thread's table: the widest such tiles */
        return best * NR;
    for (int64_t per = best; per >= 1; per--) {
        int64_t per_row = (panels + per - 1) / per, tiles = m_tiles * per_row;
        if (tiles > 4 * (int64_t)threads && best_load < INT64_MAX)
            break;
        int64_t load = busiest_thread(tiles, per_row, per, panels - (per_row - 1) * per,
                                      threads);
        if (load < best_load) {
            best = per;
            best_load = load;
        }
    }
    return best * NR;
}

void rt_gemm__f32(const rt_gemm_f32_args *g, void *scratch, size_t scratch_bytes,
                  int32_t threads) {
    pthread_once(&select_once, select_micro_kernel);
    if (g->m <= 0 || g->n <= 0)
        return;
    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    if (threads < 1)
        threads = 1;
    while (threads > 1 && flops / threads < MIN_FLOPS_PER_THREAD)
        threads--;
    gemm_plan plan = {.g = g, .scratch = scratch, .packed_a = g->packed_a,
                      .rows_by_one = g->m < MR && row_kernel != NULL};
    atomic_init(&plan.next_unit, 0);
    atomic_init(&plan.units_done, 0);
    /* Row tiles of equal height (256 rows: two of 128, not 192 and 64), for the threads. */
    plan.m_tiles = (g->m + MC - 1) / MC;
    plan.mc = round_up((g->m + plan.m_tiles - 1) / plan.m_tiles, MR);
    plan.nc = min64(NC_MAX / NR * NR, round_up(g->n, NR));
    plan.n_tiles = (g->n + plan.nc - 1) / plan.nc;
    if (threads > 1 && plan.m_tiles * plan.n_tiles < 2 * (int64_t)threads)
        plan.nc = finer_columns(g->n, plan.m_tiles, threads);
    plan.n_tiles = (g->n + plan.nc - 1) / plan.nc;
    if (plan.m_tiles * plan.n_tiles < threads)
        threads = (int32_t)(plan.m_tiles * plan.n_tiles);

    /* Pack A once when several column tiles read it, and B once when several row tiles do,
     * as far as the scratch has room (else each tile packs its own blocks). */
    size_t slots = slots_bytes(threads);
    int64_t room = scratch_bytes > slots ? (int64_t)((scratch_bytes - slots) / sizeof(float)) : 0;
    float *free_space = (float *)((char *)scratch + slots);
    int64_t a_floats = round_up(round_up(g->m, MR) * g->k, RT_FLOATS_PER_LINE); /* B: aligned */
    if (g->packed_a == NULL && !plan.rows_by_one && g->k > 0 && plan.n_tiles > 1 &&
        a_floats <= room) {
        plan.packed_a = plan.shared_a = free_space;
        free_space += a_floats;
        room -= a_floats;
    }
    plan.strip_tiles = plan.n_tiles;
    if (g->packed_b == NULL && g->k > 0 && plan.m_tiles > 1 && room / g->k >= plan.nc) {
        plan.shared_b = free_space;
        plan.strip_tiles = min64(plan.n_tiles, room / (g->k * plan.nc));
    }
    plan.strips = (plan.n_tiles + plan.strip_tiles - 1) / plan.strip_tiles;
    plan.phases = (plan.shared_a != NULL) + plan.strips * (plan.shared_b != NULL ? 2 : 1);
    rt_parallel__for(threads, (size_t)threads, 1, run_slots, &plan);
}
