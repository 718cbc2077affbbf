/* gather.c: gather, gather_elements and gather_nd (ONNX Gather, GatherElements, GatherND).
 *
 * Data of any dtype, indices int32 or int64. An index may be negative (counted from the end);
 * every index is checked before anything is written, and one out of range fails the run
 * with RT_INVALID_ARGUMENT naming its value and position. */
#include <inttypes.h>
#include <string.h>

#include "ops/movement/movement.h"
#include "ops/ops.h"

/* Fails naming indices[position] = value when it is outside [-limit, limit), and the
 * dimension as "<kind> <number> of data" (formatted only then: this runs per index). */
static rt_status index_in_range(rt_op_ctx *ctx, const rt_tensor_value *indices, int64_t flat,
                                int64_t value, int64_t limit, const char *kind, int32_t number) {
    if (value >= -limit && value < limit)
        return RT_OK;
    char pos[RT_OP_SHAPE_TEXT];
    return rt_op__fail(ctx, RT_INVALID_ARGUMENT,
                       "indices%s is %" PRId64 ", out of range for %s %" PRId32
                       " of data of size %" PRId64 " (valid: %" PRId64 " to %" PRId64 ")",
                       rt_mv__position_text(flat, indices->rank, indices->sizes, pos), value,
                       kind, number, limit, -limit, limit - 1);
}

/* Every index against one limit (the size of the gathered dimension). */
static rt_status check_indices(rt_op_ctx *ctx, const rt_tensor_value *indices, int64_t limit,
                               int32_t axis) {
    int64_t n = rt_tensor__numel(indices);
    for (int64_t i = 0; i < n; i++)
        RT_RETURN_IF_ERROR(index_in_range(ctx, indices, i, rt_mv__index_at(indices, i), limit,
                                          "axis", axis));
    return RT_OK;
}

static inline int64_t wrap_index(int64_t value, int64_t limit) {
    return value < 0 ? value + limit : value;
}

typedef struct gather_args {
    rt_tensor_value *data, *indices, *out;
    int32_t axis;
} gather_args;

/* The common checks of the three ops: data and out alike, indices an index tensor. */
static rt_status gather_common(rt_op_ctx *ctx, gather_args *args) {
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "data", &args->data));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "indices", &args->indices));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 3, "out", &args->out));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, args->data, "data", RT_TYPES_ALL, "any dtype"));
    RT_RETURN_IF_ERROR(rt_mv__check_data_op(ctx, args->data, "data", args->out));
    RT_RETURN_IF_ERROR(rt_op__check_disjoint(ctx, args->out, "out", args->data, "data"));
    return rt_mv__check_index_tensor(ctx, args->indices, "indices", args->out);
}

/* ---- gather ----------------------------------------------------------------------------- */

/* gather(data, indices, axis: int, out) */
static rt_status gather_setup(rt_op_ctx *ctx, gather_args *args) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis));
    RT_RETURN_IF_ERROR(gather_common(ctx, args));
    const rt_tensor_value *data = args->data, *indices = args->indices;
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, data->rank, "axis", &args->axis));
    int32_t rank = data->rank - 1 + indices->rank;
    if (rank > RT_MAX_RANK)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "the result would have rank %" PRId32
                           "; the most is %d", rank, RT_MAX_RANK);
    int64_t sizes[RT_MAX_RANK];
    int32_t n = 0;
    for (int32_t d = 0; d < args->axis; d++)
        sizes[n++] = data->sizes[d];
    for (int32_t d = 0; d < indices->rank; d++)
        sizes[n++] = indices->sizes[d];
    for (int32_t d = args->axis + 1; d < data->rank; d++)
        sizes[n++] = data->sizes[d];
    return rt_op__set_output_sizes(ctx, args->out, "out", rank, sizes);
}

rt_status rt_ops__gather_prepare(rt_op_ctx *ctx) {
    gather_args args;
    return gather_setup(ctx, &args);
}

typedef struct gather_job {
    char *out;
    const char *data;
    const rt_tensor_value *indices;
    int64_t count, dim; /* indices per outer row; size of the gathered axis */
    size_t row_bytes;   /* bytes of one gathered slice (inner elements) */
} gather_job;

static void gather_range(void *arg, size_t begin, size_t end) {
    const gather_job *job = arg;
    for (size_t r = begin; r < end; r++) {
        int64_t outer = (int64_t)r / job->count, k = (int64_t)r % job->count;
        int64_t at = wrap_index(rt_mv__index_at(job->indices, k), job->dim);
        memcpy(job->out + r * job->row_bytes,
               job->data + (size_t)(outer * job->dim + at) * job->row_bytes, job->row_bytes);
    }
}

rt_status rt_ops__gather_run(rt_op_ctx *ctx) {
    gather_args args;
    RT_RETURN_IF_ERROR(gather_setup(ctx, &args));
    const rt_tensor_value *data = args.data, *out = args.out;
    RT_RETURN_IF_ERROR(check_indices(ctx, args.indices, data->sizes[args.axis], args.axis));
    if (rt_tensor__numel(out) == 0)
        return RT_OK;
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < data->rank; d++) {
        if (d < args.axis)
            outer *= data->sizes[d];
        else if (d > args.axis)
            inner *= data->sizes[d];
    }
    gather_job job = {out->data, data->data, args.indices, rt_tensor__numel(args.indices),
                      data->sizes[args.axis], (size_t)inner * out->elem_size};
    rt_parallel__for(rt_op__threads(ctx), (size_t)(outer * job.count), rt_op__grain(inner),
                     gather_range, &job);
    return RT_OK;
}

/* ---- gather_elements -------------------------------------------------------------------- */

/* gather_elements(data, indices, axis: int, out): out[i] = data[i with i[axis] = indices[i]];
 * indices has data's rank and sizes at most data's off the axis. */
static rt_status gather_elements_setup(rt_op_ctx *ctx, gather_args *args) {
    int64_t axis;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "axis", &axis));
    RT_RETURN_IF_ERROR(gather_common(ctx, args));
    const rt_tensor_value *data = args->data, *indices = args->indices;
    RT_RETURN_IF_ERROR(rt_op__axis(ctx, axis, data->rank, "axis", &args->axis));
    RT_RETURN_IF_ERROR(rt_op__check_rank(ctx, indices, "indices", data->rank));
    for (int32_t d = 0; d < data->rank; d++) {
        if (d == args->axis || indices->sizes[d] <= data->sizes[d])
            continue;
        char ti[RT_OP_SHAPE_TEXT], td[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "indices %s is larger than data %s in dimension %" PRId32
                           " (only the axis may be larger)",
                           rt_op__shape_text(indices->sizes, indices->rank, ti),
                           rt_op__shape_text(data->sizes, data->rank, td), d);
    }
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, indices->sizes, sizeof sizes);
    return rt_op__set_output_sizes(ctx, args->out, "out", indices->rank, sizes);
}

rt_status rt_ops__gather_elements_prepare(rt_op_ctx *ctx) {
    gather_args args;
    return gather_elements_setup(ctx, &args);
}

typedef struct elements_job {
    const gather_args *args;
    int64_t strides[RT_MAX_RANK]; /* data's, in elements */
} elements_job;

/* Rows of the last dimension of out. */
static void elements_range(void *arg, size_t begin, size_t end) {
    const elements_job *job = arg;
    const rt_tensor_value *data = job->args->data, *indices = job->args->indices;
    const rt_tensor_value *out = job->args->out;
    int32_t last = out->rank - 1, axis = job->args->axis;
    int64_t n = out->sizes[last], dim = data->sizes[axis];
    size_t elem = out->elem_size;
    for (size_t row = begin; row < end; row++) {
        int64_t rest = (int64_t)row, base = 0;
        for (int32_t d = last - 1; d >= 0; d--) {
            if (d != axis)
                base += (rest % out->sizes[d]) * job->strides[d];
            rest /= out->sizes[d];
        }
        for (int64_t k = 0; k < n; k++) {
            int64_t flat = (int64_t)row * n + k;
            int64_t at = wrap_index(rt_mv__index_at(indices, flat), dim);
            int64_t offset = base + at * job->strides[axis] + (axis == last ? 0 : k);
            rt_mv__copy_elem((char *)out->data + (size_t)flat * elem,
                             (const char *)data->data + (size_t)offset * elem, elem);
        }
    }
}

rt_status rt_ops__gather_elements_run(rt_op_ctx *ctx) {
    gather_args args;
    RT_RETURN_IF_ERROR(gather_elements_setup(ctx, &args));
    RT_RETURN_IF_ERROR(check_indices(ctx, args.indices, args.data->sizes[args.axis], args.axis));
    const rt_tensor_value *out = args.out;
    int64_t numel = rt_tensor__numel(out);
    if (numel == 0)
        return RT_OK;
    elements_job job = {&args, {0}};
    rt_tensor__dense_strides(job.strides, args.data->rank, args.data->sizes, NULL);
    int64_t n = out->sizes[out->rank - 1];
    rt_parallel__for(rt_op__threads(ctx), (size_t)(numel / n), rt_op__grain(n), elements_range,
                     &job);
    return RT_OK;
}

/* ---- gather_nd -------------------------------------------------------------------------- */

typedef struct nd_args {
    gather_args g;
    int32_t batch_dims, k;
} nd_args;

/* gather_nd(data, indices, batch_dims: int, out): the last dimension of indices (k items)
 * indexes data after its first batch_dims dimensions, which indices shares. */
static rt_status gather_nd_setup(rt_op_ctx *ctx, nd_args *args) {
    int64_t batch_dims;
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 4));
    RT_RETURN_IF_ERROR(rt_op__int(ctx, 2, "batch_dims", &batch_dims));
    RT_RETURN_IF_ERROR(gather_common(ctx, &args->g));
    const rt_tensor_value *data = args->g.data, *indices = args->g.indices;
    int32_t r = data->rank, q = indices->rank;
    if (r < 1 || q < 1)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "data and indices need rank >= 1, not %"
                           PRId32 " and %" PRId32, r, q);
    if (batch_dims < 0 || batch_dims >= (q < r ? q : r))
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "batch_dims %" PRId64 " must be in [0, %"
                           PRId32 ")", batch_dims, q < r ? q : r);
    int32_t b = (int32_t)batch_dims;
    int64_t k = indices->sizes[q - 1];
    if (k > r - b)
        return rt_op__fail(ctx, rt_op__shape_code(ctx), "indices has %" PRId64 " items per index,"
                           " but data has only %" PRId32 " dimensions after the batch", k, r - b);
    for (int32_t d = 0; d < b; d++) {
        if (data->sizes[d] == indices->sizes[d])
            continue;
        char ti[RT_OP_SHAPE_TEXT], td[RT_OP_SHAPE_TEXT];
        return rt_op__fail(ctx, rt_op__shape_code(ctx),
                           "the batch dimensions of data %s and indices %s differ",
                           rt_op__shape_text(data->sizes, r, td),
                           rt_op__shape_text(indices->sizes, q, ti));
    }
    args->batch_dims = b;
    args->k = (int32_t)k;
    int64_t sizes[RT_MAX_RANK];
    int32_t n = 0;
    for (int32_t d = 0; d < q - 1; d++)
        sizes[n++] = indices->sizes[d];
    for (int32_t d = b + (int32_t)k; d < r; d++)
        sizes[n++] = data->sizes[d];
    return rt_op__set_output_sizes(ctx, args->g.out, "out", n, sizes);
}

rt_status rt_ops__gather_nd_prepare(rt_op_ctx *ctx) {
    nd_args args;
    return gather_nd_setup(ctx, &args);
}

typedef struct nd_job {
    const nd_args *args;
    int64_t per_batch;    /* index tuples per batch */
    int64_t batch_stride; /* data elements per batch */
    int64_t slice;        /* elements copied per tuple */
    int64_t strides[RT_MAX_RANK];
} nd_job;

static void nd_range(void *arg, size_t begin, size_t end) {
    const nd_job *job = arg;
    const rt_tensor_value *data = job->args->g.data, *indices = job->args->g.indices;
    int32_t b = job->args->batch_dims, k = job->args->k;
    size_t elem = data->elem_size;
    for (size_t t = begin; t < end; t++) {
        int64_t offset = ((int64_t)t / job->per_batch) * job->batch_stride;
        for (int32_t j = 0; j < k; j++) {
            int64_t v = rt_mv__index_at(indices, (int64_t)t * k + j);
            offset += wrap_index(v, data->sizes[b + j]) * job->strides[b + j];
        }
        memcpy((char *)job->args->g.out->data + t * (size_t)job->slice * elem,
               (const char *)data->data + (size_t)offset * elem, (size_t)job->slice * elem);
    }
}

rt_status rt_ops__gather_nd_run(rt_op_ctx *ctx) {
    nd_args args;
    RT_RETURN_IF_ERROR(gather_nd_setup(ctx, &args));
    const rt_tensor_value *data = args.g.data, *indices = args.g.indices;
    int32_t b = args.batch_dims, k = args.k;
    int64_t count = rt_tensor__numel(indices);
    for (int64_t i = 0; i < count; i++) {
        int32_t j = (int32_t)(i % k);
        RT_RETURN_IF_ERROR(index_in_range(ctx, indices, i, rt_mv__index_at(indices, i),
                                          data->sizes[b + j], "dimension", b + j));
    }
    if (rt_tensor__numel(args.g.out) == 0)
        return RT_OK;
    nd_job job = {&args, 1, 1, 1, {0}};
    rt_tensor__dense_strides(job.strides, data->rank, data->sizes, NULL);
    for (int32_t d = b; d < indices->rank - 1; d++)
        job.per_batch *= indices->sizes[d];
    for (int32_t d = b; d < data->rank; d++)
        job.batch_stride *= data->sizes[d];
    for (int32_t d = b + k; d < data->rank; d++)
        job.slice *= data->sizes[d];
    int64_t tuples = rt_tensor__numel(args.g.out) / job.slice;
    rt_parallel__for(rt_op__threads(ctx), (size_t)tuples, rt_op__grain(job.slice), nd_range,
                     &job);
    return RT_OK;
}
