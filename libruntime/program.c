/* program.c: loading programs from files and buffers (with their data files), reference
 * counting, metadata. */
#include "program.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "core/mapfile.h"

static rt_program *new_program(void) {
    rt_program *p = calloc(1, sizeof *p);
    if (p != NULL)
        atomic_init(&p->refs, 1);
    return p;
}

static void free_program(rt_program *p) {
    rt_program__release_data(p);
    rt_map__release(p->mapping, p->mapping_size);
    rt_alloc__free(p->owned_copy);
    free(p);
}

RT_API void rt_program_options_init(rt_program_options *out) {
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    out->version = RT_PROGRAM_OPTIONS_VERSION;
}

static rt_status check_options(const rt_program_options *o, const char *fn, uint32_t allowed) {
    if (o->version != RT_PROGRAM_OPTIONS_VERSION)
        return rt_error__set(RT_INVALID_ARGUMENT, "%s: options version %u; this library knows "
                             "version %d (initialise with rt_program_options_init)", fn,
                             o->version, RT_PROGRAM_OPTIONS_VERSION);
    if (o->flags & ~allowed)
        return rt_error__set(RT_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn,
                             o->flags & ~allowed);
    return RT_OK;
}

/* Verify the program bytes, then attach its data files; frees `p` on failure. */
static rt_status finish_load(rt_program **out, rt_program *p, const uint8_t *data, size_t size,
                             const rt_program_options *o, const char *path) {
    rt_status status = rt_format__read(&p->format, data, size, o->flags);
    if (status == RT_OK)
        status = rt_program__attach_data(p, o->data_files, o->num_data_files, o->flags);
    if (status != RT_OK) {
        if (path != NULL)
            rt_error__prefix("program '%s': ", path);
        free_program(p);
        return status;
    }
    *out = p;
    return RT_OK;
}

/* Everything the loader verifies becomes the process's own copy before it is verified, so a
 * file rewritten in place afterwards (by another process) cannot change what was checked:
 * every page but the constant segment's, which stays shared with the file (weights paged in
 * on demand). What this reads before owning it is only used to find the segment; a lie there
 * leaves more or less shared, never unchecked bytes in use. */
static void own_all_but_constants(void *map, size_t size) {
    rt_file_header h;
    rt_map__own(map, size, 0, sizeof h);
    uint64_t segment = 0, segment_size = 0;
    if (map != NULL && size >= sizeof h) {
        memcpy(&h, map, sizeof h);
        uint64_t table = (uint64_t)h.section_count * sizeof(rt_file_section);
        if (h.section_count <= RT_FORMAT_MAX_SECTIONS &&
            rt_format__range_ok(h.section_table_offset, table, size)) {
            rt_map__own(map, size, h.section_table_offset, table);
            for (uint32_t i = 0; i < h.section_count; i++) {
                rt_file_section sec;
                memcpy(&sec, (const uint8_t *)map + h.section_table_offset + i * sizeof sec,
                       sizeof sec);
                if (sec.kind == RT_SECTION_SEGMENT &&
                    rt_format__range_ok(sec.offset, sec.size, size)) {
                    segment = sec.offset;
                    segment_size = sec.size;
                }
            }
        }
    }
    rt_map__own(map, size, 0, segment);
    rt_map__own(map, size, segment + segment_size, size);
    rt_map__seal(map, size);
}

RT_API rt_status rt_program_load_file_v2(rt_program **out, const char *path,
                                         const rt_program_options *options) {
    if (out == NULL || path == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_program_load_file: out and path must "
                             "not be NULL");
    *out = NULL;
    rt_program_options defaults;
    rt_program_options_init(&defaults);
    const rt_program_options *o = options != NULL ? options : &defaults;
    RT_RETURN_IF_ERROR(check_options(o, "rt_program_load_file", RT_PROGRAM_VERIFY_CONSTANTS));
    rt_program *p = new_program();
    if (p == NULL)
        return rt_error__oom("program object");
    rt_status status = rt_map__file(path, "program", &p->mapping, &p->mapping_size);
    if (status != RT_OK) {
        free_program(p);
        return status;
    }
    own_all_but_constants(p->mapping, p->mapping_size);
    const uint8_t *data = p->mapping != NULL ? p->mapping : (const uint8_t *)"";
    RT_RETURN_IF_ERROR(finish_load(out, p, data, p->mapping_size, o, path));
    rt_log__write(RT_LOG_DEBUG, "loaded program '%s' (%zu bytes, %u methods, %u data files)",
                  path, p->mapping_size, p->format.num_methods, p->num_data_files);
    return RT_OK;
}

RT_API rt_status rt_program_load_file(rt_program **out, const char *path, uint32_t flags) {
    rt_program_options o;
    rt_program_options_init(&o);
    o.flags = flags;
    return rt_program_load_file_v2(out, path, &o);
}

RT_API rt_status rt_program_load_buffer_v2(rt_program **out, const void *data, size_t size,
                                           const rt_program_options *options) {
    if (out == NULL || data == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_program_load_buffer: out and data must "
                             "not be NULL");
    *out = NULL;
    rt_program_options defaults;
    rt_program_options_init(&defaults);
    const rt_program_options *o = options != NULL ? options : &defaults;
    RT_RETURN_IF_ERROR(check_options(o, "rt_program_load_buffer",
                                     RT_PROGRAM_COPY | RT_PROGRAM_VERIFY_CONSTANTS));
    if (!(o->flags & RT_PROGRAM_COPY) && (uintptr_t)data % RT_FORMAT_CONSTANT_ALIGN != 0)
        return rt_error__set(RT_INVALID_ARGUMENT, "a borrowed program buffer must be %d-byte "
                             "aligned (address %p is not); pass RT_PROGRAM_COPY to copy it",
                             RT_FORMAT_CONSTANT_ALIGN, data);
    rt_program *p = new_program();
    if (p == NULL)
        return rt_error__oom("program object");
    if (o->flags & RT_PROGRAM_COPY) {
        p->owned_copy = rt_alloc__aligned(size);
        if (p->owned_copy == NULL) {
            free_program(p);
            return rt_error__oom("copy of the program buffer");
        }
        memcpy(p->owned_copy, data, size);
        data = p->owned_copy;
    }
    return finish_load(out, p, data, size, o, NULL);
}

RT_API rt_status rt_program_load_buffer(rt_program **out, const void *data, size_t size,
                                        uint32_t flags) {
    rt_program_options o;
    rt_program_options_init(&o);
    o.flags = flags;
    return rt_program_load_buffer_v2(out, data, size, &o);
}

RT_API void rt_program_retain(rt_program *p) {
    if (p != NULL)
        atomic_fetch_add(&p->refs, 1);
}

RT_API void rt_program_release(rt_program *p) {
    if (p != NULL && atomic_fetch_sub(&p->refs, 1) == 1)
        free_program(p);
}

RT_API size_t rt_program_method_count(const rt_program *p) {
    return p != NULL ? p->format.num_methods : 0;
}

RT_API const char *rt_program_method_name(const rt_program *p, size_t index) {
    if (p == NULL || index >= p->format.num_methods)
        return NULL;
    return rt_format__string(&p->format, p->format.methods[index].name);
}

RT_API uint64_t rt_program_constant_bytes(const rt_program *p) {
    return p != NULL ? p->format.segment_size : 0;
}

rt_status rt_program__find_method(const rt_program *p, const char *name, uint32_t *out) {
    if (p == NULL || name == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "program and method name must not be NULL");
    const rt_format *f = &p->format;
    for (uint32_t i = 0; i < f->num_methods; i++) {
        if (strcmp(rt_format__string(f, f->methods[i].name), name) == 0) {
            *out = i;
            return RT_OK;
        }
    }
    char list[512] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < f->num_methods && used < sizeof list; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "",
                         rt_format__string(f, f->methods[i].name));
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return rt_error__set(RT_NOT_FOUND, "the program has no method '%s' (it has: %s)", name,
                         f->num_methods ? list : "no methods");
}

void rt_program__tensor_info(rt_tensor_info *out, const rt_program *p, uint32_t method,
                             uint32_t value, const char *name) {
    const rt_format *f = &p->format;
    const rt_file_value *v = &f->values[f->methods[method].values + value];
    memset(out, 0, sizeof *out);
    out->name = name != NULL ? name : "";
    out->kind = v->kind;
    if (v->kind != RT_VALUE_TENSOR)
        return;
    out->dtype = v->dtype;
    out->rank = v->rank;
    out->dynamic = (v->flags & RT_VALUE_FLAG_DYNAMIC) != 0;
    out->memory_planned = v->storage == RT_STORAGE_ARENA;
    out->is_constant = v->storage == RT_STORAGE_CONSTANT;
    uint64_t nbytes = rt_format__dtype_size(v->dtype);
    for (uint32_t d = 0; d < v->rank; d++) {
        out->sizes[d] = f->words[v->a + d];
        out->dim_order[d] = (uint8_t)f->words[v->b + d];
        nbytes *= (uint64_t)out->sizes[d];
    }
    out->nbytes = nbytes;
}

RT_API rt_status rt_program_method_info(rt_method_info *out, const rt_program *p,
                                        const char *method) {
    uint32_t index;
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_program_method_info: out is NULL");
    RT_RETURN_IF_ERROR(rt_program__find_method(p, method, &index));
    const rt_format *f = &p->format;
    const rt_file_method *m = &f->methods[index];
    out->name = rt_format__string(f, m->name);
    out->num_inputs = m->num_inputs;
    out->num_outputs = m->num_outputs;
    out->num_attributes = m->num_attributes;
    out->num_values = m->num_values;
    out->num_instructions = m->num_instructions;
    out->num_arenas = m->num_arenas;
    out->planned_bytes = 0;
    for (uint32_t a = 0; a < m->num_arenas; a++)
        out->planned_bytes += (uint64_t)f->words[m->arenas + a];
    return RT_OK;
}

/* The (value, name) word pair of input / output / attribute `index` (which = 0, 1, 2) of
 * method `mi`: inputs and outputs are (value, name) pairs, attributes (name, value) pairs. */
static rt_status io_pair(const rt_program *p, const char *method, uint32_t mi, size_t index,
                         int which, int64_t *value, int64_t *name) {
    static const char *what[] = {"input", "output", "attribute"};
    const rt_format *f = &p->format;
    const rt_file_method *m = &f->methods[mi];
    uint32_t start = which == 0 ? m->inputs : which == 1 ? m->outputs : m->attributes;
    uint32_t count = which == 0 ? m->num_inputs : which == 1 ? m->num_outputs
                                                               : m->num_attributes;
    if (index >= count)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': %s index %zu is out of range "
                             "(the method has %u)", method, what[which], index, count);
    const int64_t *pair = &f->words[start + 2 * index];
    *value = which == 2 ? pair[1] : pair[0];
    *name = which == 2 ? pair[0] : pair[1];
    return RT_OK;
}

static rt_status io_info(rt_tensor_info *out, const rt_program *p, const char *method,
                         size_t index, int which) {
    static const char *what[] = {"input", "output", "attribute"};
    uint32_t mi;
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "%s info: out is NULL", what[which]);
    RT_RETURN_IF_ERROR(rt_program__find_method(p, method, &mi));
    int64_t value, name;
    RT_RETURN_IF_ERROR(io_pair(p, method, mi, index, which, &value, &name));
    const rt_format *f = &p->format;
    rt_program__tensor_info(out, p, mi, (uint32_t)value,
                            name >= 0 ? rt_format__string(f, (uint32_t)name) : NULL);
    return RT_OK;
}

static rt_status io_dynamic_axes(uint32_t *out, const rt_program *p, const char *method,
                                 size_t index, int which) {
    uint32_t mi;
    int64_t value, name;
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "dynamic axes: out is NULL");
    RT_RETURN_IF_ERROR(rt_program__find_method(p, method, &mi));
    RT_RETURN_IF_ERROR(io_pair(p, method, mi, index, which, &value, &name));
    const rt_format *f = &p->format;
    const rt_file_value *v = &f->values[f->methods[mi].values + (uint32_t)value];
    uint32_t all = v->rank >= 32 ? UINT32_MAX : (1u << v->rank) - 1u;
    *out = v->kind != RT_VALUE_TENSOR || !(v->flags & RT_VALUE_FLAG_DYNAMIC) ? 0u
           : v->flags & RT_VALUE_FLAG_AXES                                 ? v->reserved
                                                                             : all;
    return RT_OK;
}

RT_API rt_status rt_program_input_dynamic_axes(uint32_t *out, const rt_program *p,
                                               const char *method, size_t index) {
    return io_dynamic_axes(out, p, method, index, 0);
}

RT_API rt_status rt_program_output_dynamic_axes(uint32_t *out, const rt_program *p,
                                                const char *method, size_t index) {
    return io_dynamic_axes(out, p, method, index, 1);
}

RT_API rt_status rt_program_input_info(rt_tensor_info *out, const rt_program *p,
                                       const char *method, size_t index) {
    return io_info(out, p, method, index, 0);
}

RT_API rt_status rt_program_output_info(rt_tensor_info *out, const rt_program *p,
                                        const char *method, size_t index) {
    return io_info(out, p, method, index, 1);
}

RT_API rt_status rt_program_attribute_info(rt_tensor_info *out, const rt_program *p,
                                           const char *method, size_t index) {
    return io_info(out, p, method, index, 2);
}

RT_API rt_status rt_program_instruction_op(const char **out, const rt_program *p,
                                           const char *method, size_t instruction) {
    uint32_t mi;
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_program_instruction_op: out is NULL");
    RT_RETURN_IF_ERROR(rt_program__find_method(p, method, &mi));
    const rt_format *f = &p->format;
    const rt_file_method *m = &f->methods[mi];
    if (instruction >= m->num_instructions)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': instruction %zu is out of "
                             "range (the method has %u)", method, instruction,
                             m->num_instructions);
    const rt_file_instruction *in = &f->instructions[m->instructions + instruction];
    *out = in->kind == RT_INSTR_KERNEL ? rt_format__string(f, f->ops[in->a]) : NULL;
    return RT_OK;
}
