// unique.cu: the distinct slices of x along an axis (ops/generate/kernels/unique.c's rules: a
// stable merge sort of the slice indices, then grouping), on one thread: unique is rare and
// small in the models that use it, and one thread keeps the order of the CPU's result.
#include "common.cuh"

__device__ inline int uq_compare_element(const rt_cuda_unique_params &p, const char *a,
                                         const char *b) {
#define UQ_COMPARE(x, y) ((x) < (y) ? -1 : (x) > (y) ? 1 : 0)
#define UQ_COMPARE_FLOAT(x, y) \
    ((x) != (x) ? ((y) != (y) ? 0 : 1) : (y) != (y) ? -1 : UQ_COMPARE(x, y))
    if (p.kind == 0)
        return UQ_COMPARE_FLOAT(*(const float *)a, *(const float *)b);
    if (p.kind == 1)
        return UQ_COMPARE_FLOAT(*(const double *)a, *(const double *)b);
    if (p.kind == 2) {
        switch (p.elem_size) {
        case 1: return UQ_COMPARE(*(const int8_t *)a, *(const int8_t *)b);
        case 2: return UQ_COMPARE(*(const int16_t *)a, *(const int16_t *)b);
        case 4: return UQ_COMPARE(*(const int32_t *)a, *(const int32_t *)b);
        default: return UQ_COMPARE(*(const int64_t *)a, *(const int64_t *)b);
        }
    }
    switch (p.elem_size) {
    case 1: return UQ_COMPARE(*(const uint8_t *)a, *(const uint8_t *)b);
    case 2: return UQ_COMPARE(*(const uint16_t *)a, *(const uint16_t *)b);
    case 4: return UQ_COMPARE(*(const uint32_t *)a, *(const uint32_t *)b);
    default: return UQ_COMPARE(*(const uint64_t *)a, *(const uint64_t *)b);
    }
#undef UQ_COMPARE_FLOAT
#undef UQ_COMPARE
}

__device__ inline int uq_compare_slices(const rt_cuda_unique_params &p, int64_t i, int64_t j) {
    const char *x = (const char *)p.x;
    for (int64_t o = 0; o < p.outer; o++) {
        const char *a = x + ((o * p.n + i) * p.inner) * p.elem_size;
        const char *b = x + ((o * p.n + j) * p.inner) * p.elem_size;
        for (int64_t k = 0; k < p.inner; k++) {
            int c = uq_compare_element(p, a + k * p.elem_size, b + k * p.elem_size);
            if (c != 0)
                return c;
        }
    }
    return 0;
}

extern "C" __global__ void __launch_bounds__(RT_BLOCK) rt_k_unique(rt_cuda_unique_params p) {
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    int64_t n = p.n;
    int64_t *order = p.scratch, *tmp = order + n, *group_of = tmp + n, *first = group_of + n;
    int64_t *position = first + n;
    for (int64_t j = 0; j < n; j++)
        order[j] = j;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                tmp[k++] = uq_compare_slices(p, order[b], order[a]) < 0 ? order[b++] : order[a++];
            while (a < mid)
                tmp[k++] = order[a++];
            while (b < hi)
                tmp[k++] = order[b++];
        }
        for (int64_t k = 0; k < n; k++)
            order[k] = tmp[k];
    }
    int64_t groups = 0;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || uq_compare_slices(p, order[k - 1], order[k]) != 0)
            first[groups++] = order[k];
        group_of[order[k]] = groups - 1;
    }
    int64_t next = 0;
    for (int64_t j = 0; j < n; j++)
        if (!p.sorted && first[group_of[j]] == j)
            position[group_of[j]] = next++;
    for (int64_t g = 0; g < groups; g++) {
        if (p.sorted)
            position[g] = g;
        p.counts[position[g]] = 0;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t at = position[group_of[j]];
        p.inverse[j] = at;
        p.counts[at]++;
    }
    int64_t run = p.inner * p.elem_size;
    for (int64_t g = 0; g < groups; g++) {
        int64_t at = position[g];
        p.indices[at] = first[g];
        for (int64_t o = 0; o < p.outer; o++) {
            char *dst = (char *)p.y + (o * groups + at) * run;
            const char *src = (const char *)p.x + (o * n + first[g]) * run;
            for (int64_t b = 0; b < run; b++)
                dst[b] = src[b];
        }
    }
    p.scratch[5 * n] = groups;
}
