"""Data-movement ONNX ops: Split, Slice, Gather, GatherElements, GatherND, ScatterElements,
Scatter, ScatterND, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, OneHot, EyeLike,
NonZero, Compress, Unique, Range, Size, ConstantOfShape (Resize and Upsample are in resize.py,
Shape in shape.py).

Parameters that decide an output's shape (split sizes, slice bounds, pads, repeats, a target
shape, a depth) are passed to the runtime as literal int lists when they are known at
conversion time. Where they are run-time tensors the op reads them at run and its output is
dynamic; that needs an upper bound for every output size. Slice and Split have one (the
input's size). Sizes computed from other tensors' sizes arrive as ShapeTensors
(_shape_tensor.py): Slice, Expand, Range and ConstantOfShape take their symbols, so outputs get
exact symbolic sizes and tight bounds; materialized, such a tensor carries its elements' upper
bounds (`int_bounds`, kept by Gather and Slice of it). Anything else with a run-time shape
parameter is refused: its output could be any size.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

import numpy as np

from ...compiler import Value
from .._registry import lowers
from .._shape_tensor import ShapeTensor, shape_tensor, upper_bounds
from .._symbolic import Size, as_int, broadcast_dims
from .common import (FLOATS, NUMERIC, UNBOUNDED_SHAPE, check_attrs, int64_tensor, optional,
                     require_dtype)

INDEX_DTYPES = ("int32", "int64")


# ---- upper bounds of run-time int tensors -------------------------------------------------

def int_bounds(cv: Any, x: Any) -> Optional[np.ndarray]:
    """Element-wise upper bounds (int64, x's shape) of a run-time int tensor, when known; for
    a known array, the array itself."""
    if not isinstance(x, Value):
        return None if x is None else np.asarray(x).astype(np.int64)
    entry = cv.__dict__.get("_int_bounds", {}).get(id(x))
    if entry is not None:
        return entry[1]
    given = cv.value_range(x)  # a graph input given value_bounds
    if given is None or given[0] < 0 or x.dtype not in INDEX_DTYPES or x.dynamic:
        return None
    return np.full(x.shape, int(given[1]), np.int64)


def set_int_bounds(cv: Any, value: Value, upper: Any) -> Value:
    """Record that every element of value is at most upper (and >= 0: sizes)."""
    table = cv.__dict__.setdefault("_int_bounds", {})
    table[id(value)] = (value, np.asarray(upper, dtype=np.int64).reshape(value.shape))
    return value


# ---- helpers --------------------------------------------------------------------------------

def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(cv: Any, op: str, *args: Any, dtype: str, shape: Sequence[int], dynamic: bool) -> Value:
    return cv.m.call(op, *args, outputs=[(dtype, [int(s) for s in shape], bool(dynamic))])[0]


def _int_param(cv: Any, x: Any, what: str) -> Any:
    """A known int parameter as a list, or a run-time int32/int64 tensor (a Value or a
    ShapeTensor of sizes) as is."""
    if isinstance(x, (Value, ShapeTensor)):
        require_dtype(cv, x, INDEX_DTYPES, what)
        if len(x.shape) > 1:
            raise cv.fail(f"{what} must be a 0-d or 1-d tensor")
        return x
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _known_ints(cv: Any, x: Any, what: str, why: str) -> List[int]:
    if isinstance(x, Value):
        raise cv.fail(f"{what} must be known at conversion time: {why}")
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _axis(cv: Any, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1) or rank == 0:
        raise cv.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _index_tensor(cv: Any, x: Any, what: str = "indices") -> Value:
    require_dtype(cv, x, INDEX_DTYPES, what)
    return cv.tensor(x)


# ---- Split ----------------------------------------------------------------------------------

@lowers("Split")
def split(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("axis", "split", "num_outputs"))
    x = cv.tensor(inputs[0])
    shape = list(x.shape)
    axis = _axis(cv, int(attrs.get("axis", 0)), len(shape))
    count = len(node.output)
    sizes_arg = attrs.get("split") if cv.opset < 13 else optional(inputs, 1)
    dim = shape[axis]
    given = sizes_arg is not None and (isinstance(sizes_arg, Value)
                                       or np.asarray(sizes_arg).size > 0)
    if given:
        sizes = _int_param(cv, sizes_arg, "split")
        if isinstance(sizes, list):
            if len(sizes) != count or any(s < 0 for s in sizes):
                raise cv.fail(f"split {sizes} does not give {count} sizes >= 0")
            if not x.dynamic and sum(sizes) != dim:
                raise cv.fail(f"split {sizes} does not add up to {dim}")
            parts = [(s, x.dynamic) for s in sizes]
        else:
            parts = [(dim, True)] * count  # each part at most the whole axis
    else:
        if "num_outputs" in attrs and int(attrs["num_outputs"]) != count:
            raise cv.fail(f"num_outputs {attrs['num_outputs']} but {count} outputs")
        if cv.opset < 18 and not x.dynamic and dim % count:
            raise cv.fail(f"cannot split {dim} into {count} equal parts")
        each = -(-dim // count) if count else 0
        part_sizes = [max(0, min(each, dim - each * i)) for i in range(count)]
        sizes = []  # the runtime's ceil rule, also for dynamic sizes
        parts = [(s, x.dynamic) for s in part_sizes]
    outputs = []
    for size, dynamic in parts:
        out_shape = list(shape)
        out_shape[axis] = size
        outputs.append((x.dtype, out_shape, dynamic))
    return cv.m.call("split", x, axis, sizes, outputs=outputs)


# ---- Slice ----------------------------------------------------------------------------------

def _slice_count(dim: int, start: int, end: int, step: int) -> int:
    """ONNX Slice length of one axis (the C kernel's rule)."""
    if start < 0:
        start = -1 if start < -dim else start + dim
    if end < 0:
        end = -1 if end < -dim else end + dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        span = end - start
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        span = start - end
    return 0 if span <= 0 else (span - 1) // abs(step) + 1


def _slice_bound(bound: int, start: int, end: int, step: int, dynamic: bool) -> int:
    """The longest slice over every size up to bound (the length is piecewise linear in the
    size, so its maximum is at the bound or at a breakpoint)."""
    if not dynamic:
        return _slice_count(bound, start, end, step)
    candidates = {bound}
    for v in (start, end):
        for d in (abs(v) - 1, abs(v), abs(v) + 1):
            if 0 <= d <= bound:
                candidates.add(d)
    return max(_slice_count(d, start, end, step) for d in candidates)


@lowers("Slice")
def slice_op(cv, node, inputs, attrs):
    x = cv.tensor(inputs[0])
    rank = len(x.shape)
    if cv.opset < 10:
        check_attrs(cv, attrs, ("starts", "ends", "axes"))
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs["axes"]) if "axes" in attrs else None
        steps = None
    else:
        starts = _int_param(cv, inputs[1], "starts")
        ends = _int_param(cv, inputs[2], "ends")
        axes = optional(inputs, 3)
        axes = None if axes is None else _int_param(cv, axes, "axes")
        steps = optional(inputs, 4)
        steps = None if steps is None else _int_param(cv, steps, "steps")
    dims = _symbolic_slice(cv, cv.dims_of(inputs[0]), starts, ends, axes, steps)
    starts, ends, axes, steps = params = tuple(
        cv.tensor(p) if isinstance(p, ShapeTensor) else p for p in (starts, ends, axes, steps))
    known = all(not isinstance(p, Value) for p in params)
    out_shape = list(x.shape)
    if known:
        n = len(starts)
        axes_l = list(range(n)) if axes is None else axes
        steps_l = [1] * n if steps is None else steps
        if len(ends) != n or len(axes_l) != n or len(steps_l) != n:
            raise cv.fail("starts, ends, axes and steps must have the same length")
        seen = set()
        for s, e, a, st in zip(starts, ends, axes_l, steps_l):
            a = _axis(cv, a, rank, "axes item")
            if a in seen or st == 0:
                raise cv.fail("axes must not repeat and steps must be nonzero")
            seen.add(a)
            out_shape[a] = _slice_bound(x.shape[a], s, e, st, x.dynamic)
        dynamic = x.dynamic
    else:
        dynamic = True
        if axes is not None and not isinstance(axes, Value):
            # Only the named axes shrink; a known step shortens the bound.
            for i, a in enumerate(axes):
                a = _axis(cv, a, rank, "axes item")
                if isinstance(steps, list) and i < len(steps) and steps[i] != 0:
                    out_shape[a] = -(-x.shape[a] // abs(steps[i]))
    if dims is not None:  # the symbols may bound the sizes tighter (a table sliced to `seq`)
        symbolic = upper_bounds(cv.space, dims, f"{cv.where()}: output")
        out_shape = [min(a, b) for a, b in zip(out_shape, symbolic)]
    y = _call(cv, "slice", x, starts, ends, axes, steps, dtype=x.dtype, shape=out_shape,
              dynamic=dynamic)
    if dims is not None:
        cv.set_dims(y, dims)
    bounds = int_bounds(cv, inputs[0])
    if bounds is not None and known and rank == 1:
        n = len(starts)
        st = (steps or [1])[0] if n else 1
        if n == 1:
            sl = slice(starts[0], ends[0], st)
            set_int_bounds(cv, y, _pad_bounds(bounds[sl], out_shape[0]))
        elif n == 0:
            set_int_bounds(cv, y, bounds)
    return [y]


class _Undecided(Exception):
    """A slice length the symbols cannot express."""


def _symbolic_slice(cv: Any, dims: Sequence[Size], starts: Any, ends: Any, axes: Any,
                    steps: Any) -> Optional[List[Size]]:
    """The output sizes of a Slice as symbols, or None when a parameter is a run-time value or
    the clamping of a symbolic bound cannot be decided."""
    def items(p: Any, default: Any) -> Optional[List[Any]]:
        if p is None:
            return default
        if isinstance(p, Value):
            return None
        return list(p.items.reshape(-1)) if isinstance(p, ShapeTensor) else list(p)

    begin, end = items(starts, None), items(ends, None)
    if begin is None or end is None:
        return None
    where = items(axes, list(range(len(begin))))
    stride = items(steps, [1] * len(begin))
    if where is None or stride is None or not len(begin) == len(end) == len(where) == len(stride):
        return None
    out = list(dims)
    try:
        for b, e, a, st in zip(begin, end, where, stride):
            a = as_int(a)
            if a is None or not -len(dims) <= a < len(dims):
                return None
            out[a] = _slice_length(cv.space, dims[a], b, e, st)
    except (_Undecided, ValueError):
        return None
    return out


def _slice_length(space: Any, dim: Size, start: Size, end: Size, step: Size) -> Size:
    """ONNX Slice's length on one axis for symbolic sizes (positive steps)."""
    step = as_int(step)
    if step is None or step <= 0:
        if step is not None and step < 0 and all(as_int(v) is not None for v in (dim, start, end)):
            return _slice_count(as_int(dim), as_int(start), as_int(end), step)
        raise _Undecided()

    def clamp(v: Size) -> Size:
        c = as_int(v)
        if c is not None and c < 0:
            v = space.dim(dim) + c
        elif c is None and space.bounds(v)[0] < 0:
            raise _Undecided()
        v = space.minimum(v, dim)
        return v if space.known_le(0, v) else space.maximum(v, 0)

    span = space.dim(clamp(end)) - clamp(start)
    if not space.known_le(0, span):
        span = space.dim(space.maximum(span, 0))
    return space.simplest(space.divide(span + (step - 1), step))


def _pad_bounds(values: np.ndarray, length: int) -> np.ndarray:
    """Bounds for a vector of `length` items taken from `values` (numpy slicing may differ
    from ONNX's at the clamps: fall back to the largest bound)."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) == length:
        return values
    top = int(values.max()) if values.size else 0
    return np.full(length, top, dtype=np.int64)


# ---- Gather family --------------------------------------------------------------------------

@lowers("Gather")
def gather(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("axis",))
    data, indices = inputs
    rank = len(cv.shape_of(data))
    axis = _axis(cv, int(attrs.get("axis", 0)), rank)
    dshape, ishape = list(cv.shape_of(data)), list(cv.shape_of(indices))
    if not isinstance(indices, Value) and not cv.is_dynamic(data):
        flat = np.asarray(indices).reshape(-1)
        bad = flat[(flat < -dshape[axis]) | (flat >= dshape[axis])]
        if bad.size:
            raise cv.fail(f"index {int(bad[0])} is out of range for axis {axis} of size "
                          f"{dshape[axis]}")
    shape = dshape[:axis] + ishape + dshape[axis + 1:]
    y = _call(cv, "gather", cv.tensor(data), _index_tensor(cv, indices), axis,
              dtype=cv.dtype_of(data), shape=shape,
              dynamic=cv.is_dynamic(data) or cv.is_dynamic(indices))
    bounds = int_bounds(cv, data) if isinstance(data, Value) else None
    if bounds is not None and not isinstance(indices, Value) and rank == 1:
        set_int_bounds(cv, y, bounds[np.asarray(indices, dtype=np.int64)])
    return [y]


@lowers("GatherElements")
def gather_elements(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("axis",))
    data, indices = inputs
    axis = _axis(cv, int(attrs.get("axis", 0)), len(cv.shape_of(data)))
    return [_call(cv, "gather_elements", cv.tensor(data), _index_tensor(cv, indices), axis,
                  dtype=cv.dtype_of(data), shape=cv.shape_of(indices),
                  dynamic=cv.is_dynamic(data) or cv.is_dynamic(indices))]


@lowers("GatherND")
def gather_nd(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("batch_dims",))
    data, indices = inputs
    b = int(attrs.get("batch_dims", 0))
    dshape, ishape = list(cv.shape_of(data)), list(cv.shape_of(indices))
    idims = cv.dims_of(indices)
    k = as_int(idims[-1]) if idims else 0
    if k is None:
        raise cv.fail(f"indices have sizes {[cv.space.text(d) for d in idims]}: their last "
                      f"size (the index length) must be known at conversion time")
    if not ishape or b < 0 or b >= min(len(ishape), len(dshape)) or b + k > len(dshape):
        raise cv.fail(f"indices {ishape} and batch_dims {b} do not fit data {dshape}")
    shape = ishape[:-1] + dshape[b + k:]
    y = _call(cv, "gather_nd", cv.tensor(data), _index_tensor(cv, indices), b,
              dtype=cv.dtype_of(data), shape=shape,
              dynamic=cv.is_dynamic(data) or cv.is_dynamic(indices))
    cv.set_dims(y, list(idims[:-1]) + list(cv.dims_of(data)[b + k:]))
    return [y]


_REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def _reduction(cv, attrs, data):
    name = _text(attrs.get("reduction", "none"))
    if name not in _REDUCTIONS:
        raise cv.fail(f"reduction {name!r} is not supported")
    if name != "none":
        require_dtype(cv, data, NUMERIC, "data with a reduction")
    return _REDUCTIONS[name]


@lowers("ScatterElements", "Scatter")
def scatter_elements(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("axis", "reduction"))
    data, indices, updates = inputs
    axis = _axis(cv, int(attrs.get("axis", 0)), len(cv.shape_of(data)))
    reduction = _reduction(cv, attrs, data)
    return [_call(cv, "scatter_elements", cv.tensor(data), _index_tensor(cv, indices),
                  cv.tensor(updates), axis, reduction, dtype=cv.dtype_of(data),
                  shape=cv.shape_of(data), dynamic=cv.is_dynamic(data))]


@lowers("ScatterND")
def scatter_nd(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("reduction",))
    data, indices, updates = inputs
    reduction = _reduction(cv, attrs, data)
    return [_call(cv, "scatter_nd", cv.tensor(data), _index_tensor(cv, indices),
                  cv.tensor(updates), reduction, dtype=cv.dtype_of(data),
                  shape=cv.shape_of(data), dynamic=cv.is_dynamic(data))]


# ---- Expand, Tile, Pad ----------------------------------------------------------------------

def _expand_shape(cv, xshape: Sequence[int], target: Sequence[int]) -> List[int]:
    rank = max(len(xshape), len(target))
    xs = [1] * (rank - len(xshape)) + list(xshape)
    ts = [1] * (rank - len(target)) + list(target)
    out = []
    for a, b in zip(xs, ts):
        if b < 0 or (a != b and a != 1 and b != 1):
            raise cv.fail(f"cannot expand shape {list(xshape)} to {list(target)}")
        out.append(a if b == 1 else b)
    return out


@lowers("Expand")
def expand(cv, node, inputs, attrs):
    x, shape = cv.tensor(inputs[0]), inputs[1]
    if not isinstance(shape, (Value, ShapeTensor)):
        target = _int_param(cv, shape, "shape")
        out = _expand_shape(cv, x.shape, target)
        y = _call(cv, "expand", x, target, dtype=x.dtype, shape=out, dynamic=x.dynamic)
        if x.dynamic:
            cv.set_dims(y, broadcast_dims(cv.space, [cv.dims_of(x), target]))
        return [y]
    if cv.dtype_of(shape) not in INDEX_DTYPES:
        raise cv.fail(f"shape has dtype {cv.dtype_of(shape)}; supported: int32, int64")
    dims = broadcast_dims(cv.space, [cv.dims_of(x), _shape_dims(cv, shape)])
    upper = upper_bounds(cv.space, dims, f"{cv.where()}: output")
    y = _call(cv, "expand", x, cv.tensor(shape), dtype=x.dtype, shape=upper, dynamic=True)
    cv.set_dims(y, dims)
    return [y]


@lowers("Tile")
def tile(cv, node, inputs, attrs):
    x, repeats = cv.tensor(inputs[0]), inputs[1]
    if isinstance(repeats, (Value, ShapeTensor)):
        # Counts computed from sizes (or with recorded bounds): the op reads them at run.
        require_dtype(cv, repeats, ("int64",), "repeats")
        counts = _shape_dims(cv, repeats)
        if len(counts) != len(x.shape):
            raise cv.fail(f"repeats has {len(counts)} counts for the {len(x.shape)} dimensions "
                          f"of x")
        dims = [cv.space.dim(d) * cv.space.dim(r) for d, r in zip(cv.dims_of(x), counts)]
        upper = upper_bounds(cv.space, dims, f"{cv.where()}: output")
        y = _call(cv, "tile", x, cv.tensor(repeats), dtype=x.dtype, shape=upper, dynamic=True)
        cv.set_dims(y, dims)
        return [y]
    repeats = [int(v) for v in np.asarray(repeats).reshape(-1)]
    if len(repeats) != len(x.shape) or any(r < 0 for r in repeats):
        raise cv.fail(f"repeats {repeats} must give one count >= 0 per dimension of x")
    shape = [s * r for s, r in zip(x.shape, repeats)]
    return [_call(cv, "tile", x, repeats, dtype=x.dtype, shape=shape, dynamic=x.dynamic)]


_PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


@lowers("Pad")
def pad(cv, node, inputs, attrs):
    x = cv.tensor(inputs[0])
    rank = len(x.shape)
    mode = _text(attrs.get("mode", "constant"))
    if mode not in _PAD_MODES:
        raise cv.fail(f"mode {mode!r} is not supported")
    why = "run-time pads would make the output size unbounded"
    value: Any = None
    if cv.opset < 11:
        check_attrs(cv, attrs, ("mode", "pads", "paddings", "value"))
        pads = [int(p) for p in attrs.get("pads", attrs.get("paddings", []))]
        value = np.array(float(attrs.get("value", 0.0)))
        axes = list(range(rank))
    else:
        check_attrs(cv, attrs, ("mode",))
        value = optional(inputs, 2)
        axes_in = optional(inputs, 3)
        if isinstance(inputs[1], Value) or isinstance(axes_in, Value):
            return [_pad_at_run(cv, x, inputs[1], axes_in, mode, _pad_value(cv, x, mode, value))]
        pads = _known_ints(cv, inputs[1], "pads", why)
        axes = list(range(rank)) if axes_in is None else [
            _axis(cv, a, rank, "axes item") for a in _known_ints(cv, axes_in, "axes", why)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise cv.fail(f"pads {pads} need 2 items per axis of {axes}")
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[a], full[a + rank] = pads[i], pads[i + len(axes)]
    shape = [s + full[d] + full[d + rank] for d, s in enumerate(x.shape)]
    kept = [s + min(full[d], 0) + min(full[d + rank], 0) for d, s in enumerate(x.shape)]
    if any(s < 0 for s in shape) or (not x.dynamic and any(k < 0 for k in kept)):
        raise cv.fail(f"pads {pads} crop more than x {list(x.shape)} holds")
    if mode != "constant" and not x.dynamic and any(k == 0 and s > 0 for k, s in zip(kept, shape)):
        raise cv.fail(f"{mode} padding of an empty dimension")
    return [_call(cv, "pad", x, full, _PAD_MODES[mode], _pad_value(cv, x, mode, value),
                  dtype=x.dtype, shape=shape, dynamic=x.dynamic)]


def _pad_value(cv: Any, x: Value, mode: str, value: Any) -> Optional[Value]:
    """The constant_value operand of pad: none (zero) unless mode constant gives one."""
    empty = value is None or (not isinstance(value, Value) and np.asarray(value).size == 0)
    if mode != "constant" or empty:
        return None
    if isinstance(value, Value):
        if value.dtype != x.dtype:
            raise cv.fail("constant_value must have the dtype of data")
        return value
    return cv.tensor(np.asarray(value).astype(x.dtype).reshape(()))


def _pad_at_run(cv: Any, x: Value, pads: Any, axes: Any, mode: str,
                value: Optional[Value]) -> Value:
    """Pad with pads (or axes) read at run: bounded by the pads' value_bounds. With axes, the
    pads are scattered into the begins-then-ends list of every dimension at run."""
    rank = len(x.shape)
    given = cv.value_range(pads)
    if given is None:
        raise cv.fail("run-time pads need an upper bound: give the graph input they come from "
                      "value_bounds")
    require_dtype(cv, pads, INDEX_DTYPES, "pads")
    count = int(np.prod(cv.shape_of(pads)))
    pads_t = int64_tensor(cv, pads)
    if axes is not None:
        require_dtype(cv, axes, INDEX_DTYPES, "axes")
        n = int(np.prod(cv.shape_of(axes)))
        if count != 2 * n:
            raise cv.fail(f"pads has {count} items; {n} axes need {2 * n}")
        axes_t = cv.m.reshape(int64_tensor(cv, axes), [n])
        # Negative axes count from the end; out-of-range ones fail in scatter_elements.
        negative = cv.m.less(axes_t, cv.tensor(np.zeros((), np.int64)))
        shifted = cv.m.add(axes_t, cv.tensor(np.array(rank, np.int64)))
        axes_t = _call(cv, "where", negative, shifted, axes_t, dtype="int64", shape=[n],
                       dynamic=False)
        ends = cv.m.add(axes_t, cv.tensor(np.array(rank, np.int64)))
        where = cv.m.concat([axes_t, ends], 0)
        zeros = cv.tensor(np.zeros(2 * rank, np.int64))
        pads_t = _call(cv, "scatter_elements", zeros, where, cv.m.reshape(pads_t, [2 * n]), 0,
                       0, dtype="int64", shape=[2 * rank], dynamic=False)
    elif count != 2 * rank:
        raise cv.fail(f"pads has {count} items; x of rank {rank} needs {2 * rank}")
    # Any dimension may get the largest pad at both ends.
    most = int(given[1])
    shape = [max(s + 2 * most, 0) for s in x.shape]
    return _call(cv, "pad", x, pads_t, _PAD_MODES[mode], value, dtype=x.dtype, shape=shape,
                 dynamic=True)


# ---- DepthToSpace, SpaceToDepth, Trilu ------------------------------------------------------

_ORDERS = {"DCR": 0, "CRD": 1}


def _block(cv, node, inputs, attrs, to_space: bool):
    check_attrs(cv, attrs, ("blocksize", "mode"))
    x = cv.tensor(inputs[0])
    if len(x.shape) != 4:
        raise cv.fail(f"x must have rank 4, not {len(x.shape)}")
    b = int(attrs["blocksize"])
    mode = _text(attrs.get("mode", "DCR"))
    if mode not in _ORDERS or b < 1:
        raise cv.fail(f"mode {mode!r} / blocksize {b} is not supported")
    n, c, h, w = x.shape
    if to_space:
        if c % (b * b) and not x.dynamic:
            raise cv.fail(f"{c} channels are not a multiple of blocksize^2")
        shape = [n, c // (b * b), h * b, w * b]
    else:
        if (h % b or w % b) and not x.dynamic:
            raise cv.fail(f"height {h} and width {w} must be multiples of blocksize {b}")
        shape = [n, c * b * b, h // b, w // b]
    op = "depth_to_space" if to_space else "space_to_depth"
    return [_call(cv, op, x, b, _ORDERS[mode], dtype=x.dtype, shape=shape, dynamic=x.dynamic)]


@lowers("DepthToSpace")
def depth_to_space(cv, node, inputs, attrs):
    return _block(cv, node, inputs, attrs, True)


@lowers("SpaceToDepth")
def space_to_depth(cv, node, inputs, attrs):
    return _block(cv, node, inputs, attrs, False)


@lowers("Trilu")
def trilu(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("upper",))
    x = cv.tensor(inputs[0])
    if len(x.shape) < 2:
        raise cv.fail("x needs rank >= 2")
    k = optional(inputs, 1)
    if k is None:
        k_arg: Any = 0
    elif isinstance(k, Value):
        k_arg = _int_param(cv, k, "k")
    else:
        k_arg = int(np.asarray(k).reshape(-1)[0])
    return [_call(cv, "trilu", x, k_arg, bool(attrs.get("upper", 1)), dtype=x.dtype,
                  shape=x.shape, dynamic=x.dynamic)]


# ---- OneHot, EyeLike, NonZero ---------------------------------------------------------------

@lowers("OneHot")
def one_hot(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("axis",))
    indices, depth, values = inputs
    require_dtype(cv, indices, NUMERIC, "indices")
    if isinstance(depth, Value):
        # Read at run (ONNX casts a float depth to int64), bounded by value_bounds.
        given = cv.value_range(depth)
        if given is None or int(np.prod(depth.shape)) != 1:
            raise cv.fail("a run-time depth needs an upper bound: give the graph input it "
                          "comes from value_bounds")
        depth_arg, depth_n = int64_tensor(cv, depth), max(int(given[1]), 0)
        dynamic = True
    else:
        depth_arg = depth_n = int(np.asarray(depth).reshape(-1)[0])
        if depth_n < 0:
            raise cv.fail(f"depth {depth_n} must be >= 0")
        dynamic = cv.is_dynamic(indices)
    ishape = list(cv.shape_of(indices))
    axis = _axis(cv, int(attrs.get("axis", -1)), len(ishape) + 1)
    shape = ishape[:axis] + [depth_n] + ishape[axis:]
    vals = cv.tensor(values)
    if int(np.prod(vals.shape)) != 2:
        raise cv.fail("values must hold 2 elements (off, on)")
    return [_call(cv, "one_hot", cv.tensor(indices), depth_arg, axis, vals, dtype=vals.dtype,
                  shape=shape, dynamic=dynamic)]


@lowers("EyeLike")
def eye_like(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("dtype", "k"))
    x = inputs[0]
    shape = list(cv.shape_of(x))
    if len(shape) != 2:
        raise cv.fail("x must have rank 2")
    if "dtype" in attrs:
        from .._convert import onnx_dtype_name

        dtype = onnx_dtype_name(int(attrs["dtype"]))
    else:
        dtype = cv.dtype_of(x)
    k = int(attrs.get("k", 0))
    if not cv.is_dynamic(x):
        if dtype == "bfloat16":
            raise cv.fail("a bfloat16 result is not supported")
        return [np.eye(shape[0], shape[1], k, dtype=np.dtype(dtype))]
    return [_call(cv, "eye_like", x, k, dtype=dtype, shape=shape, dynamic=True)]


@lowers("NonZero")
def non_zero(cv, node, inputs, attrs):
    x = cv.tensor(inputs[0])
    if not x.shape:
        raise cv.fail("a 0-d input is not supported")
    # A data-dependent shape: planned for the most nonzeros, sized at every run.
    return [_call(cv, "non_zero", x, dtype="int64", shape=[len(x.shape), int(np.prod(x.shape))],
                  dynamic=True)]


@lowers("Compress")
def compress(cv, node, inputs, attrs):
    """The slices of the input along `axis` (of the flattened input without one) where the 1-D
    condition is true; slices past the condition's end are dropped. A data-dependent size: a
    run-time condition goes through non_zero, whose indices gather takes."""
    check_attrs(cv, attrs, ("axis",))
    data, condition = inputs
    shape = list(cv.shape_of(data))
    if "axis" in attrs:
        axis = _axis(cv, int(attrs["axis"]), len(shape))
    else:
        data, axis = cv.m.reshape(cv.tensor(data), [-1]), 0
        shape = [int(np.prod(shape))]
    cshape = list(cv.shape_of(condition))
    if len(cshape) != 1:
        raise cv.fail(f"condition must be 1-D, not of shape {cshape}")
    if cshape[0] > shape[axis]:
        raise cv.fail(f"condition has {cshape[0]} elements, more than the {shape[axis]} "
                      f"slices along axis {axis}")
    if not isinstance(condition, Value):
        picked = np.nonzero(np.asarray(condition).astype(bool))[0].astype(np.int64)
        return gather(cv, node, [data, picked], {"axis": axis})
    where = _call(cv, "non_zero", condition, dtype="int64", shape=[1, cshape[0]], dynamic=True)
    indices = cv.m.reshape(where, [-1])
    shape[axis] = cshape[0]
    return [_call(cv, "gather", cv.tensor(data), indices, axis, dtype=cv.dtype_of(data),
                  shape=shape, dynamic=True)]


@lowers("Unique")
def unique(cv, node, inputs, attrs):
    """The distinct slices along `axis` (elements of the flattened input without one), sorted
    or in order of first occurrence, with their first indices, every slice's position among
    them and their counts. A data-dependent size: planned for every slice distinct."""
    check_attrs(cv, attrs, ("axis", "sorted"))
    x = cv.tensor(inputs[0])
    require_dtype(cv, x, NUMERIC + ("bool",), "X")
    if "axis" in attrs:
        axis = _axis(cv, int(attrs["axis"]), len(x.shape))
    else:
        x, axis = cv.m.reshape(x, [-1]), 0
    n = x.shape[axis]
    return cv.m.call("unique", x, axis, bool(int(attrs.get("sorted", 1))),
                     outputs=[(x.dtype, list(x.shape), True), ("int64", [n], True),
                              ("int64", [n], True), ("int64", [n], True)])


# ---- Range, Size, ConstantOfShape, Shape ----------------------------------------------------

@lowers("Range")
def range_op(cv, node, inputs, attrs):
    """A Range whose start, limit and delta are sizes (known or symbolic, delta known) has a
    symbolic length; the op reads the values at run and writes up to its upper bound."""
    start, limit, delta = inputs
    dtype = require_dtype(cv, start, NUMERIC, "start")
    items = [_size_item(v) for v in (start, limit, delta)]
    step = None if items[2] is None else as_int(items[2])
    if items[0] is None or items[1] is None or not step:
        return [_range_in_value_bounds(cv, start, limit, delta, dtype)]
    space = cv.space
    span = space.dim(items[1]) - items[0] if step > 0 else space.dim(items[0]) - items[1]
    count = space.divide(span + (abs(step) - 1), abs(step))
    if not space.known_le(0, count):
        count = space.maximum(count, 0)
    args = [cv.tensor(np.asarray(v).astype(dtype).reshape(())) if not isinstance(v, (Value, ShapeTensor))
            else _scalar_tensor(cv, v, dtype) for v in (start, limit, delta)]
    bound = upper_bounds(space, [count], f"{cv.where()}: Range length")
    y = _call(cv, "range", *args, dtype=dtype, shape=bound, dynamic=True)
    cv.set_dims(y, [count])
    return [y]


def _range_in_value_bounds(cv: Any, start: Any, limit: Any, delta: Any, dtype: str) -> Value:
    """A Range of run-time values within known ranges (value_bounds of the graph inputs they
    are): its length is at most the widest span over the narrowest step."""
    ranges = [cv.value_range(v) for v in (start, limit, delta)]
    if any(r is None for r in ranges):
        raise cv.fail("Range needs an upper bound for its length: start and limit computed from "
                      "sizes with a known delta, or graph inputs given value_bounds")
    (start_lo, start_hi), (limit_lo, limit_hi), (delta_lo, delta_hi) = ranges
    integer = dtype not in FLOATS
    if delta_lo > 0 or delta_hi < 0 or integer:
        # An integer delta's interval may hold 0 (refused at run); elsewhere |delta| >= 1.
        up = delta_lo if delta_lo > 0 else 1 if delta_hi > 0 else None
        down = -delta_hi if delta_hi < 0 else 1 if delta_lo < 0 else None
    else:
        up = down = None
    if up is None and down is None:
        raise cv.fail(f"Range's delta lies in [{delta_lo:g}, {delta_hi:g}]: its length has no "
                      f"upper bound")
    length = 0
    if up is not None:
        length = max(length, math.ceil((limit_hi - start_lo) / up))
    if down is not None:
        length = max(length, math.ceil((start_hi - limit_lo) / down))
    args = [_scalar_tensor(cv, v, dtype) for v in (start, limit, delta)]
    return _call(cv, "range", *args, dtype=dtype, shape=[length], dynamic=True)


def _size_item(x: Any) -> Optional[Size]:
    """The one element of a known int array or a ShapeTensor, else None (a run-time value or
    a float)."""
    if isinstance(x, ShapeTensor):
        return x.items.reshape(-1)[0] if x.items.size == 1 else None
    if isinstance(x, Value) or x is None:
        return None
    arr = np.asarray(x)
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
        return None
    return int(arr.reshape(-1)[0])


def _scalar_tensor(cv: Any, x: Any, dtype: str) -> Value:
    """A 0-d program tensor of dtype for a one-element operand."""
    v = cv.tensor(x)
    if v.dtype != dtype:
        v = cv.m.cast(v, dtype)
    return v if v.shape == () else cv.m.reshape(v, [])


@lowers("Size")
def size_op(cv, node, inputs, attrs):
    total: Size = 1
    for d in cv.dims_of(inputs[0]):
        total = cv.space.simplest(cv.space.dim(total) * d)
    return [shape_tensor(cv.space, total, "int64")]


@lowers("ConstantOfShape")
def constant_of_shape(cv, node, inputs, attrs):
    shape = inputs[0]
    value = attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else cv._numpy_helper.to_array(value)
    fill = np.asarray(fill).reshape(-1)[:1].reshape(())
    dims = _shape_dims(cv, shape)
    require_dtype(cv, shape, INDEX_DTYPES, "input")
    y = _call(cv, "constant_of_shape", cv.tensor(shape), cv.tensor(fill), dtype=cv.dtype_of(fill),
              shape=upper_bounds(cv.space, dims, f"{cv.where()}: output"), dynamic=True)
    cv.set_dims(y, dims)
    return [y]


def _shape_dims(cv: Any, shape: Any) -> List[Size]:
    """The sizes a shape operand holds: a ShapeTensor's symbols, else sizes bounded by what
    is recorded for a run-time tensor (refused when nothing bounds them)."""
    if isinstance(shape, ShapeTensor):
        return list(shape.items.reshape(-1))
    upper = int_bounds(cv, shape)
    if upper is None or (isinstance(shape, Value) and shape.dynamic):
        raise cv.fail(UNBOUNDED_SHAPE)
    if not isinstance(shape, Value):
        return [int(u) for u in upper.reshape(-1)]
    return [cv.space.atom(f"%{shape.index}[{i}]", 0, int(u), ("element", shape, i))
            for i, u in enumerate(upper.reshape(-1))]
