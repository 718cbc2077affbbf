"""Elementwise ONNX ops with numpy broadcasting."""
from __future__ import annotations

import numpy as np

from ...compiler import Value
from .._registry import lowers
from .common import NUMERIC, legacy_broadcast, require_dtype

_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


@lowers(*_BINARY)
def binary(cv, node, inputs, attrs):
    a, b = inputs
    b = legacy_broadcast(cv, a, b, attrs)
    require_dtype(cv, a, NUMERIC)
    return [getattr(cv.m, _BINARY[node.op_type])(cv.tensor(a), cv.tensor(b))]


@lowers("Less", "Greater", "Equal")
def compare(cv, node, inputs, attrs):
    a, b = inputs
    require_dtype(cv, a, NUMERIC + (("bool",) if node.op_type == "Equal" else ()))
    a, b = cv.tensor(a), cv.tensor(b)
    if node.op_type == "Less":
        return [cv.m.less(a, b)]
    if node.op_type == "Greater":
        return [cv.m.less(b, a)]
    return [cv.m.equal(a, b)]


@lowers("Relu")
def relu(cv, node, inputs, attrs):
    require_dtype(cv, inputs[0], ("float32", "float64", "int8", "int16", "int32", "int64"))
    return [cv.m.relu(cv.tensor(inputs[0]))]


@lowers("Identity")
def identity(cv, node, inputs, attrs):
    return [inputs[0]]


@lowers("Dropout")
def dropout(cv, node, inputs, attrs):
    """Inference: the identity. The optional mask output is all true."""
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and (isinstance(training, Value) or bool(np.asarray(training))):
        raise cv.fail("training_mode=true is not supported (inference only)")
    if len(node.output) > 1 and node.output[1]:
        raise cv.fail("the mask output is not supported")
    return [inputs[0]]

