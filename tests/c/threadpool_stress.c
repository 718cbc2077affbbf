/* threadpool_stress.c: several threads run parallel loops at once, with random sizes, grains
 * and thread counts, some nesting a loop inside a piece; every index must run exactly once.
 * Then a forked child, which inherits no workers, runs a loop of its own.
 *
 *   threadpool_stress ROUNDS [nofork]    (exit status 0 when every check held) */
#include <pthread.h>
#include <stdatomic.h>
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
        rt_parallel_for(2, 50, 1, count, &inner);
        for (int i = 0; i < 50; i++)
            if (inner_hits[i] != 1) {
                fprintf(stderr, "nested loop: index %d ran %d times\n", i, inner_hits[i]);
                exit(1);
            }
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
        rt_parallel_for(1 + rand_r(&seed) % 3, n, 1 + (size_t)rand_r(&seed) % 50, count, &l);
        for (size_t i = 0; i < n; i++)
            if (hits[i] != 1) {
                fprintf(stderr, "loop %d of caller %zu: index %zu ran %d times\n", r,
                        (size_t)arg, i, hits[i]);
                exit(1);
            }
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
        rt_parallel_for(2, 100, 1, count, &l);
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
