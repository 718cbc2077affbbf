/* error.h: the thread-local last-error message and the status helpers every module uses. */
#ifndef RT_CORE_ERROR_H
#define RT_CORE_ERROR_H

#include <stdarg.h>

#include "runtime.h"

#if defined(__GNUC__)
#define RT_PRINTF(fmt_index, args_index) __attribute__((format(printf, fmt_index, args_index)))
#else
#define RT_PRINTF(fmt_index, args_index)
#endif

/* Record `code` with a formatted message as this thread's last error; returns `code`. */
rt_status rt_error__set(rt_status code, const char *fmt, ...) RT_PRINTF(2, 3);
rt_status rt_error__vset(rt_status code, const char *fmt, va_list args);
/* Put `prefix` (e.g. "method 'forward': ") in front of the current message. */
void rt_error__prefix(const char *fmt, ...) RT_PRINTF(1, 2);
void rt_error__clear(void);
/* Allocation failure: a static message, so it works when nothing else can be allocated. */
rt_status rt_error__oom(const char *what);

#define RT_RETURN_IF_ERROR(expr)             \
    do {                                     \
        rt_status rt__status = (expr);       \
        if (rt__status != RT_OK)             \
            return rt__status;               \
    } while (0)

#endif
