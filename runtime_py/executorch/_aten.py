"""Lowerings of ExecuTorch's elementwise, reduction, linear-algebra and neural-network
operators onto runtime ops (data movement and tensor creation are in _aten_shape.py).

A lowering gets the converter `cx`, the value indices of the operator's schema arguments
(`a`, defaults included, as ExecuTorch emits them) and of its out tensors (`o`; the returned
values follow them and are ignored). Dtypes follow the out tensor ExecuTorch declares: inputs
of another dtype are cast first, as PyTorch's type promotion computes in the result's dtype.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional

from ..compiler import shapes as _shapes
from . import _program as P
from ._convert import FLOATS, MethodConverter, lowers, pack_scalar
from ._fusion import (CLIP, GELU, GELU_TANH, HARD_SWISH, RELU, SIGMOID, SILU, fold_batch_norm,
                      fuse_activation)
from . import _aten_shape  # noqa: F401  (registers the data-movement lowerings)

INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _operand(cx: MethodConverter, i: int, dtype: str):
    """Tensor or scalar argument i as a tensor of dtype."""
    if cx.evalue(i).kind == P.K_TENSOR:
        return cx.cast(cx.tensor(i), dtype)
    return cx.const(cx.scalar(i), dtype)


def _broadcast(cx: MethodConverter, *xs) -> List[int]:
    shape: Any = ()
    for x in xs:
        shape = _shapes.broadcast(cx.op, shape, x.shape)
    return list(shape)


def _binary(cx: MethodConverter, op: str, a, b, dtype: Optional[str] = None):
    return cx.new(op, a, b, dtype=dtype or a.dtype, shape=_broadcast(cx, a, b),
                  dynamic=a.dynamic or b.dynamic)


def _out_dtype(cx: MethodConverter, o: List[int]) -> str:
    return cx.spec(o[0]).dtype


# ---- arithmetic ------------------------------------------------------------------------

def _scaled(cx: MethodConverter, i: int, alpha_index: int, dtype: str):
    """Argument i times alpha (torch's add/sub alpha), folded when i is a scalar."""
    alpha = cx.scalar(alpha_index)
    if cx.evalue(i).kind != P.K_TENSOR:
        return cx.const(cx.scalar(i) * alpha, dtype)
    b = _operand(cx, i, dtype)
    if alpha == 1:
        return b
    return _binary(cx, "mul", b, cx.const(alpha, dtype))


@lowers("aten::add.out", "aten::add.Scalar_out", args=3)
def add(cx, a, o):
    dtype = _out_dtype(cx, o)
    if dtype == "bool":
        raise cx.fail("add of bool tensors is not supported")
    cx.emit("add", _operand(cx, a[0], dtype), _scaled(cx, a[1], a[2], dtype), out=o[0])


@lowers("aten::sub.out", "aten::sub.Scalar_out", args=3)
def sub(cx, a, o):
    dtype = _out_dtype(cx, o)
    cx.emit("sub", _operand(cx, a[0], dtype), _scaled(cx, a[1], a[2], dtype), out=o[0])


@lowers("aten::rsub.Scalar_out", args=3)
def rsub(cx, a, o):
    dtype = _out_dtype(cx, o)
    cx.emit("sub", _operand(cx, a[1], dtype), _scaled(cx, a[0], a[2], dtype), out=o[0])


@lowers("aten::mul.out", "aten::mul.Scalar_out", args=2)
def mul(cx, a, o):
    dtype = _out_dtype(cx, o)
    if dtype == "bool":
        x = cx.cast(cx.tensor(a[0]), "bool")
        y = _operand(cx, a[1], "bool")
        cx.emit("and", x, y, out=o[0])
        return
    cx.emit("mul", _operand(cx, a[0], dtype), _operand(cx, a[1], dtype), out=o[0])


@lowers("aten::div.out", "aten::div.Scalar_out", args=2)
def div(cx, a, o):
    dtype = _out_dtype(cx, o)
    if dtype not in FLOATS:
        raise cx.fail(f"true division into {dtype} is not supported")
    cx.emit("div", _operand(cx, a[0], dtype), _operand(cx, a[1], dtype), out=o[0])


@lowers("aten::div.out_mode", "aten::div.Scalar_mode_out", args=3)
def div_mode(cx, a, o):
    mode = cx.string(a[2])
    dtype = _out_dtype(cx, o)
    x, y = _operand(cx, a[0], dtype), _operand(cx, a[1], dtype)
    if mode is None:
        return div(cx, a[:2], o)
    if dtype in INTEGERS and mode == "trunc":
        cx.emit("div", x, y, out=o[0])  # the runtime's integer division truncates
        return
    if dtype in INTEGERS and mode == "floor":
        # Truncated quotient, minus one where the remainder is nonzero with the divisor's
        # opposite sign (Python's and torch's floor division).
        q = _binary(cx, "div", x, y)
        r = _binary(cx, "sub", x, _binary(cx, "mul", q, y))
        zero = cx.const(0, dtype)
        nonzero = _binary(cx, "equal", r, zero, dtype="bool")
        nonzero = cx.new("not", nonzero, dtype="bool", shape=nonzero.shape,
                         dynamic=nonzero.dynamic)
        signs = _binary(cx, "xor", _binary(cx, "less", r, zero, dtype="bool"),
                        _binary(cx, "less", y, zero, dtype="bool"), dtype="bool")
        adjust = _binary(cx, "and", nonzero, signs, dtype="bool")
        cx.emit("sub", q, cx.cast(adjust, dtype), out=o[0])
        return
    if dtype not in FLOATS or mode not in ("trunc", "floor"):
        raise cx.fail(f"division with rounding_mode={mode!r} into {dtype} is not supported")
    q = _binary(cx, "div", x, y)
    if mode == "floor":
        cx.emit("floor", q, out=o[0])
        return
    negative = _binary(cx, "less", q, cx.const(0, dtype), dtype="bool")
    up = cx.new("ceil", q, dtype=dtype, shape=q.shape, dynamic=q.dynamic)
    down = cx.new("floor", q, dtype=dtype, shape=q.shape, dynamic=q.dynamic)
    cx.emit("where", negative, up, down, out=o[0])


@lowers("aten::pow.Tensor_Scalar_out", "aten::pow.Tensor_Tensor_out", args=2)
def pow_(cx, a, o):
    dtype = _out_dtype(cx, o)
    x = _operand(cx, a[0], dtype)
    if cx.evalue(a[1]).kind != P.K_TENSOR and cx.scalar(a[1]) == 2:
        cx.emit("mul", x, x, out=o[0])  # exact, as torch's x * x
        return
    cx.emit("pow", x, _operand(cx, a[1], dtype), out=o[0])


@lowers("aten::minimum.out", "aten::maximum.out", args=2)
def min_max(cx, a, o):
    dtype = _out_dtype(cx, o)
    op = "min" if cx.op.startswith("aten::minimum") else "max"
    cx.emit(op, _operand(cx, a[0], dtype), _operand(cx, a[1], dtype), out=o[0])


# ---- unary -----------------------------------------------------------------------------

_UNARY = {"aten::neg.out": "neg", "aten::abs.out": "abs", "aten::exp.out": "exp",
          "aten::log.out": "log", "aten::sqrt.out": "sqrt", "aten::reciprocal.out": "reciprocal",
          "aten::sin.out": "sin", "aten::cos.out": "cos", "aten::tan.out": "tan",
          "aten::tanh.out": "tanh", "aten::sigmoid.out": "sigmoid", "aten::erf.out": "erf",
          "aten::floor.out": "floor", "aten::ceil.out": "ceil", "aten::round.out": "round",
          "aten::sign.out": "sign", "aten::relu.out": "relu", "aten::hardswish.out": "hard_swish",
          "aten::isnan.out": "isnan"}


_FUSIBLE = {"relu": RELU, "sigmoid": SIGMOID, "hard_swish": HARD_SWISH}


@lowers(*_UNARY, args=1)
def unary(cx, a, o):
    x = cx.tensor(a[0])
    op = _UNARY[cx.op]
    if op in _FUSIBLE and fuse_activation(cx, a[0], _FUSIBLE[op], o[0]):
        return
    if op == "isnan":
        cx.emit(op, cx.cast(x, "float32") if x.dtype not in FLOATS else x, out=o[0])
        return
    cx.emit(op, cx.cast(x, _out_dtype(cx, o)), out=o[0])


@lowers("aten::rsqrt.out", args=1)
def rsqrt(cx, a, o):
    x = cx.cast(cx.tensor(a[0]), _out_dtype(cx, o))
    root = cx.new("sqrt", x, dtype=x.dtype, shape=x.shape, dynamic=x.dynamic)
    cx.emit("reciprocal", root, out=o[0])


@lowers("aten::log1p.out", "aten::expm1.out", args=1)
def log1p_expm1(cx, a, o):
    """log(1 + x) and exp(x) - 1 in two ops (absolute error about one ulp of 1)."""
    x = cx.cast(cx.tensor(a[0]), _out_dtype(cx, o))
    if cx.op.startswith("aten::log1p"):
        cx.emit("log", _binary(cx, "add", x, cx.const(1, x.dtype)), out=o[0])
    else:
        e = cx.new("exp", x, dtype=x.dtype, shape=x.shape, dynamic=x.dynamic)
        cx.emit("sub", e, cx.const(1, x.dtype), out=o[0])


@lowers("aten::silu.out", args=1)
def silu(cx, a, o):
    if not fuse_activation(cx, a[0], SILU, o[0]):
        cx.emit("silu", cx.tensor(a[0]), out=o[0])


@lowers("aten::gelu.out", args=2)
def gelu(cx, a, o):
    mode = cx.string(a[1]) or "none"
    if mode not in ("none", "tanh"):
        raise cx.fail(f"approximate={mode!r} is not supported")
    if fuse_activation(cx, a[0], GELU if mode == "none" else GELU_TANH, o[0]):
        return
    cx.emit("gelu", cx.tensor(a[0]), mode == "tanh", out=o[0])


@lowers("aten::hardtanh.out", args=3)
def hardtanh(cx, a, o):
    x = cx.tensor(a[0])
    if x.dtype == "float32" and fuse_activation(cx, a[0], CLIP, o[0], float(cx.scalar(a[1])),
                                                float(cx.scalar(a[2]))):
        return
    cx.emit("clip", x, _bound(cx, a[1], x.dtype), _bound(cx, a[2], x.dtype), out=o[0])


def _bound(cx, i, dtype):
    """A clamp bound as the clip op takes it: none, an int, or a double (floats only)."""
    if cx.is_none(i):
        return None
    v = cx.scalar(i)
    if dtype in FLOATS:
        return float(v)
    if isinstance(v, float):
        if v != math.floor(v):
            raise cx.fail(f"a fractional bound {v} for an integer tensor is not supported")
        v = int(v)
    return int(v)


@lowers("aten::clamp.out", args=3)
def clamp(cx, a, o):
    dtype = _out_dtype(cx, o)
    x = cx.cast(cx.tensor(a[0]), dtype)
    if dtype == "float32" and x is cx.tensor(a[0]) and not cx.is_none(a[1]) \
            and not cx.is_none(a[2]):
        lo, hi = float(cx.scalar(a[1])), float(cx.scalar(a[2]))
        if lo <= hi and fuse_activation(cx, a[0], CLIP, o[0], lo, hi):
            return
    cx.emit("clip", x, _bound(cx, a[1], dtype), _bound(cx, a[2], dtype), out=o[0])


@lowers("aten::clamp.Tensor_out", args=3)
def clamp_tensor(cx, a, o):
    dtype = _out_dtype(cx, o)
    x = cx.cast(cx.tensor(a[0]), dtype)
    if not cx.is_none(a[1]):
        x = _binary(cx, "max", x, cx.cast(cx.tensor(a[1]), dtype))
    if not cx.is_none(a[2]):
        x = _binary(cx, "min", x, cx.cast(cx.tensor(a[2]), dtype))
    cx.emit("copy", x, out=o[0])


@lowers("aten::hardsigmoid.out", args=1)
def hardsigmoid(cx, a, o):
    cx.emit("hard_sigmoid", cx.tensor(a[0]), 1.0 / 6.0, 0.5, out=o[0])


@lowers("aten::leaky_relu.out", args=2)
def leaky_relu(cx, a, o):
    cx.emit("leaky_relu", cx.tensor(a[0]), float(cx.scalar(a[1])), out=o[0])


@lowers("aten::elu.out", args=4)
def elu(cx, a, o):
    alpha, scale, input_scale = (float(cx.scalar(i)) for i in a[1:4])
    if scale != 1 or input_scale != 1:
        raise cx.fail("elu with scale or input_scale other than 1 is not supported")
    cx.emit("elu", cx.tensor(a[0]), alpha, out=o[0])


@lowers("aten::softplus.out", args=3)
def softplus(cx, a, o):
    if float(cx.scalar(a[1])) != 1:
        raise cx.fail("softplus with beta other than 1 is not supported")
    cx.emit("softplus", cx.tensor(a[0]), out=o[0])


@lowers("aten::_softmax.out", "aten::_log_softmax.out", args=3)
def softmax(cx, a, o):
    if cx.scalar(a[2]):
        raise cx.fail("half_to_float is not supported")
    op = "log_softmax" if "log" in cx.op else "softmax"
    cx.emit(op, cx.tensor(a[0]), cx.int(a[1]), out=o[0])


# ---- logic and comparison ----------------------------------------------------------------

def _common_dtype(cx, a: int, b: int) -> str:
    """The dtype torch compares two operands in (a tensor, b a tensor or a scalar)."""
    x = cx.spec(a).dtype
    vb = cx.evalue(b)
    if vb.kind == P.K_TENSOR:
        y = cx.spec(b).dtype
        if x == y:
            return x
        if (x in FLOATS) != (y in FLOATS):
            return x if x in FLOATS else y
        for d in ("float64", "float32", "int64", "int32", "int16", "int8", "uint8"):
            if d in (x, y):
                return d
        return x
    if vb.kind == P.K_DOUBLE and x not in FLOATS:
        return "float32"
    if vb.kind == P.K_INT and x == "bool":
        return "int64"
    return x


_COMPARE = {"eq": ("equal", False, False), "ne": ("equal", False, True),
            "lt": ("less", False, False), "gt": ("less", True, False),
            "le": ("less_equal", False, False), "ge": ("less_equal", True, False)}


@lowers(*(f"aten::{n}.{k}" for n in _COMPARE for k in ("Scalar_out", "Tensor_out")), args=2)
def compare(cx, a, o):
    name = cx.op.split("::")[1].split(".")[0]
    op, swap, negate = _COMPARE[name]
    dtype = _common_dtype(cx, a[0], a[1])
    x, y = _operand(cx, a[0], dtype), _operand(cx, a[1], dtype)
    if swap:
        x, y = y, x
    if negate:
        cx.emit("not", _binary(cx, op, x, y, dtype="bool"), out=o[0])
        return
    cx.emit(op, x, y, out=o[0])


@lowers("aten::logical_not.out", "aten::bitwise_not.out", args=1)
def logical_not(cx, a, o):
    x = cx.tensor(a[0])
    if cx.op == "aten::bitwise_not.out" and x.dtype != "bool":
        raise cx.fail("bitwise_not of a non-bool tensor is not supported")
    result = cx.new("not", cx.cast(x, "bool"), dtype="bool", shape=x.shape, dynamic=x.dynamic)
    cx.bind(o[0], cx.cast(result, _out_dtype(cx, o)))


@lowers("aten::logical_and.out", "aten::logical_or.out", "aten::logical_xor.out",
        "aten::bitwise_and.Tensor_out", "aten::bitwise_or.Tensor_out", args=2)
def logical_binary(cx, a, o):
    name = cx.op.split("::")[1].split(".")[0].split("_")[1]
    x, y = cx.tensor(a[0]), cx.tensor(a[1])
    if cx.op.startswith("aten::bitwise") and (x.dtype != "bool" or y.dtype != "bool"):
        raise cx.fail("bitwise ops on non-bool tensors are not supported")
    result = _binary(cx, name, cx.cast(x, "bool"), cx.cast(y, "bool"), dtype="bool")
    cx.bind(o[0], cx.cast(result, _out_dtype(cx, o)))


@lowers("aten::where.self_out", args=3)
def where(cx, a, o):
    dtype = _out_dtype(cx, o)
    cond = cx.cast(cx.tensor(a[0]), "bool")
    cx.emit("where", cond, _operand(cx, a[1], dtype), _operand(cx, a[2], dtype), out=o[0])


@lowers("aten::masked_fill.Scalar_out", args=3)
def masked_fill(cx, a, o):
    x = cx.tensor(a[0])
    mask = cx.cast(cx.tensor(a[1]), "bool")
    cx.emit("where", mask, cx.const(cx.scalar(a[2]), x.dtype), x, out=o[0])


# ---- reductions --------------------------------------------------------------------------

def _dims(cx, i: Optional[int], rank: int) -> List[int]:
    """A dim argument (None, an int or a list; None or [] meaning every dimension)."""
    dims = None if i is None or cx.is_none(i) else cx.ints(i)
    if not dims:
        return list(range(rank))
    try:
        return sorted({_shapes.normalize_axis(cx.op, d, max(rank, 1)) for d in dims})
    except ValueError as e:
        raise cx.fail(str(e)) from None


@lowers("aten::mean.out", "aten::sum.IntList_out", args=4)
def mean_sum(cx, a, o):
    dtype = _out_dtype(cx, o)
    x = cx.cast(cx.tensor(a[0]), dtype)
    op = "reduce_mean" if cx.op.startswith("aten::mean") else "reduce_sum"
    cx.emit(op, x, _dims(cx, a[1], len(x.shape)), bool(cx.scalar(a[2])), out=o[0])


@lowers("aten::sum.out", args=2)
def sum_all(cx, a, o):
    dtype = _out_dtype(cx, o)
    x = cx.cast(cx.tensor(a[0]), dtype)
    cx.emit("reduce_sum", x, list(range(len(x.shape))), False, out=o[0])


@lowers("aten::amax.out", "aten::amin.out", args=3)
def amax(cx, a, o):
    x = cx.tensor(a[0])
    op = "reduce_max" if "amax" in cx.op else "reduce_min"
    cx.emit(op, x, _dims(cx, a[1], len(x.shape)), bool(cx.scalar(a[2])), out=o[0])


def _any_all(cx, a, o, dims):
    x = cx.cast(cx.tensor(a[0]), "bool")
    op = "reduce_max" if cx.op.startswith("aten::any") else "reduce_min"
    keep = bool(cx.scalar(a[2])) if len(a) > 2 else False
    _, sizes, dynamic = cx.out_spec(o[0])
    result = cx.new(op, x, dims, keep, dtype="bool", shape=sizes, dynamic=dynamic)
    cx.bind(o[0], cx.cast(result, _out_dtype(cx, o)))


@lowers("aten::any.out", "aten::all.out", "aten::any.dims_out", "aten::all.dims_out", args=3)
def any_dim(cx, a, o):
    _any_all(cx, a, o, _dims(cx, a[1], len(cx.spec(a[0]).sizes)))


@lowers("aten::any.all_out", "aten::all.all_out", args=1)
def any_all(cx, a, o):
    _any_all(cx, a, o, list(range(len(cx.spec(a[0]).sizes))))


@lowers("aten::argmax.out", "aten::argmin.out", args=3)
def argmax(cx, a, o):
    x = cx.tensor(a[0])
    op = "argmax" if "argmax" in cx.op else "argmin"
    keep = bool(cx.scalar(a[2]))
    if cx.is_none(a[1]):
        n = 1
        for s in x.shape:
            n *= s
        flat = cx.reshape(x, [n])
        result = cx.new(op, flat, 0, False, False, dtype="int64", shape=[])
        cx.bind(o[0], cx.reshape(result, cx.spec(o[0]).sizes))
        return
    cx.emit(op, x, cx.int(a[1]), keep, False, out=o[0])


# ---- linear algebra ----------------------------------------------------------------------

@lowers("aten::mm.out", "aten::bmm.out", args=2)
def mm(cx, a, o):
    cx.emit("matmul", cx.tensor(a[0]), cx.tensor(a[1]), out=o[0])


@lowers("aten::addmm.out", args=5)
def addmm(cx, a, o):
    """beta * self + alpha * (mat1 @ mat2); mat2 = permute_copy(W) of a constant W becomes
    linear(mat1, W, self), which reads W in place."""
    beta, alpha = cx.scalar(a[3]), cx.scalar(a[4])
    bias, x = cx.tensor(a[0]), cx.tensor(a[1])
    w_t = cx.transposed_constant(a[2])
    out_dtype = _out_dtype(cx, o)
    if w_t is not None and beta == 1 and alpha == 1 and out_dtype in ("float32", "float64") \
            and list(bias.shape) == [w_t.shape[0]] and x.dtype == out_dtype:
        cx.emit("linear", x, w_t, bias, out=o[0])
        return
    m2 = cx.tensor(a[2])
    product = cx.new("matmul", x, m2, dtype=x.dtype,
                     shape=list(_shapes.matmul(cx.op, x.shape, m2.shape)),
                     dynamic=x.dynamic or m2.dynamic)
    if alpha != 1:
        product = _binary(cx, "mul", product, cx.const(alpha, x.dtype))
    if beta == 0:
        cx.emit("copy", product, out=o[0])
        return
    if beta != 1:
        bias = _binary(cx, "mul", bias, cx.const(beta, bias.dtype))
    cx.emit("add", product, bias, out=o[0])


@lowers("aten::linear.out", args=3)
def linear(cx, a, o):
    cx.emit("linear", cx.tensor(a[0]), cx.tensor(a[1]), cx.opt_tensor(a[2]), out=o[0])


# ---- convolution, pooling, normalization -------------------------------------------------

def _pair(cx, i: int, default: Optional[List[int]] = None) -> List[int]:
    v = cx.ints(i)
    if not v and default is not None:
        return list(default)
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise cx.fail(f"expected 1 or 2 values, not {v}")
    return v


@lowers("aten::convolution.out", args=9)
def convolution(cx, a, o):
    x, w, bias = cx.tensor(a[0]), cx.tensor(a[1]), cx.opt_tensor(a[2])
    transposed = bool(cx.scalar(a[6]))
    groups = cx.int(a[8])
    rank = len(x.shape)
    if rank not in (3, 4):
        raise cx.fail(f"convolution of a rank-{rank} input is not supported (1-D and 2-D only)")
    stride, padding, dilation = cx.ints(a[3]), cx.ints(a[4]), cx.ints(a[5])
    out_padding = cx.ints(a[7])
    if rank == 3:  # 1-D: run as 2-D over a height of 1
        x = cx.insert_axis(x, 2)
        w = cx.reshape(w, [w.shape[0], w.shape[1], 1, w.shape[2]])
        stride, padding, dilation = [1] + stride[-1:], [0] + padding[-1:], [1] + dilation[-1:]
        out_padding = [0] + out_padding[-1:]
    else:
        stride, padding, dilation = (s * 2 if len(s) == 1 else s for s in (stride, padding,
                                                                            dilation))
        out_padding = out_padding * 2 if len(out_padding) == 1 else out_padding
    dtype, sizes, dynamic = cx.out_spec(o[0])
    shape4 = sizes if rank == 4 else [sizes[0], sizes[1], 1, sizes[2]]
    if transposed:
        y = cx.new("conv_transpose2d", x, w, bias, stride, padding, out_padding, dilation,
                   groups, dtype=dtype, shape=shape4, dynamic=dynamic)
    else:
        if any(p != 0 for p in out_padding):
            raise cx.fail("output_padding of a forward convolution must be 0")
        y = cx.new("conv2d", x, w, bias, stride, padding, dilation, groups, dtype=dtype,
                   shape=shape4, dynamic=dynamic)
    if rank == 3:
        cx.drop_axes(y, [2], out=o[0])
    else:
        cx.bind(o[0], y)


@lowers("aten::max_pool2d_with_indices.out", args=6)
def max_pool2d(cx, a, o):
    if len(o) > 1 and cx.reads_later(o[1]):
        raise cx.fail("the indices output of max_pool2d_with_indices is read; not supported")
    x = cx.tensor(a[0])
    kernel = _pair(cx, a[1])
    stride = _pair(cx, a[2], kernel)
    cx.emit("max_pool2d", x, kernel, stride, _pair(cx, a[3]), _pair(cx, a[4]),
            bool(cx.scalar(a[5])), out=o[0])


@lowers("aten::avg_pool2d.out", args=7)
def avg_pool2d(cx, a, o):
    if not cx.is_none(a[6]):
        raise cx.fail("divisor_override is not supported")
    x = cx.tensor(a[0])
    kernel = _pair(cx, a[1])
    stride = _pair(cx, a[2], kernel)
    cx.emit("avg_pool2d", x, kernel, stride, _pair(cx, a[3]), bool(cx.scalar(a[4])),
            bool(cx.scalar(a[5])), out=o[0])


@lowers("aten::_adaptive_avg_pool2d.out", args=2)
def adaptive_avg_pool2d(cx, a, o):
    x = cx.tensor(a[0])
    out_hw = _pair(cx, a[1])
    if len(x.shape) not in (3, 4):
        raise cx.fail(f"adaptive pooling of a rank-{len(x.shape)} tensor is not supported")
    h, w = x.shape[-2], x.shape[-1]
    if out_hw == [1, 1]:
        cx.emit("reduce_mean", x, [-2, -1], True, out=o[0])
        return
    if out_hw[0] <= 0 or out_hw[1] <= 0 or x.dynamic:
        raise cx.fail(f"adaptive pooling to {out_hw} is not supported")
    if h % out_hw[0] == 0 and w % out_hw[1] == 0:
        kernel = [h // out_hw[0], w // out_hw[1]]
        cx.emit("avg_pool2d", x, kernel, kernel, [0, 0], False, True, out=o[0])
        return
    # Cells of uneven size: average each band of rows, then each band of columns (a cell is
    # a rectangle, so the mean of its row means is its mean).
    for axis, count in ((-2, out_hw[0]), (-1, out_hw[1])):
        size = x.shape[axis]
        bands = []
        for k in range(count):
            start, end = (k * size) // count, -((-(k + 1) * size) // count)
            shape = list(x.shape)
            shape[axis] = end - start
            band = cx.new("slice", x, [start], [end], [axis], [1], dtype=x.dtype, shape=shape)
            shape[axis] = 1
            bands.append(cx.new("reduce_mean", band, [axis], True, dtype=x.dtype, shape=shape))
        shape = list(x.shape)
        shape[axis] = count
        x = cx.new("concat", bands, axis, dtype=x.dtype, shape=shape)
    cx.bind(o[0], x)


def _channel_shape(x, c: int) -> List[int]:
    return [c] + [1] * (len(x.shape) - 2)


@lowers("aten::_native_batch_norm_legit_no_training.out", args=7)
def batch_norm(cx, a, o):
    """y = x * scale + shift per channel, scale = weight / sqrt(var + eps) and
    shift = bias - mean * scale; computed here when the statistics are constants."""
    for extra in o[1:3]:
        if cx.reads_later(extra):
            raise cx.fail("the saved mean / invstd outputs of batch norm are read; not supported")
    x = cx.tensor(a[0])
    if len(x.shape) < 2:
        raise cx.fail("batch norm needs an input of rank >= 2")
    c = x.shape[1]
    eps = float(cx.scalar(a[6]))
    known = [None if cx.is_none(i) else cx.constant_floats(i) for i in a[1:5]]
    shape = _channel_shape(x, c)
    constant = all(k is not None or cx.is_none(i) for k, i in zip(known, a[1:5]))
    if constant and known[2] is not None and known[3] is not None:
        weight, bias, mean, var = known
        for k in known:
            if k is not None and len(k) != c:
                raise cx.fail(f"batch norm parameters must hold {c} values")
        scale = [(weight[i] if weight else 1.0) / math.sqrt(var[i] + eps) for i in range(c)]
        shift = [(bias[i] if bias else 0.0) - mean[i] * scale[i] for i in range(c)]
        if x.dtype == "float32" and fold_batch_norm(cx, a[0], scale, shift, o[0]):
            return
        s = cx.m.constant(pack_floats(scale, x.dtype), x.dtype, shape)
        t = cx.m.constant(pack_floats(shift, x.dtype), x.dtype, shape)
    else:  # run-time statistics
        mean = cx.reshape(cx.tensor(a[3]), shape)
        var = cx.reshape(cx.tensor(a[4]), shape)
        std = cx.new("sqrt", _binary(cx, "add", var, cx.const(eps, x.dtype)), dtype=x.dtype,
                     shape=shape)
        s = cx.new("reciprocal", std, dtype=x.dtype, shape=shape)
        if not cx.is_none(a[1]):
            s = _binary(cx, "mul", s, cx.reshape(cx.tensor(a[1]), shape))
        t = cx.new("neg", _binary(cx, "mul", mean, s), dtype=x.dtype, shape=shape)
        if not cx.is_none(a[2]):
            t = _binary(cx, "add", t, cx.reshape(cx.tensor(a[2]), shape))
    cx.emit("add", _binary(cx, "mul", x, s), t, out=o[0])


@lowers("aten::native_layer_norm.out", args=5)
def layer_norm(cx, a, o):
    x = cx.tensor(a[0])
    normalized = cx.ints(a[1])
    axis = len(x.shape) - len(normalized)
    if axis < 0 or list(x.shape[axis:]) != normalized:
        raise cx.fail(f"normalized_shape {normalized} does not end the input shape "
                      f"{list(x.shape)}")
    eps = float(cx.scalar(a[4]))
    args = [x, cx.opt_tensor(a[2]), cx.opt_tensor(a[3]), axis, eps]
    specs = [cx.out_spec(i) for i in o[:3]]
    results = cx.m.call("layer_norm", *args, outputs=specs)
    for i, value in zip(o[:3], results):
        cx.bind(i, value)


@lowers("aten::native_group_norm.out", args=8)
def group_norm(cx, a, o):
    for extra in o[1:3]:
        if cx.reads_later(extra):
            raise cx.fail("the mean / rstd outputs of group norm are read; not supported")
    x = cx.tensor(a[0])
    cx.emit("group_norm", x, cx.opt_tensor(a[1]), cx.opt_tensor(a[2]), cx.int(a[6]),
            float(cx.scalar(a[7])), out=o[0])


def pack_floats(values: List[float], dtype: str) -> bytes:
    return b"".join(pack_scalar(v, dtype) for v in values)


# ---- more reductions, scans, selection, resampling ------------------------------------------

@lowers("aten::max.dim_max", "aten::min.dim_min", args=3)
def max_dim(cx, a, o):
    """(values, indices) along one dimension: reduce_max / reduce_min and argmax / argmin
    (the indices only when something reads them)."""
    x = cx.tensor(a[0])
    axis = _dims(cx, a[1], len(x.shape))
    keep = bool(cx.scalar(a[2]))
    is_max = cx.op.startswith("aten::max")
    cx.emit("reduce_max" if is_max else "reduce_min", x, axis, keep, out=o[0])
    if len(o) > 1 and cx.reads_later(o[1]):
        cx.emit("argmax" if is_max else "argmin", x, axis[0], keep, False, out=o[1])


@lowers("aten::cumsum.out", args=3)
def cumsum(cx, a, o):
    x = cx.cast(cx.tensor(a[0]), _out_dtype(cx, o))
    cx.emit("cumsum", x, cx.int(a[1]), False, False, out=o[0])


@lowers("aten::var.correction_out", args=4)
def var(cx, a, o):
    """sum((x - mean)^2) / (n - correction) over the dims (correction None: 1)."""
    x = cx.tensor(a[0])
    if x.dtype not in FLOATS or x.dynamic:
        raise cx.fail("variance of a non-float or dynamic tensor is not supported")
    dims = _dims(cx, a[1], len(x.shape))
    correction = 1 if cx.is_none(a[2]) else cx.scalar(a[2])
    keep = bool(cx.scalar(a[3]))
    count = 1
    for d in dims:
        count *= x.shape[d]
    kept = [1 if d in dims else s for d, s in enumerate(x.shape)]
    mean = cx.new("reduce_mean", x, dims, True, dtype=x.dtype, shape=kept)
    centered = _binary(cx, "sub", x, mean)
    shape = kept if keep else [s for d, s in enumerate(x.shape) if d not in dims]
    total = cx.new("reduce_sum_square", centered, dims, keep, dtype=x.dtype, shape=shape)
    cx.emit("div", total, cx.const(count - correction, x.dtype), out=o[0])


@lowers("aten::topk.values", args=5)
def topk(cx, a, o):
    x = cx.tensor(a[0])
    axis = _shapes.normalize_axis(cx.op, cx.int(a[2]), len(x.shape))
    if len(o) < 2:
        raise cx.fail("topk needs its values and indices out tensors")
    results = cx.m.call("topk", x, cx.int(a[1]), axis, bool(cx.scalar(a[3])), True,
                        outputs=[cx.out_spec(o[0]), cx.out_spec(o[1])])
    cx.bind(o[0], results[0])
    cx.bind(o[1], results[1])


def _resize(cx, x, out: int, scales_arg: int, mode: int, coordinate_mode: int) -> None:
    dtype, sizes, dynamic = cx.out_spec(out)
    if len(x.shape) != 4 or dynamic:
        raise cx.fail("resampling is supported for static 4-D (NCHW) tensors")
    if not cx.is_none(scales_arg):  # torch maps coordinates with the given factors
        v = cx.evalue(scales_arg)
        factors = v.payload if v.kind == P.K_DOUBLE_LIST else None
        if not factors or len(factors) != 2:
            raise cx.fail("scale_factors must hold two doubles")
        cx.emit("resize", x, [], [1.0, 1.0] + [float(f) for f in factors], [], mode,
                coordinate_mode, 2, -0.75, False, False, 0.0, out=out)
        return
    cx.emit("resize", x, sizes, [], [], mode, coordinate_mode, 2, -0.75, False, False, 0.0,
            out=out)


@lowers("aten::upsample_nearest2d.vec_out", args=3)
def upsample_nearest2d(cx, a, o):
    """torch's nearest: source index floor(dst * in / out) (ONNX asymmetric + floor)."""
    _resize(cx, cx.tensor(a[0]), o[0], a[2], 0, 4)


@lowers("aten::upsample_bilinear2d.vec_out", args=4)
def upsample_bilinear2d(cx, a, o):
    align = bool(cx.scalar(a[2]))
    _resize(cx, cx.tensor(a[0]), o[0], a[3], 1, 3 if align else 2)


@lowers("aten::remainder.Tensor_out", "aten::remainder.Scalar_out", "aten::fmod.Tensor_out",
        "aten::fmod.Scalar_out", args=2)
def remainder(cx, a, o):
    """remainder: the divisor's sign (Python's %); fmod: the dividend's (C's fmod)."""
    dtype = _out_dtype(cx, o)
    cx.emit("mod", _operand(cx, a[0], dtype), _operand(cx, a[1], dtype),
            cx.op.startswith("aten::fmod"), out=o[0])


@lowers("aten::trunc.out", args=1)
def trunc(cx, a, o):
    x = cx.tensor(a[0])
    if x.dtype not in FLOATS:
        cx.emit("copy", x, out=o[0])
        return
    negative = _binary(cx, "less", x, cx.const(0, x.dtype), dtype="bool")
    up = cx.new("ceil", x, dtype=x.dtype, shape=x.shape, dynamic=x.dynamic)
    down = cx.new("floor", x, dtype=x.dtype, shape=x.shape, dynamic=x.dynamic)
    cx.emit("where", negative, up, down, out=o[0])
