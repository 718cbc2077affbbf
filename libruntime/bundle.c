/* bundle.c: the bundled test cases of a program (BUNDLE section, docs/format.md), handed out
 * as views into the program. The reader has checked every case against its method. */
#include <string.h>

#include "core/error.h"
#include "program.h"

/* The file record of the `case_index`-th case of method `method`. */
static rt_status find_case(const rt_program *p, const char *method, size_t case_index,
                           const rt_file_bundle_case **out) {
    uint32_t mi;
    RT_RETURN_IF_ERROR(rt_program__find_method(p, method, &mi));
    const rt_format *f = &p->format;
    size_t seen = 0;
    for (uint32_t i = 0; i < f->num_bundle_cases; i++) {
        if (f->bundle_cases[i].method != mi)
            continue;
        if (seen++ == case_index) {
            *out = &f->bundle_cases[i];
            return RT_OK;
        }
    }
    return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': bundled case %zu is out of range "
                         "(the method has %zu)", method, case_index, seen);
}

RT_API rt_status rt_program_bundled_case_count(size_t *out, const rt_program *p,
                                               const char *method) {
    uint32_t mi;
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "rt_program_bundled_case_count: out is NULL");
    RT_RETURN_IF_ERROR(rt_program__find_method(p, method, &mi));
    size_t n = 0;
    for (uint32_t i = 0; i < p->format.num_bundle_cases; i++)
        n += p->format.bundle_cases[i].method == mi;
    *out = n;
    return RT_OK;
}

static rt_status bundled_value(rt_bundled_value *out, const rt_program *p, const char *method,
                               size_t case_index, size_t index, int expected) {
    const char *what = expected ? "expected output" : "input";
    if (out == NULL)
        return rt_error__set(RT_INVALID_ARGUMENT, "bundled %s: out is NULL", what);
    const rt_file_bundle_case *c = NULL;
    RT_RETURN_IF_ERROR(find_case(p, method, case_index, &c));
    uint32_t count = expected ? c->num_outputs : c->num_inputs;
    if (index >= count)
        return rt_error__set(RT_INVALID_ARGUMENT, "method '%s': bundled case %zu has no %s %zu "
                             "(it has %u)", method, case_index, what, index, count);
    const rt_format *f = &p->format;
    const rt_file_bundle_value *v =
        &f->bundle_values[c->values + (expected ? c->num_inputs : 0) + index];
    memset(out, 0, sizeof *out);
    out->kind = v->kind;
    out->scalar.kind = v->kind;
    switch (v->kind) {
    case RT_VALUE_TENSOR:
        out->scalar.kind = 0;
        out->tensor.data = (void *)p->constant_data[v->constant];
        out->tensor.device.type = RT_DEVICE_CPU;
        out->tensor.rank = v->rank;
        out->tensor.dtype = v->dtype;
        out->tensor.sizes = f->words + v->sizes;
        out->tensor.strides = NULL;
        break;
    case RT_VALUE_DOUBLE:
        memcpy(&out->scalar.d, &v->payload, sizeof out->scalar.d);
        break;
    default: /* int and bool */
        out->scalar.i = v->payload;
        break;
    }
    return RT_OK;
}

RT_API rt_status rt_program_bundled_input(rt_bundled_value *out, const rt_program *p,
                                          const char *method, size_t case_index, size_t input) {
    return bundled_value(out, p, method, case_index, input, 0);
}

RT_API rt_status rt_program_bundled_expected(rt_bundled_value *out, const rt_program *p,
                                             const char *method, size_t case_index,
                                             size_t output) {
    return bundled_value(out, p, method, case_index, output, 1);
}
