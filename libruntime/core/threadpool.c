/* threadpool.c: a process-wide pool of workers serving parallel loops.
 *
 * A loop is a job of `chunks` pieces in one of a fixed set of job slots. The calling thread and
 * at most threads - 1 workers claim pieces with an atomic counter; the caller returns once
 * every piece is done and no worker is inside the job. Workers start lazily on the first loop
 * that wants them.
 *
 * A method runs its ops back to back, each a short loop, so waking a sleeping worker (a futex
 * round trip of several microseconds; in a VM, where an idle vCPU halts, measured here as up
 * to hundreds) for each would cost more than small ops take. Workers therefore spin for up to
 * a millisecond after each job, watching a generation counter; the caller likewise spins
 * before it sleeps waiting for them, and claims every piece no worker has started, so a late
 * worker never delays it. Between calls a worker then naps (short timed sleeps, checking the
 * counter after each) until the worker wait (rt_set_worker_wait_us) has passed, and only then
 * sleeps until woken. On this VM a call that found the workers asleep ran on vCPUs the host
 * had taken away: MobileNet called every 20 or 50 ms took 7.2 to 7.7 ms at 2 threads, against
 * 2.8 back to back (onnxruntime, whose workers spin about 40 ms: 3.2 to 3.4), and one call
 * after 150 ms idle ran its caller's share at under half speed. With the workers napping the
 * same calls took 3.5 ms, and 3.8 to 4.1 after 150 ms. Naps of 200 or 500 us did that (1 or 2
 * ms did not: 3.6 to 5.2 ms), at 8.8 or 3.1% of a core while napping.
 *
 * Joining and leaving a job take no lock (a worker that blocked on a mutex the caller held
 * would sleep, and waking it costs as much as the loop): slots live in static memory, so a
 * worker may look at one whose job has moved on, and it counts itself in (`active`) before
 * checking that the job is still the one it saw. The mutex and condition variables serve only
 * sleeping and waking. */
#define _GNU_SOURCE /* pthread_setname_np, sched_getcpu, cpu_set_t */
#include "core/threadpool.h"

#include "core/clock.h"
#include "runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#define RT_MAX_WORKERS 64
#define RT_MAX_JOBS 64      /* loops running at once; beyond, a loop runs inline */
#define SPIN_NS 1000000     /* how long an idle worker, or a waiting caller, spins first */
#define NAP_NS 500000       /* then an idle worker's naps */
#define DEFAULT_WORKER_WAIT_NS 1000000000 /* calls once a second find the workers awake */
#define CHUNKS_PER_THREAD 4 /* pieces per thread, so threads that start late still balance */
#define MOVE_EVERY_NS 10000000 /* a worker leaves its caller's CPU at most every 10 ms */

/* A spin step: a compiler barrier only, no PAUSE. Under KVM a loop of PAUSEs triggers
 * pause-loop exiting (the host takes the vCPU away as if it waited for a lock holder); measured
 * on this 2-vCPU VM it made the small CNN at 2 threads 2.5x slower than at 1 (270 against 107
 * us without it), the caller's own single-threaded ops included. */
static inline void cpu_relax(void) { __asm__ __volatile__("" ::: "memory"); }

/* Every so many spin steps a spinning thread gives its CPU to any other thread waiting for it
 * (sched_yield: a system call, no VM exit, and back at once when none waits). Another thread
 * on the same CPU, whether the caller, a worker holding a piece the caller waits for, or
 * another process, otherwise waited out the spinner's time slice. With a busy loop pinned to
 * CPU 1, MobileNet at 2 threads took 7.9 ms, slower than one thread, and 4.7 with the yields
 * (onnxruntime 7.5); alone nothing changed (MobileNet v1 6.2 ms, the small CNN 60 us). */
#define SPINS_PER_YIELD 256

enum { SLOT_FREE, SLOT_SETUP, SLOT_OPEN, SLOT_CLOSED };

typedef struct rt_job {
    atomic_int state;      /* SLOT_*; only OPEN jobs take new workers */
    atomic_uint seq;       /* bumped for each job the slot holds */
    atomic_int active;     /* workers inside (counted before they check the job) */
    atomic_int helpers;    /* workers that joined this job */
    atomic_size_t next_chunk;
    atomic_size_t done_chunks;
    atomic_bool caller_sleeping;
    int caller_cpu; /* the CPU the caller opened it on, or -1 */
    rt_range_fn fn;
    void *ctx;
    size_t n;
    size_t chunks;
    int32_t max_helpers;
} __attribute__((aligned(64))) rt_job;

static rt_job jobs[RT_MAX_JOBS];

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_cond_t done;
    int32_t workers;
    bool started;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
          false};

static atomic_uint generation; /* bumped whenever a job opens */
static atomic_int sleepers;    /* workers waiting on pool.work */

static atomic_int default_threads = 0;
static _Atomic int64_t worker_wait_ns = DEFAULT_WORKER_WAIT_NS;

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

RT_API void rt_set_worker_wait_us(int64_t us) {
    int64_t most = INT64_MAX / 1000;
    atomic_store(&worker_wait_ns, us < 0 ? DEFAULT_WORKER_WAIT_NS : us > most ? INT64_MAX
                                                                               : us * 1000);
}

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

/* A worker leaves a job: the caller may be asleep waiting for exactly this. */
static void leave(rt_job *job) {
    atomic_fetch_sub(&job->active, 1);
    if (atomic_load(&job->caller_sleeping)) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.done);
        pthread_mutex_unlock(&pool.lock);
    }
}

/* A worker on the CPU of the caller whose loop it joins takes turns with that caller while
 * another CPU may idle: Linux wakes a thread near its waker, here even with the other vCPU
 * idle, and a napping worker wakes where it last ran. MobileNet called every 20 ms at 2
 * threads, in turns that start with the workers asleep, took 5.1 ms for a turn's first two
 * calls and 3.2 for the rest. So such a worker moves off: its allowed CPUs less that one,
 * then all of them again (it stays where it was moved). At most once per MOVE_EVERY_NS, so
 * threads that outnumber the CPUs do not chase each other round them. */
static void move_off_cpu(int cpu) {
#if defined(__linux__)
    static _Thread_local uint64_t last_move;
    if (cpu < 0 || sched_getcpu() != cpu)
        return;
    uint64_t now = rt_clock__now_ns();
    if (last_move != 0 && now - last_move < MOVE_EVERY_NS)
        return;
    last_move = now;
    cpu_set_t allowed, others;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed))
        return;
    others = allowed;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) > 0 && sched_setaffinity(0, sizeof others, &others) == 0)
        sched_setaffinity(0, sizeof allowed, &allowed);
#else
    (void)cpu;
#endif
}

/* Join the job in `job` if it is open and wants help, work on it and leave; true when it did
 * any of that. The slot may change hands at any moment until `active` counts this worker in:
 * after that the caller cannot close it for good, so the job seen then is the one joined. */
static bool try_help(rt_job *job) {
    if (atomic_load(&job->state) != SLOT_OPEN)
        return false;
    unsigned seq = atomic_load(&job->seq);
    atomic_fetch_add(&job->active, 1);
    if (atomic_load(&job->state) != SLOT_OPEN || atomic_load(&job->seq) != seq ||
        atomic_fetch_add(&job->helpers, 1) >= job->max_helpers) {
        leave(job);
        return false;
    }
    move_off_cpu(job->caller_cpu);
    size_t ran = work_on(job);
    atomic_fetch_add(&job->done_chunks, ran);
    leave(job);
    return true;
}

/* Wait for `generation` to differ from `seen`: spin for SPIN_NS, then nap, until the worker
 * wait has passed; true when it changed. */
static bool wait_for_job(unsigned seen) {
    uint64_t start = rt_clock__now_ns();
    int64_t wait = atomic_load(&worker_wait_ns);
    uint64_t spin = wait < SPIN_NS ? (uint64_t)wait : SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&generation, memory_order_acquire) != seen)
            return true;
        cpu_relax();
        if (i % 64 == 0 && rt_clock__now_ns() - start >= spin)
            break;
        if (i % SPINS_PER_YIELD == 0)
            sched_yield();
    }
    while (rt_clock__now_ns() - start < (uint64_t)wait) {
        struct timespec nap = {0, NAP_NS};
        nanosleep(&nap, NULL);
        if (atomic_load_explicit(&generation, memory_order_acquire) != seen)
            return true;
    }
    return false;
}

static void *worker_main(void *arg) {
    (void)arg;
#if defined(__GLIBC__)
    pthread_setname_np(pthread_self(), "rt-worker"); /* in top -H, perf, /proc/.../comm */
#endif
    for (;;) {
        unsigned seen = atomic_load(&generation);
        bool helped = false;
        for (int i = 0; i < RT_MAX_JOBS; i++)
            helped |= try_help(&jobs[i]);
        if (helped || wait_for_job(seen))
            continue;
        pthread_mutex_lock(&pool.lock);
        atomic_fetch_add(&sleepers, 1);
        /* A job opened after `seen` bumped generation before it read `sleepers`. */
        if (atomic_load(&generation) == seen)
            pthread_cond_wait(&pool.work, &pool.lock);
        atomic_fetch_sub(&sleepers, 1);
        pthread_mutex_unlock(&pool.lock);
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
    pool.workers = 0;
    pool.started = false;
    atomic_store(&sleepers, 0);
    for (int i = 0; i < RT_MAX_JOBS; i++) {
        atomic_store(&jobs[i].state, SLOT_FREE);
        atomic_store(&jobs[i].active, 0);
    }
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
    pthread_mutex_lock(&pool.lock);
    if (!pool.started) {
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
    }
    bool any = pool.workers > 0;
    pthread_mutex_unlock(&pool.lock);
    return any;
}

static rt_job *claim_slot(void) {
    for (int i = 0; i < RT_MAX_JOBS; i++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&jobs[i].state, &expected, SLOT_SETUP))
            return &jobs[i];
    }
    return NULL;
}

void rt_parallel__for(int32_t threads, size_t n, size_t grain, rt_range_fn fn, void *ctx) {
    if (n == 0)
        return;
    if (grain == 0)
        grain = 1;
    size_t chunks = (n + grain - 1) / grain;
    size_t most = (size_t)threads * CHUNKS_PER_THREAD;
    if (threads > 1 && chunks > most)
        chunks = most;
    rt_job *job = NULL;
    if (threads > 1 && chunks > 1) {
        pthread_once(&atfork_once, install_fork_handlers);
        if (ensure_workers())
            job = claim_slot();
    }
    if (job == NULL) {
        fn(ctx, 0, n);
        return;
    }
    job->fn = fn;
    job->ctx = ctx;
    job->n = n;
    job->chunks = chunks;
    job->max_helpers = threads - 1;
#if defined(__linux__)
    job->caller_cpu = sched_getcpu();
#else
    job->caller_cpu = -1;
#endif
    atomic_store(&job->helpers, 0);
    atomic_store(&job->next_chunk, 0);
    atomic_store(&job->done_chunks, 0);
    atomic_store(&job->caller_sleeping, false);
    atomic_fetch_add(&job->seq, 1);
    atomic_store(&job->state, SLOT_OPEN);
    atomic_fetch_add(&generation, 1);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.work);
        pthread_mutex_unlock(&pool.lock);
        /* A worker woken onto this CPU runs at once, and moves off (move_off_cpu), where it
         * otherwise waited for the caller's time slice: the first call of such a turn above
         * took 4.3 ms, and 3.3 with the yield. */
        sched_yield();
    }

    atomic_fetch_add(&job->done_chunks, work_on(job));
    /* Every piece is claimed: no one new may join. Those inside finish what they took. */
    atomic_store(&job->state, SLOT_CLOSED);
    uint64_t start = rt_clock__now_ns();
    for (unsigned i = 1; !job_finished(job) && rt_clock__now_ns() - start < SPIN_NS; i++) {
        cpu_relax();
        if (i % (SPINS_PER_YIELD / 4) == 0) /* each step here reads the clock */
            sched_yield();
    }
    if (!job_finished(job)) {
        pthread_mutex_lock(&pool.lock);
        atomic_store(&job->caller_sleeping, true);
        while (!job_finished(job))
            pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    atomic_store(&job->state, SLOT_FREE);
}
