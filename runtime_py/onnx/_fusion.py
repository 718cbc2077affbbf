"""Fusions applied while lowering, each replacing two ops by one kernel call:

- Conv + BatchNormalization: the normalisation folded into the convolution's weights and bias.
- MatMul + Add of a constant bias: one linear op (x @ W^T + b through the packed GEMM).
- rms_norm (from RMSNormalization or the RMS chains of _patterns.py) times a constant weight:
  the weight becomes its scale.
- Conv times or plus a constant of one value or one per output channel: folded into its
  weights and bias.
- Conv / Gemm / MatMul+Add followed by Relu, Clip (ReLU6), Sigmoid, HardSwish, Gelu or Swish
  (SiLU), directly or after a Reshape: the activation applied in the GEMM's epilogue
  (conv2d_act / linear_act).

A fusion applies only when the first op's result feeds nothing else, so no other node can see
the intermediate value it removes. convert(..., fuse=False) turns them all off; the tests compare
both programs.
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..compiler import Value
from ._activations import ACTIVATIONS
from ._lowerings.common import trailing_sizes_of


def try_fuse(cv: Any, node: Any, inputs: List[Any], attrs: dict) -> Optional[List[Any]]:
    """Outputs of `node` when it fused into its producer; None to lower it normally."""
    if node.op_type in ACTIVATIONS:
        return _fuse_activation(cv, node, inputs, attrs)
    if node.op_type == "BatchNormalization":
        return _fold_batch_norm(cv, node, inputs, attrs)
    if node.op_type == "Add":
        return _fuse_bias(cv, node, inputs) or _fold_channel_affine(cv, node, inputs)
    if node.op_type == "Mul":
        return _fuse_norm_scale(cv, node, inputs) or _fold_channel_affine(cv, node, inputs)
    return None


def _sole_use(cv: Any, node: Any, index: int = 0) -> Optional[Value]:
    """Input `index` when it is a float32 program tensor read by this node alone."""
    if index >= len(node.input):
        return None
    value = cv.env.get(node.input[index])
    if not isinstance(value, Value) or value.dtype != "float32":
        return None
    return value if cv.consumers.get(node.input[index], 0) == 1 else None


def _fuse_activation(cv, node, inputs, attrs):
    x = _sole_use(cv, node)
    if x is None:
        return None
    spec = ACTIVATIONS[node.op_type](cv, node, inputs, attrs)
    if spec is None:
        return None
    kind, lo, hi = spec
    # a reshape between the layer and the activation lets the activation move before it: an
    # ONNX Reshape whose input has no other reader (the classic exporter's 3-D Gemm), or the
    # one a 1-D Conv's lowering ends with (wav2vec2's feature extractor)
    producer = cv.producers.get(node.input[0])
    through = producer is not None and (producer.op_type == "Conv" or (
        producer.op_type == "Reshape" and cv.consumers.get(producer.input[0], 0) == 1))
    return [x] if cv.m.fuse_activation(x, kind, lo, hi, through_reshape=through) else None


def _fold_channel_affine(cv, node, inputs):
    """conv2d result times or plus a constant that is one value or one per output channel
    (PP-OCR's learnable affine blocks, a scale after a convolution): folded into the
    convolution's weights and bias, as batch norm is."""
    for side in (0, 1):
        x, c = _sole_use(cv, node, side), inputs[1 - side]
        if x is None or c is None or isinstance(c, Value) or len(x.shape) != 4:
            continue
        pc = cv.m.producer(x)
        if pc is None or cv.m._instructions[pc][1] != "conv2d":
            continue
        c = np.asarray(c)
        channels = x.shape[1]
        per_channel = c.ndim <= 4 and c.shape[-3:] in ((channels, 1, 1),) and \
            all(s == 1 for s in c.shape[:-3])
        if c.dtype != np.float32 or not (c.size == 1 and c.ndim <= 4 or per_channel):
            continue
        args = cv.m._instructions[pc][2]
        weight = cv.constant_array(cv.m._values[args[1]])
        bias_value = cv.m._values[args[2]]
        bias = np.zeros(channels) if bias_value.kind == 0 else \
            cv.constant_array(bias_value)
        if weight is None or bias is None:
            continue
        a = np.broadcast_to(c.reshape(-1).astype(np.float64), (channels,))
        if node.op_type == "Mul":
            weight = weight.astype(np.float64) * a[:, None, None, None]
            bias = bias.astype(np.float64) * a
        else:
            bias = bias.astype(np.float64) + a
        cv.m.replace_argument(pc, 1, cv.tensor(weight.astype(np.float32)))
        cv.m.replace_argument(pc, 2, cv.tensor(bias.astype(np.float32)))
        return [x]
    return None


def _fold_batch_norm(cv, node, inputs, attrs):
    x = _sole_use(cv, node)
    if x is None or attrs.get("training_mode", 0) or any(node.output[1:]):
        return None
    pc = cv.m.producer(x)
    if pc is None or cv.m._instructions[pc][1] != "conv2d":
        return None
    params = inputs[1:5]
    if any(p is None or isinstance(p, Value) for p in params):
        return None
    args = cv.m._instructions[pc][2]
    weight = cv.constant_array(cv.m._values[args[1]])
    bias_value = cv.m._values[args[2]]
    bias = np.zeros(weight.shape[0]) if bias_value.kind == 0 else cv.constant_array(bias_value)
    if weight is None or bias is None:
        return None
    scale, shift, mean, var = (np.asarray(p, np.float64) for p in params)
    a = scale / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    new_weight = (weight.astype(np.float64) * a[:, None, None, None]).astype(np.float32)
    new_bias = ((bias.astype(np.float64) - mean) * a + shift).astype(np.float32)
    cv.m.replace_argument(pc, 1, cv.tensor(new_weight))
    cv.m.replace_argument(pc, 2, cv.tensor(new_bias))
    return [x]


def _fuse_norm_scale(cv, node, inputs):
    """rms_norm without a scale, times a constant with its last sizes (Llama's and T5's
    weight) -> rms_norm with that scale."""
    for side in (0, 1):
        y, weight = _sole_use(cv, node, side), inputs[1 - side]
        if y is None or weight is None or isinstance(weight, Value):
            continue
        pc = cv.m.producer(y)
        if pc is None or cv.m._instructions[pc][1] != "rms_norm":
            continue
        _, scale_index, axis_index = cv.m._instructions[pc][2][:3]
        weight = np.asarray(weight)
        axis = cv.m._values[axis_index].payload
        if cv.m._values[scale_index].is_tensor or weight.dtype != np.dtype(y.dtype) or \
                weight.ndim > len(y.shape):
            continue
        axis = axis + len(y.shape) if axis < 0 else axis
        if not trailing_sizes_of(weight.shape, y.shape, axis) or \
                not all(isinstance(d, int) for d in cv.dims_of(y)[axis:]):
            continue
        cv.m.replace_argument(pc, 1, cv.tensor(weight))
        return [y]
    return None


def _fuse_bias(cv, node, inputs):
    """MatMul(A, B constant [K, N]) + bias constant [N] -> linear(A, B^T, bias)."""
    for side in (0, 1):
        x, bias = _sole_use(cv, node, side), inputs[1 - side]
        if x is None or bias is None or isinstance(bias, Value):
            continue
        pc = cv.m.producer(x)
        if pc is None or cv.m._instructions[pc][1] != "matmul":
            continue
        a_index, b_index, out_index = cv.m._instructions[pc][2]
        weight = cv.constant_array(cv.m._values[b_index])
        a_rank = len(cv.m._values[a_index].shape)
        bias = np.asarray(bias)
        if weight is None or weight.ndim != 2 or a_rank < 2 or bias.dtype != np.float32:
            continue
        n = weight.shape[1]
        if bias.size != n or any(s != 1 for s in bias.shape[:-1]) or bias.shape[-1:] != (n,) \
                or bias.ndim > len(x.shape):
            continue
        transposed = cv.tensor(np.ascontiguousarray(weight.T))
        cv.m._instructions[pc] = ("kernel", "linear",
                                  [a_index, transposed.index, cv.tensor(bias.reshape(n)).index,
                                   out_index])
        return [x]
    return None
