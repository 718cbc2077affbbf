/* threadpool_placement.c: a worker that joins a loop on its caller's CPU moves to another CPU
 * it is allowed, and keeps every CPU it was allowed.
 *
 * The process is held to two CPUs, A and B. The caller runs on A; a busy thread holds B, so
 * nothing but the pool moves the worker off A, where each round puts it by hand (allowed A
 * alone, then both again) while it naps between loops (or, with "sleep", while it sleeps
 * until woken). Each round's loop records the CPU of the first piece the worker runs: it must
 * be B, and the worker must be allowed both CPUs after.
 *
 *   threadpool_placement [sleep]   (prints "ok", or "skip: ..." with fewer than 2 CPUs) */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/threadpool.h"
#include "runtime.h"

#define ROUNDS 8

static pthread_t caller;
static atomic_int worker_first_cpu;
static atomic_bool hog_running = true;

static void busy_ms(double ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < ms);
}

/* A piece: note the CPU of the worker's first, then keep the CPU busy for a while, so the
 * loop outlasts the time slice a worker sharing the caller's CPU waits for. */
static void piece(void *arg, size_t begin, size_t end) {
    (void)arg;
    if (!pthread_equal(pthread_self(), caller)) {
        int none = -1;
        atomic_compare_exchange_strong(&worker_first_cpu, &none, sched_getcpu());
    }
    busy_ms(2.0 * (double)(end - begin));
}

static void *hog(void *arg) {
    cpu_set_t *on = arg;
    pthread_setaffinity_np(pthread_self(), sizeof *on, on);
    while (atomic_load(&hog_running))
        ;
    return NULL;
}

/* The pool's workers (named rt-worker), up to `most`. */
static int workers(pid_t *tids, int most) {
    int n = 0;
    DIR *dir = opendir("/proc/self/task");
    for (struct dirent *e; dir != NULL && n < most && (e = readdir(dir)) != NULL;) {
        char path[300], name[32] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(name, sizeof name, f) != NULL && strncmp(name, "rt-worker", 9) == 0)
            tids[n++] = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    if (dir != NULL)
        closedir(dir);
    return n;
}

int main(int argc, char **argv) {
    bool sleep_between = argc > 1 && strcmp(argv[1], "sleep") == 0;
    cpu_set_t allowed, both, only_a, only_b;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int a = -1, b = -1;
    for (int c = 0; c < CPU_SETSIZE && b < 0; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        if (a < 0)
            a = c;
        else
            b = c;
    }
    if (b < 0) {
        printf("skip: fewer than 2 CPUs allowed\n");
        return 0;
    }
    CPU_ZERO(&both);
    CPU_SET(a, &both);
    CPU_SET(b, &both);
    CPU_ZERO(&only_a);
    CPU_SET(a, &only_a);
    CPU_ZERO(&only_b);
    CPU_SET(b, &only_b);
    sched_setaffinity(0, sizeof both, &both); /* the workers, started next, inherit it */
    caller = pthread_self();
    rt_set_worker_wait_us(sleep_between ? 0 : 30000000);
    rt_parallel__for(2, 8, 1, piece, NULL);
    pid_t tids[64];
    int n = workers(tids, 64);
    if (n == 0) {
        fprintf(stderr, "no worker threads\n");
        return 1;
    }
    sched_setaffinity(0, sizeof only_a, &only_a);
    pthread_t hog_thread;
    pthread_create(&hog_thread, NULL, hog, &only_b);
    int failures = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < n; i++) {
            sched_setaffinity(tids[i], sizeof only_a, &only_a);
            sched_setaffinity(tids[i], sizeof both, &both);
        }
        usleep(20000); /* past the pool's limit of one move per 10 ms */
        atomic_store(&worker_first_cpu, -1);
        rt_parallel__for(2, 8, 1, piece, NULL);
        int first = atomic_load(&worker_first_cpu);
        if (first != b) {
            fprintf(stderr, "round %d: the worker's first piece ran on CPU %d, not %d\n", round,
                    first, b);
            failures++;
        }
        for (int i = 0; i < n; i++) {
            cpu_set_t now;
            sched_getaffinity(tids[i], sizeof now, &now);
            if (!CPU_EQUAL(&now, &both)) {
                fprintf(stderr, "round %d: a worker is no longer allowed both CPUs\n", round);
                failures++;
            }
        }
    }
    atomic_store(&hog_running, false);
    pthread_join(hog_thread, NULL);
    if (failures > 0)
        return 1;
    printf("ok\n");
    return 0;
}
