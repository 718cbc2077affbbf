/* leak_check.c: a plain driver for the fuzz harness, for valgrind (or any tool that wants an
 * ordinary binary): runs LLVMFuzzerTestOneInput once over each file named on the command line.
 *
 *   python3 tests/fuzz/run.py --valgrind     builds it and runs memcheck over the seeds, the
 *                                            regressions and the fuzz corpus */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The harness's custom mutator calls into libFuzzer; never reached here. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) {
    (void)data;
    (void)max_size;
    return size;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 1;
    uint8_t *data = NULL;
    size_t size = 0, capacity = 0, n;
    do {
        if (size == capacity) {
            capacity = capacity ? 2 * capacity : 65536;
            uint8_t *grown = realloc(data, capacity);
            if (grown == NULL) {
                free(data);
                fclose(f);
                return 1;
            }
            data = grown;
        }
        n = fread(data + size, 1, capacity - size, f);
        size += n;
    } while (n > 0);
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

/* "@list" names a file holding one path per line (keeps valgrind's command line short). */
static int run_list(const char *list, int *ran) {
    FILE *f = fopen(list, "r");
    if (f == NULL)
        return 1;
    char path[4096];
    int failed = 0;
    while (fgets(path, sizeof path, f) != NULL) {
        path[strcspn(path, "\n")] = '\0';
        if (path[0] == '\0')
            continue;
        failed += run_file(path);
        ++*ran;
    }
    fclose(f);
    return failed;
}

int main(int argc, char **argv) {
    int failed = 0, ran = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '@') {
            failed += run_list(argv[i] + 1, &ran);
        } else {
            failed += run_file(argv[i]);
            ran++;
        }
    }
    printf("leak_check: ran %d files (%d unreadable)\n", ran - failed, failed);
    return failed != 0;
}
