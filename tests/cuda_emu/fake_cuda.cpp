// fake_cuda.cpp: a stand-in for libcuda.so.1 that runs the backend's real kernels on the CPU,
// so the CUDA backend's host code and kernels are tested on machines without a GPU.
//
// Device memory is host memory that the host can touch only while a driver call runs (a launch,
// a copy, a memset): between calls it is mapped PROT_NONE, so host code that reads a device
// pointer faults here as it would on a GPU. Streams run work at once; a launch runs every block in turn,
// each block as blockDim.x threads: in turn for kernels without __syncthreads, as coroutines
// (ucontext) that switch at every __syncthreads for the others. The kernel sources are compiled here for the host by turning the CUDA keywords
// into C++. Load it with RT_CUDA_DRIVER=/path/libfakecuda.so. One device, compute capability 9.0.
#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <math.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

struct emu_dim3 {
    unsigned x, y, z;
};
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

// The coroutines of one block: __syncthreads returns to the scheduler, which resumes the
// threads in turn; every kernel here reaches its barriers uniformly.
static ucontext_t scheduler;
static ucontext_t thread_context[1024];
static bool thread_done[1024];
static unsigned current_thread;

#undef __global__
#undef __shared__
#define __global__
#define __shared__ static
#define __launch_bounds__(n)
// The rounding intrinsics kernels use to keep a product and a sum from fusing into an fma
// (the host compiler does not contract across them either at -std=c++17).
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline void __syncthreads() {
    swapcontext(&thread_context[current_thread], &scheduler);
}

#include "../../libruntime/backends/cuda/kernels/attention.cu"
#include "../../libruntime/backends/cuda/kernels/conv_pool.cu"
#include "../../libruntime/backends/cuda/kernels/detection.cu"
#include "../../libruntime/backends/cuda/kernels/elementwise.cu"
#include "../../libruntime/backends/cuda/kernels/gemm.cu"
#include "../../libruntime/backends/cuda/kernels/generate.cu"
#include "../../libruntime/backends/cuda/kernels/movement.cu"
#include "../../libruntime/backends/cuda/kernels/non_zero.cu"
#include "../../libruntime/backends/cuda/kernels/norm.cu"
#include "../../libruntime/backends/cuda/kernels/quant.cu"
#include "../../libruntime/backends/cuda/kernels/reduce.cu"
#include "../../libruntime/backends/cuda/kernels/resize.cu"
#include "../../libruntime/backends/cuda/kernels/rnn.cu"
#include "../../libruntime/backends/cuda/kernels/scan.cu"
#include "../../libruntime/backends/cuda/kernels/unique.cu"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

namespace {

struct kernel_entry {
    void (*call)(void *fn, void *params);
    void *fn;
    bool needs_sync;
};

template <typename P>
void call_with(void *fn, void *params) {
    reinterpret_cast<void (*)(P)>(fn)(*static_cast<P *>(params));
}

template <typename P>
kernel_entry entry(void (*fn)(P), bool needs_sync) {
    return kernel_entry{call_with<P>, reinterpret_cast<void *>(fn), needs_sync};
}

std::map<std::string, kernel_entry> &kernels() {
    static std::map<std::string, kernel_entry> table = [] {
        std::map<std::string, kernel_entry> t;
#define RT_CUDA_KERNEL(name)                                                                  \
    t["rt_k_" #name] = entry(rt_k_##name, std::string(#name).find("softmax") == 0 ||         \
                                              std::string(#name).find("layer_norm") == 0 ||  \
                                              std::string(#name).find("rms_norm") == 0 ||    \
                                              std::string(#name).find("attention") == 0 ||   \
                                              std::string(#name).find("channel_norm") == 0 ||\
                                              std::string(#name).find("gemm") == 0 ||        \
                                              std::string(#name).find("reduce") == 0 ||      \
                                              std::string(#name).find("arg_") == 0 ||        \
                                              std::string(#name).find("non_zero") == 0 ||    \
                                              std::string(#name) == "nms" ||                 \
                                              std::string(#name).find("avg_pool2d_wide") == 0 ||\
                                              std::string(#name).find("quant_range") == 0);
#include "../../libruntime/backends/cuda/kernels/kernels.inc"
#undef RT_CUDA_KERNEL
        return t;
    }();
    return table;
}

std::mutex lock;
std::map<uintptr_t, size_t> allocations; // start -> size
int context_depth = 0;           // a handle to hand out as the context
thread_local int pushed = 0;     // contexts this thread pushed and has not popped
const CUresult INVALID_VALUE = 1, NOT_FOUND = 500, OUT_OF_MEMORY = 2;

// Device memory: one reserved region, handed out from the bottom and never reused (a freed
// range is unmapped and replaced), readable and writable only while some thread is inside a
// driver call that touches device memory (DeviceAccess). One thread's host code may still
// read device memory while another thread is inside such a call: that is missed, never a
// false fault.
const size_t pool_bytes = (size_t)1 << 40;
char *pool_base;
size_t pool_top;
std::mutex access_lock;
int access_depth;

bool pool_ready() {
    static bool ready = [] {
        void *p = mmap(NULL, pool_bytes, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        pool_base = p == MAP_FAILED ? NULL : static_cast<char *>(p);
        return pool_base != NULL;
    }();
    return ready;
}

int access_prot() { return access_depth > 0 ? PROT_READ | PROT_WRITE : PROT_NONE; }

struct DeviceAccess {
    DeviceAccess() {
        std::lock_guard<std::mutex> guard(access_lock);
        if (access_depth++ == 0 && pool_top > 0)
            mprotect(pool_base, pool_top, PROT_READ | PROT_WRITE);
    }
    ~DeviceAccess() {
        std::lock_guard<std::mutex> guard(access_lock);
        if (--access_depth == 0 && pool_top > 0)
            mprotect(pool_base, pool_top, PROT_NONE);
    }
};

void *pool_alloc(size_t bytes) {
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    std::lock_guard<std::mutex> guard(access_lock);
    if (!pool_ready() || rounded > pool_bytes - pool_top)
        return NULL;
    char *p = pool_base + pool_top;
    pool_top += rounded;
    if (access_depth > 0)
        mprotect(p, rounded, PROT_READ | PROT_WRITE);
    return p;
}

void pool_free(void *p, size_t bytes) {
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    std::lock_guard<std::mutex> guard(access_lock);
    mmap(p, rounded, access_prot(), MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
         -1, 0);
}

bool is_device(uintptr_t p) {
    std::lock_guard<std::mutex> guard(lock);
    auto it = allocations.upper_bound(p);
    if (it == allocations.begin())
        return false;
    --it;
    return p >= it->first && p < it->first + (it->second ? it->second : 1);
}

} // namespace

static const kernel_entry *coroutine_kernel;
static void *coroutine_params;

static void coroutine_main() {
    coroutine_kernel->call(coroutine_kernel->fn, coroutine_params);
    thread_done[current_thread] = true; // uc_link returns to the scheduler
}

static void run_block_as_coroutines(const kernel_entry *k, void *params, unsigned threads) {
    const size_t stack_size = 64 * 1024;
    static std::vector<char> stacks(1024 * stack_size);
    coroutine_kernel = k;
    coroutine_params = params;
    for (unsigned t = 0; t < threads; t++) {
        getcontext(&thread_context[t]);
        thread_context[t].uc_stack.ss_sp = &stacks[t * stack_size];
        thread_context[t].uc_stack.ss_size = stack_size;
        thread_context[t].uc_link = &scheduler;
        makecontext(&thread_context[t], coroutine_main, 0);
        thread_done[t] = false;
    }
    for (unsigned left = threads; left > 0;) {
        for (unsigned t = 0; t < threads; t++) {
            if (thread_done[t])
                continue;
            current_thread = t;
            threadIdx = {t, 0, 0};
            swapcontext(&scheduler, &thread_context[t]);
            left -= thread_done[t];
        }
    }
}

extern "C" {

CUresult cuInit(unsigned) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) {
    *s = e == OUT_OF_MEMORY ? "out of memory" : "fake driver error";
    return 0;
}
CUresult cuGetErrorName(CUresult e, const char **s) {
    *s = e == OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
    return 0;
}
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) {
    if (ordinal != 0)
        return INVALID_VALUE;
    *d = 0;
    return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int) { *v = attr == 75 ? 9 : 0; return 0; }
CUresult cuDeviceGetName(char *name, int len, int) {
    snprintf(name, (size_t)len, "fake CUDA device");
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int) { *ctx = (void *)&context_depth; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
CUresult cuCtxPushCurrent_v2(void *) {
    pushed++;
    return 0;
}
CUresult cuCtxPopCurrent_v2(void **ctx) {
    if (pushed == 0)
        return 201; // CUDA_ERROR_INVALID_CONTEXT: nothing to pop
    pushed--;
    if (ctx)
        *ctx = (void *)&context_depth;
    return 0;
}

// For the tests: contexts left pushed on the calling thread (0 after every balanced call),
// and device allocations alive.
int fake_cuda_pushed_contexts(void) { return pushed; }
// fake_cublas.c computes its products on the host: it opens device access around each.
void fake_cuda_device_access(int enter) {
    static thread_local std::vector<DeviceAccess *> held;
    if (enter) {
        held.push_back(new DeviceAccess);
    } else if (!held.empty()) {
        delete held.back();
        held.pop_back();
    }
}
int fake_cuda_live_allocations(void) {
    std::lock_guard<std::mutex> guard(lock);
    return (int)allocations.size();
}
CUresult cuCtxSynchronize(void) { return 0; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    if (bytes == 0)
        return INVALID_VALUE;
    if (bytes > ((size_t)1 << 40))
        return OUT_OF_MEMORY;
    void *m = pool_alloc(bytes);
    if (m == NULL)
        return OUT_OF_MEMORY;
    {
        DeviceAccess access;
        memset(m, 0xA5, bytes); // like real device memory, not zero
    }
    std::lock_guard<std::mutex> guard(lock);
    allocations[(uintptr_t)m] = bytes;
    *p = (CUdeviceptr)(uintptr_t)m;
    return 0;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    std::lock_guard<std::mutex> guard(lock);
    auto it = allocations.find((uintptr_t)p);
    if (it == allocations.end())
        return INVALID_VALUE;
    pool_free((void *)(uintptr_t)p, it->second);
    allocations.erase(it);
    return 0;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *) {
    if (!is_device((uintptr_t)d))
        return INVALID_VALUE;
    DeviceAccess access;
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *) {
    if (!is_device((uintptr_t)s))
        return INVALID_VALUE;
    DeviceAccess access;
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *) {
    if (!is_device((uintptr_t)d) || !is_device((uintptr_t)s))
        return INVALID_VALUE;
    DeviceAccess access;
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return 0;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *) {
    if (!is_device((uintptr_t)d))
        return INVALID_VALUE;
    DeviceAccess access;
    memset((void *)(uintptr_t)d, v, n);
    return 0;
}
CUresult cuStreamCreate(void **s, unsigned) { *s = malloc(1); return 0; }
CUresult cuStreamSynchronize(void *) { return 0; }
CUresult cuStreamDestroy_v2(void *s) { free(s); return 0; }
CUresult cuModuleLoadData(void **m, const void *image) {
    if (image == NULL)
        return INVALID_VALUE;
    *m = (void *)&kernels();
    return 0;
}
CUresult cuModuleGetFunction(void **f, void *, const char *name) {
    auto it = kernels().find(name);
    if (it == kernels().end())
        return NOT_FOUND;
    *f = &it->second;
    return 0;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned, void *, void **params, void **) {
    const kernel_entry *k = static_cast<const kernel_entry *>(f);
    if (by != 1 || bz != 1 || bx == 0 || bx > 1024 || params == NULL)
        return INVALID_VALUE;
    std::lock_guard<std::mutex> guard(lock); // one launch at a time: the dims are global
    DeviceAccess access;
    blockDim = {bx, by, bz};
    gridDim = {gx, gy, gz};
    for (unsigned z = 0; z < gz; z++)
        for (unsigned y = 0; y < gy; y++)
            for (unsigned x = 0; x < gx; x++) {
                emu_dim3 block = {x, y, z};
                if (!k->needs_sync) {
                    blockIdx = block;
                    for (unsigned t = 0; t < bx; t++) {
                        threadIdx = {t, 0, 0};
                        k->call(k->fn, params[0]);
                    }
                    continue;
                }
                blockIdx = block;
                run_block_as_coroutines(k, params[0], bx);
            }
    return 0;
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    if (!is_device((uintptr_t)p))
        return INVALID_VALUE;
    if (attr == 9)
        *(int *)data = 0;
    else if (attr == 2)
        *(unsigned *)data = 2;
    else
        return INVALID_VALUE;
    return 0;
}

} // extern "C"
