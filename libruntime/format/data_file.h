/* data_file.h: the data file format (weights kept apart from programs; normative spec:
 * docs/format.md, "Data files") and its verified, read-only view. */
#ifndef RT_DATA_FILE_H
#define RT_DATA_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

#define RT_DATA_MAGIC "\x89RTD\r\n\x1a\n"
#define RT_DATA_MAJOR 1
#define RT_DATA_HEADER_SIZE 64
#define RT_DATA_MAX_ENTRIES (1u << 24)

typedef struct rt_data_header {
    uint8_t magic[8];
    uint16_t major;
    uint16_t minor;
    uint32_t header_size;
    uint64_t file_size;
    uint32_t entry_count;
    uint32_t flags;
    uint64_t table_offset; /* entries, then shapes and keys; 8-aligned, >= 64 */
    uint64_t table_size;
    uint64_t data_offset;  /* the data segment, to the end of the file; 64-aligned */
    uint32_t meta_crc32;   /* header bytes [0, 56), then the table */
    uint32_t data_crc32;   /* the data segment; checked on request */
} rt_data_header;

typedef struct rt_data_entry {
    uint64_t offset;     /* from data_offset; a multiple of 64 */
    uint64_t nbytes;     /* element size x product of the shape */
    uint32_t key;        /* from the table start: key_length bytes, then a NUL */
    uint32_t key_length;
    rt_dtype dtype;
    uint32_t rank;       /* at most RT_MAX_RANK */
    uint32_t shape;      /* from the table start, 8-aligned: `rank` int64 sizes */
    uint32_t reserved;
} rt_data_entry;

/* A verified data file. `sorted` (owned) lists the entries in key order for lookups. */
typedef struct rt_data_file {
    const uint8_t *base;
    size_t size;
    const rt_data_header *header;
    const uint8_t *table;
    const rt_data_entry *entries;
    uint32_t num_entries;
    const uint8_t *data;
    uint64_t data_size;
    uint32_t *sorted;
} rt_data_file;

/* Verify `data` as a data file (with RT_PROGRAM_VERIFY_CONSTANTS, its data checksum too).
 * Failures are RT_INVALID_PROGRAM naming the byte offset; release with rt_data_file__free
 * whether it succeeded or not. */
rt_status rt_data_file__read(rt_data_file *out, const uint8_t *data, size_t size,
                             uint32_t flags);
void rt_data_file__free(rt_data_file *f);
/* The entry stored under `key`, or NULL. */
const rt_data_entry *rt_data_file__find(const rt_data_file *f, const char *key);
const char *rt_data_file__key(const rt_data_file *f, const rt_data_entry *e);
const int64_t *rt_data_file__shape(const rt_data_file *f, const rt_data_entry *e);

#endif
