/* cuda_ops_movement.c: the CUDA side of the ops that move elements without looking at them
 * (copy, reshape, transpose, concat, expand, slice, split, tile, gather, gather_elements,
 * gather_nd, scatter_elements, scatter_nd, depth_to_space, space_to_depth, trilu, pad,
 * copy_into, assign): strided copies and index kernels by element size, so any dtype (the
 * scatters' reductions go by numeric type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_ops.h"
#include "ops/movement/movement.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define ARG_T(ctx, i) ((ctx)->args[i]->u.t)

/* out = x byte for byte; nothing to do when the planner gave both one storage. */
static rt_status device_move(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_tensor_value *x,
                             const rt_tensor_value *out) {
    size_t nbytes = rt_tensor__nbytes(x);
    if (nbytes == 0 || out->data == x->data)
        return RT_OK;
    uintptr_t xs = (uintptr_t)x->data, os = (uintptr_t)out->data;
    if (xs < os + nbytes && os < xs + nbytes)
        return rt_op__fail(ctx, RT_UNSUPPORTED, "x and out overlap without coinciding; the CUDA "
                           "backend copies only between disjoint or identical storage");
    rt_status status = rt_cuda__check(
        cm->device->cu->memcpy_dtod_async((CUdeviceptr)os, (CUdeviceptr)xs, nbytes, cm->stream),
        "copying on the device");
    return status == RT_OK ? RT_OK : rt_op__fail(ctx, status, "device copy failed");
}

rt_status rt_cuda__run_copy(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__copy_prepare(ctx));
    return device_move(ctx, cm, ARG_T(ctx, 0), ARG_T(ctx, 1));
}

rt_status rt_cuda__run_reshape(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__reshape_prepare(ctx));
    return device_move(ctx, cm, ARG_T(ctx, 0), ARG_T(ctx, 2));
}

rt_status rt_cuda__run_squeeze(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__squeeze_prepare(ctx));
    return device_move(ctx, cm, ARG_T(ctx, 0), ARG_T(ctx, 2));
}

rt_status rt_cuda__run_unsqueeze(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__unsqueeze_prepare(ctx));
    return device_move(ctx, cm, ARG_T(ctx, 0), ARG_T(ctx, 2));
}

/* ---- transpose, concat -------------------------------------------------------------- */

static rt_status strided(rt_op_ctx *ctx, rt_cuda_method *cm, void *dst,
                         const int64_t *dst_strides, const void *src,
                         const int64_t *src_strides, const rt_tensor_value *shape_of) {
    rt_status status = rt_cuda__copy_strided(cm->device, cm->stream, dst, dst_strides, src,
                                             src_strides, shape_of->rank, shape_of->sizes,
                                             shape_of->elem_size, "strided copy");
    return status == RT_OK ? RT_OK : rt_op__fail(ctx, status, "strided copy failed");
}

rt_status rt_cuda__run_transpose(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__transpose_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 2);
    const int64_t *perm = ctx->args[1]->u.ints.items;
    int64_t x_strides[RT_MAX_RANK], src_strides[RT_MAX_RANK], dst_strides[RT_MAX_RANK];
    rt_tensor__dense_strides(x_strides, x->rank, x->sizes, NULL);
    rt_tensor__dense_strides(dst_strides, out->rank, out->sizes, NULL);
    for (int32_t i = 0; i < x->rank; i++) {
        int64_t axis = perm[i] < 0 ? perm[i] + x->rank : perm[i]; /* checked by prepare */
        src_strides[i] = x_strides[axis];
    }
    return strided(ctx, cm, out->data, dst_strides, x->data, src_strides, out);
}

rt_status rt_cuda__run_concat(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__concat_prepare(ctx));
    rt_tensor_value **xs = ctx->args[0]->u.tensors.items;
    size_t count = ctx->args[0]->u.tensors.count;
    const rt_tensor_value *out = ARG_T(ctx, 2);
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, out->rank, "axis", &axis));
    int64_t out_strides[RT_MAX_RANK], x_strides[RT_MAX_RANK];
    rt_tensor__dense_strides(out_strides, out->rank, out->sizes, NULL);
    int64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        const rt_tensor_value *x = xs[i];
        rt_tensor__dense_strides(x_strides, x->rank, x->sizes, NULL);
        char *dst = (char *)out->data + offset * out_strides[axis] * (int64_t)out->elem_size;
        RT_RETURN_IF_ERROR(strided(ctx, cm, dst, out_strides, x->data, x_strides, x));
        offset += x->sizes[axis];
    }
    return RT_OK;
}

/* ---- expand ------------------------------------------------------------------------- */

/* out = x broadcast: a strided copy reading x with stride 0 along broadcast dimensions. */
rt_status rt_cuda__run_expand(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__expand_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 2);
    int64_t src_strides[RT_MAX_RANK], dst_strides[RT_MAX_RANK];
    rt_broadcast__aligned_strides(src_strides, x, out->rank);
    rt_tensor__dense_strides(dst_strides, out->rank, out->sizes, NULL);
    return strided(ctx, cm, out->data, dst_strides, x->data, src_strides, out);
}

/* ---- slice -------------------------------------------------------------------------- */

/* out = x[start :: step] per dimension: a strided copy starting inside x. */
rt_status rt_cuda__run_slice(rt_op_ctx *ctx, rt_cuda_method *cm) {
    int64_t start[RT_MAX_RANK], step[RT_MAX_RANK];
    RT_RETURN_IF_ERROR(rt_mv__slice_plan(ctx, start, step));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 5);
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t x_strides[RT_MAX_RANK], src_strides[RT_MAX_RANK], dst_strides[RT_MAX_RANK];
    rt_tensor__dense_strides(x_strides, x->rank, x->sizes, NULL);
    rt_tensor__dense_strides(dst_strides, out->rank, out->sizes, NULL);
    int64_t offset = 0; /* every start lies inside x when out is not empty */
    for (int32_t d = 0; d < x->rank; d++) {
        offset += start[d] * x_strides[d];
        src_strides[d] = step[d] * x_strides[d];
    }
    const char *src = (const char *)x->data + offset * (int64_t)x->elem_size;
    return strided(ctx, cm, out->data, dst_strides, src, src_strides, out);
}

/* ---- tile --------------------------------------------------------------------------- */

rt_status rt_cuda__run_tile(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__tile_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 2);
    rt_cuda_tile_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0) /* then no x size is 0 below */
        return RT_OK;
    p.rank = out->rank;
    memcpy(p.out_sizes, out->sizes, (size_t)out->rank * sizeof *out->sizes);
    memcpy(p.x_sizes, x->sizes, (size_t)x->rank * sizeof *x->sizes);
    rt_tensor__dense_strides(p.x_strides, x->rank, x->sizes, NULL);
    if (p.rank == 0) {
        p.rank = 1;
        p.out_sizes[0] = p.x_sizes[0] = 1;
    }
    p.x = x->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_tile_1, out->elem_size, p.n, &p);
}

/* ---- split -------------------------------------------------------------------------- */

/* Each part a strided copy of its stretch of x; prepare gave every part its size. */
rt_status rt_cuda__run_split(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__split_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0);
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, x->rank, "axis", &axis));
    int64_t x_strides[RT_MAX_RANK], dst_strides[RT_MAX_RANK], offset = 0;
    rt_tensor__dense_strides(x_strides, x->rank, x->sizes, NULL);
    for (size_t i = 3; i < ctx->nargs; i++) {
        const rt_tensor_value *part = ARG_T(ctx, i);
        rt_tensor__dense_strides(dst_strides, part->rank, part->sizes, NULL);
        const char *src = (const char *)x->data + offset * x_strides[axis] * (int64_t)x->elem_size;
        RT_RETURN_IF_ERROR(strided(ctx, cm, part->data, dst_strides, src, x_strides, part));
        offset += part->sizes[axis];
    }
    return RT_OK;
}

/* ---- gather ------------------------------------------------------------------------- */

/* The indices come back to the host (after the work queued before them) and are checked as on
 * the CPU (in the wording of gather or of scatter), so a bad index fails the run naming it
 * instead of reading out of bounds. */
/* The wordings of the CPU ops' index errors. */
enum { WORDING_GATHER, WORDING_SCATTER, WORDING_GATHER_ND };

/* Element i of indices is checked against dims[i % period] (the size of data's dimension
 * first + i % period): one dimension for gather and the elements ops, k for gather_nd. */
static rt_status check_indices(rt_op_ctx *ctx, rt_cuda_method *cm,
                               const rt_tensor_value *indices, const int64_t *dims,
                               int32_t period, int32_t first, int wording) {
    int64_t n = rt_tensor__numel(indices);
    size_t bytes = (size_t)n * indices->elem_size;
    if (n == 0)
        return RT_OK;
    void *host = malloc(bytes);
    if (host == NULL)
        return rt_error__oom("gather index check");
    const rt_cuda_driver *cu = cm->device->cu;
    rt_status status = rt_cuda__check(
        cu->memcpy_dtoh_async(host, (CUdeviceptr)(uintptr_t)indices->data, bytes, cm->stream),
        "reading the gather indices");
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading the indices");
    if (status != RT_OK) {
        free(host);
        return rt_op__fail(ctx, status, "could not read the indices");
    }
    for (int64_t i = 0; i < n && status == RT_OK; i++) {
        int64_t v = indices->type == RT_I32 ? ((const int32_t *)host)[i]
                                            : ((const int64_t *)host)[i];
        int64_t dim = dims[i % period];
        if (v < -dim || v >= dim) {
            char pos[RT_OP_SHAPE_TEXT];
            status = rt_op__fail(ctx, RT_INVALID_ARGUMENT, "indices%s is %lld, out of range for "
                                 "%s %d of data%s of size %lld (valid: %lld to %lld)",
                                 rt_mv__position_text(i, indices->rank, indices->sizes, pos),
                                 (long long)v, wording == WORDING_GATHER ? "axis" : "dimension",
                                 (int)(first + i % period), wording == WORDING_SCATTER ? "," : "",
                                 (long long)dim, (long long)-dim, (long long)(dim - 1));
        }
    }
    free(host);
    return status;
}

rt_status rt_cuda__run_gather(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__gather_prepare(ctx));
    const rt_tensor_value *data = ARG_T(ctx, 0), *indices = ARG_T(ctx, 1), *out = ARG_T(ctx, 3);
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, data->rank, "axis", &axis));
    RT_RETURN_IF_ERROR(
        check_indices(ctx, cm, indices, &data->sizes[axis], 1, axis, WORDING_GATHER));
    rt_cuda_gather_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    p.count = rt_tensor__numel(indices);
    p.dim = data->sizes[axis];
    p.inner = 1;
    for (int32_t d = axis + 1; d < data->rank; d++)
        p.inner *= data->sizes[d];
    p.index_bits = indices->type == RT_I32 ? 32 : 64;
    p.data = data->data;
    p.indices = indices->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_gather_1, out->elem_size, p.n, &p);
}

/* ---- gather_elements ---------------------------------------------------------------- */

rt_status rt_cuda__run_gather_elements(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__gather_elements_prepare(ctx));
    const rt_tensor_value *data = ARG_T(ctx, 0), *indices = ARG_T(ctx, 1), *out = ARG_T(ctx, 3);
    int64_t axis_arg;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, data->rank, "axis", &axis));
    RT_RETURN_IF_ERROR(
        check_indices(ctx, cm, indices, &data->sizes[axis], 1, axis, WORDING_GATHER));
    rt_cuda_gather_elements_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    p.dim = data->sizes[axis];
    p.rank = out->rank;
    p.axis = axis;
    p.index_bits = indices->type == RT_I32 ? 32 : 64;
    memcpy(p.out_sizes, out->sizes, (size_t)out->rank * sizeof *out->sizes);
    rt_tensor__dense_strides(p.data_strides, data->rank, data->sizes, NULL);
    p.data = data->data;
    p.indices = indices->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_gather_elements_1, out->elem_size, p.n, &p);
}

/* ---- gather_nd ---------------------------------------------------------------------- */

rt_status rt_cuda__run_gather_nd(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__gather_nd_prepare(ctx));
    const rt_tensor_value *data = ARG_T(ctx, 0), *indices = ARG_T(ctx, 1), *out = ARG_T(ctx, 3);
    int64_t batch_dims;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "batch_dims", &batch_dims));
    int32_t b = (int32_t)batch_dims, k = (int32_t)indices->sizes[indices->rank - 1];
    if (k > 0) /* prepare checked b + k <= data's rank */
        RT_RETURN_IF_ERROR(check_indices(ctx, cm, indices, &data->sizes[b], k, b,
                                         WORDING_GATHER_ND));
    rt_cuda_gather_nd_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    p.k = k;
    p.batch_dims = b;
    p.per_batch = p.batch_stride = p.slice = 1;
    for (int32_t d = b; d < indices->rank - 1; d++)
        p.per_batch *= indices->sizes[d];
    for (int32_t d = b; d < data->rank; d++)
        p.batch_stride *= data->sizes[d];
    for (int32_t d = b + k; d < data->rank; d++)
        p.slice *= data->sizes[d];
    memcpy(p.data_sizes, data->sizes, (size_t)data->rank * sizeof *data->sizes);
    rt_tensor__dense_strides(p.data_strides, data->rank, data->sizes, NULL);
    p.index_bits = indices->type == RT_I32 ? 32 : 64;
    p.data = data->data;
    p.indices = indices->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_gather_nd_1, out->elem_size, p.n, &p);
}

/* ---- scatter_elements --------------------------------------------------------------- */

/* Replacing moves bytes, so any dtype goes by its size; the reductions by their type. */
static rt_status launch_scatter(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_scatter_params *p,
                                const rt_tensor_value *out) {
    rt_cuda_kernel k;
    switch (p->reduction == 0 ? (int)out->elem_size + 100 : (int)out->type) {
    case 1 + 100: k = RT_CUDA_K_scatter_u8; break;
    case 2 + 100: k = RT_CUDA_K_scatter_u16; break;
    case 4 + 100: k = RT_CUDA_K_scatter_u32; break;
    case 8 + 100: k = RT_CUDA_K_scatter_u64; break;
    case RT_F32: k = RT_CUDA_K_scatter_f32; break;
    case RT_F64: k = RT_CUDA_K_scatter_f64; break;
    case RT_I8: k = RT_CUDA_K_scatter_i8; break;
    case RT_I16: k = RT_CUDA_K_scatter_i16; break;
    case RT_I32: k = RT_CUDA_K_scatter_i32; break;
    case RT_I64: k = RT_CUDA_K_scatter_i64; break;
    case RT_U8: k = RT_CUDA_K_scatter_u8; break;
    case RT_U16: k = RT_CUDA_K_scatter_u16; break;
    case RT_U32: k = RT_CUDA_K_scatter_u32; break;
    case RT_U64: k = RT_CUDA_K_scatter_u64; break;
    default: return rt_op__fail(ctx, RT_INTERNAL, "no CUDA scatter kernel for this dtype");
    }
    return rt_cuda__op_launch(ctx, cm, k, rt_cuda__blocks(p->lines, 256), 1, 1, p);
}

/* out = data (a device copy unless out is data), then one thread per line of indices along the
 * axis applies that line's updates in order, so duplicates combine as on the CPU. */
rt_status rt_cuda__run_scatter_elements(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__scatter_elements_prepare(ctx));
    const rt_tensor_value *data = ARG_T(ctx, 0), *indices = ARG_T(ctx, 1);
    const rt_tensor_value *updates = ARG_T(ctx, 2), *out = ARG_T(ctx, 5);
    int64_t axis_arg, reduction;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, data->rank, "axis", &axis));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 4, "reduction", &reduction));
    RT_RETURN_IF_ERROR(
        check_indices(ctx, cm, indices, &out->sizes[axis], 1, axis, WORDING_SCATTER));
    RT_RETURN_IF_ERROR(device_move(ctx, cm, data, out));
    rt_cuda_scatter_params p;
    memset(&p, 0, sizeof p);
    int64_t count = rt_tensor__numel(indices);
    if (count == 0)
        return RT_OK;
    p.lines = count / indices->sizes[axis];
    p.dim = out->sizes[axis];
    p.rank = out->rank;
    p.axis = axis;
    p.index_bits = indices->type == RT_I32 ? 32 : 64;
    p.reduction = (int32_t)reduction;
    memcpy(p.idx_sizes, indices->sizes, (size_t)indices->rank * sizeof *indices->sizes);
    rt_tensor__dense_strides(p.out_strides, out->rank, out->sizes, NULL);
    p.indices = indices->data;
    p.updates = updates->data;
    p.out = out->data;
    return launch_scatter(ctx, cm, &p, out);
}

/* out = data, then one thread per element of the slices applies every tuple's update to it,
 * tuples in order, so duplicates combine as on the CPU. */
rt_status rt_cuda__run_scatter_nd(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__scatter_nd_prepare(ctx));
    const rt_tensor_value *data = ARG_T(ctx, 0), *indices = ARG_T(ctx, 1);
    const rt_tensor_value *updates = ARG_T(ctx, 2), *out = ARG_T(ctx, 4);
    int64_t reduction;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 3, "reduction", &reduction));
    int32_t k = (int32_t)indices->sizes[indices->rank - 1];
    if (k > 0) /* prepare checked k <= out's rank */
        RT_RETURN_IF_ERROR(check_indices(ctx, cm, indices, out->sizes, k, 0, WORDING_SCATTER));
    RT_RETURN_IF_ERROR(device_move(ctx, cm, data, out));
    rt_cuda_scatter_params p;
    memset(&p, 0, sizeof p);
    p.lines = 1;
    for (int32_t d = k; d < out->rank; d++)
        p.lines *= out->sizes[d];
    if (p.lines == 0)
        return RT_OK;
    p.tuples = rt_tensor__numel(updates) / p.lines;
    if (p.tuples == 0)
        return RT_OK;
    p.nd = 1;
    p.k = k;
    p.rank = out->rank;
    p.index_bits = indices->type == RT_I32 ? 32 : 64;
    p.reduction = (int32_t)reduction;
    memcpy(p.idx_sizes, out->sizes, (size_t)out->rank * sizeof *out->sizes);
    rt_tensor__dense_strides(p.out_strides, out->rank, out->sizes, NULL);
    p.indices = indices->data;
    p.updates = updates->data;
    p.out = out->data;
    return launch_scatter(ctx, cm, &p, out);
}

/* ---- depth_to_space, space_to_depth ------------------------------------------------- */

/* Both are a 6-D transpose, as on the CPU (ops/movement/layout.c): out viewed in 6-D reads x's 6-D view
 * through permuted strides (perm: out dimension -> x6 dimension). */
static rt_status block_transpose(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_tensor_value *x,
                                 const rt_tensor_value *out, const int64_t *x6,
                                 const int *perm) {
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t x_strides[6], src_strides[6], out6[6], dst_strides[6];
    rt_tensor__dense_strides(x_strides, 6, x6, NULL);
    for (int i = 0; i < 6; i++) {
        src_strides[i] = x_strides[perm[i]];
        out6[i] = x6[perm[i]];
    }
    rt_tensor__dense_strides(dst_strides, 6, out6, NULL);
    rt_status status = rt_cuda__copy_strided(cm->device, cm->stream, out->data, dst_strides,
                                             x->data, src_strides, 6, out6, out->elem_size,
                                             "block transpose");
    return status == RT_OK ? RT_OK : rt_op__fail(ctx, status, "strided copy failed");
}

/* blocksize and mode as the CPU prepare checked them. */
static rt_status block_args(rt_op_ctx *ctx, int64_t *block, int64_t *mode) {
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "blocksize", block));
    return rt_op__int(ctx, 2, "mode", mode);
}

rt_status rt_cuda__run_depth_to_space(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__depth_to_space_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    int64_t b, mode;
    RT_RETURN_IF_ERROR(block_args(ctx, &b, &mode));
    const int64_t *s = x->sizes;
    int64_t c = s[1] / (b * b);
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3};
    if (mode == 0) { /* DCR */
        int64_t x6[6] = {s[0], b, b, c, s[2], s[3]};
        return block_transpose(ctx, cm, x, out, x6, dcr);
    }
    int64_t x6[6] = {s[0], c, b, b, s[2], s[3]};
    return block_transpose(ctx, cm, x, out, x6, crd);
}

rt_status rt_cuda__run_space_to_depth(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__space_to_depth_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    int64_t b, mode;
    RT_RETURN_IF_ERROR(block_args(ctx, &b, &mode));
    const int64_t *s = x->sizes;
    int64_t x6[6] = {s[0], s[1], s[2] / b, b, s[3] / b, b};
    static const int dcr[6] = {0, 3, 5, 1, 2, 4}, crd[6] = {0, 1, 3, 5, 2, 4};
    return block_transpose(ctx, cm, x, out, x6, mode == 0 ? dcr : crd);
}

/* ---- trilu -------------------------------------------------------------------------- */

rt_status rt_cuda__run_trilu(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__trilu_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    rt_cuda_trilu_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    bool upper;
    rt_mv_ints k_arg; /* an int, a one-int list, or a tensor read back to the host */
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "k", false, &k_arg));
    p.k = rt_mv__ints_at(&k_arg, 0);
    RT_RETURN_IF_ERROR(rt_op__bool(ctx, 2, "upper", &upper));
    p.rows = out->sizes[out->rank - 2];
    p.cols = out->sizes[out->rank - 1];
    int64_t limit = p.rows + p.cols; /* as on the CPU: row + k cannot overflow */
    p.k = p.k < -limit ? -limit : p.k > limit ? limit : p.k;
    p.upper = upper;
    p.x = x->data;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_trilu_1, out->elem_size, p.n, &p);
}

/* ---- pad ---------------------------------------------------------------------------- */

/* Crop first (negative pads), then pad around what is kept, as the CPU; the pads were checked
 * by prepare. The fill value stays on the device: the kernel reads it. */
rt_status rt_cuda__run_pad(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__pad_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 4);
    rt_cuda_pad_params p;
    memset(&p, 0, sizeof p);
    p.n = rt_tensor__numel(out);
    if (p.n == 0)
        return RT_OK;
    rt_mv_ints pads;
    int64_t mode;
    RT_RETURN_IF_ERROR(rt_mv__ints(ctx, 1, "pads", false, &pads));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "mode", &mode));
    p.mode = (int32_t)mode;
    p.rank = x->rank;
    rt_tensor__dense_strides(p.x_strides, x->rank, x->sizes, NULL);
    for (int32_t d = 0; d < x->rank; d++) {
        int64_t b = rt_mv__ints_at(&pads, (size_t)d);
        int64_t e = rt_mv__ints_at(&pads, (size_t)(d + x->rank));
        p.out_sizes[d] = out->sizes[d];
        p.skip[d] = b < 0 ? -b : 0;
        p.lead[d] = b > 0 ? b : 0;
        p.kept[d] = x->sizes[d] - p.skip[d] - (e < 0 ? -e : 0);
    }
    if (p.rank == 0) {
        p.rank = 1;
        p.out_sizes[0] = p.kept[0] = 1;
    }
    p.x = x->data;
    p.value = ctx->args[3]->kind == RT_VALUE_TENSOR ? ARG_T(ctx, 3)->data : NULL;
    p.out = out->data;
    return rt_cuda__op_launch_sized(ctx, cm, RT_CUDA_K_pad_1, out->elem_size, p.n, &p);
}

/* ---- copy_into, assign (lowered loops) ------------------------------------------------ */

/* A tensor index comes back to the host (after the work queued before it), as the CPU reads
 * it at run: the loops that use copy_into keep their counter in such a tensor. */
static rt_status read_one_index(rt_op_ctx *ctx, rt_cuda_method *cm, const rt_tensor_value *t,
                                int64_t *out) {
    union {
        int32_t i32;
        int64_t i64;
    } v = {.i64 = 0};
    const rt_cuda_driver *cu = cm->device->cu;
    rt_status status = rt_cuda__check(
        cu->memcpy_dtoh_async(&v, (CUdeviceptr)(uintptr_t)t->data, t->elem_size, cm->stream),
        "reading the index");
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading the index");
    if (status != RT_OK)
        return rt_op__fail(ctx, status, "could not read the index");
    *out = t->type == RT_I32 ? v.i32 : v.i64;
    return RT_OK;
}

/* out[..., index, ...] = x along axis (or a block of x's size along it): rows (the
 * dimensions before axis) of x's inner block, one strided copy into out's slices. */
rt_status rt_cuda__run_copy_into(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__copy_into_prepare(ctx));
    const rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 3);
    int64_t axis_arg, index, start, count;
    int32_t axis;
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis_arg));
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis_arg, out->rank, "axis", &axis));
    if (ctx->args[1]->kind == RT_VALUE_INT)
        RT_RETURN_IF_ERROR(rt_op__int(ctx, 1, "index", &index));
    else
        RT_RETURN_IF_ERROR(read_one_index(ctx, cm, ARG_T(ctx, 1), &index));
    RT_RETURN_IF_ERROR(rt_ops__copy_into_place(ctx, x, out, axis, index, &start, &count));
    int64_t size = out->sizes[axis], sizes[2] = {1, count};
    for (int32_t d = 0; d < out->rank; d++)
        if (d != axis)
            sizes[d < axis ? 0 : 1] *= out->sizes[d];
    if (sizes[0] == 0 || sizes[1] == 0)
        return RT_OK;
    int64_t inner = sizes[1] / count;
    int64_t dst_strides[2] = {size * inner, 1}, src_strides[2] = {sizes[1], 1};
    char *dst = (char *)out->data + (size_t)(start * inner) * out->elem_size;
    rt_status status = rt_cuda__copy_strided(cm->device, cm->stream, dst, dst_strides, x->data,
                                             src_strides, 2, sizes, out->elem_size,
                                             "copy_into");
    return status == RT_OK ? RT_OK : rt_op__fail(ctx, status, "strided copy failed");
}

/* out = x, x's current shape checked against out's as on the CPU. */
rt_status rt_cuda__run_assign(rt_op_ctx *ctx, rt_cuda_method *cm) {
    RT_RETURN_IF_ERROR(rt_ops__assign_prepare(ctx));
    rt_tensor_value *x = ARG_T(ctx, 0), *out = ARG_T(ctx, 1);
    RT_RETURN_IF_ERROR(rt_op__set_output_sizes(ctx, out, "out", x->rank, x->sizes));
    return device_move(ctx, cm, x, out);
}
