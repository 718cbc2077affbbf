/* format.h: the on-disk records of program format v1.1 (normative spec: docs/format.md) and the
 * verified, read-only view of a program that the reader produces. */
#ifndef RT_FORMAT_H
#define RT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libruntime reads its little-endian program format in place; big-endian hosts are unsupported"
#endif

#define RT_FORMAT_MAGIC "\x89RTP\r\n\x1a\n"
#define RT_FORMAT_MAJOR 1
#define RT_FORMAT_MINOR 2
#define RT_FORMAT_HEADER_SIZE 64
#define RT_FORMAT_CONSTANT_ALIGN 64
#define RT_FORMAT_MAX_SECTIONS 64

/* [start, start + count) lies within [0, limit), without overflowing. */
static inline int rt_format__range_ok(uint64_t start, uint64_t count, uint64_t limit) {
    return start <= limit && count <= limit - start;
}
#define RT_FORMAT_NO_INDEX 0xFFFFFFFFu

enum rt_section_kind {
    RT_SECTION_STRINGS = 1,
    RT_SECTION_OPS = 2,
    RT_SECTION_CONSTANTS = 3,
    RT_SECTION_SEGMENT = 4,
    RT_SECTION_WORDS = 5,
    RT_SECTION_VALUES = 6,
    RT_SECTION_INSTRUCTIONS = 7,
    RT_SECTION_METHODS = 8,
    RT_SECTION_BUNDLE = 9, /* v1.1: bundled test cases (inputs and expected outputs) */
    RT_SECTION_KIND_COUNT = 10
};
#define RT_SECTION_FLAG_OPTIONAL 1u /* a reader that does not know the kind may skip it */

enum rt_storage_kind {
    RT_STORAGE_ARENA = 1,    /* planned: arena index + byte offset */
    RT_STORAGE_CONSTANT = 2, /* a constant of the program, read-only */
    RT_STORAGE_STATE = 3     /* own memory persisting across executions (attributes) */
};
#define RT_VALUE_FLAG_DYNAMIC 1u
/* v1.2, with DYNAMIC: `reserved` holds the axes whose size may vary (bit d: axis d); the other
 * axes always have exactly their size. A DYNAMIC tensor without it may vary on every axis. */
#define RT_VALUE_FLAG_AXES 2u
/* v1.1: the constant's bytes live in a data file under the key its `name` string gives. */
#define RT_CONSTANT_FLAG_EXTERNAL 1u

enum rt_instruction_kind {
    RT_INSTR_KERNEL = 1,        /* a = op index, b = WORDS index of args, c = arg count      */
    RT_INSTR_JUMP = 2,          /* a = target instruction                                   */
    RT_INSTR_JUMP_IF_TRUE = 3,  /* a = target, b = condition value                          */
    RT_INSTR_JUMP_IF_FALSE = 4  /* a = target, b = condition value                          */
};

typedef struct rt_file_header {
    uint8_t magic[8];
    uint16_t major;
    uint16_t minor;
    uint32_t header_size;
    uint64_t file_size;
    uint32_t section_count;
    uint32_t flags;
    uint64_t section_table_offset;
    uint32_t meta_crc32;
    uint32_t data_crc32;
    uint8_t reserved[16];
} rt_file_header;

typedef struct rt_file_section {
    uint32_t kind;
    uint32_t flags;
    uint64_t offset;
    uint64_t size;
} rt_file_section;

typedef struct rt_file_string {
    uint32_t offset; /* from the start of the STRINGS section */
    uint32_t length; /* bytes, without the terminating NUL that must follow */
} rt_file_string;

typedef struct rt_file_constant {
    uint64_t offset; /* from the start of the SEGMENT section; a multiple of 64 */
    uint64_t nbytes;
    uint32_t name;   /* string index or RT_FORMAT_NO_INDEX; the key of an external constant */
    uint32_t flags;  /* RT_CONSTANT_FLAG_EXTERNAL or 0 */
} rt_file_constant;

typedef struct rt_file_value {
    uint8_t kind;    /* rt_value_kind */
    uint8_t flags;   /* RT_VALUE_FLAG_* */
    uint8_t rank;
    uint8_t storage; /* rt_storage_kind, tensors only */
    rt_dtype dtype;
    uint32_t a;      /* tensor: WORDS index of sizes; lists: WORDS index of the first item */
    uint32_t b;      /* tensor: WORDS index of dim order; lists: item count */
    uint32_t c;      /* tensor: arena, constant, or state's initial constant (or NO_INDEX) */
    uint32_t reserved;
    int64_t payload; /* int/bool value, double bits, string index, arena byte offset */
} rt_file_value;

typedef struct rt_file_instruction {
    uint32_t kind;
    uint32_t a;
    uint32_t b;
    uint32_t c;
} rt_file_instruction;

typedef struct rt_file_method {
    uint32_t name;
    uint32_t flags;
    uint32_t values, num_values;             /* range of VALUES */
    uint32_t instructions, num_instructions; /* range of INSTRUCTIONS */
    uint32_t inputs, num_inputs;             /* WORDS: (value index, name string) pairs */
    uint32_t outputs, num_outputs;           /* WORDS: (value index, name string) pairs */
    uint32_t arenas, num_arenas;             /* WORDS: arena sizes in bytes */
    uint32_t attributes, num_attributes;     /* WORDS: (name string, value index) pairs */
    uint32_t reserved[2];
} rt_file_method;

/* BUNDLE: one test case of a method: `num_inputs` inputs then `num_outputs` expected outputs,
 * consecutive bundle values from `values`. */
typedef struct rt_file_bundle_case {
    uint32_t method; /* index into METHODS */
    uint32_t values; /* first of the case's bundle values */
    uint32_t num_inputs;
    uint32_t num_outputs;
} rt_file_bundle_case;

/* BUNDLE: one input or expected output of a case: a dense row-major tensor held by a constant,
 * or an int, double or bool scalar. */
typedef struct rt_file_bundle_value {
    uint8_t kind;      /* RT_VALUE_TENSOR, _INT, _DOUBLE or _BOOL */
    uint8_t rank;
    uint16_t reserved0;
    rt_dtype dtype;    /* tensors */
    uint32_t sizes;    /* tensors: WORDS index of `rank` sizes */
    uint32_t constant; /* tensors: constant holding the data (never external) */
    uint64_t reserved1;
    int64_t payload;   /* scalars: int, bool (0 or 1), or double bits */
} rt_file_bundle_value;

/* A verified program: every index and range below has been checked against the buffer. */
typedef struct rt_format {
    const uint8_t *base;
    size_t size;
    const rt_file_header *header;
    const uint8_t *strings_base;
    const rt_file_string *strings;
    uint32_t num_strings;
    const uint32_t *ops; /* string indices */
    uint32_t num_ops;
    const rt_file_constant *constants;
    uint32_t num_constants;
    const uint8_t *segment;
    uint64_t segment_size;
    const int64_t *words;
    uint32_t num_words;
    const rt_file_value *values;
    uint32_t num_values;
    const rt_file_instruction *instructions;
    uint32_t num_instructions;
    const rt_file_method *methods;
    uint32_t num_methods;
    uint32_t num_external;                     /* constants with RT_CONSTANT_FLAG_EXTERNAL */
    const rt_file_bundle_case *bundle_cases;   /* NULL without a BUNDLE section */
    uint32_t num_bundle_cases;
    const rt_file_bundle_value *bundle_values;
    uint32_t num_bundle_values;
} rt_format;

/* Verify `data` as a program and fill `out` with views into it. On failure returns
 * RT_INVALID_PROGRAM with a message giving the byte offset and what was wrong. */
rt_status rt_format__read(rt_format *out, const uint8_t *data, size_t size, uint32_t flags);

/* String `index` (verified: NUL-terminated, in range). */
const char *rt_format__string(const rt_format *f, uint32_t index);

/* Byte size of one element of a verified dtype, 0 when the dtype is not one we know. */
size_t rt_format__dtype_size(rt_dtype dtype);

uint32_t rt_format__crc32(uint32_t crc, const uint8_t *data, size_t size);

#endif
