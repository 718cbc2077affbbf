/* device.h: one CUDA device as the runtime uses it: its primary context (shared with torch,
 * cupy and any other user of the runtime API in the process), the embedded kernel module and
 * its functions. Devices are set up once, at first use, and kept for the life of the process. */
#ifndef RT_CUDA_DEVICE_H
#define RT_CUDA_DEVICE_H

#include "backends/cuda/driver.h"

typedef enum rt_cuda_kernel {
#define RT_CUDA_KERNEL(name) RT_CUDA_K_##name,
#include "backends/cuda/kernels/kernels.inc"
#undef RT_CUDA_KERNEL
    RT_CUDA_KERNEL_COUNT
} rt_cuda_kernel;

typedef struct rt_cuda_device {
    const rt_cuda_driver *cu;
    int32_t ordinal;
    CUdevice device;
    CUcontext context; /* the primary context, retained once */
    CUmodule module;
    CUfunction kernels[RT_CUDA_KERNEL_COUNT];
} rt_cuda_device;

/* Device `ordinal`, set up on first use (thread-safe). Fails with RT_UNSUPPORTED naming why:
 * the backend is unavailable, or there is no such device. */
rt_status rt_cuda__device(rt_cuda_device **out, int32_t ordinal);

/* Make the device's context current on this thread for the calls between push and pop. */
rt_status rt_cuda__push(const rt_cuda_device *d);
void rt_cuda__pop(const rt_cuda_device *d);

/* Launch `kernel` with one by-value parameter block; `what` names the work in errors. */
rt_status rt_cuda__launch(const rt_cuda_device *d, CUstream stream, rt_cuda_kernel kernel,
                          unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block,
                          void *params, const char *what);

/* Blocks of `block` threads covering n items, capped (kernels loop with a grid stride). */
unsigned rt_cuda__blocks(int64_t n, unsigned block);

#endif
