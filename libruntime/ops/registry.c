/* registry.c: the table of every op, built from ops/ops.inc. */
#include <string.h>

#include "ops/ops.h"

static const rt_op_def op_table[] = {
#define RT_OP(name, symbol, cuda_check, cuda_run) \
    {name, rt_ops__##symbol##_prepare, rt_ops__##symbol##_run},
#include "ops/ops.inc"
#undef RT_OP
};

#define OP_COUNT (sizeof op_table / sizeof op_table[0])

const rt_op_def *rt_ops__find(const char *name) {
    if (!name)
        return NULL;
    for (size_t i = 0; i < OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0)
            return &op_table[i];
    return NULL;
}

size_t rt_ops__index(const rt_op_def *op) {
    return (size_t)(op - op_table);
}

size_t rt_ops__count(void) {
    return OP_COUNT;
}

const rt_op_def *rt_ops__at(size_t index) {
    return index < OP_COUNT ? &op_table[index] : NULL;
}
