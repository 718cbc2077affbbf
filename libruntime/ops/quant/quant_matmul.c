/* quant_matmul.c: matmul_integer and qlinear_matmul (ONNX MatMulInteger and QLinearMatMul).
 *
 * numpy.matmul of int8/uint8 operands minus their zero points, summed in int32 with
 * wrap-around, then stored as int32 or requantized to int8/uint8. A parameter of a (zero point,
 * scale) is per tensor or per row: 1-D [M], or a's rank with shape [..., M, 1]; one of b is
 * per tensor or per column: 1-D [N], or b's rank with shape [..., 1, N]. Work items are output
 * tiles summed in a local buffer, so requantizing needs no scratch. */
#include <string.h>

#include "ops/matmul/matmul.h"
#include "ops/ops.h"
#include "ops/quant/quant.h"

/* ---- parameters ------------------------------------------------------------------------- */

typedef rt_quant_mm_param qmm_param; /* quant.h */

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

static int64_t param_offset(const qmm_param *p, const int64_t *index, int32_t rank) {
    int64_t off = 0;
    for (int32_t i = 0; i < rank; i++)
        off += index[i] * p->batch_strides[i];
    return off;
}

/* ---- kernel ----------------------------------------------------------------------------- */

/* Output tiles of TILE_M x TILE_N. */
#define TILE_M 16
#define TILE_N 128

typedef struct qmm_job {
    const rt_matmul_dims *d;
    const void *a, *b;
    rt_type a_type, b_type;
    qmm_param za, zb, sa, sb; /* zero points; scales (qlinear_matmul only) */
    const void *y_scale;      /* NULL: store int32 (matmul_integer) */
    rt_type scale_type;
    int64_t y_zero, lo, hi;
    void *out;
    rt_type out_type;
    int64_t row_tiles, col_tiles;
} qmm_job;

/* One tile: rows [i0, i1), columns [j0, j1), K from 0; za per row, zb per column of it. */
typedef struct qmm_tile {
    const void *a, *b; /* this batch entry's matrices */
    int64_t k, n, i0, i1, j0, j1;
    int16_t za[TILE_M], zb[TILE_N];
    uint32_t acc[TILE_M * TILE_N];
} qmm_tile;

/* K-outer: each row of b, minus its zero points, is widened once into int16 and added into
 * all the tile's rows; the int16 x int16 products vectorise without 32-bit multiplies.
 * Operands minus zero points lie in [-255, 255], so the int16 values and int32 products are
 * exact; only the sums wrap. */
#define DEFINE_QMM_SUM(sfx, TA, TB)                                                       \
    static void tile_sum__##sfx(qmm_tile *t) {                                            \
        const TA *a = t->a;                                                               \
        const TB *b = t->b;                                                               \
        int64_t width = t->j1 - t->j0, rows = t->i1 - t->i0;                              \
        int16_t brow[TILE_N];                                                             \
        for (int64_t p = 0; p < t->k; p++) {                                              \
            const TB *bp = b + p * t->n + t->j0;                                          \
            for (int64_t j = 0; j < width; j++)                                           \
                brow[j] = (int16_t)(bp[j] - t->zb[j]);                                    \
            for (int64_t r = 0; r < rows; r++) {                                          \
                int16_t x = (int16_t)(a[(t->i0 + r) * t->k + p] - t->za[r]);              \
                uint32_t *row = t->acc + r * TILE_N;                                      \
                for (int64_t j = 0; j < width; j++)                                       \
                    row[j] += (uint32_t)((int32_t)x * brow[j]);                           \
            }                                                                             \
        }                                                                                 \
    }
DEFINE_QMM_SUM(i8_i8, int8_t, int8_t)
DEFINE_QMM_SUM(i8_u8, int8_t, uint8_t)
DEFINE_QMM_SUM(u8_i8, uint8_t, int8_t)
DEFINE_QMM_SUM(u8_u8, uint8_t, uint8_t)

static void tile_sum(const qmm_job *job, qmm_tile *t) {
    bool a8 = job->a_type == RT_I8, b8 = job->b_type == RT_I8;
    if (a8)
        b8 ? tile_sum__i8_i8(t) : tile_sum__i8_u8(t);
    else
        b8 ? tile_sum__u8_i8(t) : tile_sum__u8_u8(t);
}

/* The tile's zero points: one per row of a, one per column of b. */
static void tile_zero_points(const qmm_job *job, qmm_tile *t, int64_t za_off, int64_t zb_off) {
    for (int64_t i = t->i0; i < t->i1; i++)
        t->za[i - t->i0] = job->za.data ? (int16_t)rt_quant__load_int(
                                              job->za.data, job->za.type,
                                              za_off + i * job->za.stride)
                                        : 0;
    for (int64_t j = t->j0; j < t->j1; j++)
        t->zb[j - t->j0] = job->zb.data ? (int16_t)rt_quant__load_int(
                                              job->zb.data, job->zb.type,
                                              zb_off + j * job->zb.stride)
                                        : 0;
}

/* Store the tile of output matrix `out_off`: int32, or requantized with the scales at the
 * given offsets. */
static void tile_store(const qmm_job *job, const qmm_tile *t, int64_t out_off, int64_t sa_off,
                       int64_t sb_off) {
    int64_t n = job->d->n;
    for (int64_t i = t->i0; i < t->i1; i++) {
        const uint32_t *row = t->acc + (i - t->i0) * TILE_N;
        int64_t base = out_off + i * n;
        if (!job->y_scale) {
            int32_t *o = (int32_t *)job->out + base;
            for (int64_t j = t->j0; j < t->j1; j++)
                o[j] = rt_quant__as_i32(row[j - t->j0]);
            continue;
        }
        int64_t ia = sa_off + i * job->sa.stride;
        for (int64_t j = t->j0; j < t->j1; j++) {
            double mult = rt_quant__multiplier(job->scale_type, job->sa.data, ia, job->sb.data,
                                               sb_off + j * job->sb.stride, job->y_scale, 0);
            int64_t q = rt_quant__requantize(rt_quant__as_i32(row[j - t->j0]), mult,
                                             job->y_zero, job->lo, job->hi);
            rt_quant__store8(job->out, job->out_type, base + j, q);
        }
    }
}

static void qmm_tiles(void *arg, size_t begin, size_t end) {
    const qmm_job *job = arg;
    const rt_matmul_dims *d = job->d;
    qmm_tile t;
    int64_t tiles = job->row_tiles * job->col_tiles;
    for (size_t item = begin; item < end; item++) {
        int64_t batch = (int64_t)item / tiles, tile = (int64_t)item % tiles;
        int64_t index[RT_MAX_RANK], rest = batch, a_off = 0, b_off = 0;
        for (int32_t i = d->batch_rank - 1; i >= 0; i--) {
            index[i] = rest % d->batch_sizes[i];
            rest /= d->batch_sizes[i];
            a_off += index[i] * d->a_batch_strides[i];
            b_off += index[i] * d->b_batch_strides[i];
        }
        t.a = (const char *)job->a + a_off; /* one-byte elements */
        t.b = (const char *)job->b + b_off;
        t.k = d->k, t.n = d->n;
        t.i0 = tile / job->col_tiles * TILE_M, t.j0 = tile % job->col_tiles * TILE_N;
        t.i1 = t.i0 + TILE_M < d->m ? t.i0 + TILE_M : d->m;
        t.j1 = t.j0 + TILE_N < d->n ? t.j0 + TILE_N : d->n;
        tile_zero_points(job, &t, param_offset(&job->za, index, d->batch_rank),
                         param_offset(&job->zb, index, d->batch_rank));
        memset(t.acc, 0, sizeof t.acc);
        tile_sum(job, &t);
        tile_store(job, &t, batch * d->m * d->n, param_offset(&job->sa, index, d->batch_rank),
                   param_offset(&job->sb, index, d->batch_rank));
    }
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
    job->row_tiles = (d->m + TILE_M - 1) / TILE_M;
    job->col_tiles = (d->n + TILE_N - 1) / TILE_N;
    return rt_op__set_output_sizes(ctx, q->out, "out", rank, sizes);
}

static rt_status qmm_run(rt_op_ctx *ctx, qmm_args *q) {
    const rt_matmul_dims *d = &q->dims;
    if (d->batch_count == 0 || d->m == 0 || d->n == 0)
        return RT_OK;
    q->job.d = d;
    /* Each count is at most the output's element count, so the product cannot overflow. */
    int64_t items = d->batch_count * q->job.row_tiles * q->job.col_tiles;
    int64_t work = rt_op__mul_sat((int64_t)TILE_M * TILE_N, d->k > 0 ? d->k : 1);
    rt_parallel__for(rt_op__threads(ctx), (size_t)items, rt_op__grain(work), qmm_tiles, &q->job);
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
