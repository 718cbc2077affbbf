"""Fusions the .pte importer applies (the ONNX importer's, for the same programs):

- an activation (relu, hardtanh/clamp, sigmoid, gelu in both forms, hardswish, silu) whose
  input comes from
  conv2d or linear and is read by nothing else runs in that op's epilogue (conv2d_act,
  linear_act);
- batch norm with constant statistics after a convolution with constant weights is folded
  into the weights and bias (weights up to MAX_FOLD_ELEMENTS, folded in pure Python).
"""
from __future__ import annotations

from array import array
from typing import List, Optional, Sequence

from ._convert import MethodConverter

MAX_FOLD_ELEMENTS = 1 << 22

RELU, CLIP, SIGMOID, GELU, HARD_SWISH, SILU, GELU_TANH = 1, 2, 3, 4, 5, 6, 7  # docs/ops.md


def _sole_reader(cx: MethodConverter, index: int):
    """The value of ET value `index` when only the current instruction reads it and it is a
    float32 result of this method; else None."""
    if index in cx.alias_sources or index in cx.state or cx.reads_later(index):
        return None
    if index not in cx.env:
        return None
    x = cx.env[index]
    if x.dtype != "float32" or any(v is x for v, _ in cx.m._outputs):
        return None
    return x


def fuse_activation(cx: MethodConverter, index: int, kind: int, out: int, lo: float = 0.0,
                    hi: float = 0.0) -> bool:
    x = _sole_reader(cx, index)
    if x is None or not cx.m.fuse_activation(x, kind, lo, hi):
        return False
    cx.bind(out, x)
    return True


def fold_batch_norm(cx: MethodConverter, index: int, scale: Sequence[float],
                    shift: Sequence[float], out: int) -> bool:
    """y = x * scale + shift per channel, folded into the conv2d that produces x."""
    x = _sole_reader(cx, index)
    if x is None:
        return False
    pc = cx.m.producer(x)
    if pc is None or cx.m._instructions[pc][1] != "conv2d":
        return False
    args = cx.m._instructions[pc][2]
    weight = cx.constant_raw.get(args[1])
    bias_value = cx.m._values[args[2]]
    bias: Optional[List[float]] = [0.0] * len(scale) if not bias_value.is_tensor else None
    if bias is None:
        raw = cx.constant_raw.get(args[2])
        if raw is None or raw[1] != "float32":
            return False
        bias = list(array("f", raw[0]))
    if weight is None or weight[1] != "float32" or len(bias) != len(scale):
        return False
    w = array("f", weight[0])
    channels = len(scale)
    if len(w) > MAX_FOLD_ELEMENTS or channels == 0 or len(w) % channels:
        return False
    per = len(w) // channels
    folded = array("f", bytes(len(weight[0])))
    for o in range(channels):
        s = scale[o]
        start = o * per
        folded[start:start + per] = array("f", (v * s for v in w[start:start + per]))
    new_bias = array("f", (b * s + t for b, s, t in zip(bias, scale, shift)))
    w_value = cx.m.constant(folded.tobytes(), "float32", weight[2])
    b_value = cx.m.constant(new_bias.tobytes(), "float32", (channels,))
    cx.m.replace_argument(pc, 1, w_value)
    cx.m.replace_argument(pc, 2, b_value)
    cx.bind(out, x)
    return True
