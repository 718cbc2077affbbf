/* log.c: the log hook. The callback and its level are swapped under a lock so a callback
 * being removed is never called with stale user data. */
#include "core/log.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_log_fn log_fn;
static void *log_user;
static int32_t log_min_level = RT_LOG_WARNING;

RT_API void rt_set_log_callback(rt_log_fn fn, void *user, int32_t min_level) {
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    log_min_level = min_level;
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
    if (log_fn != NULL && level >= log_min_level)
        log_fn(log_user, level, message);
    pthread_mutex_unlock(&log_lock);
}
