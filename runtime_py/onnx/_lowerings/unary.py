"""Unary math, activations and casts: Abs ... Mish, PRelu, Clip, IsNaN, IsInf, Not,
LogSoftmax, Hardmax, Cast, CastLike.

float16 and bfloat16 inputs reach these lowerings already cast to float32 (the converter's
FLOAT32_COMPUTED set), except for Cast and CastLike, which convert between every dtype.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ...compiler import Value
from .._registry import ConversionError, lowers
from .common import FLOATS, NUMERIC, check_attrs, optional, require_dtype, reshape

SIGNED = ("int8", "int16", "int32", "int64")

# ONNX op -> (runtime op, input dtypes)
_SIMPLE = {
    "Abs": ("abs", NUMERIC),
    "Neg": ("neg", FLOATS + SIGNED),
    "Exp": ("exp", FLOATS),
    "Log": ("log", FLOATS),
    "Sqrt": ("sqrt", FLOATS),
    "Reciprocal": ("reciprocal", FLOATS),
    "Floor": ("floor", FLOATS),
    "Ceil": ("ceil", FLOATS),
    "Round": ("round", FLOATS),
    "Sign": ("sign", NUMERIC),
    "Sin": ("sin", FLOATS),
    "Cos": ("cos", FLOATS),
    "Tan": ("tan", FLOATS),
    "Tanh": ("tanh", FLOATS),
    "Erf": ("erf", FLOATS),
    "Sigmoid": ("sigmoid", FLOATS),
    "Softplus": ("softplus", FLOATS),
    "Softsign": ("softsign", FLOATS),
    "HardSwish": ("hard_swish", FLOATS),
    "Mish": ("mish", FLOATS),
}


def _unary(cv, op: str, x: Any, *params: Any, dtype: Optional[str] = None) -> Value:
    """One call of a runtime op whose output has x's shape (and x's dtype unless given)."""
    x = cv.tensor(x)
    return cv.m.call(op, x, *params, outputs=[(dtype or x.dtype, x.shape, x.dynamic)])[0]


@lowers(*_SIMPLE)
def simple(cv, node, inputs, attrs):
    op, dtypes = _SIMPLE[node.op_type]
    check_attrs(cv, attrs, ("consumed_inputs",))  # consumed_inputs: opset-1 legacy, no effect
    require_dtype(cv, inputs[0], dtypes)
    return [_unary(cv, op, inputs[0])]


# ---- activations with parameters -----------------------------------------------------------

def _float_attr(attrs: dict, name: str, default: float) -> float:
    return float(attrs.get(name, default))


@lowers("HardSigmoid")
def hard_sigmoid(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("alpha", "beta", "consumed_inputs"))
    require_dtype(cv, inputs[0], FLOATS)
    return [_unary(cv, "hard_sigmoid", inputs[0], _float_attr(attrs, "alpha", 0.2),
                   _float_attr(attrs, "beta", 0.5))]


@lowers("LeakyRelu", "Elu")
def leaky_relu_elu(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("alpha", "consumed_inputs"))
    require_dtype(cv, inputs[0], FLOATS)
    op, default = ("leaky_relu", 0.01) if node.op_type == "LeakyRelu" else ("elu", 1.0)
    return [_unary(cv, op, inputs[0], _float_attr(attrs, "alpha", default))]


@lowers("Selu")
def selu(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("alpha", "gamma", "consumed_inputs"))
    require_dtype(cv, inputs[0], FLOATS)
    return [_unary(cv, "selu", inputs[0], _float_attr(attrs, "alpha", 1.67326319217681884765625),
                   _float_attr(attrs, "gamma", 1.05070102214813232421875))]


@lowers("Gelu")
def gelu(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("approximate",))
    require_dtype(cv, inputs[0], FLOATS)
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate not in ("none", "tanh"):
        raise cv.fail(f"approximate={approximate!r} is not supported (none or tanh)")
    return [_unary(cv, "gelu", inputs[0], approximate == "tanh")]


@lowers("Swish")
def swish(cv, node, inputs, attrs):
    """x * sigmoid(alpha x): silu at alpha 1 (also what Mul(x, Sigmoid(x)) is rewritten to)."""
    check_attrs(cv, attrs, ("alpha",))
    require_dtype(cv, inputs[0], FLOATS)
    alpha = _float_attr(attrs, "alpha", 1.0)
    if alpha == 1.0:
        return [_unary(cv, "silu", inputs[0])]
    x = cv.tensor(inputs[0])
    scaled = cv.m.mul(x, cv.tensor(np.asarray(alpha, x.dtype)))
    return [cv.m.mul(x, _unary(cv, "sigmoid", scaled))]


@lowers("PRelu")
def prelu(cv, node, inputs, attrs):
    x, slope = inputs
    check_attrs(cv, attrs, ("consumed_inputs",))
    require_dtype(cv, x, NUMERIC)
    require_dtype(cv, slope, (cv.dtype_of(x),), "slope")
    x_shape, s_shape = cv.shape_of(x), cv.shape_of(slope)
    if len(s_shape) == 1 and len(x_shape) > 2 and s_shape[0] == x_shape[1] != x_shape[-1]:
        # Per-channel slope (opset < 7 exports, PyTorch's PReLU): align it with axis 1.
        slope = reshape(cv, slope, [s_shape[0]] + [1] * (len(x_shape) - 2))
        s_shape = cv.shape_of(slope)
    try:
        fits = np.broadcast_shapes(x_shape, s_shape) == tuple(x_shape)
    except ValueError:
        fits = False
    if not fits:
        raise cv.fail(f"slope {list(s_shape)} does not broadcast to X {list(x_shape)}")
    x = cv.tensor(x)
    return [cv.m.call("prelu", x, cv.tensor(slope), outputs=[(x.dtype, x.shape, x.dynamic)])[0]]


# ---- clip -----------------------------------------------------------------------------------

def _clip_bound(cv, bound: Any, dtype: str, what: str) -> Any:
    """A bound as the runtime op takes it: None, a Python number, or a one-element tensor."""
    if bound is None:
        return None
    if isinstance(bound, Value):
        require_dtype(cv, bound, (dtype,), what)
        if math.prod(bound.shape) != 1:
            raise cv.fail(f"{what} must hold one element, not shape {list(bound.shape)}")
        return bound
    arr = np.asarray(bound)
    if arr.size == 0:  # an empty tensor: no bound
        return None
    if arr.size != 1:
        raise cv.fail(f"{what} must hold one element, not shape {list(arr.shape)}")
    value = arr.reshape(())
    if dtype in FLOATS:
        return float(value)
    if int(value) > 2**63 - 1:  # a uint64 beyond the runtime's int scalars: a tensor then
        return cv.tensor(value.astype(dtype))
    return int(value)


@lowers("Clip")
def clip(cv, node, inputs, attrs):
    x = inputs[0]
    dtype = require_dtype(cv, x, NUMERIC)
    if cv.opset < 11:
        check_attrs(cv, attrs, ("min", "max", "consumed_inputs"))
        lo, hi = attrs.get("min"), attrs.get("max")
    else:
        check_attrs(cv, attrs, ())
        lo, hi = optional(inputs, 1), optional(inputs, 2)
    return [_unary(cv, "clip", x, _clip_bound(cv, lo, dtype, "min"),
                   _clip_bound(cv, hi, dtype, "max"))]


# ---- predicates -----------------------------------------------------------------------------

@lowers("IsNaN")
def isnan(cv, node, inputs, attrs):
    require_dtype(cv, inputs[0], FLOATS)
    return [_unary(cv, "isnan", inputs[0], dtype="bool")]


@lowers("IsInf")
def isinf(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("detect_positive", "detect_negative"))
    require_dtype(cv, inputs[0], FLOATS)
    return [_unary(cv, "isinf", inputs[0], bool(attrs.get("detect_positive", 1)),
                   bool(attrs.get("detect_negative", 1)), dtype="bool")]


@lowers("Not")
def logical_not(cv, node, inputs, attrs):
    require_dtype(cv, inputs[0], ("bool",))
    return [_unary(cv, "not", inputs[0])]


# ---- along an axis --------------------------------------------------------------------------

@lowers("LogSoftmax", "Hardmax")
def along_axis(cv, node, inputs, attrs):
    """As Softmax (nn.py): from opset 13 along `axis`; before, over the input flattened to 2-D
    at `axis`."""
    op = "log_softmax" if node.op_type == "LogSoftmax" else "hardmax"
    check_attrs(cv, attrs, ("axis",))
    x = inputs[0]
    require_dtype(cv, x, FLOATS)
    rank = len(cv.shape_of(x))
    if cv.opset >= 13:
        axis = int(attrs.get("axis", -1))
        if not -max(rank, 1) <= axis < max(rank, 1):
            raise cv.fail(f"axis {axis} is out of range for rank {rank}")
        return [_unary(cv, op, x, axis)]
    axis = int(attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        raise cv.fail(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return [_unary(cv, op, x, -1)]
    if cv.is_dynamic(x):
        raise cv.fail(f"opset < 13 {node.op_type} over several axes needs a static shape")
    shape = cv.shape_of(x)
    flat = reshape(cv, cv.tensor(x), [math.prod(shape[:axis]), math.prod(shape[axis:])])
    return [reshape(cv, _unary(cv, op, flat, 1), list(shape))]


# ---- casts ----------------------------------------------------------------------------------

def _cast_to(cv, x: Any, target: str) -> Any:
    if cv.dtype_of(x) == target:
        return x
    return cv.m.cast(cv.tensor(x), target)


@lowers("Cast")
def cast(cv, node, inputs, attrs):
    """Every pair of the runtime's dtypes; `saturate` only concerns float8 targets, which
    (with the other 2-, 4- and 8-bit and string types) are refused."""
    from .._convert import onnx_dtype_name

    check_attrs(cv, attrs, ("to", "saturate", "round_mode"))
    try:
        target = onnx_dtype_name(int(attrs["to"]))
    except ConversionError as e:
        raise cv.fail(f"cannot cast to this type: {e}") from None
    return [_cast_to(cv, inputs[0], target)]


@lowers("CastLike")
def cast_like(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("saturate", "round_mode"))
    return [_cast_to(cv, inputs[0], cv.dtype_of(inputs[1]))]
