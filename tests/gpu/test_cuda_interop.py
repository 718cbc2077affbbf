"""Device memory shared with torch and cupy on a real GPU: inputs and outputs through DLPack
(capsules and __dlpack__) and through __cuda_array_interface__, zero copy where the docs promise
it, every dtype torch and cupy share with us, strided device inputs, outputs that outlive their
method through a DLPack consumer, and inputs still being written on another library's stream.
Each test skips where its library is absent or has no usable GPU (so all of them skip under the
emulated driver, whose "device memory" torch and cupy cannot see)."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

pytestmark = pytest.mark.gpu
np = pytest.importorskip("numpy")


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def _cupy():
    cp = pytest.importorskip("cupy")
    try:
        cp.zeros(1).sum().get()
    except Exception as exc:  # cupy without a usable device
        pytest.skip(f"cupy cannot use the GPU: {exc}")
    return cp


def _program(op: str, dtype: str, shape) -> rt.Program:
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(op, m.input("x", dtype, shape), outputs=[(dtype, shape, False)])[0])
    return rt.Program.load(b.to_bytes())


class CudaArrayInterfaceOnly:
    """Exposes another library's device array through __cuda_array_interface__ alone, so the
    binding cannot take the DLPack path."""

    def __init__(self, array):
        self.__cuda_array_interface__ = array.__cuda_array_interface__
        self._keep = array


def _address(tensor: rt.Tensor) -> int:
    return tensor.__cuda_array_interface__["data"][0]


# ---- torch ----------------------------------------------------------------------------------

def test_torch_dlpack_in_and_out_without_copies():
    torch = _torch()
    x = torch.randn(64, 33, device="cuda")
    with _program("relu", "float32", (64, 33)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)  # torch's __dlpack__: read in place
        t = torch.from_dlpack(y)  # our __dlpack__: torch sees our memory
        assert t.device.type == "cuda" and t.data_ptr() == _address(y)
        torch.testing.assert_close(t, torch.relu(x), rtol=0, atol=0)
        (z,) = f(torch.utils.dlpack.to_dlpack(x))  # a bare capsule
        torch.testing.assert_close(torch.from_dlpack(z), torch.relu(x), rtol=0, atol=0)


def test_torch_cuda_array_interface_in_and_out():
    torch = _torch()
    x = torch.randn(5, 7, device="cuda")
    with _program("neg", "float32", (5, 7)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(CudaArrayInterfaceOnly(x))
        t = torch.as_tensor(y, device="cuda")
        assert t.data_ptr() == _address(y)
        torch.testing.assert_close(t, -x, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int8", "int32", "int64",
                                   "uint8", "bool"])
def test_torch_round_trip_keeps_every_bit(dtype):
    torch = _torch()
    tdt = getattr(torch, dtype)
    if dtype == "bool":
        x = torch.rand(3, 41, device="cuda") > 0.5
    elif tdt.is_floating_point:
        x = torch.randn(3, 41, device="cuda").to(tdt)
        x[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0])
    else:
        info = torch.iinfo(tdt)
        x = torch.randint(info.min, info.max, (3, 41), device="cuda", dtype=tdt)
    with _program("copy", dtype, (3, 41)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)
        t = torch.from_dlpack(y)
        assert t.dtype == tdt and t.shape == x.shape
        assert torch.equal(t.view(torch.uint8), x.view(torch.uint8))


def test_torch_strided_and_offset_inputs_are_copied_on_the_device():
    torch = _torch()
    base = torch.randn(40, 30, device="cuda")
    for x in (base.t(), base[3:9, ::4], base[:, 1:].t()[::2]):
        with _program("relu", "float32", tuple(x.shape)) as p, \
                p.load_method("forward", device="cuda") as f:
            (y,) = f(x)
            torch.testing.assert_close(torch.from_dlpack(y), torch.relu(x), rtol=0, atol=0)


def test_torch_view_of_an_output_outlives_its_method():
    """An output view (clone_outputs=False) exported through DLPack keeps the method's device
    memory until torch lets go, even after the method is closed."""
    torch = _torch()
    x = torch.randn(1 << 20, device="cuda")
    want = torch.relu(x)
    with _program("relu", "float32", (1 << 20,)) as p:
        f = p.load_method("forward", device="cuda", clone_outputs=False)
        (y,) = f(x)
        t = torch.from_dlpack(y)
        f.close()
        torch.cuda.synchronize()
        torch.testing.assert_close(t.clone(), want, rtol=0, atol=0)
        del t


def test_torch_input_still_being_written_on_another_stream():
    """The backend waits for the context before reading a device input, so work torch has
    queued on its own stream is complete without the caller synchronizing."""
    torch = _torch()
    side = torch.cuda.Stream()
    a = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()
    with _program("neg", "float32", (2048, 2048)) as p, \
            p.load_method("forward", device="cuda") as f:
        for _ in range(3):
            with torch.cuda.stream(side):
                x = a @ a  # long enough to still run when f reads x
                x.mul_(0.5)
            (y,) = f(x)
            torch.cuda.synchronize()
            torch.testing.assert_close(torch.from_dlpack(y), -x, rtol=0, atol=0)


def test_torch_tensor_on_the_host_and_device_mixed():
    torch = _torch()
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.input("a", "float32", (4, 6)), m.input("b", "float32", (4, 6))))
    a, c = torch.randn(4, 6, device="cuda"), torch.randn(4, 6)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(a, c)  # one on the device, one copied in from the host
        torch.testing.assert_close(torch.from_dlpack(y).cpu(), a.cpu() + c, rtol=0, atol=0)


# ---- cupy -----------------------------------------------------------------------------------

def test_cupy_dlpack_in_and_out_without_copies():
    cp = _cupy()
    x = cp.asarray(np.random.default_rng(3).standard_normal((17, 9)).astype(np.float32))
    with _program("relu", "float32", (17, 9)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)
        c = cp.from_dlpack(y)
        assert c.data.ptr == _address(y)
        np.testing.assert_array_equal(cp.asnumpy(c), np.maximum(cp.asnumpy(x), 0))


def test_cupy_cuda_array_interface_in_and_out():
    cp = _cupy()
    x = cp.asarray(np.random.default_rng(4).standard_normal((6, 10)))
    with _program("neg", "float64", (6, 10)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(CudaArrayInterfaceOnly(x))
        c = cp.asarray(y)  # __cuda_array_interface__, no copy
        assert c.data.ptr == _address(y)
        np.testing.assert_array_equal(cp.asnumpy(c), -cp.asnumpy(x))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int16", "uint32", "uint64", "bool"])
def test_cupy_round_trip_keeps_every_bit(dtype):
    cp = _cupy()
    rng = np.random.default_rng(5)
    host = (rng.standard_normal((4, 33)) > 0 if dtype == "bool" else
            rng.standard_normal((4, 33)).astype(dtype) if dtype.startswith("float") else
            rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (4, 33), dtype=dtype,
                         endpoint=True))
    x = cp.asarray(host)
    with _program("copy", dtype, (4, 33)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)
        back = cp.asnumpy(cp.from_dlpack(y))
        assert back.dtype == host.dtype
        assert back.tobytes() == host.tobytes()


def test_cupy_strided_input_is_copied_on_the_device():
    cp = _cupy()
    base = cp.asarray(np.arange(300, dtype=np.float32).reshape(15, 20))
    x = base[1:12:2, ::3]
    with _program("neg", "float32", tuple(x.shape)) as p, \
            p.load_method("forward", device="cuda") as f:
        for arg in (x, CudaArrayInterfaceOnly(x)):
            (y,) = f(arg)
            np.testing.assert_array_equal(cp.asnumpy(cp.asarray(y)), -cp.asnumpy(x))


def test_torch_and_cupy_share_one_output():
    torch, cp = _torch(), _cupy()
    x = torch.randn(8, 8, device="cuda")
    with _program("relu", "float32", (8, 8)) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(x)
        t, c = torch.from_dlpack(y), cp.asarray(y)
        assert t.data_ptr() == c.data.ptr == _address(y)
        np.testing.assert_array_equal(t.cpu().numpy(), cp.asnumpy(c))
