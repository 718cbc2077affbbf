/* method_destroy_race.c: rt_method_destroy while another thread is executing the method. The
 * execute must finish and the method be freed as that call returns, never
 * under it: built with AddressSanitizer where the compiler has it, a use after free fails the
 * run. Usage: method_destroy_race PROGRAM ROUNDS, PROGRAM being tests/programs.py's counted
 * loop, forward(x: float32[64], n: int64[1]) = (x ** (n + 1), n). Prints "ok". */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime.h"

typedef struct job {
    rt_method *method;
    rt_status status;
    char message[512]; /* the thread's rt_last_error() (thread-local) when status is not OK */
    atomic_int done;   /* the thread's calls are over */
} job;

/* Inputs are bound before the thread starts (by main): the thread makes one call, so a
 * destroy racing it can only race that call. */
static rt_status bind(rt_method *method) {
    static float x[64];
    static int64_t n = 100000, x_sizes[1] = {64}, n_sizes[1] = {1};
    for (int i = 0; i < 64; i++)
        x[i] = 1.0f;
    rt_tensor tx = {x, {RT_DEVICE_CPU, 0}, 1, {RT_DTYPE_FLOAT, 32, 1}, x_sizes, NULL};
    rt_tensor tn = {&n, {RT_DEVICE_CPU, 0}, 1, {RT_DTYPE_INT, 64, 1}, n_sizes, NULL};
    rt_status status = rt_method_set_input(method, 0, &tx, 0);
    return status == RT_OK ? rt_method_set_input(method, 1, &tn, 0) : status;
}

static void *execute(void *arg) {
    job *j = arg;
    /* main's busy probe may hold the method at the moment the call starts: that call gets
     * RT_INVALID_STATE without running, and is made again (main destroys only once it has
     * seen a call under way, or this thread done). */
    for (long tries = 0; tries < 1000000; tries++) {
        j->status = rt_method_execute(j->method);
        if (j->status != RT_INVALID_STATE)
            break;
        sched_yield();
    }
    if (j->status != RT_OK)
        snprintf(j->message, sizeof j->message, "%s", rt_last_error());
    /* The method may be gone now: nothing of it is touched after execute returns. */
    atomic_store(&j->done, 1);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PROGRAM ROUNDS\n", argv[0]);
        return 2;
    }
    rt_program *program;
    if (rt_program_load_file(&program, argv[1], 0) != RT_OK) {
        fprintf(stderr, "load: %s\n", rt_last_error());
        return 1;
    }
    int rounds = atoi(argv[2]), raced = 0;
    for (int r = 0; r < rounds; r++) {
        job j = {NULL, RT_OK, "", 0};
        if (rt_method_load(&j.method, program, "forward", NULL) != RT_OK) {
            fprintf(stderr, "load_method: %s\n", rt_last_error());
            return 1;
        }
        if (bind(j.method) != RT_OK) {
            fprintf(stderr, "set_input: %s\n", rt_last_error());
            return 1;
        }
        pthread_t thread;
        pthread_create(&thread, NULL, execute, &j);
        /* Destroy only once a call is under way (a probe that changes nothing gets
         * RT_INVALID_STATE while the method is busy, RT_NOT_FOUND while it is idle): a
         * destroy before the thread's first call would make that call the caller's use
         * after free, which no library can prevent. */
        rt_tensor attribute;
        bool busy = false;
        while (!busy && !atomic_load(&j.done)) { /* a loaded machine may finish it first */
            busy = rt_method_attribute(&attribute, j.method, "no such attribute") ==
                   RT_INVALID_STATE;
            sched_yield();
        }
        struct timespec pause = {0, (long)(r % 5) * 100000L}; /* 0 to 0.4 ms into the call */
        nanosleep(&pause, NULL);
        rt_method_destroy(j.method);
        pthread_join(thread, NULL);
        raced += j.status == RT_OK;
        if (j.status != RT_OK) {
            fprintf(stderr, "round %d: status %d: %s\n", r, j.status, j.message);
            return 1;
        }
    }
    rt_program_release(program);
    printf("ok\n");
    fprintf(stderr, "%d executes finished after their method was destroyed\n", raced);
    return 0;
}
