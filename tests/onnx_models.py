"""Handmade ONNX models (onnx.helper, random weights) used by the importer tests and the
benchmarks: an MLP, a small CNN, a transformer encoder block and a MobileNet-style CNN."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Graph:
    """Accumulates nodes and initializers with generated names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array: np.ndarray, prefix: str = "c") -> str:
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape: int, scale: float = 1.0) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        w = self.rng.standard_normal(shape) * scale / np.sqrt(fan_in)
        return self.const(w.astype(np.float32), "w")

    def op(self, op_type: str, *inputs: str, n_out: int = 1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=outs[0], **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, x: str, x_shape, y: str, y_shape) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "model", [helper.make_tensor_value_info(x, TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, y_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def mlp(batch="N", seed=0) -> onnx.ModelProto:
    """Gemm 256->512, Relu, Gemm 512->256, Relu, Gemm 256->10."""
    g = _Graph(seed)
    h = "x"
    for i, (n_in, n_out) in enumerate([(256, 512), (512, 256), (256, 10)]):
        h = g.op("Gemm", h, g.weight(n_out, n_in), g.weight(n_out, scale=0.1), transB=1)
        if i < 2:
            h = g.op("Relu", h)
    return g.model("x", [batch, 256], h, [batch, 10])


def small_cnn(batch="N", seed=1) -> onnx.ModelProto:
    """Conv, BatchNormalization, Relu, MaxPool, Conv, Relu, GlobalAveragePool, Flatten, Gemm."""
    g = _Graph(seed)
    h = g.op("Conv", "x", g.weight(16, 3, 3, 3), g.weight(16, scale=0.1), pads=[1, 1, 1, 1])
    h = g.op("BatchNormalization", h, g.const(g.rng.uniform(0.5, 1.5, 16).astype(np.float32)),
             g.const(g.rng.normal(0, 0.1, 16).astype(np.float32)),
             g.const(g.rng.normal(0, 0.1, 16).astype(np.float32)),
             g.const(g.rng.uniform(0.5, 1.5, 16).astype(np.float32)), epsilon=1e-5)
    h = g.op("Relu", h)
    h = g.op("MaxPool", h, kernel_shape=[2, 2], strides=[2, 2])
    h = g.op("Conv", h, g.weight(32, 16, 3, 3), g.weight(32, scale=0.1), pads=[1, 1, 1, 1])
    h = g.op("Relu", h)
    h = g.op("GlobalAveragePool", h)
    h = g.op("Flatten", h, axis=1)
    h = g.op("Gemm", h, g.weight(10, 32), g.weight(10, scale=0.1), transB=1)
    return g.model("x", [batch, 3, 64, 64], h, [batch, 10])


def transformer_block(batch="N", seq=32, d=128, heads=4, ffn=256, seed=2) -> onnx.ModelProto:
    """Post-norm encoder layer: self-attention (4 heads), Add + LayerNormalization, FFN with an
    Erf-form Gelu, Add + LayerNormalization."""
    g = _Graph(seed)
    dh = d // heads

    def linear(x, n_in, n_out):
        return g.op("Add", g.op("MatMul", x, g.weight(n_in, n_out)), g.weight(n_out, scale=0.1))

    def split_heads(x):
        x = g.op("Reshape", x, g.const(np.array([-1, seq, heads, dh], np.int64)))
        return g.op("Transpose", x, perm=[0, 2, 1, 3])

    def layer_norm(x):
        return g.op("LayerNormalization", x, g.const(np.ones(d, np.float32)),
                    g.const(np.zeros(d, np.float32)), axis=-1, epsilon=1e-5)

    q, k, v = (split_heads(linear("x", d, d)) for _ in range(3))
    scores = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
    scores = g.op("Mul", scores, g.const(np.array(1 / np.sqrt(dh), np.float32)))
    attn = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    attn = g.op("Reshape", g.op("Transpose", attn, perm=[0, 2, 1, 3]),
                g.const(np.array([-1, seq, d], np.int64)))
    h = layer_norm(g.op("Add", "x", linear(attn, d, d)))
    f = linear(h, d, ffn)
    erf = g.op("Erf", g.op("Div", f, g.const(np.array(np.sqrt(2), np.float32))))
    gelu = g.op("Mul", g.op("Mul", f, g.const(np.array(0.5, np.float32))),
                g.op("Add", erf, g.const(np.array(1, np.float32))))
    out = layer_norm(g.op("Add", h, linear(gelu, ffn, d)))
    return g.model("x", [batch, seq, d], out, [batch, seq, d])


def mobilenet(batch="N", seed=3, width=32, size=224, full_depth=False) -> onnx.ModelProto:
    """A MobileNet-v1-style CNN: a strided 3x3 conv, then depthwise 3x3 + pointwise 1x1 blocks
    with BatchNormalization and Clip(0, 6), global pooling and a classifier. Reduced (to 512
    channels at 14x14), or with full_depth MobileNet v1's own blocks: five more of 512
    channels at 14x14, then two of 1024 at 7x7."""
    g = _Graph(seed)

    def bn_relu6(x, c):
        x = g.op("BatchNormalization", x, g.const(g.rng.uniform(0.5, 1.5, c).astype(np.float32)),
                 g.const(g.rng.normal(0, 0.1, c).astype(np.float32)),
                 g.const(g.rng.normal(0, 0.1, c).astype(np.float32)),
                 g.const(g.rng.uniform(0.5, 1.5, c).astype(np.float32)))
        return g.op("Clip", x, g.const(np.array(0, np.float32)), g.const(np.array(6, np.float32)))

    h = bn_relu6(g.op("Conv", "x", g.weight(width, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1]), width)
    c = width
    blocks = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)]
    if full_depth:
        blocks += [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for out_c, stride in blocks:
        h = bn_relu6(g.op("Conv", h, g.weight(c, 1, 3, 3), group=c, strides=[stride, stride],
                          pads=[1, 1, 1, 1]), c)
        h = bn_relu6(g.op("Conv", h, g.weight(out_c, c, 1, 1)), out_c)
        c = out_c
    h = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    h = g.op("Gemm", h, g.weight(1000, c), g.weight(1000, scale=0.1), transB=1)
    return g.model("x", [batch, 3, size, size], h, [batch, 1000])
