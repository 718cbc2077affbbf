/* log.h: forwards messages to the callback installed with rt_set_log_callback. */
#ifndef RT_CORE_LOG_H
#define RT_CORE_LOG_H

#include "core/error.h"

void rt_log__write(int32_t level, const char *fmt, ...) RT_PRINTF(2, 3);
int rt_log__enabled(int32_t level);

#endif
