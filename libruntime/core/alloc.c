/* alloc.c: aligned, zero-filled allocation.
 *
 * Small blocks come from the heap and are cleared; large ones are anonymous mappings, which the
 * kernel zero-fills lazily. That matters for hostile programs: a huge arena either fails to map
 * (a clean out-of-memory error) or costs nothing until used, instead of being touched up front.
 * Each block starts with a 64-byte header recording how it was obtained. */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define RT_MAP_THRESHOLD ((size_t)1 << 20)

typedef struct rt_block_header {
    size_t total;   /* bytes obtained, header included */
    int mapped;
} rt_block_header;

void *rt_alloc__aligned(size_t size) {
    if (size > SIZE_MAX - 2 * RT_ALIGNMENT - 4096)
        return NULL;
    size_t total = (size + RT_ALIGNMENT - 1) / RT_ALIGNMENT * RT_ALIGNMENT + RT_ALIGNMENT;
    void *base;
    int mapped = total >= RT_MAP_THRESHOLD;
    if (mapped) {
        base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            return NULL;
    } else {
        base = aligned_alloc(RT_ALIGNMENT, total);
        if (base == NULL)
            return NULL;
        memset(base, 0, total);
    }
    rt_block_header *h = base;
    h->total = total;
    h->mapped = mapped;
    return (char *)base + RT_ALIGNMENT;
}

void rt_alloc__free(void *ptr) {
    if (ptr == NULL)
        return;
    rt_block_header *h = (rt_block_header *)((char *)ptr - RT_ALIGNMENT);
    if (h->mapped)
        munmap(h, h->total);
    else
        free(h);
}
