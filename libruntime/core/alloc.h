/* alloc.h: aligned allocation for arenas, copies and scratch. */
#ifndef RT_CORE_ALLOC_H
#define RT_CORE_ALLOC_H

#include <stddef.h>

#define RT_ALIGNMENT 64

/* 64-byte aligned, zero-filled; NULL on failure or overflow. size 0 gives a valid pointer. */
void *rt_alloc__aligned(size_t size);
void rt_alloc__free(void *ptr);

#endif
