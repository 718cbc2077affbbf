/* error.c: the thread-local last-error message. A fixed buffer per thread, so recording an
 * error never allocates and cannot fail. */
#include "core/error.h"

#include <stdio.h>
#include <string.h>

#define RT_ERROR_CAPACITY 2048

static _Thread_local char last_error[RT_ERROR_CAPACITY];

rt_status rt_error__vset(rt_status code, const char *fmt, va_list args) {
    vsnprintf(last_error, sizeof last_error, fmt, args);
    return code;
}

rt_status rt_error__set(rt_status code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    rt_error__vset(code, fmt, args);
    va_end(args);
    return code;
}

void rt_error__prefix(const char *fmt, ...) {
    char prefix[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, args);
    va_end(args);
    /* Shift the message right (cutting its tail if needed), then write the prefix. */
    size_t n = strlen(prefix);
    size_t old = strlen(last_error);
    if (n + old >= sizeof last_error)
        old = sizeof last_error - 1 - n;
    memmove(last_error + n, last_error, old);
    memcpy(last_error, prefix, n);
    last_error[n + old] = '\0';
}

void rt_error__clear(void) { last_error[0] = '\0'; }

rt_status rt_error__oom(const char *what) {
    snprintf(last_error, sizeof last_error, "out of memory: %s", what);
    return RT_OUT_OF_MEMORY;
}

RT_API const char *rt_last_error(void) { return last_error; }

RT_API const char *rt_status_string(rt_status status) {
    switch (status) {
    case RT_OK: return "ok";
    case RT_INVALID_ARGUMENT: return "invalid argument";
    case RT_INVALID_STATE: return "invalid state";
    case RT_INVALID_PROGRAM: return "invalid program";
    case RT_NOT_FOUND: return "not found";
    case RT_UNSUPPORTED: return "unsupported";
    case RT_OUT_OF_MEMORY: return "out of memory";
    case RT_IO_ERROR: return "i/o error";
    case RT_INTERNAL: return "internal error";
    }
    return "unknown status";
}
