/* program_data.c: a program's constants, from its own segment or from data files.
 *
 * An external constant names a key; every data file given at load is searched for it. The
 * key must be found exactly once, hold the bytes the program's constant record promises,
 * and hold the dtype and shape of every tensor that reads it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mapfile.h"
#include "program.h"

#define RT_MAX_DATA_FILES 1024

static void describe(char *buf, size_t size, rt_dtype dtype, uint32_t rank,
                     const int64_t *shape) {
    static const char *codes[] = {"int", "uint", "float", "?", "bfloat", "?", "bool"};
    int n = dtype.code == RT_DTYPE_BOOL
                ? snprintf(buf, size, "bool[")
                : snprintf(buf, size, "%s%u[", dtype.code < 7 ? codes[dtype.code] : "?",
                           dtype.bits);
    for (uint32_t d = 0; d < rank && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* The header and the entry table become the process's own copy before they are verified,
 * so rewriting the file in place cannot change them afterwards; the data stays shared with
 * the file (see own_all_but_constants in program.c). */
static void own_header_and_table(void *map, size_t size) {
    rt_data_header h;
    rt_map__own(map, size, 0, sizeof h);
    if (map != NULL && size >= sizeof h) {
        memcpy(&h, map, sizeof h);
        rt_map__own(map, size, h.table_offset, h.table_size); /* clamped to the mapping */
    }
    rt_map__seal(map, size);
}

static rt_status open_data_file(rt_program_data *d, const char *path, uint32_t flags) {
    size_t len = strlen(path);
    d->path = malloc(len + 1);
    if (d->path == NULL)
        return rt_error__oom("data file path");
    memcpy(d->path, path, len + 1);
    RT_RETURN_IF_ERROR(rt_map__file(path, "data file", &d->mapping, &d->mapping_size));
    own_header_and_table(d->mapping, d->mapping_size);
    const uint8_t *bytes = d->mapping != NULL ? d->mapping : (const uint8_t *)"";
    rt_status status = rt_data_file__read(&d->file, bytes, d->mapping_size, flags);
    if (status != RT_OK)
        rt_error__prefix("data file '%s': ", path);
    return status;
}

/* The one data file entry stored under `key`. */
static rt_status find_key(const rt_program *p, const char *key, uint32_t constant,
                          const rt_program_data **file, const rt_data_entry **entry) {
    *file = NULL;
    *entry = NULL;
    for (uint32_t i = 0; i < p->num_data_files; i++) {
        const rt_data_entry *e = rt_data_file__find(&p->data_files[i].file, key);
        if (e == NULL)
            continue;
        if (*entry != NULL)
            return rt_error__set(RT_INVALID_ARGUMENT, "constant '%s' is in two data files, "
                                 "'%s' and '%s'; give only one of them", key, (*file)->path,
                                 p->data_files[i].path);
        *file = &p->data_files[i];
        *entry = e;
    }
    if (*entry != NULL)
        return RT_OK;
    if (p->num_data_files == 0)
        return rt_error__set(RT_NOT_FOUND, "constant %u ('%s') lives in a data file, but none "
                             "was given: load the program with its data file(s)", constant,
                             key);
    char list[512] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < p->num_data_files && used < sizeof list; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "",
                         p->data_files[i].path);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return rt_error__set(RT_NOT_FOUND, "constant %u ('%s') is in none of the data files "
                         "(%s)", constant, key, list);
}

/* Where each external constant was found (NULL entries for internal constants). */
typedef struct found_entry {
    const rt_program_data *file;
    const rt_data_entry *entry;
} found_entry;

/* Every tensor that reads an external constant agrees with its entry's dtype and shape: one
 * pass over the values of every method. */
static rt_status check_readers(const rt_program *p, const found_entry *found) {
    const rt_format *f = &p->format;
    for (uint32_t mi = 0; mi < f->num_methods; mi++) {
        const rt_file_method *m = &f->methods[mi];
        for (uint32_t vi = 0; vi < m->num_values; vi++) {
            const rt_file_value *v = &f->values[m->values + vi];
            if (v->kind != RT_VALUE_TENSOR || v->c >= f->num_constants ||
                (v->storage != RT_STORAGE_CONSTANT && v->storage != RT_STORAGE_STATE) ||
                found[v->c].entry == NULL)
                continue;
            const rt_data_entry *e = found[v->c].entry;
            const rt_program_data *file = found[v->c].file;
            const int64_t *shape = rt_data_file__shape(&file->file, e);
            const int64_t *sizes = f->words + v->a;
            bool same = memcmp(&v->dtype, &e->dtype, sizeof e->dtype) == 0 && v->rank == e->rank;
            for (uint32_t d = 0; same && d < v->rank; d++)
                same = sizes[d] == shape[d];
            if (same)
                continue;
            char want[160], have[160];
            describe(want, sizeof want, v->dtype, v->rank, sizes);
            describe(have, sizeof have, e->dtype, e->rank, shape);
            return rt_error__set(RT_INVALID_ARGUMENT, "constant '%s': method '%s' value %u reads "
                                 "it as %s, but data file '%s' holds %s",
                                 rt_format__string(f, f->constants[v->c].name),
                                 rt_format__string(f, m->name), vi, want, file->path, have);
        }
    }
    return RT_OK;
}

static rt_status resolve_constants(rt_program *p) {
    const rt_format *f = &p->format;
    size_t n = f->num_constants ? f->num_constants : 1;
    p->constant_data = calloc(n, sizeof(uint8_t *));
    found_entry *found = calloc(n, sizeof *found);
    if (p->constant_data == NULL || found == NULL) {
        free(found);
        return rt_error__oom("constant table");
    }
    rt_status status = RT_OK;
    for (uint32_t i = 0; i < f->num_constants && status == RT_OK; i++) {
        const rt_file_constant *c = &f->constants[i];
        if (!(c->flags & RT_CONSTANT_FLAG_EXTERNAL)) {
            /* Without a SEGMENT every internal constant is empty (offset 0, 0 bytes): give it
             * an aligned address rather than arithmetic on NULL. */
            static _Alignas(64) const uint8_t no_segment[64];
            p->constant_data[i] = f->segment != NULL ? f->segment + c->offset : no_segment;
            continue;
        }
        const char *key = rt_format__string(f, c->name);
        status = find_key(p, key, i, &found[i].file, &found[i].entry);
        if (status == RT_OK && found[i].entry->nbytes != c->nbytes)
            status = rt_error__set(RT_INVALID_ARGUMENT, "constant '%s': the program expects %llu "
                                   "bytes, but data file '%s' holds %llu", key,
                                   (unsigned long long)c->nbytes, found[i].file->path,
                                   (unsigned long long)found[i].entry->nbytes);
        if (status == RT_OK)
            p->constant_data[i] = found[i].file->file.data + found[i].entry->offset;
    }
    if (status == RT_OK && f->num_external > 0)
        status = check_readers(p, found);
    free(found);
    return status;
}

rt_status rt_program__attach_data(rt_program *p, const char *const *paths, size_t count,
                                  uint32_t flags) {
    if (count > 0 && paths == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "%zu data files given, but the path array "
                             "is NULL", count);
    if (count > RT_MAX_DATA_FILES)
        return rt_error__set(RT_INVALID_ARGUMENT, "%zu data files given; at most %d are "
                             "allowed", count, RT_MAX_DATA_FILES);
    for (size_t i = 0; i < count; i++)
        if (paths[i] == NULL)
            return rt_error__set(RT_INVALID_ARGUMENT, "data file path %zu is NULL", i);
    if (count > 0) {
        p->data_files = calloc(count, sizeof *p->data_files);
        if (p->data_files == NULL)
            return rt_error__oom("data file table");
    }
    for (size_t i = 0; i < count; i++) {
        p->num_data_files = (uint32_t)i + 1; /* so that release frees what is opened */
        RT_RETURN_IF_ERROR(open_data_file(&p->data_files[i], paths[i], flags));
    }
    return resolve_constants(p);
}

void rt_program__release_data(rt_program *p) {
    for (uint32_t i = 0; i < p->num_data_files; i++) {
        rt_program_data *d = &p->data_files[i];
        rt_data_file__free(&d->file);
        rt_map__release(d->mapping, d->mapping_size);
        free(d->path);
    }
    free(p->data_files);
    free((void *)p->constant_data);
    p->data_files = NULL;
    p->constant_data = NULL;
    p->num_data_files = 0;
}
