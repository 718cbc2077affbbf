/* library.c: versions, the op list, and backend availability. */
#include "backend.h"
#include "ops/op.h"

#define RT_VERSION_STRING "0.1.0"

RT_API uint32_t rt_abi_version(void) { return RT_ABI_VERSION; }

RT_API const char *rt_version_string(void) { return RT_VERSION_STRING; }

RT_API size_t rt_op_count(void) { return rt_ops__count(); }

RT_API const char *rt_op_name(size_t index) {
    const rt_op_def *op = rt_ops__at(index);
    return op != NULL ? op->name : NULL;
}

RT_API int32_t rt_backend_available(const char *name) {
    return rt_backend_unavailable_reason(name)[0] == '\0';
}

RT_API const char *rt_backend_unavailable_reason(const char *name) {
    if (name == NULL)
        return "no backend name was given";
    const rt_backend *backend = rt_backend__named(name);
    if (backend == NULL)
        return "there is no backend of that name (the backends are \"cpu\" and \"cuda\")";
    return backend->unavailable_reason();
}
