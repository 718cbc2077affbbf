/* cuda_method.h: what a method loaded for a CUDA device holds (its backend state, behind
 * rt_backend__cuda of cuda_method.c), and the helpers the op launchers share. */
#ifndef RT_CUDA_METHOD_H
#define RT_CUDA_METHOD_H

#include "backends/cuda/blas.h"
#include "backends/cuda/device.h"
#include "backends/cuda/kernels/params.h"
#include "method.h"

typedef struct rt_cuda_method rt_cuda_method;

/* One op's CUDA side. `check` (may be NULL) runs at load after the op's own prepare and refuses
 * what the CUDA kernels do not cover (a dtype, a tensor-valued parameter); `run` redoes the
 * op's host-side prepare for the current sizes, then launches on the method's stream. */
typedef struct rt_cuda_op {
    rt_status (*check)(rt_op_ctx *ctx);
    rt_status (*run)(rt_op_ctx *ctx, rt_cuda_method *cm); /* NULL: no CUDA kernels */
} rt_cuda_op;

/* The CUDA side of an op of the registry (ops/ops.inc lists both). */
const rt_cuda_op *rt_cuda__op_of(const rt_op_def *op);

struct rt_cuda_method {
    rt_cuda_device *device;
    CUstream stream;
    rt_cuda_blas *blas; /* NULL when cuBLAS is not installed */
    CUdeviceptr *buffers; /* every device allocation the method owns */
    size_t num_buffers, buffers_capacity;
    const rt_cuda_op **ops; /* per instruction; NULL for jumps */
    bool profile;
    /* Device memory shared by the instructions for tables they upload before their kernels
     * (resize); sized at load by rt_cuda__reserve_scratch, used in stream order. */
    void *scratch;
    size_t scratch_bytes;
};

/* Device memory owned by the method: `init` (host bytes) copied in, or zero-filled. */
rt_status rt_cuda__method_alloc(rt_method *m, size_t bytes, const void *init, void **out);

/* Helpers for the op launchers (cuda_ops*.c). */

/* At load (an op's check): the instruction needs `bytes` of cm->scratch at its runs. */
void rt_cuda__reserve_scratch(rt_cuda_method *cm, size_t bytes);
/* At run: `bytes` of host memory copied into cm->scratch on the method's stream (the host
 * buffer may be reused once it returns); fails naming the op when the reserve is too small. */
rt_status rt_cuda__upload_scratch(rt_op_ctx *ctx, rt_cuda_method *cm, const void *host,
                                  size_t bytes);
rt_status rt_cuda__op_launch(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_kernel kernel,
                             unsigned grid_x, unsigned grid_y, unsigned grid_z, void *params);

/* The kernel of an element-size family for `elem`-byte elements: `first` is its _1 member;
 * kernels.inc declares every such family as _1, _2, _4, _8, in that order. False for any
 * other size. */
bool rt_cuda__sized_kernel(rt_cuda_kernel first, size_t elem, rt_cuda_kernel *out);

/* rt_cuda__op_launch of the family member for `elem`-byte elements (see above) over n
 * threads, 256 to a block; another element size fails naming the op. */
rt_status rt_cuda__op_launch_sized(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_kernel first,
                                   size_t elem, int64_t n, void *params);
/* dst = src (device, same sizes and element size) through any strides. */
rt_status rt_cuda__copy_strided(const rt_cuda_device *d, CUstream stream, void *dst,
                                const int64_t *dst_strides, const void *src,
                                const int64_t *src_strides, int32_t rank, const int64_t *sizes,
                                size_t elem_size, const char *what);

#endif
