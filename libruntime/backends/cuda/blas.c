/* blas.c: cuBLAS through dlopen (libcublas.so.13, .12, .11, or the path in RT_CUBLAS;
 * RT_CUBLAS=off keeps the built-in kernel). cuBLAS runs
 * on the runtime API, which uses the context current on the thread: the device's primary
 * context, made current by the caller. */
#include "backends/cuda/blas.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cublas_context *cublas_handle;
typedef int cublas_status;
#define CUBLAS_OP_N 0
#define CUBLAS_OP_T 1

typedef struct cublas_api {
    cublas_status (*create)(cublas_handle *handle);
    cublas_status (*destroy)(cublas_handle handle);
    cublas_status (*set_stream)(cublas_handle handle, CUstream stream);
    cublas_status (*get_version)(cublas_handle handle, int *version);
    cublas_status (*sgemm_strided_batched)(cublas_handle, int, int, int, int, int, const float *,
                                           const float *, int, long long, const float *, int,
                                           long long, const float *, float *, int, long long,
                                           int);
    cublas_status (*dgemm_strided_batched)(cublas_handle, int, int, int, int, int,
                                           const double *, const double *, int, long long,
                                           const double *, int, long long, const double *,
                                           double *, int, long long, int);
} cublas_api;

struct rt_cuda_blas {
    cublas_handle handle;
};

static cublas_api api;
static bool api_loaded;
static char status_text[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_api(void) {
    const char *choice = getenv("RT_CUBLAS");
    if (choice != NULL && strcmp(choice, "off") == 0) {
        snprintf(status_text, sizeof status_text, "cuBLAS turned off (RT_CUBLAS=off); using the "
                 "built-in GEMM kernel");
        return;
    }
    const char *names[] = {getenv("RT_CUBLAS"), "libcublas.so.13", "libcublas.so.12",
                           "libcublas.so.11", "libcublas.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && lib == NULL; i++)
        if (names[i] != NULL && names[i][0] != '\0')
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(status_text, sizeof status_text, "cuBLAS not found (libcublas.so.13/.12/.11); "
                 "using the built-in GEMM kernel");
        return;
    }
    *(void **)&api.create = dlsym(lib, "cublasCreate_v2");
    *(void **)&api.destroy = dlsym(lib, "cublasDestroy_v2");
    *(void **)&api.set_stream = dlsym(lib, "cublasSetStream_v2");
    *(void **)&api.get_version = dlsym(lib, "cublasGetVersion_v2");
    *(void **)&api.sgemm_strided_batched = dlsym(lib, "cublasSgemmStridedBatched");
    *(void **)&api.dgemm_strided_batched = dlsym(lib, "cublasDgemmStridedBatched");
    if (!api.create || !api.destroy || !api.set_stream || !api.get_version ||
        !api.sgemm_strided_batched || !api.dgemm_strided_batched) {
        snprintf(status_text, sizeof status_text, "cuBLAS lacks an entry point we use; using "
                 "the built-in GEMM kernel");
        return;
    }
    api_loaded = true;
    snprintf(status_text, sizeof status_text, "cuBLAS");
}

const char *rt_cuda__blas_status(void) {
    pthread_once(&load_once, load_api);
    return status_text;
}

rt_cuda_blas *rt_cuda__blas_create(CUstream stream) {
    pthread_once(&load_once, load_api);
    if (!api_loaded)
        return NULL;
    rt_cuda_blas *blas = calloc(1, sizeof *blas);
    if (blas == NULL)
        return NULL;
    if (api.create(&blas->handle) != 0) {
        free(blas);
        return NULL;
    }
    if (api.set_stream(blas->handle, stream) != 0) {
        api.destroy(blas->handle);
        free(blas);
        return NULL;
    }
    return blas;
}

void rt_cuda__blas_destroy(rt_cuda_blas *blas) {
    if (blas == NULL)
        return;
    api.destroy(blas->handle);
    free(blas);
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Row-major C = A @ B is column-major C^T = B^T @ A^T: B goes first. */
rt_status rt_cuda__blas_gemm(rt_cuda_blas *blas, const rt_cuda_blas_gemm *g, const char *what) {
    if (!fits_int(g->m) || !fits_int(g->n) || !fits_int(g->k) || !fits_int(g->batch))
        return rt_error__set(RT_UNSUPPORTED, "%s: the product is too large for cuBLAS's int "
                             "sizes", what);
    int m = (int)g->m, n = (int)g->n, k = (int)g->k, batch = (int)g->batch;
    int op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, ldb = g->trans_b ? k : n;
    int lda = k > 0 ? k : 1, ldc = n > 0 ? n : 1;
    if (ldb < 1)
        ldb = 1;
    cublas_status s;
    if (g->double_precision) {
        const double one = 1.0, zero = 0.0;
        s = api.dgemm_strided_batched(blas->handle, op_b, CUBLAS_OP_N, n, m, k, &one, g->b, ldb,
                                      g->b_batch_stride, g->a, lda, g->a_batch_stride, &zero,
                                      g->c, ldc, g->c_batch_stride, batch);
    } else {
        const float one = 1.0f, zero = 0.0f;
        s = api.sgemm_strided_batched(blas->handle, op_b, CUBLAS_OP_N, n, m, k, &one, g->b, ldb,
                                      g->b_batch_stride, g->a, lda, g->a_batch_stride, &zero,
                                      g->c, ldc, g->c_batch_stride, batch);
    }
    if (s != 0)
        return rt_error__set(RT_INTERNAL, "%s: cuBLAS gemm failed with status %d", what, s);
    return RT_OK;
}
