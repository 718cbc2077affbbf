"""Shape and data-movement ONNX ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
Shape."""
from __future__ import annotations

import math

import numpy as np

from ...builder import Value
from .._registry import lowers
from .common import const_ints, optional, reshape


def _reshape_dynamic(cv, x, target):
    """Reshape x (static or dynamic) to target, which may hold one -1."""
    if cv.is_dynamic(x) and -1 not in target:
        raise cv.fail(f"cannot reshape a dynamic tensor to the fixed shape {list(target)}")
    return reshape(cv, x, target)


@lowers("Reshape")
def reshape_op(cv, node, inputs, attrs):
    x = inputs[0]
    target = const_ints(cv, inputs[1], "shape")
    allow_zero = bool(attrs.get("allowzero", 0))
    shape = list(cv.shape_of(x))
    out = []
    for i, t in enumerate(target):
        if t == 0 and not allow_zero:
            if i >= len(shape):
                raise cv.fail(f"shape {target} copies dimension {i}, but the input has rank {len(shape)}")
            if cv.is_dynamic(x) and -1 in target:
                raise cv.fail("a 0 (copy) extent of a dynamic input next to -1 is not supported")
            out.append(shape[i] if not cv.is_dynamic(x) else -1)
        else:
            out.append(t)
    if not isinstance(x, Value):
        return [np.asarray(x).reshape(out)]
    return [_reshape_dynamic(cv, x, out)]


@lowers("Flatten")
def flatten(cv, node, inputs, attrs):
    x = inputs[0]
    shape = cv.shape_of(x)
    axis = int(attrs.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise cv.fail(f"axis {attrs.get('axis')} is out of range for rank {len(shape)}")
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis:])
    if cv.is_dynamic(x):
        # One dynamic extent: let the runtime infer the side it falls on.
        dynamic_outer = axis > 0
        target = [-1, inner] if dynamic_outer else [outer, -1]
    else:
        target = [outer, inner]
    return [reshape(cv, x, target)]


def _axes(cv, node, inputs, attrs):
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    axes = optional(inputs, 1)
    return None if axes is None else const_ints(cv, axes, "axes")


@lowers("Squeeze")
def squeeze(cv, node, inputs, attrs):
    x = inputs[0]
    shape = list(cv.shape_of(x))
    axes = _axes(cv, node, inputs, attrs)
    rank = len(shape)
    if axes is None:
        if cv.is_dynamic(x):
            raise cv.fail("Squeeze without axes needs a static shape")
        axes = [i for i, s in enumerate(shape) if s == 1]
    axes = sorted({a + rank if a < 0 else a for a in axes})
    for a in axes:
        if not 0 <= a < rank or (shape[a] != 1 and not cv.is_dynamic(x)):
            raise cv.fail(f"cannot squeeze axis {a} of shape {shape}")
    target = [s for i, s in enumerate(shape) if i not in axes]
    return [_reshape_keeping_dynamic(cv, x, target, [i for i in range(rank) if i not in axes])]


@lowers("Unsqueeze")
def unsqueeze(cv, node, inputs, attrs):
    x = inputs[0]
    shape = list(cv.shape_of(x))
    axes = _axes(cv, node, inputs, attrs)
    if axes is None:
        raise cv.fail("axes are missing")
    rank = len(shape) + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise cv.fail(f"axes {axes} are invalid for output rank {rank}")
    target, source, it = [], [], iter(range(len(shape)))
    for i in range(rank):
        if i in axes:
            target.append(1)
            source.append(None)
        else:
            d = next(it)
            target.append(shape[d])
            source.append(d)
    return [_reshape_keeping_dynamic(cv, x, target, source)]


def _reshape_keeping_dynamic(cv, x, target, source):
    """Reshape where output extents map to input extents (None: a new 1). For a dynamic input
    the largest extent becomes -1, so the runtime infers it from the actual size."""
    if not cv.is_dynamic(x):
        return reshape(cv, x, target)
    candidates = [i for i, d in enumerate(source) if d is not None and target[i] != 1]
    if len(candidates) > 1:
        raise cv.fail("reshaping a dynamic tensor with several extents > 1 is not supported")
    if candidates:
        target = list(target)
        target[candidates[0]] = -1
    return cv.m.reshape(x, target)


@lowers("Transpose")
def transpose(cv, node, inputs, attrs):
    x = inputs[0]
    rank = len(cv.shape_of(x))
    perm = [int(p) for p in attrs.get("perm", list(range(rank))[::-1])]
    return [cv.m.transpose(cv.tensor(x), perm)]


@lowers("Concat")
def concat(cv, node, inputs, attrs):
    parts = [cv.tensor(x) for x in inputs if x is not None]
    return [cv.m.concat(parts, int(attrs["axis"]))]


@lowers("Shape")
def shape_op(cv, node, inputs, attrs):
    x = inputs[0]
    if cv.is_dynamic(x):  # the shape op reads the current sizes (movement.py)
        from .movement import dynamic_shape

        end = attrs.get("end")
        return [dynamic_shape(cv, x, int(attrs.get("start", 0)), None if end is None else int(end))]
    shape = np.array(cv.shape_of(x), dtype=np.int64)
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    return [shape[start:None if end is None else int(end)]]
