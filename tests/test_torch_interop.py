"""torch <-> runtime_py through DLPack: torch tensors as inputs without copies (contiguous or
strided, every dtype the runtime shares with torch), `torch.from_dlpack(output)` without a copy
and with the right lifetime, and clear errors. The CUDA pairings (torch CUDA tensors, cupy) run
where a GPU is present and skip elsewhere."""
from __future__ import annotations

import gc
import platform
import weakref

import pytest

torch = pytest.importorskip("torch")

import runtime_py as rt  # noqa: E402
from runtime_py import _capsule, _dlpack  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402

pytestmark = pytest.mark.skipif(platform.python_implementation() == "PyPy",
                                reason="torch is CPython-only")

DTYPES = {  # runtime dtype -> torch dtype
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
}


def method(dtype="float32", shape=(2, 3), body="add", device="cpu"):
    """forward(x): x + x ("add"), a copy of x ("copy"), x cast to float64 ("cast"), or x += x
    in place then a copy ("in_place")."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", dtype, shape)
    if body == "add":
        m.output(m.add(x, x))
    elif body == "copy":
        m.output(m.copy(x))
    elif body == "cast":
        m.output(m.cast(x, "float64"))
    else:
        m.add(x, x, out=x)
        m.output(m.copy(x))
    return rt.Program.load(b.to_bytes()).load_method(device=device)


def collect():
    for _ in range(2):
        gc.collect()


def address(t: rt.Tensor) -> int:
    return t.__array_interface__["data"][0]


# ---- torch -> runtime -------------------------------------------------------------------------

def test_torch_input_is_bound_without_a_copy():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with method() as forward:
        forward.set_input(0, x)
        forward.execute()
        assert torch.equal(torch.from_dlpack(forward.get_outputs()[0]), x * 2)
        x.add_(100)  # the binding is x's own memory: the next execute sees this
        forward.execute()
        assert torch.equal(torch.from_dlpack(forward.get_outputs()[0]), x * 2)


def test_allow_mutate_writes_into_the_torch_tensor():
    x = torch.tensor([1.0, 2.0, 3.0])
    with method("float32", (3,), "in_place") as forward:
        (y,) = forward(x)  # default: the method writes a copy
        assert y.tolist() == [2.0, 4.0, 6.0] and x.tolist() == [1.0, 2.0, 3.0]
        forward.set_input(0, x, allow_mutate=True)
        forward.execute()
        assert x.tolist() == [2.0, 4.0, 6.0]  # written in place: x was bound, not copied


@pytest.mark.parametrize("make", [
    lambda base: base[:3, :2].t(),              # transposed
    lambda base: base[:2, ::2],                 # step slice
    lambda base: base[1:3, 1:4],                # offset into the storage
    lambda base: base[:1, :3].expand(2, 3),     # zero strides
    lambda base: base[::2, ::2],                # steps in both dimensions
], ids=["transposed", "step", "offset", "expanded", "steps"])
def test_strided_torch_inputs(make):
    base = torch.arange(-12, 12, dtype=torch.float32).reshape(4, 6)
    x = make(base)
    assert x.shape == (2, 3) and not x.is_contiguous()
    with method() as forward:
        (y,) = forward(x)
    assert torch.equal(torch.from_dlpack(y), x + x)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_torch_dtypes(dtype):
    tdtype = DTYPES[dtype]
    if dtype == "bool":
        x = torch.tensor([[True, False, True], [False, False, True]])
    elif tdtype.is_floating_point:
        x = (torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4 - 0.5).to(tdtype)
    else:
        x = torch.arange(6, dtype=tdtype).reshape(2, 3)
    with method(dtype, body="copy") as forward:
        (y,) = forward(x)
    out = torch.from_dlpack(y)
    assert out.dtype == tdtype and torch.equal(out, x)
    with method(dtype, body="cast") as forward:  # the runtime reads the values, not just bytes
        (y,) = forward(x)
    assert torch.equal(torch.from_dlpack(y), x.to(torch.float64))
    if dtype not in ("bool", "float16", "bfloat16"):  # add takes float32/64 and integers
        with method(dtype, body="add") as forward:
            (y,) = forward(x)
        assert torch.equal(torch.from_dlpack(y), x + x)


def test_torch_capsule_input_and_consumed_capsule():
    x = torch.ones(2, 3)
    capsule = torch.utils.dlpack.to_dlpack(x)
    with method() as forward:
        (y,) = forward(capsule)
        assert y.tolist() == [[2.0] * 3] * 2
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\): the "
                           r"DLPack capsule was already consumed"):
            forward(capsule)


def test_torch_input_lifetime():
    """The bound torch tensor lives while bound; rebinding lets torch free it."""
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    ref = weakref.ref(x)
    with method() as forward:
        forward.set_input(0, x)
        del x
        collect()
        assert ref() is not None
        forward.execute()
        assert forward.get_outputs()[0].tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
        forward.set_input(0, torch.zeros(2, 3))
        collect()
        assert ref() is None


def test_torch_errors_name_the_input():
    with method() as forward:
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\): dtype "
                           r"complex64 \(DLPack code 5, bits 64, lanes 1\) is not supported"):
            forward(torch.zeros(2, 3, dtype=torch.complex64))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): has dtype float64, but "
                           r"the method expects float32"):
            forward(torch.zeros(2, 3, dtype=torch.float64))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): Tensor.__dlpack__\(\) "
                           r"failed: .*grad"):
            forward(torch.zeros(2, 3, requires_grad=True))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): has shape \[3, 2\]"):
            forward(torch.zeros(3, 2))
        (y,) = forward(torch.ones(2, 3))  # still usable
        assert y.tolist() == [[2.0] * 3] * 2


# ---- runtime -> torch -------------------------------------------------------------------------

@pytest.mark.parametrize("clone", [True, False])
def test_torch_from_dlpack_output_is_zero_copy(clone):
    x = torch.randn(2, 3)
    with method() as forward:
        forward(x)
        (y,) = forward.get_outputs(clone=clone)
        out = torch.from_dlpack(y)
        assert out.data_ptr() == address(y)
        assert torch.equal(out, x + x)
        assert _dlpack.live_exports() == 1
        del out
        collect()
        assert _dlpack.live_exports() == 0


def test_torch_keeps_the_output_alive():
    x = torch.randn(2, 3)
    with method() as forward:
        (y,) = forward(x)
        ref = weakref.ref(y)
        out = torch.from_dlpack(y)
        del y
        collect()
        assert ref() is not None  # held by the capsule torch consumed
        forward(torch.zeros(2, 3))  # a new result elsewhere does not disturb it
        assert torch.equal(out, x + x)
        del out
        collect()
        assert ref() is None and _dlpack.live_exports() == 0


def test_torch_view_survives_method_close():
    x = torch.randn(2, 3)
    forward = method()
    forward(x)
    (view,) = forward.get_outputs(clone=False)
    out = torch.from_dlpack(view)
    del view
    forward.close()
    assert torch.equal(out, x + x)  # the method's memory waits for torch
    del out
    collect()
    assert forward._doomed is None and _dlpack.live_exports() == 0


def test_runtime_output_feeds_torch_and_back():
    """A chain: torch -> runtime -> torch -> runtime, checked against torch alone."""
    x = torch.randn(2, 3)
    with method() as forward:
        (y,) = forward(x)
        z = torch.from_dlpack(y).relu()
        (w,) = forward(z)
    assert torch.allclose(torch.from_dlpack(w), (x + x).relu() * 2)


def test_legacy_capsule_via_to_dlpack():
    with method() as forward:
        (y,) = forward(torch.ones(2, 3))
        capsule = y.__dlpack__()  # no max_version: the legacy capsule
        assert _capsule.get_name(capsule) == b"dltensor"
        out = torch.utils.dlpack.from_dlpack(capsule)
        assert out.data_ptr() == address(y) and torch.equal(out, torch.full((2, 3), 2.0))


# ---- GPU pairings (skip without a GPU) ----------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_cuda_backend = pytest.mark.skipif(
    not torch.cuda.is_available() or not rt.backend_available("cuda"),
    reason="needs a CUDA GPU and libruntime's CUDA backend")


@needs_cuda
def test_torch_cuda_tensor_on_a_cpu_method_is_a_device_mismatch():
    with method() as forward:
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\): the "
                           r"tensor \(DLPack\) is on cuda:0, but the method runs on cpu"):
            forward(torch.ones(2, 3, device="cuda"))


@needs_cuda_backend
def test_torch_cuda_round_trip_without_copies():
    x = torch.randn(2, 3, device="cuda")
    with method(device="cuda") as forward:
        forward.set_input(0, x)
        forward.execute()
        (y,) = forward.get_outputs()
        assert y.device == "cuda:0"
        out = torch.from_dlpack(y)
        assert out.device.type == "cuda" and out.data_ptr() == y.__cuda_array_interface__["data"][0]
        torch.testing.assert_close(out, x + x)
        x.add_(1)  # bound by pointer: the next execute sees it
        forward.execute()
        torch.testing.assert_close(torch.from_dlpack(forward.get_outputs()[0]), x + x)
        with pytest.raises(AttributeError):
            y.__array_interface__


@needs_cuda_backend
def test_cupy_round_trip():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    with method(device="cuda") as forward:
        (y,) = forward(x)
        out = cupy.asarray(y)  # through __cuda_array_interface__
        assert out.data.ptr == y.__cuda_array_interface__["data"][0]
        cupy.testing.assert_array_equal(out, x * 2)
        cupy.testing.assert_array_equal(cupy.from_dlpack(y), x * 2)
