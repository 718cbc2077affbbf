/* cuda_ops_rnn.c: lstm, gru and rnn on CUDA (float32). The host loops over time as the CPU op does
 * (ops/rnn/kernels/cells_f32.c): per direction one GEMM projects every step's input, then each
 * step multiplies the batch's state by R^T (a GEMM, cuBLAS when installed) and one kernel
 * (kernels/rnn.cu) applies the gates; gru without linear_before_reset needs a second product and
 * kernel per step. Working memory is the method's device scratch, reserved at load. sequence_lens
 * is read back to the host and checked at every execute, as the CPU checks it. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/rnn/rnn.h"

/* Scratch pieces, each on a 64-byte boundary (floats unless said). */
typedef struct rnn_scratch {
    float *proj, *rec, *rec2, *h, *c, *tmp;
    int64_t *lens;
} rnn_scratch;

static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* The layout for a's sizes at `base` (NULL: only the total). Sizes are within what prepare
 * checked (the CPU's larger scratch did not overflow). */
static size_t rnn_layout(const rt_rnn_args *a, char *base, rnn_scratch *s) {
    size_t gh = (size_t)(a->gates * a->hidden), bh = (size_t)(a->batch * a->hidden);
    size_t rows = (size_t)(a->seq * a->batch), at = 0;
    struct {
        void **ptr;
        size_t bytes;
    } pieces[] = {
        {(void **)&s->proj, rows * gh * sizeof(float)}, {(void **)&s->rec, (size_t)a->batch *
                                                                           gh * sizeof(float)},
        {(void **)&s->rec2, bh * sizeof(float)}, {(void **)&s->h, bh * sizeof(float)},
        {(void **)&s->c, bh * sizeof(float)}, {(void **)&s->tmp, bh * sizeof(float)},
        {(void **)&s->lens, (size_t)a->batch * sizeof(int64_t)},
    };
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        *pieces[i].ptr = base ? base + at : NULL;
        at += round64(pieces[i].bytes);
    }
    return at;
}

static rt_status check_cell(rt_op_ctx *ctx, rt_rnn_cell cell) {
    rt_rnn_args a;
    RT_RETURN_IF_ERROR(rt_rnn__setup(ctx, &a, cell)); /* at the bounds */
    rnn_scratch unused;
    rt_cuda__reserve_scratch(ctx->backend, rnn_layout(&a, NULL, &unused));
    return RT_OK;
}

rt_status rt_cuda__check_lstm(rt_op_ctx *ctx) { return check_cell(ctx, RT_RNN_CELL_LSTM); }
rt_status rt_cuda__check_gru(rt_op_ctx *ctx) { return check_cell(ctx, RT_RNN_CELL_GRU); }
rt_status rt_cuda__check_rnn(rt_op_ctx *ctx) { return check_cell(ctx, RT_RNN_CELL_RNN); }

/* Every entry's length: sequence_lens read back and checked, or the sequence length. */
static rt_status upload_lengths(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_rnn_args *a,
                                int64_t *device_lens) {
    size_t n = (size_t)a->batch;
    if (n == 0)
        return RT_OK;
    int64_t *lens = malloc(n * sizeof *lens), *raw = malloc(n * sizeof *raw);
    rt_status status = lens && raw ? RT_OK : rt_error__oom("sequence lengths");
    const rt_cuda_driver *cu = cm->device->cu;
    if (status == RT_OK && a->seq_lens != NULL) {
        status = rt_cuda__check(cu->memcpy_dtoh_async(raw, (CUdeviceptr)(uintptr_t)
                                                      a->seq_lens->data,
                                                      n * a->seq_lens->elem_size, cm->stream),
                                "reading sequence_lens");
        if (status == RT_OK)
            status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading sequence_lens");
        if (status != RT_OK)
            status = rt_op__fail(ctx, status, "could not read sequence_lens");
        if (status == RT_OK)
            status = rt_rnn__check_lengths(ctx, a, raw);
        for (size_t b = 0; status == RT_OK && b < n; b++)
            lens[b] = a->seq_lens->type == RT_I32 ? ((const int32_t *)(const void *)raw)[b]
                                                  : raw[b];
    } else if (status == RT_OK) {
        for (size_t b = 0; b < n; b++)
            lens[b] = a->seq;
    }
    if (status == RT_OK) {
        /* From pageable memory the driver takes the bytes before it returns. */
        status = rt_cuda__check(cu->memcpy_htod_async((CUdeviceptr)(uintptr_t)device_lens,
                                                      lens, n * sizeof *lens, cm->stream),
                                "uploading the sequence lengths");
        if (status != RT_OK)
            status = rt_op__fail(ctx, status, "could not upload the sequence lengths");
    }
    free(lens);
    free(raw);
    return status;
}

/* c [m, n] = a [m, k] @ b^T with b stored [n, k] (float32). */
static rt_status product(rt_op_ctx *ctx, rt_cuda_method *cm, int64_t m, int64_t n, int64_t k,
                         const void *a, const void *b, void *c) {
    rt_cuda_gemm_problem g;
    memset(&g, 0, sizeof g);
    g.type = RT_F32;
    g.m = m;
    g.n = n;
    g.k = k;
    g.trans_b = true;
    g.a = a;
    g.b = b;
    g.c = c;
    g.batch_count = 1;
    return rt_cuda__gemm(ctx, cm, &g);
}

static rt_status launch(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_kernel k,
                        rt_cuda_rnn_params *p) {
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p->batch * p->hidden, 256), 1, 1, p);
}

static rt_status run_direction(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_rnn_args *a,
                               const rnn_scratch *s, rt_cuda_rnn_params *p, int64_t d) {
    int64_t n = a->hidden, gh = a->gates * n;
    const float *w = (const float *)a->w->data + d * gh * a->input;
    const float *r = (const float *)a->r->data + d * gh * n;
    bool two_phase = a->cell == RT_RNN_CELL_GRU && !a->linear_before_reset;
    p->d = d;
    p->reverse = a->direction == 1 || (a->direction == 2 && d == 1);
    for (int k = 0; k < RT_RNN_MAX_ACTS; k++) {
        p->act_kind[k] = a->acts[d][k].kind;
        p->act_alpha[k] = a->acts[d][k].alpha;
        p->act_beta[k] = a->acts[d][k].beta;
    }
    p->bias = a->b ? (const float *)a->b->data + d * 2 * gh : NULL;
    p->p = a->p ? (const float *)a->p->data + d * 3 * n : NULL;
    p->rec_stride = two_phase ? 2 * n : gh;
    RT_RETURN_IF_ERROR(product(ctx, cm, a->seq * a->batch, gh, a->input, a->x->data, w,
                               s->proj));
    RT_RETURN_IF_ERROR(launch(ctx, cm, RT_CUDA_K_rnn_init, p));
    for (int64_t step = 0; step < a->seq; step++) {
        p->s = step;
        RT_RETURN_IF_ERROR(product(ctx, cm, a->batch, p->rec_stride, n, s->h, r, s->rec));
        p->phase = two_phase ? 1 : 0;
        RT_RETURN_IF_ERROR(launch(ctx, cm, RT_CUDA_K_rnn_step, p));
        if (!two_phase)
            continue;
        /* (r * H') @ Rh^T: Rh is rows 2n.. of r */
        RT_RETURN_IF_ERROR(product(ctx, cm, a->batch, n, n, s->tmp, r + 2 * n * n, s->rec2));
        p->phase = 2;
        RT_RETURN_IF_ERROR(launch(ctx, cm, RT_CUDA_K_rnn_step, p));
    }
    return launch(ctx, cm, RT_CUDA_K_rnn_final, p);
}

static rt_status run_cell(rt_op_ctx *ctx, rt_cuda_method *cm, rt_rnn_cell cell) {
    rt_rnn_args a;
    RT_RETURN_IF_ERROR(rt_rnn__setup(ctx, &a, cell));
    rnn_scratch s;
    size_t need = rnn_layout(&a, NULL, &s);
    if (need > cm->scratch_bytes)
        return rt_op__fail(ctx, RT_INTERNAL, "its working memory needs %zu bytes of device "
                           "scratch, more than the %zu planned at load", need, cm->scratch_bytes);
    rnn_layout(&a, cm->scratch, &s);
    RT_RETURN_IF_ERROR(upload_lengths(ctx, cm, &a, s.lens));
    size_t y_bytes = rt_tensor__nbytes(a.y);
    if (y_bytes > 0) {
        rt_status status = rt_cuda__check(cm->device->cu->memset_d8_async(
                                              (CUdeviceptr)(uintptr_t)a.y->data, 0, y_bytes,
                                              cm->stream),
                                          "zero-filling y");
        if (status != RT_OK)
            return rt_op__fail(ctx, status, "could not zero-fill y");
    }
    if (a.batch == 0 || a.hidden == 0)
        return RT_OK;
    rt_cuda_rnn_params p;
    memset(&p, 0, sizeof p);
    p.batch = a.batch;
    p.hidden = a.hidden;
    p.seq = a.seq;
    p.dirs = a.dirs;
    p.cell = (int32_t)cell;
    p.layout = (int32_t)a.layout;
    p.input_forget = a.input_forget;
    p.linear_before_reset = a.linear_before_reset;
    p.clip = a.clip;
    p.proj = s.proj;
    p.h0 = a.h0 ? a.h0->data : NULL;
    p.c0 = a.c0 ? a.c0->data : NULL;
    p.lens = s.lens;
    p.rec = s.rec;
    p.rec2 = s.rec2;
    p.h = s.h;
    p.c = s.c;
    p.tmp = s.tmp;
    p.y = a.y->data;
    p.y_h = a.y_h->data;
    p.y_c = a.y_c ? a.y_c->data : NULL;
    for (int64_t d = 0; d < a.dirs; d++)
        RT_RETURN_IF_ERROR(run_direction(ctx, cm, &a, &s, &p, d));
    return RT_OK;
}

rt_status rt_cuda__run_lstm(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return run_cell(ctx, cm, RT_RNN_CELL_LSTM);
}
rt_status rt_cuda__run_gru(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return run_cell(ctx, cm, RT_RNN_CELL_GRU);
}
rt_status rt_cuda__run_rnn(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return run_cell(ctx, cm, RT_RNN_CELL_RNN);
}
