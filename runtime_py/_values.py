"""The kinds of a method's values (rt_value_kind in include/runtime.h), for the writer, the
method's metadata and input binding alike."""

NONE, INT, DOUBLE, BOOL, STRING, INT_LIST, DOUBLE_LIST, TENSOR, TENSOR_LIST = range(9)
KIND_NAMES = ("none", "int", "double", "bool", "string", "int_list", "double_list", "tensor",
              "tensor_list")
