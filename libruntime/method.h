/* method.h: a loaded method instance: its value table, memory and prepared instructions. */
#ifndef RT_METHOD_H
#define RT_METHOD_H

#include <stdatomic.h>

#include "ops/op.h"
#include "program.h"

/* Record an error of method m ("method 'name': ...") and evaluate to its code. */
#define RT_METHOD_ERROR(m, code, ...)                                                     \
    (rt_error__set((code), __VA_ARGS__), rt_error__prefix("method '%s': ", (m)->name), (code))

/* rt_method.busy: a call holds BUSY from entry to exit; rt_method_destroy during a call in
 * another thread marks it DOOMED, and that call frees the method as it leaves. */
enum rt_method_busy { RT_METHOD_IDLE = 0, RT_METHOD_BUSY = 1, RT_METHOD_DOOMED = 2 };

/* Free everything the method holds (rt_method_destroy's work once no call is under way). */
void rt_method__free(rt_method *m);

typedef struct rt_instruction {
    uint32_t kind;            /* rt_instruction_kind */
    uint32_t target;          /* jumps */
    const rt_value *cond;     /* conditional jumps */
    const rt_op_def *op;      /* kernels */
    rt_op_ctx ctx;            /* kernels: arguments and prepared state */
} rt_instruction;

typedef struct rt_method_input {
    rt_value *value;
    const char *name;
    bool bound;               /* set by a successful set_input, cleared by a failed one */
    bool zero_copy;           /* the tensor points at the caller's memory */
} rt_method_input_slot;

typedef struct rt_method_output {
    rt_value *value;
    const char *name;
} rt_method_output_slot;

typedef struct rt_attribute {
    const char *name;
    rt_tensor_value *tensor;
} rt_attribute;

struct rt_method {
    rt_program *program;
    const rt_file_method *file;
    const char *name;
    rt_method_options options;
    atomic_int busy;          /* rt_method_busy: one thread at a time, and destroy's wait */

    rt_value *values;
    uint32_t num_values;
    rt_tensor_value *tensors;
    rt_tensor_value **list_items; /* storage behind every tensor list */

    void **arenas;            /* the backend's memory (rt_backend.alloc) */
    uint32_t num_arenas;
    size_t scratch_bytes;     /* the most host scratch an instruction's prepare asked for */
    uint64_t memory_used;     /* arenas, state values and op state, against memory_limit */

    rt_instruction *instructions;
    uint32_t num_instructions;
    rt_value **arg_storage;

    rt_method_input_slot *inputs;
    uint32_t num_inputs;
    rt_method_output_slot *outputs;
    uint32_t num_outputs;
    rt_attribute *attributes;
    uint32_t num_attributes;
    bool has_outputs;         /* a successful execute since the last set_input */

    const struct rt_backend *backend; /* where it runs (backend.h), from options.device */
    void *backend_state;      /* the backend's own, between its open and close */

    rt_profile_event *events;
    size_t num_events;
    size_t events_capacity;
};

#endif
