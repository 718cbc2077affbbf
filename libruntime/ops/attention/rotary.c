/* rotary.c: rotary position embedding, the rotation queries and keys get before attention.
 *
 *   rotary(x, cos, sin, interleaved: bool, layout: int, out)
 *
 * x [B, H, S, D] ([B, S, H, D] with layout 1), cos and sin [Bc, S, R] (Bc 1 or B, R even,
 * R <= D), out x's shape (it may be x): for each row of x at batch b and position s, the first
 * R elements become x * cos[b, s] + rotate(x) * sin[b, s], where rotate pairs element i with
 * i + R/2 (or, interleaved, 2k with 2k + 1) as (a, b) -> (-b, a); the others are copied.
 * The tables hold each angle twice (Llama's cat(freqs, freqs), or repeated pairwise when
 * interleaved), as the exporters' graphs compute them, so x * cos + rotate_half(x) * sin is
 * this op exactly. */
#include <inttypes.h>

#include "ops/attention/attention.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct rotary_args {
    rt_tensor_value *x, *cos, *sin, *out;
    bool interleaved;
    int64_t layout;
    int64_t batch, heads, seq, dim, rotated;
} rotary_args;

static rt_status check_table(rt_op_ctx *ctx, const rotary_args *a, const rt_tensor_value *t,
                             const char *what) {
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, t, what, a->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, t, what, 3));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, t, what));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", t, what));
    char ts[RT_OP_SHAPE_TEXT];
    if ((t->sizes[0] != 1 && t->sizes[0] != a->batch) || t->sizes[1] != a->seq ||
        t->sizes[2] != a->rotated)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s is %s; it must be [1 or %" PRId64 ", %" PRId64 ", %" PRId64 "] "
                           "(batch, positions, cos's rotated size)", what,
                           rt_op__shape_text(t->sizes, t->rank, ts), a->batch, a->seq,
                           a->rotated);
    return RT_OK;
}

static rt_status rotary_setup(rt_op_ctx *ctx, rotary_args *a) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 6));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "cos", &a->cos));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 2, "sin", &a->sin));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "interleaved", &a->interleaved));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "layout", &a->layout));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 5, "out", &a->out));
    if (a->layout != 0 && a->layout != 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "layout must be 0 ([B, H, S, D]) or 1 ([B, S, H, D]), not %" PRId64,
                           a->layout);
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, a->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, a->x, "x", 4));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, a->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, a->out, "out", a->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, a->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, a->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, a->out, "out", a->x, "x", 4, a->x->sizes));
    const int64_t *s = a->x->sizes;
    a->batch = s[0];
    a->heads = s[a->layout ? 2 : 1];
    a->seq = s[a->layout ? 1 : 2];
    a->dim = s[3];
    a->rotated = a->cos->rank == 3 ? a->cos->sizes[2] : -1;
    if (a->rotated < 0 || a->rotated % 2 || a->rotated > a->dim)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "cos's last size (the rotated part) is %" PRId64 "; it must be even "
                           "and at most x's last size, %" PRId64, a->rotated, a->dim);
    RT_RETURN_IF_ERROR(check_table(ctx, a, a->cos, "cos"));
    RT_RETURN_IF_ERROR(check_table(ctx, a, a->sin, "sin"));
    return rt_op__set_output_sizes(ctx, a->out, "out", 4, a->x->sizes);
}

rt_status rt_ops__rotary_prepare(rt_op_ctx *ctx) {
    rotary_args a;
    return rotary_setup(ctx, &a);
}

typedef struct rotary_job {
    const rotary_args *a;
    int64_t pos_stride; /* rows between one position and the next in x */
} rotary_job;

/* Rows of x in memory order; row -> (batch, position) through the layout. */
#define ROTARY_ROWS(T)                                                                        \
    static void rotary_rows_##T(void *arg, size_t begin, size_t end) {                       \
        const rotary_job *job = arg;                                                          \
        const rotary_args *a = job->a;                                                        \
        int64_t d = a->dim, r = a->rotated, half = r / 2;                                     \
        for (size_t row = begin; row < end; row++) {                                          \
            int64_t b = (int64_t)row / (a->heads * a->seq);                                  \
            int64_t s = (int64_t)row / job->pos_stride % a->seq;                             \
            int64_t t = (a->cos->sizes[0] == 1 ? 0 : b) * a->seq + s;                        \
            const T *x = (const T *)a->x->data + (int64_t)row * d;                            \
            const T *c = (const T *)a->cos->data + t * r, *sn = (const T *)a->sin->data + t * r; \
            T *o = (T *)a->out->data + (int64_t)row * d;                                      \
            if (a->interleaved) {                                                             \
                for (int64_t k = 0; k < r; k += 2) {                                          \
                    T x0 = x[k], x1 = x[k + 1];                                               \
                    o[k] = x0 * c[k] - x1 * sn[k];                                            \
                    o[k + 1] = x1 * c[k + 1] + x0 * sn[k + 1];                                \
                }                                                                             \
            } else {                                                                          \
                for (int64_t k = 0; k < half; k++) {                                          \
                    T x0 = x[k], x1 = x[k + half];                                            \
                    o[k] = x0 * c[k] - x1 * sn[k];                                            \
                    o[k + half] = x1 * c[k + half] + x0 * sn[k + half];                       \
                }                                                                             \
            }                                                                                 \
            if (o != x)                                                                       \
                for (int64_t k = r; k < d; k++)                                               \
                    o[k] = x[k];                                                              \
        }                                                                                     \
    }
ROTARY_ROWS(float)
ROTARY_ROWS(double)

rt_status rt_ops__rotary_run(rt_op_ctx *ctx) {
    rotary_args a;
    RT_RETURN_IF_ERROR(rotary_setup(ctx, &a));
    int64_t rows = a.batch * a.heads * a.seq;
    if (rows == 0 || a.dim == 0)
        return RT_OK;
    /* x's rows: [B, H, S] (the position varies fastest) or [B, S, H] (each position H rows). */
    rotary_job job = {.a = &a, .pos_stride = a.layout ? a.heads : 1};
    rt_parallel__for(rt_op__threads(ctx), (size_t)rows, rt_op__grain(3 * a.dim),
                     a.x->type == RT_F32 ? rotary_rows_float : rotary_rows_double, &job);
    return RT_OK;
}
