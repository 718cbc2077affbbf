/* threadpool.c: a process-wide pool of workers serving parallel loops.
 *
 * A loop is a job of `chunks` pieces on a shared queue. The calling thread and at most
 * threads - 1 workers claim pieces with an atomic counter; the caller waits until every piece
 * is done. Workers start lazily on the first loop that wants them.
 *
 * A method runs its ops back to back, each a short loop, so waking a sleeping worker (a futex
 * round trip of several microseconds; in a VM, where an idle vCPU halts, measured here as up
 * to hundreds) for each would cost more than small ops take. Workers therefore spin for up to
 * a millisecond after each job, watching a generation counter, before they sleep; the caller
 * likewise spins before it sleeps waiting for them, and claims every piece no worker has
 * started, so a late worker never delays it. */
#include "core/threadpool.h"

#include "core/clock.h"
#include "runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#define RT_MAX_WORKERS 64
#define SPIN_NS 1000000    /* how long an idle worker, or a waiting caller, spins first */
#define CHUNKS_PER_THREAD 4 /* pieces per thread, so threads that start late still balance */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct rt_job {
    rt_range_fn fn;
    void *ctx;
    size_t n;
    size_t chunks;
    int32_t max_helpers;
    int32_t helpers;           /* workers that ever joined, guarded by pool.lock */
    atomic_int active;         /* workers still inside the job (changed under pool.lock) */
    atomic_size_t next_chunk;
    atomic_size_t done_chunks;
    struct rt_job *next;       /* queue link, guarded by pool.lock */
} rt_job;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_cond_t done;
    rt_job *queue;
    int32_t workers;
    int32_t sleepers;          /* workers waiting on `work` */
    bool started;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          NULL, 0, 0, false};

static atomic_uint generation; /* bumped (under pool.lock) whenever a job is queued */

static atomic_int default_threads = 0;

static int32_t hardware_threads;
static pthread_once_t hardware_once = PTHREAD_ONCE_INIT;

/* sysconf reads /sys on every call (microseconds), so ask once per process. */
static void count_hardware_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    hardware_threads = n < 1 ? 1 : n > RT_MAX_WORKERS ? RT_MAX_WORKERS : (int32_t)n;
}

int32_t rt_threadpool__hardware_threads(void) {
    pthread_once(&hardware_once, count_hardware_threads);
    return hardware_threads;
}

int32_t rt_threadpool__default_threads(void) {
    int n = atomic_load(&default_threads);
    return n > 0 ? n : rt_threadpool__hardware_threads();
}

RT_API void rt_set_num_threads(int32_t n) { atomic_store(&default_threads, n > 0 ? n : 0); }

RT_API int32_t rt_get_num_threads(void) { return rt_threadpool__default_threads(); }

static void run_chunk(rt_job *job, size_t chunk) {
    size_t begin = job->n * chunk / job->chunks;
    size_t end = job->n * (chunk + 1) / job->chunks;
    if (begin < end)
        job->fn(job->ctx, begin, end);
}

/* Claim and run pieces until none are left; returns how many this thread ran. */
static size_t work_on(rt_job *job) {
    size_t ran = 0;
    for (;;) {
        size_t chunk = atomic_fetch_add(&job->next_chunk, 1);
        if (chunk >= job->chunks)
            return ran;
        run_chunk(job, chunk);
        ran++;
    }
}

static rt_job *find_open_job(void) {
    for (rt_job *job = pool.queue; job != NULL; job = job->next)
        if (job->helpers < job->max_helpers && atomic_load(&job->next_chunk) < job->chunks)
            return job;
    return NULL;
}

/* Spin until `*word` differs from `seen` or SPIN_NS pass; true when it changed. */
static bool spin_while_equal(atomic_uint *word, unsigned seen) {
    uint64_t start = rt_clock__now_ns();
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen)
            return true;
        cpu_relax();
        if (i % 64 == 0 && rt_clock__now_ns() - start > SPIN_NS)
            return false;
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        rt_job *job = find_open_job();
        if (job == NULL) {
            unsigned seen = atomic_load(&generation);
            pthread_mutex_unlock(&pool.lock);
            spin_while_equal(&generation, seen);
            pthread_mutex_lock(&pool.lock);
            if (atomic_load(&generation) == seen) {
                pool.sleepers++;
                pthread_cond_wait(&pool.work, &pool.lock);
                pool.sleepers--;
            }
            continue;
        }
        job->helpers++;
        atomic_fetch_add(&job->active, 1);
        pthread_mutex_unlock(&pool.lock);
        size_t ran = work_on(job);
        pthread_mutex_lock(&pool.lock);
        /* The job lives on its caller's stack; the caller returns only once no worker is
         * active in it, so `active` is the last thing a worker touches. */
        atomic_fetch_add(&job->done_chunks, ran);
        atomic_fetch_sub(&job->active, 1);
        pthread_cond_broadcast(&pool.done);
    }
    return NULL;
}

static bool job_finished(rt_job *job) {
    return atomic_load(&job->done_chunks) >= job->chunks && atomic_load(&job->active) == 0;
}

/* fork(): hold the lock across it so the child never inherits it locked, and give the child,
 * which has no worker threads, a fresh pool that starts its own on first use. */
static void before_fork(void) { pthread_mutex_lock(&pool.lock); }

static void after_fork_parent(void) { pthread_mutex_unlock(&pool.lock); }

static void after_fork_child(void) {
    pool.queue = NULL;
    pool.workers = 0;
    pool.sleepers = 0;
    pool.started = false;
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.done, NULL);
    pthread_mutex_unlock(&pool.lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void install_fork_handlers(void) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Start the workers once; false when none could start (then loops run inline). */
static bool ensure_workers(void) {
    if (pool.started)
        return pool.workers > 0;
    pool.started = true;
    int32_t wanted = rt_threadpool__hardware_threads() - 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int32_t i = 0; i < wanted; i++) {
        pthread_t thread;
        if (pthread_create(&thread, &attr, worker_main, NULL) != 0)
            break;
        pool.workers++;
    }
    pthread_attr_destroy(&attr);
    return pool.workers > 0;
}

void rt_parallel_for(int32_t threads, size_t n, size_t grain, rt_range_fn fn, void *ctx) {
    if (n == 0)
        return;
    if (grain == 0)
        grain = 1;
    size_t chunks = (n + grain - 1) / grain;
    size_t most = (size_t)threads * CHUNKS_PER_THREAD;
    if (threads > 1 && chunks > most)
        chunks = most;
    if (threads <= 1 || chunks <= 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_once(&atfork_once, install_fork_handlers);
    pthread_mutex_lock(&pool.lock);
    if (!ensure_workers()) {
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, 0, n);
        return;
    }
    rt_job job = {.fn = fn, .ctx = ctx, .n = n, .chunks = chunks, .max_helpers = threads - 1};
    atomic_init(&job.next_chunk, 0);
    atomic_init(&job.done_chunks, 0);
    atomic_init(&job.active, 0);
    job.next = pool.queue;
    pool.queue = &job;
    atomic_fetch_add(&generation, 1);
    if (pool.sleepers > 0)
        pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);

    size_t ran = work_on(&job);

    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&job.done_chunks, ran);
    for (rt_job **link = &pool.queue; *link != NULL; link = &(*link)->next) {
        if (*link == &job) {
            *link = job.next;
            break;
        }
    }
    if (!job_finished(&job)) {
        /* A worker is finishing a piece: spin a little before sleeping on it. */
        pthread_mutex_unlock(&pool.lock);
        uint64_t start = rt_clock__now_ns();
        while (!job_finished(&job) && rt_clock__now_ns() - start < SPIN_NS)
            cpu_relax();
        pthread_mutex_lock(&pool.lock);
    }
    while (!job_finished(&job))
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}
