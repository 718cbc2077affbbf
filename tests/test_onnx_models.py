"""Models the importer did not see in the node tests, checked against onnxruntime: an MLP, a
small CNN, a transformer encoder block and MobileNet v1 (random weights), with static and with
bounded dynamic batch sizes."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import runtime_py.onnx as ro  # noqa: E402
from tests import onnx_models  # noqa: E402

MODELS = {
    "mlp": (onnx_models.mlp, (256,), 1e-4),
    "cnn": (onnx_models.small_cnn, (3, 64, 64), 1e-4),
    "transformer": (onnx_models.transformer_block, (32, 128), 2e-4),
    # Full depth: its 14x14 and 7x7 pointwise layers take the pixels as the GEMM's rows.
    "mobilenet_v1": (lambda batch: onnx_models.mobilenet(batch, full_depth=True),
                     (3, 224, 224), 1e-4),
}


def reference(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_static_batch_matches_onnxruntime(name):
    make, feature_shape, tol = MODELS[name]
    model = make(batch=4)
    x = np.random.default_rng(0).standard_normal((4,) + feature_shape).astype(np.float32)
    with ro.load(model) as module:
        (y,) = module.forward(x)
    np.testing.assert_allclose(np.asarray(y), reference(model, x), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dynamic_batch_matches_onnxruntime(name):
    make, feature_shape, tol = MODELS[name]
    model = make(batch="N")
    with ro.load(model, dynamic_bounds={"x": {0: 8}}) as module:
        meta = module.method_meta("forward").input_tensor_meta(0)
        assert meta.dynamic and meta.shape == (8,) + feature_shape
        for batch in (1, 3, 8):
            x = np.random.default_rng(batch).standard_normal((batch,) + feature_shape).astype(np.float32)
            (y,) = module.forward(x)
            np.testing.assert_allclose(np.asarray(y), reference(model, x), rtol=tol, atol=tol)


def test_missing_dimension_names_input_and_axis():
    with pytest.raises(ValueError, match=r"input 'x' dimension 0 \('N'\) has no fixed size"):
        ro.convert(onnx_models.mlp(batch="N"))


def test_unsupported_op_names_node():
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("Frobnicate", ["x"], ["y"], name="mystery", domain="")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ro.ConversionError, match=r"node 'mystery' \(Frobnicate\)"):
        ro.convert(model)
    assert isinstance(ro.ConversionError("x"), NotImplementedError)
    del onnx
