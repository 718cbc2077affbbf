/* fuzz_program.c: libFuzzer harness over the whole public API.
 *
 * Each input is a program. It is loaded (copied), its bundled test cases are read, every method
 * is loaded with a memory limit and a step limit, every input is bound to its first bundled
 * case (or to zeros of its declared shape and dtype), the method runs and its outputs are read;
 * then everything is destroyed. An input that starts with the data file magic is a data file
 * instead: it is verified and every entry looked up by key and read. Any crash, sanitizer
 * report, leak or hang is a bug in libruntime.
 *
 * Random bytes almost never pass the metadata checksum, so the custom mutator below lets
 * libFuzzer mutate as usual and then repairs file_size and both checksums (docs/format.md) on
 * most mutants, which lets them reach the deeper checks. The library itself is unchanged.
 *
 * Build and run: python3 tests/fuzz/run.py --seconds N */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "format/data_file.h"
#include "format/format.h"

#define FUZZ_MEMORY_LIMIT (64u << 20)
/* Loops of small kernels run about 2 us a step in a release build and 20 times slower under
 * ASan + UBSan: 25,000 steps keep even four such executions well inside the 10 s timeout. */
#define FUZZ_MAX_STEPS 25000u

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* ---- checksum repair -------------------------------------------------------------------- */

static uint64_t read_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t read_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The SEGMENT section as the reader would find it, if its range is sane; else [size, size). */
static void find_segment(const uint8_t *data, size_t size, uint64_t *start, uint64_t *end) {
    *start = *end = size;
    uint32_t count = read_u32(data + 24);
    uint64_t table = read_u64(data + 32);
    if (count > RT_FORMAT_MAX_SECTIONS || table > size || (uint64_t)count * 24 > size - table)
        return;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *s = data + table + 24 * (uint64_t)i;
        uint64_t offset = read_u64(s + 8), bytes = read_u64(s + 16);
        if (read_u32(s) != RT_SECTION_SEGMENT)
            continue;
        if (offset >= RT_FORMAT_HEADER_SIZE && offset <= size && bytes <= size - offset) {
            *start = offset;
            *end = offset + bytes;
        }
        return;
    }
}

/* The same for a data file: file_size, and the checksums over the table and the data. */
static void fix_data_header(uint8_t *data, size_t size) {
    uint64_t file_size = size;
    memcpy(data + 16, &file_size, 8);
    uint64_t table = read_u64(data + 32), table_size = read_u64(data + 40);
    uint64_t data_at = read_u64(data + 48);
    if (table > size || table_size > size - table)
        return;
    uint32_t crc = rt_format__crc32(rt_format__crc32(0, data, 56), data + table,
                                    (size_t)table_size);
    memcpy(data + 56, &crc, 4);
    if (data_at <= size) {
        uint32_t data_crc = rt_format__crc32(0, data + data_at, (size_t)(size - data_at));
        memcpy(data + 60, &data_crc, 4);
    }
}

/* Make file_size and both checksums agree with the bytes, as the writer would. */
static void fix_header(uint8_t *data, size_t size) {
    if (size < RT_FORMAT_HEADER_SIZE)
        return;
    if (memcmp(data, RT_DATA_MAGIC, 8) == 0) {
        fix_data_header(data, size);
        return;
    }
    uint64_t file_size = size;
    memcpy(data + 16, &file_size, 8);
    uint64_t seg_start, seg_end;
    find_segment(data, size, &seg_start, &seg_end);
    uint32_t crc = rt_format__crc32(0, data, 40);
    crc = rt_format__crc32(crc, data + RT_FORMAT_HEADER_SIZE,
                           (size_t)(seg_start - RT_FORMAT_HEADER_SIZE));
    crc = rt_format__crc32(crc, data + seg_end, (size_t)(size - seg_end));
    uint32_t data_crc = rt_format__crc32(0, data + seg_start, (size_t)(seg_end - seg_start));
    memcpy(data + 40, &crc, 4);
    memcpy(data + 44, &data_crc, 4);
}

/* Overwrite an aligned field with a boundary value: counts, offsets, sizes and indices are
 * what the verifier guards, and byte-level mutation rarely hits their edges. */
static void mutate_field(uint8_t *data, size_t size, unsigned seed) {
    static const uint64_t values[] = {0, 1, 2, 3, 7, 8, 63, 64, 255, 0x7FFFFFFF, 0xFFFFFFFF,
                                      0x100000000ull, 0x7FFFFFFFFFFFFFFFull,
                                      0xFFFFFFFFFFFFFFFFull, 1ull << 62};
    size_t width = (seed & 1) ? 8 : 4;
    if (size < width)
        return;
    size_t pos = ((seed >> 1) % (size / width)) * width;
    uint64_t v = values[(seed >> 9) % (sizeof values / sizeof values[0])];
    if (((seed >> 13) & 1) && pos + 8 <= size) /* or step the value that is there */
        v = read_u64(data + pos) + ((seed >> 14) & 1 ? 1 : (uint64_t)-1);
    memcpy(data + pos, &v, width);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed) {
    if ((seed & 7) == 0)
        mutate_field(data, size, seed >> 3);
    else
        size = LLVMFuzzerMutate(data, size, max_size);
    /* Leave one mutant in 16 as it is, so that the header and checksum checks stay fuzzed. */
    if ((seed >> 28) != 0)
        fix_header(data, size);
    return size;
}

size_t LLVMFuzzerCustomCrossOver(const uint8_t *a, size_t a_size, const uint8_t *b,
                                 size_t b_size, uint8_t *out, size_t max_out, unsigned seed) {
    /* Splice a prefix of one program onto a suffix of the other: tables of one, records of
     * the other. */
    size_t cut_a = a_size ? seed % (a_size + 1) : 0;
    size_t cut_b = b_size ? (seed >> 8) % (b_size + 1) : 0;
    size_t n = cut_a < max_out ? cut_a : max_out;
    memcpy(out, a, n);
    size_t rest = b_size - cut_b;
    if (rest > max_out - n)
        rest = max_out - n;
    memcpy(out + n, b + cut_b, rest);
    fix_header(out, n + rest);
    return n + rest;
}

/* ---- running a program ------------------------------------------------------------------ */

/* Beyond "no crash": every failure carries a message, and RT_INTERNAL (a libruntime bug by
 * definition) never happens. A violation stops the fuzzer like a crash would. */
static rt_status check(rt_status status) {
    if (status != RT_OK && (status == RT_INTERNAL || rt_last_error()[0] == '\0'))
        __builtin_trap();
    /* FUZZ_VERBOSE=1 shows why an input stops where it does (for replaying one file). */
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fuzz: %s%s%s\n", rt_status_string(status), status ? ": " : "",
                status ? rt_last_error() : "");
    return status;
}

/* Touch the first and last byte of a dense tensor view, so a bad view shows up here. */
static void touch_dense(const rt_tensor *t) {
    volatile uint8_t sink = 0;
    size_t elems = 1, elem = (t->dtype.bits + 7u) / 8u;
    for (int32_t d = 0; d < t->rank; d++)
        elems *= (size_t)t->sizes[d];
    if (elems > 0 && t->data != NULL) {
        sink ^= ((const uint8_t *)t->data)[0];
        sink ^= ((const uint8_t *)t->data)[elems * elem - 1];
    }
    (void)sink;
}

/* Read every value of every bundled case of a method; returns the number of cases. */
static size_t read_bundled(const rt_program *p, const char *name) {
    size_t cases = 0;
    if (check(rt_program_bundled_case_count(&cases, p, name)) != RT_OK)
        return 0;
    rt_method_info info;
    if (check(rt_program_method_info(&info, p, name)) != RT_OK)
        return 0;
    for (size_t c = 0; c < cases; c++) {
        rt_bundled_value v;
        for (size_t i = 0; i < info.num_inputs; i++)
            if (check(rt_program_bundled_input(&v, p, name, c, i)) == RT_OK &&
                v.kind == RT_VALUE_TENSOR)
                touch_dense(&v.tensor);
        for (size_t i = 0; i < info.num_outputs; i++)
            if (check(rt_program_bundled_expected(&v, p, name, c, i)) == RT_OK &&
                v.kind == RT_VALUE_TENSOR)
                touch_dense(&v.tensor);
        /* One past the end: a clean error. */
        check(rt_program_bundled_input(&v, p, name, c, info.num_inputs));
    }
    return cases;
}

static void bind_inputs(rt_method *m, const rt_program *p, const char *name, const void *zeros,
                        size_t zeros_size, int use_case) {
    size_t n = rt_method_input_count(m);
    for (size_t i = 0; i < n; i++) {
        rt_bundled_value v;
        if (use_case && check(rt_program_bundled_input(&v, p, name, 0, i)) == RT_OK) {
            if (v.kind == RT_VALUE_TENSOR)
                check(rt_method_set_input(m, i, &v.tensor, 0));
            else
                check(rt_method_set_input_scalar(m, i, &v.scalar));
            continue;
        }
        rt_tensor_info info;
        if (check(rt_program_input_info(&info, p, name, i)) != RT_OK)
            continue;
        if (info.kind != RT_VALUE_TENSOR) {
            rt_scalar s = {info.kind, 0, 0, 0.0};
            check(rt_method_set_input_scalar(m, i, &s));
            continue;
        }
        if (info.rank < 0 || info.rank > RT_MAX_RANK || info.nbytes > zeros_size)
            continue;
        rt_tensor t = {(void *)zeros, {RT_DEVICE_CPU, 0}, info.rank, info.dtype, info.sizes,
                       NULL};
        check(rt_method_set_input(m, i, &t, 0));
    }
}

static void read_outputs(rt_method *m) {
    size_t n = rt_method_output_count(m);
    for (size_t i = 0; i < n; i++) {
        rt_tensor t;
        rt_scalar s;
        if (check(rt_method_output(&t, m, i)) == RT_OK) {
            /* Touch the first and last byte of the view, so a bad view shows up here. */
            volatile uint8_t sink = 0;
            size_t elems = 1, elem = (t.dtype.bits + 7u) / 8u;
            for (int32_t d = 0; d < t.rank; d++)
                elems *= (size_t)t.sizes[d];
            if (elems > 0 && t.data != NULL && t.strides != NULL) {
                int64_t last = 0;
                for (int32_t d = 0; d < t.rank; d++)
                    last += (t.sizes[d] - 1) * t.strides[d];
                sink ^= ((const uint8_t *)t.data)[0];
                sink ^= ((const uint8_t *)t.data)[last * (int64_t)elem + (int64_t)elem - 1];
            }
            (void)sink;
        } else {
            check(rt_method_output_scalar(&s, m, i));
        }
    }
}

static void run_method(rt_program *p, const char *name, const void *zeros, size_t zeros_size) {
    size_t cases = read_bundled(p, name);
    rt_method_options options;
    rt_method_options_init(&options);
    options.memory_limit = FUZZ_MEMORY_LIMIT;
    options.max_steps = FUZZ_MAX_STEPS;
    options.num_threads = 2;
    rt_method *m = NULL;
    if (check(rt_method_load(&m, p, name, &options)) != RT_OK)
        return;
    bind_inputs(m, p, name, zeros, zeros_size, cases > 0);
    if (check(rt_method_execute(m)) == RT_OK)
        read_outputs(m);
    /* A second run sees state left by the first (attributes, loop-carried values). */
    if (check(rt_method_execute(m)) == RT_OK)
        read_outputs(m);
    rt_method_destroy(m);
}

/* A data file: verify it (data checksum included), then find and read every entry by key. */
static void run_data_file(const uint8_t *data, size_t size) {
    /* The reader wants the alignment a mapping has; libFuzzer's buffer promises none. */
    uint8_t *copy = aligned_alloc(64, size + 64 - size % 64);
    if (copy == NULL)
        return;
    memcpy(copy, data, size);
    rt_data_file f;
    if (check(rt_data_file__read(&f, copy, size, RT_PROGRAM_VERIFY_CONSTANTS)) == RT_OK) {
        for (uint32_t i = 0; i < f.num_entries; i++) {
            const rt_data_entry *e = rt_data_file__find(&f, rt_data_file__key(&f, &f.entries[i]));
            if (e != &f.entries[i])
                __builtin_trap(); /* keys are unique: the lookup must find this very entry */
            const int64_t *shape = rt_data_file__shape(&f, e);
            volatile int64_t sink = e->rank ? shape[e->rank - 1] : 0;
            if (e->nbytes > 0)
                sink ^= f.data[e->offset] ^ f.data[e->offset + e->nbytes - 1];
            (void)sink;
        }
        if (rt_data_file__find(&f, "") != NULL) /* empty keys are refused */
            __builtin_trap();
    }
    rt_data_file__free(&f);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 8 && memcmp(data, RT_DATA_MAGIC, 8) == 0) {
        run_data_file(data, size);
        return 0;
    }
    rt_program *p = NULL;
    if (check(rt_program_load_buffer(&p, data, size, RT_PROGRAM_COPY)) != RT_OK)
        return 0;
    /* Inputs are tensors in the planned arenas, so none is larger than the memory limit; one
     * zero buffer serves them all (bindings only read it). */
    static void *zeros;
    if (zeros == NULL)
        zeros = calloc(1, FUZZ_MEMORY_LIMIT);
    size_t count = rt_program_method_count(p);
    for (size_t i = 0; i < count; i++) {
        const char *name = rt_program_method_name(p, i);
        rt_method_info info;
        if (name != NULL && check(rt_program_method_info(&info, p, name)) == RT_OK)
            run_method(p, name, zeros, zeros != NULL ? FUZZ_MEMORY_LIMIT : 0);
    }
    rt_program_release(p);
    return 0;
}
