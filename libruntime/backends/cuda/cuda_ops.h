/* cuda_ops.h: shared by the CUDA op launchers (cuda_ops.c, cuda_ops_nn.c). */
#ifndef RT_CUDA_OPS_H
#define RT_CUDA_OPS_H

#include "backends/cuda/cuda_method.h"

/* Fails with RT_UNSUPPORTED naming the dtype unless t's type is in `types` (RT_TYPE_BIT). */
rt_status rt_cuda__check_types(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                               uint32_t types, const char *expected);

rt_status rt_cuda__check_matmul(rt_op_ctx *ctx);
rt_status rt_cuda__run_matmul(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_linear(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_linear_act(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_conv2d(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_conv2d_act(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_max_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm);
rt_status rt_cuda__run_avg_pool2d(rt_op_ctx *ctx, rt_cuda_method *cm);

#endif
