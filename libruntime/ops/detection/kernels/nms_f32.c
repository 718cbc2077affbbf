/* nms_f32.c: non-maximum suppression in float32, ONNX's NonMaxSuppression. For each (batch,
 * class) the boxes scoring above the threshold (all of them without one) are taken best first,
 * equal scores by the lower box index, and a box is kept unless its intersection over union
 * with a box already kept for the class exceeds iou_threshold, until max_per_class are kept.
 * The arithmetic is float32 throughout, as in onnx's reference implementation. */
#include <stdlib.h>

#include "ops/detection/detection.h"

typedef struct nms_candidate {
    float score;
    int64_t box;
} nms_candidate;

size_t rt_detection__nms_scratch_bytes(int64_t count) {
    return (size_t)(count > 0 ? count : 0) * (sizeof(nms_candidate) + sizeof(int64_t));
}

/* Best first: the higher score, then the lower box index; a NaN score after every number. A
 * total order, so qsort's result is unique (and its comparisons consistent). */
static int best_first(const void *a, const void *b) {
    const nms_candidate *x = a, *y = b;
    bool x_nan = x->score != x->score, y_nan = y->score != y->score;
    if (x_nan != y_nan)
        return x_nan ? 1 : -1;
    if (!x_nan && x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->box > y->box) - (x->box < y->box);
}

/* A box's extent on one axis as (lo, hi) from its two corner coordinates. */
static void ordered(float a, float b, float *lo, float *hi) {
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
}

static void extent(const float *box, bool center, float lo[2], float hi[2]) {
    if (center) { /* (x, y, width, height): x and y are the centre */
        for (int axis = 0; axis < 2; axis++) {
            float half = box[2 + axis] / 2;
            lo[axis] = box[axis] - half;
            hi[axis] = box[axis] + half;
        }
    } else { /* (y1, x1, y2, x2), either corner first */
        ordered(box[1], box[3], &lo[0], &hi[0]);
        ordered(box[0], box[2], &lo[1], &hi[1]);
    }
}

/* Whether b suppresses a: their intersection over union exceeds the threshold. Boxes that do
 * not overlap, or have no area, never suppress. */
static bool suppresses(const float *a, const float *b, bool center, float threshold) {
    float alo[2], ahi[2], blo[2], bhi[2];
    extent(a, center, alo, ahi);
    extent(b, center, blo, bhi);
    float side[2];
    for (int axis = 0; axis < 2; axis++) {
        float lo = alo[axis] > blo[axis] ? alo[axis] : blo[axis];
        float hi = ahi[axis] < bhi[axis] ? ahi[axis] : bhi[axis];
        if (hi <= lo)
            return false;
        side[axis] = hi - lo;
    }
    float inter = side[0] * side[1];
    float area_a = (ahi[0] - alo[0]) * (ahi[1] - alo[1]);
    float area_b = (bhi[0] - blo[0]) * (bhi[1] - blo[1]);
    float uni = area_a + area_b - inter;
    if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0)
        return false;
    return inter / uni > threshold;
}

int64_t rt_detection__nms_f32(const rt_nms_problem *p, int64_t *out, void *scratch) {
    nms_candidate *candidates = scratch;
    int64_t *kept = (int64_t *)(void *)(candidates + p->count);
    int64_t rows = 0;
    for (int64_t b = 0; b < p->batches; b++) {
        const float *boxes = p->boxes + b * p->count * 4;
        for (int64_t c = 0; c < p->classes; c++) {
            const float *scores = p->scores + (b * p->classes + c) * p->count;
            int64_t n = 0;
            for (int64_t i = 0; i < p->count; i++)
                if (!p->has_score_threshold || scores[i] > p->score_threshold)
                    candidates[n++] = (nms_candidate){scores[i], i};
            qsort(candidates, (size_t)n, sizeof *candidates, best_first);
            int64_t num_kept = 0;
            for (int64_t i = 0; i < n && num_kept < p->max_per_class; i++) {
                const float *box = boxes + candidates[i].box * 4;
                bool keep = true;
                for (int64_t k = 0; k < num_kept && keep; k++)
                    keep = !suppresses(box, boxes + kept[k] * 4, p->center, p->iou_threshold);
                if (!keep)
                    continue;
                kept[num_kept++] = candidates[i].box;
                out[rows * 3] = b;
                out[rows * 3 + 1] = c;
                out[rows * 3 + 2] = candidates[i].box;
                rows++;
            }
        }
    }
    return rows;
}
