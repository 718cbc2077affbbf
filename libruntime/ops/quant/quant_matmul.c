/* quant_matmul.c: matmul_integer and qlinear_matmul (ONNX MatMulInteger and QLinearMatMul).
 *
 * numpy.matmul of int8/uint8 operands minus their zero points, summed in int32 with
 * wrap-around, then stored as int32 or requantized to int8/uint8. A parameter of a (zero point,
 * scale) is per tensor or per row: 1-D [M], or a's rank with shape [..., M, 1]; one of b is
 * per tensor or per column: 1-D [N], or b's rank with shape [..., 1, N]. Arguments, checks,
 * the parameters' layout and output sizes here; the loops are in kernels/matmul_int8.c, whose
 * work items are output tiles summed in a local buffer, so requantizing needs no scratch. */
#include <string.h>

#include "ops/matmul/matmul.h"
#include "ops/ops.h"
#include "ops/quant/quant.h"

/* ---- parameters ------------------------------------------------------------------------- */

typedef rt_quant_mm_param qmm_param; /* quant.h */
typedef rt_quant_mm_job qmm_job;

/* The batch dimensions of p (operand's rank, >= 2) against the output's. */
static bool param_batch(const rt_tensor_value *p, const rt_matmul_dims *d, qmm_param *out) {
    int64_t dense[RT_MAX_RANK];
    rt_tensor__dense_strides(dense, p->rank, p->sizes, NULL);
    int32_t lead = d->batch_rank - (p->rank - 2);
    for (int32_t i = 0; i < p->rank - 2; i++) {
        if (p->sizes[i] != 1 && p->sizes[i] != d->batch_sizes[i + lead])
            return false;
        out->batch_strides[i + lead] = p->sizes[i] == 1 ? 0 : dense[i];
    }
    return true;
}

/* p against operand a (columns false: one value per row) or b (columns true). */
static rt_status param_setup(rt_op_ctx *ctx, const rt_tensor_value *p, const char *what,
                             const rt_tensor_value *operand, bool columns, const rt_matmul_dims *d,
                             qmm_param *out) {
    memset(out, 0, sizeof *out);
    if (!p)
        return RT_OK;
    out->data = p->data;
    out->type = p->type;
    int64_t length = columns ? d->n : d->m;
    if (rt_tensor__numel(p) == 1 && (p->rank <= 1 || p->rank == operand->rank))
        return RT_OK;
    if (p->rank == 1 && p->sizes[0] == length) {
        out->stride = 1;
        return RT_OK;
    }
    if (p->rank == operand->rank && p->rank >= 2) {
        int64_t along = p->sizes[p->rank - (columns ? 1 : 2)];
        int64_t across = p->sizes[p->rank - (columns ? 2 : 1)];
        if (across == 1 && (along == 1 || along == length) && param_batch(p, d, out)) {
            out->stride = along == 1 ? 0 : columns ? 1 : p->sizes[p->rank - 1];
            return RT_OK;
        }
    }
    char tp[RT_OP_SHAPE_TEXT], to[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, rt_op__shape_code(ctx),
                       "%s %s does not fit %s %s: it must have one element, be 1-D of length "
                       "%" PRId64 ", or have %s's rank with shape %s",
                       what, rt_op__shape_text(p->sizes, p->rank, tp), columns ? "b" : "a",
                       rt_op__shape_text(operand->sizes, operand->rank, to), length,
                       columns ? "b" : "a", columns ? "[..., 1, N]" : "[..., M, 1]");
}

/* ---- ops -------------------------------------------------------------------------------- */

typedef struct qmm_args {
    rt_tensor_value *a, *b, *za, *zb, *sa, *sb, *ys, *yz, *out;
    rt_matmul_dims dims;
    qmm_job job;
} qmm_args;

static rt_status check_operands(rt_op_ctx *ctx, const qmm_args *q) {
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->a, "a", RT_QUANT8_TYPES, "int8 and uint8"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->b, "b", RT_QUANT8_TYPES, "int8 and uint8"));
    if (q->za)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->za, "a_zero_point", q->a, "a"));
    if (q->zb)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->zb, "b_zero_point", q->b, "b"));
    if (q->a->rank < 1 || q->b->rank < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "a has rank %" PRId32 " and b rank %" PRId32
                           "; both must be at least 1-D",
                           q->a->rank, q->b->rank);
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, q->out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, q->out, "out"));
    const rt_tensor_value *inputs[8] = {q->a, q->b, q->za, q->zb, q->sa, q->sb, q->ys, q->yz};
    const char *names[8] = {"a", "b", "a_zero_point", "b_zero_point", "a_scale", "b_scale",
                            "y_scale", "y_zero_point"};
    for (int i = 0; i < 8; i++)
        RT_RETURN_IF_ERROR(rt_quant__check_read(ctx, inputs[i], names[i], q->out));
    return RT_OK;
}

/* The requantization parameters of qlinear_matmul. */
static rt_status check_scales(rt_op_ctx *ctx, const qmm_args *q) {
    RT_RETURN_IF_ERROR(rt_op__check_float(ctx, q->sa, "a_scale"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->sb, "b_scale", q->sa, "a_scale"));
    RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->ys, "y_scale", q->sa, "a_scale"));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, q->out, "out", RT_QUANT8_TYPES,
                                            "int8 and uint8"));
    if (q->yz)
        RT_RETURN_IF_ERROR(rt_op__check_same_type(ctx, q->yz, "y_zero_point", q->out, "out"));
    RT_RETURN_IF_ERROR(rt_quant__check_single(ctx, q->ys, "y_scale"));
    return rt_quant__check_single(ctx, q->yz, "y_zero_point");
}

static rt_status qmm_setup(rt_op_ctx *ctx, qmm_args *q, bool requant) {
    if (requant)
        RT_RETURN_IF_ERROR(check_scales(ctx, q));
    else
        RT_RETURN_IF_ERROR(rt_op__check_type(ctx, q->out, "out", RT_I32));
    RT_RETURN_IF_ERROR(check_operands(ctx, q));
    int32_t rank = 0;
    int64_t sizes[RT_MAX_RANK];
    rt_matmul_dims *d = &q->dims;
    RT_RETURN_IF_ERROR(rt_op__matmul_shape(ctx, q->a, q->b, d, &rank, sizes));
    qmm_job *job = &q->job;
    memset(job, 0, sizeof *job);
    RT_RETURN_IF_ERROR(param_setup(ctx, q->za, "a_zero_point", q->a, false, d, &job->za));
    RT_RETURN_IF_ERROR(param_setup(ctx, q->zb, "b_zero_point", q->b, true, d, &job->zb));
    RT_RETURN_IF_ERROR(param_setup(ctx, q->sa, "a_scale", q->a, false, d, &job->sa));
    RT_RETURN_IF_ERROR(param_setup(ctx, q->sb, "b_scale", q->b, true, d, &job->sb));
    job->d = d;
    job->a = q->a->data, job->b = q->b->data;
    job->a_type = q->a->type, job->b_type = q->b->type;
    job->out = q->out->data, job->out_type = q->out->type;
    if (requant) {
        job->y_scale = q->ys->data;
        job->scale_type = q->sa->type;
        job->y_zero = rt_quant__scalar_zero_point(ctx, q->yz);
        rt_quant__range(q->out->type, &job->lo, &job->hi);
    }
    job->row_tiles = (d->m + RT_QUANT_MM_TILE_M - 1) / RT_QUANT_MM_TILE_M;
    job->col_tiles = (d->n + RT_QUANT_MM_TILE_N - 1) / RT_QUANT_MM_TILE_N;
    return rt_op__set_output_sizes(ctx, q->out, "out", rank, sizes);
}

static rt_status qmm_run(rt_op_ctx *ctx, qmm_args *q) {
    const rt_matmul_dims *d = &q->dims;
    if (d->batch_count == 0 || d->m == 0 || d->n == 0)
        return RT_OK;
    q->job.d = d;
    /* Each count is at most the output's element count, so the product cannot overflow. */
    int64_t items = d->batch_count * q->job.row_tiles * q->job.col_tiles;
    int64_t work = rt_op__mul_sat((int64_t)RT_QUANT_MM_TILE_M * RT_QUANT_MM_TILE_N,
                                  d->k > 0 ? d->k : 1);
    rt_parallel__for(rt_op__threads(ctx), (size_t)items, rt_op__grain(work),
                     rt_quant__matmul_tiles, &q->job);
    return RT_OK;
}

/* matmul_integer(a, b, a_zero_point: tensor | none, b_zero_point: tensor | none, out) */
static rt_status matmul_integer_setup(rt_op_ctx *ctx, qmm_args *q) {
    memset(q, 0, sizeof *q);
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 5));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "a", &q->a));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "b", &q->b));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "a_zero_point", &q->za));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 3, "b_zero_point", &q->zb));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "out", &q->out));
    return qmm_setup(ctx, q, false);
}

rt_status rt_ops__matmul_integer_prepare(rt_op_ctx *ctx) {
    qmm_args q;
    return matmul_integer_setup(ctx, &q);
}

rt_status rt_ops__matmul_integer_run(rt_op_ctx *ctx) {
    qmm_args q;
    RT_RETURN_IF_ERROR(matmul_integer_setup(ctx, &q));
    return qmm_run(ctx, &q);
}

/* qlinear_matmul(a, a_scale, a_zero_point: tensor | none, b, b_scale,
 *                b_zero_point: tensor | none, y_scale, y_zero_point: tensor | none, out) */
static rt_status qlinear_matmul_setup(rt_op_ctx *ctx, qmm_args *q) {
    memset(q, 0, sizeof *q);
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 9));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "a", &q->a));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "a_scale", &q->sa));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "a_zero_point", &q->za));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "b", &q->b));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 4, "b_scale", &q->sb));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 5, "b_zero_point", &q->zb));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "y_scale", &q->ys));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 7, "y_zero_point", &q->yz));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 8, "out", &q->out));
    return qmm_setup(ctx, q, true);
}

rt_status rt_ops__qlinear_matmul_prepare(rt_op_ctx *ctx) {
    qmm_args q;
    return qlinear_matmul_setup(ctx, &q);
}

rt_status rt_ops__qlinear_matmul_run(rt_op_ctx *ctx) {
    qmm_args q;
    RT_RETURN_IF_ERROR(qlinear_matmul_setup(ctx, &q));
    return qmm_run(ctx, &q);
}

rt_status rt_quant__matmul_plan(rt_op_ctx *ctx, bool requant, rt_quant_mm_plan *plan) {
    qmm_args q;
    RT_RETURN_IF_ERROR(requant ? qlinear_matmul_setup(ctx, &q) : matmul_integer_setup(ctx, &q));
    memset(plan, 0, sizeof *plan);
    plan->dims = q.dims;
    plan->a_type = q.job.a_type, plan->b_type = q.job.b_type;
    plan->scale_type = q.job.scale_type, plan->out_type = q.job.out_type;
    plan->za = q.job.za, plan->zb = q.job.zb, plan->sa = q.job.sa, plan->sb = q.job.sb;
    plan->y_scale = q.job.y_scale;
    plan->y_zero = q.job.y_zero, plan->lo = q.job.lo, plan->hi = q.job.hi;
    return RT_OK;
}
