/* broadcast.c: the walk of broadcast inputs shared by the elementwise ops. */
#include "ops/broadcast.h"

#include <stdbool.h>

#include "tensor.h"

void rt_broadcast__aligned_strides(int64_t *out, const rt_tensor_value *t, int32_t rank) {
    int64_t dense[RT_MAX_RANK];
    rt_tensor__dense_strides(dense, t->rank, t->sizes, NULL);
    int32_t lead = rank - t->rank;
    for (int32_t i = 0; i < rank; i++) {
        int32_t d = i - lead;
        out[i] = d >= 0 && t->sizes[d] != 1 ? dense[d] : 0;
    }
}

static bool mergeable(const rt_broadcast_plan *plan, int32_t n,
                      int64_t s[][RT_MAX_RANK], int32_t i, int64_t size) {
    if (n == 0)
        return false;
    for (int32_t k = 0; k < plan->inputs; k++)
        if (plan->strides[k][n - 1] != s[k][i] * size)
            return false;
    return true;
}

void rt_broadcast__plan(rt_broadcast_plan *plan, const rt_tensor_value *const *in,
                        int32_t inputs, int32_t rank, const int64_t *sizes) {
    int64_t s[RT_BROADCAST_MAX_INPUTS][RT_MAX_RANK];
    plan->inputs = inputs;
    for (int32_t k = 0; k < inputs; k++)
        rt_broadcast__aligned_strides(s[k], in[k], rank);
    int32_t n = 0;
    for (int32_t i = 0; i < rank; i++) {
        if (sizes[i] == 1)
            continue;
        if (mergeable(plan, n, s, i, sizes[i])) {
            plan->sizes[n - 1] *= sizes[i];
            for (int32_t k = 0; k < inputs; k++)
                plan->strides[k][n - 1] = s[k][i];
            continue;
        }
        plan->sizes[n] = sizes[i];
        for (int32_t k = 0; k < inputs; k++)
            plan->strides[k][n] = s[k][i];
        n++;
    }
    if (n == 0) { /* a single element */
        plan->sizes[0] = 1;
        for (int32_t k = 0; k < inputs; k++)
            plan->strides[k][0] = 0;
        n = 1;
    }
    plan->rank = n;
}
