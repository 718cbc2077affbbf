/* cuda_ops_quant.c: the quantized ops on CUDA (kernels/quant.cu): the
 * arguments are checked by the CPU ops' own prepares; the parameter layouts are worked out
 * here as ops/quant/quant.c does, or taken from the CPU ops' own plans (ops/quant/quant.h). */
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/ops.h"
#include "ops/quant/quant.h"

#define ARG_T(ctx, i) ((ctx)->args[i]->u.t)

static rt_tensor_value *optional_tensor(rt_op_ctx *ctx, size_t i) {
    return ctx->args[i]->kind == RT_VALUE_TENSOR ? ctx->args[i]->u.t : NULL;
}

static void int_range(rt_type type, int64_t *lo, int64_t *hi) {
    switch (type) {
    case RT_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case RT_U8: *lo = 0; *hi = UINT8_MAX; break;
    case RT_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case RT_U16: *lo = 0; *hi = UINT16_MAX; break;
    default: *lo = INT32_MIN; *hi = INT32_MAX; break;
    }
}

/* ---- quantize_linear, dequantize_linear --------------------------------------------------- */

/* One element (rank 0 or 1, or blocked with x's rank): the same value for every element. */
static bool single_param(const rt_tensor_value *p, const rt_tensor_value *x, int64_t block) {
    return p == NULL ||
           (rt_tensor__numel(p) == 1 && (p->rank <= 1 || (block > 0 && p->rank == x->rank)));
}

static rt_status quant_linear(rt_op_ctx *ctx, rt_cuda_method *cm, bool quantize) {
    const rt_tensor_value *x = ARG_T(ctx, 0), *scale = ARG_T(ctx, 1), *out = ARG_T(ctx, 5);
    const rt_tensor_value *zero = optional_tensor(ctx, 2);
    rt_cuda_quant_params p;
    memset(&p, 0, sizeof p);
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "block_size", &p.block));
    p.n = rt_tensor__numel(x);
    if (p.n == 0)
        return RT_OK;
    p.scale_single = single_param(scale, x, p.block);
    p.zero_single = single_param(zero, x, p.block);
    p.outer = p.length = 1;
    p.inner = p.n;
    if (!p.scale_single || !p.zero_single) { /* prepare checked the axis */
        int32_t ax = (int32_t)(axis < 0 ? axis + x->rank : axis);
        p.length = x->sizes[ax];
        p.inner = 1;
        for (int32_t d = 0; d < ax; d++)
            p.outer *= x->sizes[d];
        for (int32_t d = ax + 1; d < x->rank; d++)
            p.inner *= x->sizes[d];
        p.blocks = p.block > 0 ? (p.length + p.block - 1) / p.block : 0;
    }
    rt_type int_type = quantize ? out->type : x->type;
    int_range(int_type, &p.lo, &p.hi);
    p.quantize = quantize;
    p.float_type = (int32_t)(quantize ? x->type : out->type);
    p.int_type = (int32_t)int_type;
    p.x = x->data;
    p.scale = scale->data;
    p.zero = zero ? zero->data : NULL;
    p.out = out->data;
    return rt_cuda__op_launch(ctx, cm, RT_CUDA_K_quant_linear, rt_cuda__blocks(p.n, 256), 1, 1,
                              &p);
}

rt_status rt_cuda__run_quantize_linear(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__quantize_linear_prepare(ctx));
    return quant_linear(ctx, cm, true);
}

rt_status rt_cuda__run_dequantize_linear(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__dequantize_linear_prepare(ctx));
    return quant_linear(ctx, cm, false);
}

/* ---- dynamic_quantize_linear -------------------------------------------------------------- */

/* One block finds the range and writes y_scale and y_zero_point; the quantization then reads
 * them from the device. */
rt_status rt_cuda__run_dynamic_quantize_linear(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__dynamic_quantize_linear_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *y = ARG_T(ctx, 1);
    const rt_tensor_value *scale = ARG_T(ctx, 2), *zero = ARG_T(ctx, 3);
    rt_cuda_quant_range_params r = {rt_tensor__numel(x), x->data, scale->data, zero->data};
    RT_RETURN_IF_ERROR(rt_cuda__op_launch(ctx, cm, RT_CUDA_K_quant_range, 1, 1, 1, &r));
    if (r.n == 0)
        return RT_OK;
    rt_cuda_quant_params p;
    memset(&p, 0, sizeof p);
    p.n = r.n;
    p.outer = p.length = 1;
    p.inner = p.n;
    p.lo = 0;
    p.hi = 255;
    p.quantize = 1;
    p.float_type = RT_CUDA_F32;
    p.int_type = RT_CUDA_U8;
    p.scale_single = p.zero_single = 1;
    p.x = x->data;
    p.scale = scale->data;
    p.zero = zero->data;
    p.out = y->data;
    return rt_cuda__op_launch(ctx, cm, RT_CUDA_K_quant_linear, rt_cuda__blocks(p.n, 256), 1, 1,
                              &p);
}

/* ---- matmul_integer, qlinear_matmul ------------------------------------------------------- */


/* Device pointers of a parameter: the plan's strides with the argument's own data (the plan
 * was made while per-tensor values were host copies). */
static void copy_qparam(rt_cuda_qparam *out, const rt_quant_mm_param *in,
                        const rt_tensor_value *t) {
    out->data = t ? t->data : NULL;
    out->type = (int32_t)in->type;
    out->stride = in->stride;
    memcpy(out->batch_strides, in->batch_strides, sizeof out->batch_strides);
}

/* The plan of a quantized product with its per-tensor zero points (`host`) read back first. */
static rt_status plan_on_host(rt_op_ctx *ctx, rt_cuda_method *cm, const size_t *host,
                              size_t count, bool conv, bool requant, void *plan) {
    rt_cuda_host_params state;
    RT_RETURN_IF_ERROR(rt_cuda__host_params_begin(ctx, cm, host, count, &state));
    rt_status status = conv ? rt_quant__conv_plan(ctx, requant, plan)
                            : rt_quant__matmul_plan(ctx, requant, plan);
    rt_cuda__host_params_end(&state);
    return status;
}

/* matmul_integer(a, b, a_zp, b_zp, out);
 * qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, out): y_zp is read on the
 * host, as the CPU reads it. */
static rt_status qmatmul(rt_op_ctx *ctx, rt_cuda_method *cm, bool requant) {
    static const size_t host[] = {7};
    rt_quant_mm_plan plan;
    RT_RETURN_IF_ERROR(plan_on_host(ctx, cm, host, requant ? 1 : 0, false, requant, &plan));
    const rt_matmul_dims *d = &plan.dims;
    if (d->batch_count == 0 || d->m == 0 || d->n == 0)
        return RT_OK;
    rt_cuda_qmatmul_params p;
    memset(&p, 0, sizeof p);
    p.m = d->m, p.n = d->n, p.k = d->k, p.batch_count = d->batch_count;
    p.batch_rank = d->batch_rank;
    memcpy(p.batch_sizes, d->batch_sizes, sizeof p.batch_sizes);
    memcpy(p.a_batch_strides, d->a_batch_strides, sizeof p.a_batch_strides);
    memcpy(p.b_batch_strides, d->b_batch_strides, sizeof p.b_batch_strides);
    p.a_type = (int32_t)plan.a_type, p.b_type = (int32_t)plan.b_type;
    p.out_type = (int32_t)plan.out_type, p.scale_type = (int32_t)plan.scale_type;
    p.requant = requant;
    copy_qparam(&p.za, &plan.za, optional_tensor(ctx, 2));
    copy_qparam(&p.zb, &plan.zb, optional_tensor(ctx, requant ? 5 : 3));
    if (requant) {
        copy_qparam(&p.sa, &plan.sa, ARG_T(ctx, 1));
        copy_qparam(&p.sb, &plan.sb, ARG_T(ctx, 4));
        p.y_scale = ARG_T(ctx, 6)->data;
    }
    p.y_zero = plan.y_zero, p.lo = plan.lo, p.hi = plan.hi;
    p.a = ARG_T(ctx, 0)->data;
    p.b = ARG_T(ctx, requant ? 3 : 1)->data;
    p.out = ARG_T(ctx, ctx->nargs - 1)->data;
    return rt_cuda__op_launch(ctx, cm, RT_CUDA_K_qmatmul,
                              rt_cuda__blocks(p.batch_count * p.m * p.n, 256), 1, 1, &p);
}

rt_status rt_cuda__run_matmul_integer(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return qmatmul(ctx, cm, false);
}

rt_status rt_cuda__run_qlinear_matmul(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return qmatmul(ctx, cm, true);
}

/* ---- conv_integer, qlinear_conv ----------------------------------------------------------- */

/* conv_integer(x, w, x_zp, w_zp, stride, padding, dilation, groups, out);
 * qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias, ..., out): x_zp and
 * y_zp are read on the host, as the CPU reads them. */
static rt_status qconv(rt_op_ctx *ctx, rt_cuda_method *cm, bool requant) {
    static const size_t host[] = {2, 7};
    rt_quant_conv_plan plan;
    RT_RETURN_IF_ERROR(plan_on_host(ctx, cm, host, requant ? 2 : 1, true, requant, &plan));
    const rt_tensor_value *out = ARG_T(ctx, ctx->nargs - 1);
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    rt_cuda_qconv_params p;
    memset(&p, 0, sizeof p);
    p.batch = plan.batch, p.channels = plan.channels, p.height = plan.height;
    p.width = plan.width, p.out_channels = plan.out_channels, p.kernel_h = plan.kernel_h;
    p.kernel_w = plan.kernel_w, p.out_h = plan.out_h, p.out_w = plan.out_w;
    p.groups = plan.groups;
    memcpy(p.stride, plan.stride, sizeof p.stride);
    memcpy(p.dilation, plan.dilation, sizeof p.dilation);
    memcpy(p.pad, plan.pad, sizeof p.pad);
    p.x_type = (int32_t)plan.x_type, p.w_type = (int32_t)plan.w_type;
    p.scale_type = (int32_t)plan.scale_type, p.out_type = (int32_t)plan.out_type;
    p.requant = requant;
    p.x_zero = plan.x_zero;
    const rt_tensor_value *w_zero = optional_tensor(ctx, requant ? 5 : 3);
    if (w_zero != NULL) {
        p.w_zero = w_zero->data;
        p.w_zero_type = (int32_t)w_zero->type;
        p.w_zero_per_channel = rt_tensor__numel(w_zero) != 1;
    }
    if (requant) {
        const rt_tensor_value *w_scale = ARG_T(ctx, 4), *bias = optional_tensor(ctx, 8);
        p.x_scale = ARG_T(ctx, 1)->data;
        p.w_scale = w_scale->data;
        p.w_scale_per_channel = rt_tensor__numel(w_scale) != 1;
        p.y_scale = ARG_T(ctx, 6)->data;
        p.bias = bias ? bias->data : NULL;
    }
    p.y_zero = plan.y_zero, p.lo = plan.lo, p.hi = plan.hi;
    p.x = ARG_T(ctx, 0)->data;
    p.w = ARG_T(ctx, requant ? 3 : 1)->data;
    p.out = out->data;
    return rt_cuda__op_launch(ctx, cm, RT_CUDA_K_qconv,
                              rt_cuda__blocks(rt_tensor__numel(out), 256), 1, 1, &p);
}

rt_status rt_cuda__run_conv_integer(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return qconv(ctx, cm, false);
}

rt_status rt_cuda__run_qlinear_conv(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return qconv(ctx, cm, true);
}
