/* driver.h: the CUDA driver API, loaded with dlopen("libcuda.so.1") at first use.
 *
 * No CUDA header is needed to build this: the few types and constants we use are declared here
 * with the driver's ABI (CUresult is an int, handles are pointers, device pointers 64-bit). The
 * entry points come from one X-macro list, resolved by their versioned symbol names (the names
 * cuda.h maps the plain ones to), so the library links nothing of CUDA's. */
#ifndef RT_CUDA_DRIVER_H
#define RT_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2

/* X(symbol name, field, return type, parameters) */
#define RT_CUDA_DRIVER_FUNCTIONS(X)                                                          \
    X("cuInit", init, CUresult, (unsigned int flags))                                        \
    X("cuDriverGetVersion", driver_get_version, CUresult, (int *version))                    \
    X("cuGetErrorString", get_error_string, CUresult, (CUresult error, const char **text))   \
    X("cuGetErrorName", get_error_name, CUresult, (CUresult error, const char **text))       \
    X("cuDeviceGetCount", device_get_count, CUresult, (int *count))                          \
    X("cuDeviceGet", device_get, CUresult, (CUdevice *device, int ordinal))                  \
    X("cuDeviceGetAttribute", device_get_attribute, CUresult,                                \
      (int *value, int attribute, CUdevice device))                                          \
    X("cuDeviceGetName", device_get_name, CUresult, (char *name, int len, CUdevice device))  \
    X("cuDevicePrimaryCtxRetain", primary_ctx_retain, CUresult,                              \
      (CUcontext *ctx, CUdevice device))                                                     \
    X("cuDevicePrimaryCtxRelease_v2", primary_ctx_release, CUresult, (CUdevice device))      \
    X("cuCtxPushCurrent_v2", ctx_push, CUresult, (CUcontext ctx))                            \
    X("cuCtxPopCurrent_v2", ctx_pop, CUresult, (CUcontext *ctx))                             \
    X("cuMemAlloc_v2", mem_alloc, CUresult, (CUdeviceptr *ptr, size_t bytes))                \
    X("cuMemFree_v2", mem_free, CUresult, (CUdeviceptr ptr))                                 \
    X("cuMemcpyHtoDAsync_v2", memcpy_htod_async, CUresult,                                   \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                     \
    X("cuMemcpyDtoHAsync_v2", memcpy_dtoh_async, CUresult,                                   \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                           \
    X("cuMemcpyDtoDAsync_v2", memcpy_dtod_async, CUresult,                                   \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                     \
    X("cuMemsetD8Async", memset_d8_async, CUresult,                                          \
      (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream))                 \
    X("cuStreamCreate", stream_create, CUresult, (CUstream *stream, unsigned int flags))     \
    X("cuStreamSynchronize", stream_synchronize, CUresult, (CUstream stream))                \
    X("cuStreamDestroy_v2", stream_destroy, CUresult, (CUstream stream))                     \
    X("cuCtxSynchronize", ctx_synchronize, CUresult, (void))                                 \
    X("cuModuleLoadData", module_load_data, CUresult, (CUmodule *module, const void *image)) \
    X("cuModuleGetFunction", module_get_function, CUresult,                                  \
      (CUfunction *function, CUmodule module, const char *name))                             \
    X("cuLaunchKernel", launch_kernel, CUresult,                                             \
      (CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
       unsigned int block_x, unsigned int block_y, unsigned int block_z,                     \
       unsigned int shared_bytes, CUstream stream, void **params, void **extra))             \
    X("cuPointerGetAttribute", pointer_get_attribute, CUresult,                              \
      (void *data, int attribute, CUdeviceptr ptr))

typedef struct rt_cuda_driver {
#define RT_CUDA_DRIVER_FIELD(symbol, field, ret, params) ret (*field) params;
    RT_CUDA_DRIVER_FUNCTIONS(RT_CUDA_DRIVER_FIELD)
#undef RT_CUDA_DRIVER_FIELD
    int device_count;
} rt_cuda_driver;

/* The driver, loaded and initialised once per process (thread-safe). On failure returns
 * RT_UNSUPPORTED with the reason (no libcuda.so.1, a missing symbol, cuInit's error, no
 * device, or a build without CUDA kernels) as the last error, every time it is asked. */
rt_status rt_cuda__driver(const rt_cuda_driver **out);

/* "" when the CUDA backend can run, else why not (static storage). */
const char *rt_cuda__unavailable_reason(void);

/* Turn a CUresult into a status with "<what>: <driver error name>: <text>" as the message;
 * RT_OK for CUDA_SUCCESS. Out-of-memory errors map to RT_OUT_OF_MEMORY. */
rt_status rt_cuda__check(CUresult result, const char *what);

/* The embedded fatbinary (empty when the build had no nvcc). */
const void *rt_cuda__fatbin(size_t *size);

#endif
