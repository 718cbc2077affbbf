/* cuda_ops_generate.c: the CUDA side of the ops that make tensors from parameters
 * (constant_of_shape, eye_like, one_hot: any dtype; range: the CPU's numeric dtypes) and of
 * non_zero and unique, whose output sizes depend on the data. Shape-giving parameters given
 * as tensors are read back to the host first (rt_cuda__with_host_params). */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/generate/unique.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define ARG_T(ctx, i) ((ctx)->args[i]->u.t)

static rt_status launch_fill(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_fill_params *p,
                             size_t elem) {
    if (p->n == 0)
        return RT_OK;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_fill_1, elem, p->n, p);
}

/* ---- constant_of_shape -------------------------------------------------------------- */

/* The value stays on the device: the kernel reads it. */
rt_status rt_cuda__run_constant_of_shape(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__constant_of_shape_prepare(ctx));
    const rt_tensor_value *value = ARG_T(ctx, 1), *out = ARG_T(ctx, 2);
    rt_cuda_fill_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    p.value = value->data;
    p.out = out->data;
    return launch_fill(ctx, cm, &p, out->elem_size);
}

/* ---- eye_like ----------------------------------------------------------------------- */

/* The bytes of 1 in `type`, little-endian in the low bytes of *out. */
static bool one_bits(rt_type type, uint64_t *out) {
    float f = 1.0f;
    double d = 1.0;
    uint32_t f_bits;
    switch (type) {
    case RT_F32: memcpy(&f_bits, &f, 4); *out = f_bits; return true;
    case RT_F64: memcpy(out, &d, 8); return true;
    case RT_F16: *out = 0x3C00; return true;
    case RT_BF16: *out = 0x3F80; return true;
    case RT_I8: case RT_U8: case RT_BOOL: case RT_I16: case RT_U16: case RT_I32: case RT_U32:
    case RT_I64: case RT_U64: *out = 1; return true;
    default: return false;
    }
}

rt_status rt_cuda__run_eye_like(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__eye_like_prepare(ctx));
    const rt_tensor_value *out = ARG_T(ctx, 2);
    rt_cuda_fill_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "k", &p.k));
    if (!one_bits(out->type, &p.one))
        return rt_op__fail(ctx, RT_INTERNAL, "no 1 for dtype %s", rt_tensor__type_name(out->type));
    int64_t rows = out->sizes[0];
    p.cols = out->sizes[1];
    if (p.k >= p.cols || p.k <= -rows)
        p.k = p.cols; /* no diagonal inside; and row + k in the kernel cannot overflow */
    p.out = out->data;
    return launch_fill(ctx, cm, &p, out->elem_size);
}

/* ---- one_hot ------------------------------------------------------------------------ */

rt_status rt_cuda__run_one_hot(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__one_hot_prepare(ctx));
    const rt_tensor_value *indices = ARG_T(ctx, 0), *values = ARG_T(ctx, 3);
    const rt_tensor_value *out = ARG_T(ctx, 4);
    rt_cuda_one_hot_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, out->rank, "axis", &axis));
    p.depth = out->sizes[axis];
    p.inner = 1;
    for (int32_t d = axis; d < indices->rank; d++)
        p.inner *= indices->sizes[d];
    p.index_type = (int32_t)indices->type;
    p.indices = indices->data;
    p.values = values->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_one_hot_1, out->elem_size, p.n, &p);
}

/* ---- range -------------------------------------------------------------------------- */

/* The length depends on the three values, so they come back to the host and the CPU op itself
 * runs there (its exact count, values and errors) into a host buffer of out's bounds, which
 * is then uploaded: ranges are short (loop counters, positions), one small copy each way. */
rt_status rt_cuda__run_range(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__range_prepare(ctx));
    rt_tensor_value *params[3] = {ARG_T(ctx, 0), ARG_T(ctx, 1), ARG_T(ctx, 2)};
    rt_tensor_value *out = ARG_T(ctx, 3);
    size_t elem = out->elem_size, capacity = (size_t)out->bounds[0] * elem;
    char *host = malloc(3 * 8 + (capacity > 0 ? capacity : 1));
    if (host == NULL)
        return rt_error__oom("range");
    const rt_cuda_driver *cu = cm->device->cu;
    rt_status status = RT_OK;
    for (int i = 0; i < 3 && status == RT_OK; i++)
        status = rt_cuda__check(cu->memcpy_dtoh_async(host + 8 * i,
                                                      (CUdeviceptr)(uintptr_t)params[i]->data,
                                                      elem, cm->stream),
                                "reading the range parameters");
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading the parameters");
    if (status != RT_OK) {
        free(host);
        return rt_op__fail(ctx, status, "could not read start, limit and delta");
    }
    void *device[4] = {params[0]->data, params[1]->data, params[2]->data, out->data};
    for (int i = 0; i < 3; i++)
        params[i]->data = host + 8 * i;
    out->data = host + 24;
    status = rt_ops__range_run(ctx); /* sets out's sizes, or fails naming why */
    for (int i = 0; i < 3; i++)
        params[i]->data = device[i];
    out->data = device[3];
    size_t nbytes = rt_tensor__nbytes(out);
    if (status == RT_OK && nbytes > 0) {
        status = rt_cuda__check(cu->memcpy_htod_async((CUdeviceptr)(uintptr_t)out->data,
                                                      host + 24, nbytes, cm->stream),
                                "writing the range");
        /* The host buffer is freed below: the copy must be done with it first. */
        if (status == RT_OK)
            status = rt_cuda__check(cu->stream_synchronize(cm->stream), "writing the range");
        if (status != RT_OK)
            status = rt_op__fail(ctx, status, "could not write the range");
    }
    free(host);
    return status;
}

/* ---- non_zero ----------------------------------------------------------------------- */

/* The chunk counts (and the total) live in the method's device scratch. */
#define NON_ZERO_SCRATCH ((RT_CUDA_NON_ZERO_CHUNKS + 1) * sizeof(int64_t))

rt_status rt_cuda__check_non_zero(rt_op_ctx *ctx) {
    rt_cuda__reserve_scratch(ctx->backend, NON_ZERO_SCRATCH);
    return RT_OK;
}

/* One block counts, the host reads the total back (the output's size depends on it), one
 * block writes. */
rt_status rt_cuda__run_non_zero(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__non_zero_prepare(ctx));
    rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 1);
    rt_cuda_non_zero_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(x);
    p.rank = x->rank;
    memcpy(p.sizes, x->sizes, (size_t)x->rank * sizeof *p.sizes);
    p.kind = x->type == RT_F32 ? 1 : x->type == RT_F64 ? 2
             : x->type == RT_F16 || x->type == RT_BF16 ? 3 : 0;
    p.elem_size = (int32_t)x->elem_size;
    p.chunks = cm->scratch;
    p.x = x->data;
    p.out = out->data;
    int64_t count = 0;
    if (p.n > 0) {
        RT_RETURN_IF_ERROR(rt_cuda__op_launch(ctx, cm, RT_CUDA_K_non_zero_count, 1, 1, 1, &p));
        RT_RETURN_IF_ERROR(rt_cuda__read_count(ctx, cm, p.chunks + RT_CUDA_NON_ZERO_CHUNKS,
                                               &count, "nonzero elements"));
    }
    int64_t sizes[2] = {x->rank, count};
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, out, "out", 2, sizes));
    if (count == 0)
        return RT_OK;
    p.count = count;
    return rt_cuda__op_launch(ctx, cm, RT_CUDA_K_non_zero_write, 1, 1, 1, &p);
}

/* ---- unique ------------------------------------------------------------------------- */

/* The kernel's working arrays and the group count, in the method's device scratch. */
static size_t unique_scratch(int64_t n) { return (size_t)(5 * n + 1) * sizeof(int64_t); }

rt_status rt_cuda__check_unique(rt_op_ctx *ctx) {
    const rt_tensor_value *x = ARG_T(ctx, 0);
    int64_t axis = ctx->args[1]->u.i;
    axis = axis < 0 ? axis + x->rank : axis;
    rt_cuda__reserve_scratch(ctx->backend, unique_scratch(x->bounds[axis]));
    return RT_OK;
}

/* One thread sorts and groups (kernels/unique.cu); the host reads the group count back to
 * give the outputs their sizes, as for non_zero. */
rt_status rt_cuda__run_unique(rt_op_ctx *ctx, rt_cuda_method *cm) {
    rt_unique_problem problem;
    rt_tensor_value *outs[4];
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_unique__problem(ctx, &problem, outs, &axis));
    int64_t groups = 0;
    if (problem.n > 0) {
        if (unique_scratch(problem.n) > cm->scratch_bytes)
            return rt_op__fail(ctx, RT_INTERNAL, "the scratch planned at load is too small");
        rt_cuda_unique_params p;
        memset(&p, 0, sizeof p);
        p.outer = problem.outer;
        p.n = problem.n;
        p.inner = problem.inner;
        p.kind = problem.type == RT_F32 ? 0 : problem.type == RT_F64 ? 1
                 : (RT_TYPES_SIGNED & RT_TYPE_BIT(problem.type)) ? 2 : 3;
        p.elem_size = (int32_t)problem.elem_size;
        p.sorted = problem.sorted;
        p.x = problem.x;
        p.y = outs[0]->data;
        p.indices = outs[1]->data;
        p.inverse = outs[2]->data;
        p.counts = outs[3]->data;
        p.scratch = cm->scratch;
        RT_RETURN_IF_ERROR(rt_cuda__op_launch(ctx, cm, RT_CUDA_K_unique, 1, 1, 1, &p));
        RT_RETURN_IF_ERROR(rt_cuda__read_count(ctx, cm, p.scratch + 5 * problem.n, &groups,
                                               "distinct slices"));
    }
    return rt_unique__set_sizes(ctx, outs, axis, groups);
}
