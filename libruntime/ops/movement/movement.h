/* movement.h: helpers shared by the data-movement ops (slice.c, gather.c, scatter.c, pad.c,
 * resize.c, layout.c, generate.c, introspect.c); implemented in movement.c (arguments) and
 * kernels/copy.c (the copies).
 *
 * Most of these ops move whole elements without looking at them, so they accept every dtype
 * and copy elem_size bytes at a time. Index tensors are int32 or int64. */
#ifndef RT_OPS_MOVEMENT_H
#define RT_OPS_MOVEMENT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ops/op_util.h"

#define RT_TYPES_INDEX (RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64))
#define RT_TYPES_ALL ((1u << (unsigned)RT_TYPE_COUNT) - 1u)

/* Element i of an int32 or int64 tensor. */
static inline int64_t rt_mv__index_at(const rt_tensor_value *t, int64_t i) {
    if (t->type == RT_I32)
        return ((const int32_t *)t->data)[i];
    return ((const int64_t *)t->data)[i];
}

/* One element of elem_size bytes (1, 2, 4 or 8 for every dtype). */
static inline void rt_mv__copy_elem(void *dst, const void *src, size_t elem_size) {
    switch (elem_size) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; return;
    case 2: memcpy(dst, src, 2); return;
    case 4: memcpy(dst, src, 4); return;
    case 8: memcpy(dst, src, 8); return;
    default: memcpy(dst, src, elem_size); return;
    }
}

/* Output dtype = x's, out writable, both row-major. */
rt_status rt_mv__check_data_op(rt_op_ctx *ctx, const rt_tensor_value *x, const char *what_x,
                               const rt_tensor_value *out);

/* An index tensor: int32 or int64, row-major, not sharing memory with out. */
rt_status rt_mv__check_index_tensor(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                                    const rt_tensor_value *out);

/* ---- int parameters given as a list or as a tensor ------------------------------------- */

/* An int-list parameter that a program gives either as a literal int list (known at load) or
 * as an int32/int64 tensor of rank <= 1 (read at run: during prepare its contents are unknown,
 * and ops give their output its planned bounds). A literal int counts as a list of one. */
typedef struct rt_mv_ints {
    const int64_t *items;          /* the literal list, or NULL */
    const rt_tensor_value *tensor; /* the tensor form, or NULL */
    int64_t single;                /* storage for a literal int */
    size_t count;
    bool present;                  /* false for none (optional parameters only) */
} rt_mv_ints;

rt_status rt_mv__ints(rt_op_ctx *ctx, size_t index, const char *what, bool optional,
                      rt_mv_ints *out);

/* The values can be read now: a literal, or a tensor while running. */
static inline bool rt_mv__ints_known(const rt_op_ctx *ctx, const rt_mv_ints *v) {
    return !v->tensor || !ctx->preparing;
}

static inline int64_t rt_mv__ints_at(const rt_mv_ints *v, size_t i) {
    return v->tensor ? rt_mv__index_at(v->tensor, (int64_t)i) : v->items[i];
}

/* ---- double parameters given as a list or as a tensor ---------------------------------- */

/* A double-list parameter that a program gives either as a literal double list (an empty int
 * list counts as an empty list) or as a float32/float64 tensor of rank <= 1 that is not
 * dynamic, so its count is fixed at load while its contents are read at run. */
typedef struct rt_mv_doubles {
    const double *items;           /* the literal list, or NULL */
    const rt_tensor_value *tensor; /* the tensor form, or NULL */
    size_t count;
} rt_mv_doubles;

/* Also checks that a tensor form is apart from `out` (unless out is NULL). */
rt_status rt_mv__doubles(rt_op_ctx *ctx, size_t index, const char *what,
                         const rt_tensor_value *out, rt_mv_doubles *v);

/* The values can be read now: a literal, an empty tensor, or a tensor while running. */
static inline bool rt_mv__doubles_known(const rt_op_ctx *ctx, const rt_mv_doubles *v) {
    return !v->tensor || !ctx->preparing || v->count == 0;
}

static inline double rt_mv__doubles_at(const rt_mv_doubles *v, size_t i) {
    if (!v->tensor)
        return v->items[i];
    if (v->tensor->type == RT_F32)
        return ((const float *)v->tensor->data)[i];
    return ((const double *)v->tensor->data)[i];
}

/* Gives out its planned bounds: for prepare when the shape depends on tensor contents. */
rt_status rt_mv__plan_at_bounds(rt_op_ctx *ctx, rt_tensor_value *out, const char *what);

/* ---- copies ------------------------------------------------------------------------------ */

/* Per-dimension source maps: out[i_0, ..., i_{r-1}] = src[sum_d maps[d][i_d]] (element
 * offsets into src), or *fill where some maps[d][i_d] is negative. Maps live in the op's
 * scratch: rt_mv__maps_bytes() of the planned output sizes is what prepare requests. */
size_t rt_mv__maps_bytes(int32_t rank, const int64_t *bounds);
/* Points maps[d] into scratch for the current sizes; false when the scratch is too small. */
bool rt_mv__maps_layout(const rt_op_ctx *ctx, int32_t rank, const int64_t *sizes,
                        int64_t **maps);
void rt_mv__map_copy(const rt_op_ctx *ctx, void *out, const void *src, int32_t rank,
                     const int64_t *sizes, int64_t *const *maps, const void *fill,
                     size_t elem_size);

/* dst (dense, row-major, `sizes`) = src read through src_strides (elements, may be negative
 * or 0), split over threads along the first dimension. */
void rt_mv__strided_copy(const rt_op_ctx *ctx, void *dst, const void *src,
                         const int64_t *src_strides, int32_t rank, const int64_t *sizes,
                         size_t elem_size);

/* n copies of one element (elem_size bytes) from `value` into dst. */
void rt_mv__fill(void *dst, const void *value, int64_t n, size_t elem_size);

/* Where copy_into puts x in out along axis for this index: slices [start, start + count);
 * fails naming the index when they do not fit (shared by the CPU and CUDA runs). */
rt_status rt_ops__copy_into_place(rt_op_ctx *ctx, const rt_tensor_value *x,
                                  const rt_tensor_value *out, int32_t axis, int64_t index,
                                  int64_t *start, int64_t *count);

/* Copy `rows` blocks of `bytes` from src (stride src_stride bytes) to dst (stride dst_stride),
 * over threads. */
void rt_mv__copy_rows(const rt_op_ctx *ctx, char *dst, size_t dst_stride, const char *src,
                      size_t src_stride, int64_t rows, size_t bytes);

/* "[1, 2]": position `flat` of a row-major tensor of `sizes`, for messages. */
const char *rt_mv__position_text(int64_t flat, int32_t rank, const int64_t *sizes,
                                 char buf[RT_OP_SHAPE_TEXT]);

/* slice's checks and output sizes for the current sizes (as its prepare), and per dimension
 * of x the first index and step it reads (arrays of RT_MAX_RANK). For backends that copy
 * themselves; parameters given as tensors are read from their (host) data. */
rt_status rt_mv__slice_plan(rt_op_ctx *ctx, int64_t *start, int64_t *step);

#endif
