/* threadpool.h: one process-wide pool of worker threads shared by every method. A parallel
 * loop splits [0, n) into chunks of at least `grain` items; the calling thread takes part, so
 * several methods may run parallel loops at once. */
#ifndef RT_CORE_THREADPOOL_H
#define RT_CORE_THREADPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*rt_range_fn)(void *ctx, size_t begin, size_t end);

/* Run fn over [0, n) on up to `threads` threads (the caller included). Runs inline when one
 * chunk suffices or the pool cannot start threads. */
void rt_parallel__for(int32_t threads, size_t n, size_t grain, rt_range_fn fn, void *ctx);

/* Runs: items [0, n) cut into `threads` runs of about equal length, one per thread, each
 * worked through from its front by the thread that holds it. A thread whose run is done takes
 * a run no thread has started, whole, or else the last item of the run with most left, one
 * at a time, but never a run's first item (its holder may prepare there what the run's items
 * share; a taker of later items may wait for that). Threads of equal speed thus each keep one
 * contiguous run (their output stays in their cache for the next op), while a thread that is
 * slowed or descheduled holds up the op by about one item, not by its whole share. */
typedef struct rt_run rt_run;

#define RT_MAX_RUNS 64 /* runs per loop at most: with more threads, runs hold more items */

/* fn works `run` through with rt_run__next, on the thread holding `slot` (of [0, threads)):
 * per-thread scratch indexed by slot is that thread's alone while fn runs. */
typedef void (*rt_run_fn)(void *ctx, int32_t slot, rt_run *run);

void rt_parallel__runs(int32_t threads, size_t n, rt_run_fn fn, void *ctx);

/* Whether the items handed to this call of fn were taken from another thread's run (so their
 * run's first item, and what its holder prepares there, is another thread's). */
bool rt_run__stolen(const rt_run *run);

/* Where the run ends now (others may have taken items from its back): a hint for how far
 * ahead to prepare. */
size_t rt_run__back(const rt_run *run);

/* The next item from the front; false when none is left. */
bool rt_run__next(rt_run *run, size_t *item);

int32_t rt_threadpool__default_threads(void);
int32_t rt_threadpool__hardware_threads(void);

#endif
