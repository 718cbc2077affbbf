/* cuda_method.c: the CUDA backend (backend.h): a method on a CUDA device, its stream and
 * device memory, constants uploaded once at load, inputs bound or copied in, execution and
 * synchronization. */
#include "backends/cuda/cuda_method.h"

#include "backend.h"
#include "backends/cuda/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adds the method's name (and device) in front of a backend error already recorded. */
static rt_status method_error(rt_method *m, rt_status status) {
    if (status != RT_OK)
        rt_error__prefix("method '%s' on cuda:%d: ", m->name, m->options.device.index);
    return status;
}

static CUdeviceptr device_ptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

static rt_status cuda_open(rt_method *m) {
    rt_cuda_method *cm = calloc(1, sizeof *cm);
    if (cm == NULL)
        return rt_error__oom("CUDA method state");
    m->backend_state = cm;
    cm->profile = (m->options.flags & RT_METHOD_PROFILE) != 0;
    rt_status status = rt_cuda__device(&cm->device, m->options.device.index);
    if (status != RT_OK) {
        char reason[512]; /* the last error is overwritten below */
        snprintf(reason, sizeof reason, "%s", rt_last_error());
        return RT_METHOD_ERROR(m, status, "cannot run on cuda:%d: %s", m->options.device.index,
                               reason);
    }
    RT_RETURN_IF_ERROR(method_error(m, rt_cuda__push(cm->device)));
    status = rt_cuda__check(cm->device->cu->stream_create(&cm->stream, CU_STREAM_NON_BLOCKING),
                            "creating the method's stream");
    if (status == RT_OK)
        cm->blas = rt_cuda__blas_create(cm->stream);
    rt_cuda__pop(cm->device);
    return method_error(m, status);
}

static rt_status remember_buffer(rt_cuda_method *cm, CUdeviceptr p) {
    if (cm->num_buffers == cm->buffers_capacity) {
        size_t capacity = cm->buffers_capacity ? 2 * cm->buffers_capacity : 16;
        CUdeviceptr *grown = realloc(cm->buffers, capacity * sizeof *grown);
        if (grown == NULL)
            return rt_error__oom("CUDA buffer table");
        cm->buffers = grown;
        cm->buffers_capacity = capacity;
    }
    cm->buffers[cm->num_buffers++] = p;
    return RT_OK;
}

rt_status rt_cuda__method_alloc(rt_method *m, size_t bytes, const void *init, void **out) {
    rt_cuda_method *cm = m->backend_state;
    const rt_cuda_driver *cu = cm->device->cu;
    *out = NULL;
    RT_RETURN_IF_ERROR(method_error(m, rt_cuda__push(cm->device)));
    CUdeviceptr p = 0;
    /* cuMemAlloc refuses 0 bytes; an empty tensor still gets a distinct address. */
    size_t size = bytes > 0 ? bytes : 64;
    char what[96];
    snprintf(what, sizeof what, "allocating %zu bytes of device memory", bytes);
    rt_status status = rt_cuda__check(cu->mem_alloc(&p, size), what);
    if (status == RT_OK) {
        status = remember_buffer(cm, p);
        if (status != RT_OK)
            cu->mem_free(p);
    }
    if (status == RT_OK && bytes > 0) {
        if (init != NULL)
            status = rt_cuda__check(cu->memcpy_htod_async(p, init, bytes, cm->stream),
                                    "uploading a constant");
        else
            status = rt_cuda__check(cu->memset_d8_async(p, 0, bytes, cm->stream),
                                    "zero-filling device memory");
        if (status == RT_OK)
            status = rt_cuda__check(cu->stream_synchronize(cm->stream), "uploading");
    }
    rt_cuda__pop(cm->device);
    if (status == RT_OK)
        *out = (void *)(uintptr_t)p;
    return method_error(m, status);
}

/* Constants are shared by value index and by address: two values naming one constant get one
 * device copy. */
static rt_status upload_constants(rt_method *m) {
    size_t num_tensors = 0;
    for (uint32_t v = 0; v < m->num_values; v++)
        num_tensors += m->values[v].kind == RT_VALUE_TENSOR;
    const void **hosts = calloc(num_tensors ? num_tensors : 1, sizeof *hosts);
    void **devs = calloc(num_tensors ? num_tensors : 1, sizeof *devs);
    size_t done = 0;
    rt_status status = hosts && devs ? RT_OK : rt_error__oom("constant table");
    for (size_t t = 0; t < num_tensors && status == RT_OK; t++) {
        rt_tensor_value *tv = &m->tensors[t];
        if (tv->writable)
            continue;
        size_t k = 0;
        while (k < done && hosts[k] != tv->home)
            k++;
        if (k == done) {
            status = rt_cuda__method_alloc(m, rt_tensor__nbytes(tv), tv->home, &devs[k]);
            hosts[k] = tv->home;
            done += status == RT_OK;
        }
        if (status == RT_OK)
            tv->home = tv->data = devs[k];
    }
    free(hosts);
    free(devs);
    return status;
}

static rt_status cuda_finish_load(rt_method *m) {
    rt_cuda_method *cm = m->backend_state;
    cm->ops = calloc(m->num_instructions ? m->num_instructions : 1, sizeof *cm->ops);
    if (cm->ops == NULL)
        return rt_error__oom("CUDA instruction table");
    for (uint32_t i = 0; i < m->num_instructions; i++) {
        rt_instruction *ins = &m->instructions[i];
        if (ins->kind != RT_INSTR_KERNEL)
            continue;
        cm->ops[i] = rt_cuda__op_of(ins->op);
        if (cm->ops[i] == NULL || cm->ops[i]->run == NULL)
            return RT_METHOD_ERROR(m, RT_UNSUPPORTED, "instruction %u calls op '%s', which has "
                                   "no CUDA kernel in this build (see docs/cuda.md); load the "
                                   "method on the cpu", i, ins->op->name);
        ins->ctx.backend = cm;
        ins->ctx.scratch = NULL; /* the kernels use no host scratch */
        ins->ctx.scratch_bytes = 0;
        if (cm->ops[i]->check != NULL) {
            /* The check sees the planned bounds, as prepare did, and like prepare leaves
             * parameters read at run (tensors on the device by now) unread. */
            bool preparing = ins->ctx.preparing;
            ins->ctx.preparing = true;
            rt_status status = cm->ops[i]->check(&ins->ctx);
            ins->ctx.preparing = preparing;
            RT_RETURN_IF_ERROR(status);
        }
    }
    if (cm->scratch_bytes > 0)
        RT_RETURN_IF_ERROR(rt_cuda__method_alloc(m, cm->scratch_bytes, NULL, &cm->scratch));
    return upload_constants(m);
}

static void cuda_close(rt_method *m) {
    rt_cuda_method *cm = m->backend_state;
    if (cm == NULL)
        return;
    if (cm->device != NULL && rt_cuda__push(cm->device) == RT_OK) {
        const rt_cuda_driver *cu = cm->device->cu;
        if (cm->stream != NULL)
            cu->stream_synchronize(cm->stream);
        rt_cuda__blas_destroy(cm->blas);
        for (size_t b = 0; b < cm->num_buffers; b++)
            cu->mem_free(cm->buffers[b]);
        if (cm->stream != NULL)
            cu->stream_destroy(cm->stream);
        rt_cuda__pop(cm->device);
    }
    free(cm->buffers);
    free(cm->ops);
    free(cm);
    m->backend_state = NULL;
}

/* ---- inputs ----------------------------------------------------------------------------- */

/* A device input must be memory of the method's device. */
static rt_status check_device_pointer(rt_method *m, const void *data) {
    const rt_cuda_driver *cu = ((rt_cuda_method *)m->backend_state)->device->cu;
    int ordinal = -1;
    CUresult r = cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           device_ptr(data));
    if (r != CUDA_SUCCESS)
        return rt_error__set(RT_INVALID_ARGUMENT, "the tensor says it is on cuda:%d, but its "
                             "data pointer is not CUDA memory", m->options.device.index);
    if (ordinal != m->options.device.index)
        return rt_error__set(RT_INVALID_ARGUMENT, "the tensor's memory is on cuda:%d, but the "
                             "method runs on cuda:%d", ordinal, m->options.device.index);
    return RT_OK;
}

static rt_status copy_in(rt_method *m, rt_tensor_value *t, const rt_tensor *src,
                         const int64_t *src_strides, bool dense) {
    rt_cuda_method *cm = m->backend_state;
    const rt_cuda_driver *cu = cm->device->cu;
    size_t nbytes = rt_tensor__nbytes(t);
    if (src->device.type == RT_DEVICE_CUDA) {
        if (dense)
            return rt_cuda__check(cu->memcpy_dtod_async(device_ptr(t->home),
                                                        device_ptr(src->data), nbytes,
                                                        cm->stream),
                                  "copying the input on the device");
        return rt_cuda__copy_strided(cm->device, cm->stream, t->home, t->strides, src->data,
                                     src_strides, t->rank, t->sizes, t->elem_size,
                                     "copying a strided input on the device");
    }
    const void *host = src->data;
    void *staging = NULL;
    if (!dense) {
        /* Gather into t's dense layout on the host, then one transfer. */
        staging = malloc(nbytes);
        if (staging == NULL)
            return rt_error__oom("input staging buffer");
        rt_tensor__copy_strided(staging, t->strides, src->data, src_strides, t->rank, t->sizes,
                                t->elem_size);
        host = staging;
    }
    rt_status status = rt_cuda__check(cu->memcpy_htod_async(device_ptr(t->home), host, nbytes,
                                                            cm->stream),
                                      "copying the input to the device");
    /* The caller may reuse its memory as soon as set_input returns. */
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "copying the input");
    free(staging);
    return status;
}

static rt_status cuda_bind_input(rt_method *m, rt_tensor_value *t, const rt_tensor *src,
                                 const int64_t *src_strides, bool dense, bool may_bind,
                                 bool *zero_copy) {
    rt_cuda_method *cm = m->backend_state;
    *zero_copy = false;
    t->data = t->home;
    if (rt_tensor__numel(t) == 0)
        return RT_OK;
    RT_RETURN_IF_ERROR(rt_cuda__push(cm->device));
    rt_status status = RT_OK;
    if (src->device.type == RT_DEVICE_CUDA) {
        status = check_device_pointer(m, src->data);
        /* Other libraries (torch, cupy) may still be writing it on their own streams. */
        if (status == RT_OK)
            status = rt_cuda__check(cm->device->cu->ctx_synchronize(),
                                    "waiting for work queued on the device");
    }
    if (status == RT_OK && src->device.type == RT_DEVICE_CUDA && may_bind && dense) {
        t->data = src->data;
        *zero_copy = true;
    } else if (status == RT_OK) {
        status = copy_in(m, t, src, src_strides, dense);
    }
    rt_cuda__pop(cm->device);
    return status;
}

/* ---- execution -------------------------------------------------------------------------- */

static rt_status cuda_begin(rt_method *m) {
    rt_cuda_method *cm = m->backend_state;
    RT_RETURN_IF_ERROR(method_error(m, rt_cuda__push(cm->device)));
    /* Inputs bound in place are read as they are now: first let every stream of the context
     * (other libraries' work included) finish writing them. */
    for (uint32_t i = 0; i < m->num_inputs; i++) {
        if (m->inputs[i].zero_copy) {
            rt_status status = rt_cuda__check(cm->device->cu->ctx_synchronize(),
                                              "waiting for work queued on the device");
            if (status != RT_OK)
                rt_cuda__pop(cm->device);
            return method_error(m, status);
        }
    }
    return RT_OK;
}

static rt_status cuda_end(rt_method *m, rt_status status) {
    rt_cuda_method *cm = m->backend_state;
    /* Always drain the stream: a failed execute must not leave kernels writing behind us. */
    rt_status sync = rt_cuda__check(cm->device->cu->stream_synchronize(cm->stream),
                                    "waiting for the method's kernels");
    rt_cuda__pop(cm->device);
    if (status != RT_OK)
        return status;
    return method_error(m, sync);
}

static rt_status cuda_run_instruction(rt_method *m, uint32_t pc) {
    rt_cuda_method *cm = m->backend_state;
    rt_instruction *ins = &m->instructions[pc];
    RT_RETURN_IF_ERROR(cm->ops[pc]->run(&ins->ctx, cm));
    if (cm->profile) /* per-instruction times need the kernels finished */
        return method_error(m, rt_cuda__check(cm->device->cu->stream_synchronize(cm->stream),
                                              ins->op->name));
    return RT_OK;
}

static rt_status cuda_read_condition(rt_method *m, const rt_tensor_value *t, bool *out) {
    rt_cuda_method *cm = m->backend_state;
    const rt_cuda_driver *cu = cm->device->cu;
    unsigned char bytes[8] = {0};
    rt_status status = rt_cuda__check(cu->memcpy_dtoh_async(bytes, device_ptr(t->data),
                                                            t->elem_size, cm->stream),
                                      "reading a jump condition");
    if (status == RT_OK)
        status = rt_cuda__check(cu->stream_synchronize(cm->stream), "reading a jump condition");
    *out = false;
    for (uint32_t k = 0; k < t->elem_size && k < sizeof bytes; k++)
        *out = *out || bytes[k] != 0;
    return method_error(m, status);
}

/* ---- helpers for the op launchers ------------------------------------------------------- */

rt_status rt_cuda__op_launch(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_kernel kernel,
                             unsigned grid_x, unsigned grid_y, unsigned grid_z, void *params) {
    rt_status status = rt_cuda__launch(cm->device, cm->stream, kernel, grid_x, grid_y, grid_z,
                                       256, params, "launching the kernel");
    if (status != RT_OK) {
        char reason[512];
        snprintf(reason, sizeof reason, "%s", rt_last_error());
        return rt_op__fail(ctx, status, "%s", reason);
    }
    return RT_OK;
}

void rt_cuda__reserve_scratch(rt_cuda_method *cm, size_t bytes) {
    if (bytes > cm->scratch_bytes)
        cm->scratch_bytes = bytes;
}

rt_status rt_cuda__upload_scratch(rt_op_ctx *ctx, rt_cuda_method *cm, const void *host,
                                  size_t bytes) {
    if (bytes > cm->scratch_bytes)
        return rt_op__fail(ctx, RT_INTERNAL, "its tables need %zu bytes of device scratch, more "
                           "than the %zu planned at load", bytes, cm->scratch_bytes);
    if (bytes == 0)
        return RT_OK;
    /* From pageable memory the driver takes the bytes before it returns. */
    rt_status status = rt_cuda__check(cm->device->cu->memcpy_htod_async(device_ptr(cm->scratch),
                                                                        host, bytes,
                                                                        cm->stream),
                                      "uploading tables to the device");
    return status == RT_OK ? RT_OK : rt_op__fail(ctx, status, "could not upload its tables");
}

bool rt_cuda__sized_kernel(rt_cuda_kernel first, size_t elem, rt_cuda_kernel *out) {
    int offset = elem == 1 ? 0 : elem == 2 ? 1 : elem == 4 ? 2 : elem == 8 ? 3 : -1;
    if (offset < 0)
        return false;
    *out = (rt_cuda_kernel)(first + offset);
    return true;
}

rt_status rt_cuda__op_launch_sized(rt_op_ctx *ctx, rt_cuda_method *cm, rt_cuda_kernel first,
                                   size_t elem, int64_t n, void *params) {
    rt_cuda_kernel kernel;
    if (!rt_cuda__sized_kernel(first, elem, &kernel))
        return rt_op__fail(ctx, RT_INTERNAL, "no CUDA kernel for %zu-byte elements", elem);
    return rt_cuda__op_launch(ctx, cm, kernel, rt_cuda__blocks(n, 256), 1, 1, params);
}

rt_status rt_cuda__copy_strided(const rt_cuda_device *d, CUstream stream, void *dst,
                                const int64_t *dst_strides, const void *src,
                                const int64_t *src_strides, int32_t rank, const int64_t *sizes,
                                size_t elem_size, const char *what) {
    rt_cuda_copy_params p;
    memset(&p, 0, sizeof p);
    p.n = 1;
    for (int32_t i = 0; i < rank; i++)
        p.n *= sizes[i];
    if (p.n == 0)
        return RT_OK;
    p.rank = rank;
    memcpy(p.sizes, sizes, (size_t)rank * sizeof *sizes);
    memcpy(p.dst_strides, dst_strides, (size_t)rank * sizeof *dst_strides);
    memcpy(p.src_strides, src_strides, (size_t)rank * sizeof *src_strides);
    p.src = src;
    p.dst = dst;
    rt_cuda_kernel k;
    if (!rt_cuda__sized_kernel(RT_CUDA_K_copy_strided_1, elem_size, &k))
        return rt_error__set(RT_INTERNAL, "%s: no copy kernel for %zu-byte elements", what,
                             elem_size);
    return rt_cuda__launch(d, stream, k, rt_cuda__blocks(p.n, 256), 1, 1, 256, &p, what);
}

/* ---- the backend -------------------------------------------------------------------------- */

static rt_status cuda_alloc(rt_method *m, size_t bytes, const void *init, const char *what,
                            void **out) {
    rt_status status = rt_cuda__method_alloc(m, bytes, init, out);
    if (status != RT_OK)
        rt_error__prefix("%s (%zu bytes): ", what, bytes);
    return status;
}

const rt_backend rt_backend__cuda = {
    .name = "cuda",
    .device_type = RT_DEVICE_CUDA,
    .unavailable_reason = rt_cuda__unavailable_reason,
    .open = cuda_open,
    .alloc = cuda_alloc,
    .finish_load = cuda_finish_load,
    .close = cuda_close,
    .bind_input = cuda_bind_input,
    .begin = cuda_begin,
    .end = cuda_end,
    .run_instruction = cuda_run_instruction,
    .read_condition = cuda_read_condition,
};
