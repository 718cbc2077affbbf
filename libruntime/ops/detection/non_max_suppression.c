/* non_max_suppression.c: the non_max_suppression operator (ONNX NonMaxSuppression).
 *
 * non_max_suppression(boxes, scores, max_per_class, iou_threshold, score_threshold,
 *                     center_point_box, out)
 * boxes float32 [B, N, 4]; scores float32 [B, C, N]; max_per_class an int32 / int64 tensor of
 * one element or none (0: nothing selected); iou_threshold and score_threshold float32
 * tensors of one element or none (0, and no threshold); center_point_box 0 (corners) or 1
 * (centre and size). out int64 [M, 3], rows (batch, class, box): a data-dependent size, planned
 * for every box of every class ([B * C * N, 3] at the bounds) and sized at each run. The
 * selection is kernels/nms_f32.c. */
#include <inttypes.h>

#include "ops/detection/detection.h"
#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct nms_args {
    rt_tensor_value *boxes, *scores, *max_per_class, *iou_threshold, *score_threshold, *out;
    int64_t center;
} nms_args;

/* An optional one-element parameter: its dtype, and exactly one element (checked at run too,
 * for a dynamic one). */
static rt_status check_scalar(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                              uint32_t types, const char *expected) {
    if (t == NULL)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, t, what, types, expected));
    if (t->rank > 1 || rt_tensor__numel(t) != 1) {
        char ts[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "%s has shape %s; it must hold one "
                           "element", what, rt_op__shape_text(t->sizes, t->rank, ts));
    }
    return RT_OK;
}

static rt_status nms_setup(rt_op_ctx *ctx, nms_args *a) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 7));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "boxes", &a->boxes));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "scores", &a->scores));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "max_per_class", &a->max_per_class));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 3, "iou_threshold", &a->iou_threshold));
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 4, "score_threshold", &a->score_threshold));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 5, "center_point_box", &a->center));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 6, "out", &a->out));
    if (a->center != 0 && a->center != 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "center_point_box must be 0 or 1, not %" PRId64,
                           a->center);
    const rt_tensor_value *boxes = a->boxes, *scores = a->scores;
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, boxes, "boxes", RT_F32));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, scores, "scores", RT_F32));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, boxes, "boxes", 3));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, scores, "scores", 3));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, boxes, "boxes"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, scores, "scores"));
    char tb[RT_OP_SHAPE_TEXT], ts[RT_OP_SHAPE_TEXT];
    if (boxes->sizes[2] != 4 || scores->sizes[0] != boxes->sizes[0] ||
        scores->sizes[2] != boxes->sizes[1])
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "boxes %s and scores %s do not fit: boxes must be [B, N, 4] and "
                           "scores [B, C, N]", rt_op__shape_text(boxes->sizes, 3, tb),
                           rt_op__shape_text(scores->sizes, 3, ts));
    RT_RETURN_IF_ERROR(check_scalar(ctx, a->max_per_class, "max_per_class",
                                    RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64),
                                    "int32 and int64"));
    RT_RETURN_IF_ERROR(check_scalar(ctx, a->iou_threshold, "iou_threshold",
                                    RT_TYPE_BIT(RT_F32), "float32"));
    RT_RETURN_IF_ERROR(check_scalar(ctx, a->score_threshold, "score_threshold",
                                    RT_TYPE_BIT(RT_F32), "float32"));
    RT_RETURN_IF_ERROR(rt_op__check_type(ctx, a->out, "out", RT_I64));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, a->out, "out", 2));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, a->out, "out"));
    for (size_t i = 0; i < 5; i++) {
        static const char *names[] = {"boxes", "scores", "max_per_class", "iou_threshold",
                                      "score_threshold"};
        const rt_tensor_value *in = ctx->args[i]->kind == RT_VALUE_TENSOR ? ctx->args[i]->u.t
                                                                          : NULL;
        if (in != NULL)
            RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, a->out, "out", in, names[i]));
    }
    if (ctx->preparing) {
        int64_t most;
        if (!rt_tensor__checked_numel(scores->bounds, 3, &most))
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "scores has an invalid shape");
        if (a->out->bounds[1] != 3 || a->out->bounds[0] < most) {
            char to[RT_OP_SHAPE_TEXT];
            return rt_op__fail(ctx, RT_INVALID_PROGRAM, "out is planned as %s; it needs [%" PRId64
                               ", 3] (every box of every class) to hold every case",
                               rt_op__shape_text(a->out->bounds, 2, to), most);
        }
    }
    return RT_OK;
}

rt_status rt_ops__non_max_suppression_prepare(rt_op_ctx *ctx) {
    nms_args a;
    RT_RETURN_IF_ERROR(nms_setup(ctx, &a));
    ctx->scratch_bytes = rt_detection__nms_scratch_bytes(a.boxes->bounds[1]);
    int64_t sizes[2] = {a.out->bounds[0], 3};
    return rt_op__set_output_sizes(ctx, a.out, "out", 2, sizes);
}

rt_status rt_detection__nms_problem(rt_op_ctx *ctx, rt_nms_problem *p, rt_tensor_value **out) {
    nms_args a;
    RT_RETURN_IF_ERROR(nms_setup(ctx, &a));
    *out = a.out;
    *p = (rt_nms_problem){
        .boxes = a.boxes->data, .scores = a.scores->data,
        .batches = a.boxes->sizes[0], .classes = a.scores->sizes[1], .count = a.boxes->sizes[1],
        .center = a.center == 1,
    };
    if (a.max_per_class != NULL) {
        int64_t most = a.max_per_class->type == RT_I32 ? *(const int32_t *)a.max_per_class->data
                                                       : *(const int64_t *)a.max_per_class->data;
        p->max_per_class = most > 0 ? most : 0;
    }
    if (a.iou_threshold != NULL)
        p->iou_threshold = *(const float *)a.iou_threshold->data;
    if (a.score_threshold != NULL) {
        p->has_score_threshold = true;
        p->score_threshold = *(const float *)a.score_threshold->data;
    }
    return RT_OK;
}

rt_status rt_ops__non_max_suppression_run(rt_op_ctx *ctx) {
    rt_nms_problem p;
    rt_tensor_value *out;
    RT_RETURN_IF_ERROR(rt_detection__nms_problem(ctx, &p, &out));
    if (rt_detection__nms_scratch_bytes(p.count) > ctx->scratch_bytes)
        return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
    int64_t rows = rt_detection__nms_f32(&p, out->data, ctx->scratch);
    int64_t sizes[2] = {rows, 3};
    return rt_op__set_output_sizes(ctx, out, "out", 2, sizes);
}
