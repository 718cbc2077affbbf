/* clock.h: the monotonic clock used by the profiler. */
#ifndef RT_CORE_CLOCK_H
#define RT_CORE_CLOCK_H

#include <stdint.h>

uint64_t rt_clock__now_ns(void);

#endif
