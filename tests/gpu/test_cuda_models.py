"""The demo / benchmark models (tests/onnx_models.py) on CUDA against the same programs on the
CPU, and interop with torch and cupy device arrays where those are installed with CUDA.
Set RT_GPU_FULL_MODELS=1 for the benchmark sizes (the GPU script does); the default sizes keep
the emulated run (tests/test_cuda_emulated.py) quick."""
from __future__ import annotations

import os

import pytest

import runtime_py as rt

pytestmark = pytest.mark.gpu
np = pytest.importorskip("numpy")
pytest.importorskip("onnx")

import runtime_py.onnx as ro  # noqa: E402
from tests import onnx_models  # noqa: E402

FULL = os.environ.get("RT_GPU_FULL_MODELS") == "1"
MODELS = {
    "mlp": lambda: onnx_models.mlp(batch=8),
    "small_cnn": lambda: onnx_models.small_cnn(batch=2),
    "transformer_block": lambda: (onnx_models.transformer_block(batch=2) if FULL else
                                  onnx_models.transformer_block(batch=2, seq=8, d=32, heads=2,
                                                                ffn=64)),
    "mobilenet": lambda: onnx_models.mobilenet(batch=2, size=224 if FULL else 32),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_the_cpu(name):
    program = ro.load(MODELS[name]()).program
    x = np.random.default_rng(0).standard_normal(
        program.method_meta("forward").inputs[0].shape).astype(np.float32)
    with program.load_method("forward") as cpu, \
            program.load_method("forward", device="cuda") as gpu:
        (want,) = cpu(x)
        (got,) = gpu(x)
        np.testing.assert_allclose(np.asarray(got.to_host()), np.asarray(want), rtol=1e-4,
                                   atol=1e-4)
        (again,) = gpu(rt.Tensor.from_host(x))  # a device input, bound without a copy
        np.testing.assert_array_equal(np.asarray(again.to_host()),
                                      np.asarray(got.to_host()))


def _relu_program():
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (3, 4))))
    return rt.Program.load(b.to_bytes())


def test_torch_cuda_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    x = torch.randn(3, 4, device="cuda")
    with _relu_program() as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)  # torch's memory, read where it lies
        back = torch.as_tensor(y, device="cuda")  # through __cuda_array_interface__
        torch.testing.assert_close(back, torch.relu(x))
        (z,) = f(x.t().contiguous().t())  # a strided device input: copied on the device
        torch.testing.assert_close(torch.as_tensor(z, device="cuda"), torch.relu(x))


def test_cupy_arrays_in_and_out():
    cp = pytest.importorskip("cupy")
    try:
        x = cp.asarray(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32))
    except Exception as exc:  # cupy without a usable device
        pytest.skip(f"cupy cannot use the GPU: {exc}")
    with _relu_program() as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)
        np.testing.assert_array_equal(cp.asnumpy(cp.asarray(y)), np.maximum(cp.asnumpy(x), 0))
