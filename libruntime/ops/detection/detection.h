/* detection.h: the detection family: non_max_suppression's operator (non_max_suppression.c)
 * and its kernel (kernels/nms_f32.c). */
#ifndef RT_OPS_DETECTION_H
#define RT_OPS_DETECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"

/* One non_max_suppression problem: boxes [batches, count, 4], scores [batches, classes,
 * count], both float32 and dense. center: boxes are (x, y, width, height) rather than two
 * corners (y1, x1, y2, x2), either way round. */
typedef struct rt_nms_problem {
    const float *boxes, *scores;
    int64_t batches, classes, count;
    int64_t max_per_class; /* >= 0 */
    float iou_threshold;
    bool has_score_threshold;
    float score_threshold;
    bool center;
} rt_nms_problem;

/* Reads and checks non_max_suppression's arguments (on the host: a backend with device
 * tensors reads the three scalars back first) into a problem, and its output. */
rt_status rt_detection__nms_problem(rt_op_ctx *ctx, rt_nms_problem *p, rt_tensor_value **out);

/* Scratch the kernel needs for problems of at most `count` boxes. */
size_t rt_detection__nms_scratch_bytes(int64_t count);

/* The selected boxes, class by class of each batch entry, each class's best first, as rows
 * (batch, class, box) of out (int64 [*, 3], room for batches * classes * count rows); returns
 * the number of rows written. */
int64_t rt_detection__nms_f32(const rt_nms_problem *p, int64_t *out, void *scratch);

#endif
