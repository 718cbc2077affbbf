/* cast.c: the cast(x, out) operator, between every pair of dtypes; x may be out when their
 * element sizes are equal. The conversions and their rounding rules are kernels/cast.c. */
#include <string.h>

#include "ops/elementwise/kernels/cast.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define ALL_TYPES ((1u << (unsigned)RT_TYPE_COUNT) - 1u)

static rt_status cast_setup(rt_op_ctx *ctx, rt_tensor_value **x, rt_tensor_value **out) {
    RT_RETURN_IF_ERROR(rt_op__expect_nargs(ctx, 2));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 0, "x", x));
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, 1, "out", out));
    const char *all = "every dtype";
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, *x, "x", ALL_TYPES, all));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, *out, "out", ALL_TYPES, all));
    RT_RETURN_IF_ERROR(rt_op__check_writable(ctx, *out, "out"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *x, "x"));
    RT_RETURN_IF_ERROR(rt_op__check_default_layout(ctx, *out, "out"));
    int64_t sizes[RT_MAX_RANK];
    memcpy(sizes, (*x)->sizes, sizeof sizes);
    /* In place needs equal element sizes: element i is read before it is written. */
    RT_RETURN_IF_ERROR(rt_op__check_in_place_ok(ctx, *out, "out", *x, "x", (*x)->rank, sizes));
    return rt_op__set_output_sizes(ctx, *out, "out", (*x)->rank, sizes);
}

rt_status rt_ops__cast_prepare(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    return cast_setup(ctx, &x, &out);
}

rt_status rt_ops__cast_run(rt_op_ctx *ctx) {
    rt_tensor_value *x, *out;
    RT_RETURN_IF_ERROR(cast_setup(ctx, &x, &out));
    int64_t numel = rt_tensor__numel(out);
    if (numel == 0)
        return RT_OK;
    if (x->type == out->type) { /* a copy, bit for bit (NaN payloads included) */
        if (out->data != x->data)
            memmove(out->data, x->data, rt_tensor__nbytes(x));
        return RT_OK;
    }
    rt_elementwise__cast(x->type, out->type, x->data, out->data, numel, x->elem_size,
                         out->elem_size, rt_op__threads(ctx));
    return RT_OK;
}
