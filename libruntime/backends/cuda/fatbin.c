/* fatbin_none.c: a build without nvcc has no CUDA kernels; the backend then says so. */
#include "backends/cuda/driver.h"

#ifndef RT_HAVE_CUDA_KERNELS
const void *rt_cuda__fatbin(size_t *size) {
    *size = 0;
    return NULL;
}
#else
/* fatbin.S defines the embedded image between these two labels. */
extern const unsigned char rt_cuda__fatbin_start[];
extern const unsigned char rt_cuda__fatbin_end[];

const void *rt_cuda__fatbin(size_t *size) {
    *size = (size_t)(rt_cuda__fatbin_end - rt_cuda__fatbin_start);
    return rt_cuda__fatbin_start;
}
#endif
