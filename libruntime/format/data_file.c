/* data_file.c: verifies a data file (named constants kept apart from programs) and finds its
 * entries by key. Like the program reader, it checks every offset, size and count before use
 * and names the byte offset of the record at fault. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/data_file.h"

static rt_status bad_data(size_t offset, const char *fmt, ...) RT_PRINTF(2, 3);

static rt_status bad_data(size_t offset, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    rt_error__vset(RT_INVALID_PROGRAM, fmt, args);
    va_end(args);
    rt_error__prefix("invalid data file at byte offset %zu: ", offset);
    return RT_INVALID_PROGRAM;
}

const char *rt_data_file__key(const rt_data_file *f, const rt_data_entry *e) {
    return (const char *)f->table + e->key;
}

const int64_t *rt_data_file__shape(const rt_data_file *f, const rt_data_entry *e) {
    return (const int64_t *)(const void *)(f->table + e->shape);
}

static rt_status read_header(rt_data_file *f, uint32_t flags) {
    if (f->size < RT_DATA_HEADER_SIZE)
        return bad_data(0, "the data file is %zu bytes, shorter than its %d-byte header",
                        f->size, RT_DATA_HEADER_SIZE);
    const rt_data_header *h = (const rt_data_header *)f->base;
    f->header = h;
    if (memcmp(h->magic, RT_DATA_MAGIC, 8) != 0)
        return bad_data(0, "bad magic bytes: this is not a libruntime data file");
    if (h->major != RT_DATA_MAJOR)
        return bad_data(8, "data file version %u.%u; this library reads version %d.x",
                        h->major, h->minor, RT_DATA_MAJOR);
    if (h->header_size != RT_DATA_HEADER_SIZE)
        return bad_data(12, "header size %u, expected %d", h->header_size, RT_DATA_HEADER_SIZE);
    if (h->file_size != f->size)
        return bad_data(16, "the header gives a size of %llu bytes but %zu are present%s",
                        (unsigned long long)h->file_size, f->size,
                        h->file_size > f->size ? " (truncated)" : "");
    if (h->flags != 0)
        return bad_data(28, "unknown header flags 0x%x", h->flags);
    if (h->entry_count > RT_DATA_MAX_ENTRIES)
        return bad_data(24, "%u entries; at most %u are allowed", h->entry_count,
                        RT_DATA_MAX_ENTRIES);
    if (h->table_offset % 8 != 0 || h->table_offset < RT_DATA_HEADER_SIZE ||
        !rt_format__range_ok(h->table_offset, h->table_size, f->size) ||
        (uint64_t)h->entry_count * sizeof(rt_data_entry) > h->table_size ||
        h->table_size > UINT32_MAX)
        return bad_data(32, "key table (offset %llu, %llu bytes, %u entries) is misaligned, "
                        "too small or outside the file", (unsigned long long)h->table_offset,
                        (unsigned long long)h->table_size, h->entry_count);
    if (h->data_offset % RT_FORMAT_CONSTANT_ALIGN != 0 ||
        h->data_offset < h->table_offset + h->table_size || h->data_offset > f->size)
        return bad_data(48, "data segment offset %llu is not %d-aligned, overlaps the table "
                        "or lies past the end", (unsigned long long)h->data_offset,
                        RT_FORMAT_CONSTANT_ALIGN);
    f->table = f->base + h->table_offset;
    f->entries = (const rt_data_entry *)(const void *)f->table;
    f->num_entries = h->entry_count;
    f->data = f->base + h->data_offset;
    f->data_size = f->size - h->data_offset;
    uint32_t crc = rt_format__crc32(0, f->base, 56);
    crc = rt_format__crc32(crc, f->table, (size_t)h->table_size);
    if (crc != h->meta_crc32)
        return bad_data(56, "metadata checksum mismatch (stored 0x%08x, computed 0x%08x): the "
                        "file is corrupted", h->meta_crc32, crc);
    if (flags & RT_PROGRAM_VERIFY_CONSTANTS) {
        uint32_t data_crc = rt_format__crc32(0, f->data, (size_t)f->data_size);
        if (data_crc != h->data_crc32)
            return bad_data(60, "data segment checksum mismatch (stored 0x%08x, computed "
                            "0x%08x)", h->data_crc32, data_crc);
    }
    return RT_OK;
}

static rt_status verify_entry(const rt_data_file *f, uint32_t i) {
    const rt_data_entry *e = &f->entries[i];
    size_t at = (size_t)((const uint8_t *)e - f->base);
    uint64_t table_size = f->header->table_size;
    if (e->reserved != 0)
        return bad_data(at, "entry %u has a nonzero reserved field", i);
    if (e->key_length == 0 ||
        !rt_format__range_ok(e->key, (uint64_t)e->key_length + 1, table_size))
        return bad_data(at, "entry %u: key (offset %u, length %u) is empty or runs past the "
                        "table", i, e->key, e->key_length);
    const uint8_t *key = f->table + e->key;
    if (key[e->key_length] != 0 || memchr(key, 0, e->key_length) != NULL)
        return bad_data(at, "entry %u: key is not NUL-terminated at its length %u", i,
                        e->key_length);
    size_t elem = rt_format__dtype_size(e->dtype);
    if (elem == 0)
        return bad_data(at, "entry '%s' has unknown dtype (code %u, bits %u, lanes %u)",
                        (const char *)key, e->dtype.code, e->dtype.bits, e->dtype.lanes);
    if (e->rank > RT_MAX_RANK || e->shape % 8 != 0 ||
        !rt_format__range_ok(e->shape, (uint64_t)e->rank * 8, table_size))
        return bad_data(at, "entry '%s': shape (rank %u at offset %u) is misaligned, too long "
                        "or outside the table", (const char *)key, e->rank, e->shape);
    const int64_t *shape = rt_data_file__shape(f, e);
    uint64_t nbytes = elem;
    for (uint32_t d = 0; d < e->rank; d++) {
        if (shape[d] < 0)
            return bad_data(at, "entry '%s': size %lld of dimension %u is negative",
                            (const char *)key, (long long)shape[d], d);
        if (shape[d] != 0 && nbytes > (uint64_t)INT64_MAX / (uint64_t)shape[d])
            return bad_data(at, "entry '%s': byte size overflows", (const char *)key);
        nbytes *= (uint64_t)shape[d];
    }
    if (nbytes != e->nbytes)
        return bad_data(at, "entry '%s' holds %llu bytes, but its dtype and shape make %llu",
                        (const char *)key, (unsigned long long)e->nbytes,
                        (unsigned long long)nbytes);
    if (e->offset % RT_FORMAT_CONSTANT_ALIGN != 0 ||
        !rt_format__range_ok(e->offset, e->nbytes, f->data_size))
        return bad_data(at, "entry '%s' (offset %llu, %llu bytes) is misaligned or outside the "
                        "%llu-byte data segment", (const char *)key,
                        (unsigned long long)e->offset, (unsigned long long)e->nbytes,
                        (unsigned long long)f->data_size);
    return RT_OK;
}

static int key_cmp(const rt_data_file *f, uint32_t a, uint32_t b) {
    return strcmp(rt_data_file__key(f, &f->entries[a]), rt_data_file__key(f, &f->entries[b]));
}

/* Bottom-up merge sort of entry indices by key (qsort has no context argument in C11). */
static rt_status sort_keys(rt_data_file *f) {
    uint32_t n = f->num_entries;
    f->sorted = malloc(sizeof *f->sorted * (n ? n : 1));
    uint32_t *tmp = malloc(sizeof *tmp * (n ? n : 1));
    if (f->sorted == NULL || tmp == NULL) {
        free(tmp);
        return rt_error__oom("data file key index");
    }
    for (uint32_t i = 0; i < n; i++)
        f->sorted[i] = i;
    uint32_t *src = f->sorted, *dst = tmp;
    for (uint64_t width = 1; width < n; width *= 2) {
        for (uint64_t lo = 0; lo < n; lo += 2 * width) {
            uint64_t mid = lo + width < n ? lo + width : n;
            uint64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = key_cmp(f, src[i], src[j]) <= 0 ? src[i++] : src[j++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        uint32_t *swap = src;
        src = dst;
        dst = swap;
    }
    (void)dst;
    if (src != f->sorted)
        memcpy(f->sorted, src, sizeof *src * n);
    free(tmp);
    for (uint32_t i = 1; i < n; i++)
        if (key_cmp(f, f->sorted[i - 1], f->sorted[i]) == 0) {
            const rt_data_entry *e = &f->entries[f->sorted[i]];
            return bad_data((size_t)((const uint8_t *)e - f->base), "key '%s' appears twice",
                            rt_data_file__key(f, e));
        }
    return RT_OK;
}

rt_status rt_data_file__read(rt_data_file *out, const uint8_t *data, size_t size,
                             uint32_t flags) {
    memset(out, 0, sizeof *out);
    out->base = data;
    out->size = size;
    if (data == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "data file bytes are NULL");
    RT_RETURN_IF_ERROR(read_header(out, flags));
    for (uint32_t i = 0; i < out->num_entries; i++)
        RT_RETURN_IF_ERROR(verify_entry(out, i));
    return sort_keys(out);
}

void rt_data_file__free(rt_data_file *f) {
    if (f != NULL) {
        free(f->sorted);
        f->sorted = NULL;
    }
}

const rt_data_entry *rt_data_file__find(const rt_data_file *f, const char *key) {
    uint32_t lo = 0, hi = f->num_entries;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const rt_data_entry *e = &f->entries[f->sorted[mid]];
        int c = strcmp(key, rt_data_file__key(f, e));
        if (c == 0)
            return e;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
