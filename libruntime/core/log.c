/* log.c: the log hook. The callback is called without the lock held, so it may log, load a
 * program or replace itself; rt_set_log_callback waits for other threads' calls of the old
 * callback, so once it returns the old user data is not used again. */
#include "core/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_idle = PTHREAD_COND_INITIALIZER;
static rt_log_fn log_fn;
static void *log_user;
static int32_t log_min_level = RT_LOG_WARNING;
static int calls_running;            /* callbacks running now, in every thread */
static _Thread_local int calls_here; /* those of this thread (nested when a callback logs) */

RT_API void rt_set_log_callback(rt_log_fn fn, void *user, int32_t min_level) {
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    log_min_level = min_level;
    /* A thread inside a callback does not wait (two callbacks replacing the hook at once
     * would wait for each other); any other waits for the calls already under way. */
    while (calls_here == 0 && calls_running > 0)
        pthread_cond_wait(&log_idle, &log_lock);
    pthread_mutex_unlock(&log_lock);
}

int rt_log__enabled(int32_t level) {
    pthread_mutex_lock(&log_lock);
    int enabled = log_fn != NULL && level >= log_min_level;
    pthread_mutex_unlock(&log_lock);
    return enabled;
}

void rt_log__write(int32_t level, const char *fmt, ...) {
    if (!rt_log__enabled(level))
        return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    pthread_mutex_lock(&log_lock);
    rt_log_fn fn = log_fn;
    void *user = log_user;
    bool call = fn != NULL && level >= log_min_level;
    if (call) {
        calls_running++;
        calls_here++;
    }
    pthread_mutex_unlock(&log_lock);
    if (!call)
        return;
    fn(user, level, message);
    pthread_mutex_lock(&log_lock);
    calls_running--;
    calls_here--;
    pthread_cond_broadcast(&log_idle);
    pthread_mutex_unlock(&log_lock);
}
