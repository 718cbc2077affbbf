/* attention.c: the attention operator, softmax(q k^T * scale + mask) v in one pass.
 *
 *   attention(q, k, v, mask: tensor | none, kv_lengths: tensor | none, scale: double,
 *             causal: int, softcap: double, layout: int, out)
 *
 * q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] -> out [B, Hq, Sq, Dv], each
 * [B, S, H, D] instead where its `layout` bit says so (attention.h). Query head h reads kv
 * head h / (Hq / Hkv) (grouped-query attention). The kernels work through blocks of keys with
 * a running maximum and sum (online softmax), so no score matrix is ever formed. */
#include <inttypes.h>
#include <math.h>

#include "ops/attention/attention.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct attn_args {
    rt_tensor_value *q, *k, *v, *mask, *lengths, *out;
    double scale, softcap;
    int64_t causal, layout;
} attn_args;

/* [B, H, S, D] sizes and strides of a rank-4 tensor in its layout. */
typedef struct bhsd {
    int64_t b, h, s, d;
    rt_attn_view strides;
} bhsd;

static bhsd view_of(const rt_tensor_value *t, bool seq_major) {
    int hd = seq_major ? 2 : 1, sd = seq_major ? 1 : 2;
    return (bhsd){.b = t->sizes[0], .h = t->sizes[hd], .s = t->sizes[sd], .d = t->sizes[3],
                  .strides = {t->strides[0], t->strides[hd], t->strides[sd]}};
}

static rt_status check_operand(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                               const rt_tensor_value *q) {
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, t, what, q, "q"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, t, what, 4));
    return rt_op__check_default_layout(ctx, t, what);
}

static rt_status mismatch(rt_op_ctx *ctx, const char *what, int64_t got, const char *of,
                          int64_t want) {
    return rt_op__fail(ctx, rt_op__shape_code(ctx),
                       "%s is %" PRId64 " but %s is %" PRId64, what, got, of, want);
}

static rt_status check_shapes(rt_op_ctx *ctx, const attn_args *a, bhsd *q, bhsd *k, bhsd *v) {
    *q = view_of(a->q, a->layout & RT_ATTN_Q_SEQ_MAJOR);
    *k = view_of(a->k, a->layout & RT_ATTN_K_SEQ_MAJOR);
    *v = view_of(a->v, a->layout & RT_ATTN_V_SEQ_MAJOR);
    if (k->b != q->b)
        return mismatch(ctx, "k's batch", k->b, "q's", q->b);
    if (v->b != q->b)
        return mismatch(ctx, "v's batch", v->b, "q's", q->b);
    if (k->d != q->d)
        return mismatch(ctx, "k's head size", k->d, "q's", q->d);
    if (v->h != k->h)
        return mismatch(ctx, "v's head count", v->h, "k's", k->h);
    if (v->s != k->s)
        return mismatch(ctx, "v's sequence length", v->s, "k's", k->s);
    if (k->h == 0 ? q->h != 0 : q->h % k->h != 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "q has %" PRId64 " heads, not a multiple of k's %" PRId64, q->h,
                           k->h);
    return RT_OK;
}

/* mask: q's float type or bool, rank <= 4, right-aligned against [B, Hq, Sq, Skv]: each size 1
 * or the full one, except the last, which may be short of Skv (the keys past it are masked). */
static rt_status check_mask(rt_op_ctx *ctx, const attn_args *a, const bhsd *q, const bhsd *k,
                            rt_attn_job *job) {
    const rt_tensor_value *m = a->mask;
    if (!m)
        return RT_OK;
    if (m->type != RT_BOOL)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, m, "mask", a->q, "q"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, m, "mask"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", m, "mask"));
    if (m->rank > 4)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "mask has rank %" PRId32 "; at most 4",
                           m->rank);
    const int64_t full[4] = {q->b, q->h, q->s, k->s};
    static const char *const dims[4] = {"batch", "head", "query", "key"};
    for (int d = 0; d < 4; d++) {
        int md = m->rank - 4 + d;
        int64_t size = md >= 0 ? m->sizes[md] : 1;
        job->mask_strides[d] = md >= 0 && size != 1 ? m->strides[md] : 0;
        if (d == 3) {
            /* (a dynamic mask's bound may exceed the keys: its size is checked at run) */
            if (size > full[3] && !(ctx->preparing && m->dynamic))
                return mismatch(ctx, "mask's key size", size, "the key count", full[3]);
            job->mask_strides[3] = md >= 0 ? m->strides[md] : 0;
            job->mask_len = md >= 0 ? size : full[3];
        } else if (size != 1 && size != full[d]) {
            return rt_op__fail(ctx, rt_op__shape_code(ctx),
                               "mask's %s size is %" PRId64 "; it must be 1 or %" PRId64,
                               dims[d], size, full[d]);
        }
    }
    job->mask = m->data;
    job->mask_is_bool = m->type == RT_BOOL;
    return RT_OK;
}

static rt_status check_lengths(rt_op_ctx *ctx, const attn_args *a, int64_t batch) {
    const rt_tensor_value *t = a->lengths;
    if (!t)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, t, "kv_lengths",
                                            RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64),
                                            "int32 and int64"));
    int64_t n = rt_tensor__numel(t);
    if (t->rank > 1 || (n != 1 && n != batch))
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "kv_lengths has %" PRId64 " elements; it needs 1 or one per batch "
                           "row (%" PRId64 ")", n, batch);
    return rt_op__check_disjoint(ctx, a->out, "out", t, "kv_lengths");
}

static rt_status attn_setup(rt_op_ctx *ctx, attn_args *a, rt_attn_job *job) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 10));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "q", &a->q));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "k", &a->k));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "v", &a->v));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 3, "mask", &a->mask));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 4, "kv_lengths", &a->lengths));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, 5, "scale", &a->scale));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 6, "causal", &a->causal));
    RT_RETURN_IF_ERROR(rt_op__double(ctx, 7, "softcap", &a->softcap));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 8, "layout", &a->layout));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 9, "out", &a->out));
    if (!isfinite(a->scale))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "scale must be finite, not %g", a->scale);
    if (!(a->softcap >= 0) || isinf(a->softcap))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "softcap must be finite and >= 0 (0: none), not %g", a->softcap);
    if (a->causal < RT_ATTN_NOT_CAUSAL || a->causal > RT_ATTN_CAUSAL_BOTTOM_RIGHT)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "causal must be 0 (none), 1 (top-left) or 2 (bottom-right), not "
                           "%" PRId64, a->causal);
    if (a->layout < 0 || a->layout > RT_ATTN_LAYOUT_BITS)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "layout must be in [0, 15], not %" PRId64,
                           a->layout);
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, a->q, "q"));
    RT_RETURN_IF_ERROR(check_operand(ctx, a->q, "q", a->q));
    RT_RETURN_IF_ERROR(check_operand(ctx, a->k, "k", a->q));
    RT_RETURN_IF_ERROR(check_operand(ctx, a->v, "v", a->q));
    RT_RETURN_IF_ERROR(check_operand(ctx, a->out, "out", a->q));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, a->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", a->q, "q"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", a->k, "k"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", a->v, "v"));

    bhsd q, k, v;
    RT_RETURN_IF_ERROR(check_shapes(ctx, a, &q, &k, &v));
    *job = (rt_attn_job){.q = a->q->data, .k = a->k->data, .v = a->v->data,
                         .qs = q.strides, .ks = k.strides, .vs = v.strides,
                         .batch = q.b, .q_heads = q.h, .kv_heads = k.h, .q_len = q.s,
                         .kv_len = k.s, .head_dim = q.d, .v_dim = v.d, .scale = a->scale,
                         .softcap = a->softcap, .causal = (int)a->causal};
    RT_RETURN_IF_ERROR(check_mask(ctx, a, &q, &k, job));
    RT_RETURN_IF_ERROR(check_lengths(ctx, a, q.b));

    bool out_seq = a->layout & RT_ATTN_OUT_SEQ_MAJOR;
    int64_t sizes[4] = {q.b, out_seq ? q.s : q.h, out_seq ? q.h : q.s, v.d};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, a->out, "out", 4, sizes));
    job->out = a->out->data;
    job->os = view_of(a->out, out_seq).strides;
    return RT_OK;
}

/* Tile rows at most: a whole group of q heads always fits (see rt_attn__tile_queries). */
static int64_t planned_rows(const rt_tensor_value *q, int64_t layout) {
    int64_t heads = q->bounds[layout & RT_ATTN_Q_SEQ_MAJOR ? 2 : 1];
    return heads > RT_ATTN_TILE_ROWS ? heads : RT_ATTN_TILE_ROWS;
}

static size_t slot_bytes(const attn_args *a) {
    int64_t rows = planned_rows(a->q, a->layout), d = a->q->bounds[3], dv = a->v->bounds[3];
    return a->q->type == RT_F32 ? rt_attn__f32_slot_bytes(rows, d, dv)
                                : rt_attn__f64_slot_bytes(rows, d, dv);
}

/* Scratch: the lengths as int64 (one per batch row), then a slot per thread. */
static size_t lengths_bytes(const attn_args *a) {
    return a->lengths ? ((size_t)a->q->bounds[0] * sizeof(int64_t) + 63) / 64 * 64 : 0;
}

rt_status rt_ops__attention_job(rt_op_ctx *ctx, rt_attn_job *job) {
    attn_args a;
    return attn_setup(ctx, &a, job);
}

rt_status rt_ops__attention_prepare(rt_op_ctx *ctx) {
    attn_args a;
    rt_attn_job job;
    RT_RETURN_IF_ERROR(attn_setup(ctx, &a, &job));
    ctx->scratch_bytes = lengths_bytes(&a) +
                         slot_bytes(&a) * (size_t)rt_threadpool__hardware_threads();
    return RT_OK;
}

static int64_t length_at(const rt_tensor_value *t, int64_t i) {
    return t->type == RT_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

rt_status rt_ops__attention_check_lengths(rt_op_ctx *ctx, const rt_attn_job *job) {
    const rt_tensor_value *t = ctx->args[4]->kind == RT_VALUE_TENSOR ? ctx->args[4]->u.t : NULL;
    for (int64_t i = 0, n = t ? rt_tensor__numel(t) : 0; i < n; i++) {
        int64_t len = length_at(t, i);
        if (len < 0 || len > job->kv_len)
            return rt_op__fail(ctx, RT_INVALID_ARGUMENT,
                               "kv_lengths[%" PRId64 "] is %" PRId64 "; it must be in [0, %"
                               PRId64 "] (the keys there are)", i, len, job->kv_len);
    }
    return RT_OK;
}

/* The lengths, checked, as int64 at the front of scratch. */
static rt_status read_lengths(rt_op_ctx *ctx, const attn_args *a, rt_attn_job *job) {
    if (!a->lengths)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_ops__attention_check_lengths(ctx, job));
    int64_t n = rt_tensor__numel(a->lengths), *dst = ctx->scratch;
    for (int64_t i = 0; i < n; i++)
        dst[i] = length_at(a->lengths, i);
    job->kv_lengths = dst;
    job->kv_lengths_stride = n == 1 ? 0 : 1;
    return RT_OK;
}

/* Threads: no more than there are tiles, nor than the work pays for (about 64K multiply-adds
 * each; a thread costs a few microseconds to wake). */
static int32_t busy_threads(const rt_op_ctx *ctx, const rt_attn_job *job) {
    int64_t tiles = job->batch * job->kv_heads *
                    ((job->q_len + job->tile_queries - 1) / job->tile_queries);
    int64_t work = rt_op__mul_sat(rt_op__mul_sat(job->batch * job->q_heads, job->q_len),
                                  rt_op__mul_sat(job->kv_len, job->head_dim + job->v_dim));
    int64_t most = 1 + work / 65536, threads = rt_op__slot_threads(ctx);
    if (most < threads)
        threads = most;
    return (int32_t)(tiles < threads ? tiles : threads);
}

rt_status rt_ops__attention_run(rt_op_ctx *ctx) {
    attn_args a;
    rt_attn_job job;
    RT_RETURN_IF_ERROR(attn_setup(ctx, &a, &job));
    RT_RETURN_IF_ERROR(read_lengths(ctx, &a, &job));
    if (job.batch == 0 || job.q_heads == 0 || job.q_len == 0 || job.v_dim == 0)
        return RT_OK;
    int64_t group = job.q_heads / job.kv_heads, rows = planned_rows(a.q, a.layout);
    job.tile_queries = rt_attn__tile_queries(group, job.q_len);
    if (group * job.tile_queries > rows)
        job.tile_queries = 1; /* rows >= every head count, so one query per head fits */
    job.scratch = (char *)ctx->scratch + lengths_bytes(&a);
    job.slot_bytes = slot_bytes(&a);
    job.slot_rows = rows;
    int32_t threads = busy_threads(ctx, &job);
    (a.q->type == RT_F32 ? rt_attn__f32 : rt_attn__f64)(&job, threads);
    return RT_OK;
}

int64_t rt_attn__key_limit(const rt_attn_job *job, int64_t b, int64_t query) {
    int64_t len = job->kv_lengths ? job->kv_lengths[b * job->kv_lengths_stride] : job->kv_len;
    int64_t limit = job->mask && job->mask_len < len ? job->mask_len : len;
    int64_t frontier = job->causal == RT_ATTN_CAUSAL_TOP_LEFT       ? query + 1
                       : job->causal == RT_ATTN_CAUSAL_BOTTOM_RIGHT ? query + 1 + len - job->q_len
                                                                    : limit;
    if (frontier < limit)
        limit = frontier;
    return limit < 0 ? 0 : limit;
}
