/* lane_mask.h: the AVX-512 mask of a 16-float vector's lanes [first, end), the bounds clamped
 * to the vector (empty when end <= first). Every masked load and store at a row's ends, in the
 * GEMM kernels, the depthwise convolutions and pooling, takes its mask from here. A plain
 * integer, so callers need no target attribute to compute it. */
#ifndef RT_CORE_LANE_MASK_H
#define RT_CORE_LANE_MASK_H

#include <stdint.h>

static inline uint16_t rt_lane_mask__16(int64_t first, int64_t end) {
    first = first < 0 ? 0 : first;
    end = end > 16 ? 16 : end;
    if (end <= first) /* also every bound past the vector's ends */
        return 0;
    return (uint16_t)(((1u << end) - 1u) & ~((1u << first) - 1u));
}

#endif
