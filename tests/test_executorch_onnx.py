"""The same torch model exported to ONNX and to ExecuTorch gives the same results through
both importers (and torch's recorded outputs). Needs onnx and numpy."""
from __future__ import annotations

from pathlib import Path

import pytest

import runtime_py as rt
from runtime_py import executorch as et

DATA = Path(__file__).parent / "data" / "executorch"


def test_onnx_and_pte_of_one_model_agree():
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnx")
    import runtime_py.onnx as ro
    expect = np.load(DATA / "mobilenet.npz")
    x, want = expect["forward_call0_in0"], expect["forward_call0_out0"]
    with rt.load(ro.convert(DATA / "mobilenet.onnx")) as from_onnx, \
            et.load(DATA / "mobilenet.pte") as from_pte:
        a = np.asarray(from_onnx.forward(x)[0])
        b = np.asarray(from_pte.forward(x)[0])
        info_onnx = from_onnx.method_meta("forward")
        info_pte = from_pte.method_meta("forward")
    assert tuple(info_onnx.input_tensor_meta(0).shape) == tuple(info_pte.input_tensor_meta(0).shape)
    assert a.shape == b.shape == want.shape
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)
