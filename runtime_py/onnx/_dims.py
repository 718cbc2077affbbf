"""Symbolic sizes of the dynamic values a lowering produced.

After a node is lowered, the converter records the sizes of its dynamic outputs as expressions
of the input sizes (`Converter.set_dims`), so that a later `Shape` sees `batch` and `seq`
rather than sizes measured anew: that is what lets Reshape targets fold to known sizes and a
table sliced to `seq` broadcast against a tensor of length `seq`. Lowerings that decide sizes
themselves (Reshape, Slice, Expand, Range, ...) record them directly; the rules here cover the
ops whose output sizes follow from their inputs'. An op without a rule leaves its outputs to
fresh sizes (sound, only less precise).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from ..compiler import Value
from ._symbolic import Size, broadcast_dims

Dims = Tuple[Size, ...]

# Outputs shaped like the numpy broadcast of every input (unary ops are the one-input case).
BROADCASTING = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Min", "Max", "Mean", "Sum", "Where", "Equal",
    "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "BitShift",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "PRelu",
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
    "Cos", "Tan", "Tanh", "Erf", "Sigmoid", "HardSigmoid", "LeakyRelu", "Elu", "Selu", "Gelu",
    "Softplus", "Softsign", "HardSwish", "Mish", "Swish", "Relu", "IsNaN", "IsInf", "Cast",
    "CastLike",
    "Identity", "Dropout", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "ThresholdedRelu", "Celu", "Shrink", "Trilu"})
# Outputs shaped like input 0 (the others are weights or small parameters).
LIKE_FIRST = frozenset({
    "Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "SimplifiedLayerNormalization",
    "RMSNormalization", "BatchNormalization", "InstanceNormalization", "GroupNormalization",
    "LpNormalization", "Clip", "CumSum", "ScatterElements", "ScatterND", "Scatter",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"})


def _broadcast(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    shapes = [cv.dims_of(x) for x in inputs if x is not None]
    if node.op_type == "Trilu" or node.op_type in ("Dropout", "Cast", "CastLike"):
        shapes = shapes[:1]
    return [broadcast_dims(cv.space, shapes)]


def _like_first(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    return [cv.dims_of(inputs[0])]


def _matmul(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    a, b = (list(cv.dims_of(x)) for x in inputs[:2])
    a1, b1 = len(a) == 1, len(b) == 1
    a = [1] + a if a1 else a
    b = b + [1] if b1 else b
    batch = broadcast_dims(cv.space, [a[:-2], b[:-2]])
    out = list(batch) + [a[-2], b[-1]]
    if b1:
        out.pop()
    if a1:
        out.pop(-2 if not b1 else -1)
    return [tuple(out)]


def _gemm(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    a, b = cv.dims_of(inputs[0]), cv.dims_of(inputs[1])
    rows = a[1] if attrs.get("transA", 0) else a[0]
    cols = b[0] if attrs.get("transB", 0) else b[1]
    return [(rows, cols)]


def _transpose(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    x = cv.dims_of(inputs[0])
    perm = [int(p) for p in attrs.get("perm", list(range(len(x)))[::-1])]
    return [tuple(x[p] for p in perm)]


def _concat(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    parts = [cv.dims_of(x) for x in inputs if x is not None]
    rank = len(parts[0])
    axis = int(attrs["axis"]) % rank
    out = list(parts[0])
    out[axis] = sum((p[axis] for p in parts[1:]), cv.space.dim(parts[0][axis]))
    for a in range(rank):  # a known size among the parts decides the others'
        if a != axis:
            out[a] = next((p[a] for p in parts if isinstance(p[a], int)), out[a])
    return [tuple(out)]


def _gather(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    data, indices = cv.dims_of(inputs[0]), cv.dims_of(inputs[1])
    axis = int(attrs.get("axis", 0)) % max(len(data), 1)
    return [tuple(data[:axis]) + tuple(indices) + tuple(data[axis + 1:])]


def _like_indices(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    return [cv.dims_of(inputs[1])]


def _reduce(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    x = cv.dims_of(inputs[0])
    axes = attrs.get("axes")
    if axes is None and len(inputs) > 1 and inputs[1] is not None:
        if isinstance(inputs[1], Value):
            return []
        axes = np.asarray(inputs[1]).reshape(-1).tolist()
    if node.op_type in ("ArgMax", "ArgMin"):
        axes = [attrs.get("axis", 0)]
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(len(x)))
    axes = {int(a) % len(x) for a in axes}
    keep = attrs.get("keepdims", 1)
    return [tuple(1 if a in axes else d for a, d in enumerate(x) if keep or a not in axes)]


def _conv(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        return []
    return [conv_dims(cv, inputs[0], inputs[1], attrs)]


def _pool(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        return []
    return [pool_dims(cv, inputs[0], attrs)]


def conv_dims(cv: Any, x: Any, w: Any, attrs: Dict[str, Any]) -> Dims:
    """Conv's sizes (explicit pads: auto_pad NOTSET or VALID)."""
    w = cv.dims_of(w)
    kernel = [int(k) for k in attrs.get("kernel_shape", w[2:])]
    return _window_dims(cv, cv.dims_of(x), w[0], kernel, attrs, False)


def pool_dims(cv: Any, x: Any, attrs: Dict[str, Any]) -> Dims:
    """MaxPool's and AveragePool's sizes (explicit pads)."""
    x = cv.dims_of(x)
    kernel = [int(k) for k in attrs["kernel_shape"]]
    return _window_dims(cv, x, x[1], kernel, attrs, bool(attrs.get("ceil_mode", 0)))


def _window_dims(cv: Any, x: Sequence[Size], channels: Size, kernel: Sequence[int],
                 attrs: Dict[str, Any], ceil_mode: bool) -> Dims:
    """Spatial sizes (size + pads - dilation * (kernel - 1) - 1) / stride + 1, rounded up in
    ceil mode."""
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise ValueError("auto_pad SAME needs static spatial sizes")
    spatial = len(x) - 2
    strides = attrs.get("strides", [1] * spatial)
    dilations = attrs.get("dilations", [1] * spatial)
    pads = attrs.get("pads", [0] * 2 * spatial)
    space = cv.space
    out: List[Size] = [x[0], channels]
    for i in range(spatial):
        stride = int(strides[i])
        span = space.dim(x[2 + i]) + int(pads[i]) + int(pads[i + spatial]) \
            - int(dilations[i]) * (kernel[i] - 1) - 1 + (stride - 1 if ceil_mode else 0)
        quotient = space.divide(span, stride, valid_from_zero=True)
        out.append(space.simplest(space.dim(quotient) + 1))
    return tuple(out)


def _split(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Dims]:
    x = cv.dims_of(inputs[0])
    axis = int(attrs.get("axis", 0)) % len(x)
    sizes = attrs.get("split")
    if sizes is None and len(inputs) > 1 and inputs[1] is not None:
        if isinstance(inputs[1], Value):
            return []
        sizes = np.asarray(inputs[1]).reshape(-1).tolist()
    count = len([o for o in node.output if o])
    if sizes is None:  # equal parts, the last one smaller (ceil rule)
        part = cv.space.divide(cv.space.dim(x[axis]) + (count - 1), count)
        sizes = [part] * (count - 1) + [cv.space.dim(x[axis]) - part * (count - 1)]
    return [tuple(s if a == axis else d for a, d in enumerate(x)) for s in sizes]


RULES: Dict[str, Callable[..., List[Dims]]] = {
    **{op: _broadcast for op in BROADCASTING},
    **{op: _like_first for op in LIKE_FIRST},
    "MatMul": _matmul, "Gemm": _gemm, "Transpose": _transpose, "Concat": _concat,
    "Gather": _gather, "Conv": _conv, "Split": _split,
    "MaxPool": _pool, "AveragePool": _pool,
    "GatherElements": _like_indices,
    **{op: _reduce for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                              "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
                              "ReduceSumSquare", "ReduceLogSum", "ArgMax", "ArgMin")},
}


def infer(cv: Any, node: Any, inputs: Sequence[Any], attrs: Dict[str, Any],
          outputs: Sequence[Any]) -> None:
    """Record the symbolic sizes of node's dynamic outputs that the lowering left unknown."""
    pending = [isinstance(y, Value) and y.dynamic and id(y) not in cv._dims for y in outputs]
    rule = RULES.get(node.op_type)
    if rule is None or not any(pending):
        return
    try:
        inferred = rule(cv, node, inputs, attrs)
    except (ValueError, IndexError, KeyError, ZeroDivisionError, TypeError):
        return  # sizes the rule cannot express: fresh sizes stay sound
    for y, dims, todo in zip(outputs, inferred, pending):
        if todo and len(dims) == len(y.shape) and _within(cv, dims, y.shape):
            cv.set_dims(y, dims)


def _within(cv: Any, dims: Sequence[Size], planned: Sequence[int]) -> bool:
    """Dims whose upper bounds fit the planned shape (a rule that disagrees with the
    lowering's shape is not trusted)."""
    return all(cv.space.bounds(d)[1] <= p for d, p in zip(dims, planned))
