/* threadpool.h: one process-wide pool of worker threads shared by every method. A parallel
 * loop splits [0, n) into chunks of at least `grain` items; the calling thread takes part, so
 * several methods may run parallel loops at once. */
#ifndef RT_CORE_THREADPOOL_H
#define RT_CORE_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef void (*rt_range_fn)(void *ctx, size_t begin, size_t end);

/* Run fn over [0, n) on up to `threads` threads (the caller included). Runs inline when one
 * chunk suffices or the pool cannot start threads. */
void rt_parallel_for(int32_t threads, size_t n, size_t grain, rt_range_fn fn, void *ctx);

int32_t rt_threadpool__default_threads(void);
int32_t rt_threadpool__hardware_threads(void);

#endif
