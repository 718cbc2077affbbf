/* tensor.c: dtypes, strides and layout copies. */
#include "tensor.h"

#include <stdio.h>
#include <string.h>

typedef struct rt_type_desc {
    const char *name;
    uint8_t code;
    uint8_t bits;
} rt_type_desc;

static const rt_type_desc type_table[RT_TYPE_COUNT] = {
    [RT_F32] = {"float32", RT_DTYPE_FLOAT, 32},  [RT_F64] = {"float64", RT_DTYPE_FLOAT, 64},
    [RT_F16] = {"float16", RT_DTYPE_FLOAT, 16},  [RT_BF16] = {"bfloat16", RT_DTYPE_BFLOAT, 16},
    [RT_I8] = {"int8", RT_DTYPE_INT, 8},         [RT_I16] = {"int16", RT_DTYPE_INT, 16},
    [RT_I32] = {"int32", RT_DTYPE_INT, 32},      [RT_I64] = {"int64", RT_DTYPE_INT, 64},
    [RT_U8] = {"uint8", RT_DTYPE_UINT, 8},       [RT_U16] = {"uint16", RT_DTYPE_UINT, 16},
    [RT_U32] = {"uint32", RT_DTYPE_UINT, 32},    [RT_U64] = {"uint64", RT_DTYPE_UINT, 64},
    [RT_BOOL] = {"bool", RT_DTYPE_BOOL, 8},
};

rt_type rt_tensor__type_of(rt_dtype dtype) {
    if (dtype.lanes != 1)
        return RT_TYPE_INVALID;
    for (int t = 0; t < RT_TYPE_COUNT; t++)
        if (type_table[t].code == dtype.code && type_table[t].bits == dtype.bits)
            return (rt_type)t;
    return RT_TYPE_INVALID;
}

rt_dtype rt_tensor__dtype_of(rt_type type) {
    rt_dtype d = {0, 0, 0};
    if (type >= 0 && type < RT_TYPE_COUNT) {
        d.code = type_table[type].code;
        d.bits = type_table[type].bits;
        d.lanes = 1;
    }
    return d;
}

size_t rt_tensor__type_size(rt_type type) {
    return type >= 0 && type < RT_TYPE_COUNT ? type_table[type].bits / 8u : 0;
}

const char *rt_tensor__type_name(rt_type type) {
    return type >= 0 && type < RT_TYPE_COUNT ? type_table[type].name : "invalid";
}

const char *rt_tensor__dtype_text(rt_dtype dtype, char buf[48]) {
    rt_type type = rt_tensor__type_of(dtype);
    if (type != RT_TYPE_INVALID)
        return type_table[type].name;
    snprintf(buf, 48, "dtype(code=%u, bits=%u, lanes=%u)", dtype.code, dtype.bits, dtype.lanes);
    return buf;
}

bool rt_tensor__type_is_float(rt_type type) {
    return type == RT_F32 || type == RT_F64 || type == RT_F16 || type == RT_BF16;
}

bool rt_tensor__type_is_integer(rt_type type) { return type >= RT_I8 && type <= RT_U64; }

bool rt_tensor__strides_fit(const int64_t *sizes, const int64_t *strides, int32_t rank,
                            size_t elem_size) {
    int64_t span = (int64_t)elem_size;
    for (int32_t d = 0; d < rank; d++) {
        if (sizes[d] <= 1)
            continue;
        int64_t step, reach;
        if (strides[d] == INT64_MIN ||
            __builtin_mul_overflow(strides[d] < 0 ? -strides[d] : strides[d],
                                   (int64_t)elem_size, &step) ||
            __builtin_mul_overflow(step, sizes[d] - 1, &reach) ||
            __builtin_add_overflow(span, reach, &span))
            return false;
    }
    return true;
}

bool rt_tensor__checked_numel(const int64_t *sizes, int32_t rank, int64_t *out) {
    int64_t n = 1;
    bool empty = false;
    for (int32_t i = 0; i < rank; i++) {
        if (sizes[i] < 0)
            return false;
        if (sizes[i] == 0)
            empty = true;
        else if (n > INT64_MAX / sizes[i])
            return false;
        else
            n *= sizes[i];
    }
    *out = empty ? 0 : n;
    return true;
}

int64_t rt_tensor__numel(const rt_tensor_value *t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->rank; i++)
        n *= t->sizes[i];
    return n;
}

size_t rt_tensor__nbytes(const rt_tensor_value *t) {
    return (size_t)rt_tensor__numel(t) * t->elem_size;
}

bool rt_tensor__default_dim_order(const rt_tensor_value *t) {
    for (int32_t i = 0; i < t->rank; i++)
        if (t->dim_order[i] != i)
            return false;
    return true;
}

void rt_tensor__dense_strides(int64_t *out, int32_t rank, const int64_t *sizes,
                              const uint8_t *dim_order) {
    int64_t stride = 1;
    for (int32_t i = rank - 1; i >= 0; i--) {
        int32_t dim = dim_order != NULL ? dim_order[i] : i;
        out[dim] = stride;
        stride *= sizes[dim] > 0 ? sizes[dim] : 1;
    }
}

void rt_tensor__update_strides(rt_tensor_value *t) {
    rt_tensor__dense_strides(t->strides, t->rank, t->sizes, t->dim_order);
}

/* Innermost dimension as a tight loop, the rest as an odometer over indices. */
/* One strided run of n elements (strides in bytes): typed loads and stores for the common
 * element sizes rather than a memcpy call per element. memcpy of a constant size compiles to
 * one move and keeps unaligned addresses legal. */
#define COPY_RUN(T)                                               \
    for (int64_t k = 0; k < n; k++) {                             \
        T v;                                                      \
        memcpy(&v, s + k * ss, sizeof v);                         \
        memcpy(d + k * ds, &v, sizeof v);                         \
    }

static void copy_strided_row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                             size_t elem_size) {
    switch (elem_size) {
    case 1: COPY_RUN(uint8_t) return;
    case 2: COPY_RUN(uint16_t) return;
    case 4: COPY_RUN(uint32_t) return;
    case 8: COPY_RUN(uint64_t) return;
    default:
        for (int64_t k = 0; k < n; k++)
            memcpy(d + k * ds, s + k * ss, elem_size);
    }
}

void rt_tensor__copy_strided(void *dst, const int64_t *dst_strides, const void *src,
                             const int64_t *src_strides, int32_t rank, const int64_t *sizes,
                             size_t elem_size) {
    for (int32_t i = 0; i < rank; i++)
        if (sizes[i] == 0)
            return;
    if (rank == 0) {
        memcpy(dst, src, elem_size);
        return;
    }
    int64_t index[RT_MAX_RANK] = {0};
    const int32_t inner = rank - 1;
    const int64_t n_inner = sizes[inner];
    const int64_t ds = dst_strides[inner] * (int64_t)elem_size;
    const int64_t ss = src_strides[inner] * (int64_t)elem_size;
    const char *s = src;
    char *d = dst;
    for (;;) {
        if (ds == (int64_t)elem_size && ss == (int64_t)elem_size)
            memcpy(d, s, (size_t)n_inner * elem_size);
        else
            copy_strided_row(d, ds, s, ss, n_inner, elem_size);
        int32_t dim = inner - 1;
        for (; dim >= 0; dim--) {
            index[dim]++;
            s += src_strides[dim] * (int64_t)elem_size;
            d += dst_strides[dim] * (int64_t)elem_size;
            if (index[dim] < sizes[dim])
                break;
            s -= src_strides[dim] * (int64_t)elem_size * sizes[dim];
            d -= dst_strides[dim] * (int64_t)elem_size * sizes[dim];
            index[dim] = 0;
        }
        if (dim < 0)
            return;
    }
}
