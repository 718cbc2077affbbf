/* device.c: per-device setup (primary context, module, kernel functions) and launches. */
#include "backends/cuda/device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define RT_CUDA_MAX_DEVICES 64

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_cuda_device *devices[RT_CUDA_MAX_DEVICES];

static const char *const kernel_names[RT_CUDA_KERNEL_COUNT] = {
#define RT_CUDA_KERNEL(name) "rt_k_" #name,
#include "backends/cuda/kernels/kernels.inc"
#undef RT_CUDA_KERNEL
};

/* Called with devices_lock held; on failure nothing is kept but the retained context, which
 * is released again. */
static rt_status set_up(rt_cuda_device *d) {
    const rt_cuda_driver *cu = d->cu;
    char what[192];
    snprintf(what, sizeof what, "cuda:%d: cuDeviceGet", d->ordinal);
    RT_RETURN_IF_ERROR(rt_cuda__check(cu->device_get(&d->device, d->ordinal), what));
    snprintf(what, sizeof what, "cuda:%d: retaining the primary context", d->ordinal);
    RT_RETURN_IF_ERROR(rt_cuda__check(cu->primary_ctx_retain(&d->context, d->device), what));
    rt_status status = rt_cuda__push(d);
    if (status == RT_OK) {
        size_t size;
        const void *image = rt_cuda__fatbin(&size);
        snprintf(what, sizeof what, "cuda:%d: loading the kernel module (the fatbinary has "
                 "code for sm_80, sm_90 and PTX for compute_90)", d->ordinal);
        status = rt_cuda__check(cu->module_load_data(&d->module, image), what);
        for (int k = 0; k < RT_CUDA_KERNEL_COUNT && status == RT_OK; k++) {
            snprintf(what, sizeof what, "cuda:%d: kernel %s", d->ordinal, kernel_names[k]);
            status = rt_cuda__check(cu->module_get_function(&d->kernels[k], d->module,
                                                            kernel_names[k]), what);
        }
        rt_cuda__pop(d);
    }
    if (status != RT_OK)
        cu->primary_ctx_release(d->device);
    return status;
}

rt_status rt_cuda__device(rt_cuda_device **out, int32_t ordinal) {
    *out = NULL;
    const rt_cuda_driver *cu;
    RT_RETURN_IF_ERROR(rt_cuda__driver(&cu));
    if (ordinal < 0 || ordinal >= cu->device_count || ordinal >= RT_CUDA_MAX_DEVICES)
        return rt_error__set(RT_UNSUPPORTED, "there is no CUDA device %d (this machine has %d)",
                             ordinal, cu->device_count);
    rt_status status = RT_OK;
    pthread_mutex_lock(&devices_lock);
    if (devices[ordinal] == NULL) {
        rt_cuda_device *d = calloc(1, sizeof *d);
        if (d == NULL) {
            status = rt_error__oom("CUDA device state");
        } else {
            d->cu = cu;
            d->ordinal = ordinal;
            status = set_up(d);
            if (status == RT_OK)
                devices[ordinal] = d;
            else
                free(d);
        }
    }
    *out = devices[ordinal];
    pthread_mutex_unlock(&devices_lock);
    return status;
}

rt_status rt_cuda__push(const rt_cuda_device *d) {
    return rt_cuda__check(d->cu->ctx_push(d->context), "making the CUDA context current");
}

void rt_cuda__pop(const rt_cuda_device *d) {
    CUcontext popped;
    d->cu->ctx_pop(&popped);
}

rt_status rt_cuda__launch(const rt_cuda_device *d, CUstream stream, rt_cuda_kernel kernel,
                          unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block,
                          void *params, const char *what) {
    void *args[1] = {params};
    if (grid_x == 0 || grid_y == 0 || grid_z == 0)
        return RT_OK;
    return rt_cuda__check(d->cu->launch_kernel(d->kernels[kernel], grid_x, grid_y, grid_z,
                                               block, 1, 1, 0, stream, args, NULL),
                          what);
}

unsigned rt_cuda__blocks(int64_t n, unsigned block) {
    int64_t blocks = (n + block - 1) / block;
    /* Kernels stride over the rest; enough blocks to fill any current GPU many times. */
    const int64_t most = 65535 * 8;
    return (unsigned)(blocks < 1 ? 1 : blocks > most ? most : blocks);
}
