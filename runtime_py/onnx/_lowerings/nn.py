"""Neural-network ONNX ops: MatMul, Gemm, Conv, pooling, BatchNormalization, Softmax."""
from __future__ import annotations

import math

import numpy as np

from ...compiler import Value
from .._dims import conv_dims, pool_dims
from .._registry import lowers
from .shape import reshape_to_dims
from .common import FLOATS, check_attrs, optional, require_dtype, reshape


@lowers("MatMul")
def matmul(cv, node, inputs, attrs):
    a, b = inputs
    require_dtype(cv, a, ("float32", "float64", "int32", "int64"))
    return [cv.m.matmul(cv.tensor(a), cv.tensor(b))]


@lowers("Gemm")
def gemm(cv, node, inputs, attrs):
    """Y = alpha * A' @ B' + beta * C; the common case (transB, alpha = beta = 1, C a row of
    biases) is one linear op."""
    a, b, c = inputs[0], inputs[1], optional(inputs, 2)
    # `broadcast` (opset < 7) only allowed C to broadcast, which is always done here.
    check_attrs(cv, attrs, ("alpha", "beta", "transA", "transB", "broadcast"))
    require_dtype(cv, a, FLOATS)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = np.asarray(a).T if not isinstance(a, Value) else cv.m.transpose(a, [1, 0])
    weight = b if attrs.get("transB", 0) else (np.asarray(b).T if not isinstance(b, Value) else None)
    n = cv.shape_of(b)[0 if attrs.get("transB", 0) else 1]
    bias = None
    if c is not None and not isinstance(c, Value):
        c_arr = np.asarray(c) * beta
        if c_arr.size == n and c_arr.ndim <= 2 and (c_arr.ndim < 2 or c_arr.shape[0] == 1):
            bias, c = c_arr.reshape(n).astype(c_arr.dtype), None
        else:
            c = c_arr
    elif c is not None and beta != 1.0:
        c = cv.m.mul(c, cv.tensor(np.array(beta, dtype=c.dtype)))
    if weight is not None and alpha == 1.0:
        y = cv.m.linear(cv.tensor(a), cv.tensor(weight), cv.tensor(bias) if bias is not None else None)
    else:
        bt = b if attrs.get("transB", 0) == 0 else (
            np.asarray(b).T if not isinstance(b, Value) else cv.m.transpose(b, [1, 0]))
        y = cv.m.matmul(cv.tensor(a), cv.tensor(bt))
        if alpha != 1.0:
            y = cv.m.mul(y, cv.tensor(np.array(alpha, dtype=y.dtype)))
        if bias is not None:
            y = cv.m.add(y, cv.tensor(bias))
    if c is not None:
        y = cv.m.add(y, cv.tensor(c))
    return [y]


# ---- convolution and pooling --------------------------------------------------------------

def _spatial(cv, x, what):
    """Rank of the spatial part: 1-D ops run as 2-D with a height of 1."""
    rank = len(cv.shape_of(x))
    if rank not in (3, 4):
        raise cv.fail(f"{what} on a rank-{rank} input is not supported (1-D and 2-D only)")
    return rank - 2


def _pads(cv, attrs, in_sizes, kernel, strides, dilations, ceil_mode=False):
    """(top, left, bottom, right) for 2-D, honouring auto_pad."""
    nd = len(kernel)
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * (2 * nd)))
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        pads = begins + ends
    else:
        raise cv.fail(f"auto_pad={auto_pad} is not supported")
    if nd == 1:
        return [0, pads[0], 0, pads[1]]
    return [pads[0], pads[1], pads[2], pads[3]]


def _as_2d(cv, x, nd):
    if nd == 2:
        return cv.tensor(x)
    n, c, length = cv.dims_of(x)
    return reshape_to_dims(cv, cv.tensor(x), [n, c, 1, length])


def _from_2d(cv, y, nd, dims):
    """The 1-D result of a 2-D conv or pool; `dims()` its sizes when dynamic (_dims.py)."""
    if nd == 2:
        return y
    n, c, _, length = y.shape
    if not y.dynamic:
        return reshape(cv, y, [n, c, length])
    return reshape_to_dims(cv, y, dims())


def _pair(values, nd, default):
    values = list(values) if values else [default] * nd
    return values if nd == 2 else [default] + values


@lowers("Conv")
def conv(cv, node, inputs, attrs):
    x, w, b = inputs[0], inputs[1], optional(inputs, 2)
    check_attrs(cv, attrs, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    require_dtype(cv, x, FLOATS)
    nd = _spatial(cv, x, "Conv")
    if cv.is_dynamic(x) and attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise cv.fail("auto_pad SAME needs a static input shape")
    kernel = list(cv.shape_of(w)[2:])
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    pads = _pads(cv, attrs, cv.shape_of(x)[2:], kernel, strides, dilations)
    w2 = w if nd == 2 else (np.asarray(w)[:, :, None, :] if not isinstance(w, Value)
                            else reshape(cv, w, list(cv.shape_of(w)[:2]) + [1, kernel[0]]))
    y = cv.m.conv2d(_as_2d(cv, x, nd), cv.tensor(w2), cv.tensor(b) if b is not None else None,
                    stride=_pair(strides, nd, 1), padding=pads,
                    dilation=_pair(dilations, nd, 1), groups=int(attrs.get("group", 1)))
    return [_from_2d(cv, y, nd, lambda: conv_dims(cv, x, w, attrs))]


@lowers("MaxPool", "AveragePool")
def pool(cv, node, inputs, attrs):
    x = inputs[0]
    check_attrs(cv, attrs, ("auto_pad", "ceil_mode", "count_include_pad", "dilations",
                            "kernel_shape", "pads", "storage_order", "strides"))
    if len(node.output) > 1 and node.output[1]:
        raise cv.fail("the Indices output is not supported")
    if attrs.get("storage_order", 0):
        raise cv.fail("storage_order=1 is not supported")
    nd = _spatial(cv, x, node.op_type)
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    pads = _pads(cv, attrs, cv.shape_of(x)[2:], kernel, strides, dilations, ceil_mode)
    x2 = _as_2d(cv, x, nd)
    if node.op_type == "MaxPool":
        y = cv.m.max_pool2d(x2, _pair(kernel, nd, 1), _pair(strides, nd, 1), pads,
                            _pair(dilations, nd, 1), ceil_mode)
    else:
        require_dtype(cv, x, FLOATS)
        if any(d != 1 for d in dilations):
            raise cv.fail("AveragePool with dilations is not supported")
        y = cv.m.avg_pool2d(x2, _pair(kernel, nd, 1), _pair(strides, nd, 1), pads, ceil_mode,
                            bool(attrs.get("count_include_pad", 0)))
    return [_from_2d(cv, y, nd, lambda: pool_dims(cv, x, attrs))]


@lowers("GlobalAveragePool", "GlobalMaxPool")
def global_pool(cv, node, inputs, attrs):
    x = inputs[0]
    # The window is the planned spatial size; a dynamic input whose spatial sizes shrink at run
    # time is refused there by the pooling kernel (the window no longer fits).
    nd = _spatial(cv, x, node.op_type)
    x2 = _as_2d(cv, x, nd)
    kernel = list(x2.shape[2:])
    if node.op_type == "GlobalMaxPool":
        y = cv.m.max_pool2d(x2, kernel, kernel, 0)
    else:
        require_dtype(cv, x, FLOATS)
        y = cv.m.avg_pool2d(x2, kernel, kernel, 0)
    return [_from_2d(cv, y, nd, lambda: cv.dims_of(x)[:2] + (1,))]


@lowers("BatchNormalization")
def batch_norm(cv, node, inputs, attrs):
    """Inference form, folded into one scale and one shift per channel."""
    x, scale, bias, mean, var = inputs[:5]
    if attrs.get("training_mode", 0) or (len(node.output) > 1 and any(node.output[1:])):
        raise cv.fail("training mode (running statistics outputs) is not supported")
    require_dtype(cv, x, FLOATS)
    eps = float(attrs.get("epsilon", 1e-5))
    dtype = np.dtype(cv.dtype_of(x))
    rank = len(cv.shape_of(x))
    if any(isinstance(p, Value) for p in (scale, bias, mean, var)):
        return [_batch_norm_at_run_time(cv, x, scale, bias, mean, var, eps, dtype, rank)]
    a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    shift = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
    shape = [-1] + [1] * (rank - 2)
    y = cv.m.mul(cv.tensor(x), cv.tensor(a.astype(dtype).reshape(shape)))
    return [cv.m.add(y, cv.tensor(shift.astype(dtype).reshape(shape)))]


def _batch_norm_at_run_time(cv, x, scale, bias, mean, var, eps, dtype, rank):
    """(x - mean) / sqrt(var + eps) * scale + B with statistics that are graph inputs."""
    def per_channel(p):
        p = cv.tensor(p)
        if len(p.shape) != 1:
            raise cv.fail(f"scale, B, mean and var must be 1-D, got shape {list(p.shape)}")
        return reshape(cv, p, [p.shape[0]] + [1] * (rank - 2))

    m = cv.m
    denom = m.call("sqrt", m.add(per_channel(var), cv.tensor(np.array(eps, dtype))),
                   outputs=[(dtype.name, (cv.shape_of(var)[0],) + (1,) * (rank - 2), False)])[0]
    y = m.div(m.sub(cv.tensor(x), per_channel(mean)), denom)
    return m.add(m.mul(y, per_channel(scale)), per_channel(bias))


@lowers("Softmax")
def softmax(cv, node, inputs, attrs):
    x = inputs[0]
    require_dtype(cv, x, FLOATS)
    rank = len(cv.shape_of(x))
    if cv.opset >= 13:
        return [cv.m.softmax(cv.tensor(x), int(attrs.get("axis", -1)))]
    # Before opset 13 the input is flattened to 2-D at `axis` and normalised per row.
    axis = int(attrs.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return [cv.m.softmax(cv.tensor(x), -1)]
    if cv.is_dynamic(x):
        raise cv.fail("opset < 13 Softmax over several axes needs a static shape")
    shape = cv.shape_of(x)
    flat = reshape(cv, cv.tensor(x), [math.prod(shape[:axis]), math.prod(shape[axis:])])
    return [reshape(cv, cv.m.softmax(flat, 1), list(shape))]
