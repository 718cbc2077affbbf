"""Normalisation ONNX ops and ConvTranspose: LayerNormalization, InstanceNormalization,
GroupNormalization, LpNormalization, MeanVarianceNormalization, ConvTranspose."""
from __future__ import annotations

import math

import numpy as np

from ...library import registered_ops
from ...compiler import Value
from .._registry import lowers
from .common import FLOATS, check_attrs, optional, require_dtype, reshape, trailing_sizes_of

# ONNX TensorProto codes of the stash types.
_STASH_DTYPES = {1: "float32", 11: "float64"}


def _same_dtype(cv, x, p, what):
    if p is not None and cv.dtype_of(p) != cv.dtype_of(x):
        raise cv.fail(f"{what} has dtype {cv.dtype_of(p)}, X has {cv.dtype_of(x)}")


def _call(cv, method, *args, **kwargs):
    """A builder call whose shape rule's ValueError (bad sizes or attributes) becomes a
    ConversionError naming the node."""
    try:
        return getattr(cv.m, method)(*args, **kwargs)
    except ValueError as e:
        raise cv.fail(str(e)) from None


def _operand(cv, p, dtype):
    return None if p is None else cv.tensor(np.asarray(p, dtype) if not isinstance(p, Value) else p)


# ---- LayerNormalization -----------------------------------------------------------------------

def _layer_param(cv, p, x_shape, axis, what):
    """(operand for the layer_norm op, operand to apply afterwards): the op takes scale and bias
    whose sizes (leading 1s aside) are the trailing sizes of X; a constant of another shape that
    broadcasts to the normalized shape is expanded here, anything else that broadcasts to X is
    applied with mul / add after the op."""
    if p is None:
        return None, None
    shape = list(cv.shape_of(p))
    kept = shape[next((i for i, s in enumerate(shape) if s != 1), len(shape)):]
    trailing = tuple(x_shape[len(x_shape) - len(kept):])
    if len(kept) <= len(x_shape) - axis and tuple(kept) == trailing:
        return p, None
    normalized = tuple(x_shape[axis:])
    lead = shape[:max(0, len(shape) - len(normalized))]
    if not isinstance(p, Value) and all(s == 1 for s in lead):
        try:
            arr = np.asarray(p).reshape(shape[len(lead):])
            return np.ascontiguousarray(np.broadcast_to(arr, normalized)), None
        except ValueError:
            pass
    try:
        fits = np.broadcast_shapes(tuple(shape), tuple(x_shape)) == tuple(x_shape)
    except ValueError:
        fits = False
    if not fits:
        raise cv.fail(f"{what} of shape {tuple(shape)} does not broadcast to X {tuple(x_shape)}")
    return None, p


@lowers("LayerNormalization")
def layer_normalization(cv, node, inputs, attrs):
    x, scale, bias = inputs[0], optional(inputs, 1), optional(inputs, 2)
    check_attrs(cv, attrs, ("axis", "epsilon", "stash_type"))
    dtype = require_dtype(cv, x, FLOATS, "X")
    _same_dtype(cv, x, scale, "Scale")
    _same_dtype(cv, x, bias, "B")
    x_shape = cv.shape_of(x)
    rank = len(x_shape)
    axis = int(attrs.get("axis", -1))
    if rank == 0 or not -rank <= axis < rank:
        raise cv.fail(f"axis {axis} is out of range for X of rank {rank}")
    axis = axis + rank if axis < 0 else axis
    scale, scale_after = _layer_param(cv, scale, x_shape, axis, "Scale")
    bias, bias_after = _layer_param(cv, bias, x_shape, axis, "B")
    if scale_after is not None and bias is not None:  # the bias must come after the scale
        bias, bias_after = None, bias
    eps = float(attrs.get("epsilon", 1e-5))
    stats = any(node.output[1:])
    # Mean and InvStdDev have the stash type (float32 by default), the type ONNX computes in.
    # Y is computed in X's type (statistics in float64 anyway), except that a float64 stash
    # for float32 X computes in float64 so that the statistics keep their precision.
    stash = _STASH_DTYPES.get(int(attrs.get("stash_type", 1)))
    work = stash if stats and stash == "float64" else dtype
    if stats and stash is None:
        raise cv.fail(f"Mean/InvStdDev outputs in stash_type {attrs.get('stash_type')} are not "
                      f"supported (float or double)")
    x_in = _cast(cv, cv.tensor(x), work)
    result = _call(cv, "layer_norm", x_in, _cast(cv, _operand(cv, scale, work), work),
                             _cast(cv, _operand(cv, bias, work), work), axis=axis, epsilon=eps,
                             stats=stats)
    results = list(result) if stats else [result]
    results[0] = _cast(cv, results[0], dtype)
    results[1:] = [_cast(cv, r, stash) for r in results[1:]]
    if scale_after is not None:
        results[0] = cv.m.mul(results[0], cv.tensor(scale_after))
    if bias_after is not None:
        results[0] = cv.m.add(results[0], cv.tensor(bias_after))
    return results


def _cast(cv, v, dtype):
    if v is None or v.dtype == dtype:
        return v
    if "cast" not in registered_ops():
        raise cv.fail(f"needs a cast from {v.dtype} to {dtype}; the runtime has no cast op")
    return cv.m.cast(v, dtype)


# ---- InstanceNormalization, GroupNormalization ---------------------------------------------

def _channel_params(cv, x, scale, bias, sizes, what):
    """scale and bias as rank-1 tensors of one of `sizes` elements."""
    out = []
    for p, name in ((scale, "scale"), (bias, "B")):
        if p is None:
            raise cv.fail(f"input {name} is missing")
        _same_dtype(cv, x, p, name)
        shape = cv.shape_of(p)
        if len(shape) != 1 or shape[0] not in sizes:
            raise cv.fail(f"{name} has shape {tuple(shape)}; {what}")
        out.append(cv.tensor(p))
    return out


def _check_channel_x(cv, x, op):
    require_dtype(cv, x, FLOATS, "X")
    if len(cv.shape_of(x)) < 2:
        raise cv.fail(f"{op} needs X of rank >= 2, not {len(cv.shape_of(x))}")
    return cv.shape_of(x)[1]


@lowers("RMSNormalization")
def rms_normalization(cv, node, inputs, attrs):
    """Y = X / sqrt(mean(X^2 over [axis, rank)) + epsilon) * scale, in float32 or float64: one
    rms_norm, the scale inside it where its sizes are X's last ones (else a Mul after). The
    importer's own RMS chains (_patterns.py) come without a scale."""
    x, scale = inputs[0], optional(inputs, 1)
    dtype = cv.dtype_of(x)
    if dtype not in ("float32", "float64"):
        raise cv.fail(f"X has dtype {dtype}; supported: float32, float64")
    shape = cv.shape_of(x)
    rank = len(shape)
    axis = int(attrs.get("axis", -1))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise cv.fail(f"axis {attrs.get('axis')} is out of range for rank {rank}")
    x = cv.tensor(x)
    s = None if scale is None else cv.tensor(_operand(cv, scale, dtype))
    static = all(isinstance(d, int) for d in cv.dims_of(x)[axis:])
    inside = s is not None and static and trailing_sizes_of(s.shape, shape, axis)
    y = cv.m.call("rms_norm", x, s if inside else None, axis,
                  float(attrs.get("epsilon", 1e-5)), outputs=[(dtype, shape, x.dynamic)])[0]
    return [y if s is None or inside else cv.m.mul(y, s)]


@lowers("InstanceNormalization")
def instance_normalization(cv, node, inputs, attrs):
    x = inputs[0]
    check_attrs(cv, attrs, ("epsilon",))
    channels = _check_channel_x(cv, x, "InstanceNormalization")
    scale, bias = _channel_params(cv, x, optional(inputs, 1), optional(inputs, 2), (channels,),
                                  f"it needs one value per channel ({channels})")
    eps = float(attrs.get("epsilon", 1e-5))
    return [_call(cv, "instance_norm", cv.tensor(x), scale, bias, eps)]


@lowers("GroupNormalization")
def group_normalization(cv, node, inputs, attrs):
    """Opset 18 scales per group; opset 21 per channel."""
    x = inputs[0]
    check_attrs(cv, attrs, ("epsilon", "num_groups", "stash_type"))
    channels = _check_channel_x(cv, x, "GroupNormalization")
    if "num_groups" not in attrs:
        raise cv.fail("attribute num_groups is missing")
    groups = int(attrs["num_groups"])
    if groups < 1 or channels % groups:
        raise cv.fail(f"num_groups {groups} does not divide the {channels} channels of X")
    size, per = (channels, "channel") if cv.opset >= 21 else (groups, "group")
    scale, bias = _channel_params(cv, x, optional(inputs, 1), optional(inputs, 2), (size,),
                                  f"opset {cv.opset} needs one value per {per} ({size})")
    eps = float(attrs.get("epsilon", 1e-5))
    return [_call(cv, "group_norm", cv.tensor(x), scale, bias, groups, eps)]


# ---- LpNormalization, MeanVarianceNormalization ---------------------------------------------

@lowers("LpNormalization")
def lp_normalization(cv, node, inputs, attrs):
    x = inputs[0]
    check_attrs(cv, attrs, ("axis", "p"))
    require_dtype(cv, x, FLOATS)
    rank = len(cv.shape_of(x))
    axis, p = int(attrs.get("axis", -1)), int(attrs.get("p", 2))
    if p not in (1, 2):
        raise cv.fail(f"p={p} is not supported (1 or 2)")
    if not -rank <= axis < rank:
        raise cv.fail(f"axis {axis} is out of range for rank {rank}")
    return [_call(cv, "lp_norm", cv.tensor(x), axis, p)]


# ONNX divides by sqrt(var) + 1e-9; sqrt(var + 1e-18) is the same to float precision and gives
# 0 rather than NaN for a constant slice, as ONNX does.
_MVN_EPSILON = 1e-18


@lowers("MeanVarianceNormalization")
def mean_variance_normalization(cv, node, inputs, attrs):
    """layer_norm over the trailing dims, after moving the normalised axes there."""
    x = inputs[0]
    check_attrs(cv, attrs, ("axes",))
    require_dtype(cv, x, FLOATS)
    shape = list(cv.shape_of(x))
    rank = len(shape)
    axes = [int(a) for a in attrs.get("axes", [0, 2, 3])]
    if any(not -rank <= a < rank for a in axes):
        raise cv.fail(f"axes {axes} are out of range for rank {rank}")
    axes = sorted({a + rank if a < 0 else a for a in axes})
    if not axes:
        raise cv.fail("empty axes are not supported")
    if axes == list(range(axes[0], rank)):
        return [_call(cv, "layer_norm", cv.tensor(x), axis=axes[0], epsilon=_MVN_EPSILON)]
    if cv.is_dynamic(x):
        raise cv.fail(f"axes {axes} (not trailing) need a static input shape")
    keep = [d for d in range(rank) if d not in axes]
    perm = keep + axes
    t = cv.m.transpose(cv.tensor(x), perm)
    rows = math.prod(shape[d] for d in keep)
    flat = reshape(cv, t, [rows, math.prod(shape[d] for d in axes)])
    y = _call(cv, "layer_norm", flat, axis=1, epsilon=_MVN_EPSILON)
    y = reshape(cv, y, [shape[d] for d in perm])
    return [cv.m.transpose(y, [perm.index(d) for d in range(rank)])]


# ---- ConvTranspose ----------------------------------------------------------------------------

def _pair(values, nd, default):
    return list(values) if nd == 2 else [default] + list(values)


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _convt_pads(cv, attrs, in_sizes, kernel, strides, dilations, out_pad):
    """(begin, end) pads per spatial dim, following the ONNX spec: with output_shape (or
    auto_pad SAME) the total padding is derived from the wanted size and split by auto_pad (the
    begin side takes the odd one unless SAME_UPPER); a negative total adds output positions,
    which the op allows."""
    nd = len(kernel)
    auto_pad = _text(attrs.get("auto_pad", "NOTSET")) or "NOTSET"
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise cv.fail(f"auto_pad={auto_pad} is not supported")
    natural = [s * (i - 1) + op + (k - 1) * d + 1
               for i, k, s, d, op in zip(in_sizes, kernel, strides, dilations, out_pad)]
    output_shape = [int(v) for v in attrs.get("output_shape", [])]
    if output_shape and len(output_shape) != nd:
        raise cv.fail(f"output_shape {output_shape} does not have {nd} spatial sizes")
    if not output_shape and auto_pad.startswith("SAME"):
        output_shape = [i * s for i, s in zip(in_sizes, strides)]
    if output_shape:
        begins, ends = [], []
        for total in (n - o for n, o in zip(natural, output_shape)):
            small = total // 2
            begin = small if auto_pad == "SAME_UPPER" else total - small
            begins.append(begin)
            ends.append(total - begin)
        return begins, ends
    if auto_pad == "VALID":
        return [0] * nd, [0] * nd
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * nd))]
    if len(pads) != 2 * nd:
        raise cv.fail(f"pads {pads} do not have {2 * nd} items")
    return pads[:nd], pads[nd:]


@lowers("ConvTranspose")
def conv_transpose(cv, node, inputs, attrs):
    x, w, b = inputs[0], inputs[1], optional(inputs, 2)
    check_attrs(cv, attrs, ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                            "output_shape", "pads", "strides"))
    dtype = require_dtype(cv, x, FLOATS, "X")
    _same_dtype(cv, x, w, "W")
    _same_dtype(cv, x, b, "B")
    rank = len(cv.shape_of(x))
    if rank not in (3, 4):
        raise cv.fail(f"ConvTranspose on a rank-{rank} input is not supported (1-D and 2-D only)")
    nd = rank - 2
    kernel = list(cv.shape_of(w)[2:])
    if len(kernel) != nd:
        raise cv.fail(f"W of shape {cv.shape_of(w)} does not match X of rank {rank}")
    if "kernel_shape" in attrs and list(attrs["kernel_shape"]) != kernel:
        raise cv.fail(f"kernel_shape {list(attrs['kernel_shape'])} differs from W's {kernel}")
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    dilations = [int(v) for v in attrs.get("dilations", [1] * nd)]
    out_pad = [int(v) for v in attrs.get("output_padding", [0] * nd)]
    if len(strides) != nd or len(dilations) != nd or len(out_pad) != nd:
        raise cv.fail(f"strides, dilations and output_padding need {nd} items each")
    derived = "output_shape" in attrs or _text(attrs.get("auto_pad", "NOTSET")) in ("SAME_UPPER",
                                                                                   "SAME_LOWER")
    if cv.is_dynamic(x) and (derived or nd == 1):
        raise cv.fail("a dynamic input needs 2-D ConvTranspose without output_shape or auto_pad "
                      "SAME")
    begins, ends = _convt_pads(cv, attrs, cv.shape_of(x)[2:], kernel, strides, dilations,
                               out_pad)
    group = int(attrs.get("group", 1))
    if nd == 1:
        n, c, length = cv.shape_of(x)
        x2 = reshape(cv, cv.tensor(x), [n, c, 1, length])
        w2 = (np.asarray(w)[:, :, None, :] if not isinstance(w, Value)
              else reshape(cv, w, list(cv.shape_of(w)[:2]) + [1, kernel[0]]))
        pads, stride, dil = [0, begins[0], 0, ends[0]], _pair(strides, 1, 1), _pair(dilations, 1, 1)
    else:
        x2, w2 = cv.tensor(x), w
        pads, stride, dil = [begins[0], begins[1], ends[0], ends[1]], strides, dilations
    if any(op < 0 for op in out_pad) or group < 1:
        raise cv.fail(f"output_padding {out_pad} and group {group} must be >= 0 and >= 1")
    y = _call(cv, "conv_transpose2d", x2, cv.tensor(w2), _operand(cv, b, dtype), stride, pads,
                              _pair(out_pad, nd, 0), dil, group)
    if nd == 1:
        n, o, _, length = y.shape
        y = reshape(cv, y, [n, o, length])
    return [y]
