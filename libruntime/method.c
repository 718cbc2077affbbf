/* method.c: loading a method: the value table, memory, and the prepare step.
 *
 * Everything a method needs is allocated here, once: arenas, state buffers and scratch through
 * its backend (backend.h), and the per-instruction argument lists. Prepare resolves each op
 * and lets it check its arguments, so execute (execute.c) only runs kernels. */
#include "method.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "core/log.h"
#include "core/threadpool.h"

RT_API void rt_method_options_init(rt_method_options *out) {
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    out->version = RT_METHOD_OPTIONS_VERSION;
    out->device.type = RT_DEVICE_CPU;
}

static rt_status check_options(const rt_method_options *o, const char *method) {
    if (o->version != RT_METHOD_OPTIONS_VERSION)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': options version %u is not %d; "
                             "initialise options with rt_method_options_init", method,
                             o->version, RT_METHOD_OPTIONS_VERSION);
    if (o->flags & ~(uint32_t)RT_METHOD_PROFILE)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': unknown option flags 0x%x",
                             method, o->flags);
    if (o->num_threads < 0)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': num_threads %d is negative",
                             method, o->num_threads);
    if (rt_backend__for_device((rt_device_type)o->device.type) == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': unknown device (type %d, "
                             "index %d)", method, o->device.type, o->device.index);
    if (o->device.index < 0)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': device index %d is "
                             "negative", method, o->device.index);
    return RT_OK; /* the backend checks the device itself when the method opens it */
}

static uint64_t saturating_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Sum of what the method allocates up front, for the memory limit. */
static rt_status check_memory_limit(rt_method *m) {
    const rt_format *f = &m->program->format;
    uint64_t total = 0;
    for (uint32_t a = 0; a < m->file->num_arenas; a++)
        total = saturating_add(total, (uint64_t)f->words[m->file->arenas + a]);
    for (uint32_t v = 0; v < m->file->num_values; v++) {
        const rt_file_value *fv = &f->values[m->file->values + v];
        if (fv->kind == RT_VALUE_TENSOR && fv->storage == RT_STORAGE_STATE) {
            uint64_t n = rt_format__dtype_size(fv->dtype);
            for (uint32_t d = 0; d < fv->rank; d++) {
                uint64_t size = (uint64_t)f->words[fv->a + d];
                n = size != 0 && n > UINT64_MAX / size ? UINT64_MAX : n * size;
            }
            total = saturating_add(total, n);
        }
    }
    m->memory_used = total;
    uint64_t limit = m->options.memory_limit;
    if (limit != 0 && total > limit)
        return RT_METHOD_ERROR(m, RT_OUT_OF_MEMORY, "needs %llu bytes of planned and state memory, "
                               "more than its memory limit of %llu bytes",
                               (unsigned long long)total, (unsigned long long)limit);
    return RT_OK;
}

static rt_status allocate_arenas(rt_method *m) {
    const rt_format *f = &m->program->format;
    m->num_arenas = m->file->num_arenas;
    m->arenas = calloc(m->num_arenas ? m->num_arenas : 1, sizeof *m->arenas);
    if (m->arenas == NULL)
        return rt_error__oom("arena table");
    for (uint32_t a = 0; a < m->num_arenas; a++) {
        uint64_t size = (uint64_t)f->words[m->file->arenas + a];
        char what[32];
        snprintf(what, sizeof what, "arena %u", a);
        if (size > SIZE_MAX)
            return RT_METHOD_ERROR(m, RT_OUT_OF_MEMORY, "cannot allocate %s (%llu bytes)", what,
                                   (unsigned long long)size);
        RT_RETURN_IF_ERROR(m->backend->alloc(m, (size_t)size, NULL, what, &m->arenas[a]));
    }
    return RT_OK;
}

/* State persists across executions: its own buffer, initialised from its constant if it has
 * one, else zero-filled; on the method's device. */
static rt_status allocate_state(rt_method *m, const rt_file_value *fv, size_t nbytes,
                                uint32_t index, void **out) {
    const void *init = fv->c != RT_FORMAT_NO_INDEX ? m->program->constant_data[fv->c] : NULL;
    char what[48];
    snprintf(what, sizeof what, "state value %u", index);
    return m->backend->alloc(m, nbytes, init, what, out);
}

static rt_status init_tensor(rt_method *m, rt_tensor_value *t, const rt_file_value *fv,
                             uint32_t index) {
    const rt_format *f = &m->program->format;
    t->type = rt_tensor__type_of(fv->dtype);
    t->elem_size = (uint32_t)rt_tensor__type_size(t->type);
    t->rank = fv->rank;
    t->dynamic = (fv->flags & RT_VALUE_FLAG_DYNAMIC) != 0;
    t->dynamic_axes = !t->dynamic                       ? 0u
                      : fv->flags & RT_VALUE_FLAG_AXES ? fv->reserved
                                                       : UINT32_MAX;
    t->writable = fv->storage != RT_STORAGE_CONSTANT;
    for (int32_t d = 0; d < t->rank; d++) {
        t->sizes[d] = t->bounds[d] = f->words[fv->a + d];
        t->dim_order[d] = (uint8_t)f->words[fv->b + d];
    }
    rt_tensor__update_strides(t);
    size_t nbytes = rt_tensor__nbytes(t);
    switch (fv->storage) {
    case RT_STORAGE_ARENA:
        t->home = (char *)m->arenas[fv->c] + fv->payload;
        break;
    case RT_STORAGE_CONSTANT:
        /* Read-only by contract: prepare refuses any op that would write a constant. A device
         * backend uploads it once every instruction is prepared (its finish_load). */
        t->home = (void *)m->program->constant_data[fv->c];
        break;
    case RT_STORAGE_STATE:
        RT_RETURN_IF_ERROR(allocate_state(m, fv, nbytes, index, &t->home));
        break;
    default:
        return RT_METHOD_ERROR(m, RT_INTERNAL, "value %u has unverified storage", index);
    }
    t->data = t->home;
    return RT_OK;
}

static rt_status build_values(rt_method *m) {
    const rt_format *f = &m->program->format;
    const rt_file_value *fvs = &f->values[m->file->values];
    uint32_t n = m->num_values = m->file->num_values;
    size_t num_tensors = 0, num_items = 0;
    for (uint32_t v = 0; v < n; v++) {
        num_tensors += fvs[v].kind == RT_VALUE_TENSOR;
        num_items += fvs[v].kind == RT_VALUE_TENSOR_LIST ? fvs[v].b : 0;
    }
    m->values = calloc(n ? n : 1, sizeof *m->values);
    m->tensors = calloc(num_tensors ? num_tensors : 1, sizeof *m->tensors);
    m->list_items = calloc(num_items ? num_items : 1, sizeof *m->list_items);
    if (!m->values || !m->tensors || !m->list_items)
        return rt_error__oom("value table");
    size_t next_tensor = 0;
    for (uint32_t v = 0; v < n; v++) {
        const rt_file_value *fv = &fvs[v];
        rt_value *val = &m->values[v];
        val->kind = fv->kind;
        switch (fv->kind) {
        case RT_VALUE_INT: val->u.i = fv->payload; break;
        case RT_VALUE_BOOL: val->u.b = fv->payload != 0; break;
        case RT_VALUE_DOUBLE: memcpy(&val->u.d, &fv->payload, sizeof(double)); break;
        case RT_VALUE_STRING: val->u.s = rt_format__string(f, (uint32_t)fv->payload); break;
        case RT_VALUE_INT_LIST:
            val->u.ints.items = f->words + fv->a;
            val->u.ints.count = fv->b;
            break;
        case RT_VALUE_DOUBLE_LIST:
            /* Doubles are stored as their bit patterns in 8-byte words. */
            val->u.doubles.items = (const double *)(const void *)(f->words + fv->a);
            val->u.doubles.count = fv->b;
            break;
        case RT_VALUE_TENSOR:
            val->u.t = &m->tensors[next_tensor++];
            RT_RETURN_IF_ERROR(init_tensor(m, val->u.t, fv, v));
            break;
        default: break;
        }
    }
    /* Tensor lists point at tensors, so they are filled once every tensor exists. */
    size_t next_item = 0;
    for (uint32_t v = 0; v < n; v++) {
        if (fvs[v].kind != RT_VALUE_TENSOR_LIST)
            continue;
        rt_value *val = &m->values[v];
        val->u.tensors.items = &m->list_items[next_item];
        val->u.tensors.count = fvs[v].b;
        for (uint32_t k = 0; k < fvs[v].b; k++)
            m->list_items[next_item++] = m->values[f->words[fvs[v].a + k]].u.t;
    }
    return RT_OK;
}

static rt_status prepare_kernel(rt_method *m, rt_instruction *ins, const rt_file_instruction *fi,
                                uint32_t index, rt_value **args) {
    const rt_format *f = &m->program->format;
    const char *op_name = rt_format__string(f, f->ops[fi->a]);
    ins->op = rt_ops__find(op_name);
    if (ins->op == NULL)
        return RT_METHOD_ERROR(m, RT_NOT_FOUND, "instruction %u calls op '%s', which this build "
                               "of libruntime does not have", index, op_name);
    for (uint32_t k = 0; k < fi->c; k++)
        args[k] = &m->values[f->words[fi->b + k]];
    rt_op_ctx *ctx = &ins->ctx;
    ctx->method_name = m->name;
    ctx->op_name = ins->op->name;
    ctx->instruction = index;
    ctx->args = args;
    ctx->nargs = fi->c;
    ctx->preparing = true;
    /* Prepare sees every tensor at its planned bounds. */
    for (uint32_t k = 0; k < fi->c; k++) {
        if (args[k]->kind == RT_VALUE_TENSOR) {
            rt_tensor_value *t = args[k]->u.t;
            memcpy(t->sizes, t->bounds, sizeof t->sizes);
            rt_tensor__update_strides(t);
        }
    }
    uint64_t limit = m->options.memory_limit;
    ctx->state_budget = limit == 0 ? UINT64_MAX : limit - m->memory_used;
    uint64_t budget = ctx->state_budget;
    rt_status status = ins->op->prepare(ctx);
    ctx->preparing = false;
    m->memory_used += budget - ctx->state_budget;
    if (status != RT_OK)
        return status;
    if (ctx->scratch_bytes > m->scratch_bytes)
        m->scratch_bytes = ctx->scratch_bytes;
    return RT_OK;
}

static rt_status check_condition(rt_method *m, const rt_value *cond, uint32_t index) {
    if (cond->kind == RT_VALUE_BOOL || cond->kind == RT_VALUE_INT)
        return RT_OK;
    if (cond->kind == RT_VALUE_TENSOR) {
        const rt_tensor_value *t = cond->u.t;
        if ((t->type == RT_BOOL || rt_tensor__type_is_integer(t->type)) &&
            rt_tensor__numel(t) >= 1)
            return RT_OK;
    }
    return RT_METHOD_ERROR(m, RT_INVALID_PROGRAM, "instruction %u: a jump condition must be a bool "
                           "or int scalar, or a non-empty bool or integer tensor", index);
}

static rt_status prepare_instructions(rt_method *m) {
    const rt_format *f = &m->program->format;
    const rt_file_instruction *fis = &f->instructions[m->file->instructions];
    uint32_t n = m->num_instructions = m->file->num_instructions;
    size_t total_args = 0;
    for (uint32_t i = 0; i < n; i++)
        total_args += fis[i].kind == RT_INSTR_KERNEL ? fis[i].c : 0;
    m->instructions = calloc(n ? n : 1, sizeof *m->instructions);
    m->arg_storage = calloc(total_args ? total_args : 1, sizeof *m->arg_storage);
    if (!m->instructions || !m->arg_storage)
        return rt_error__oom("instruction table");
    size_t next_arg = 0;
    for (uint32_t i = 0; i < n; i++) {
        rt_instruction *ins = &m->instructions[i];
        ins->kind = fis[i].kind;
        if (ins->kind == RT_INSTR_KERNEL) {
            RT_RETURN_IF_ERROR(prepare_kernel(m, ins, &fis[i], i, &m->arg_storage[next_arg]));
            next_arg += fis[i].c;
            continue;
        }
        ins->target = fis[i].a;
        if (ins->kind != RT_INSTR_JUMP) {
            ins->cond = &m->values[fis[i].b];
            RT_RETURN_IF_ERROR(check_condition(m, ins->cond, i));
        }
    }
    /* Put every tensor back at its bounds; dynamic ones get real sizes when bound or run. */
    size_t num_tensors = 0;
    for (uint32_t v = 0; v < m->num_values; v++)
        num_tensors += m->values[v].kind == RT_VALUE_TENSOR;
    for (size_t t = 0; t < num_tensors; t++) {
        memcpy(m->tensors[t].sizes, m->tensors[t].bounds, sizeof m->tensors[t].sizes);
        rt_tensor__update_strides(&m->tensors[t]);
    }
    return RT_OK;
}

static rt_status build_io(rt_method *m) {
    const rt_format *f = &m->program->format;
    const rt_file_method *fm = m->file;
    m->num_inputs = fm->num_inputs;
    m->num_outputs = fm->num_outputs;
    m->num_attributes = fm->num_attributes;
    m->inputs = calloc(m->num_inputs ? m->num_inputs : 1, sizeof *m->inputs);
    m->outputs = calloc(m->num_outputs ? m->num_outputs : 1, sizeof *m->outputs);
    m->attributes = calloc(m->num_attributes ? m->num_attributes : 1, sizeof *m->attributes);
    if (!m->inputs || !m->outputs || !m->attributes)
        return rt_error__oom("input and output tables");
    for (uint32_t i = 0; i < m->num_inputs; i++) {
        const int64_t *pair = &f->words[fm->inputs + 2 * (size_t)i];
        m->inputs[i].value = &m->values[pair[0]];
        m->inputs[i].name = pair[1] >= 0 ? rt_format__string(f, (uint32_t)pair[1]) : "";
    }
    for (uint32_t i = 0; i < m->num_outputs; i++) {
        const int64_t *pair = &f->words[fm->outputs + 2 * (size_t)i];
        m->outputs[i].value = &m->values[pair[0]];
        m->outputs[i].name = pair[1] >= 0 ? rt_format__string(f, (uint32_t)pair[1]) : "";
    }
    for (uint32_t i = 0; i < m->num_attributes; i++) {
        const int64_t *pair = &f->words[fm->attributes + 2 * (size_t)i];
        m->attributes[i].name = rt_format__string(f, (uint32_t)pair[0]);
        m->attributes[i].tensor = m->values[pair[1]].u.t;
    }
    return RT_OK;
}

RT_API rt_status rt_method_load(rt_method **out, rt_program *program, const char *name,
                                const rt_method_options *options) {
    if (out == NULL || program == NULL || name == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_method_load: out, program and method "
                             "name must not be NULL");
    *out = NULL;
    rt_method_options defaults;
    rt_method_options_init(&defaults);
    if (options == NULL)
        options = &defaults;
    uint32_t index;
    RT_RETURN_IF_ERROR(rt_program__find_method(program, name, &index));
    RT_RETURN_IF_ERROR(check_options(options, name));
    rt_method *m = calloc(1, sizeof *m);
    if (m == NULL)
        return rt_error__oom("method object");
    rt_program_retain(program);
    m->program = program;
    m->file = &program->format.methods[index];
    m->name = rt_format__string(&program->format, m->file->name);
    m->options = *options;
    atomic_init(&m->busy, RT_METHOD_IDLE);
    m->backend = rt_backend__for_device((rt_device_type)options->device.type);
    rt_status status = check_memory_limit(m);
    if (status == RT_OK)
        status = m->backend->open(m);
    if (status == RT_OK)
        status = allocate_arenas(m);
    if (status == RT_OK)
        status = build_values(m);
    if (status == RT_OK)
        status = build_io(m);
    if (status == RT_OK)
        status = prepare_instructions(m);
    if (status == RT_OK)
        status = m->backend->finish_load(m);
    if (status != RT_OK) {
        rt_method_destroy(m);
        return status;
    }
    rt_log__write(RT_LOG_DEBUG, "loaded method '%s': %u values, %u instructions, %u arenas",
                  m->name, m->num_values, m->num_instructions, m->num_arenas);
    *out = m;
    return RT_OK;
}

RT_API void rt_method_destroy(rt_method *m) {
    if (m == NULL)
        return;
    /* A call under way in another thread finishes first and frees the method as it leaves
     * (execute.c); the docs promise no use after free for a destroy that races a call. */
    int state = atomic_load(&m->busy);
    do {
        if (state == RT_METHOD_DOOMED)
            return; /* a second destroy while the call runs: already pending */
    } while (!atomic_compare_exchange_weak(&m->busy, &state, RT_METHOD_DOOMED));
    if (state == RT_METHOD_IDLE)
        rt_method__free(m);
}

void rt_method__free(rt_method *m) {
    if (m->instructions != NULL) {
        for (uint32_t i = 0; i < m->num_instructions; i++) {
            rt_op_ctx *ctx = &m->instructions[i].ctx;
            if (ctx->free_state != NULL && ctx->state != NULL)
                ctx->free_state(ctx->state);
        }
    }
    /* The memory behind arenas, state and scratch (and on a device, constants) is the
     * backend's. */
    m->backend->close(m);
    free(m->arenas);
    free(m->values);
    free(m->tensors);
    free(m->list_items);
    free(m->instructions);
    free(m->arg_storage);
    free(m->inputs);
    free(m->outputs);
    free(m->attributes);
    free(m->events);
    rt_program_release(m->program);
    free(m);
}

RT_API const char *rt_method_name(const rt_method *m) { return m != NULL ? m->name : ""; }

RT_API size_t rt_method_input_count(const rt_method *m) { return m != NULL ? m->num_inputs : 0; }

RT_API size_t rt_method_output_count(const rt_method *m) {
    return m != NULL ? m->num_outputs : 0;
}
