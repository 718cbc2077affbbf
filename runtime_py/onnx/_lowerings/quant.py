"""Quantization ONNX ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (docs/ops.md, quantized ops).

The kernels round half to even and saturate as the ONNX reference does, computing in the
dtypes its numpy arithmetic promotes to. float16/bfloat16 scales are widened to float32, with
the reference's half-precision steps replayed by rounding through the half type (exact: float32
holds every half-precision quotient and product correctly rounded). float8, int4, int2 and
float4 tensors are refused.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...compiler import shapes as _shapes
from ...compiler import Value
from .._registry import lowers
from .common import FLOATS, check_attrs, optional, reshape
from .._dims import conv_dims
from .nn import _as_2d, _from_2d, _pads, _pair, _spatial

QUANT = ("int8", "uint8", "int16", "uint16")
QUANT8 = ("int8", "uint8")
HALF = ("float16", "bfloat16")


# ---- helpers -------------------------------------------------------------------------------

def _dtype(cv: Any, x: Any, what: str, allowed: Sequence[str]) -> str:
    """x's dtype when it is one of `allowed`, else a ConversionError naming x."""
    try:
        dtype = cv.dtype_of(x)
    except Exception:  # a numpy dtype the runtime has no name for (float8, int4, ...)
        dtype = str(np.asarray(x).dtype)
    if dtype not in allowed:
        raise cv.fail(f"{what} has dtype {dtype}; supported: {', '.join(allowed)}")
    return dtype


def _attr_dtype(cv: Any, code: int, what: str) -> str:
    """Our dtype name for an ONNX element type given as an attribute."""
    from .._convert import onnx_dtype_name

    try:
        return onnx_dtype_name(int(code))
    except Exception as e:
        raise cv.fail(f"{what}: {e}") from None


def _to(cv: Any, x: Any, dtype: str) -> Any:
    """x converted to dtype (a cast op for a program tensor, numpy for a known array)."""
    if cv.dtype_of(x) == dtype:
        return x
    if isinstance(x, Value):
        return cv.m.cast(x, dtype)
    if dtype == "bfloat16":
        import ml_dtypes

        return np.asarray(x).astype(ml_dtypes.bfloat16)
    return np.asarray(x).astype(dtype)


def _through(cv: Any, x: Any, half: str) -> Any:
    """A float32 x rounded to the half type and back: the result of a half-precision op."""
    return _to(cv, _to(cv, x, half), "float32")


def _numel(shape: Sequence[int]) -> int:
    return int(math.prod(shape))


def _single(cv: Any, p: Any) -> bool:
    shape = cv.shape_of(p)
    return len(shape) <= 1 and _numel(shape) == 1


def _require_single(cv: Any, p: Any, what: str) -> None:
    if p is not None and not _single(cv, p):
        raise cv.fail(f"{what} has shape {list(cv.shape_of(p))}; only a per-tensor {what} "
                      f"(one element) is supported")


def _call(cv: Any, op: str, args: Sequence[Any], dtype: str, shape: Sequence[int],
          dynamic: bool) -> Value:
    args = [cv.tensor(a) if isinstance(a, (np.ndarray, Value)) else a for a in args]
    return cv.m.call(op, *args, outputs=[(dtype, [int(s) for s in shape], bool(dynamic))])[0]


# ---- QuantizeLinear, DequantizeLinear ------------------------------------------------------

def _check_layout(cv: Any, p: Any, x_shape: Sequence[int], axis: int, block: int,
                  what: str) -> bool:
    """Check a scale or zero point against x; True when it is per tensor."""
    shape = list(cv.shape_of(p))
    if _numel(shape) == 1 and (len(shape) <= 1 or (block > 0 and len(shape) == len(x_shape))):
        return True
    rank = len(x_shape)
    if not -rank <= axis < rank:
        raise cv.fail(f"axis {axis} is out of range for an input of rank {rank}")
    ax = axis % rank
    if block == 0:
        if len(shape) != 1 or shape[0] != x_shape[ax]:
            raise cv.fail(f"{what} has shape {shape}; it must have one element or "
                          f"{x_shape[ax]} (x's size along axis {ax})")
        return False
    want = list(x_shape)
    want[ax] = -(-want[ax] // block)
    if shape != want:
        raise cv.fail(f"{what} has shape {shape}; blocked quantization needs {want}")
    return False


def _layout_attrs(cv: Any, attrs: dict, x: Any, params: Sequence[Any],
                  names: Sequence[str]) -> tuple:
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0))
    if block < 0:
        raise cv.fail(f"block_size {block} must be >= 0")
    singles = [_check_layout(cv, p, cv.shape_of(x), axis, block, n)
               for p, n in zip(params, names) if p is not None]
    return axis, block, all(singles)


def _half_quotient(cv: Any, x: Any, scale: Any, axis: int, block: int, single: bool,
                   half: str) -> Any:
    """x / scale as the half type computes it, in float32 (scale broadcast along axis)."""
    if block > 0 and not single:
        raise cv.fail(f"blocked quantization of {half} values is not supported")
    rank = len(cv.shape_of(x))
    x, s = _to(cv, _to(cv, x, half), "float32"), _to(cv, _to(cv, scale, half), "float32")
    if _numel(cv.shape_of(s)) == 1:
        s = reshape(cv, s, [])
    else:
        ax = axis % rank
        s = reshape(cv, s, [cv.shape_of(s)[0]] + [1] * (rank - 1 - ax))
    q = cv.m.div(cv.tensor(x), cv.tensor(s))
    return _through(cv, q, half)


@lowers("QuantizeLinear")
def quantize_linear(cv, node, inputs, attrs):
    x, scale, zp = inputs[0], inputs[1], optional(inputs, 2)
    check_attrs(cv, attrs, ("axis", "block_size", "output_dtype", "precision", "saturate"))
    x_dtype = _dtype(cv, x, "x", FLOATS + HALF + ("int32",))
    s_dtype = _dtype(cv, scale, "y_scale", FLOATS + HALF)
    out = "uint8"
    if attrs.get("output_dtype"):
        out = _attr_dtype(cv, attrs["output_dtype"], "output_dtype")
    if zp is not None:
        z_dtype = _dtype(cv, zp, "y_zero_point", QUANT)
        if attrs.get("output_dtype") and z_dtype != out:
            raise cv.fail(f"output_dtype {out} differs from y_zero_point's dtype {z_dtype}")
        out = z_dtype
    if out not in QUANT:
        raise cv.fail(f"quantizing to {out} is not supported (int8, uint8, int16, uint16)")
    axis, block, single = _layout_attrs(cv, attrs, x, (scale, zp), ("y_scale", "y_zero_point"))
    # The reference divides in numpy's promoted dtype (or `precision`).
    if attrs.get("precision"):
        compute = _attr_dtype(cv, attrs["precision"], "precision")
    elif x_dtype == "int32" or "float64" in (x_dtype, s_dtype):
        compute = "float64"
    else:
        compute = x_dtype if x_dtype == s_dtype else "float32"
    if compute in HALF:
        x = _half_quotient(cv, x, scale, axis, block, single, compute)
        scale = np.array(1.0, np.float32)
    elif compute in FLOATS:
        x, scale = _to(cv, x, compute), _to(cv, scale, compute)
    else:
        raise cv.fail(f"precision {compute} is not supported")
    return [_call(cv, "quantize_linear", [x, scale, zp, axis, block], out, cv.shape_of(x),
                  cv.is_dynamic(x))]


@lowers("DequantizeLinear")
def dequantize_linear(cv, node, inputs, attrs):
    x, scale, zp = inputs[0], inputs[1], optional(inputs, 2)
    check_attrs(cv, attrs, ("axis", "block_size", "output_dtype"))
    x_dtype = _dtype(cv, x, "x", QUANT + ("int32",))
    s_dtype = _dtype(cv, scale, "x_scale", FLOATS + HALF)
    if zp is not None:
        _dtype(cv, zp, "x_zero_point", (x_dtype,))
    out = s_dtype
    if attrs.get("output_dtype"):
        out = _attr_dtype(cv, attrs["output_dtype"], "output_dtype")
        if out not in FLOATS + HALF:
            raise cv.fail(f"output_dtype {out} is not a float type")
    axis, block, _ = _layout_attrs(cv, attrs, x, (scale, zp), ("x_scale", "x_zero_point"))
    # The reference multiplies in float64 for int32 x or a float64 scale, else in float32.
    if s_dtype == out and out in FLOATS:
        compute = out
    else:
        compute = "float64" if x_dtype == "int32" or s_dtype == "float64" else "float32"
    y = _call(cv, "dequantize_linear", [x, _to(cv, scale, compute), zp, axis, block], compute,
              cv.shape_of(x), cv.is_dynamic(x))
    return [_to(cv, y, out)]


@lowers("DynamicQuantizeLinear")
def dynamic_quantize_linear(cv, node, inputs, attrs):
    x = inputs[0]
    check_attrs(cv, attrs, ())
    _dtype(cv, x, "x", ("float32",))
    x = cv.tensor(x)
    return cv.m.call("dynamic_quantize_linear", x,
                     outputs=[("uint8", x.shape, x.dynamic), ("float32", [], False),
                              ("uint8", [], False)])


# ---- MatMulInteger, QLinearMatMul ----------------------------------------------------------

def _check_mm_param(cv: Any, p: Any, operand: Sequence[int], out_batch: Sequence[int],
                    columns: bool, what: str) -> None:
    """Per tensor, per row of a ([M] or [..., M, 1]) or per column of b ([N] or [..., 1, N])."""
    if p is None:
        return
    shape, rank = list(cv.shape_of(p)), len(operand)
    length = (operand[-1] if rank > 1 else 1) if columns else (operand[-2] if rank > 1 else 1)
    if _numel(shape) == 1 and len(shape) in (0, 1, rank):
        return
    if len(shape) == 1 and shape[0] == length:
        return
    if len(shape) == rank >= 2:
        along, across = (shape[-1], shape[-2]) if columns else (shape[-2], shape[-1])
        lead = len(out_batch) - (rank - 2)
        batch_ok = all(s in (1, out_batch[i + lead]) for i, s in enumerate(shape[:-2]))
        if across == 1 and along in (1, length) and batch_ok:
            return
    form = "[..., 1, N]" if columns else "[..., M, 1]"
    raise cv.fail(f"{what} has shape {shape}; it must have one element, be 1-D of length "
                  f"{length}, or have the shape {form}")


def _mm_shape(cv: Any, a: Any, b: Any) -> tuple:
    try:
        shape = _shapes.matmul("MatMul", cv.shape_of(a), cv.shape_of(b))
    except ValueError as e:
        raise cv.fail(str(e)) from None
    batch = shape[:len(shape) - (len(cv.shape_of(a)) > 1) - (len(cv.shape_of(b)) > 1)]
    return shape, batch


@lowers("MatMulInteger")
def matmul_integer(cv, node, inputs, attrs):
    a, b, za, zb = inputs[0], inputs[1], optional(inputs, 2), optional(inputs, 3)
    check_attrs(cv, attrs, ())
    a_dtype, b_dtype = _dtype(cv, a, "A", QUANT8), _dtype(cv, b, "B", QUANT8)
    if za is not None:
        _dtype(cv, za, "a_zero_point", (a_dtype,))
    if zb is not None:
        _dtype(cv, zb, "b_zero_point", (b_dtype,))
    shape, batch = _mm_shape(cv, a, b)
    _check_mm_param(cv, za, cv.shape_of(a), batch, False, "a_zero_point")
    _check_mm_param(cv, zb, cv.shape_of(b), batch, True, "b_zero_point")
    return [_call(cv, "matmul_integer", [a, b, za, zb], "int32", shape,
                  cv.is_dynamic(a) or cv.is_dynamic(b))]


def _half_multiplier(cv: Any, a_scale: Any, b_scale: Any, y_scale: Any, half: str) -> Any:
    """(a_scale * b_scale) / y_scale computed in the half type, as float32."""
    a32, b32, y32 = (cv.tensor(_to(cv, s, "float32")) for s in (a_scale, b_scale, y_scale))
    product = _through(cv, cv.m.mul(a32, b32), half)
    return _through(cv, cv.m.div(product, y32), half)


@lowers("QLinearMatMul")
def qlinear_matmul(cv, node, inputs, attrs):
    a, sa, za, b, sb, zb, sy = inputs[:7]
    zy = optional(inputs, 7)
    check_attrs(cv, attrs, ())
    a_dtype, b_dtype = _dtype(cv, a, "a", QUANT8), _dtype(cv, b, "b", QUANT8)
    for z, name, dtype in ((za, "a_zero_point", a_dtype), (zb, "b_zero_point", b_dtype)):
        if z is not None:
            _dtype(cv, z, name, (dtype,))
    out = _dtype(cv, zy, "y_zero_point", QUANT8) if zy is not None else a_dtype
    s_dtype = _dtype(cv, sa, "a_scale", FLOATS + HALF)
    _dtype(cv, sb, "b_scale", (s_dtype,))
    _dtype(cv, sy, "y_scale", (s_dtype,))
    _require_single(cv, sy, "y_scale")
    _require_single(cv, zy, "y_zero_point")
    shape, batch = _mm_shape(cv, a, b)
    for p, name, operand, columns in ((za, "a_zero_point", a, False), (sa, "a_scale", a, False),
                                      (zb, "b_zero_point", b, True), (sb, "b_scale", b, True)):
        _check_mm_param(cv, p, cv.shape_of(operand), batch, columns, name)
    if s_dtype in HALF:
        # The multiplier is computed in half precision: pass it as b's scale.
        _require_single(cv, sa, "a_scale (float16/bfloat16)")
        sb = _half_multiplier(cv, sa, sb, sy, s_dtype)
        sa = sy = np.array(1.0, np.float32)
    return [_call(cv, "qlinear_matmul", [a, sa, za, b, sb, zb, sy, zy], out, shape,
                  cv.is_dynamic(a) or cv.is_dynamic(b))]


# ---- ConvInteger, QLinearConv --------------------------------------------------------------

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _conv_geometry(cv: Any, attrs: dict, x: Any, w: Any, what: str) -> tuple:
    """(x as 4-D, w as 4-D, stride, padding, dilation, groups, nd) as nn.conv lowers Conv."""
    nd = _spatial(cv, x, what)
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    if cv.is_dynamic(x) and auto_pad not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        raise cv.fail("auto_pad SAME needs a static input shape")
    kernel = list(cv.shape_of(w)[2:])
    if len(kernel) != nd:
        raise cv.fail(f"w has shape {list(cv.shape_of(w))}; expected {nd} spatial dimensions")
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    pads = _pads(cv, attrs, cv.shape_of(x)[2:], kernel, strides, dilations)
    if nd == 1:
        w = (np.asarray(w)[:, :, None, :] if not isinstance(w, Value)
             else reshape(cv, w, list(cv.shape_of(w)[:2]) + [1, kernel[0]]))
    return (_as_2d(cv, x, nd), cv.tensor(w), _pair(strides, nd, 1), pads,
            _pair(dilations, nd, 1), int(attrs.get("group", 1)), nd)


def _conv_shape(cv: Any, x: Value, w: Value, stride, pads, dilation, groups) -> tuple:
    try:
        return _shapes.conv2d("Conv", x.shape, w.shape, None, stride, pads, dilation, groups)
    except ValueError as e:
        raise cv.fail(str(e)) from None


def _check_per_channel(cv: Any, p: Any, channels: int, what: str, single_ok: bool = True):
    if p is None or (single_ok and _single(cv, p)):
        return
    if list(cv.shape_of(p)) != [channels]:
        raise cv.fail(f"{what} has shape {list(cv.shape_of(p))}; it must be per tensor or "
                      f"[{channels}] (one per output channel)")


@lowers("ConvInteger")
def conv_integer(cv, node, inputs, attrs):
    x, w, zx, zw = inputs[0], inputs[1], optional(inputs, 2), optional(inputs, 3)
    check_attrs(cv, attrs, _CONV_ATTRS)
    x_dtype, w_dtype = _dtype(cv, x, "x", QUANT8), _dtype(cv, w, "w", QUANT8)
    if zx is not None:
        _dtype(cv, zx, "x_zero_point", (x_dtype,))
    if zw is not None:
        _dtype(cv, zw, "w_zero_point", (w_dtype,))
    _require_single(cv, zx, "x_zero_point")
    _check_per_channel(cv, zw, cv.shape_of(w)[0], "w_zero_point")
    x2, w2, stride, pads, dilation, groups, nd = _conv_geometry(cv, attrs, x, w, "ConvInteger")
    shape = _conv_shape(cv, x2, w2, stride, pads, dilation, groups)
    y = _call(cv, "conv_integer", [x2, w2, zx, zw, stride, pads, dilation, groups], "int32",
              shape, x2.dynamic)
    return [_from_2d(cv, y, nd, lambda: conv_dims(cv, x, w, attrs))]


@lowers("QLinearConv")
def qlinear_conv(cv, node, inputs, attrs):
    x, sx, zx, w, sw, zw, sy, zy = inputs[:8]
    bias = optional(inputs, 8)
    check_attrs(cv, attrs, _CONV_ATTRS)
    x_dtype, w_dtype = _dtype(cv, x, "x", QUANT8), _dtype(cv, w, "w", QUANT8)
    if zx is not None:
        _dtype(cv, zx, "x_zero_point", (x_dtype,))
    if zw is not None:
        _dtype(cv, zw, "w_zero_point", (w_dtype,))
    out = _dtype(cv, zy, "y_zero_point", QUANT8) if zy is not None else x_dtype
    s_dtype = _dtype(cv, sx, "x_scale", FLOATS)
    _dtype(cv, sw, "w_scale", (s_dtype,))
    _dtype(cv, sy, "y_scale", (s_dtype,))
    if bias is not None:
        _dtype(cv, bias, "B", ("int32",))
    channels = cv.shape_of(w)[0]
    for p, name in ((zx, "x_zero_point"), (sx, "x_scale"), (sy, "y_scale"),
                    (zy, "y_zero_point")):
        _require_single(cv, p, name)
    _check_per_channel(cv, zw, channels, "w_zero_point")
    _check_per_channel(cv, sw, channels, "w_scale")
    _check_per_channel(cv, bias, channels, "B", single_ok=False)
    x2, w2, stride, pads, dilation, groups, nd = _conv_geometry(cv, attrs, x, w, "QLinearConv")
    shape = _conv_shape(cv, x2, w2, stride, pads, dilation, groups)
    y = _call(cv, "qlinear_conv", [x2, sx, zx, w2, sw, zw, sy, zy, bias, stride, pads, dilation,
                                   groups], out, shape, x2.dynamic)
    return [_from_2d(cv, y, nd, lambda: conv_dims(cv, x, w, attrs))]
