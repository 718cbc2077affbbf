"""Random shape arithmetic, as exporters write it, against onnxruntime.

Each example builds a graph on a dynamic input x[b, s, 6]: Shape(x), then Gather / Slice /
Concat / Mul / Add / Div / Unsqueeze / Squeeze on the shape, into a Reshape of x (its dimensions
regrouped, some sizes given by the shape arithmetic, maybe a -1 or a 0), an Expand, a Range,
a ConstantOfShape and a position table sliced to the sequence length. The program is converted
once with dynamic bounds (every form generated here must convert) and run at random sizes
within them: every output must equal onnxruntime's. RT_SHAPE_FUZZ_EXAMPLES sets the example
count (40).
Symbolic sizes (runtime_py/onnx/_symbolic.py)
decide the output sizes and bounds here; a wrong proof shows up as a wrong shape or a size
beyond its bound.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import runtime_py.onnx as rto  # noqa: E402

B, S, H = 4, 6, 6  # bounds of the two dynamic axes; the fixed last one


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def name(self):
        self.count += 1
        return f"v{self.count}"

    def const(self, values):
        name = self.name()
        self.inits.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
        return name

    def scalar(self, value):
        name = self.name()
        self.inits.append(helper.make_tensor(name, TensorProto.INT64, [], [value]))
        return name

    def node(self, op, inputs, **attrs):
        out = self.name()
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out


def size_of(g, shape, axis, draw):
    """A one-element int64 vector holding dimension `axis`, written one of the ways exporters
    do: Gather + Unsqueeze, Slice, or Gather of a Concat of pieces."""
    how = draw(st.sampled_from(["gather", "slice", "cast"]))
    if how == "slice":
        return g.node("Slice", [shape, g.const([axis]), g.const([axis + 1])])
    scalar = g.node("Gather", [shape, g.scalar(axis)], axis=0)
    if how == "cast":  # through int32 and back, as the classic exporter sometimes does
        scalar = g.node("Cast", [g.node("Cast", [scalar], to=TensorProto.INT32)],
                        to=TensorProto.INT64)
    return g.node("Unsqueeze", [scalar, g.const([0])])


def group_size(g, shape, axes, draw):
    """The product of the sizes of `axes` as a one-element vector (Mul chains), sometimes
    as (a * k) / k or a + 0."""
    parts = [size_of(g, shape, a, draw) if a < 2 else g.const([H]) for a in axes]
    value = parts[0]
    for p in parts[1:]:
        value = g.node("Mul", [value, p])
    twist = draw(st.sampled_from(["none", "mul_div", "add_sub"]))
    if twist == "mul_div":
        value = g.node("Div", [g.node("Mul", [value, g.const([3])]), g.const([3])])
    elif twist == "add_sub":
        value = g.node("Sub", [g.node("Add", [value, g.const([2])]), g.const([2])])
    return value


@st.composite
def shape_graphs(draw):
    g = Graph()
    shape = g.node("Shape", ["x"])
    # Reshape x: its axes cut into consecutive groups, each group's size written by the graph
    # (a dynamic group) or as a literal, one group maybe -1, the first maybe 0 (copy).
    cuts = sorted(draw(st.sets(st.sampled_from([1, 2]))))
    groups = [list(range(a, b)) for a, b in zip([0] + cuts, cuts + [3])]
    minus = draw(st.sampled_from([None] + list(range(len(groups)))))
    pieces = []
    for k, axes in enumerate(groups):
        if k == minus:
            pieces.append(g.const([-1]))
        elif k == 0 and axes == [0] and draw(st.booleans()):
            pieces.append(g.const([0]))
        elif axes == [2]:
            pieces.append(g.const([H]))
        else:
            pieces.append(group_size(g, shape, axes, draw))
    target = g.node("Concat", pieces, axis=0)
    reshaped = g.node("Reshape", ["x", target])
    outputs = [reshaped]
    if draw(st.booleans()):  # positions 0..s-1 broadcast against x: Range + Unsqueeze + Add
        seq = g.node("Gather", [shape, g.scalar(1)], axis=0)
        positions = g.node("Range", [g.scalar(0), seq, g.scalar(1)])
        as_float = g.node("Cast", [positions], to=TensorProto.FLOAT)
        column = g.node("Unsqueeze", [as_float, g.const([1])])
        outputs.append(g.node("Add", ["x", column]))
    if draw(st.booleans()):  # a row expanded to x's shape with its last size kept
        head = g.node("Slice", [shape, g.const([0]), g.const([2])])
        full = g.node("Concat", [head, g.const([1])], axis=0)
        row = g.node("ConstantOfShape", [full],
                     value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.5]))
        outputs.append(g.node("Expand", [row, shape]))
    if draw(st.booleans()):  # a position table sliced to the sequence length, added to x
        table = g.name()
        g.inits.append(helper.make_tensor(table, TensorProto.FLOAT, [16, H],
                                          [(i % 7) * 0.25 for i in range(16 * H)]))
        seq = size_of(g, shape, 1, draw)
        rows = g.node("Slice", [table, g.const([0]), seq, g.const([0])])
        outputs.append(g.node("Add", ["x", g.node("Unsqueeze", [rows, g.const([0])])]))
    if draw(st.booleans()):  # the classic exporter's Expand: Where(Equal(shape, -1), 1, shape)
        minus = g.node("Equal", [shape, g.const([-1])])
        safe = g.node("Where", [minus, g.const([1]), shape])
        outputs.append(g.node("Expand", [g.node("Transpose", [g.node("Transpose", ["x"],
                                                                        perm=[1, 0, 2])],
                                                perm=[1, 0, 2]), safe]))
    if draw(st.booleans()):  # Flatten then split heads back by the transposed tensor's shape
        t = g.node("Transpose", ["x"], perm=[1, 0, 2])
        ts = g.node("Shape", [t])
        flat = g.node("Flatten", [t], axis=2)
        back = g.node("Concat", [size_of(g, ts, 0, draw), size_of(g, ts, 1, draw),
                                 g.const([2, H // 2])], axis=0)
        outputs.append(g.node("Reshape", [flat, back]))
    graph = helper.make_graph(
        g.nodes, "shapes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", H])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@settings(max_examples=int(os.environ.get("RT_SHAPE_FUZZ_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(model=shape_graphs(), sizes=st.lists(st.tuples(st.integers(1, B), st.integers(1, S)),
                                            min_size=1, max_size=3))
def test_shape_arithmetic_matches_onnxruntime(model, sizes):
    module = rto.load(model, dynamic_bounds={"x": {0: B, 1: S}})  # every form here converts
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    try:
        for b, s in sizes:
            x = rng.standard_normal((b, s, H)).astype(np.float32)
            want = session.run(None, {"x": x})
            got = module.forward(x)
            got = got if isinstance(got, (list, tuple)) else [got]
            for w, y in zip(want, got):
                y = np.asarray(y)
                assert y.shape == w.shape
                np.testing.assert_allclose(y, w, rtol=1e-6, atol=1e-6)
    finally:
        module.close()
