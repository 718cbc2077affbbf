/* threadpool_stress.c: several threads run parallel loops at once, with random sizes, grains
 * and thread counts, some nesting a loop inside a piece; every index must run exactly once.
 * They run parallel runs (rt_parallel__runs) too, with items of uneven cost so that threads
 * take from each other's runs: every item must run exactly once, each call's items one after
 * another from the front, on a slot no other thread holds at the time; and each run's first item must go to a
 * range not stolen, which starts there (the thread holding it prepares what the run's items
 * share, once, and a thief of the run's back may wait for that).
 * Then a forked child, which inherits no workers, runs a loop of its own.
 *
 *   threadpool_stress ROUNDS [nofork]    (exit status 0 when every check held) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/threadpool.h"

#define CALLERS 4
#define MAX_N 5000

typedef struct loop {
    atomic_int *hits;
    int nest;
} loop;

static int rounds;

static void count(void *arg, size_t begin, size_t end) {
    loop *l = arg;
    for (size_t i = begin; i < end; i++)
        atomic_fetch_add(&l->hits[i], 1);
    if (l->nest && begin == 0) {
        atomic_int inner_hits[50] = {0};
        loop inner = {inner_hits, 0};
        rt_parallel__for(2, 50, 1, count, &inner);
        for (int i = 0; i < 50; i++)
            if (inner_hits[i] != 1) {
                fprintf(stderr, "nested loop: index %d ran %d times\n", i, inner_hits[i]);
                exit(1);
            }
    }
}

typedef struct runs_check {
    atomic_int *hits;
    atomic_int holders[64]; /* threads inside fn per slot */
    atomic_bool whole_start[64]; /* each run's first item ran in a range not stolen */
    size_t n;
    int32_t threads;
    atomic_int failed;
} runs_check;

static void fail_runs(runs_check *c, const char *what, size_t item) {
    if (atomic_exchange(&c->failed, 1) == 0)
        fprintf(stderr, "runs: %s (item %zu)\n", what, item);
}

static void work_run(void *arg, int32_t slot, rt_run *run) {
    runs_check *c = arg;
    if (slot < 0 || slot >= c->threads || atomic_fetch_add(&c->holders[slot], 1) != 0)
        fail_runs(c, "a slot held by two threads at once, or out of range", (size_t)slot);
    /* A thread slow to take its run's first item (descheduled, say): thieves come meanwhile. */
    if (!rt_run__stolen(run))
        for (volatile unsigned spin = 3000; spin > 0; spin--)
            ;
    size_t item, last = 0;
    bool first = true;
    while (rt_run__next(run, &item)) {
        /* A call's items come from its front: one after another, before the back. */
        if ((!first && item != last + 1) || rt_run__back(run) <= item)
            fail_runs(c, "an item out of order, or past the range's back", item);
        last = item;
        size_t runs = c->n < (size_t)c->threads ? c->n : (size_t)c->threads;
        size_t run_index = 0; /* the run the item was first handed out in */
        while (c->n * (run_index + 1) / runs <= item)
            run_index++;
        bool run_start = item == c->n * run_index / runs;
        if (!rt_run__stolen(run) && first && !run_start)
            fail_runs(c, "a range not stolen that does not start a run", item);
        if (run_start && !rt_run__stolen(run))
            atomic_store(&c->whole_start[run_index], true);
        first = false;
        atomic_fetch_add(&c->hits[item], 1);
        /* Uneven items: every seventh slow, so threads finish their runs at different times. */
        for (volatile unsigned spin = item % 7 == 0 ? 2000 : 10; spin > 0; spin--)
            ;
    }
    if (slot >= 0 && slot < c->threads)
        atomic_fetch_sub(&c->holders[slot], 1);
}

static void check_runs(atomic_int *hits, unsigned *seed, int r, size_t caller_id) {
    /* Often a few items, so that runs of one item, whose first item must stay, are common. */
    size_t n = (size_t)rand_r(seed) % (r % 2 ? MAX_N / 10 : 8);
    for (size_t i = 0; i < n; i++)
        atomic_init(&hits[i], 0);
    runs_check c = {.hits = hits, .n = n, .threads = 1 + rand_r(seed) % 3};
    rt_parallel__runs(c.threads, n, work_run, &c);
    if (c.failed)
        exit(1);
    for (size_t i = 0; i < (n < (size_t)c.threads ? n : (size_t)c.threads); i++)
        if (!c.whole_start[i]) {
            fprintf(stderr, "runs %d: run %zu's first item went to a stolen range\n", r, i);
            exit(1);
        }
    for (size_t i = 0; i < n; i++)
        if (hits[i] != 1) {
            fprintf(stderr, "runs %d of caller %zu: item %zu ran %d times\n", r, caller_id, i,
                    hits[i]);
            exit(1);
        }
}

static void *caller(void *arg) {
    unsigned seed = (unsigned)(size_t)arg;
    atomic_int *hits = malloc(sizeof(atomic_int) * MAX_N);
    for (int r = 0; r < rounds; r++) {
        size_t n = (size_t)rand_r(&seed) % MAX_N;
        for (size_t i = 0; i < n; i++)
            atomic_init(&hits[i], 0);
        loop l = {hits, r % 97 == 0};
        rt_parallel__for(1 + rand_r(&seed) % 3, n, 1 + (size_t)rand_r(&seed) % 50, count, &l);
        for (size_t i = 0; i < n; i++)
            if (hits[i] != 1) {
                fprintf(stderr, "loop %d of caller %zu: index %zu ran %d times\n", r,
                        (size_t)arg, i, hits[i]);
                exit(1);
            }
        check_runs(hits, &seed, r, (size_t)arg);
    }
    free(hits);
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 1000;
    pthread_t threads[CALLERS];
    for (size_t i = 0; i < CALLERS; i++)
        pthread_create(&threads[i], NULL, caller, (void *)(i + 1));
    for (int i = 0; i < CALLERS; i++)
        pthread_join(threads[i], NULL);
    if (argc > 2 && strcmp(argv[2], "nofork") == 0) {
        puts("ok");
        return 0;
    }
    pid_t child = fork();
    if (child == 0) {
        atomic_int hits[100] = {0};
        loop l = {hits, 0};
        rt_parallel__for(2, 100, 1, count, &l);
        for (int i = 0; i < 100; i++)
            if (hits[i] != 1)
                _exit(1);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "the forked child's loop failed\n");
        return 1;
    }
    puts("ok");
    return 0;
}
