/* int_param.c: int and int-list parameters given directly or as integer tensors. */
#include "ops/int_param.h"

#include "ops/op_util.h"

rt_status rt_op__int_param(rt_op_ctx *ctx, size_t i, const char *what, bool list,
                           rt_int_param *out) {
    *out = (rt_int_param){.known = true};
    rt_value *v = i < ctx->nargs && ctx->args ? ctx->args[i] : NULL;
    if (v && v->kind == RT_VALUE_INT && !list) {
        out->single = v->u.i;
        out->items = &out->single;
        out->count = 1;
        return RT_OK;
    }
    if (v && v->kind == RT_VALUE_INT_LIST && list)
        return rt_op__int_list(ctx, i, what, &out->items, &out->count);
    if (!v || v->kind != RT_VALUE_TENSOR) {
        /* Let the plain accessor word the failure. */
        if (list)
            return rt_op__int_list(ctx, i, what, &out->items, &out->count);
        return rt_op__int(ctx, i, what, &out->single);
    }
    rt_tensor_value *t;
    RT_RETURN_IF_ERROR(rt_op__tensor(ctx, i, what, &t));
    RT_RETURN_IF_ERROR(rt_op__check_type_in(ctx, t, what,
                                            RT_TYPE_BIT(RT_I32) | RT_TYPE_BIT(RT_I64),
                                            "int32 and int64"));
    if (ctx->preparing && t->dynamic)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM,
                           "%s is a dynamic tensor; a tensor parameter needs a fixed shape", what);
    int64_t numel = rt_tensor__numel(t);
    bool shape_ok = list ? t->rank == 1 : (t->rank <= 1 && numel == 1);
    if (!shape_ok)
        return rt_op__fail(ctx, RT_INVALID_PROGRAM, "%s must be %s, not a tensor of rank %d "
                           "with %lld elements", what,
                           list ? "an int list or a 1-D integer tensor"
                               : "an int or an integer tensor of one element",
                          (int)t->rank, (long long)numel);
    out->tensor = t;
    out->count = (size_t)numel;
    /* An input's contents exist only at execute; a constant's already at load. */
    out->known = !ctx->preparing || !t->writable;
    return RT_OK;
}

int64_t rt_op__int_param_at(const rt_int_param *p, size_t k) {
    if (!p->tensor)
        return p->items[k];
    if (p->tensor->type == RT_I32)
        return ((const int32_t *)p->tensor->data)[k];
    return ((const int64_t *)p->tensor->data)[k];
}
