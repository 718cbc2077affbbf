/* fake_cublas.c: a stand-in for libcublas with the few entry points libruntime uses, computing
 * column-major GEMMs on the CPU (device memory is host memory under fake_cuda.cpp, readable
 * while the fake driver grants access). It checks the layout arithmetic of the backend's cuBLAS
 * path on machines without a GPU. */
#include <dlfcn.h>
#include <stdlib.h>

/* fake_cuda.cpp keeps device memory out of the host's reach between its calls; the products
 * here run on the host, so they ask it for access (the driver is the one RT_CUDA_DRIVER names,
 * already loaded by libruntime). */
static void device_access(int enter) {
    static void (*fn)(int);
    if (fn == NULL) {
        const char *path = getenv("RT_CUDA_DRIVER");
        void *driver = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
        if (driver != NULL)
            *(void **)&fn = dlsym(driver, "fake_cuda_device_access");
        if (fn == NULL)
            return;
    }
    fn(enter);
}

typedef struct fake_handle { void *stream; } fake_handle;

int cublasCreate_v2(fake_handle **h) { *h = calloc(1, sizeof **h); return *h ? 0 : 1; }
int cublasDestroy_v2(fake_handle *h) { free(h); return 0; }
int cublasSetStream_v2(fake_handle *h, void *stream) { h->stream = stream; return 0; }
int cublasGetVersion_v2(fake_handle *h, int *v) { (void)h; *v = 130000; return 0; }

#define DEFINE_GEMM(name, T)                                                                  \
    int name(fake_handle *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *a, \
             int lda, long long sa, const T *b, int ldb, long long sb, const T *beta, T *c,   \
             int ldc, long long sc, int batch) {                                              \
        (void)h;                                                                              \
        if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < (m > 1 ? m : 1) ||                  \
            lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) ||                                    \
            ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1))                                      \
            return 7; /* CUBLAS_STATUS_INVALID_VALUE */                                       \
        device_access(1);                                                                     \
        for (int e = 0; e < batch; e++) {                                                     \
            const T *ae = a + e * sa, *be = b + e * sb;                                       \
            T *ce = c + e * sc;                                                               \
            for (int j = 0; j < n; j++)                                                       \
                for (int i = 0; i < m; i++) {                                                 \
                    double acc = 0;                                                           \
                    for (int l = 0; l < k; l++) {                                             \
                        T av = ta ? ae[l + (long long)i * lda] : ae[i + (long long)l * lda];  \
                        T bv = tb ? be[j + (long long)l * ldb] : be[l + (long long)j * ldb];  \
                        acc += (double)av * (double)bv;                                       \
                    }                                                                         \
                    T prev = *beta == 0 ? (T)0 : *beta * ce[i + (long long)j * ldc];          \
                    ce[i + (long long)j * ldc] = (T)(*alpha * acc) + prev;                    \
                }                                                                             \
        }                                                                                     \
        device_access(0);                                                                     \
        return 0;                                                                             \
    }
DEFINE_GEMM(cublasSgemmStridedBatched, float)
DEFINE_GEMM(cublasDgemmStridedBatched, double)
