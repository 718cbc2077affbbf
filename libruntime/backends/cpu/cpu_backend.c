/* cpu_backend.c: methods on the host's CPU: host memory, inputs read in place when dense,
 * kernels called directly. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "core/alloc.h"
#include "core/error.h"

/* The method's host allocations (arenas, state, kernel scratch), freed at close. */
typedef struct cpu_method {
    void **buffers;
    size_t count, capacity;
} cpu_method;

static const char *cpu_unavailable_reason(void) { return ""; }

static rt_status cpu_open(rt_method *m) {
    if (m->options.device.index != 0)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': unknown device (type %d, "
                             "index %d)", m->name, m->options.device.type,
                             m->options.device.index);
    m->backend_state = calloc(1, sizeof(cpu_method));
    return m->backend_state != NULL ? RT_OK : rt_error__oom("method state");
}

static rt_status cpu_alloc(rt_method *m, size_t bytes, const void *init, const char *what,
                           void **out) {
    cpu_method *cpu = m->backend_state;
    *out = NULL;
    if (cpu->count == cpu->capacity) {
        size_t capacity = cpu->capacity ? 2 * cpu->capacity : 16;
        void **grown = realloc(cpu->buffers, capacity * sizeof *grown);
        if (grown == NULL)
            return rt_error__oom("method buffer table");
        cpu->buffers = grown;
        cpu->capacity = capacity;
    }
    void *buffer = rt_alloc__aligned(bytes);
    if (buffer == NULL)
        return rt_error__set(RT_OUT_OF_MEMORY, "method '%s': cannot allocate %s (%zu bytes)",
                             m->name, what, bytes);
    if (init != NULL)
        memcpy(buffer, init, bytes);
    cpu->buffers[cpu->count++] = buffer;
    *out = buffer;
    return RT_OK;
}

/* The kernels' host scratch, shared by every instruction. */
static rt_status cpu_finish_load(rt_method *m) {
    void *scratch = NULL;
    if (m->scratch_bytes > 0) {
        /* The limit bounds arenas, state, op state and scratch together. */
        uint64_t limit = m->options.memory_limit;
        if (limit != 0 && (m->memory_used > limit || m->scratch_bytes > limit - m->memory_used))
            return rt_error__set(RT_OUT_OF_MEMORY, "method '%s': kernels need %zu bytes of "
                                 "scratch beside %llu bytes of planned, state and op memory, "
                                 "more than its memory limit of %llu bytes", m->name,
                                 m->scratch_bytes, (unsigned long long)m->memory_used,
                                 (unsigned long long)limit);
        m->memory_used += m->scratch_bytes;
        RT_RETURN_IF_ERROR(cpu_alloc(m, m->scratch_bytes, NULL, "kernel scratch", &scratch));
    }
    for (uint32_t i = 0; i < m->num_instructions; i++) {
        m->instructions[i].ctx.scratch = scratch;
        m->instructions[i].ctx.scratch_bytes = m->scratch_bytes;
    }
    return RT_OK;
}

static void cpu_close(rt_method *m) {
    cpu_method *cpu = m->backend_state;
    if (cpu == NULL)
        return;
    for (size_t i = 0; i < cpu->count; i++)
        rt_alloc__free(cpu->buffers[i]);
    free(cpu->buffers);
    free(cpu);
    m->backend_state = NULL;
}

static rt_status cpu_bind_input(rt_method *m, rt_tensor_value *t, const rt_tensor *src,
                                const int64_t *src_strides, bool dense, bool may_bind,
                                bool *zero_copy) {
    (void)m;
    int64_t numel = rt_tensor__numel(t);
    *zero_copy = numel > 0 && may_bind && dense;
    t->data = *zero_copy ? src->data : t->home;
    if (!*zero_copy && numel > 0)
        rt_tensor__copy_strided(t->home, t->strides, src->data, src_strides, t->rank, t->sizes,
                                t->elem_size);
    return RT_OK;
}

static rt_status cpu_begin(rt_method *m) {
    (void)m;
    return RT_OK;
}

static rt_status cpu_end(rt_method *m, rt_status status) {
    (void)m;
    return status;
}

static rt_status cpu_run_instruction(rt_method *m, uint32_t pc) {
    rt_instruction *ins = &m->instructions[pc];
    return ins->op->run(&ins->ctx);
}

static rt_status cpu_read_condition(rt_method *m, const rt_tensor_value *t, bool *out) {
    (void)m;
    const unsigned char *bytes = t->data;
    *out = false;
    for (uint32_t k = 0; k < t->elem_size; k++)
        *out = *out || bytes[k] != 0;
    return RT_OK;
}

const rt_backend rt_backend__cpu = {
    .name = "cpu",
    .device_type = RT_DEVICE_CPU,
    .unavailable_reason = cpu_unavailable_reason,
    .open = cpu_open,
    .alloc = cpu_alloc,
    .finish_load = cpu_finish_load,
    .close = cpu_close,
    .bind_input = cpu_bind_input,
    .begin = cpu_begin,
    .end = cpu_end,
    .run_instruction = cpu_run_instruction,
    .read_condition = cpu_read_condition,
};
