/* cuda_ops.h: shared by the CUDA op launchers (cuda_ops*.c). */
#ifndef RT_CUDA_OPS_H
#define RT_CUDA_OPS_H

#include "backends/cuda/cuda_method.h"
#include "ops/broadcast.h"
#include "ops/fused_activation.h"

/* Fails with RT_UNSUPPORTED naming the dtype unless t's type is in `types` (RT_TYPE_BIT). */
rt_status rt_cuda__check_types(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                               uint32_t types, const char *expected);

#define RT_CUDA_HOST_PARAMS 4 /* the most such arguments of one op (slice) */

/* Tensors among an op's arguments `indices` (small parameters: pads, k, axes, shapes, clip
 * bounds, per-tensor zero points) read back to the host, after the work queued before them,
 * and seen at host copies until _end puts the device pointers back: the CPU op's own prepare
 * and parameter readers then work unchanged. */
typedef struct rt_cuda_host_params {
    rt_tensor_value *params[RT_CUDA_HOST_PARAMS];
    void *device[RT_CUDA_HOST_PARAMS];
    size_t count;
    char *host;
} rt_cuda_host_params;

rt_status rt_cuda__host_params_begin(rt_op_ctx *ctx, rt_cuda_method *cm, const size_t *indices,
                                     size_t count, rt_cuda_host_params *state);
void rt_cuda__host_params_end(rt_cuda_host_params *state);

/* The op's whole run between _begin and _end. A parameter tensor that is also another
 * argument of the instruction fails cleanly (its kernel would get the host copy). */
rt_status rt_cuda__with_host_params(rt_op_ctx *ctx, rt_cuda_method *cm, const size_t *indices,
                                    size_t count,
                                    rt_status (*run)(rt_op_ctx *ctx, rt_cuda_method *cm));

/* cuda_ops_attention.c */
rt_status rt_cuda__run_attention(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_rotary(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_movement.c */
rt_status rt_cuda__run_copy(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_reshape(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_squeeze(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_unsqueeze(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_transpose(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_concat(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_expand(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_slice(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_split(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_tile(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_gather(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_gather_elements(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_gather_nd(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_scatter_elements(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_scatter_nd(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_copy_into(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_assign(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_depth_to_space(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_space_to_depth(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_trilu(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_pad(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_generate.c */
rt_status rt_cuda__run_constant_of_shape(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_eye_like(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_one_hot(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_range(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__check_non_zero(rt_op_ctx *ctx);
rt_status rt_cuda__run_non_zero(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__check_unique(rt_op_ctx *ctx);
rt_status rt_cuda__run_unique(rt_op_ctx *ctx, rt_cuda_method *cm);

/* *count from the device int64 at `device`, written by the work queued before: the size of a
 * data-dependent output (non_zero, unique, non_max_suppression). Fails naming `what`. */
rt_status rt_cuda__read_count(rt_op_ctx *ctx, rt_cuda_method *cm, const int64_t *device,
                             int64_t *count, const char *what);

/* cuda_ops_detection.c */
rt_status rt_cuda__check_non_max_suppression(rt_op_ctx *ctx);
rt_status rt_cuda__run_non_max_suppression(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_scan.c */
rt_status rt_cuda__run_cumsum(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__check_hardmax(rt_op_ctx *ctx);
rt_status rt_cuda__run_hardmax(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_lp_norm(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_topk(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_rnn.c */
rt_status rt_cuda__check_lstm(rt_op_ctx *ctx);
rt_status rt_cuda__run_lstm(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__check_gru(rt_op_ctx *ctx);
rt_status rt_cuda__run_gru(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__check_rnn(rt_op_ctx *ctx);
rt_status rt_cuda__run_rnn(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_quant.c */
rt_status rt_cuda__run_quantize_linear(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_dequantize_linear(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_dynamic_quantize_linear(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_matmul_integer(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_qlinear_matmul(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_conv_integer(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_qlinear_conv(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_resize.c */
rt_status rt_cuda__check_resize(rt_op_ctx *ctx);
rt_status rt_cuda__run_resize(rt_op_ctx *ctx, rt_cuda_method *cm);

/* cuda_ops_nn.c */
/* A batch of row-major products C = A @ B (+ biases, activation). */
typedef struct rt_cuda_gemm_problem {
    rt_type type;
    int64_t m, n, k;
    bool trans_b; /* b stored [n, k] */
    const void *a, *b, *row_bias, *col_bias;
    void *c;
    int32_t batch_rank;
    int64_t batch_sizes[RT_MAX_RANK];
    int64_t a_batch_strides[RT_MAX_RANK];
    int64_t b_batch_strides[RT_MAX_RANK];
    int64_t batch_count;
    rt_activation act;
} rt_cuda_gemm_problem;
/* The products of g on the method's stream: cuBLAS when installed (float32, float64), else
 * the tiled kernel (also int32 and int64, wrapping). */
rt_status rt_cuda__gemm(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_cuda_gemm_problem *g);

rt_status rt_cuda__check_matmul(rt_op_ctx *ctx);
rt_status rt_cuda__run_matmul(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_linear(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_linear_act(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_conv2d(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_conv2d_act(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_conv_transpose2d(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_max_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__check_conv2d_act_max_pool2d(rt_op_ctx *ctx);
rt_status rt_cuda__run_conv2d_act_max_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_avg_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm);

#endif
