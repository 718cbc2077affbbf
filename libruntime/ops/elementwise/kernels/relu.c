/* relu.c: relu of float32, float64 and the signed integer types: x < 0 ? 0 : x, which keeps
 * NaN as NaN, like PyTorch. */
#include "ops/elementwise/kernels/activation.h"
#include "ops/op_util.h"

typedef void (*relu_kernel)(void *out, const void *x, size_t begin, size_t end);

#define DEFINE_RELU(name, T)                                             \
    static void name(void *out, const void *x, size_t begin, size_t end) \
    {                                                                    \
        T *o = out;                                                      \
        const T *v = x;                                                  \
        for (size_t i = begin; i < end; i++)                             \
            o[i] = v[i] < 0 ? (T)0 : v[i];                               \
    }
DEFINE_RELU(relu__f32, float)
DEFINE_RELU(relu__f64, double)
DEFINE_RELU(relu__i8, int8_t)
DEFINE_RELU(relu__i16, int16_t)
DEFINE_RELU(relu__i32, int32_t)
DEFINE_RELU(relu__i64, int64_t)

static relu_kernel relu_kernel_for(rt_type type) {
    switch (type) {
    case RT_F32: return relu__f32;
    case RT_F64: return relu__f64;
    case RT_I8: return relu__i8;
    case RT_I16: return relu__i16;
    case RT_I32: return relu__i32;
    case RT_I64: return relu__i64;
    default: return NULL;
    }
}

typedef struct relu_job {
    relu_kernel kernel;
    void *out;
    const void *x;
} relu_job;

static void relu_range(void *arg, size_t begin, size_t end) {
    const relu_job *job = arg;
    job->kernel(job->out, job->x, begin, end);
}

bool rt_elementwise__relu(rt_type type, const void *x, void *out, int64_t numel,
                          int32_t threads) {
    relu_job job = {relu_kernel_for(type), out, x};
    if (!job.kernel)
        return false;
    if (numel > 0)
        rt_parallel__for(threads, (size_t)numel, rt_op__grain(1), relu_range, &job);
    return true;
}
