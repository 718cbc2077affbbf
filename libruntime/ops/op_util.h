/* op_util.h: helpers shared by the CPU kernels (not part of the engine interface in op.h).
 *
 * Status codes the kernels use:
 * - RT_INVALID_PROGRAM: the instruction itself is wrong (argument count or kinds, mismatched
 *   dtypes, ranks or shapes, bad parameters, aliasing, a read-only output), found in prepare.
 * - RT_UNSUPPORTED: a well-formed request this build cannot serve (an op on a dtype it has no
 *   kernel for, a non-default dim order).
 * - RT_INVALID_ARGUMENT: at run, the current input sizes give a shape the plan cannot hold or
 *   that does not fit (dynamic inputs), or integer division by zero.
 * rt_op__shape_code() picks between the first and the last for checks shared by both phases. */
#ifndef RT_OPS_OP_UTIL_H
#define RT_OPS_OP_UTIL_H

#include "ops/fused_activation.h"
#include <stdbool.h>
#include <stdint.h>

#include "ops/op.h"

/* Room for "[a, b, ...]" of RT_MAX_RANK int64 sizes. */
#define RT_OP_SHAPE_TEXT 360

/* Bit of one rt_type in a set of supported types. */
#define RT_TYPE_BIT(type) (1u << (unsigned)(type))
#define RT_TYPES_FLOAT (RT_TYPE_BIT(RT_F32) | RT_TYPE_BIT(RT_F64))
#define RT_TYPES_SIGNED \
    (RT_TYPE_BIT(RT_I8) | RT_TYPE_BIT(RT_I16) | RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64))
#define RT_TYPES_UNSIGNED \
    (RT_TYPE_BIT(RT_U8) | RT_TYPE_BIT(RT_U16) | RT_TYPE_BIT(RT_U32) | RT_TYPE_BIT(RT_U64))
#define RT_TYPES_INTEGER (RT_TYPES_SIGNED | RT_TYPES_UNSIGNED)
#define RT_TYPES_NUMERIC (RT_TYPES_FLOAT | RT_TYPES_INTEGER)

/* A shape change found while preparing is a bad program; found at run it comes from the
 * caller's (dynamic) inputs. */
static inline rt_status rt_op__shape_code(const rt_op_ctx *ctx) {
    return ctx->preparing ? RT_INVALID_PROGRAM : RT_INVALID_ARGUMENT;
}

/* "[2, 3]" into buf; returns buf. */
const char *rt_op__shape_text(const int64_t *sizes, int32_t rank, char buf[RT_OP_SHAPE_TEXT]);
/* prefix, i in decimal, suffix ("xs[" 2 "]"), cut to fit 32 bytes: an argument's name for
 * checks that run on every call, written without printf's cost. */
#define RT_OP_ITEM_NAME 32
const char *rt_op__item_name(char buf[RT_OP_ITEM_NAME], const char *prefix, size_t i,
                             const char *suffix);

/* Fails with RT_UNSUPPORTED unless t's type is in `types` (RT_TYPE_BIT set); `expected` is the
 * text for the set, e.g. "float32 or float64". */
rt_status rt_op__check_type_in(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                               uint32_t types, const char *expected);

/* The output must not share memory with input `in` (home storage or current data). */
rt_status rt_op__check_disjoint(rt_op_ctx *ctx, const rt_tensor_value *out,
                                const char *what_out, const rt_tensor_value *in,
                                const char *what_in);

/* The outputs of an op with several: each writable, row-major, apart from x and from the
 * others. */
rt_status rt_op__check_outputs(rt_op_ctx *ctx, rt_tensor_value *const *outs,
                               const char *const *names, size_t count,
                               const rt_tensor_value *x, const char *what_x);

/* Elementwise ops may write in place: `in` may be the output itself, or share its storage
 * exactly (same start and element size, and `in` already has the result's shape `sizes`); any
 * other overlap fails. Call it before rt_op__set_output_sizes, which may resize `in` when it is
 * the output itself. */
rt_status rt_op__check_in_place_ok(rt_op_ctx *ctx, const rt_tensor_value *out,
                                   const char *what_out, const rt_tensor_value *in,
                                   const char *what_in, int32_t rank, const int64_t *sizes);

/* Parameters of the 2-D window ops (conv2d, pooling). */

/* Kernel sizes, strides, dilations and paddings are capped so that window arithmetic on any
 * tensor size stays far from int64 overflow. */
#define RT_OP_MAX_WINDOW_PARAM INT32_MAX

/* An int list of exactly two items in [min_value, RT_OP_MAX_WINDOW_PARAM] (stride, dilation,
 * kernel size). */
rt_status rt_op__int_pair(rt_op_ctx *ctx, size_t index, const char *what, int64_t min_value,
                          int64_t out[2]);
/* Padding as [h, w] (both sides alike) or [top, left, bottom, right], all in
 * [0, RT_OP_MAX_WINDOW_PARAM]; out gets
 * {top, left, bottom, right}. */
rt_status rt_op__padding(rt_op_ctx *ctx, size_t index, const char *what, int64_t out[4]);
/* Output length of a window of `kernel` taps `dilation` apart sliding by `stride` over `size`
 * padded by pad_before and pad_after (PyTorch's rule): floor (or ceil) of
 * (size + pads - dilation * (kernel - 1) - 1) / stride + 1, and in ceil mode the last window
 * must start inside the input or the leading padding. Fails naming `what` ("height") when the
 * result is negative or the arithmetic overflows. kernel, stride, dilation >= 1, pads >= 0. */
rt_status rt_op__window_output(rt_op_ctx *ctx, const char *what, int64_t size,
                               int64_t pad_before, int64_t pad_after, int64_t kernel,
                               int64_t stride, int64_t dilation, bool ceil_mode, int64_t *out);

/* Floor and ceiling of a / b for b > 0, whatever the sign of a. */
static inline int64_t rt_op__floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static inline int64_t rt_op__ceil_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* Overflow-checked arithmetic on non-negative int64 values; false on overflow. */
static inline bool rt_op__mul(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b != 0 && a > INT64_MAX / b))
        return false;
    *out = a * b;
    return true;
}

static inline bool rt_op__add(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b)
        return false;
    *out = a + b;
    return true;
}

/* a * b for a, b >= 0, saturating at INT64_MAX: for work estimates. */
static inline int64_t rt_op__mul_sat(int64_t a, int64_t b) {
    int64_t product;
    return rt_op__mul(a, b, &product) ? product : INT64_MAX;
}

/* Items per parallel chunk so that one chunk does at least ~32k units of work. */
static inline size_t rt_op__grain(int64_t work_per_item) {
    const int64_t target = 32768;
    if (work_per_item <= 0)
        return (size_t)target;
    return work_per_item >= target ? 1 : (size_t)(target / work_per_item);
}

/* Convolutions: float x, w [O, C / groups, kH, kW] and out alike (and bias [O] when given),
 * rank 4, row-major, out sharing memory with none of them. */
rt_status rt_op__check_conv_tensors(rt_op_ctx *ctx, const rt_tensor_value *x,
                                    const rt_tensor_value *w, const rt_tensor_value *bias,
                                    const rt_tensor_value *out);
/* groups (>= 1) divides x's channels and w's output channels, w has C / groups input
 * channels per group, and the kernel is not empty; x is [N, C, H, W], w [O, C/g, kH, kW]. */
rt_status rt_op__check_conv_groups(rt_op_ctx *ctx, const rt_tensor_value *x,
                                   const rt_tensor_value *w, int64_t groups);

/* Arguments (kind:int, lo:double, hi:double) at index..index+2 of a fused op. */
rt_status rt_op__activation(rt_op_ctx *ctx, size_t index, rt_activation *out);

/* State for prepare to derive from constants (packed weights): 64-byte aligned, owned by the
 * method from then on. NULL when it would exceed the method's memory limit or cannot be
 * allocated; the op must then work without it. At most one per instruction. */
void *rt_op__alloc_state(rt_op_ctx *ctx, size_t bytes);

/* Give back, during prepare, the state rt_op__alloc_state gave (`bytes` of it) when deriving
 * it failed after all: the op then works without it, and the budget is as before. */
void rt_op__free_state(rt_op_ctx *ctx, size_t bytes);

/* True for a tensor whose contents never change: a constant of the program. */
static inline bool rt_op__is_constant(const rt_tensor_value *t) { return !t->writable; }

static inline int32_t rt_op__threads(const rt_op_ctx *ctx) {
    return ctx->num_threads > 0 ? ctx->num_threads : 1;
}

/* Threads for a kernel with a scratch slot per thread: prepare sized the scratch for
 * rt_threadpool__hardware_threads() slots, so never more than that. */
static inline int32_t rt_op__slot_threads(const rt_op_ctx *ctx) {
    int32_t threads = rt_op__threads(ctx), most = rt_threadpool__hardware_threads();
    return threads < most ? threads : most;
}

#endif
