"""DLPack and the array interfaces with numpy and hand-written producers: inputs bound without
copies, capsules consumed once, read-only flags honoured, deleters called; Tensor exports that
keep their memory alive until the consumer lets go; clear errors for devices, dtypes and byte
order, each naming the method and the input."""
from __future__ import annotations

import gc
import platform
import weakref

import pytest

np = pytest.importorskip("numpy")

import runtime_py as rt  # noqa: E402
from runtime_py import _capsule, _dlpack  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402

PYPY = platform.python_implementation() == "PyPy"
needs_export = pytest.mark.skipif(PYPY, reason="PyPy cannot make DLPack capsules (docs/python.md)")
NUMPY_VERSIONED = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1)


def collect() -> None:
    for _ in range(3):  # PyPy frees cpyext-visible objects a collection or two later
        gc.collect()


def double_method(dtype="float32", shape=(2, 3), in_place=False):
    """forward(x) = x + x; with in_place the method also writes x (add(x, x, out=x))."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", dtype, shape)
    if in_place:
        m.add(x, x, out=x)
        m.output(m.copy(x))
    else:
        m.output(m.add(x, x))
    program = rt.Program.load(b.to_bytes())
    return program.load_method()


class Producer:
    """An object offering only DLPack (no buffer, no array interface), like a foreign library."""

    def __init__(self, array, device=(1, 0), legacy=False):
        self.array, self.device, self.legacy = array, device, legacy
        self.calls = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        self.calls.append(kwargs)
        if self.legacy and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.array.__dlpack__(stream=stream, **kwargs)


# ---- inputs ---------------------------------------------------------------------------------

def test_producer_input_is_bound_without_a_copy():
    """A binding persists across executions: if the producer's memory is bound by pointer, a
    change made to it after set_input shows in the next result."""
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    producer = Producer(src)
    with double_method() as forward:
        forward.set_input(0, producer)
        forward.execute()
        np.testing.assert_array_equal(np.asarray(forward.get_outputs()[0]), src * 2)
        src += 10
        forward.execute()
        np.testing.assert_array_equal(np.asarray(forward.get_outputs()[0]), src * 2)
    assert producer.calls[0] == {"max_version": (1, 0)}


def test_legacy_producer_without_max_version_keyword():
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    producer = Producer(src, legacy=True)
    with double_method() as forward:
        (y,) = forward(producer)
    np.testing.assert_array_equal(np.asarray(y), src * 2)
    assert producer.calls == [{"max_version": (1, 0)}, {}]


def test_strided_capsule_input():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = base[::2, 1::2]  # (2, 3), non-contiguous
    with double_method() as forward:
        (y,) = forward(x.__dlpack__())
    np.testing.assert_array_equal(np.asarray(y), x * 2)


def test_capsule_is_consumed_once():
    src = np.ones((2, 3), np.float32)
    capsule = src.__dlpack__()
    with double_method() as forward:
        forward(capsule)
        assert _capsule.get_name(capsule) == b"used_dltensor"
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\): the "
                           r"DLPack capsule was already consumed \(it is named 'used_dltensor'\)"):
            forward(capsule)
        # The failed bind left the method usable.
        (y,) = forward(src)
        assert np.asarray(y).tolist() == [[2.0] * 3] * 2


def test_capsule_consumed_by_numpy_is_refused():
    capsule = np.ones((2, 3), np.float32).__dlpack__()

    class Holder:
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return (1, 0)

    np.from_dlpack(Holder())  # numpy renames it "used_dltensor" and owns it
    with double_method() as forward, pytest.raises(rt.InvalidArgument, match="already consumed"):
        forward(capsule)


def test_producer_kept_alive_while_bound_and_released_after():
    """The deleter runs when the binding goes: the producer's array lives exactly that long."""
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    ref = weakref.ref(src)
    with double_method() as forward:
        forward.set_input(0, src.__dlpack__())
        del src
        collect()
        assert ref() is not None  # the bound capsule holds it
        forward.execute()
        np.testing.assert_array_equal(np.asarray(forward.get_outputs()[0]),
                                      np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
        forward.set_input(0, np.zeros((2, 3), np.float32))
        collect()
        assert ref() is None  # deleter called: numpy let go of the array


def test_rejected_capsule_is_left_to_its_own_destructor():
    """A capsule refused before consumption keeps its name; its destructor frees it."""
    src = np.zeros((2, 3), np.complex64)
    ref = weakref.ref(src)
    capsule = src.__dlpack__()
    del src
    with double_method() as forward:
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): dtype complex64 "
                           r"\(DLPack code 5, bits 64, lanes 1\) is not supported"):
            forward(capsule)
    assert _capsule.get_name(capsule) == b"dltensor"
    del capsule
    collect()
    assert ref() is None


@pytest.mark.skipif(not NUMPY_VERSIONED, reason="numpy < 2.1 makes no versioned capsules")
def test_read_only_versioned_capsule():
    src = np.arange(3, dtype=np.float32)
    src.flags.writeable = False
    with double_method("float32", (3,), in_place=True) as forward:
        capsule = src.__dlpack__(max_version=(1, 0))
        assert _capsule.get_name(capsule) == b"dltensor_versioned"
        # Bound normally: the method writes a copy, never the caller's memory.
        forward.set_input(0, capsule)
        forward.execute()
        assert forward.get_outputs()[0].tolist() == [0.0, 2.0, 4.0]
        assert src.tolist() == [0.0, 1.0, 2.0]
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): the tensor is read-only "
                           r"\(the DLPack capsule is flagged read-only\); it cannot be bound "
                           r"with allow_mutate=True"):
            forward.set_input(0, src.__dlpack__(max_version=(1, 0)), allow_mutate=True)
        with pytest.raises(rt.InvalidState, match="not set"):
            forward.execute()
        assert src.tolist() == [0.0, 1.0, 2.0]


def test_allow_mutate_writes_the_callers_memory():
    src = np.arange(3, dtype=np.float32)
    with double_method("float32", (3,), in_place=True) as forward:
        forward.set_input(0, Producer(src), allow_mutate=True)
        forward.execute()
        assert forward.get_outputs()[0].tolist() == [0.0, 2.0, 4.0]
        assert src.tolist() == [0.0, 2.0, 4.0]  # zero copy: the method wrote into it
        ro = np.arange(3, dtype=np.float32)
        ro.flags.writeable = False
        with pytest.raises(rt.InvalidArgument, match=r"read-only \(read-only buffer\)"):
            forward.set_input(0, ro, allow_mutate=True)
        with pytest.raises(rt.InvalidArgument, match=r"read-only \(bytes are immutable\)"):
            forward.set_input(0, bytes(12), allow_mutate=True)


# ---- devices, dtypes, byte order --------------------------------------------------------------

class FakeCuda:
    """A CUDA array interface with a fake device pointer: it must never be dereferenced."""

    def __init__(self, version=3, stream=None):
        self.__cuda_array_interface__ = {
            "shape": (2, 3), "typestr": "<f4", "data": (0xDEAD0000, False), "strides": None,
            "version": version, **({"stream": stream} if version >= 3 else {})}


@pytest.mark.parametrize("version", [2, 3])
def test_cuda_array_interface_on_a_cpu_method_is_a_device_mismatch(version):
    with double_method() as forward:
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\): the "
                           r"tensor \(__cuda_array_interface__\) is on cuda:0, but the method "
                           r"runs on cpu"):
            forward(FakeCuda(version, stream=1))
        (y,) = forward(np.ones((2, 3), np.float32))  # still usable
        assert y.tolist() == [[2.0] * 3] * 2


@pytest.mark.parametrize("device,text", [((2, 1), "cuda:1, but the method runs on cpu"),
                                         ((10, 0), "rocm:0, a device runtime_py cannot read")])
def test_dlpack_device_mismatch_refused_before_export(device, text):
    producer = Producer(np.ones((2, 3), np.float32), device=device)
    with double_method() as forward, pytest.raises(rt.InvalidArgument, match=text):
        forward(producer)
    assert producer.calls == []  # refused from __dlpack_device__ alone


def test_cuda_host_memory_is_cpu_memory():
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    with double_method() as forward:
        (y,) = forward(Producer(src, device=(3, 0)))  # kDLCUDAHost: pinned host memory
    np.testing.assert_array_equal(np.asarray(y), src * 2)


def test_raw_pointer_on_cuda_is_a_device_mismatch():
    with double_method() as forward, pytest.raises(rt.InvalidArgument,
                                                   match=r"input 0 \('x'\): the tensor \(raw "
                                                   r"pointer\) is on cuda:0"):
        forward((0xDEAD0000, "float32", (2, 3), None, "cuda:0"))


def test_byte_order_and_unsupported_dtypes_name_the_input():
    with double_method() as forward:
        with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\): dtype "
                           r"'>f4' is not in native byte order"):
            forward(np.zeros((2, 3), ">f4"))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): unsupported dtype '<c8'"):
            forward(np.zeros((2, 3), np.complex64))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): unsupported dtype '\|O'"):
            forward(np.zeros((2, 3), object))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): dtype complex128"):
            forward(Producer(np.zeros((2, 3), np.complex128)))
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): has dtype float64, but "
                           r"the method expects float32"):
            forward(Producer(np.zeros((2, 3), np.float64)))


def test_producer_failure_names_the_input():
    class Broken:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export this one")

    with double_method() as forward, pytest.raises(
            rt.InvalidArgument, match=r"input 0 \('x'\): Broken.__dlpack__\(\) failed: cannot "
            r"export this one"):
        forward(Broken())


# ---- outputs --------------------------------------------------------------------------------

def address(tensor) -> int:
    return tensor.__array_interface__["data"][0]


def test_array_interface_is_zero_copy():
    with double_method() as forward:
        (y,) = forward(np.ones((2, 3), np.float32))
        a = np.asarray(y)
        assert a.ctypes.data == address(y)
        assert y.__dlpack_device__() == (1, 0)


@pytest.mark.skipif(not PYPY, reason="the PyPy limitation")
def test_pypy_refuses_to_export_dlpack_clearly():
    forward = double_method()
    (y,) = forward(np.ones((2, 3), np.float32))
    (view,) = forward.get_outputs(clone=False)
    for tensor in (y, view):
        with pytest.raises(BufferError, match="not possible on PyPy"):
            tensor.__dlpack__(max_version=(1, 0))
    assert _dlpack.live_exports() == 0
    np.testing.assert_array_equal(np.asarray(y), np.full((2, 3), 2, np.float32))
    forward.close()
    assert forward._doomed is None  # the failed exports hold nothing back


@needs_export
def test_numpy_from_dlpack_is_zero_copy_and_keeps_the_tensor_alive():
    with double_method() as forward:
        (y,) = forward(np.arange(6, dtype=np.float32).reshape(2, 3))
        a = np.from_dlpack(y)
        assert a.ctypes.data == address(y)
        np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
        ref = weakref.ref(y)
        del y
        collect()
        assert ref() is not None and _dlpack.live_exports() == 1
        np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
        del a
        collect()
        assert ref() is None and _dlpack.live_exports() == 0


@needs_export
def test_unconsumed_capsule_releases_the_tensor():
    with double_method() as forward:
        (y,) = forward(np.ones((2, 3), np.float32))
        for versioned in (None, (1, 0)):
            capsule = y.__dlpack__(max_version=versioned)
            assert _capsule.get_name(capsule) == (b"dltensor_versioned" if versioned
                                                  else b"dltensor")
            assert _dlpack.live_exports() == 1
            del capsule
            collect()
            assert _dlpack.live_exports() == 0


@needs_export
def test_versioned_capsule_fields():
    with double_method() as forward:
        forward(np.ones((2, 3), np.float32))
        (view,) = forward.get_outputs(clone=False)
        capsule = view.__dlpack__(max_version=(1, 0))
        managed = _dlpack.dl.cast("DLManagedTensorVersioned *",
                                  _capsule.get_pointer(capsule, b"dltensor_versioned"))
        t = managed.dl_tensor
        assert (managed.version.major, managed.version.minor) == (1, 0)
        assert managed.flags == _dlpack.FLAG_READ_ONLY  # output views are read-only
        assert (t.device.device_type, t.device.device_id, t.ndim) == (1, 0, 2)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)
        assert list(t.shape[0:2]) == [2, 3] and list(t.strides[0:2]) == [3, 1]
        assert int(_dlpack.dl.cast("uintptr_t", t.data)) == address(view)
        copied = view.__dlpack__(max_version=(1, 0), copy=True)
        managed = _dlpack.dl.cast("DLManagedTensorVersioned *",
                                  _capsule.get_pointer(copied, b"dltensor_versioned"))
        assert managed.flags == _dlpack.FLAG_IS_COPIED
        assert int(_dlpack.dl.cast("uintptr_t", managed.dl_tensor.data)) != address(view)
        with pytest.raises(BufferError, match="legacy"):
            view.__dlpack__()
        with pytest.raises(BufferError, match="to DLPack device cuda:0"):
            view.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
        with pytest.raises(BufferError, match="stream"):
            view.__dlpack__(max_version=(1, 0), stream=7)
        del capsule, copied
        collect()
        assert _dlpack.live_exports() == 0


@needs_export
def test_read_only_view_round_trips_as_read_only_input():
    """Our own versioned capsule of a read-only view feeds another method: bound normally, and
    refused for mutation."""
    with double_method() as forward, double_method(in_place=True) as writer:
        forward(np.ones((2, 3), np.float32))
        (view,) = forward.get_outputs(clone=False)
        (y,) = writer(view.__dlpack__(max_version=(1, 0)))
        assert y.tolist() == [[4.0] * 3] * 2 and view.tolist() == [[2.0] * 3] * 2
        with pytest.raises(rt.InvalidArgument, match="flagged read-only"):
            writer.set_input(0, view.__dlpack__(max_version=(1, 0)), allow_mutate=True)
        writer.set_input(0, np.zeros((2, 3), np.float32))
        collect()
        assert _dlpack.live_exports() == 0


@needs_export
def test_closing_the_method_waits_for_dlpack_consumers():
    forward = double_method()
    forward(np.arange(6, dtype=np.float32).reshape(2, 3))
    (view,) = forward.get_outputs(clone=False)
    a = np.from_dlpack(view)
    del view
    forward.close()
    assert forward.closed and forward._doomed is not None  # memory kept for the consumer
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
    del a
    collect()
    assert forward._doomed is None and _dlpack.live_exports() == 0


@needs_export
def test_export_import_cycles_do_not_leak():
    import os

    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc to read RSS")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    src = np.ones((64, 64), np.float32)
    with double_method("float32", (64, 64)) as forward:
        def cycle():
            (y,) = forward(src.__dlpack__())
            a = np.from_dlpack(y)
            assert a[0, 0] == 2.0

        for _ in range(500):
            cycle()
        collect()
        before = rss()
        for _ in range(3000):
            cycle()
        collect()
        grown = rss() - before
    assert _dlpack.live_exports() == 0
    # 3000 cycles each holding 16 KB of output would be ~48 MB if anything were kept. Under a
    # sanitizer freed memory is quarantined, so RSS says nothing there (test_leaks.py likewise).
    if not any(s in os.environ.get("LD_PRELOAD", "") for s in ("asan", "tsan")):
        assert grown < 4 << 20, f"RSS grew by {grown / (1 << 20):.1f} MB"


def fake_cuda_tensor() -> rt.Tensor:
    """A Tensor describing CUDA memory, as the CUDA backend hands out results (the fake pointer
    is never dereferenced)."""
    return rt.Tensor._view(0xDEAD0000, "float32", (2, 3), None, (2, 0), None, False)


def test_device_tensor_offers_only_device_protocols():
    t = fake_cuda_tensor()
    assert t.device == "cuda:0" and t.__dlpack_device__() == (2, 0)
    assert not hasattr(t, "__array_interface__")
    cai = t.__cuda_array_interface__
    assert cai["data"] == (0xDEAD0000, False) and cai["shape"] == (2, 3)
    assert cai["typestr"] == "<f4" and cai["stream"] is None and cai["version"] == 3
    with pytest.raises(rt.Unsupported, match="needs a CPU tensor; this one is on cuda:0"):
        np.asarray(t)
    with pytest.raises(BufferError, match="to DLPack device cpu"):
        t.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
    with double_method() as forward, pytest.raises(
            rt.InvalidArgument, match=r"input 0 \('x'\): the tensor \(a runtime_py Tensor\) is "
            r"on cuda:0, but the method runs on cpu"):
        forward(t)
    cpu = rt.Tensor.from_bytes(bytes(8), "float32", (2,))
    assert not hasattr(cpu, "__cuda_array_interface__")


@needs_export
def test_device_tensor_capsule_says_cuda():
    t = fake_cuda_tensor()
    capsule = t.__dlpack__(max_version=(1, 0), stream=1)
    managed = _dlpack.dl.cast("DLManagedTensorVersioned *",
                              _capsule.get_pointer(capsule, b"dltensor_versioned"))
    dev = managed.dl_tensor.device
    assert (dev.device_type, dev.device_id) == (2, 0)
    assert int(_dlpack.dl.cast("uintptr_t", managed.dl_tensor.data)) == 0xDEAD0000
    with double_method() as forward, pytest.raises(rt.InvalidArgument, match=r"\(DLPack\) is on "
                                                   r"cuda:0, but the method runs on cpu"):
        forward(capsule)
    assert _capsule.get_name(capsule) == b"dltensor_versioned"  # refused, not consumed
    del capsule
    collect()
    assert _dlpack.live_exports() == 0


@needs_export
def test_dlpack_of_a_closed_view_is_refused():
    forward = double_method()
    forward(np.ones((2, 3), np.float32))
    (view,) = forward.get_outputs(clone=False)
    forward.close()
    with pytest.raises(BufferError, match="closed method 'forward'"):
        view.__dlpack__(max_version=(1, 0))
    assert _dlpack.live_exports() == 0


@needs_export
def test_exports_released_from_many_threads():
    """Deleters may run on any thread; the registry and the method holds stay consistent."""
    from concurrent.futures import ThreadPoolExecutor

    def work(seed):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((2, 3)).astype(np.float32)
        with double_method() as forward:
            for _ in range(50):
                forward(x)
                (view,) = forward.get_outputs(clone=False)
                a = np.from_dlpack(view)
                np.testing.assert_array_equal(a, x * 2)
                del a, view
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(8)))
    collect()
    assert _dlpack.live_exports() == 0


# ---- property: any layout numpy can export, any dtype --------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests import strategies as S  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(S.ANY), shape=S.shapes(0, 4, max_side=4))
def test_any_layout_through_a_capsule(data, dtype, shape):
    """Strided, reversed, transposed and zero-stride numpy views, handed over as DLPack capsules,
    reach the method with their values intact; the result comes back through DLPack too."""
    x = data.draw(S.inputs(dtype, shape))
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.copy(m.input("x", dtype, shape)))
    with rt.Program.load(b.to_bytes()) as program, program.load_method() as forward:
        if not NUMPY_VERSIONED and not x.flags.writeable:  # broadcast views are read-only
            with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\): Producer.__dlpack__"
                               r"\(\) failed: Cannot export readonly array"):
                forward(Producer(x))  # older numpy has only legacy capsules: it refuses
            return
        (y,) = forward(Producer(x))
        np.testing.assert_array_equal(np.asarray(y), x)
        if not PYPY:
            np.testing.assert_array_equal(np.from_dlpack(y), x)
    collect()
    assert _dlpack.live_exports() == 0
