/* cuda_ops_resize.c: resize on CUDA. The host builds the interpolation tables with the CPU
 * op's own code (ops/movement/resize.h: the same coordinates, taps and weights, bit for bit), uploads
 * them into the method's device scratch and one kernel interpolates every output element. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/ops.h"
#include "ops/movement/resize.h"

/* Load: reserve device scratch for the tables at out's bounds (what prepare plans). */
rt_status rt_cuda__check_resize(rt_op_ctx *ctx) {
    RT_RETURN_IF_ERROR(rt_ops__resize_prepare(ctx));
    rt_cuda__reserve_scratch(ctx->backend, ctx->scratch_bytes);
    ctx->scratch_bytes = 0; /* a CUDA method has no host scratch */
    return RT_OK;
}

rt_status rt_cuda__run_resize(rt_op_ctx *ctx, rt_cuda_method *cm) {
    rt_resize_tables t;
    RT_RETURN_IF_ERROR(rt_ops__resize_tables(ctx, &t));
    const rt_tensor_value *x = ctx->args[0]->u.t, *out = ctx->args[11]->u.t;
    if (t.table == NULL) /* empty out */
        return RT_OK;
    rt_status status = rt_cuda__upload_scratch(ctx, cm, t.table, t.table_bytes);
    free(t.table);
    RT_RETURN_IF_ERROR(status);
    rt_cuda_resize_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    p.rank = t.rank;
    memcpy(p.out_sizes, out->sizes, (size_t)t.rank * sizeof *p.out_sizes);
    memcpy(p.taps, t.taps, sizeof p.taps);
    memcpy(p.offsets_at, t.offsets_at, sizeof p.offsets_at);
    memcpy(p.weights_at, t.weights_at, sizeof p.weights_at);
    memcpy(p.outside_at, t.outside_at, sizeof p.outside_at);
    p.extrapolation = t.extrapolation;
    p.fill = t.fill;
    p.table = cm->scratch;
    p.x = x->data;
    p.out = out->data;
    if (t.nearest)
        return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_resize_nearest_1, out->elem_size,
                                        p.n, &p);
    rt_cuda_kernel k = x->type == RT_F64 ? RT_CUDA_K_resize_f64 : RT_CUDA_K_resize_f32;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n, 256), 1, 1, &p);
}
