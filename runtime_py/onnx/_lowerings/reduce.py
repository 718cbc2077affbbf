"""Reductions and scans: ReduceSum ... ReduceLogSum, ArgMax, ArgMin, CumSum, TopK.

Axes (ReduceSum from opset 13, every Reduce* from opset 18), CumSum's axis and TopK's K are
inputs. Known at conversion time they become op parameters; otherwise the runtime op reads the
tensor at each execute, and an output whose shape depends on it (a reduction over axes from an
input, TopK with a run-time K) is planned dynamic, with bounds that hold every possible result.
An empty axes tensor is known to be empty from its shape alone.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ...compiler import shapes as _shapes
from ...compiler import Value
from .common import FLOATS, NUMERIC, check_attrs, optional, require_dtype
from .._registry import lowers

# ONNX op -> (runtime op, input dtypes)
_REDUCE = {
    "ReduceSum": ("reduce_sum", NUMERIC),
    "ReduceMean": ("reduce_mean", FLOATS),
    "ReduceProd": ("reduce_prod", NUMERIC),
    "ReduceMax": ("reduce_max", NUMERIC + ("bool",)),
    "ReduceMin": ("reduce_min", NUMERIC + ("bool",)),
    "ReduceL1": ("reduce_l1", NUMERIC),
    "ReduceL2": ("reduce_l2", FLOATS),
    "ReduceLogSum": ("reduce_log_sum", FLOATS),
    "ReduceLogSumExp": ("reduce_log_sum_exp", FLOATS),
    "ReduceSumSquare": ("reduce_sum_square", NUMERIC),
}

_INDEX_DTYPES = ("int32", "int64")


def _axis(cv, axis: int, rank: int, what: str = "axis") -> int:
    try:
        return _shapes.normalize_axis(cv.node.op_type, int(axis), rank)
    except ValueError:
        raise cv.fail(f"{what} {axis} is out of range for an input of rank {rank}") from None


def _runtime_param(cv, x: Value, what: str, scalar: bool) -> Value:
    """An integer tensor the runtime op reads at each execute."""
    require_dtype(cv, x, _INDEX_DTYPES, what)
    size = int(np.prod(x.shape)) if x.shape else 1
    fits = len(x.shape) <= 1 and size == 1 if scalar else len(x.shape) == 1
    if x.dynamic or not fits:
        kind = "one-element" if scalar else "1-D"
        raise cv.fail(f"a run-time {what} must be a fixed-shape {kind} tensor, not "
                      f"{'dynamic ' if x.dynamic else ''}{list(x.shape)}")
    return x


# ---- Reduce* ---------------------------------------------------------------------------------

def _axes_source(cv, node, inputs, attrs) -> Any:
    """None (no axes given), a list of ints, or a run-time Value."""
    from_input = cv.opset >= 18 or (node.op_type == "ReduceSum" and cv.opset >= 13)
    if not from_input:
        axes = attrs.get("axes")
        return None if axes is None else [int(a) for a in axes]
    axes = optional(inputs, 1)
    if axes is None:
        return None
    if isinstance(axes, Value):
        if not axes.dynamic and len(axes.shape) == 1 and axes.shape[0] == 0:
            return []  # empty: its contents do not matter
        return _runtime_param(cv, axes, "axes", scalar=False)
    return [int(a) for a in np.asarray(axes).reshape(-1)]


def _reduced_shape(cv, shape: Tuple[int, ...], axes: List[int], keepdims: bool) -> List[int]:
    rank = len(shape)
    dims = [_axis(cv, a, rank, "axes item") for a in axes]
    if len(set(dims)) != len(dims):
        raise cv.fail(f"axes {axes} names a dimension more than once")
    return [1 if d in dims else s for d, s in enumerate(shape) if keepdims or d not in dims]


def _runtime_axes_bounds(cv, shape: Tuple[int, ...], count: int, keepdims: bool) -> List[int]:
    """Bounds of the result for any `count` distinct axes: kept in place they are 1 or the
    size; removed, dimension j of the result is one of x's dimensions j .. j + count."""
    if count > len(shape):
        raise cv.fail(f"axes has {count} items, but the input has rank {len(shape)}")
    if keepdims:
        return [max(s, 1) for s in shape]
    return [max(shape[j:j + count + 1]) for j in range(len(shape) - count)]


@lowers(*_REDUCE)
def reduce(cv, node, inputs, attrs):
    op, dtypes = _REDUCE[node.op_type]
    check_attrs(cv, attrs, ("axes", "keepdims", "noop_with_empty_axes"))
    x = inputs[0]
    require_dtype(cv, x, dtypes)
    x = cv.tensor(x)
    keepdims = bool(attrs.get("keepdims", 1))
    axes = _axes_source(cv, node, inputs, attrs)
    if isinstance(axes, Value):
        shape = _runtime_axes_bounds(cv, x.shape, axes.shape[0], keepdims)
        return [cv.m.call(op, x, axes, keepdims, outputs=[(x.dtype, shape, True)])[0]]
    if not axes:
        # ONNX: no axes reduce everything, unless noop_with_empty_axes; the runtime op with
        # an empty list then maps each element (ReduceSumSquare gives x * x, as onnx does).
        axes = [] if attrs.get("noop_with_empty_axes", 0) else list(range(len(x.shape)))
    shape = _reduced_shape(cv, x.shape, axes, keepdims)
    return [cv.m.call(op, x, axes, keepdims, outputs=[(x.dtype, shape, x.dynamic)])[0]]


# ---- ArgMax, ArgMin -------------------------------------------------------------------------

@lowers("ArgMax", "ArgMin")
def arg_reduce(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("axis", "keepdims", "select_last_index"))
    require_dtype(cv, inputs[0], NUMERIC)
    x = cv.tensor(inputs[0])
    rank = len(x.shape)
    if rank == 0:
        raise cv.fail("the input must have rank >= 1")
    axis = _axis(cv, attrs.get("axis", 0), rank)
    keepdims = bool(attrs.get("keepdims", 1))
    others = int(np.prod([s for d, s in enumerate(x.shape) if d != axis]))
    if x.shape[axis] == 0 and others > 0 and not x.dynamic:
        raise cv.fail(f"axis {axis} has size 0: there is no index to return")
    shape = [1 if d == axis else s for d, s in enumerate(x.shape) if keepdims or d != axis]
    op = "argmax" if node.op_type == "ArgMax" else "argmin"
    return [cv.m.call(op, x, axis, keepdims, bool(attrs.get("select_last_index", 0)),
                      outputs=[("int64", shape, x.dynamic)])[0]]


# ---- CumSum ---------------------------------------------------------------------------------

@lowers("CumSum")
def cumsum(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("exclusive", "reverse"))
    require_dtype(cv, inputs[0], NUMERIC)
    x = cv.tensor(inputs[0])
    if not x.shape:
        raise cv.fail("the input must have rank >= 1")
    axis = inputs[1]
    if isinstance(axis, Value):
        axis = _runtime_param(cv, axis, "axis", scalar=True)
    else:
        values = np.asarray(axis).reshape(-1)
        if values.size != 1:
            raise cv.fail(f"axis must hold one value, not {values.size}")
        axis = _axis(cv, int(values[0]), len(x.shape))
    return [cv.m.call("cumsum", x, axis, bool(attrs.get("exclusive", 0)),
                      bool(attrs.get("reverse", 0)), outputs=[(x.dtype, x.shape, x.dynamic)])[0]]


# ---- TopK -----------------------------------------------------------------------------------

@lowers("TopK")
def topk(cv, node, inputs, attrs):
    """sorted=0 leaves the order to the implementation: the runtime always sorts."""
    check_attrs(cv, attrs, ("k", "axis", "largest", "sorted"))
    require_dtype(cv, inputs[0], NUMERIC)
    x = cv.tensor(inputs[0])
    if not x.shape:
        raise cv.fail("the input must have rank >= 1")
    axis = _axis(cv, attrs.get("axis", -1), len(x.shape))
    n = x.shape[axis]
    k: Optional[Any] = attrs.get("k") if cv.opset < 10 else optional(inputs, 1)
    if k is None:
        raise cv.fail("K is missing")
    shape = list(x.shape)
    if isinstance(k, Value):
        k = _runtime_param(cv, k, "K", scalar=True)
        dynamic = True  # shape[axis] stays n: the bound of any K
    else:
        values = np.asarray(k).reshape(-1)
        if values.size != 1:
            raise cv.fail(f"K must hold one value, not {values.size}")
        k = int(values[0])
        if not 0 <= k <= n:
            raise cv.fail(f"K = {k} is outside [0, {n}] (the size of axis {axis})")
        shape[axis] = k
        dynamic = x.dynamic
    values_out, indices_out = cv.m.call(
        "topk", x, k, axis, bool(attrs.get("largest", 1)), bool(attrs.get("sorted", 1)),
        outputs=[(x.dtype, shape, dynamic), ("int64", shape, dynamic)])
    return [values_out, indices_out]
