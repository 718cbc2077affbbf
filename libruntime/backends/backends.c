/* backends.c: the backends this build has, found by device type or name. */
#include <string.h>

#include "backend.h"

extern const rt_backend rt_backend__cpu, rt_backend__cuda;

static const rt_backend *const backends[] = {&rt_backend__cpu, &rt_backend__cuda};

#define BACKEND_COUNT (sizeof backends / sizeof backends[0])

const rt_backend *rt_backend__for_device(rt_device_type type) {
    for (size_t i = 0; i < BACKEND_COUNT; i++)
        if (backends[i]->device_type == type)
            return backends[i];
    return NULL;
}

const rt_backend *rt_backend__named(const char *name) {
    for (size_t i = 0; name != NULL && i < BACKEND_COUNT; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}
