/* cuda_ops_scan.c: the CUDA side of cumsum and topk (float32, float64 and the integer types),
 * hardmax and lp_norm (float32, float64), along one axis. */
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/int_param.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define ARG_T(ctx, i) ((ctx)->args[i]->u.t)

/* x as [outer, n, inner] around axis; a 0-d x is one line of one. */
static void split_axis(rt_cuda_scan_params *p, const rt_tensor_value *x, int32_t axis) {
    p->outer = p->n = p->inner = 1;
    for (int32_t d = 0; d < x->rank; d++) {
        if (d < axis)
            p->outer *= x->sizes[d];
        else if (d == axis)
            p->n = x->sizes[d];
        else
            p->inner *= x->sizes[d];
    }
}

rt_status rt_cuda__run_cumsum(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__cumsum_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 4);
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    rt_int_param axis_arg; /* an int, or a tensor read back to the host */
    int32_t axis;
    bool exclusive, reverse;
    RT_RETURN_IF_ERROR(rt_op__int_param(ctx, 1, "axis", false, &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, rt_op__int_param_at(&axis_arg, 0), x->rank, "axis",
                                   &axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "exclusive", &exclusive));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "reverse", &reverse));
    rt_cuda_scan_params p;
    memset(&p, 0, sizeof p);
    split_axis(&p, x, axis);
    p.exclusive = exclusive;
    p.reverse = reverse;
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k;
    if (x->type == RT_F32)
        k = RT_CUDA_K_cumsum_f32;
    else if (x->type == RT_F64)
        k = RT_CUDA_K_cumsum_f64;
    else if (x->elem_size == 1)
        k = RT_CUDA_K_cumsum_int1;
    else if (x->elem_size == 2)
        k = RT_CUDA_K_cumsum_int2;
    else if (x->elem_size == 4)
        k = RT_CUDA_K_cumsum_int4;
    else
        k = RT_CUDA_K_cumsum_int8; /* prepare admitted only numeric dtypes */
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.outer * p.inner, 256), 1, 1, &p);
}

rt_status rt_cuda__check_hardmax(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "x", RT_TYPES_FLOAT, "float32 and float64");
}

rt_status rt_cuda__run_hardmax(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__hardmax_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 2);
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank > 0 ? x->rank : 1, "axis", &axis));
    rt_cuda_scan_params p;
    memset(&p, 0, sizeof p);
    split_axis(&p, x, axis);
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_hardmax_f32 : RT_CUDA_K_hardmax_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.outer * p.inner, 256), 1, 1, &p);
}

rt_status rt_cuda__run_lp_norm(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__lp_norm_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    if (rt_tensor__numel(x) == 0)
        return RT_OK;
    int64_t axis_arg, p_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "p", &p_arg)); /* 1 or 2, checked by prepare */
    rt_cuda_scan_params p;
    memset(&p, 0, sizeof p);
    split_axis(&p, x, axis);
    p.p = (int32_t)p_arg;
    p.x = x->data;
    p.out = out->data;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_lp_norm_f32 : RT_CUDA_K_lp_norm_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.outer * p.inner, 256), 1, 1, &p);
}

/* Always sorted (as the CPU, whatever `sorted` says): each element's rank is its position. */
rt_status rt_cuda__run_topk(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__topk_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *values = ARG_T(ctx, 5), *indices = ARG_T(ctx, 6);
    if (rt_tensor__numel(values) == 0)
        return RT_OK;
    int64_t axis_arg;
    int32_t axis;
    bool largest;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "largest", &largest));
    rt_cuda_scan_params split;
    split_axis(&split, x, axis);
    rt_cuda_topk_params p;
    memset(&p, 0, sizeof p);
    p.outer = split.outer;
    p.n = split.n;
    p.inner = split.inner;
    p.k = values->sizes[axis];
    p.largest = largest;
    p.x = x->data;
    p.values = values->data;
    p.indices = indices->data;
    rt_cuda_kernel k;
    switch (x->type) {
    case RT_F32: k = RT_CUDA_K_topk_f32; break;
    case RT_F64: k = RT_CUDA_K_topk_f64; break;
    case RT_I8: k = RT_CUDA_K_topk_i8; break;
    case RT_I16: k = RT_CUDA_K_topk_i16; break;
    case RT_I32: k = RT_CUDA_K_topk_i32; break;
    case RT_I64: k = RT_CUDA_K_topk_i64; break;
    case RT_U8: k = RT_CUDA_K_topk_u8; break;
    case RT_U16: k = RT_CUDA_K_topk_u16; break;
    case RT_U32: k = RT_CUDA_K_topk_u32; break;
    case RT_U64: k = RT_CUDA_K_topk_u64; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA topk kernel for this dtype");
    }
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.outer * p.n * p.inner, 256), 1, 1,
                              &p);
}
