/* driver.c: dlopen of libcuda.so.1, the symbol table, cuInit, and CUresult to status. */
#include "backends/cuda/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_ERROR_OUT_OF_MEMORY 2

static rt_cuda_driver driver;
static char unavailable[512]; /* "" once loaded; written only inside the once routine */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void set_unavailable(const char *fmt, const char *detail) {
    snprintf(unavailable, sizeof unavailable, fmt, detail);
}

static void load_driver(void) {
    size_t fatbin_size = 0;
    rt_cuda__fatbin(&fatbin_size);
    if (fatbin_size == 0) {
        set_unavailable("%sthis build of libruntime has no CUDA kernels (nvcc was not found "
                        "when it was built)", "");
        return;
    }
    /* An environment variable names another driver library (tests, unusual installs). */
    const char *path = getenv("RT_CUDA_DRIVER");
    if (path == NULL || path[0] == '\0')
        path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        set_unavailable("the NVIDIA driver library could not be loaded (%s)",
                        why ? why : path);
        return;
    }
#define RT_CUDA_RESOLVE(symbol, field, ret, params)                                         \
    *(void **)(&driver.field) = dlsym(lib, symbol);                                         \
    if (driver.field == NULL) {                                                             \
        set_unavailable("the NVIDIA driver library lacks %s (driver too old?)", symbol);    \
        return;                                                                             \
    }
    RT_CUDA_DRIVER_FUNCTIONS(RT_CUDA_RESOLVE)
#undef RT_CUDA_RESOLVE
    CUresult r = driver.init(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        if (driver.get_error_name(r, &name) != CUDA_SUCCESS || name == NULL)
            name = "unknown error";
        set_unavailable("cuInit failed: %s", name);
        return;
    }
    int count = 0;
    r = driver.device_get_count(&count);
    if (r != CUDA_SUCCESS || count <= 0) {
        set_unavailable("%sthe NVIDIA driver reports no CUDA device", "");
        return;
    }
    driver.device_count = count;
    unavailable[0] = '\0';
    /* The library stays loaded for the life of the process: kernels and contexts use it. */
}

static void ensure_loaded(void) {
    /* Set before the once routine runs, so a reader never sees an empty, unloaded state. */
    pthread_once(&load_once, load_driver);
}

rt_status rt_cuda__driver(const rt_cuda_driver **out) {
    ensure_loaded();
    if (driver.device_count <= 0) {
        *out = NULL;
        return rt_error__set(RT_UNSUPPORTED, "the CUDA backend is not available: %s",
                             unavailable);
    }
    *out = &driver;
    return RT_OK;
}

const char *rt_cuda__unavailable_reason(void) {
    ensure_loaded();
    return driver.device_count > 0 ? "" : unavailable;
}

rt_status rt_cuda__check(CUresult result, const char *what) {
    if (result == CUDA_SUCCESS)
        return RT_OK;
    const char *name = NULL, *text = NULL;
    if (driver.get_error_name == NULL || driver.get_error_name(result, &name) != CUDA_SUCCESS ||
        name == NULL)
        name = "CUDA error";
    if (driver.get_error_string == NULL ||
        driver.get_error_string(result, &text) != CUDA_SUCCESS || text == NULL)
        text = "no description";
    rt_status code = result == CUDA_ERROR_OUT_OF_MEMORY ? RT_OUT_OF_MEMORY : RT_INTERNAL;
    return rt_error__set(code, "%s: %s (%d): %s", what, name, result, text);
}
