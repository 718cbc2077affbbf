#include "value.h"

const char *rt_value__kind_name(int32_t kind) {
    switch (kind) {
    case RT_VALUE_NONE: return "none";
    case RT_VALUE_INT: return "int";
    case RT_VALUE_DOUBLE: return "double";
    case RT_VALUE_BOOL: return "bool";
    case RT_VALUE_STRING: return "string";
    case RT_VALUE_INT_LIST: return "int list";
    case RT_VALUE_DOUBLE_LIST: return "double list";
    case RT_VALUE_TENSOR: return "tensor";
    case RT_VALUE_TENSOR_LIST: return "tensor list";
    }
    return "unknown kind";
}
