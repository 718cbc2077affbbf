/* program.h: a loaded, verified, immutable program, shared by reference count. */
#ifndef RT_PROGRAM_H
#define RT_PROGRAM_H

#include <stdatomic.h>

#include "format/data_file.h"
#include "format/format.h"

/* A data file the program reads external constants from, mapped for the program's life. */
typedef struct rt_program_data {
    rt_data_file file;
    void *mapping;
    size_t mapping_size;
    char *path;
} rt_program_data;

struct rt_program {
    atomic_int refs;
    rt_format format;
    void *owned_copy;   /* RT_PROGRAM_COPY buffers */
    void *mapping;      /* rt_program_load_file */
    size_t mapping_size;
    rt_program_data *data_files;
    uint32_t num_data_files;
    const uint8_t **constant_data; /* per constant: its bytes, in the segment or a data file */
};

/* Map and verify the data files, then point every constant at its bytes: external ones are
 * found by key, and checked against the size, dtype and shape the program expects. */
rt_status rt_program__attach_data(rt_program *p, const char *const *paths, size_t count,
                                  uint32_t flags);
void rt_program__release_data(rt_program *p);

/* Index of the method called `name`; RT_NOT_FOUND listing the methods otherwise. */
rt_status rt_program__find_method(const rt_program *p, const char *name, uint32_t *out);

/* Metadata of value `value` of method `method`, named `name` (may be NULL). */
void rt_program__tensor_info(rt_tensor_info *out, const rt_program *p, uint32_t method,
                             uint32_t value, const char *name);

#endif
