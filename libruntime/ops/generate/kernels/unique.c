/* unique.c: the distinct slices of x along an axis (ONNX Unique, numpy.unique): a stable merge
 * sort of the slice indices by their contents, then one pass that groups equal neighbours; a
 * group's first member is its lowest index (the sort is stable). Unsorted output lists the
 * groups in order of first occurrence. */
#include <string.h>

#include "ops/generate/unique.h"

#define COMPARE(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : 0)
/* NaN equals NaN and sorts after every number. */
#define COMPARE_FLOAT(a, b) \
    ((a) != (a) ? ((b) != (b) ? 0 : 1) : (b) != (b) ? -1 : COMPARE(a, b))

static int compare_element(rt_type type, const char *a, const char *b) {
    switch (type) {
    case RT_F32: return COMPARE_FLOAT(*(const float *)a, *(const float *)b);
    case RT_F64: return COMPARE_FLOAT(*(const double *)a, *(const double *)b);
    case RT_I8: return COMPARE(*(const int8_t *)a, *(const int8_t *)b);
    case RT_I16: return COMPARE(*(const int16_t *)a, *(const int16_t *)b);
    case RT_I32: return COMPARE(*(const int32_t *)a, *(const int32_t *)b);
    case RT_I64: return COMPARE(*(const int64_t *)a, *(const int64_t *)b);
    case RT_U16: return COMPARE(*(const uint16_t *)a, *(const uint16_t *)b);
    case RT_U32: return COMPARE(*(const uint32_t *)a, *(const uint32_t *)b);
    case RT_U64: return COMPARE(*(const uint64_t *)a, *(const uint64_t *)b);
    default: return COMPARE(*(const uint8_t *)a, *(const uint8_t *)b); /* uint8, bool */
    }
}

/* Slices i and j compared element by element (outer-major, as x[:, j, :] in row-major). */
static int compare_slices(const rt_unique_problem *p, int64_t i, int64_t j) {
    const char *x = p->x;
    for (int64_t o = 0; o < p->outer; o++) {
        const char *a = x + (size_t)((o * p->n + i) * p->inner) * p->elem_size;
        const char *b = x + (size_t)((o * p->n + j) * p->inner) * p->elem_size;
        for (int64_t k = 0; k < p->inner; k++) {
            int c = compare_element(p->type, a + (size_t)k * p->elem_size,
                                    b + (size_t)k * p->elem_size);
            if (c != 0)
                return c;
        }
    }
    return 0;
}

size_t rt_unique__scratch_bytes(int64_t n) {
    return (size_t)(n > 0 ? n : 0) * 5 * sizeof(int64_t);
}

/* Bottom-up merge sort of order[0, n) by slice contents; stable, using tmp. */
static void sort_slices(const rt_unique_problem *p, int64_t *order, int64_t *tmp) {
    int64_t n = p->n;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                tmp[k++] = compare_slices(p, order[b], order[a]) < 0 ? order[b++] : order[a++];
            while (a < mid)
                tmp[k++] = order[a++];
            while (b < hi)
                tmp[k++] = order[b++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

int64_t rt_unique__run(const rt_unique_problem *p, const rt_unique_outputs *out, void *scratch) {
    int64_t n = p->n;
    int64_t *order = scratch, *tmp = order + n, *group_of = tmp + n, *first = group_of + n;
    int64_t *position = first + n; /* of each group in the output */
    for (int64_t j = 0; j < n; j++)
        order[j] = j;
    sort_slices(p, order, tmp);
    int64_t groups = 0;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || compare_slices(p, order[k - 1], order[k]) != 0)
            first[groups++] = order[k];
        group_of[order[k]] = groups - 1;
    }
    if (p->sorted) {
        for (int64_t g = 0; g < groups; g++)
            position[g] = g;
    } else {
        int64_t next = 0;
        for (int64_t j = 0; j < n; j++)
            if (first[group_of[j]] == j)
                position[group_of[j]] = next++;
    }
    if (out->counts != NULL)
        memset(out->counts, 0, (size_t)groups * sizeof *out->counts);
    for (int64_t j = 0; j < n; j++) {
        int64_t at = position[group_of[j]];
        if (out->inverse != NULL)
            out->inverse[j] = at;
        if (out->counts != NULL)
            out->counts[at]++;
    }
    size_t run = (size_t)p->inner * p->elem_size;
    for (int64_t g = 0; g < groups; g++) {
        int64_t at = position[g];
        if (out->indices != NULL)
            out->indices[at] = first[g];
        if (out->y == NULL)
            continue;
        for (int64_t o = 0; o < p->outer; o++)
            memcpy((char *)out->y + (size_t)(o * groups + at) * run,
                   (const char *)p->x + (size_t)(o * n + first[g]) * run, run);
    }
    return groups;
}
