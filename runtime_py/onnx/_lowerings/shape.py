"""Shape and data-movement ONNX ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
Shape."""
from __future__ import annotations

import numpy as np

from ...compiler import Value
from .._registry import lowers
from .._shape_tensor import as_items, shape_tensor, upper_bounds
from .._symbolic import as_int
from .common import UNBOUNDED_SHAPE, const_ints, optional, reshape


def reshape_to_dims(cv, x, dims):
    """Reshape x to sizes that may be symbolic. Known sizes give a literal shape; one symbolic
    size becomes the literal's -1 (the runtime infers it); more are computed at run time into
    a shape tensor. A dynamic result is planned at the sizes' upper bounds."""
    space = cv.space
    dims = [space.simplest(d) for d in dims]
    if not isinstance(x, Value) and all(isinstance(d, int) for d in dims):
        return np.asarray(x).reshape(dims)
    x = cv.tensor(x)
    symbolic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
    if not symbolic:
        if not x.dynamic:
            return reshape(cv, x, dims)
        return cv.m.call("reshape", x, dims, outputs=[(x.dtype, dims, False)])[0]
    upper = upper_bounds(space, dims, f"{cv.where()}: output")
    if len(symbolic) == 1:
        shape = [-1 if i == symbolic[0] else d for i, d in enumerate(dims)]
    else:
        shape = cv.tensor(shape_tensor(space, dims, "int64"))
    y = cv.m.call("reshape", x, shape, outputs=[(x.dtype, upper, True)])[0]
    cv.set_dims(y, dims)
    return y


def _numel(cv, dims):
    total = cv.space.dim(1)
    for d in dims:
        total = total * d
    return total


@lowers("Reshape")
def reshape_op(cv, node, inputs, attrs):
    x, target = inputs[0], inputs[1]
    allow_zero = bool(attrs.get("allowzero", 0))
    if isinstance(target, Value):
        return [_reshape_at_run(cv, cv.tensor(x), target, allow_zero)]
    items = list(as_items(target).reshape(-1))
    xdims = cv.dims_of(x)
    dims = []
    for i, t in enumerate(items):
        if as_int(t) == 0 and not allow_zero:
            if i >= len(xdims):
                raise cv.fail(f"shape {_text(cv, items)} copies dimension {i}, but the input "
                              f"has rank {len(xdims)}")
            dims.append(xdims[i])
        else:
            dims.append(t)
    inferred = [i for i, d in enumerate(dims) if as_int(d) == -1]
    if len(inferred) > 1:
        raise cv.fail(f"shape {_text(cv, items)} has more than one -1")
    if inferred:
        others = _numel(cv, [d for i, d in enumerate(dims) if i != inferred[0]])
        if others.constant == 0:
            raise cv.fail(f"cannot infer the -1 in shape {_text(cv, items)}: the other sizes "
                          f"multiply to 0")
        numel = _numel(cv, xdims)
        if numel.constant is not None and others.constant is not None \
                and numel.constant % others.constant:
            raise cv.fail(f"cannot infer -1 in shape {_text(cv, items)}: {numel.constant} "
                          f"elements are not a multiple of {others.constant}")
        try:
            dims[inferred[0]] = cv.space.divide(numel, others)
        except ValueError:
            raise cv.fail(f"cannot bound the -1 of shape {_text(cv, items)} for input sizes "
                          f"{_text(cv, xdims)}") from None
    return [reshape_to_dims(cv, x, dims)]


def _reshape_at_run(cv, x, target, allow_zero):
    """Reshape to a shape read at run, whose elements lie in the graph input's value_bounds.
    A size is at most the highest value, x's element count where it may be -1 (inferred), and
    x's size there where it may be 0 (copied, without allowzero). The runtime's reshape infers
    -1; ONNX's 0 is replaced by x's size here, at run."""
    given = cv.value_range(target)
    if given is None or len(target.shape) != 1 or target.dtype != "int64":
        raise cv.fail(UNBOUNDED_SHAPE)
    lo, hi = given
    rank = target.shape[0]
    bounds = []
    for i in range(rank):
        bound = max(hi, 0)
        if lo <= -1:
            bound = max(bound, int(np.prod(x.shape)))
        if lo <= 0 <= hi and not allow_zero and i < len(x.shape):
            bound = max(bound, x.shape[i])
        bounds.append(bound)
    shape = target
    if lo <= 0 <= hi and not allow_zero:
        # 0 copies x's size at the same position (x's rank may be below the target's).
        kept = min(rank, len(x.shape))
        sizes = cv.m.call("shape", x, 0, kept, outputs=[("int64", [kept], False)])[0]
        if rank > kept:
            sizes = cv.m.concat([sizes, cv.tensor(np.zeros(rank - kept, np.int64))], 0)
        zero = cv.m.equal(target, cv.tensor(np.zeros((), np.int64)))
        shape = cv.m.call("where", zero, sizes, target, outputs=[("int64", [rank], False)])[0]
    return cv.m.call("reshape", x, shape, outputs=[(x.dtype, bounds, True)])[0]


def _text(cv, sizes):
    return "[" + ", ".join(cv.space.text(d) for d in sizes) + "]"


@lowers("Flatten")
def flatten(cv, node, inputs, attrs):
    x = inputs[0]
    dims = cv.dims_of(x)
    axis = int(attrs.get("axis", 1))
    axis = axis + len(dims) if axis < 0 else axis
    if not 0 <= axis <= len(dims):
        raise cv.fail(f"axis {attrs.get('axis')} is out of range for rank {len(dims)}")
    return [reshape_to_dims(cv, x, [_numel(cv, dims[:axis]), _numel(cv, dims[axis:])])]


def _axes(cv, node, inputs, attrs):
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    axes = optional(inputs, 1)
    return None if axes is None else const_ints(cv, axes, "axes")


def _axes_at_run(cv, op, x, axes):
    """Squeeze / Unsqueeze with axes read at run: the rank follows from their count; each
    size is at most x's largest (or 1)."""
    if axes.dtype not in ("int32", "int64") or len(axes.shape) > 1:
        raise cv.fail(f"axes must be a 0-d or 1-d int32 or int64 tensor, not {axes.dtype} "
                      f"{list(axes.shape)}")
    x = cv.tensor(x)
    count = int(np.prod(axes.shape))
    rank = len(x.shape) + (count if op == "unsqueeze" else -count)
    if rank < 0:
        raise cv.fail(f"{count} axes cannot be removed from x of rank {len(x.shape)}")
    bound = max(list(x.shape) + [1])
    return cv.m.call(op, x, axes, outputs=[(x.dtype, [bound] * rank, True)])[0]


@lowers("Squeeze")
def squeeze(cv, node, inputs, attrs):
    x = inputs[0]
    if "axes" not in attrs and isinstance(optional(inputs, 1), Value):
        return [_axes_at_run(cv, "squeeze", x, inputs[1])]
    dims = list(cv.dims_of(x))
    axes = _axes(cv, node, inputs, attrs)
    rank = len(dims)
    if axes is None:
        axes = [i for i, d in enumerate(dims) if as_int(d) == 1]
        unknown = [i for i, d in enumerate(dims) if as_int(d) is None
                   and cv.space.bounds(d)[0] <= 1 <= cv.space.bounds(d)[1]]
        if unknown:
            raise cv.fail(f"Squeeze without axes of sizes {_text(cv, dims)}: whether axes "
                          f"{unknown} are 1 is known only at run time")
    axes = sorted({a + rank if a < 0 else a for a in axes})
    for a in axes:
        if not 0 <= a < rank or cv.space.equal(dims[a], 1) is False:
            raise cv.fail(f"cannot squeeze axis {a} of shape {_text(cv, dims)}")
    return [reshape_to_dims(cv, x, [1 if i in axes else d for i, d in enumerate(dims)
                                    if i not in axes])]


@lowers("Unsqueeze")
def unsqueeze(cv, node, inputs, attrs):
    x = inputs[0]
    if "axes" not in attrs and isinstance(optional(inputs, 1), Value):
        return [_axes_at_run(cv, "unsqueeze", x, inputs[1])]
    dims = list(cv.dims_of(x))
    axes = _axes(cv, node, inputs, attrs)
    if axes is None:
        raise cv.fail("axes are missing")
    rank = len(dims) + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise cv.fail(f"axes {axes} are invalid for output rank {rank}")
    it = iter(dims)
    return [reshape_to_dims(cv, x, [1 if i in axes else next(it) for i in range(rank)])]


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
    """The sizes of x: known ints fold to a constant, symbolic ones give a ShapeTensor that
    later shape arithmetic works on (_shape_tensor.py)."""
    dims = list(cv.dims_of(inputs[0]))
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    return [shape_tensor(cv.space, dims[start:None if end is None else int(end)], "int64")]
