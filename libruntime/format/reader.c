/* reader.c: verifies program bytes and builds a read-only view of them.
 *
 * Every offset, size, count and index is checked before it is used, in the order a reader
 * meets them: header, section table, sections, then each method's records. A failure reports
 * the byte offset of the record at fault and what was wrong. Op schemas are checked later, when
 * a method is prepared. */
#include <stdbool.h>
#include <string.h>

#include "core/error.h"
#include "format/format.h"

typedef struct rt_reader {
    rt_format *f;
    const rt_file_section *by_kind[RT_SECTION_KIND_COUNT];
} rt_reader;

/* Method being verified, for messages and local index checks. */
typedef struct rt_method_scope {
    const rt_file_method *m;
    const char *name;
    const int64_t *arena_sizes;
} rt_method_scope;

static size_t offset_of(const rt_format *f, const void *p) {
    return (size_t)((const uint8_t *)p - f->base);
}

#define BAD(f, at, ...) bad_program((f), offset_of((f), (at)), __VA_ARGS__)

static rt_status bad_program(const rt_format *f, size_t offset, const char *fmt, ...)
    RT_PRINTF(3, 4);

static rt_status bad_program(const rt_format *f, size_t offset, const char *fmt, ...) {
    (void)f;
    va_list args;
    va_start(args, fmt);
    rt_error__vset(RT_INVALID_PROGRAM, fmt, args);
    va_end(args);
    rt_error__prefix("invalid program at byte offset %zu: ", offset);
    return RT_INVALID_PROGRAM;
}

size_t rt_format__dtype_size(rt_dtype d) {
    if (d.lanes != 1)
        return 0;
    switch (d.code) {
    case RT_DTYPE_FLOAT:
        return (d.bits == 16 || d.bits == 32 || d.bits == 64) ? d.bits / 8u : 0;
    case RT_DTYPE_BFLOAT:
        return d.bits == 16 ? 2 : 0;
    case RT_DTYPE_INT:
    case RT_DTYPE_UINT:
        return (d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64) ? d.bits / 8u : 0;
    case RT_DTYPE_BOOL:
        return d.bits == 8 ? 1 : 0;
    default:
        return 0;
    }
}

const char *rt_format__string(const rt_format *f, uint32_t index) {
    return (const char *)f->strings_base + f->strings[index].offset;
}

/* ---- header and sections ---------------------------------------------------------------- */

static rt_status read_header(rt_format *f) {
    if (f->size < RT_FORMAT_HEADER_SIZE)
        return bad_program(f, 0, "the program is %zu bytes, shorter than its %d-byte header",
                           f->size, RT_FORMAT_HEADER_SIZE);
    const rt_file_header *h = (const rt_file_header *)f->base;
    f->header = h;
    if (memcmp(h->magic, RT_FORMAT_MAGIC, 8) != 0)
        return bad_program(f, 0, "bad magic bytes: this is not a libruntime program");
    if (h->major != RT_FORMAT_MAJOR)
        return bad_program(f, 8, "format version %u.%u; this library reads version %d.x",
                           h->major, h->minor, RT_FORMAT_MAJOR);
    if (h->header_size != RT_FORMAT_HEADER_SIZE)
        return bad_program(f, 12, "header size %u, expected %d", h->header_size,
                           RT_FORMAT_HEADER_SIZE);
    if (h->file_size != f->size)
        return bad_program(f, 16, "the header gives a size of %llu bytes but %zu are present%s",
                           (unsigned long long)h->file_size, f->size,
                           h->file_size > f->size ? " (truncated)" : "");
    if (h->flags != 0)
        return bad_program(f, 28, "unknown header flags 0x%x", h->flags);
    for (size_t i = 0; i < sizeof h->reserved; i++)
        if (h->reserved[i] != 0)
            return bad_program(f, 48 + i, "reserved header byte is not zero");
    return RT_OK;
}

static rt_status read_section_table(rt_reader *r) {
    rt_format *f = r->f;
    const rt_file_header *h = f->header;
    if (h->section_count > RT_FORMAT_MAX_SECTIONS)
        return bad_program(f, 24, "%u sections; at most %d are allowed", h->section_count,
                           RT_FORMAT_MAX_SECTIONS);
    uint64_t table_bytes = (uint64_t)h->section_count * sizeof(rt_file_section);
    if (h->section_table_offset % 8 != 0 || h->section_table_offset < RT_FORMAT_HEADER_SIZE ||
        !rt_format__range_ok(h->section_table_offset, table_bytes, f->size))
        return bad_program(f, 32, "section table (offset %llu, %u entries) is misaligned or "
                           "outside the file",
                           (unsigned long long)h->section_table_offset, h->section_count);
    const rt_file_section *table = (const rt_file_section *)(f->base + h->section_table_offset);
    for (uint32_t i = 0; i < h->section_count; i++) {
        const rt_file_section *s = &table[i];
        uint64_t align = s->kind == RT_SECTION_SEGMENT ? RT_FORMAT_CONSTANT_ALIGN : 8;
        if (s->offset % align != 0 || s->offset < RT_FORMAT_HEADER_SIZE ||
            !rt_format__range_ok(s->offset, s->size, f->size))
            return BAD(f, s, "section %u (kind %u): offset %llu size %llu is misaligned or "
                       "outside the file", i, s->kind, (unsigned long long)s->offset,
                       (unsigned long long)s->size);
        if (s->size > 0 && s->offset < h->section_table_offset + table_bytes &&
            h->section_table_offset < s->offset + s->size)
            return BAD(f, s, "section %u overlaps the section table", i);
        for (uint32_t j = 0; j < i; j++) {
            const rt_file_section *o = &table[j];
            if (s->size > 0 && o->size > 0 && s->offset < o->offset + o->size &&
                o->offset < s->offset + s->size)
                return BAD(f, s, "section %u overlaps section %u", i, j);
        }
        if (s->kind == 0 || s->kind >= RT_SECTION_KIND_COUNT) {
            if (s->flags & RT_SECTION_FLAG_OPTIONAL)
                continue;
            return BAD(f, s, "section %u has unknown kind %u and is not optional", i, s->kind);
        }
        if (s->flags & ~RT_SECTION_FLAG_OPTIONAL)
            return BAD(f, s, "section %u has unknown flags 0x%x", i, s->flags);
        if (r->by_kind[s->kind] != NULL)
            return BAD(f, s, "section %u repeats kind %u", i, s->kind);
        r->by_kind[s->kind] = s;
    }
    static const uint32_t required[] = {RT_SECTION_STRINGS, RT_SECTION_OPS, RT_SECTION_WORDS,
                                        RT_SECTION_VALUES, RT_SECTION_INSTRUCTIONS,
                                        RT_SECTION_METHODS};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (r->by_kind[required[i]] == NULL)
            return bad_program(f, 32, "required section of kind %u is missing", required[i]);
    return RT_OK;
}

/* The metadata checksum covers header bytes [0, 40) and the rest of the file from byte 64,
 * except the constant segment, which has its own checksum (checked on request). */
static rt_status check_checksums(rt_reader *r, uint32_t flags) {
    rt_format *f = r->f;
    const rt_file_section *seg = r->by_kind[RT_SECTION_SEGMENT];
    uint64_t seg_start = seg ? seg->offset : f->size;
    uint64_t seg_end = seg ? seg->offset + seg->size : f->size;
    uint32_t crc = rt_format__crc32(0, f->base, 40);
    crc = rt_format__crc32(crc, f->base + RT_FORMAT_HEADER_SIZE,
                           (size_t)(seg_start - RT_FORMAT_HEADER_SIZE));
    crc = rt_format__crc32(crc, f->base + seg_end, (size_t)(f->size - seg_end));
    if (crc != f->header->meta_crc32)
        return bad_program(f, 40, "metadata checksum mismatch (stored 0x%08x, computed 0x%08x): "
                           "the file is corrupted", f->header->meta_crc32, crc);
    if ((flags & RT_PROGRAM_VERIFY_CONSTANTS) && seg != NULL) {
        uint32_t data_crc = rt_format__crc32(0, f->base + seg->offset, (size_t)seg->size);
        if (data_crc != f->header->data_crc32)
            return bad_program(f, 44, "constant segment checksum mismatch (stored 0x%08x, "
                               "computed 0x%08x)", f->header->data_crc32, data_crc);
    }
    return RT_OK;
}

/* A section holding a u32 count, 4 reserved bytes, then `count` records of `record` bytes. */
static rt_status counted_table(rt_reader *r, uint32_t kind, size_t record, const char *what,
                               const void **items, uint32_t *count) {
    const rt_file_section *s = r->by_kind[kind];
    const uint8_t *p = r->f->base + s->offset;
    if (s->size < 8)
        return bad_program(r->f, s->offset, "%s section is %llu bytes, too small for its count",
                           what, (unsigned long long)s->size);
    uint32_t n;
    memcpy(&n, p, 4);
    if ((uint64_t)n * record > s->size - 8)
        return bad_program(r->f, s->offset, "%s section claims %u entries but holds room for "
                           "%llu", what, n, (unsigned long long)((s->size - 8) / record));
    *items = p + 8;
    *count = n;
    return RT_OK;
}

static rt_status read_strings(rt_reader *r) {
    rt_format *f = r->f;
    const rt_file_section *s = r->by_kind[RT_SECTION_STRINGS];
    const void *items = NULL;
    RT_RETURN_IF_ERROR(counted_table(r, RT_SECTION_STRINGS, sizeof(rt_file_string), "string",
                                     &items, &f->num_strings));
    f->strings = items;
    f->strings_base = f->base + s->offset;
    for (uint32_t i = 0; i < f->num_strings; i++) {
        const rt_file_string *e = &f->strings[i];
        if (!rt_format__range_ok(e->offset, (uint64_t)e->length + 1, s->size))
            return BAD(f, e, "string %u (offset %u, length %u) runs past its section", i,
                       e->offset, e->length);
        const uint8_t *text = f->strings_base + e->offset;
        if (text[e->length] != 0 || memchr(text, 0, e->length) != NULL)
            return BAD(f, e, "string %u is not NUL-terminated at its length %u", i, e->length);
    }
    return RT_OK;
}

static rt_status read_ops(rt_reader *r) {
    rt_format *f = r->f;
    const void *items = NULL;
    RT_RETURN_IF_ERROR(counted_table(r, RT_SECTION_OPS, 4, "op", &items, &f->num_ops));
    f->ops = items;
    for (uint32_t i = 0; i < f->num_ops; i++)
        if (f->ops[i] >= f->num_strings)
            return BAD(f, &f->ops[i], "op %u names string %u of %u", i, f->ops[i],
                       f->num_strings);
    return RT_OK;
}

static rt_status read_constants(rt_reader *r) {
    rt_format *f = r->f;
    const rt_file_section *seg = r->by_kind[RT_SECTION_SEGMENT];
    if (seg != NULL) {
        f->segment = f->base + seg->offset;
        f->segment_size = seg->size;
    }
    if (r->by_kind[RT_SECTION_CONSTANTS] == NULL)
        return RT_OK;
    const void *items = NULL;
    RT_RETURN_IF_ERROR(counted_table(r, RT_SECTION_CONSTANTS, sizeof(rt_file_constant),
                                     "constant", &items, &f->num_constants));
    f->constants = items;
    for (uint32_t i = 0; i < f->num_constants; i++) {
        const rt_file_constant *c = &f->constants[i];
        if (c->flags & ~RT_CONSTANT_FLAG_EXTERNAL)
            return BAD(f, c, "constant %u has unknown flags 0x%x", i, c->flags);
        if (c->flags & RT_CONSTANT_FLAG_EXTERNAL) {
            /* Its bytes come from a data file, found by key when the program is loaded. */
            if (c->name == RT_FORMAT_NO_INDEX || c->name >= f->num_strings)
                return BAD(f, c, "external constant %u names key string %u of %u", i, c->name,
                           f->num_strings);
            if (c->offset != 0)
                return BAD(f, c, "external constant %u has a segment offset (%llu); it must be "
                           "0", i, (unsigned long long)c->offset);
            f->num_external++;
            continue;
        }
        if (c->offset % RT_FORMAT_CONSTANT_ALIGN != 0 ||
            !rt_format__range_ok(c->offset, c->nbytes, f->segment_size))
            return BAD(f, c, "constant %u (offset %llu, %llu bytes) is misaligned or outside "
                       "the %llu-byte constant segment", i, (unsigned long long)c->offset,
                       (unsigned long long)c->nbytes, (unsigned long long)f->segment_size);
        if (c->name != RT_FORMAT_NO_INDEX && c->name >= f->num_strings)
            return BAD(f, c, "constant %u names string %u of %u", i, c->name, f->num_strings);
    }
    return RT_OK;
}

/* A section that is a bare array of fixed-size records. */
static rt_status record_array(rt_reader *r, uint32_t kind, size_t record, const char *what,
                              const void **items, uint32_t *count) {
    const rt_file_section *s = r->by_kind[kind];
    if (s->size % record != 0 || s->size / record > UINT32_MAX)
        return bad_program(r->f, s->offset, "%s section size %llu is not a multiple of %zu",
                           what, (unsigned long long)s->size, record);
    *items = r->f->base + s->offset;
    *count = (uint32_t)(s->size / record);
    return RT_OK;
}

/* ---- methods ---------------------------------------------------------------------------- */

#define MBAD(f, scope, at, ...)                                                     \
    (bad_program((f), offset_of((f), (at)), __VA_ARGS__),                            \
     rt_error__prefix("method '%s': ", (scope)->name), RT_INVALID_PROGRAM)

static rt_status verify_tensor(const rt_format *f, const rt_method_scope *sc, uint32_t index,
                               const rt_file_value *v) {
    size_t elem = rt_format__dtype_size(v->dtype);
    if (elem == 0)
        return MBAD(f, sc, v, "value %u has unknown dtype (code %u, bits %u, lanes %u)", index,
                    v->dtype.code, v->dtype.bits, v->dtype.lanes);
    if (v->rank > RT_MAX_RANK)
        return MBAD(f, sc, v, "value %u has rank %u; at most %d is supported", index, v->rank,
                    RT_MAX_RANK);
    if (v->flags & ~(RT_VALUE_FLAG_DYNAMIC | RT_VALUE_FLAG_AXES))
        return MBAD(f, sc, v, "value %u has unknown flags 0x%x", index, v->flags);
    if ((v->flags & RT_VALUE_FLAG_AXES) &&
        (!(v->flags & RT_VALUE_FLAG_DYNAMIC) || (v->rank < 32 && v->reserved >> v->rank != 0)))
        return MBAD(f, sc, v, "value %u: dynamic axes 0x%x need a dynamic tensor with those "
                    "axes (rank %u)", index, v->reserved, v->rank);
    if (!rt_format__range_ok(v->a, v->rank, f->num_words) ||
        !rt_format__range_ok(v->b, v->rank, f->num_words))
        return MBAD(f, sc, v, "value %u: sizes or dim order lie outside the word table", index);
    const int64_t *sizes = f->words + v->a;
    const int64_t *order = f->words + v->b;
    uint32_t seen = 0;
    /* The product of the non-zero sizes bounds every stride, in elements and in bytes: it
     * must fit an int64 even when another dimension is 0 and the tensor is empty. */
    uint64_t span = 1;
    bool empty = false;
    for (uint32_t d = 0; d < v->rank; d++) {
        if (sizes[d] < 0)
            return MBAD(f, sc, v, "value %u: size %lld of dimension %u is negative", index,
                        (long long)sizes[d], d);
        if (order[d] < 0 || order[d] >= v->rank || (seen & (1u << order[d])))
            return MBAD(f, sc, v, "value %u: dim order is not a permutation of 0..%u", index,
                        v->rank - 1);
        seen |= 1u << order[d];
        empty |= sizes[d] == 0;
        if (sizes[d] != 0 && span > ((uint64_t)INT64_MAX / elem) / (uint64_t)sizes[d])
            return MBAD(f, sc, v, "value %u: element count overflows", index);
        span *= sizes[d] != 0 ? (uint64_t)sizes[d] : 1;
    }
    uint64_t nbytes = empty ? 0 : span * elem;
    bool dynamic = v->flags & RT_VALUE_FLAG_DYNAMIC;
    switch (v->storage) {
    case RT_STORAGE_ARENA: {
        const rt_file_method *m = sc->m;
        if (v->c >= m->num_arenas)
            return MBAD(f, sc, v, "value %u uses arena %u of %u", index, v->c, m->num_arenas);
        uint64_t arena = (uint64_t)sc->arena_sizes[v->c];
        if (v->payload < 0 || (uint64_t)v->payload % elem != 0 ||
            !rt_format__range_ok((uint64_t)v->payload, nbytes, arena))
            return MBAD(f, sc, v, "value %u: %llu bytes at offset %lld do not fit arena %u "
                        "(%llu bytes) or are misaligned", index, (unsigned long long)nbytes,
                        (long long)v->payload, v->c, (unsigned long long)arena);
        return RT_OK;
    }
    case RT_STORAGE_CONSTANT:
    case RT_STORAGE_STATE:
        if (v->storage == RT_STORAGE_STATE && v->c == RT_FORMAT_NO_INDEX && !dynamic)
            return RT_OK;
        if (dynamic)
            return MBAD(f, sc, v, "value %u: constant and state tensors cannot be dynamic",
                        index);
        if (v->c >= f->num_constants)
            return MBAD(f, sc, v, "value %u uses constant %u of %u", index, v->c,
                        f->num_constants);
        if (f->constants[v->c].nbytes < nbytes)
            return MBAD(f, sc, v, "value %u needs %llu bytes but constant %u holds %llu", index,
                        (unsigned long long)nbytes, v->c,
                        (unsigned long long)f->constants[v->c].nbytes);
        return RT_OK;
    default:
        return MBAD(f, sc, v, "value %u has unknown storage kind %u", index, v->storage);
    }
}

static rt_status verify_value(const rt_format *f, const rt_method_scope *sc, uint32_t index) {
    const rt_file_value *v = &f->values[sc->m->values + index];
    switch (v->kind) {
    case RT_VALUE_NONE:
    case RT_VALUE_INT:
    case RT_VALUE_DOUBLE:
        return RT_OK;
    case RT_VALUE_BOOL:
        if (v->payload != 0 && v->payload != 1)
            return MBAD(f, sc, v, "bool value %u holds %lld", index, (long long)v->payload);
        return RT_OK;
    case RT_VALUE_STRING:
        if (v->payload < 0 || v->payload >= f->num_strings)
            return MBAD(f, sc, v, "string value %u names string %lld of %u", index,
                        (long long)v->payload, f->num_strings);
        return RT_OK;
    case RT_VALUE_INT_LIST:
    case RT_VALUE_DOUBLE_LIST:
        if (!rt_format__range_ok(v->a, v->b, f->num_words))
            return MBAD(f, sc, v, "list value %u lies outside the word table", index);
        return RT_OK;
    case RT_VALUE_TENSOR_LIST:
        if (!rt_format__range_ok(v->a, v->b, f->num_words))
            return MBAD(f, sc, v, "tensor list value %u lies outside the word table", index);
        for (uint32_t k = 0; k < v->b; k++) {
            int64_t item = f->words[v->a + k];
            if (item < 0 || item >= sc->m->num_values ||
                f->values[sc->m->values + item].kind != RT_VALUE_TENSOR)
                return MBAD(f, sc, v, "tensor list value %u: item %u (value %lld) is not a "
                            "tensor of this method", index, k, (long long)item);
        }
        return RT_OK;
    case RT_VALUE_TENSOR:
        return verify_tensor(f, sc, index, v);
    default:
        return MBAD(f, sc, v, "value %u has unknown kind %u", index, v->kind);
    }
}

static rt_status verify_instruction(const rt_format *f, const rt_method_scope *sc,
                                    uint32_t index) {
    const rt_file_method *m = sc->m;
    const rt_file_instruction *in = &f->instructions[m->instructions + index];
    switch (in->kind) {
    case RT_INSTR_KERNEL:
        if (in->a >= f->num_ops)
            return MBAD(f, sc, in, "instruction %u calls op %u of %u", index, in->a, f->num_ops);
        if (!rt_format__range_ok(in->b, in->c, f->num_words))
            return MBAD(f, sc, in, "instruction %u: arguments lie outside the word table",
                        index);
        for (uint32_t k = 0; k < in->c; k++) {
            int64_t arg = f->words[in->b + k];
            if (arg < 0 || arg >= m->num_values)
                return MBAD(f, sc, in, "instruction %u: argument %u names value %lld of %u",
                            index, k, (long long)arg, m->num_values);
        }
        return RT_OK;
    case RT_INSTR_JUMP_IF_TRUE:
    case RT_INSTR_JUMP_IF_FALSE:
        if (in->b >= m->num_values)
            return MBAD(f, sc, in, "instruction %u: condition names value %u of %u", index,
                        in->b, m->num_values);
        /* fall through */
    case RT_INSTR_JUMP:
        if (in->a > m->num_instructions)
            return MBAD(f, sc, in, "instruction %u jumps to %u, past the end (%u)", index,
                        in->a, m->num_instructions);
        return RT_OK;
    default:
        return MBAD(f, sc, in, "instruction %u has unknown kind %u", index, in->kind);
    }
}

/* Inputs and outputs: (value index, name string or -1) word pairs. */
static rt_status verify_io(const rt_format *f, const rt_method_scope *sc, uint32_t start,
                           uint32_t count, const char *what, bool is_input) {
    const rt_file_method *m = sc->m;
    for (uint32_t i = 0; i < count; i++) {
        const int64_t *pair = &f->words[start + 2 * (uint64_t)i];
        if (pair[0] < 0 || pair[0] >= m->num_values)
            return MBAD(f, sc, pair, "%s %u names value %lld of %u", what, i, (long long)pair[0],
                        m->num_values);
        if (pair[1] != -1 && (pair[1] < 0 || pair[1] >= f->num_strings))
            return MBAD(f, sc, pair, "%s %u names string %lld of %u", what, i,
                        (long long)pair[1], f->num_strings);
        const rt_file_value *v = &f->values[m->values + pair[0]];
        if (v->kind != RT_VALUE_TENSOR && v->kind != RT_VALUE_INT &&
            v->kind != RT_VALUE_DOUBLE && v->kind != RT_VALUE_BOOL)
            return MBAD(f, sc, pair, "%s %u is of kind %u; only tensors and int, double, bool "
                        "scalars are allowed", what, i, v->kind);
        if (!is_input)
            continue;
        if (v->kind == RT_VALUE_TENSOR && v->storage != RT_STORAGE_ARENA)
            return MBAD(f, sc, pair, "input %u is a tensor outside the planned arenas", i);
        for (uint32_t j = 0; j < i; j++)
            if (f->words[start + 2 * (uint64_t)j] == pair[0])
                return MBAD(f, sc, pair, "inputs %u and %u are the same value", j, i);
    }
    return RT_OK;
}

static rt_status verify_method(const rt_format *f, uint32_t index) {
    const rt_file_method *m = &f->methods[index];
    if (m->name >= f->num_strings)
        return BAD(f, m, "method %u names string %u of %u", index, m->name, f->num_strings);
    rt_method_scope scope = {m, rt_format__string(f, m->name), NULL};
    const rt_method_scope *sc = &scope;
    for (uint32_t j = 0; j < index; j++)
        if (strcmp(rt_format__string(f, f->methods[j].name), scope.name) == 0)
            return MBAD(f, sc, m, "two methods share this name");
    if (m->flags != 0 || m->reserved[0] != 0 || m->reserved[1] != 0)
        return MBAD(f, sc, m, "unknown method flags or nonzero reserved fields");
    if (!rt_format__range_ok(m->values, m->num_values, f->num_values) ||
        !rt_format__range_ok(m->instructions, m->num_instructions, f->num_instructions))
        return MBAD(f, sc, m, "value or instruction range lies outside its table");
    if (!rt_format__range_ok(m->inputs, 2 * (uint64_t)m->num_inputs, f->num_words) ||
        !rt_format__range_ok(m->outputs, 2 * (uint64_t)m->num_outputs, f->num_words) ||
        !rt_format__range_ok(m->arenas, m->num_arenas, f->num_words) ||
        !rt_format__range_ok(m->attributes, 2 * (uint64_t)m->num_attributes, f->num_words))
        return MBAD(f, sc, m, "input, output, arena or attribute list lies outside the word "
                    "table");
    scope.arena_sizes = f->words + m->arenas;
    for (uint32_t a = 0; a < m->num_arenas; a++)
        if (scope.arena_sizes[a] < 0)
            return MBAD(f, sc, &scope.arena_sizes[a], "arena %u has negative size", a);
    for (uint32_t v = 0; v < m->num_values; v++)
        RT_RETURN_IF_ERROR(verify_value(f, sc, v));
    for (uint32_t i = 0; i < m->num_instructions; i++)
        RT_RETURN_IF_ERROR(verify_instruction(f, sc, i));
    RT_RETURN_IF_ERROR(verify_io(f, sc, m->inputs, m->num_inputs, "input", true));
    RT_RETURN_IF_ERROR(verify_io(f, sc, m->outputs, m->num_outputs, "output", false));
    for (uint32_t a = 0; a < m->num_attributes; a++) {
        const int64_t *pair = &f->words[m->attributes + 2 * (uint64_t)a];
        if (pair[0] < 0 || pair[0] >= f->num_strings)
            return MBAD(f, sc, pair, "attribute %u names string %lld of %u", a,
                        (long long)pair[0], f->num_strings);
        if (pair[1] < 0 || pair[1] >= m->num_values ||
            f->values[m->values + pair[1]].kind != RT_VALUE_TENSOR ||
            f->values[m->values + pair[1]].storage != RT_STORAGE_STATE)
            return MBAD(f, sc, pair, "attribute %u is not a state tensor of this method", a);
        for (uint32_t b = 0; b < a; b++)
            if (f->words[m->attributes + 2 * (uint64_t)b] == pair[0])
                return MBAD(f, sc, pair, "attributes %u and %u share a name", b, a);
    }
    return RT_OK;
}

/* ---- bundled test cases ------------------------------------------------------------------ */

/* A bundle value against the method value it feeds (input) or is compared with (output):
 * same kind; tensors the same dtype and rank, sizes equal (static) or within the bounds
 * (dynamic), data held by a constant of the program with room for them. */
static rt_status verify_bundle_value(const rt_format *f, const rt_method_scope *sc,
                                     uint32_t case_index, const char *what, uint32_t index,
                                     const rt_file_bundle_value *b, const rt_file_value *v) {
    if (b->reserved0 != 0 || b->reserved1 != 0)
        return MBAD(f, sc, b, "bundled case %u: %s %u has nonzero reserved fields", case_index,
                    what, index);
    if (b->kind != v->kind)
        return MBAD(f, sc, b, "bundled case %u: %s %u is of kind %u but the method's is of "
                    "kind %u", case_index, what, index, b->kind, v->kind);
    if (b->kind == RT_VALUE_BOOL && b->payload != 0 && b->payload != 1)
        return MBAD(f, sc, b, "bundled case %u: bool %s %u holds %lld", case_index, what,
                    index, (long long)b->payload);
    if (b->kind != RT_VALUE_TENSOR)
        return RT_OK;
    size_t elem = rt_format__dtype_size(b->dtype);
    if (elem == 0 || memcmp(&b->dtype, &v->dtype, sizeof b->dtype) != 0 || b->rank != v->rank)
        return MBAD(f, sc, b, "bundled case %u: %s %u has dtype (code %u, bits %u, lanes %u) "
                    "and rank %u; the method's has (code %u, bits %u) and rank %u", case_index,
                    what, index, b->dtype.code, b->dtype.bits, b->dtype.lanes, b->rank,
                    v->dtype.code, v->dtype.bits, v->rank);
    if (!rt_format__range_ok(b->sizes, b->rank, f->num_words))
        return MBAD(f, sc, b, "bundled case %u: %s %u: sizes lie outside the word table",
                    case_index, what, index);
    const int64_t *sizes = f->words + b->sizes;
    const int64_t *bounds = f->words + v->a; /* verified with the method */
    bool dynamic = v->flags & RT_VALUE_FLAG_DYNAMIC;
    uint64_t nbytes = elem;
    for (uint32_t d = 0; d < b->rank; d++) {
        if (sizes[d] < 0 || sizes[d] > bounds[d] || (!dynamic && sizes[d] != bounds[d]))
            return MBAD(f, sc, b, "bundled case %u: %s %u: size %lld of dimension %u does not "
                        "fit the method's %s %lld", case_index, what, index,
                        (long long)sizes[d], d, dynamic ? "bound" : "size",
                        (long long)bounds[d]);
        nbytes *= (uint64_t)sizes[d]; /* cannot overflow: at most the bound's product */
    }
    if (b->constant >= f->num_constants ||
        (f->constants[b->constant].flags & RT_CONSTANT_FLAG_EXTERNAL) ||
        f->constants[b->constant].nbytes < nbytes)
        return MBAD(f, sc, b, "bundled case %u: %s %u needs %llu bytes of constant %u, which "
                    "does not exist, is external or is smaller", case_index, what, index,
                    (unsigned long long)nbytes, b->constant);
    return RT_OK;
}

static rt_status read_bundle(rt_reader *r) {
    rt_format *f = r->f;
    const rt_file_section *s = r->by_kind[RT_SECTION_BUNDLE];
    if (s == NULL)
        return RT_OK;
    const uint8_t *p = f->base + s->offset;
    if (s->size < 8)
        return bad_program(f, s->offset, "bundle section is %llu bytes, too small for its "
                           "counts", (unsigned long long)s->size);
    uint32_t cases, values;
    memcpy(&cases, p, 4);
    memcpy(&values, p + 4, 4);
    uint64_t need = (uint64_t)cases * sizeof(rt_file_bundle_case) +
                    (uint64_t)values * sizeof(rt_file_bundle_value);
    if (need > s->size - 8)
        return bad_program(f, s->offset, "bundle section claims %u cases and %u values: %llu "
                           "bytes, but holds %llu", cases, values, (unsigned long long)need,
                           (unsigned long long)(s->size - 8));
    f->bundle_cases = (const rt_file_bundle_case *)(p + 8);
    f->num_bundle_cases = cases;
    f->bundle_values = (const rt_file_bundle_value *)(p + 8 + (uint64_t)cases *
                                                      sizeof(rt_file_bundle_case));
    f->num_bundle_values = values;
    for (uint32_t i = 0; i < cases; i++) {
        const rt_file_bundle_case *c = &f->bundle_cases[i];
        if (c->method >= f->num_methods)
            return BAD(f, c, "bundled case %u belongs to method %u of %u", i, c->method,
                       f->num_methods);
        const rt_file_method *m = &f->methods[c->method];
        rt_method_scope scope = {m, rt_format__string(f, m->name), NULL};
        const rt_method_scope *sc = &scope;
        if (c->num_inputs != m->num_inputs || c->num_outputs != m->num_outputs)
            return MBAD(f, sc, c, "bundled case %u has %u inputs and %u outputs; the method "
                        "has %u and %u", i, c->num_inputs, c->num_outputs, m->num_inputs,
                        m->num_outputs);
        if (!rt_format__range_ok(c->values, (uint64_t)c->num_inputs + c->num_outputs, values))
            return MBAD(f, sc, c, "bundled case %u: values %u..+%llu lie outside the %u bundle "
                        "values", i, c->values,
                        (unsigned long long)c->num_inputs + c->num_outputs, values);
        for (uint32_t k = 0; k < c->num_inputs + c->num_outputs; k++) {
            bool input = k < c->num_inputs;
            uint32_t io = input ? k : k - c->num_inputs;
            const int64_t *pair = &f->words[(input ? m->inputs : m->outputs) + 2 * (uint64_t)io];
            const rt_file_value *v = &f->values[m->values + pair[0]];
            RT_RETURN_IF_ERROR(verify_bundle_value(f, sc, i, input ? "input" : "expected output",
                                                   io, &f->bundle_values[c->values + k], v));
        }
    }
    return RT_OK;
}

rt_status rt_format__read(rt_format *out, const uint8_t *data, size_t size, uint32_t flags) {
    memset(out, 0, sizeof *out);
    out->base = data;
    out->size = size;
    if (data == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "program data is NULL");
    rt_reader reader = {out, {NULL}};
    const void *items = NULL;
    RT_RETURN_IF_ERROR(read_header(out));
    RT_RETURN_IF_ERROR(read_section_table(&reader));
    RT_RETURN_IF_ERROR(check_checksums(&reader, flags));
    RT_RETURN_IF_ERROR(read_strings(&reader));
    RT_RETURN_IF_ERROR(read_ops(&reader));
    RT_RETURN_IF_ERROR(read_constants(&reader));
    RT_RETURN_IF_ERROR(record_array(&reader, RT_SECTION_WORDS, 8, "word", &items,
                                    &out->num_words));
    out->words = items;
    RT_RETURN_IF_ERROR(record_array(&reader, RT_SECTION_VALUES, sizeof(rt_file_value), "value",
                                    &items, &out->num_values));
    out->values = items;
    RT_RETURN_IF_ERROR(record_array(&reader, RT_SECTION_INSTRUCTIONS,
                                    sizeof(rt_file_instruction), "instruction", &items,
                                    &out->num_instructions));
    out->instructions = items;
    RT_RETURN_IF_ERROR(record_array(&reader, RT_SECTION_METHODS, sizeof(rt_file_method),
                                    "method", &items, &out->num_methods));
    out->methods = items;
    for (uint32_t i = 0; i < out->num_methods; i++)
        RT_RETURN_IF_ERROR(verify_method(out, i));
    return read_bundle(&reader);
}
