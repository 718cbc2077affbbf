/* ops.h: declarations of every op's prepare and run, generated from ops.inc. */
#ifndef RT_OPS_OPS_H
#define RT_OPS_OPS_H

#include "ops/op.h"

#define RT_OP(name, symbol, cuda_check, cuda_run)           \
    rt_status rt_ops__##symbol##_prepare(rt_op_ctx *ctx);   \
    rt_status rt_ops__##symbol##_run(rt_op_ctx *ctx);
#include "ops/ops.inc"
#undef RT_OP

#endif
