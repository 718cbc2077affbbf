/* execute.c: binding inputs, running the instruction list, reading outputs and attributes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "core/clock.h"
#include "method.h"

/* A method is used by one thread at a time; a second caller is told so, never let in. */
static rt_status enter(rt_method *m, const char *call) {
    if (m == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "%s: method is NULL", call);
    int expected = RT_METHOD_IDLE;
    if (!atomic_compare_exchange_strong(&m->busy, &expected, RT_METHOD_BUSY))
        return RT_METHOD_ERROR(m, RT_INVALID_STATE, "%s while another thread is using the method; "
                               "a method instance is one thread at a time (load one per thread)",
                               call);
    return RT_OK;
}

/* The end of a call; frees the method when another thread destroyed it meanwhile, so the
 * caller must not touch m after this. */
static void leave(rt_method *m) {
    int expected = RT_METHOD_BUSY;
    if (!atomic_compare_exchange_strong(&m->busy, &expected, RT_METHOD_IDLE))
        rt_method__free(m); /* RT_METHOD_DOOMED */
}

static const char *shape_text(char *buf, size_t size, int32_t rank, const int64_t *sizes) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int32_t d = 0; d < rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)sizes[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

#define INPUT_ERROR(m, in, index, code, ...)                                                \
    (rt_error__set((code), __VA_ARGS__),                                                     \
     rt_error__prefix("method '%s': input %zu%s%s%s: ", (m)->name, (size_t)(index),          \
                      (in)->name[0] ? " ('" : "", (in)->name, (in)->name[0] ? "')" : ""),    \
     (code))

/* Dense in the tensor's dim order for these sizes? Dimensions of size 1 may have any stride. */
static bool is_dense(const rt_tensor_value *t, const int64_t *sizes, const int64_t *strides) {
    int64_t dense[RT_MAX_RANK];
    rt_tensor__dense_strides(dense, t->rank, sizes, t->dim_order);
    for (int32_t d = 0; d < t->rank; d++)
        if (sizes[d] != 1 && strides[d] != dense[d])
            return false;
    return true;
}

/* "cpu", "cuda:1", or the raw numbers of an unknown device. */
static const char *device_text(rt_device d, char buf[48]) {
    if (d.type == RT_DEVICE_CPU && d.index == 0)
        return "cpu";
    if (d.type == RT_DEVICE_CUDA)
        snprintf(buf, 48, "cuda:%d", d.index);
    else
        snprintf(buf, 48, "device (type %d, index %d)", d.type, d.index);
    return buf;
}

static rt_status check_input_tensor(rt_method *m, rt_method_input_slot *in, size_t index,
                                    const rt_tensor *src, uint32_t flags) {
    const rt_tensor_value *t = in->value->u.t;
    char have[48], want_shape[256], have_shape[256];
    if (flags & ~(uint32_t)(RT_INPUT_COPY | RT_INPUT_ALLOW_MUTATE))
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "unknown flags 0x%x", flags);
    bool on_host = src->device.type == RT_DEVICE_CPU && src->device.index == 0;
    bool on_method_device = src->device.type == m->options.device.type &&
                            src->device.index == m->options.device.index;
    /* A CUDA method takes host tensors (copied in) and tensors on its own device. */
    if (!on_host && !on_method_device)
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "the tensor is on %s but the "
                           "method runs on %s", device_text(src->device, have),
                           device_text(m->options.device, want_shape));
    if (rt_tensor__type_of(src->dtype) != t->type)
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "has dtype %s, but the method "
                           "expects %s", rt_tensor__dtype_text(src->dtype, have),
                           rt_tensor__type_name(t->type));
    if (src->rank != t->rank)
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "has rank %d, but the method "
                           "expects rank %d (shape %s)", src->rank, t->rank,
                           shape_text(want_shape, sizeof want_shape, t->rank, t->bounds));
    if (src->rank > 0 && src->sizes == NULL)
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "sizes are NULL");
    for (int32_t d = 0; d < t->rank; d++) {
        int64_t size = src->sizes[d];
        bool varies = t->dynamic && (t->dynamic_axes >> d & 1u);
        bool fits = varies ? size >= 0 && size <= t->bounds[d] : size == t->bounds[d];
        if (!fits && t->dynamic && !varies)
            return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "has shape %s, but the "
                               "method expects at most %s with axis %d of size %lld exactly",
                               shape_text(have_shape, sizeof have_shape, t->rank, src->sizes),
                               shape_text(want_shape, sizeof want_shape, t->rank, t->bounds),
                               (int)d, (long long)t->bounds[d]);
        if (!fits)
            return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "has shape %s, but the "
                               "method expects %s%s",
                               shape_text(have_shape, sizeof have_shape, t->rank, src->sizes),
                               t->dynamic ? "at most " : "",
                               shape_text(want_shape, sizeof want_shape, t->rank, t->bounds));
    }
    if (src->strides != NULL &&
        !rt_tensor__strides_fit(src->sizes, src->strides, src->rank, t->elem_size))
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "has strides that reach past any "
                           "address (their byte offsets overflow int64)");
    int64_t numel;
    rt_tensor__checked_numel(src->sizes, src->rank, &numel);
    if (numel > 0 && src->data == NULL)
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "data is NULL");
    return RT_OK;
}

static rt_status bind_tensor(rt_method *m, rt_method_input_slot *in, size_t index,
                             const rt_tensor *src, uint32_t flags) {
    RT_RETURN_IF_ERROR(check_input_tensor(m, in, index, src, flags));
    rt_tensor_value *t = in->value->u.t;
    int64_t strides[RT_MAX_RANK];
    if (src->strides != NULL)
        memcpy(strides, src->strides, (size_t)src->rank * sizeof *strides);
    else
        rt_tensor__dense_strides(strides, src->rank, src->sizes, NULL);
    memcpy(t->sizes, src->sizes, (size_t)t->rank * sizeof *t->sizes);
    rt_tensor__update_strides(t);
    bool aligned = (uintptr_t)src->data % t->elem_size == 0;
    bool may_alias = !t->written || (flags & RT_INPUT_ALLOW_MUTATE);
    bool may_bind = !(flags & RT_INPUT_COPY) && aligned && may_alias;
    rt_status status = m->backend->bind_input(m, t, src, strides, is_dense(t, t->sizes, strides),
                                              may_bind, &in->zero_copy);
    if (status != RT_OK)
        rt_error__prefix("method '%s': input %zu: ", m->name, index);
    return status;
}

static void unbind(rt_method *m, rt_method_input_slot *in) {
    in->bound = false;
    in->zero_copy = false;
    m->has_outputs = false;
    if (in->value->kind == RT_VALUE_TENSOR)
        in->value->u.t->data = in->value->u.t->home;
}

/* set_input's work on a method the caller has entered; index is in range. */
static rt_status set_input_entered(rt_method *m, size_t index, const rt_tensor *tensor,
                                   uint32_t flags) {
    rt_method_input_slot *in = &m->inputs[index];
    unbind(m, in);
    rt_status status;
    if (tensor == NULL)
        status = INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "tensor is NULL");
    else if (in->value->kind != RT_VALUE_TENSOR)
        status = INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "is a %s scalar, not a "
                             "tensor; bind it with rt_method_set_input_scalar",
                             rt_value__kind_name(in->value->kind));
    else
        status = bind_tensor(m, in, index, tensor, flags);
    in->bound = status == RT_OK;
    return status;
}

RT_API rt_status rt_method_set_input(rt_method *m, size_t index, const rt_tensor *tensor,
                                     uint32_t flags) {
    RT_RETURN_IF_ERROR(enter(m, "set_input"));
    rt_status status;
    if (index >= m->num_inputs)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "input index %zu is out of range (the "
                                 "method has %u inputs)", index, m->num_inputs);
    else
        status = set_input_entered(m, index, tensor, flags);
    leave(m);
    return status;
}

static rt_status bind_scalar(rt_method *m, rt_method_input_slot *in, size_t index,
                             const rt_scalar *s) {
    rt_value *v = in->value;
    if (s == NULL)
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "scalar is NULL");
    bool integral = s->kind == RT_VALUE_INT || s->kind == RT_VALUE_BOOL;
    switch (v->kind) {
    case RT_VALUE_INT:
        if (!integral)
            break;
        v->u.i = s->i;
        return RT_OK;
    case RT_VALUE_DOUBLE:
        if (s->kind == RT_VALUE_DOUBLE)
            v->u.d = s->d;
        else if (integral)
            v->u.d = (double)s->i;
        else
            break;
        return RT_OK;
    case RT_VALUE_BOOL:
        if (!integral || (s->i != 0 && s->i != 1))
            break;
        v->u.b = s->i != 0;
        return RT_OK;
    case RT_VALUE_TENSOR:
        return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "is a tensor; bind it with "
                           "rt_method_set_input");
    default:
        break;
    }
    return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "expects a %s scalar but was given "
                       "a %s", rt_value__kind_name(v->kind), rt_value__kind_name(s->kind));
}

static rt_status set_scalar_entered(rt_method *m, size_t index, const rt_scalar *s) {
    rt_method_input_slot *in = &m->inputs[index];
    unbind(m, in);
    rt_status status = bind_scalar(m, in, index, s);
    in->bound = status == RT_OK;
    return status;
}

RT_API rt_status rt_method_set_input_scalar(rt_method *m, size_t index, const rt_scalar *s) {
    RT_RETURN_IF_ERROR(enter(m, "set_input_scalar"));
    rt_status status;
    if (index >= m->num_inputs)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "input index %zu is out of range (the "
                                 "method has %u inputs)", index, m->num_inputs);
    else
        status = set_scalar_entered(m, index, s);
    leave(m);
    return status;
}

/* ---- execution -------------------------------------------------------------------------- */


static rt_status record_event(rt_method *m, const rt_instruction *ins, uint32_t pc,
                              uint64_t start, uint64_t end) {
    if (m->num_events == m->events_capacity) {
        size_t capacity = m->events_capacity ? 2 * m->events_capacity : 64;
        rt_profile_event *grown = realloc(m->events, capacity * sizeof *grown);
        if (grown == NULL)
            return rt_error__oom("profile events");
        m->events = grown;
        m->events_capacity = capacity;
    }
    rt_profile_event *e = &m->events[m->num_events++];
    e->op_name = ins->op->name;
    e->instruction = pc;
    e->reserved = 0;
    e->start_ns = start;
    e->end_ns = end;
    return RT_OK;
}

/* Whether a jump's condition holds: a scalar, or the first element of a tensor (prepare
 * allowed only non-empty bool or integer ones), which the backend reads where it lies. */
static rt_status read_condition(rt_method *m, const rt_value *cond, bool *out) {
    switch (cond->kind) {
    case RT_VALUE_BOOL: *out = cond->u.b; return RT_OK;
    case RT_VALUE_INT: *out = cond->u.i != 0; return RT_OK;
    default: return m->backend->read_condition(m, cond->u.t, out);
    }
}

static rt_status run_instructions(rt_method *m) {
    int32_t threads = m->options.num_threads > 0 ? m->options.num_threads
                                                 : rt_threadpool__default_threads();
    bool profile = (m->options.flags & RT_METHOD_PROFILE) != 0;
    uint64_t max_steps = m->options.max_steps, steps = 0;
    m->num_events = 0;
    uint32_t pc = 0;
    while (pc < m->num_instructions) {
        if (max_steps != 0 && ++steps > max_steps)
            return RT_METHOD_ERROR(m, RT_INVALID_STATE, "execution stopped at instruction %u after "
                                   "%llu steps, the method's max_steps limit", pc,
                                   (unsigned long long)max_steps);
        rt_instruction *ins = &m->instructions[pc];
        switch (ins->kind) {
        case RT_INSTR_KERNEL: {
            ins->ctx.num_threads = threads;
            uint64_t start = profile ? rt_clock__now_ns() : 0;
            RT_RETURN_IF_ERROR(m->backend->run_instruction(m, pc));
            if (profile)
                RT_RETURN_IF_ERROR(record_event(m, ins, pc, start, rt_clock__now_ns()));
            pc++;
            break;
        }
        case RT_INSTR_JUMP:
            pc = ins->target;
            break;
        case RT_INSTR_JUMP_IF_TRUE:
        case RT_INSTR_JUMP_IF_FALSE: {
            bool holds;
            RT_RETURN_IF_ERROR(read_condition(m, ins->cond, &holds));
            bool jump = holds == (ins->kind == RT_INSTR_JUMP_IF_TRUE);
            pc = jump ? ins->target : pc + 1;
            break;
        }
        default:
            return RT_METHOD_ERROR(m, RT_INTERNAL, "instruction %u has unverified kind %u", pc,
                                   ins->kind);
        }
    }
    return RT_OK;
}

static rt_status execute_entered(rt_method *m) {
    rt_status status = RT_OK;
    m->has_outputs = false;
    for (uint32_t i = 0; i < m->num_inputs && status == RT_OK; i++) {
        rt_method_input_slot *in = &m->inputs[i];
        if (!in->bound)
            status = INPUT_ERROR(m, in, i, RT_INVALID_STATE, "is not set; bind every input "
                                 "(set_input) before execute");
    }
    if (status == RT_OK) {
        /* end returns once the results are ready for the host and any device stream. */
        status = m->backend->begin(m);
        if (status == RT_OK)
            status = m->backend->end(m, run_instructions(m));
    }
    m->has_outputs = status == RT_OK;
    return status;
}

RT_API rt_status rt_method_execute(rt_method *m) {
    RT_RETURN_IF_ERROR(enter(m, "execute"));
    rt_status status = execute_entered(m);
    leave(m);
    return status;
}

/* ---- outputs, attributes, profile ------------------------------------------------------- */

static void tensor_view(rt_tensor *out, const rt_method *m, rt_tensor_value *t) {
    out->data = t->data;
    out->device = m->options.device;
    out->rank = t->rank;
    out->dtype = rt_tensor__dtype_of(t->type);
    out->sizes = t->sizes;
    out->strides = t->strides;
}

static rt_status output_value(rt_method *m, size_t index, rt_value **out) {
    if (index >= m->num_outputs)
        return RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "output index %zu is out of range (the "
                               "method has %u outputs)", index, m->num_outputs);
    if (!m->has_outputs)
        return RT_METHOD_ERROR(m, RT_INVALID_STATE, "output %zu is not available: execute the "
                               "method successfully first", index);
    *out = m->outputs[index].value;
    return RT_OK;
}

RT_API rt_status rt_method_output(rt_tensor *out, rt_method *m, size_t index) {
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_method_output: out is NULL");
    RT_RETURN_IF_ERROR(enter(m, "output"));
    rt_value *v = NULL;
    rt_status status = output_value(m, index, &v);
    if (status == RT_OK && v->kind != RT_VALUE_TENSOR)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "output %zu is a %s scalar; read it with "
                                 "rt_method_output_scalar", index, rt_value__kind_name(v->kind));
    if (status == RT_OK)
        tensor_view(out, m, v->u.t);
    leave(m);
    return status;
}

RT_API rt_status rt_method_output_scalar(rt_scalar *out, rt_method *m, size_t index) {
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_method_output_scalar: out is NULL");
    RT_RETURN_IF_ERROR(enter(m, "output_scalar"));
    rt_value *v = NULL;
    rt_status status = output_value(m, index, &v);
    if (status == RT_OK) {
        memset(out, 0, sizeof *out);
        out->kind = v->kind;
        switch (v->kind) {
        case RT_VALUE_INT: out->i = v->u.i; break;
        case RT_VALUE_BOOL: out->i = v->u.b; break;
        case RT_VALUE_DOUBLE: out->d = v->u.d; break;
        default:
            status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "output %zu is a %s; read it with "
                                     "rt_method_output", index, rt_value__kind_name(v->kind));
        }
    }
    leave(m);
    return status;
}

/* ---- one call: bind, execute, view ----------------------------------------------------- */

/* A scalar input handed to rt_method_run as a 0-d host tensor: int64, float64 or bool. */
static rt_status scalar_of_tensor(rt_method *m, size_t index, const rt_tensor *src,
                                  rt_scalar *out) {
    rt_method_input_slot *in = &m->inputs[index];
    char have[48];
    memset(out, 0, sizeof *out);
    bool on_host = src->device.type == RT_DEVICE_CPU && src->device.index == 0;
    rt_dtype d = src->dtype;
    if (on_host && src->rank == 0 && src->data != NULL && d.lanes == 1) {
        if (d.code == RT_DTYPE_INT && d.bits == 64) {
            out->kind = RT_VALUE_INT;
            memcpy(&out->i, src->data, sizeof out->i);
            return RT_OK;
        }
        if (d.code == RT_DTYPE_FLOAT && d.bits == 64) {
            out->kind = RT_VALUE_DOUBLE;
            memcpy(&out->d, src->data, sizeof out->d);
            return RT_OK;
        }
        if (d.code == RT_DTYPE_BOOL && d.bits == 8) {
            out->kind = RT_VALUE_BOOL;
            out->i = *(const uint8_t *)src->data;
            return RT_OK;
        }
    }
    return INPUT_ERROR(m, in, index, RT_INVALID_ARGUMENT, "is a %s scalar: rt_method_run takes "
                       "it as a 0-d int64, float64 or bool tensor on the CPU with data, not a "
                       "%s tensor of rank %d on %s%s", rt_value__kind_name(in->value->kind),
                       rt_tensor__dtype_text(d, have), src->rank,
                       on_host ? "the cpu" : "another device",
                       src->data == NULL ? " with NULL data" : "");
}

static rt_status bind_for_run(rt_method *m, size_t index, const rt_tensor *src,
                              uint32_t flags) {
    if (m->inputs[index].value->kind == RT_VALUE_TENSOR)
        return set_input_entered(m, index, src, flags);
    rt_scalar s;
    rt_status status = scalar_of_tensor(m, index, src, &s);
    if (status != RT_OK) {
        unbind(m, &m->inputs[index]); /* as a failed set_input_scalar leaves it */
        return status;
    }
    return set_scalar_entered(m, index, &s);
}

/* Scalar outputs are viewed as 0-d host tensors of their storage in the method. */
static void output_view(rt_tensor *out, const rt_method *m, rt_value *v) {
    if (v->kind == RT_VALUE_TENSOR) {
        tensor_view(out, m, v->u.t);
        return;
    }
    memset(out, 0, sizeof *out);
    out->device.type = RT_DEVICE_CPU;
    out->dtype.lanes = 1;
    switch (v->kind) {
    case RT_VALUE_INT:
        out->data = &v->u.i;
        out->dtype.code = RT_DTYPE_INT;
        out->dtype.bits = 64;
        break;
    case RT_VALUE_DOUBLE:
        out->data = &v->u.d;
        out->dtype.code = RT_DTYPE_FLOAT;
        out->dtype.bits = 64;
        break;
    default: /* RT_VALUE_BOOL: the loader allows no other output kinds */
        out->data = &v->u.b;
        out->dtype.code = RT_DTYPE_BOOL;
        out->dtype.bits = 8;
        break;
    }
}

RT_API rt_status rt_method_run(rt_method *m, const rt_run_io *io) {
    if (io == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_method_run: io is NULL");
    RT_RETURN_IF_ERROR(enter(m, "run"));
    rt_status status = RT_OK;
    size_t num_inputs = io->num_inputs, num_outputs = io->num_outputs;
    if (num_inputs != 0 && num_inputs != m->num_inputs)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "rt_method_run was given %zu inputs; the "
                                 "method takes %u (or 0 to run on the bound inputs)", num_inputs,
                                 m->num_inputs);
    else if (num_outputs != 0 && num_outputs != m->num_outputs)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "rt_method_run was given room for %zu "
                                 "outputs; the method has %u (or 0 for none)", num_outputs,
                                 m->num_outputs);
    else if ((num_inputs != 0 && io->inputs == NULL) ||
             (num_outputs != 0 && io->outputs == NULL))
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "rt_method_run: inputs or outputs is "
                                 "NULL with a nonzero count");
    else if (io->flags & ~(uint32_t)(RT_INPUT_COPY | RT_INPUT_ALLOW_MUTATE) || io->reserved)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "rt_method_run: unknown flags 0x%x or "
                                 "nonzero reserved field", io->flags);
    /* In order, as set_input calls would: a failure leaves the inputs before it bound, it
     * unset, and those after it as they were. */
    for (size_t i = 0; i < num_inputs && status == RT_OK; i++)
        status = bind_for_run(m, i, &io->inputs[i], io->flags);
    if (status == RT_OK)
        status = execute_entered(m);
    for (size_t i = 0; i < num_outputs && status == RT_OK; i++)
        output_view(&io->outputs[i], m, m->outputs[i].value);
    leave(m);
    return status;
}

RT_API rt_status rt_method_attribute(rt_tensor *out, rt_method *m, const char *name) {
    if (out == NULL || name == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_method_attribute: out and name must not "
                             "be NULL");
    RT_RETURN_IF_ERROR(enter(m, "attribute"));
    rt_status status = RT_OK;
    uint32_t a = 0;
    while (a < m->num_attributes && strcmp(m->attributes[a].name, name) != 0)
        a++;
    if (a == m->num_attributes)
        status = RT_METHOD_ERROR(m, RT_NOT_FOUND, "no attribute named '%s' (the method has %u "
                                 "attributes)", name, m->num_attributes);
    else
        tensor_view(out, m, m->attributes[a].tensor);
    leave(m);
    return status;
}

/* The profile readers take a const method, but an execute in another thread may be growing
 * the event list: they claim the busy flag too, the one field a reader may change. */
static rt_method *busy_flag_owner(const rt_method *m) { return (rt_method *)m; }

RT_API size_t rt_method_profile_event_count(const rt_method *m) {
    if (m == NULL || enter(busy_flag_owner(m), "profile_event_count") != RT_OK)
        return 0;
    size_t n = m->num_events;
    leave(busy_flag_owner(m));
    return n;
}

RT_API rt_status rt_method_profile_event(rt_profile_event *out, const rt_method *m,
                                         size_t index) {
    if (out == NULL || m == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_method_profile_event: out and method "
                             "must not be NULL");
    RT_RETURN_IF_ERROR(enter(busy_flag_owner(m), "profile_event"));
    rt_status status = RT_OK;
    if (index >= m->num_events)
        status = RT_METHOD_ERROR(m, RT_INVALID_ARGUMENT, "profile event %zu is out of range (%zu "
                                 "recorded%s)", index, m->num_events,
                                 (m->options.flags & RT_METHOD_PROFILE) ? "" :
                                 "; load the method with RT_METHOD_PROFILE");
    else
        *out = m->events[index];
    leave(busy_flag_owner(m));
    return status;
}
