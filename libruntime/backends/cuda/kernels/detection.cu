// detection.cu: non_max_suppression (ops/detection/kernels/nms_f32.c's rules), in one block of
// RT_BLOCK threads: each thread selects for its (batch, class) pairs, then thread 0 writes the
// rows in order (the host reads the total back to give the output its size).
#include "common.cuh"

// Whether candidate box i of a class comes before box j: the higher score, NaN after every
// number, then the lower index.
__device__ inline bool nms_before(const float *scores, int64_t i, int64_t j) {
    float a = scores[i], b = scores[j];
    bool a_nan = a != a, b_nan = b != b;
    if (a_nan != b_nan)
        return b_nan;
    if (!a_nan && a != b)
        return a > b;
    return i < j;
}

__device__ inline void nms_extent(const float *box, bool center, float *lo, float *hi) {
    if (center) {
        for (int axis = 0; axis < 2; axis++) {
            float half = box[2 + axis] / 2;
            lo[axis] = box[axis] - half;
            hi[axis] = box[axis] + half;
        }
    } else {
        lo[0] = fminf(box[1], box[3]);
        hi[0] = fmaxf(box[1], box[3]);
        lo[1] = fminf(box[0], box[2]);
        hi[1] = fmaxf(box[0], box[2]);
    }
}

__device__ inline bool nms_suppresses(const float *a, const float *b, bool center,
                                      float threshold) {
    float alo[2], ahi[2], blo[2], bhi[2], side[2];
    nms_extent(a, center, alo, ahi);
    nms_extent(b, center, blo, bhi);
    for (int axis = 0; axis < 2; axis++) {
        float lo = fmaxf(alo[axis], blo[axis]), hi = fminf(ahi[axis], bhi[axis]);
        if (hi <= lo)
            return false;
        side[axis] = hi - lo;
    }
    float inter = __fmul_rn(side[0], side[1]);
    float area_a = __fmul_rn(ahi[0] - alo[0], ahi[1] - alo[1]);
    float area_b = __fmul_rn(bhi[0] - blo[0], bhi[1] - blo[1]);
    float uni = area_a + area_b - inter;
    if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0)
        return false;
    return __fdiv_rn(inter, uni) > threshold;
}

extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_nms(rt_cuda_nms_params p) {
    int64_t pairs = p.batches * p.classes;
    bool center = p.center != 0;
    for (int64_t pair = threadIdx.x; pair < pairs; pair += RT_BLOCK) {
        const float *boxes = p.boxes + pair / p.classes * p.count * 4;
        const float *scores = p.scores + pair * p.count;
        unsigned char *taken = p.taken + pair * p.count;
        int64_t *kept = p.kept + pair * p.count, num_kept = 0;
        for (int64_t i = 0; i < p.count; i++) // boxes under the threshold are never candidates
            taken[i] = p.has_score_threshold && !(scores[i] > p.score_threshold);
        while (num_kept < p.max_per_class) {
            int64_t best = -1;
            for (int64_t i = 0; i < p.count; i++)
                if (!taken[i] && (best < 0 || nms_before(scores, i, best)))
                    best = i;
            if (best < 0)
                break;
            taken[best] = 1;
            bool keep = true;
            for (int64_t k = 0; k < num_kept && keep; k++)
                keep = !nms_suppresses(boxes + best * 4, boxes + kept[k] * 4, center,
                                       p.iou_threshold);
            if (keep)
                kept[num_kept++] = best;
        }
        p.counts[pair] = num_kept;
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    int64_t rows = 0;
    for (int64_t pair = 0; pair < pairs; pair++) {
        for (int64_t k = 0; k < p.counts[pair]; k++, rows++) {
            p.out[rows * 3] = pair / p.classes;
            p.out[rows * 3 + 1] = pair % p.classes;
            p.out[rows * 3 + 2] = p.kept[pair * p.count + k];
        }
    }
    p.counts[pairs] = rows;
}
