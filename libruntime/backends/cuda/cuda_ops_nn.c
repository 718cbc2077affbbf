/* cuda_ops_nn.c: matrix products (matmul, linear, linear_act), convolutions (conv2d,
 * conv2d_act, conv_transpose2d) and pooling on CUDA. Products go through cuBLAS when it is
 * installed, else the tiled kernel of kernels/gemm.cu; biases and fused activations follow in
 * the kernel's epilogue or, after cuBLAS, in one elementwise pass. */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/conv/conv.h"
#include "ops/matmul/matmul.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define ARG_T(ctx, i) ((ctx)->args[i]->u.t)
#define MAX_GRID_Z 65535

static rt_status fail_with_last(rt_op_ctx *ctx, rt_status status) {
    char reason[512];
    snprintf(reason, sizeof reason, "%s", rt_last_error());
    return rt_op__fail(ctx, status, "%s", reason);
}

/* One element stride s with strides[d] == s * (product of the sizes after d) wherever
 * sizes[d] > 1: the batch is then a plain strided batch. */
static bool flat_stride(const int64_t *sizes, const int64_t *strides, int32_t rank,
                        int64_t *out) {
    int64_t s = 0, inner = 1;
    bool found = false;
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (sizes[d] > 1) {
            if (!found) {
                if (strides[d] % inner != 0)
                    return false;
                s = strides[d] / inner;
                found = true;
            } else if (strides[d] != s * inner) {
                return false;
            }
        }
        inner *= sizes[d];
    }
    *out = s;
    return true;
}

static size_t elem_size(rt_type type) { return type == RT_F64 || type == RT_I64 ? 8 : 4; }

static rt_status bias_act(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_cuda_gemm_problem *g) {
    if (g->row_bias == NULL && g->col_bias == NULL && g->act.kind == RT_ACT_NONE)
        return RT_OK;
    rt_cuda_bias_act_params p;
    memset(&p, 0, sizeof p);
    p.n = g->batch_count * g->m * g->n;
    p.rows = g->m;
    p.cols = g->n;
    p.act = g->act.kind;
    p.lo = g->act.lo;
    p.hi = g->act.hi;
    p.row_bias = g->row_bias;
    p.col_bias = g->col_bias;
    p.out = g->c;
    rt_cuda_kernel k = g->type == RT_F64 ? RT_CUDA_K_bias_act_f64 : RT_CUDA_K_bias_act_f32;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p.n, 256), 1, 1, &p);
}

static rt_status gemm_blas(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_cuda_gemm_problem *g) {
    size_t es = elem_size(g->type);
    int64_t c_matrix = g->m * g->n;
    if (g->k == 0) {
        size_t bytes = (size_t)(g->batch_count * c_matrix) * es;
        rt_status status = rt_cuda__check(cm->device->cu->memset_d8_async(
                                              (CUdeviceptr)(uintptr_t)g->c, 0, bytes,
                                              cm->stream),
                                          "zero-filling an empty product");
        if (status != RT_OK)
            return fail_with_last(ctx, status);
        return bias_act(ctx, cm, g);
    }
    rt_cuda_blas_gemm b = {
        .m = g->m, .n = g->n, .k = g->k, .trans_b = g->trans_b,
        .double_precision = g->type == RT_F64, .c_batch_stride = c_matrix,
    };
    int64_t sa, sb;
    if (flat_stride(g->batch_sizes, g->a_batch_strides, g->batch_rank, &sa) &&
        flat_stride(g->batch_sizes, g->b_batch_strides, g->batch_rank, &sb)) {
        b.batch = g->batch_count;
        b.a_batch_stride = sa;
        b.b_batch_stride = sb;
        b.a = g->a;
        b.b = g->b;
        b.c = g->c;
        rt_status status = rt_cuda__blas_gemm(cm->blas, &b, "matrix product");
        if (status != RT_OK)
            return fail_with_last(ctx, status);
    } else {
        /* Broadcast batch dimensions that no single stride describes: one call per entry. */
        rt_matmul_dims dims;
        memset(&dims, 0, sizeof dims);
        dims.batch_rank = g->batch_rank;
        memcpy(dims.batch_sizes, g->batch_sizes, sizeof dims.batch_sizes);
        memcpy(dims.a_batch_strides, g->a_batch_strides, sizeof dims.a_batch_strides);
        memcpy(dims.b_batch_strides, g->b_batch_strides, sizeof dims.b_batch_strides);
        b.batch = 1;
        for (int64_t e = 0; e < g->batch_count; e++) {
            int64_t ao, bo;
            rt_op__matmul_batch_offsets(&dims, e, &ao, &bo);
            b.a = (const char *)g->a + ao * (int64_t)es;
            b.b = (const char *)g->b + bo * (int64_t)es;
            b.c = (char *)g->c + e * c_matrix * (int64_t)es;
            rt_status status = rt_cuda__blas_gemm(cm->blas, &b, "matrix product");
            if (status != RT_OK)
                return fail_with_last(ctx, status);
        }
    }
    return bias_act(ctx, cm, g);
}

static rt_status gemm_kernel(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_cuda_gemm_problem *g) {
    rt_cuda_gemm_params p;
    memset(&p, 0, sizeof p);
    p.m = g->m;
    p.n = g->n;
    p.k = g->k;
    p.a_row_stride = g->k;
    p.a_col_stride = 1;
    p.b_row_stride = g->trans_b ? 1 : g->n;
    p.b_col_stride = g->trans_b ? g->k : 1;
    p.c_row_stride = g->n;
    p.c_batch_stride = g->m * g->n;
    p.batch_rank = g->batch_rank;
    memcpy(p.batch_sizes, g->batch_sizes, sizeof p.batch_sizes);
    memcpy(p.a_batch_strides, g->a_batch_strides, sizeof p.a_batch_strides);
    memcpy(p.b_batch_strides, g->b_batch_strides, sizeof p.b_batch_strides);
    p.act = g->act.kind;
    p.lo = g->act.lo;
    p.hi = g->act.hi;
    p.a = g->a;
    p.b = g->b;
    p.c = g->c;
    p.row_bias = g->row_bias;
    p.col_bias = g->col_bias;
    int64_t tiles_n = (g->n + 63) / 64, tiles_m = (g->m + 63) / 64;
    if (tiles_n > 0x7fffffff)
        return rt_op__fail(ctx, RT_UNSUPPORTED, "the product has too many columns (%lld) for "
                           "the CUDA kernel's grid", (long long)g->n);
    unsigned grid_y = (unsigned)(tiles_m < MAX_GRID_Z ? tiles_m : MAX_GRID_Z);
    rt_cuda_kernel k = g->type == RT_F64   ? RT_CUDA_K_gemm_f64
                       : g->type == RT_I32 ? RT_CUDA_K_gemm_u32
                       : g->type == RT_I64 ? RT_CUDA_K_gemm_u64 : RT_CUDA_K_gemm_f32;
    for (int64_t first = 0; first < g->batch_count; first += MAX_GRID_Z) {
        int64_t left = g->batch_count - first;
        p.batch_offset = first;
        RT_RETURN_IF_ERROR(rt_cuda__op_launch(ctx, cm, k, (unsigned)tiles_n, grid_y,
                                              (unsigned)(left < MAX_GRID_Z ? left : MAX_GRID_Z),
                                              &p));
    }
    return RT_OK;
}

rt_status rt_cuda__gemm(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_cuda_gemm_problem *g) {
    if (g->batch_count == 0 || g->m == 0 || g->n == 0)
        return RT_OK;
    bool is_float = g->type == RT_F32 || g->type == RT_F64; /* cuBLAS has no integer GEMM */
    if (cm->blas != NULL && is_float && g->m <= 0x7fffffff && g->n <= 0x7fffffff &&
        g->k <= 0x7fffffff && g->batch_count <= 0x7fffffff)
        return gemm_blas(ctx, cm, g);
    return gemm_kernel(ctx, cm, g);
}

/* ---- matmul ------------------------------------------------------------------------- */

/* The integer products (int32, int64, wrapping) take the built-in kernel. */
rt_status rt_cuda__check_matmul(rt_op_ctx *ctx) {
    return rt_cuda__check_types(ctx, ARG_T(ctx, 0), "a",
                                RT_TYPES_FLOAT | RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64),
                                "float32, float64, int32 and int64");
}

rt_status rt_cuda__run_matmul(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__matmul_prepare(ctx));
    const rt_tensor_value *a = ARG_T(ctx, 0), *b = ARG_T(ctx, 1), *out = ARG_T(ctx, 2);
    rt_matmul_dims d;
    int32_t rank;
    int64_t sizes[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(rt_op__matmul_shape(ctx, a, b, &d, &rank, sizes));
    rt_cuda_gemm_problem g;
    memset(&g, 0, sizeof g);
    g.type = a->type;
    g.m = d.m;
    g.n = d.n;
    g.k = d.k;
    g.a = a->data;
    g.b = b->data;
    g.c = out->data;
    g.batch_rank = d.batch_rank;
    memcpy(g.batch_sizes, d.batch_sizes, sizeof g.batch_sizes);
    memcpy(g.a_batch_strides, d.a_batch_strides, sizeof g.a_batch_strides);
    memcpy(g.b_batch_strides, d.b_batch_strides, sizeof g.b_batch_strides);
    g.batch_count = d.batch_count;
    return rt_cuda__gemm(ctx, cm, &g);
}

/* ---- linear, linear_act ------------------------------------------------------------- */

static rt_status linear(rt_op_ctx *ctx, rt_cuda_method *cm, bool fused) {
    size_t out_index = fused ? 6 : 3;
    const rt_tensor_value *x = ARG_T(ctx, 0), *w = ARG_T(ctx, 1), *out = ARG_T(ctx, out_index);
    rt_tensor_value *bias;
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &bias));
    rt_cuda_gemm_problem g;
    memset(&g, 0, sizeof g);
    if (fused)
        RT_RETURN_IF_ERROR(rt_op__activation(ctx, 3, &g.act));
    g.type = x->type;
    g.k = x->sizes[x->rank - 1];
    g.n = w->sizes[0];
    g.m = 1;
    for (int32_t d = 0; d + 1 < x->rank; d++)
        g.m *= x->sizes[d]; /* bounded: prepare checked it */
    g.trans_b = true;
    g.a = x->data;
    g.b = w->data;
    g.c = out->data;
    g.col_bias = bias ? bias->data : NULL;
    g.batch_count = 1;
    return rt_cuda__gemm(ctx, cm, &g);
}

rt_status rt_cuda__run_linear(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__linear_prepare(ctx));
    return linear(ctx, cm, false);
}

rt_status rt_cuda__run_linear_act(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__linear_act_prepare(ctx));
    return linear(ctx, cm, true);
}

/* ---- conv2d, conv2d_act ------------------------------------------------------------- */

/* The sizes and addresses a convolution kernel reads, from x [N, C, H, W], w (sizes 2 and 3
 * the kernel's) and out [N, O, Ho, Wo]; bias may be NULL. */
static void conv_tensors(rt_cuda_conv_params *p, const rt_tensor_value *x,
                         const rt_tensor_value *w, const rt_tensor_value *bias,
                         const rt_tensor_value *out) {
    p->batch = x->sizes[0];
    p->channels = x->sizes[1];
    p->height = x->sizes[2];
    p->width = x->sizes[3];
    p->out_channels = out->sizes[1];
    p->kernel_h = w->sizes[2];
    p->kernel_w = w->sizes[3];
    p->out_h = out->sizes[2];
    p->out_w = out->sizes[3];
    p->x = x->data;
    p->w = w->data;
    p->bias = bias ? bias->data : NULL;
    p->out = out->data;
}

/* The convolution kernel's parameters for the operands in a, its result into out. */
static void conv_params(rt_cuda_conv_params *p, const rt_conv_args *a, void *out) {
    const conv_dims *d = &a->dims;
    memset(p, 0, sizeof *p);
    p->batch = d->batch;
    p->channels = d->channels;
    p->height = d->height;
    p->width = d->width;
    p->out_channels = d->out_channels;
    p->kernel_h = d->kernel_h;
    p->kernel_w = d->kernel_w;
    p->out_h = d->out_h;
    p->out_w = d->out_w;
    p->groups = d->groups;
    memcpy(p->stride, d->stride, sizeof p->stride);
    memcpy(p->dilation, d->dilation, sizeof p->dilation);
    memcpy(p->pad, d->pad, sizeof p->pad);
    p->act = a->act.kind;
    p->lo = a->act.lo;
    p->hi = a->act.hi;
    p->x = a->x->data;
    p->w = a->w->data;
    p->bias = a->bias ? a->bias->data : NULL;
    p->out = out;
}

/* Launch the direct convolution kernel for p: float32 with every tensor under 2^30 elements
 * takes the 32-bit kernel, with 8 or 4 output channels per thread when the group's output
 * channels divide so; anything else the general one (64-bit indices, one output a thread). */
static rt_status launch_conv(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_conv_params *p,
                             rt_type type) {
    const int64_t narrow = (int64_t)1 << 30;
    int64_t outputs = p->batch * p->out_channels * p->out_h * p->out_w;
    int64_t inputs = p->batch * p->channels * p->height * p->width;
    int64_t weights = p->out_channels * (p->channels / p->groups) * p->kernel_h * p->kernel_w;
    if (type != RT_F32 || outputs >= narrow || inputs >= narrow || weights >= narrow)
        return rt_cuda__op_launch(ctx, cm, type == RT_F64 ? RT_CUDA_K_conv2d_f64
                                                          : RT_CUDA_K_conv2d_f32,
                                  rt_cuda__blocks(outputs, 256), 1, 1, p);
    int64_t group_out = p->out_channels / p->groups;
    int per_thread = group_out % 8 == 0 ? 8 : group_out % 4 == 0 ? 4 : 1;
    rt_cuda_kernel k = per_thread == 8   ? RT_CUDA_K_conv2d_f32_narrow8
                       : per_thread == 4 ? RT_CUDA_K_conv2d_f32_narrow4
                                         : RT_CUDA_K_conv2d_f32_narrow1;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(outputs / per_thread, 256), 1, 1, p);
}

static rt_status conv2d(rt_op_ctx *ctx, rt_cuda_method *cm, bool fused) {
    rt_conv_args a;
    RT_RETURN_IF_ERROR(rt_conv__setup(ctx, &a, fused));
    const rt_tensor_value *x = a.x, *w = a.w, *bias = a.bias, *out = a.out;
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    rt_cuda_conv_params p;
    conv_params(&p, &a, out->data);
    bool pointwise = p.groups == 1 && p.kernel_h == 1 && p.kernel_w == 1 && p.stride[0] == 1 &&
                     p.stride[1] == 1 && p.pad[0] == 0 && p.pad[1] == 0 && p.pad[2] == 0 &&
                     p.pad[3] == 0;
    if (pointwise && cm->blas != NULL) {
        /* A 1x1 convolution is, per image, out [O, H*W] = w [O, C] @ x [C, H*W]. */
        rt_cuda_gemm_problem g;
        memset(&g, 0, sizeof g);
        g.type = x->type;
        g.m = p.out_channels;
        g.n = p.height * p.width;
        g.k = p.channels;
        g.a = w->data;
        g.b = x->data;
        g.c = out->data;
        g.row_bias = bias ? bias->data : NULL;
        g.act = a.act;
        g.batch_rank = 1;
        g.batch_sizes[0] = p.batch;
        g.b_batch_strides[0] = p.channels * g.n;
        g.batch_count = p.batch;
        return rt_cuda__gemm(ctx, cm, &g);
    }
    return launch_conv(ctx, cm, &p, x->type);
}

rt_status rt_cuda__run_conv2d(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return conv2d(ctx, cm, false);
}

rt_status rt_cuda__run_conv2d_act(rt_op_ctx *ctx, rt_cuda_method *cm) {
    return conv2d(ctx, cm, true);
}

/* ---- conv_transpose2d --------------------------------------------------------------- */

rt_status rt_cuda__run_conv_transpose2d(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__conv_transpose2d_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *w = ARG_T(ctx, 1), *out = ARG_T(ctx, 8);
    rt_tensor_value *bias;
    rt_cuda_conv_params p;
    memset(&p, 0, sizeof p);
    const int64_t *padding;
    size_t count;
    RT_RETURN_IF_ERROR(rt_op__optional_tensor(ctx, 2, "bias", &bias));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 3, "stride", 1, p.stride));
    /* [h, w] or [top, left, bottom, right], possibly negative: prepare checked it */
    RT_RETURN_IF_ERROR(rt_op__int_list(ctx, 4, "padding", &padding, &count));
    for (size_t i = 0; i < 4; i++)
        p.pad[i] = padding[count == 4 ? i : i % 2];
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 6, "dilation", 1, p.dilation));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 7, "groups", &p.groups));
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    conv_tensors(&p, x, w, bias, out);
    rt_cuda_kernel k = x->type == RT_F64 ? RT_CUDA_K_conv_transpose2d_f64
                                         : RT_CUDA_K_conv_transpose2d_f32;
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(rt_tensor__numel(out), 256), 1, 1,
                              &p);
}

/* ---- pooling ------------------------------------------------------------------------ */

/* The pooling kernel k over d's planes, x into out (device memory), on `blocks` blocks of
 * 256 threads. */
static rt_status launch_pool_blocks(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_pool_dims *d,
                                    const void *x, void *out, rt_cuda_kernel k,
                                    unsigned blocks) {
    int64_t outputs = rt_op__mul_sat(d->planes, rt_op__mul_sat(d->out_h, d->out_w));
    if (outputs == 0)
        return RT_OK;
    rt_cuda_pool_params p;
    memset(&p, 0, sizeof p);
    p.planes = d->planes;
    p.height = d->height;
    p.width = d->width;
    p.out_h = d->out_h;
    p.out_w = d->out_w;
    memcpy(p.kernel, d->kernel, sizeof p.kernel);
    memcpy(p.stride, d->stride, sizeof p.stride);
    memcpy(p.dilation, d->dilation, sizeof p.dilation);
    memcpy(p.pad, d->pad, sizeof p.pad);
    p.count_include_pad = d->count_include_pad;
    p.x = x;
    p.out = out;
    return rt_cuda__op_launch(ctx, cm, k, blocks, 1, 1, &p);
}

/* The same, one thread per output element. */
static rt_status launch_pool(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_pool_dims *d,
                             const void *x, void *out, rt_cuda_kernel k) {
    int64_t outputs = rt_op__mul_sat(d->planes, rt_op__mul_sat(d->out_h, d->out_w));
    return launch_pool_blocks(ctx, cm, d, x, out, k, rt_cuda__blocks(outputs, 256));
}

rt_status rt_cuda__run_max_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__max_pool2d_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 6);
    rt_pool_dims d;
    RT_RETURN_IF_ERROR(rt_pool__max_window(ctx, 1, x->sizes[2], x->sizes[3], &d));
    d.planes = x->sizes[0] * x->sizes[1]; /* prepare checked the product */
    rt_cuda_kernel k;
    switch (x->type) {
    case RT_F32: k = RT_CUDA_K_max_pool2d_f32; break;
    case RT_F64: k = RT_CUDA_K_max_pool2d_f64; break;
    case RT_I8: k = RT_CUDA_K_max_pool2d_i8; break;
    case RT_I16: k = RT_CUDA_K_max_pool2d_i16; break;
    case RT_I32: k = RT_CUDA_K_max_pool2d_i32; break;
    case RT_I64: k = RT_CUDA_K_max_pool2d_i64; break;
    case RT_U8: k = RT_CUDA_K_max_pool2d_u8; break;
    case RT_U16: k = RT_CUDA_K_max_pool2d_u16; break;
    case RT_U32: k = RT_CUDA_K_max_pool2d_u32; break;
    case RT_U64: k = RT_CUDA_K_max_pool2d_u64; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA max_pool2d kernel for this dtype");
    }
    return launch_pool(ctx, cm, &d, x->data, out->data, k);
}

/* ---- conv2d_act_max_pool2d --------------------------------------------------------- */

/* Load: the unpooled result goes to the method's device scratch. */
rt_status rt_cuda__check_conv2d_act_max_pool2d(rt_op_ctx *ctx) {
    rt_conv_pool_args args;
    RT_RETURN_IF_ERROR(rt_conv_pool__setup(ctx, &args));
    rt_cuda__reserve_scratch(ctx->backend, rt_conv_pool__unpooled_bytes(&args));
    return RT_OK;
}

/* The convolution kernel into scratch, then the max pool kernel from there. */
rt_status rt_cuda__run_conv2d_act_max_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm) {
    rt_conv_pool_args args;
    RT_RETURN_IF_ERROR(rt_conv_pool__setup(ctx, &args));
    const rt_conv_args *conv = &args.conv;
    const conv_dims *d = &conv->dims;
    const rt_pool_dims *pool = &args.pool;
    if (rt_tensor__numel(conv->out) == 0)
        return RT_OK;
    if (rt_conv_pool__unpooled_bytes(&args) > cm->scratch_bytes)
        return rt_op__fail(ctx, RT_INTERNAL, "the convolution's result needs more device scratch "
                           "than was planned at load");
    int64_t unpooled = pool->planes * d->out_h * d->out_w;
    if (unpooled > 0) {
        rt_cuda_conv_params c;
        conv_params(&c, conv, cm->scratch);
        RT_RETURN_IF_ERROR(launch_conv(ctx, cm, &c, RT_F32));
    }
    return launch_pool(ctx, cm, pool, cm->scratch, conv->out->data, RT_CUDA_K_max_pool2d_f32);
}

rt_status rt_cuda__run_avg_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__avg_pool2d_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 6);
    rt_pool_dims d;
    memset(&d, 0, sizeof d);
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 1, "kernel", 1, d.kernel));
    RT_RETURN_IF_ERROR(rt_op__int_pair(ctx, 2, "stride", 1, d.stride));
    RT_RETURN_IF_ERROR(rt_op__padding(ctx, 3, "padding", d.pad));
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 5, "count_include_pad", &d.count_include_pad));
    d.dilation[0] = d.dilation[1] = 1;
    d.planes = x->sizes[0] * x->sizes[1];
    d.height = x->sizes[2];
    d.width = x->sizes[3];
    d.out_h = out->sizes[2]; /* as prepare computed them */
    d.out_w = out->sizes[3];
    bool f64 = x->type == RT_F64;
    if (d.kernel[0] * d.kernel[1] < 64)
        return launch_pool(ctx, cm, &d, x->data, out->data,
                           f64 ? RT_CUDA_K_avg_pool2d_f64 : RT_CUDA_K_avg_pool2d_f32);
    /* A large window: one block per output element. */
    int64_t outputs = d.planes * d.out_h * d.out_w;
    return launch_pool_blocks(ctx, cm, &d, x->data, out->data,
                              f64 ? RT_CUDA_K_avg_pool2d_wide_f64 : RT_CUDA_K_avg_pool2d_wide_f32,
                              rt_cuda__blocks(outputs, 1));
}
