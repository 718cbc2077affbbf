/* transfer.c: the device-facing ABI calls: device count, device memory for staging tensors,
 * and rt_tensor_copy between the host and CUDA devices. They use the device's primary context
 * and the legacy default stream, and return once the work is complete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_method.h"
#include "core/alloc.h"
#include "tensor.h"

RT_API int32_t rt_cuda_device_count(void) {
    const rt_cuda_driver *cu;
    if (rt_cuda__driver(&cu) != RT_OK) {
        rt_error__clear();
        return 0;
    }
    return cu->device_count;
}

static rt_status open_device(rt_cuda_device **out, rt_device device, const char *call) {
    rt_status status = rt_cuda__device(out, device.index);
    if (status != RT_OK)
        rt_error__prefix("%s: ", call);
    return status;
}

RT_API rt_status rt_device_alloc(void **out, rt_device device, uint64_t nbytes) {
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_device_alloc: out is NULL");
    *out = NULL;
    if (nbytes > SIZE_MAX)
        return rt_error__set(RT_OUT_OF_MEMORY, "rt_device_alloc: %llu bytes do not fit in "
                             "memory", (unsigned long long)nbytes);
    if (device.type == RT_DEVICE_CPU && device.index == 0) {
        *out = rt_alloc__aligned((size_t)nbytes);
        return *out != NULL ? RT_OK : rt_error__oom("rt_device_alloc host buffer");
    }
    if (device.type != RT_DEVICE_CUDA)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_device_alloc: unknown device (type %d, "
                             "index %d)", device.type, device.index);
    rt_cuda_device *d;
    RT_RETURN_IF_ERROR(open_device(&d, device, "rt_device_alloc"));
    RT_RETURN_IF_ERROR(rt_cuda__push(d));
    CUdeviceptr p = 0;
    char what[96];
    snprintf(what, sizeof what, "rt_device_alloc: %llu bytes on cuda:%d",
             (unsigned long long)nbytes, device.index);
    rt_status status = rt_cuda__check(d->cu->mem_alloc(&p, nbytes > 0 ? (size_t)nbytes : 64),
                                      what);
    rt_cuda__pop(d);
    if (status == RT_OK)
        *out = (void *)(uintptr_t)p;
    return status;
}

RT_API void rt_device_free(rt_device device, void *data) {
    if (data == NULL)
        return;
    if (device.type == RT_DEVICE_CPU) {
        rt_alloc__free(data);
        return;
    }
    rt_cuda_device *d;
    if (device.type != RT_DEVICE_CUDA || rt_cuda__device(&d, device.index) != RT_OK ||
        rt_cuda__push(d) != RT_OK)
        return;
    d->cu->mem_free((CUdeviceptr)(uintptr_t)data);
    rt_cuda__pop(d);
}

/* ---- rt_tensor_copy --------------------------------------------------------------------- */

typedef struct side {
    const rt_tensor *t;
    int64_t strides[RT_MAX_RANK];
    bool dense; /* row-major dense (size-1 dimensions may have any stride) */
    bool on_cuda;
} side;

static rt_status describe(side *s, const rt_tensor *t, const char *what) {
    s->t = t;
    s->on_cuda = t->device.type == RT_DEVICE_CUDA;
    if (!s->on_cuda && !(t->device.type == RT_DEVICE_CPU && t->device.index == 0))
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: %s is on an unknown device "
                             "(type %d, index %d)", what, t->device.type, t->device.index);
    int64_t dense[RT_MAX_RANK];
    rt_tensor__dense_strides(dense, t->rank, t->sizes, NULL);
    s->dense = true;
    for (int32_t d = 0; d < t->rank; d++) {
        s->strides[d] = t->strides != NULL ? t->strides[d] : dense[d];
        if (t->sizes[d] != 1 && s->strides[d] != dense[d])
            s->dense = false;
    }
    size_t elem_size = rt_tensor__type_size(rt_tensor__type_of(t->dtype));
    if (!rt_tensor__strides_fit(t->sizes, s->strides, t->rank, elem_size))
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: %s has strides that reach "
                             "past any address (their byte offsets overflow int64)", what);
    return RT_OK;
}

static rt_status check_pair(const rt_tensor *dst, const rt_tensor *src) {
    if (dst == NULL || src == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: dst and src must not be "
                             "NULL");
    rt_type type = rt_tensor__type_of(src->dtype);
    char a[48], b[48];
    if (type == RT_TYPE_INVALID || rt_tensor__type_of(dst->dtype) != type)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: dst has dtype %s and src "
                             "%s; they must be one supported dtype",
                             rt_tensor__dtype_text(dst->dtype, a),
                             rt_tensor__dtype_text(src->dtype, b));
    if (src->rank < 0 || src->rank > RT_MAX_RANK || dst->rank != src->rank)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: dst has rank %d and src "
                             "rank %d; they must be equal and at most %d", dst->rank,
                             src->rank, RT_MAX_RANK);
    if (src->rank > 0 && (src->sizes == NULL || dst->sizes == NULL))
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: sizes are NULL");
    for (int32_t d = 0; d < src->rank; d++)
        if (src->sizes[d] != dst->sizes[d] || src->sizes[d] < 0)
            return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: dst and src differ in "
                                 "size at dimension %d (%lld and %lld)", d,
                                 (long long)dst->sizes[d], (long long)src->sizes[d]);
    return RT_OK;
}

static rt_status check_device_memory(const rt_cuda_device *d, const void *data,
                                     const char *what) {
    int ordinal = -1;
    if (d->cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     (CUdeviceptr)(uintptr_t)data) != CUDA_SUCCESS)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: %s says it is on cuda:%d, "
                             "but its data pointer is not CUDA memory", what, d->ordinal);
    if (ordinal != d->ordinal)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: %s is on cuda:%d, not "
                             "cuda:%d as it says", what, ordinal, d->ordinal);
    return RT_OK;
}

/* With the context current: one transfer through the legacy default stream, then wait. */
static rt_status transfer(const rt_cuda_device *d, const side *dst, const side *src,
                          size_t nbytes, size_t elem_size) {
    const rt_cuda_driver *cu = d->cu;
    const rt_tensor *dt = dst->t, *st = src->t;
    CUdeviceptr dptr = (CUdeviceptr)(uintptr_t)dt->data, sptr = (CUdeviceptr)(uintptr_t)st->data;
    rt_status status = RT_OK;
    void *staging = NULL;
    if (dst->on_cuda && src->on_cuda) {
        if (dst->dense && src->dense)
            status = rt_cuda__check(cu->memcpy_dtod_async(dptr, sptr, nbytes, NULL),
                                    "rt_tensor_copy: device to device");
        else
            status = rt_cuda__copy_strided(d, NULL, dt->data, dst->strides, st->data,
                                           src->strides, st->rank, st->sizes, elem_size,
                                           "rt_tensor_copy: strided device copy");
    } else if (dst->on_cuda) {
        if (!dst->dense)
            return rt_error__set(RT_UNSUPPORTED, "rt_tensor_copy: a host to device copy needs "
                                 "a dense row-major dst");
        const void *host = st->data;
        if (!src->dense) {
            if ((staging = malloc(nbytes)) == NULL)
                return rt_error__oom("rt_tensor_copy staging buffer");
            int64_t dense[RT_MAX_RANK];
            rt_tensor__dense_strides(dense, st->rank, st->sizes, NULL);
            rt_tensor__copy_strided(staging, dense, st->data, src->strides, st->rank, st->sizes,
                                    elem_size);
            host = staging;
        }
        status = rt_cuda__check(cu->memcpy_htod_async(dptr, host, nbytes, NULL),
                                "rt_tensor_copy: host to device");
    } else {
        if (!src->dense)
            return rt_error__set(RT_UNSUPPORTED, "rt_tensor_copy: a device to host copy needs "
                                 "a dense row-major src");
        void *host = dt->data;
        if (!dst->dense && (host = staging = malloc(nbytes)) == NULL)
            return rt_error__oom("rt_tensor_copy staging buffer");
        status = rt_cuda__check(cu->memcpy_dtoh_async(host, sptr, nbytes, NULL),
                                "rt_tensor_copy: device to host");
        if (status == RT_OK)
            status = rt_cuda__check(cu->stream_synchronize(NULL), "rt_tensor_copy");
        if (status == RT_OK && staging != NULL) {
            int64_t dense[RT_MAX_RANK];
            rt_tensor__dense_strides(dense, dt->rank, dt->sizes, NULL);
            rt_tensor__copy_strided(dt->data, dst->strides, staging, dense, dt->rank,
                                    dt->sizes, elem_size);
        }
    }
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(NULL), "rt_tensor_copy");
    free(staging);
    return status;
}

RT_API rt_status rt_tensor_copy(const rt_tensor *dst, const rt_tensor *src) {
    RT_RETURN_IF_ERROR(check_pair(dst, src));
    side d, s;
    RT_RETURN_IF_ERROR(describe(&d, dst, "dst"));
    RT_RETURN_IF_ERROR(describe(&s, src, "src"));
    int64_t numel;
    if (!rt_tensor__checked_numel(src->sizes, src->rank, &numel))
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: the sizes overflow");
    if (numel == 0)
        return RT_OK;
    if (dst->data == NULL || src->data == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_tensor_copy: data is NULL");
    size_t elem_size = rt_tensor__type_size(rt_tensor__type_of(src->dtype));
    if (!d.on_cuda && !s.on_cuda) {
        rt_tensor__copy_strided(dst->data, d.strides, src->data, s.strides, src->rank,
                                src->sizes, elem_size);
        return RT_OK;
    }
    if (d.on_cuda && s.on_cuda && dst->device.index != src->device.index)
        return rt_error__set(RT_UNSUPPORTED, "rt_tensor_copy: copies between two CUDA devices "
                             "(cuda:%d and cuda:%d) are not supported; go through the host",
                             dst->device.index, src->device.index);
    rt_cuda_device *dev;
    RT_RETURN_IF_ERROR(open_device(&dev, d.on_cuda ? dst->device : src->device,
                                   "rt_tensor_copy"));
    RT_RETURN_IF_ERROR(rt_cuda__push(dev));
    rt_status status = RT_OK;
    if (d.on_cuda)
        status = check_device_memory(dev, dst->data, "dst");
    if (status == RT_OK && s.on_cuda)
        status = check_device_memory(dev, src->data, "src");
    if (status == RT_OK)
        status = transfer(dev, &d, &s, (size_t)numel * elem_size, elem_size);
    rt_cuda__pop(dev);
    return status;
}
