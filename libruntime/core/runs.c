/* runs.c: parallel runs (threadpool.h), on rt_parallel__for.
 *
 * Each of the loop's pieces is a slot with a record: the run it holds, as a front and a back
 * packed in one 64-bit word, so the slot's thread taking its front item and another thread
 * cutting items off its back settle who gets what with one compare-and-swap. A thread whose
 * record is empty takes items from another record and installs them in its own, where yet
 * another thread may take from them in turn. Items never return to a record once taken, so a
 * stale view of a record can never match it again (no ABA). */
#include "core/threadpool.h"

#include <stdatomic.h>
#include <stdint.h>

#define MAX_ITEMS UINT32_MAX /* positions are 32 bits; longer loops go in several passes */

struct rt_run {
    _Atomic uint64_t bounds; /* front | back << 32, relative to base */
    atomic_bool started;     /* the slot's thread has begun its first run */
    atomic_size_t first;     /* a range not stolen: its first item, which stays with it */
    size_t base;
    bool stolen; /* the range now held was taken from another record */
} __attribute__((aligned(64)));

typedef struct runs_job {
    rt_run runs[RT_MAX_RUNS];
    int32_t count;
    rt_run_fn fn;
    void *ctx;
} runs_job;

static uint64_t pack(uint64_t front, uint64_t back) { return front | back << 32; }
static size_t front_of(uint64_t bounds) { return (size_t)(bounds & 0xffffffffu); }
static size_t back_of(uint64_t bounds) { return (size_t)(bounds >> 32); }

bool rt_run__stolen(const rt_run *run) { return run->stolen; }

size_t rt_run__back(const rt_run *run) {
    return run->base + back_of(atomic_load_explicit(&run->bounds, memory_order_relaxed));
}

bool rt_run__next(rt_run *run, size_t *item) {
    uint64_t seen = atomic_load(&run->bounds);
    for (;;) {
        size_t front = front_of(seen), back = back_of(seen);
        if (front >= back)
            return false;
        if (atomic_compare_exchange_weak(&run->bounds, &seen, pack(front + 1, back))) {
            *item = run->base + front;
            return true;
        }
    }
}

static void hand_over(rt_run *run, size_t front, size_t back, bool stolen) {
    run->stolen = stolen;
    atomic_store(&run->first, stolen ? SIZE_MAX : front);
    atomic_store(&run->bounds, pack(front, back));
}

/* Items a thief may take from `run`: all of a run no slot has started; else those past the
 * front, but never the first item of a range not stolen (its holder prepares, for that one,
 * what the range's items share, and thieves of the rest may wait for it). Read from a stale
 * view of the record the answer may be wrong, but then the exchange that takes fails. */
static size_t takeable(rt_run *run, uint64_t bounds, bool *started) {
    size_t front = front_of(bounds), back = back_of(bounds);
    *started = atomic_load(&run->started);
    if (front >= back)
        return 0;
    if (!*started)
        return back - front;
    if (front == atomic_load(&run->first))
        front++;
    return back - front;
}

/* Into `own` (empty): a run no slot has started, whole, or else the last item of the run with
 * most left (one at a time: a thief that is itself slowed then holds up the loop by one item
 * at most). False once no item is left to take. */
static bool take_more(runs_job *job, rt_run *own) {
    for (;;) {
        rt_run *victim = NULL;
        uint64_t seen = 0;
        size_t most = 0;
        bool started = false; /* the victim's, read before the exchange: a slot that starts
                                 just after finds its run empty, and takes from elsewhere */
        for (int32_t i = 0; i < job->count; i++) {
            rt_run *run = &job->runs[i];
            uint64_t bounds = atomic_load(&run->bounds);
            bool run_started;
            size_t left = run == own ? 0 : takeable(run, bounds, &run_started);
            if (left > most) {
                victim = run;
                seen = bounds;
                most = left;
                started = run_started;
            }
        }
        if (victim == NULL)
            return false;
        size_t front = front_of(seen), back = back_of(seen);
        size_t take = started ? 1 : back - front;
        if (atomic_compare_exchange_strong(&victim->bounds, &seen, pack(front, back - take))) {
            hand_over(own, back - take, back, started);
            return true;
        }
    }
}

static void run_slots(void *arg, size_t begin, size_t end) {
    runs_job *job = arg;
    for (size_t slot = begin; slot < end; slot++) {
        rt_run *own = &job->runs[slot];
        atomic_store(&own->started, true);
        do
            job->fn(job->ctx, (int32_t)slot, own);
        while (take_more(job, own));
    }
}

void rt_parallel__runs(int32_t threads, size_t n, rt_run_fn fn, void *ctx) {
    for (size_t base = 0; base < n;) {
        size_t items = n - base < MAX_ITEMS ? n - base : MAX_ITEMS;
        size_t count = threads < 1 ? 1 : threads > RT_MAX_RUNS ? RT_MAX_RUNS : (size_t)threads;
        count = count < items ? count : items;
        runs_job job = {.count = (int32_t)count, .fn = fn, .ctx = ctx};
        for (size_t i = 0; i < count; i++) {
            rt_run *run = &job.runs[i];
            run->base = base;
            atomic_init(&run->started, false);
            atomic_init(&run->bounds, 0);
            atomic_init(&run->first, 0);
            hand_over(run, items * i / count, items * (i + 1) / count, false);
        }
        rt_parallel__for((int32_t)count, count, 1, run_slots, &job);
        base += items;
    }
}
