/* cuda_ops_detection.c: non_max_suppression on CUDA (float32). The three scalar parameters are
 * read back to the host (rt_cuda__with_host_params), one block selects (kernels/detection.cu),
 * and the host reads the number of rows back to give the output its size, as non_zero does.
 * Working memory is the method's device scratch, reserved at load for the planned sizes. */
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/detection/detection.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* counts [pairs + 1] int64, kept [pairs * count] int64, taken [pairs * count] bytes. */
static size_t nms_scratch(int64_t pairs, int64_t count) {
    return (size_t)(pairs + 1) * sizeof(int64_t) + (size_t)(pairs * count) * (sizeof(int64_t) + 1);
}

rt_status rt_cuda__check_non_max_suppression(rt_op_ctx *ctx) {
    const rt_tensor_value *scores = ctx->args[1]->u.t;
    int64_t pairs = scores->bounds[0] * scores->bounds[1];
    rt_cuda__reserve_scratch(ctx->backend, nms_scratch(pairs, scores->bounds[2]));
    return RT_OK;
}

static rt_status run_nms(rt_op_ctx *ctx, rt_cuda_method *cm) {
    rt_nms_problem problem;
    rt_tensor_value *out;
    RT_RETURN_IF_ERROR(rt_detection__nms_problem(ctx, &problem, &out));
    int64_t pairs = problem.batches * problem.classes, rows = 0;
    if (pairs > 0 && problem.count > 0 && problem.max_per_class > 0) {
        if (nms_scratch(pairs, problem.count) > cm->scratch_bytes)
            return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
        rt_cuda_nms_params p;
        memset(&p, 0, sizeof p);
        p.batches = problem.batches;
        p.classes = problem.classes;
        p.count = problem.count;
        p.max_per_class = problem.max_per_class;
        p.iou_threshold = problem.iou_threshold;
        p.score_threshold = problem.score_threshold;
        p.has_score_threshold = problem.has_score_threshold;
        p.center = problem.center;
        p.boxes = problem.boxes;
        p.scores = problem.scores;
        p.counts = cm->scratch;
        p.kept = p.counts + pairs + 1;
        p.taken = (unsigned char *)(p.kept + pairs * problem.count);
        p.out = out->data;
        RT_RETURN_IF_ERROR(rt_cuda__op_launch(ctx, cm, RT_CUDA_K_nms, 1, 1, 1, &p));
        RT_RETURN_IF_ERROR(rt_cuda__read_count(ctx, cm, p.counts + pairs, &rows,
                                               "selected boxes"));
    }
    int64_t sizes[2] = {rows, 3};
    return rt_op__set_output_sizes(ctx, out, "out", 2, sizes);
}

rt_status rt_cuda__run_non_max_suppression(rt_op_ctx *ctx, rt_cuda_method *cm) {
    static const size_t params[] = {2, 3, 4};
    return rt_cuda__with_host_params(ctx, cm, params, 3, run_nms);
}
