/* program.h: a loaded, verified, immutable program, shared by reference count. */
#ifndef RT_PROGRAM_H
#define RT_PROGRAM_H

#include <stdatomic.h>

#include "format/format.h"

struct rt_program {
    atomic_int refs;
    rt_format format;
    void *owned_copy;   /* RT_PROGRAM_COPY buffers */
    void *mapping;      /* rt_program_load_file */
    size_t mapping_size;
};

/* Index of the method called `name`; RT_NOT_FOUND listing the methods otherwise. */
rt_status rt_program__find_method(const rt_program *p, const char *name, uint32_t *out);

/* Metadata of value `value` of method `method`, named `name` (may be NULL). */
void rt_program__tensor_info(rt_tensor_info *out, const rt_program *p, uint32_t method,
                             uint32_t value, const char *name);

#endif
