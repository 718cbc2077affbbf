/* backend.h: what the engine (method.c, execute.c) asks of the place a method runs. Each
 * backend (backends/cpu, backends/cuda) fills one rt_backend; the engine finds it by the
 * method's device and calls only these, never asking which backend it has.
 *
 * A method's life through them: open, alloc (arenas, state), every instruction prepared on
 * the host, finish_load; then per execute begin, run_instruction / read_condition as the
 * program goes, end; bind_input at each set_input; close once. */
#ifndef RT_BACKEND_H
#define RT_BACKEND_H

#include "method.h"

typedef struct rt_backend {
    const char *name; /* as rt_backend_available() takes it: "cpu", "cuda" */
    rt_device_type device_type;
    /* "" when methods can run here, else why not, as a sentence. */
    const char *(*unavailable_reason)(void);

    /* Load, before any memory is allocated: set up m->backend_state for m->options.device
     * (an unusable device fails here, naming why). close undoes what open did even after a
     * failed load. */
    rt_status (*open)(rt_method *m);
    /* Load: `bytes` of the backend's memory for arenas and state, owned by the method until
     * close; `init` (host bytes) copied in, else zero-filled. `what` names the use in an error
     * ("arena 2"). */
    rt_status (*alloc)(rt_method *m, size_t bytes, const void *init, const char *what,
                       void **out);
    /* Load, once every instruction is prepared (m->scratch_bytes: the most host scratch a
     * prepare asked for): the backend's last checks and set-up (scratch, constants). */
    rt_status (*finish_load)(rt_method *m);
    void (*close)(rt_method *m);

    /* set_input: bind `src` (checked: dtype, sizes, a device the method takes) to input
     * tensor t, whose sizes and strides are set. `dense`: src's strides are t's dense
     * layout; `may_bind`: the engine allows reading src in place (aligned, not written by
     * the method, no copy asked for). Sets *zero_copy when bound in place. */
    rt_status (*bind_input)(rt_method *m, rt_tensor_value *t, const rt_tensor *src,
                            const int64_t *src_strides, bool dense, bool may_bind,
                            bool *zero_copy);

    /* execute: begin before the first instruction; end after the last (or the first error,
     * `status`), returning once every result is ready for the host and any device stream. */
    rt_status (*begin)(rt_method *m);
    rt_status (*end)(rt_method *m, rt_status status);
    rt_status (*run_instruction)(rt_method *m, uint32_t pc);
    /* A jump on a tensor condition: whether its first element is nonzero. */
    rt_status (*read_condition)(rt_method *m, const rt_tensor_value *t, bool *out);
} rt_backend;

/* The backend for a device type, or NULL when there is none. */
const rt_backend *rt_backend__for_device(rt_device_type type);
/* The backend of that name, or NULL. */
const rt_backend *rt_backend__named(const char *name);

#endif
