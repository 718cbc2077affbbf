"""ONNX activations that conv2d_act / linear_act can apply in their epilogue, with the codes
of libruntime/ops/fused_activation.h (kind, lo, hi)."""
from __future__ import annotations

import numpy as np

from ..compiler import Value

RELU, CLIP, SIGMOID, GELU, HARDSWISH, SILU, GELU_TANH = 1, 2, 3, 4, 5, 6, 7
_FLOAT_MAX = float(np.finfo(np.float32).max)


def _clip(cv, node, inputs, attrs):
    if cv.opset < 11:
        return CLIP, float(attrs.get("min", -_FLOAT_MAX)), float(attrs.get("max", _FLOAT_MAX))
    bounds = []
    for i, default in ((1, -_FLOAT_MAX), (2, _FLOAT_MAX)):
        x = inputs[i] if i < len(inputs) else None
        if isinstance(x, Value):
            return None  # bounds known only at run time
        bounds.append(default if x is None else float(np.asarray(x)))
    if not bounds[0] <= bounds[1]:
        return None
    return CLIP, bounds[0], bounds[1]


def _gelu(cv, node, inputs, attrs):
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    return {"none": (GELU, 0.0, 0.0), "tanh": (GELU_TANH, 0.0, 0.0)}.get(approximate)


def _swish(cv, node, inputs, attrs):
    return (SILU, 0.0, 0.0) if float(attrs.get("alpha", 1.0)) == 1.0 else None


ACTIVATIONS = {
    "Relu": lambda cv, node, inputs, attrs: (RELU, 0.0, 0.0),
    "Clip": _clip,
    "Sigmoid": lambda cv, node, inputs, attrs: (SIGMOID, 0.0, 0.0),
    "HardSwish": lambda cv, node, inputs, attrs: (HARDSWISH, 0.0, 0.0),
    "Gelu": _gelu,
    "Swish": _swish,
}
