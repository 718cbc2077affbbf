/* tensor.h: dtypes, the runtime tensor, and layout copies. */
#ifndef RT_TENSOR_H
#define RT_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* The element types kernels dispatch on. */
typedef enum rt_type {
    RT_TYPE_INVALID = -1,
    RT_F32 = 0,
    RT_F64,
    RT_F16,
    RT_BF16,
    RT_I8,
    RT_I16,
    RT_I32,
    RT_I64,
    RT_U8,
    RT_U16,
    RT_U32,
    RT_U64,
    RT_BOOL,
    RT_TYPE_COUNT
} rt_type;

rt_type rt_tensor__type_of(rt_dtype dtype);
rt_dtype rt_tensor__dtype_of(rt_type type);
size_t rt_tensor__type_size(rt_type type);
const char *rt_tensor__type_name(rt_type type);
/* "float32", or e.g. "dtype(code=9, bits=8, lanes=1)" for one we do not know. */
const char *rt_tensor__dtype_text(rt_dtype dtype, char buf[48]);
bool rt_tensor__type_is_float(rt_type type);
bool rt_tensor__type_is_integer(rt_type type); /* signed or unsigned, not bool */

/* A tensor value of a loaded method. `sizes` are the current sizes (set by kernels for dynamic
 * tensors), `bounds` the sizes memory was planned for. Tensors are dense in `dim_order`. */
typedef struct rt_tensor_value {
    rt_type type;
    uint32_t elem_size;
    int32_t rank;
    bool dynamic;
    uint32_t dynamic_axes;   /* dynamic tensors: the axes that may vary (bit d: axis d) */
    bool writable;           /* false for constants */
    bool written;            /* some instruction writes it (set by prepare) */
    uint8_t dim_order[RT_MAX_RANK];
    int64_t sizes[RT_MAX_RANK];
    int64_t bounds[RT_MAX_RANK];
    int64_t strides[RT_MAX_RANK]; /* elements, dense in dim_order for the current sizes */
    void *data;              /* where the contents are now (home or a bound input)  */
    void *home;              /* the storage the program gave it                      */
} rt_tensor_value;

int64_t rt_tensor__numel(const rt_tensor_value *t);
size_t rt_tensor__nbytes(const rt_tensor_value *t);
bool rt_tensor__default_dim_order(const rt_tensor_value *t);
/* Refresh t->strides from t->sizes and t->dim_order. */
void rt_tensor__update_strides(rt_tensor_value *t);
/* Dense strides (elements) for sizes laid out in dim_order (NULL: row-major). */
void rt_tensor__dense_strides(int64_t *out, int32_t rank, const int64_t *sizes,
                              const uint8_t *dim_order);
/* Copy a strided array into another strided array of the same sizes, element by element. */
void rt_tensor__copy_strided(void *dst, const int64_t *dst_strides, const void *src,
                             const int64_t *src_strides, int32_t rank, const int64_t *sizes,
                             size_t elem_size);
/* Multiply sizes into *out; false on overflow or a negative size. */
bool rt_tensor__checked_numel(const int64_t *sizes, int32_t rank, int64_t *out);
/* Whether every byte offset a walk of these sizes and strides (in elements) can reach fits in
 * int64: strides from a caller are refused otherwise, before any arithmetic overflows. */
bool rt_tensor__strides_fit(const int64_t *sizes, const int64_t *strides, int32_t rank,
                            size_t elem_size);

#endif
