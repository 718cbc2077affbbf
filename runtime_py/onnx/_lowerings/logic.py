"""Binary, variadic and logic ONNX ops with numpy broadcasting: Pow, Mod, Min, Max, Mean, Sum,
LessOrEqual, GreaterOrEqual, And, Or, Xor, Where.

Variadic ops (Min, Max, Mean, Sum) chain the binary runtime op over their inputs, which
broadcasts them all together as ONNX does; Mean divides the sum by the input count.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ...compiler import shapes as _shapes
from .._registry import lowers
from .common import FLOATS, NUMERIC, legacy_broadcast, require_dtype

BOOL = ("bool",)


def _call(cv, op: str, inputs: Sequence[Any], params: Sequence[Any] = (),
          dtype: Optional[str] = None):
    """One runtime op over broadcast inputs; the output dtype is the first input's unless given."""
    xs = [cv.tensor(x) for x in inputs]
    shape = xs[0].shape
    for x in xs[1:]:
        try:
            shape = _shapes.broadcast(op, shape, x.shape)
        except ValueError as e:
            raise cv.fail(str(e)) from None
    dynamic = any(x.dynamic for x in xs)
    return cv.m.call(op, *xs, *params, outputs=[(dtype or xs[0].dtype, shape, dynamic)])[0]


@lowers("Pow")
def pow_(cv, node, inputs, attrs):
    base, exponent = inputs
    exponent = legacy_broadcast(cv, base, exponent, attrs)
    require_dtype(cv, base, ("float32", "float64", "int32", "int64"), "base X")
    require_dtype(cv, exponent, NUMERIC, "exponent Y")
    return [_call(cv, "pow", [base, exponent])]


@lowers("Mod")
def mod(cv, node, inputs, attrs):
    """fmod=0: the result has the divisor's sign (numpy.mod; floats too, as ONNX's tests
    expect); fmod=1: the dividend's (C fmod)."""
    a, b = inputs
    require_dtype(cv, a, NUMERIC)
    return [_call(cv, "mod", [a, b], [bool(attrs.get("fmod", 0))])]


def _chain(cv, op: str, inputs: Sequence[Any]):
    if any(x is None for x in inputs) or not inputs:
        raise cv.fail("needs at least one input, and no empty ones")
    result = inputs[0]
    for x in inputs[1:]:
        result = _call(cv, op, [result, x])
    return result


@lowers("Min", "Max", "Sum")
def variadic(cv, node, inputs, attrs):
    require_dtype(cv, inputs[0], NUMERIC)
    op = {"Min": "min", "Max": "max", "Sum": "add"}[node.op_type]
    return [_chain(cv, op, list(inputs))]


@lowers("Mean")
def mean(cv, node, inputs, attrs):
    dtype = require_dtype(cv, inputs[0], FLOATS)
    total = _chain(cv, "add", list(inputs))
    if len(inputs) == 1:
        return [total]
    return [_call(cv, "div", [total, np.array(len(inputs), dtype=dtype)])]


@lowers("LessOrEqual", "GreaterOrEqual")
def less_equal(cv, node, inputs, attrs):
    a, b = inputs
    require_dtype(cv, a, NUMERIC)
    if node.op_type == "GreaterOrEqual":
        a, b = b, a
    return [_call(cv, "less_equal", [a, b], dtype="bool")]


@lowers("And", "Or", "Xor")
def logic(cv, node, inputs, attrs):
    a, b = inputs
    b = legacy_broadcast(cv, a, b, attrs)
    require_dtype(cv, a, BOOL)
    require_dtype(cv, b, BOOL)
    return [_call(cv, node.op_type.lower(), [a, b], dtype="bool")]


@lowers("Where")
def where(cv, node, inputs, attrs):
    cond, a, b = inputs
    require_dtype(cv, cond, BOOL, "condition")
    require_dtype(cv, a, NUMERIC + BOOL, "X")
    return [_call(cv, "where", [cond, a, b], dtype=cv.dtype_of(a))]


@lowers("BitShift")
def bit_shift(cv, node, inputs, attrs):
    direction = attrs.get("direction", b"")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("LEFT", "RIGHT"):
        raise cv.fail(f"direction must be LEFT or RIGHT, not {direction!r}")
    x, y = inputs
    require_dtype(cv, x, ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))
    op = "bit_shift_left" if direction == "LEFT" else "bit_shift_right"
    return [_call(cv, op, [x, y])]
