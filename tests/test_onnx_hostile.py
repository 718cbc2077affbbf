"""Malformed ONNX models are refused with an error naming what is wrong, never a raw
struct.error / ValueError from deep inside the importer, and never accepted (onnxruntime
refuses the last two too)."""
from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _vec(name, shape=(4,)):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _raw_initializer(dims, raw):
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend(dims)
    t.raw_data = raw
    return t


CASES = {
    "a graph input too large for any tensor": (
        _model([helper.make_node("Relu", ["x"], ["y"])], [_vec("x", (2 ** 62, 2 ** 62))],
               [_vec("y", (2 ** 62, 2 ** 62))]),
        rt.InvalidArgument, "input 'x' has shape .* too large for any tensor"),
    "a Reshape to an impossible shape": (
        _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [_vec("x")], [_vec("y")],
               [numpy_helper.from_array(np.array([2 ** 62, -1], np.int64), "s")]),
        ro.ConversionError, r"node 'y' \(Reshape\): cannot infer -1 in shape \[4611686018427387904, -1\]: 4 elements"),
    "an initializer with too few bytes": (
        _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vec("x")], [_vec("y")],
               [_raw_initializer([4], b"\0" * 7)]),
        ro.ConversionError, r"initializer 'w' \(dims \[4\]\) cannot be read"),
    "an initializer with a negative dim": (
        _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vec("x")], [_vec("y")],
               [_raw_initializer([-1], b"")]),
        ro.ConversionError, r"initializer 'w' has negative dims \[-1\]"),
    "two nodes defining one output": (
        _model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
               [_vec("x")], [_vec("y")]),
        ro.ConversionError, r"node 'y' \(Neg\): output 'y' is already defined"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_model_is_refused_by_name(case):
    model, error, message = CASES[case]
    with pytest.raises(error, match=message):
        ro.convert(model)
