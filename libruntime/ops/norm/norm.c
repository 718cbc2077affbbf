/* norm.c: the layer_norm, rms_norm, instance_norm, group_norm and lp_norm operators.
 *
 * The first four view x as rows of contiguous elements (layer_norm, rms_norm: the dims from
 * `axis` on;
 * instance_norm and group_norm: one (image, group) per row), split over threads, which
 * kernels/standardize.c brings to (x - mean) * inv_std * scale + bias; the output may be x
 * itself. lp_norm's kernel is kernels/lp.c. */
#include <inttypes.h>
#include <math.h>

#include "ops/norm/norm.h"
#include "ops/op_util.h"
#include "ops/ops.h"

static void run_rows(const rt_op_ctx *ctx, rt_norm_job *job, int64_t rows, rt_range_fn kernel) {
    if (rows > 0)
        rt_parallel__for(rt_op__threads(ctx), (size_t)rows, rt_op__grain(2 * job->len + 1),
                         kernel, job);
}

/* ---- shared checks ---------------------------------------------------------------------- */

/* x a float tensor; out writable, x's dtype, row-major, given x's sizes (it may be x itself). */
static rt_status check_x_out(rt_op_ctx *ctx, rt_tensor_value *x, rt_tensor_value *out) {
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, out, "out", x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", x, "x", x->rank, x->sizes));
    return rt_op__set_output_sizes(ctx, out, "out", x->rank, x->sizes);
}

/* An optional parameter tensor (scale, bias): x's dtype, row-major, not written by `out`. */
static rt_status check_param(rt_op_ctx *ctx, const rt_tensor_value *p, const char *what,
                             const rt_tensor_value *x, const rt_tensor_value *out) {
    if (!p)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, p, what, x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, p, what));
    return rt_op__check_disjoint(ctx, out, "out", p, what);
}

static rt_status check_epsilon(rt_op_ctx *ctx, size_t index, double *eps) {
    RT_RETURN_IF_ERROR(rt_op__double(ctx, index, "epsilon", eps));
    if (!(*eps >= 0) || isinf(*eps))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "epsilon must be finite and >= 0, not %g",
                           *eps);
    return RT_OK;
}

/* ---- layer_norm ------------------------------------------------------------------------- */

/* x as rows of the dims before axis by the dims from axis on (both bounded by its element
 * count). */
static void rows_and_length(const rt_tensor_value *x, int32_t axis, int64_t *rows, int64_t *len) {
    *rows = *len = 1;
    for (int32_t d = 0; d < x->rank; d++)
        *(d < axis ? rows : len) *= x->sizes[d];
}

/* p's sizes, leading 1s aside, must be the last sizes of x (from axis on): p then repeats along
 * each row with a period of its element count. */
static rt_status suffix_period(rt_op_ctx *ctx, const rt_tensor_value *p, const char *what,
                               const rt_tensor_value *x, int32_t axis, int64_t *period) {
    if (!p)
        return RT_OK;
    int32_t lead = 0;
    while (lead < p->rank && p->sizes[lead] == 1)
        lead++;
    int32_t kept = p->rank - lead;
    bool ok = kept <= x->rank - axis;
    for (int32_t i = 0; ok && i < kept; i++)
        ok = p->sizes[lead + i] == x->sizes[x->rank - kept + i];
    if (!ok) {
        char tp[RT_OP_SHAPE_TEXT], tx[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s %s must match the trailing sizes of x %s from axis %" PRId32
                           " (leading 1s aside)",
                           what, rt_op__shape_text(p->sizes, p->rank, tp),
                           rt_op__shape_text(x->sizes, x->rank, tx), axis);
    }
    *period = rt_tensor__numel(p);
    return RT_OK;
}

typedef struct layer_args {
    rt_tensor_value *x, *scale, *bias, *out, *mean, *inv_std;
    int32_t axis;
    double eps;
    int64_t scale_period, bias_period;
} layer_args;

/* mean and inv_std: x's dtype, sizes x.shape[:axis] + [1] * (rank - axis), apart from every
 * other tensor. */
static rt_status layer_check_stat(rt_op_ctx *ctx, layer_args *a, rt_tensor_value *t,
                                  const char *what) {
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, t, what, a->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, t, what));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, t, what));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, t, what, a->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, t, what, a->out, "out"));
    if (a->scale)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, t, what, a->scale, "scale"));
    if (a->bias)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, t, what, a->bias, "bias"));
    int64_t sizes[RT_MAX_RANK];
    for (int32_t d = 0; d < a->x->rank; d++)
        sizes[d] = d < a->axis ? a->x->sizes[d] : 1;
    return rt_op__set_output_sizes(ctx, t, what, a->x->rank, sizes);
}

static rt_status layer_setup(rt_op_ctx *ctx, layer_args *a) {
    if (ctx->nargs != 6 && ctx->nargs != 8)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "expects 6 arguments (x, scale, bias, axis, epsilon, out) or 8 (with "
                           "mean and inv_std outputs), but the instruction has %zu",
                           ctx->nargs);
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 1, "scale", &a->scale));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &a->bias));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "axis", &axis));
    RT_RETURN_IF_ERROR(check_epsilon(ctx, 4, &a->eps));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 5, "out", &a->out));
    a->mean = a->inv_std = NULL;
    if (ctx->nargs == 8) {
        RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "mean", &a->mean));
        RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 7, "inv_std", &a->inv_std));
    }
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, a->x->rank, "axis", &a->axis));
    RT_RETURN_IF_ERROR(check_x_out(ctx, a->x, a->out));
    RT_RETURN_IF_ERROR(check_param(ctx, a->scale, "scale", a->x, a->out));
    RT_RETURN_IF_ERROR(check_param(ctx, a->bias, "bias", a->x, a->out));
    RT_RETURN_IF_ERROR(suffix_period(ctx, a->scale, "scale", a->x, a->axis, &a->scale_period));
    RT_RETURN_IF_ERROR(suffix_period(ctx, a->bias, "bias", a->x, a->axis, &a->bias_period));
    if (!a->mean)
        return RT_OK;
    RT_RETURN_IF_ERROR(layer_check_stat(ctx, a, a->mean, "mean"));
    RT_RETURN_IF_ERROR(layer_check_stat(ctx, a, a->inv_std, "inv_std"));
    return rt_op__check_disjoint(ctx, a->inv_std, "inv_std", a->mean, "mean");
}

rt_status rt_ops__layer_norm_prepare(rt_op_ctx *ctx) {
    layer_args a;
    return layer_setup(ctx, &a);
}

rt_status rt_ops__layer_norm_run(rt_op_ctx *ctx) {
    layer_args a;
    RT_RETURN_IF_ERROR(layer_setup(ctx, &a));
    int64_t rows, len;
    rows_and_length(a.x, a.axis, &rows, &len);
    rt_norm_job job = {
        .x = a.x->data, .scale = a.scale ? a.scale->data : NULL,
        .bias = a.bias ? a.bias->data : NULL, .out = a.out->data,
        .mean = a.mean ? a.mean->data : NULL, .inv_std = a.inv_std ? a.inv_std->data : NULL,
        .len = len, .eps = a.eps, .scale_period = a.scale_period, .bias_period = a.bias_period,
    };
    run_rows(ctx, &job, rows, rt_norm__layer_rows(a.x->type));
    return RT_OK;
}

/* ---- rms_norm --------------------------------------------------------------------------- */

typedef struct rms_args {
    rt_tensor_value *x, *scale, *out;
    int32_t axis;
    double eps;
    int64_t scale_period;
} rms_args;

/* rms_norm(x, scale: tensor | none, axis: int, epsilon: double, out) */
static rt_status rms_setup(rt_op_ctx *ctx, rms_args *a) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 1, "scale", &a->scale));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis));
    RT_RETURN_IF_ERROR(check_epsilon(ctx, 3, &a->eps));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "out", &a->out));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, a->x->rank, "axis", &a->axis));
    RT_RETURN_IF_ERROR(check_x_out(ctx, a->x, a->out));
    RT_RETURN_IF_ERROR(check_param(ctx, a->scale, "scale", a->x, a->out));
    return suffix_period(ctx, a->scale, "scale", a->x, a->axis, &a->scale_period);
}

rt_status rt_ops__rms_norm_prepare(rt_op_ctx *ctx) {
    rms_args a;
    return rms_setup(ctx, &a);
}

rt_status rt_ops__rms_norm_run(rt_op_ctx *ctx) {
    rms_args a;
    RT_RETURN_IF_ERROR(rms_setup(ctx, &a));
    int64_t rows, len;
    rows_and_length(a.x, a.axis, &rows, &len);
    rt_norm_job job = {.x = a.x->data, .scale = a.scale ? a.scale->data : NULL,
                       .out = a.out->data, .len = len, .eps = a.eps,
                       .scale_period = a.scale_period};
    run_rows(ctx, &job, rows, rt_norm__rms_rows(a.x->type));
    return RT_OK;
}

/* ---- instance_norm and group_norm ------------------------------------------------------- */

typedef struct channel_args {
    rt_tensor_value *x, *scale, *bias, *out;
    int64_t groups;
    double eps;
    bool per_group;
} channel_args;

/* scale or bias: rank 1 with one value per channel, or (group_norm) one per group. */
static rt_status channel_param(rt_op_ctx *ctx, channel_args *a, const rt_tensor_value *p,
                               const char *what, bool allow_per_group) {
    if (!p)
        return RT_OK;
    RT_RETURN_IF_ERROR(check_param(ctx, p, what, a->x, a->out));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, p, what, 1));
    int64_t channels = a->x->sizes[1], n = p->sizes[0];
    if (n == channels)
        return RT_OK;
    if (allow_per_group && n == a->groups) {
        a->per_group = true;
        return RT_OK;
    }
    if (allow_per_group)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "%s has %" PRId64 " elements; it needs one per channel (%" PRId64
                           ") or one per group (%" PRId64 ")",
                           what, n, channels, a->groups);
    return rt_op__fail(ctx, rt_op__shape_code(ctx),
                       "%s has %" PRId64 " elements, but x has %" PRId64 " channels", what, n,
                       channels);
}

/* instance_norm (groups < 0: one group per channel) or group_norm. */
static rt_status channel_setup(rt_op_ctx *ctx, channel_args *a, bool grouped) {
    size_t i = 0;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, grouped ? 6 : 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, i++, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, i++, "scale", &a->scale));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, i++, "bias", &a->bias));
    if (grouped) {
        RT_RETURN_IF_ERROR(rt_op__int(ctx, i++, "num_groups", &a->groups));
        if (a->groups < 1)
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "num_groups must be >= 1, not %" PRId64,
                               a->groups);
    }
    RT_RETURN_IF_ERROR(check_epsilon(ctx, i++, &a->eps));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, i, "out", &a->out));
    if (ctx->preparing && a->x->rank < 2)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "x has rank %" PRId32 "; it must be [N, C, ...] (rank >= 2)",
                           a->x->rank);
    RT_RETURN_IF_ERROR(check_x_out(ctx, a->x, a->out));
    int64_t channels = a->x->sizes[1];
    if (!grouped)
        a->groups = channels > 0 ? channels : 1;
    if (channels % a->groups != 0) {
        char tx[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "num_groups %" PRId64 " must divide the channels of x %s", a->groups,
                           rt_op__shape_text(a->x->sizes, a->x->rank, tx));
    }
    a->per_group = false;
    RT_RETURN_IF_ERROR(channel_param(ctx, a, a->scale, "scale", grouped));
    bool scale_per_group = a->per_group;
    a->per_group = false;
    RT_RETURN_IF_ERROR(channel_param(ctx, a, a->bias, "bias", grouped));
    /* One value per group and one per channel differ only when the counts differ. */
    if (a->scale && a->bias && scale_per_group != a->per_group)
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "scale has %" PRId64 " elements and bias %" PRId64 "; both need one "
                           "per channel or both one per group",
                           a->scale->sizes[0], a->bias->sizes[0]);
    a->per_group = a->per_group || scale_per_group;
    return RT_OK;
}

static rt_status channel_run(rt_op_ctx *ctx, bool grouped) {
    channel_args a;
    RT_RETURN_IF_ERROR(channel_setup(ctx, &a, grouped));
    int64_t spatial = 1; /* bounded by the element count of x */
    for (int32_t d = 2; d < a.x->rank; d++)
        spatial *= a.x->sizes[d];
    int64_t group_channels = a.x->sizes[1] / a.groups;
    rt_norm_job job = {
        .x = a.x->data, .scale = a.scale ? a.scale->data : NULL,
        .bias = a.bias ? a.bias->data : NULL, .out = a.out->data,
        .len = group_channels * spatial, .eps = a.eps, .groups = a.groups,
        .group_channels = group_channels, .spatial = spatial, .per_group = a.per_group,
    };
    /* x's channels may be 0: then there are no rows (and no elements). */
    int64_t rows = a.x->sizes[1] > 0 ? a.x->sizes[0] * a.groups : 0;
    run_rows(ctx, &job, rows, rt_norm__channel_rows(a.x->type));
    return RT_OK;
}

rt_status rt_ops__instance_norm_prepare(rt_op_ctx *ctx) {
    channel_args a;
    return channel_setup(ctx, &a, false);
}

rt_status rt_ops__instance_norm_run(rt_op_ctx *ctx) {
    return channel_run(ctx, false);
}

rt_status rt_ops__group_norm_prepare(rt_op_ctx *ctx) {
    channel_args a;
    return channel_setup(ctx, &a, true);
}

rt_status rt_ops__group_norm_run(rt_op_ctx *ctx) {
    return channel_run(ctx, true);
}

/* ---- lp_norm ---------------------------------------------------------------------------- */

typedef struct lp_args {
    rt_tensor_value *x, *out;
    int32_t axis;
    int64_t p;
} lp_args;

static rt_status lp_setup(rt_op_ctx *ctx, lp_args *a) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &a->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "p", &a->p));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &a->out));
    if (a->p != 1 && a->p != 2)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "p must be 1 or 2, not %" PRId64, a->p);
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, a->x->rank, "axis", &a->axis));
    return check_x_out(ctx, a->x, a->out);
}

rt_status rt_ops__lp_norm_prepare(rt_op_ctx *ctx) {
    lp_args a;
    return lp_setup(ctx, &a);
}

rt_status rt_ops__lp_norm_run(rt_op_ctx *ctx) {
    lp_args a;
    RT_RETURN_IF_ERROR(lp_setup(ctx, &a));
    if (rt_tensor__numel(a.x) == 0)
        return RT_OK;
    /* The products are bounded by the element count of x, which is not 0. */
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < a.x->rank; d++) {
        if (d < a.axis)
            outer *= a.x->sizes[d];
        else if (d > a.axis)
            inner *= a.x->sizes[d];
    }
    rt_norm_lp_job job = {.x = a.x->data, .out = a.out->data, .n = a.x->sizes[a.axis],
                          .inner = inner,
                          .blocks = (inner + RT_NORM_LP_BLOCK - 1) / RT_NORM_LP_BLOCK, .p = a.p};
    int64_t width = inner < RT_NORM_LP_BLOCK ? inner : RT_NORM_LP_BLOCK;
    rt_parallel__for(rt_op__threads(ctx), (size_t)(outer * job.blocks),
                     rt_op__grain(2 * job.n * width),
                     rt_norm__lp_blocks(a.x->type), &job);
    return RT_OK;
}
