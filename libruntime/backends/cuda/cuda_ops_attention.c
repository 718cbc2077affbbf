/* cuda_ops_attention.c: the attention op on CUDA (kernels/attention.cu). The op's own checks
 * give the job; kv_lengths, when given, is read back and checked at every execute, as the CPU
 * checks it, and the kernel then reads it on the device. */
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/attention/attention.h"
#include "ops/ops.h"

static void copy_view(int64_t out[3], const rt_attn_view *v) {
    out[0] = v->b;
    out[1] = v->h;
    out[2] = v->s;
}

/* kv_lengths' values checked on a host copy; its device pointer stays the kernel's. */
static rt_status check_lengths(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_attn_job *job) {
    static const size_t lengths_index[] = {4};
    rt_cuda_host_params state;
    RT_RETURN_IF_ERROR(rt_cuda__host_params_begin(ctx, cm, lengths_index, 1, &state));
    rt_status status = rt_ops__attention_check_lengths(ctx, job);
    rt_cuda__host_params_end(&state);
    return status;
}

rt_status rt_cuda__run_attention(rt_op_ctx *ctx, rt_cuda_method *cm) {
    rt_attn_job job;
    RT_RETURN_IF_ERROR(rt_ops__attention_job(ctx, &job));
    rt_tensor_value *lengths;
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 4, "kv_lengths", &lengths));
    if (lengths)
        RT_RETURN_IF_ERROR(check_lengths(ctx, cm, &job));
    if (job.batch == 0 || job.q_heads == 0 || job.q_len == 0 || job.v_dim == 0)
        return RT_OK;
    rt_cuda_attention_params p;
    memset(&p, 0, sizeof p);
    p.batch = job.batch;
    p.q_heads = job.q_heads;
    p.kv_heads = job.kv_heads;
    p.q_len = job.q_len;
    p.kv_len = job.kv_len;
    p.head_dim = job.head_dim;
    p.v_dim = job.v_dim;
    copy_view(p.qs, &job.qs);
    copy_view(p.ks, &job.ks);
    copy_view(p.vs, &job.vs);
    copy_view(p.os, &job.os);
    memcpy(p.mask_strides, job.mask_strides, sizeof p.mask_strides);
    p.mask_len = job.mask_len;
    p.scale = job.scale;
    p.softcap = job.softcap;
    p.causal = job.causal;
    p.mask_is_bool = job.mask_is_bool;
    p.q = job.q;
    p.k = job.k;
    p.v = job.v;
    p.mask = job.mask;
    p.out = job.out;
    if (lengths) {
        p.lengths = lengths->data;
        p.lengths_are_i32 = lengths->type == RT_I32;
        p.lengths_stride = rt_tensor__numel(lengths) == 1 ? 0 : 1;
    }
    rt_cuda_kernel k = ctx->args[0]->u.t->type == RT_F32 ? RT_CUDA_K_attention_f32
                                                         : RT_CUDA_K_attention_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.batch * p.q_heads * p.q_len, 1), 1,
                              1, &p);
}

rt_status rt_cuda__run_rotary(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__rotary_prepare(ctx));
    const rt_tensor_value *x = ctx->args[0]->u.t, *cos = ctx->args[1]->u.t;
    int64_t layout;
    bool interleaved;
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 3, "interleaved", &interleaved));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "layout", &layout));
    rt_cuda_rotary_params p;
    memset(&p, 0, sizeof p);
    p.heads = x->sizes[layout ? 2 : 1];
    p.seq = x->sizes[layout ? 1 : 2];
    p.dim = x->sizes[3];
    p.rows = x->sizes[0] * p.heads * p.seq;
    p.rotated = cos->sizes[2];
    p.pos_stride = layout ? p.heads : 1;
    p.interleaved = interleaved;
    p.table_batched = cos->sizes[0] != 1;
    p.x = x->data;
    p.cos = cos->data;
    p.sin = ctx->args[2]->u.t->data;
    p.out = ctx->args[5]->u.t->data;
    int64_t threads = p.rows * (p.rotated / 2 + p.dim - p.rotated);
    if (threads == 0)
        return RT_OK;
    rt_cuda_kernel k = x->type == RT_F32 ? RT_CUDA_K_rotary_f32 : RT_CUDA_K_rotary_f64;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(threads, 256), 1, 1, &p);
}
