/* layout.c: depth_to_space, space_to_depth (DCR and CRD orders) and trilu. Any dtype. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* ---- depth_to_space, space_to_depth ----------------------------------------------------- */

enum { ORDER_DCR, ORDER_CRD };

typedef struct block_args {
    rt_tensor_value *x, *out;
    int64_t block;
    int64_t mode;
} block_args;

/* The shared checks; the shapes are each op's. */
static rt_status block_setup(rt_op_ctx *ctx, block_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "blocksize", &args->block));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "mode", &args->mode));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &args->out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, args->x, "x", args->out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, args->x, "x", 4));
    if (args->block < 1 || args->block > INT32_MAX)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "blocksize %" PRId64 " must be in [1, %d]",
                           args->block, INT32_MAX);
    if (args->mode != ORDER_DCR && args->mode != ORDER_CRD)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "mode %" PRId64 " must be 0 (DCR) or 1 (CRD)",
                           args->mode);
    return RT_OK;
}

/* x [N, C, H, W] -> out [N, C / b^2, H * b, W * b] */
static rt_status depth_to_space_setup(rt_op_ctx *ctx, block_args *args) {
    RT_RETURN_IF_ERROR(block_setup(ctx, args));
    const int64_t *s = args->x->sizes;
    int64_t b = args->block, area = b * b, sizes[4];
    if (s[1] % area != 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "x has %" PRId64 " channels, not a "
                           "multiple of blocksize^2 = %" PRId64, s[1], area);
    sizes[0] = s[0];
    sizes[1] = s[1] / area;
    if (!rt_op__mul(s[2], b, &sizes[2]) || !rt_op__mul(s[3], b, &sizes[3]))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output size overflows int64");
    return rt_op__set_output_sizes(ctx, args->out, "out", 4, sizes);
}

/* x [N, C, H, W] -> out [N, C * b^2, H / b, W / b] */
static rt_status space_to_depth_setup(rt_op_ctx *ctx, block_args *args) {
    RT_RETURN_IF_ERROR(block_setup(ctx, args));
    const int64_t *s = args->x->sizes;
    int64_t b = args->block, sizes[4];
    if (s[2] % b != 0 || s[3] % b != 0)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "x's height %" PRId64 " and width %"
                           PRId64 " must be multiples of blocksize %" PRId64, s[2], s[3], b);
    sizes[0] = s[0];
    if (!rt_op__mul(s[1], b * b, &sizes[1]))
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "the output size overflows int64");
    sizes[2] = s[2] / b;
    sizes[3] = s[3] / b;
    return rt_op__set_output_sizes(ctx, args->out, "out", 4, sizes);
}

rt_status rt_ops__depth_to_space_prepare(rt_op_ctx *ctx) {
    block_args args;
    return depth_to_space_setup(ctx, &args);
}

rt_status rt_ops__space_to_depth_prepare(rt_op_ctx *ctx) {
    block_args args;
    return space_to_depth_setup(ctx, &args);
}

/* Both ops are a 6-D transpose: out viewed in 6-D reads x's 6-D view through permuted
 * strides (perm: out dimension -> x6 dimension). */
static void block_copy(const rt_op_ctx *ctx, const block_args *args, const int64_t *x6,
                       const int *perm) {
    int64_t x_strides[6], src_strides[6], out6[6];
    rt_tensor__dense_strides(x_strides, 6, x6, NULL);
    for (int i = 0; i < 6; i++) {
        src_strides[i] = x_strides[perm[i]];
        out6[i] = x6[perm[i]];
    }
    rt_mv__strided_copy(ctx, args->out->data, args->x->data, src_strides, 6, out6,
                        args->out->elem_size);
}

rt_status rt_ops__depth_to_space_run(rt_op_ctx *ctx) {
    block_args args;
    RT_RETURN_IF_ERROR(depth_to_space_setup(ctx, &args));
    if (rt_tensor__numel(args.out) == 0)
        return RT_OK;
    const int64_t *s = args.x->sizes;
    int64_t b = args.block, c = s[1] / (b * b);
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3};
    if (args.mode == ORDER_DCR) {
        int64_t x6[6] = {s[0], b, b, c, s[2], s[3]};
        block_copy(ctx, &args, x6, dcr);
    } else {
        int64_t x6[6] = {s[0], c, b, b, s[2], s[3]};
        block_copy(ctx, &args, x6, crd);
    }
    return RT_OK;
}

rt_status rt_ops__space_to_depth_run(rt_op_ctx *ctx) {
    block_args args;
    RT_RETURN_IF_ERROR(space_to_depth_setup(ctx, &args));
    if (rt_tensor__numel(args.out) == 0)
        return RT_OK;
    const int64_t *s = args.x->sizes;
    int64_t b = args.block;
    int64_t x6[6] = {s[0], s[1], s[2] / b, b, s[3] / b, b};
    static const int dcr[6] = {0, 3, 5, 1, 2, 4}, crd[6] = {0, 1, 3, 5, 2, 4};
    block_copy(ctx, &args, x6, args.mode == ORDER_DCR ? dcr : crd);
    return RT_OK;
}

/* ---- trilu ------------------------------------------------------------------------------ */

typedef struct trilu_args {
    rt_tensor_value *x, *out;
    rt_mv_ints k;
    bool upper;
} trilu_args;

/* trilu(x, k, upper: bool, out); k an int or a one-element int32/int64 tensor. */
static rt_status trilu_setup(rt_op_ctx *ctx, trilu_args *args) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", &args->x));
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "k", false, &args->k));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "upper", &args->upper));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &args->out));
    rt_tensor_value *x = args->x, *out = args->out;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, x, "x", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, x, "x", out));
    if (x->rank < 2)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "x has rank %" PRId32 "; trilu needs >= 2",
                           x->rank);
    if (args->k.tensor)
        RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, out, "out", args->k.tensor, "k"));
    bool count_known = !(ctx->preparing && args->k.tensor && args->k.tensor->dynamic);
    if (count_known && args->k.count != 1)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "k has %zu elements; it must hold one",
                           args->k.count);
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, x->sizes, sizeof sizes);
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, out, "out", x, "x", x->rank, sizes));
    return rt_op__set_output_sizes(ctx, out, "out", x->rank, sizes);
}

rt_status rt_ops__trilu_prepare(rt_op_ctx *ctx) {
    trilu_args args;
    return trilu_setup(ctx, &args);
}

typedef struct trilu_job {
    char *out;
    const char *x;
    int64_t rows, cols, k; /* k clamped to [-(rows + cols), rows + cols] */
    bool upper;
    size_t elem;
} trilu_job;

/* Matrix rows: copy the row, then zero the columns outside the kept triangle. */
static void trilu_range(void *arg, size_t begin, size_t end) {
    const trilu_job *job = arg;
    size_t row_bytes = (size_t)job->cols * job->elem;
    for (size_t r = begin; r < end; r++) {
        int64_t i = (int64_t)r % job->rows;
        char *dst = job->out + r * row_bytes;
        if (dst != job->x + r * row_bytes)
            memcpy(dst, job->x + r * row_bytes, row_bytes);
        /* upper keeps j >= i + k, lower keeps j <= i + k */
        int64_t edge = i + job->k + (job->upper ? 0 : 1);
        edge = edge < 0 ? 0 : edge > job->cols ? job->cols : edge;
        if (job->upper)
            memset(dst, 0, (size_t)edge * job->elem);
        else
            memset(dst + (size_t)edge * job->elem, 0, (size_t)(job->cols - edge) * job->elem);
    }
}

rt_status rt_ops__trilu_run(rt_op_ctx *ctx) {
    trilu_args args;
    RT_RETURN_IF_ERROR(trilu_setup(ctx, &args));
    const rt_tensor_value *out = args.out;
    int64_t numel = rt_tensor__numel(out);
    if (numel == 0)
        return RT_OK;
    trilu_job job = {out->data, args.x->data, out->sizes[out->rank - 2],
                     out->sizes[out->rank - 1], rt_mv__ints_at(&args.k, 0), args.upper,
                     out->elem_size};
    int64_t limit = job.rows + job.cols;
    job.k = job.k < -limit ? -limit : job.k > limit ? limit : job.k;
    rt_parallel__for(rt_op__threads(ctx), (size_t)(numel / job.cols), rt_op__grain(job.cols),
                     trilu_range, &job);
    return RT_OK;
}
