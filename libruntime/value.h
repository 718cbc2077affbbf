/* value.h: the value table of a loaded method. */
#ifndef RT_VALUE_H
#define RT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef struct rt_value {
    int32_t kind; /* rt_value_kind */
    union {
        int64_t i;
        double d;
        bool b;
        const char *s;
        struct {
            const int64_t *items;
            size_t count;
        } ints;
        struct {
            const double *items;
            size_t count;
        } doubles;
        rt_tensor_value *t;
        struct {
            rt_tensor_value **items;
            size_t count;
        } tensors;
    } u;
} rt_value;

const char *rt_value__kind_name(int32_t kind);

#endif
