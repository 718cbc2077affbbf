/* pool.h: the pooling family: the shape of a 2-D pooling (pool.c), its kernels (kernels/), and
 * the float32 max pool as a function for ops that pool what they compute (conv_pool.c, and the
 * direct convolution's bands). */
#ifndef RT_OPS_POOL_H
#define RT_OPS_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "ops/op.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RT_POOL_AVX512 1
#else
#define RT_POOL_AVX512 0
#endif

typedef struct rt_pool_dims {
    int64_t planes, height, width; /* planes = N * C */
    int64_t out_h, out_w;
    int64_t out_plane; /* floats from one output plane to the next: out_h * out_w if dense */
    int64_t kernel[2], stride[2], dilation[2];
    int64_t pad[4]; /* top, left, bottom, right */
    bool ceil_mode;
    bool count_include_pad; /* avg only */
} rt_pool_dims;

/* What a kernel's work items (output rows: plane * out_h + oh) read and write. */
typedef struct rt_pool_job {
    const rt_pool_dims *dims;
    const void *x;
    void *out;
} rt_pool_job;

/* Every output row through `kernel` (an rt_range_fn over rt_pool_job), on up to `threads`
 * threads. */
void rt_pool__rows(const rt_pool_dims *d, rt_range_fn kernel, const void *x, void *out,
                   int32_t threads);

/* The row kernel for a dtype (and, for float32, these dims); NULL for a dtype without one. */
rt_range_fn rt_pool__max_kernel(rt_type type, const rt_pool_dims *d);
rt_range_fn rt_pool__avg_kernel(rt_type type);
#if RT_POOL_AVX512
void rt_pool__max_2x2_rows_avx512(void *arg, size_t begin, size_t end);
#endif

/* max_pool2d's window parameters from arguments first..first + 4 (kernel, stride, padding,
 * dilation, ceil_mode), and its output sizes for an input of height x width. */
rt_status rt_pool__max_window(rt_op_ctx *ctx, size_t first, int64_t height, int64_t width,
                              rt_pool_dims *d);

/* Output rows [begin, end) of a float32 max pool (row = plane * out_h + oh) on this thread;
 * x holds the planes densely (height * width floats each). */
void rt_pool__max_f32_rows(const rt_pool_dims *d, const float *x, float *out, size_t begin,
                           size_t end);

/* The whole float32 max pool on up to `threads` threads. */
void rt_pool__max_f32(const rt_pool_dims *d, const float *x, float *out, int32_t threads);

#endif
