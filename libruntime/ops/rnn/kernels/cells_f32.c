/* kernels/cells_f32.c: the computation of lstm, gru and rnn (see rnn.h), float32.
 *
 * Per direction, the input projection X @ W^T + bias of every time step is one packed GEMM
 * into scratch. Each step then multiplies the hidden state of the whole batch by R^T (a GEMM
 * of `batch` rows) and applies the gates row by row, split over threads along the batch. A
 * batch entry whose sequence is shorter than the step leaves its state alone; y is zero
 * there. The states live in scratch and are copied to y_h (y_c) at the end. */
#include <math.h>
#include <string.h>

#include "ops/matmul/gemm/gemm.h"
#include "ops/movement/movement.h"
#include "ops/rnn/rnn.h"

/* Scratch pieces, each starting on a 64-byte boundary. */
typedef struct rnn_buffers {
    float *proj;  /* [rows = seq * batch, gates * hidden]: X @ W^T + bias, row per (t, b) */
    float *rec;   /* [batch, gates * hidden]: h @ R^T, then the gate values */
    float *rec2;  /* [batch, hidden]: gru (r * h) @ Rh^T */
    float *h, *c; /* [batch, hidden]: the state */
    float *tmp;   /* [batch, hidden]: gru r * h */
    float *bias;  /* [gates * hidden]: Wb + Rb (gru with linear_before_reset: Wb for h) */
    float *rbh;   /* [hidden]: gru Rb of h, for linear_before_reset */
    float *rt;    /* [hidden, gates * hidden]: R^T of one direction, so that the GEMM of every
                   * step packs it with contiguous row copies */
    int64_t *lens; /* [batch] */
    void *gemm;
} rnn_buffers;

static bool add_piece(size_t *total, int64_t count, size_t elem) {
    int64_t bytes;
    if (!rt_op__mul(count, (int64_t)elem, &bytes) || !rt_op__add(bytes, 63, &bytes))
        return false;
    bytes = bytes / 64 * 64;
    if ((uint64_t)bytes > SIZE_MAX - *total)
        return false;
    *total += (size_t)bytes;
    return true;
}

/* Walks the pieces in order; with `base` NULL only the total is computed. */
static bool rnn_layout(const rt_rnn_args *a, char *base, rnn_buffers *buf, size_t *total) {
    int64_t gh = a->gates * a->hidden, bh = a->batch * a->hidden, rows, proj, rec, rt;
    if (!rt_op__mul(a->seq, a->batch, &rows) || !rt_op__mul(rows, gh, &proj) ||
        !rt_op__mul(a->batch, gh, &rec) || !rt_op__mul(gh, a->hidden, &rt))
        return false;
    struct {
        void **at;
        int64_t count;
        size_t elem;
    } pieces[] = {
        {(void **)&buf->proj, proj, sizeof(float)}, {(void **)&buf->rec, rec, sizeof(float)},
        {(void **)&buf->rec2, bh, sizeof(float)},   {(void **)&buf->h, bh, sizeof(float)},
        {(void **)&buf->c, bh, sizeof(float)},      {(void **)&buf->tmp, bh, sizeof(float)},
        {(void **)&buf->bias, gh, sizeof(float)},   {(void **)&buf->rbh, a->hidden, sizeof(float)},
        {(void **)&buf->lens, a->batch, sizeof(int64_t)},
        {(void **)&buf->rt, rt, sizeof(float)},
    };
    *total = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        if (base)
            *pieces[i].at = base + *total;
        if (!add_piece(total, pieces[i].count, pieces[i].elem))
            return false;
    }
    if (base)
        buf->gemm = base + *total;
    return true;
}

bool rt_rnn__scratch_bytes(const rt_rnn_args *a, int32_t threads, size_t *out) {
    rnn_buffers unused;
    size_t total = 0, gemm = rt_gemm__f32_scratch_bytes(0, 0, 0, threads);
    if (!rnn_layout(a, NULL, &unused, &total) || gemm > SIZE_MAX - total)
        return false;
    *out = total + gemm;
    return true;
}

/* ---- activations ------------------------------------------------------------------------ */

static void act_apply(const rt_rnn_act *f, float *x, int64_t n) {
    float al = f->alpha, be = f->beta;
    switch (f->kind) {
    case RT_RNN_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            x[i] = 1.0f / (1.0f + expf(-x[i]));
        return;
    case RT_RNN_ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            x[i] = tanhf(x[i]);
        return;
    case RT_RNN_ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        return;
    case RT_RNN_ACT_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float v = al * x[i] + be;
            x[i] = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
        return;
    case RT_RNN_ACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] >= 0.0f ? x[i] : al * x[i];
        return;
    case RT_RNN_ACT_THRESHOLDED_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > al ? x[i] : 0.0f;
        return;
    case RT_RNN_ACT_SCALED_TANH:
        for (int64_t i = 0; i < n; i++)
            x[i] = al * tanhf(be * x[i]);
        return;
    case RT_RNN_ACT_AFFINE:
        for (int64_t i = 0; i < n; i++)
            x[i] = al * x[i] + be;
        return;
    case RT_RNN_ACT_ELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] >= 0.0f ? x[i] : al * (expf(x[i]) - 1.0f);
        return;
    case RT_RNN_ACT_SOFTSIGN:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] / (1.0f + fabsf(x[i]));
        return;
    case RT_RNN_ACT_SOFTPLUS:
        /* log1p(exp(x)) overflows for large x, where it equals x in float32. */
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > 30.0f ? x[i] : log1pf(expf(x[i]));
        return;
    default:
        return;
    }
}

/* Clip, then activate: ONNX applies `clip` to every gate's input. */
static void gate(const rt_rnn_act *f, float clip, float *x, int64_t n) {
    if (clip > 0.0f)
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] < -clip ? -clip : x[i] > clip ? clip : x[i];
    act_apply(f, x, n);
}

/* ---- one step --------------------------------------------------------------------------- */

typedef struct step_job {
    const rt_rnn_args *a;
    const rnn_buffers *buf;
    const rt_rnn_act *acts; /* this direction's */
    const float *p;         /* this direction's peepholes [3 * hidden] (i, o, f), or NULL */
    int64_t d, s;
    bool reverse;
    int phase; /* gru without linear_before_reset: 1 = z and r, 2 = the rest */
} step_job;

static int64_t proj_row(const rt_rnn_args *a, int64_t t, int64_t b) {
    return a->layout == 0 ? t * a->batch + b : b * a->seq + t;
}

static int64_t y_offset(const rt_rnn_args *a, int64_t t, int64_t d, int64_t b) {
    return (a->layout == 0 ? (t * a->dirs + d) * a->batch + b : (b * a->seq + t) * a->dirs + d) *
           a->hidden;
}

static int64_t state_offset(const rt_rnn_args *a, int64_t d, int64_t b) {
    return (a->layout == 0 ? d * a->batch + b : b * a->dirs + d) * a->hidden;
}

/* The time index that step s of batch entry b processes. */
static int64_t step_time(const step_job *job, int64_t b) {
    return job->reverse ? job->buf->lens[b] - 1 - job->s : job->s;
}

static void lstm_row(const step_job *job, int64_t b, float *g, const float *x) {
    const rt_rnn_args *a = job->a;
    int64_t n = a->hidden;
    float *gi = g, *go = g + n, *gf = g + 2 * n, *gc = g + 3 * n;
    float *c = job->buf->c + b * n, *h = job->buf->h + b * n;
    const float *p = job->p;
    for (int64_t j = 0; j < 4 * n; j++)
        g[j] += x[j];
    if (p)
        for (int64_t j = 0; j < n; j++)
            gi[j] += p[j] * c[j];
    gate(&job->acts[0], a->clip, gi, n);
    if (a->input_forget) {
        for (int64_t j = 0; j < n; j++)
            gf[j] = 1.0f - gi[j];
    } else {
        if (p)
            for (int64_t j = 0; j < n; j++)
                gf[j] += p[2 * n + j] * c[j];
        gate(&job->acts[0], a->clip, gf, n);
    }
    gate(&job->acts[1], a->clip, gc, n);
    for (int64_t j = 0; j < n; j++)
        c[j] = gf[j] * c[j] + gi[j] * gc[j];
    if (p)
        for (int64_t j = 0; j < n; j++)
            go[j] += p[n + j] * c[j];
    gate(&job->acts[0], a->clip, go, n);
    memcpy(gc, c, (size_t)n * sizeof(float));
    act_apply(&job->acts[2], gc, n);
    for (int64_t j = 0; j < n; j++)
        h[j] = go[j] * gc[j];
}

/* z and r of a gru row; with linear_before_reset also the rest. */
static void gru_row(const step_job *job, int64_t b, float *g, const float *x) {
    const rt_rnn_args *a = job->a;
    const rnn_buffers *buf = job->buf;
    int64_t n = a->hidden;
    float *gz = g, *gr = g + n, *gh = g + 2 * n, *h = buf->h + b * n;
    if (job->phase != 2) {
        for (int64_t j = 0; j < 2 * n; j++)
            g[j] += x[j];
        gate(&job->acts[0], a->clip, gz, 2 * n); /* z and r are adjacent */
        if (!a->linear_before_reset) {
            for (int64_t j = 0; j < n; j++)
                buf->tmp[b * n + j] = gr[j] * h[j];
            return;
        }
        for (int64_t j = 0; j < n; j++)
            gh[j] = x[2 * n + j] + gr[j] * (gh[j] + buf->rbh[j]);
    } else {
        const float *r2 = buf->rec2 + b * n;
        for (int64_t j = 0; j < n; j++)
            gh[j] = x[2 * n + j] + r2[j];
    }
    gate(&job->acts[1], a->clip, gh, n);
    for (int64_t j = 0; j < n; j++)
        h[j] = (1.0f - gz[j]) * gh[j] + gz[j] * h[j];
}

static void rnn_row(const step_job *job, int64_t b, float *g, const float *x) {
    const rt_rnn_args *a = job->a;
    int64_t n = a->hidden;
    for (int64_t j = 0; j < n; j++)
        g[j] += x[j];
    gate(&job->acts[0], a->clip, g, n);
    memcpy(job->buf->h + b * n, g, (size_t)n * sizeof(float));
}

static void step_rows(void *arg, size_t begin, size_t end) {
    const step_job *job = arg;
    const rt_rnn_args *a = job->a;
    const rnn_buffers *buf = job->buf;
    int64_t gh = a->gates * a->hidden;
    for (size_t i = begin; i < end; i++) {
        int64_t b = (int64_t)i;
        if (job->s >= buf->lens[b]) {
            if (job->phase == 1) /* the next GEMM reads every row */
                memset(buf->tmp + b * a->hidden, 0, (size_t)a->hidden * sizeof(float));
            continue;
        }
        int64_t t = step_time(job, b);
        float *g = buf->rec + b * gh;
        const float *x = buf->proj + proj_row(a, t, b) * gh;
        if (a->cell == RT_RNN_CELL_LSTM)
            lstm_row(job, b, g, x);
        else if (a->cell == RT_RNN_CELL_GRU)
            gru_row(job, b, g, x);
        else
            rnn_row(job, b, g, x);
        if (job->phase == 1)
            continue;
        float *y = (float *)a->y->data + y_offset(a, t, job->d, b);
        memcpy(y, buf->h + b * a->hidden, (size_t)a->hidden * sizeof(float));
    }
}

/* ---- a direction ------------------------------------------------------------------------ */

/* c[m, n] = a[m, k] @ b[k, n] + bias (bias may be NULL); b has any element strides. */
static void gemm(const rnn_buffers *buf, int32_t threads, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t lda, const float *b, int64_t b_row_stride,
                 int64_t b_col_stride, float *c, int64_t ldc, const float *bias) {
    rt_gemm_f32_args g = {
        .m = m, .n = n, .k = k,
        .a = a, .a_row_stride = lda, .a_col_stride = 1,
        .b = b, .b_row_stride = b_row_stride, .b_col_stride = b_col_stride,
        .c = c, .c_row_stride = ldc,
        .column_bias = bias,
    };
    /* Packing buffers only: B is packed tile by tile. */
    rt_gemm__f32(&g, buf->gemm, rt_gemm__f32_scratch_bytes(0, 0, 0, threads), threads);
}

/* ---- the recurrent product for small batches ---------------------------------------------
 * With a few rows, packing R^T for the GEMM at every step costs more than the product
 * itself; instead each R^T row updates up to 4 output rows at once (contiguous, vectorised
 * loops), and threads split the columns. */

#define SMALL_BATCH 2
#define PRODUCT_COLS 128

typedef struct product_job {
    const float *a, *b; /* a [m, k] (row stride lda), b [k, n] (row stride ldb) */
    float *c;           /* [m, n] (row stride ldc) */
    int64_t m, n, k, lda, ldb, ldc;
} product_job;

static void product_cols(void *arg, size_t begin, size_t end) {
    const product_job *p = arg;
    int64_t j0 = (int64_t)begin * PRODUCT_COLS, j1 = (int64_t)end * PRODUCT_COLS;
    if (j1 > p->n)
        j1 = p->n;
    for (int64_t i0 = 0; i0 < p->m; i0 += 4) {
        int64_t rows = p->m - i0 < 4 ? p->m - i0 : 4;
        for (int64_t i = i0; i < i0 + rows; i++)
            memset(p->c + i * p->ldc + j0, 0, (size_t)(j1 - j0) * sizeof(float));
        for (int64_t k = 0; k < p->k; k++) {
            const float *bk = p->b + k * p->ldb;
            for (int64_t i = i0; i < i0 + rows; i++) {
                float av = p->a[i * p->lda + k];
                float *ci = p->c + i * p->ldc;
                for (int64_t j = j0; j < j1; j++)
                    ci[j] += av * bk[j];
            }
        }
    }
}

/* c[m, n] = a[m, k] @ b[k, n] with b row-major (row stride ldb): the GEMM, or for a few rows
 * the direct product. */
static void recurrent_product(const rnn_buffers *buf, int32_t threads, int64_t m, int64_t n,
                              int64_t k, const float *a, int64_t lda, const float *b,
                              int64_t ldb, float *c, int64_t ldc) {
    if (m > SMALL_BATCH) {
        gemm(buf, threads, m, n, k, a, lda, b, ldb, 1, c, ldc, NULL);
        return;
    }
    product_job job = {a, b, c, m, n, k, lda, ldb, ldc};
    size_t chunks = (size_t)((n + PRODUCT_COLS - 1) / PRODUCT_COLS);
    rt_parallel__for(threads, chunks, rt_op__grain(PRODUCT_COLS * k * m), product_cols, &job);
}

/* rt[k, j] = r[j, k] for r [rows, cols], in tiles that stay in cache. */
static void transpose(float *rt, const float *r, int64_t rows, int64_t cols) {
    const int64_t tile = 32;
    for (int64_t j0 = 0; j0 < rows; j0 += tile)
        for (int64_t k0 = 0; k0 < cols; k0 += tile)
            for (int64_t j = j0; j < j0 + tile && j < rows; j++)
                for (int64_t k = k0; k < k0 + tile && k < cols; k++)
                    rt[k * rows + j] = r[j * cols + k];
}

static void direction_bias(const rt_rnn_args *a, const rnn_buffers *buf, int64_t d) {
    int64_t n = a->hidden, gh = a->gates * n;
    memset(buf->bias, 0, (size_t)gh * sizeof(float));
    memset(buf->rbh, 0, (size_t)n * sizeof(float));
    if (!a->b)
        return;
    const float *wb = (const float *)a->b->data + d * 2 * gh, *rb = wb + gh;
    bool split = a->cell == RT_RNN_CELL_GRU && a->linear_before_reset;
    for (int64_t j = 0; j < gh; j++)
        buf->bias[j] = wb[j] + (split && j >= 2 * n ? 0.0f : rb[j]);
    if (split)
        memcpy(buf->rbh, rb + 2 * n, (size_t)n * sizeof(float));
}

static void initial_state(const rt_rnn_args *a, const rnn_buffers *buf, int64_t d) {
    int64_t n = a->hidden;
    for (int64_t b = 0; b < a->batch; b++) {
        int64_t at = state_offset(a, d, b);
        float *h = buf->h + b * n, *c = buf->c + b * n;
        if (a->h0)
            memcpy(h, (const float *)a->h0->data + at, (size_t)n * sizeof(float));
        else
            memset(h, 0, (size_t)n * sizeof(float));
        if (a->c0)
            memcpy(c, (const float *)a->c0->data + at, (size_t)n * sizeof(float));
        else
            memset(c, 0, (size_t)n * sizeof(float));
    }
}

/* An empty sequence gives zero states, as onnxruntime does (like its zero rows of y). */
static void final_state(const rt_rnn_args *a, const rnn_buffers *buf, int64_t d) {
    int64_t n = a->hidden;
    size_t bytes = (size_t)n * sizeof(float);
    for (int64_t b = 0; b < a->batch; b++) {
        int64_t at = state_offset(a, d, b);
        float *yh = (float *)a->y_h->data + at, *yc = a->y_c ? (float *)a->y_c->data + at : NULL;
        bool empty = buf->lens[b] == 0;
        if (empty)
            memset(yh, 0, bytes);
        else
            memcpy(yh, buf->h + b * n, bytes);
        if (yc && empty)
            memset(yc, 0, bytes);
        else if (yc)
            memcpy(yc, buf->c + b * n, bytes);
    }
}

static void run_direction(const rt_op_ctx *ctx, const rt_rnn_args *a, const rnn_buffers *buf,
                          int64_t d, int32_t threads) {
    int64_t n = a->hidden, gh = a->gates * n, in = a->input;
    const float *w = (const float *)a->w->data + d * gh * in;
    const float *r = (const float *)a->r->data + d * gh * n;
    step_job job = {
        .a = a, .buf = buf, .acts = a->acts[d], .d = d,
        .reverse = a->direction == 1 || (a->direction == 2 && d == 1),
        .p = a->p ? (const float *)a->p->data + d * 3 * n : NULL,
    };
    direction_bias(a, buf, d);
    gemm(buf, threads, a->seq * a->batch, gh, in, a->x->data, in, w, 1, in, buf->proj, gh,
         buf->bias);
    transpose(buf->rt, r, gh, n);
    initial_state(a, buf, d);
    bool two_phase = a->cell == RT_RNN_CELL_GRU && !a->linear_before_reset;
    size_t grain = rt_op__grain(gh * 8);
    int32_t row_threads = rt_op__threads(ctx);
    for (int64_t s = 0; s < a->seq; s++) {
        job.s = s;
        /* gru without linear_before_reset needs r before it can multiply by Rh. */
        recurrent_product(buf, threads, a->batch, two_phase ? 2 * n : gh, n, buf->h, n, buf->rt,
                          gh, buf->rec, gh);
        job.phase = two_phase ? 1 : 0;
        rt_parallel__for(row_threads, (size_t)a->batch, grain, step_rows, &job);
        if (!two_phase)
            continue;
        recurrent_product(buf, threads, a->batch, n, n, buf->tmp, n, buf->rt + 2 * n, gh,
                          buf->rec2, n);
        job.phase = 2;
        rt_parallel__for(row_threads, (size_t)a->batch, grain, step_rows, &job);
    }
    final_state(a, buf, d);
}

void rt_rnn__run(const rt_op_ctx *ctx, const rt_rnn_args *a, int32_t threads) {
    rnn_buffers buf;
    size_t total;
    rnn_layout(a, ctx->scratch, &buf, &total);
    for (int64_t b = 0; b < a->batch; b++)
        buf.lens[b] = a->seq_lens ? rt_mv__index_at(a->seq_lens, b) : a->seq;
    memset(a->y->data, 0, rt_tensor__nbytes(a->y));
    for (int64_t d = 0; d < a->dirs; d++)
        run_direction(ctx, a, &buf, d, threads);
}
