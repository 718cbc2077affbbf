/* op.h: the interface between the engine and the ops.
 *
 * Each op has a prepare function, run once per instruction at method load, and a run
 * function, called on every execute. Prepare validates everything it can (argument count,
 * kinds, dtypes, ranks, output shapes computed at the planned bounds) so that run only computes.
 * Argument convention: inputs first, then parameters (ints, lists), then the output(s) last.
 * Tensors reaching a kernel are dense; inputs that are not have been copied by set_input. */
#ifndef RT_OPS_OP_H
#define RT_OPS_OP_H

#include "core/error.h"
#include "core/threadpool.h"
#include "value.h"

typedef struct rt_op_ctx {
    const char *method_name;
    const char *op_name;
    uint32_t instruction;
    rt_value **args;
    size_t nargs;
    int32_t num_threads;
    /* prepare may set these; the method owns them afterwards. */
    void *state;
    void (*free_state)(void *state);
    uint64_t state_budget; /* prepare: bytes of state it may allocate (rt_op__alloc_state) */
    int32_t algorithm;     /* prepare: which of its algorithms the op's run takes (op-defined) */
    size_t scratch_bytes; /* prepare: bytes requested; run: bytes available at `scratch` */
    void *scratch;        /* 64-byte aligned, shared by all instructions of the method */
    bool preparing;       /* true during prepare (sizes are the bounds) */
    void *backend;        /* CUDA methods: the backend's method state; NULL on the cpu */
} rt_op_ctx;

typedef rt_status (*rt_op_fn)(rt_op_ctx *ctx);

typedef struct rt_op_def {
    const char *name;
    rt_op_fn prepare;
    rt_op_fn run;
} rt_op_def;

/* The registry (ops/registry.c). */
const rt_op_def *rt_ops__find(const char *name);
size_t rt_ops__count(void);
const rt_op_def *rt_ops__at(size_t index);
/* Its place in the op list (ops/ops.inc), which other per-op tables follow. */
size_t rt_ops__index(const rt_op_def *op);

/* Fail with "method 'm': instruction 3 (op): <message>". */
rt_status rt_op__fail(rt_op_ctx *ctx, rt_status code, const char *fmt, ...) RT_PRINTF(3, 4);

/* Argument access with checks; `what` names the argument in messages. */
rt_status rt_op__expect_nargs(rt_op_ctx *ctx, size_t n);
rt_status rt_op__tensor(rt_op_ctx *ctx, size_t i, const char *what, rt_tensor_value **out);
/* NONE gives *out = NULL. */
rt_status rt_op__optional_tensor(rt_op_ctx *ctx, size_t i, const char *what,
                                 rt_tensor_value **out);
rt_status rt_op__int(rt_op_ctx *ctx, size_t i, const char *what, int64_t *out);
rt_status rt_op__double(rt_op_ctx *ctx, size_t i, const char *what, double *out);
rt_status rt_op__bool(rt_op_ctx *ctx, size_t i, const char *what, bool *out);
rt_status rt_op__int_list(rt_op_ctx *ctx, size_t i, const char *what, const int64_t **items,
                          size_t *count);
/* A double list; an empty int list (how [] may be written) reads as an empty one. */
rt_status rt_op__double_list(rt_op_ctx *ctx, size_t i, const char *what, const double **items,
                             size_t *count);
rt_status rt_op__tensor_list(rt_op_ctx *ctx, size_t i, const char *what,
                             rt_tensor_value ***items, size_t *count);

/* Checks used by prepare functions. */
rt_status rt_op__check_type(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                            rt_type type);
rt_status rt_op__check_same_type(rt_op_ctx *ctx, const rt_tensor_value *a, const char *what_a,
                                 const rt_tensor_value *b, const char *what_b);
rt_status rt_op__check_rank(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what,
                            int32_t rank);
rt_status rt_op__check_float(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what);
rt_status rt_op__check_writable(rt_op_ctx *ctx, const rt_tensor_value *t, const char *what);
/* Tensors an op reads must use the default (row-major) dim order unless the op says so. */
rt_status rt_op__check_default_layout(rt_op_ctx *ctx, const rt_tensor_value *t,
                                      const char *what);
/* Normalise a possibly negative axis against rank; fails naming the op when out of range. */
rt_status rt_op__axis(rt_op_ctx *ctx, int64_t axis, int32_t rank, const char *what,
                      int32_t *out);

/* Give the output its sizes for this execution: rank must match, each size must be within the
 * planned bound, and a static output must get exactly its planned sizes. */
rt_status rt_op__set_output_sizes(rt_op_ctx *ctx, rt_tensor_value *out, const char *what,
                                  int32_t rank, const int64_t *sizes);

/* numpy broadcasting of two shapes into out (rank = max rank); fails naming both. */
rt_status rt_op__broadcast_shape(rt_op_ctx *ctx, const rt_tensor_value *a,
                                 const rt_tensor_value *b, int32_t *out_rank, int64_t *out_sizes);

#endif
