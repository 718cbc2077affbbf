"""The Python layer: lifecycle (close / with / gc), errors, numpy-free inputs, Tensor, views."""
from __future__ import annotations

import array
import gc
import os
import pickle
import platform
import struct
import subprocess
import sys
import threading
import weakref

import pytest

import runtime_py as rt
from runtime_py import dtypes
from runtime_py._ffi import ffi
from runtime_py.compiler import ProgramBuilder
from runtime_py.errors import error_class, raise_status

pytestmark = pytest.mark.core  # the quick subset every interpreter runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def double_program(shape=(2, 3), dtype="float32") -> bytes:
    """forward(x) = x + x."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", dtype, shape)
    m.output(m.add(x, x), "y")
    return b.to_bytes()


def state_program() -> bytes:
    """forward(x) = x + counter; counter += 1 (an attribute), and a scalar-input method."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (3,))
    counter = m.attribute("counter", "float32", (3,))
    y = m.add(x, counter)
    m.add(counter, m.constant(array.array("f", [1, 1, 1]), "float32", (3,)), out=counter)
    m.output(y, "y")
    s = b.method("scale")
    v = s.input("v", "float64", (2,))
    flag = s.input_scalar("twice", "bool")
    out = s.tensor("float64", (2,))
    skip = s.label()
    s.copy(v, out=out)
    s.jump_if_not(flag, skip)
    s.add(v, v, out=out)
    s.place(skip)
    s.output(out, "out")
    return b.to_bytes()


@pytest.fixture
def program():
    with rt.Program.load(double_program()) as p:
        yield p


@pytest.fixture
def forward(program):
    with program.load_method("forward") as m:
        yield m


def floats(n, start=0.0):
    return array.array("f", [start + i for i in range(n)])


# ---- loading ---------------------------------------------------------------------------


def test_load_file_and_pathlike(tmp_path):
    path = tmp_path / "double.rtp"
    path.write_bytes(double_program())
    for source in (str(path), path):
        with rt.Program.load(source) as p:
            assert p.method_names == ("forward",)
            assert not p.borrowed


def aligned_buffer(data: bytes, offset: int = 0) -> memoryview:
    raw = bytearray(len(data) + 128)
    address = int(ffi.cast("uintptr_t", ffi.from_buffer(raw)))
    start = (-address) % 64 + offset
    raw[start:start + len(data)] = data
    return memoryview(raw)[start:start + len(data)]


def test_load_buffer_borrows_only_when_safe():
    data = double_program()
    aligned = aligned_buffer(data)
    with rt.Program.load(aligned) as p:  # mutable: copied by default
        assert not p.borrowed
    with rt.Program.load(aligned, copy=False) as p:
        assert p.borrowed
        assert p.load_method()(floats(6))[0].tolist() == [[0, 2, 4], [6, 8, 10]]
    with rt.Program.load(bytearray(data), copy=True) as p:
        assert not p.borrowed
    with pytest.raises(rt.InvalidArgument, match="64-byte aligned"):
        rt.Program.load(aligned_buffer(data, 8), copy=False)


def test_borrowed_buffer_outlives_closed_program():
    p = rt.Program.load(aligned_buffer(double_program()), copy=False)
    method = p.load_method()
    p.close()
    del p
    gc.collect()
    assert method(floats(6))[0].tolist() == [[0, 2, 4], [6, 8, 10]]
    method.close()


def test_method_meta(program):
    meta = program.method_meta("forward")
    assert meta.name == "forward" and meta.num_inputs == 1 and meta.num_outputs == 1
    x = meta.input_tensor_meta(0)
    assert (x.name, x.kind, x.dtype, x.shape, x.dynamic) == ("x", "tensor", "float32", (2, 3), False)
    assert x.nbytes == 24 and x.dim_order == (0, 1)
    assert meta.output_tensor_meta(0).name == "y"
    assert repr(x) == "TensorInfo(name='x', shape=(2, 3), dtype='float32', dynamic=False)"
    assert repr(meta).startswith("MethodMeta(name='forward', inputs=[TensorInfo(name='x'")
    assert meta.num_instructions == 1 and meta.planned_bytes >= 0
    assert program.method_meta("forward") is meta  # cached; programs are immutable


def test_scalar_input_meta():
    with rt.Program.load(state_program()) as p:
        flag = p.method_meta("scale").inputs[1]
        assert (flag.kind, flag.dtype, flag.shape) == ("bool", None, ())
        assert repr(flag) == "TensorInfo(name='twice', kind='bool')"
        assert [a.name for a in p.method_meta("forward").attributes] == ["counter"]


# ---- errors ----------------------------------------------------------------------------


def test_error_types_and_messages(program, tmp_path):
    with pytest.raises(rt.NotFound) as info:
        program.method_meta("nope")
    assert isinstance(info.value, KeyError) and info.value.code == 4
    assert str(info.value).startswith("the program has no method 'nope'") or "'nope'" in str(info.value)
    assert not str(info.value).startswith('"')  # KeyError would repr-quote it
    with pytest.raises(rt.InvalidProgram) as info:
        rt.Program.load(b"\0" * 256)
    assert isinstance(info.value, ValueError) and "offset" in str(info.value)
    with pytest.raises(rt.RuntimeIOError) as info:
        rt.Program.load(str(tmp_path / "missing.rtp"))
    assert isinstance(info.value, OSError) and "missing.rtp" in str(info.value)
    with pytest.raises(rt.InvalidArgument):
        rt.Program.load(12345)


def test_execute_without_inputs_is_invalid_state(forward):
    with pytest.raises(rt.InvalidState, match="method 'forward': input 0"):
        forward.execute()
    assert isinstance(rt.InvalidState("x"), RuntimeError)


def test_library_errors_name_method_and_input(forward):
    wrong_dtype = memoryview(array.array("d", range(6))).cast("B").cast("d", (2, 3))
    with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0.*float64"):
        forward(wrong_dtype)
    forward(floats(6))  # the failed bind left the method usable


def test_python_side_input_errors(forward):
    with pytest.raises(rt.InvalidArgument, match=r"method 'forward': input 0 \('x'\).*shape \(2, 3\)"):
        forward(floats(5))
    with pytest.raises(rt.InvalidArgument, match="takes 1 inputs, got 2"):
        forward(floats(6), floats(6))
    with pytest.raises(rt.InvalidArgument, match="cannot use a object"):
        forward(object())
    with pytest.raises(rt.InvalidArgument, match="has no input 3"):
        forward.set_input(3, floats(6))


def test_scalar_input_errors_and_values():
    with rt.Program.load(state_program()) as p, p.load_method("scale") as scale:
        v = array.array("d", [1.5, 2.0])
        assert scale(v, True)[0].tolist() == [3.0, 4.0]
        assert scale(v, False)[0].tolist() == [1.5, 2.0]
        assert scale(v, 1)[0].tolist() == [3.0, 4.0]
        with pytest.raises(rt.InvalidArgument, match="input 1 \\('twice'\\) expects a bool"):
            scale(v, 2)
        with pytest.raises(rt.InvalidArgument, match="expects a bool"):
            scale(v, "yes")


def test_every_status_maps_to_its_class():
    expected = {1: (rt.InvalidArgument, ValueError), 2: (rt.InvalidState, RuntimeError),
                3: (rt.InvalidProgram, ValueError), 4: (rt.NotFound, KeyError),
                5: (rt.Unsupported, NotImplementedError), 6: (rt.OutOfMemory, MemoryError),
                7: (rt.RuntimeIOError, OSError), 8: (rt.Internal, RuntimeError)}
    for code, (cls, builtin) in expected.items():
        assert error_class(code) is cls and issubclass(cls, builtin) and issubclass(cls, rt.Error)
        with pytest.raises(cls) as info:
            raise_status(code)
        assert info.value.code == code and info.value.message  # status text as fallback
    assert error_class(99) is rt.Error


def test_errors_pickle():
    err = pickle.loads(pickle.dumps(rt.NotFound("no method 'x'", 4)))
    assert type(err) is rt.NotFound and err.code == 4 and str(err) == "no method 'x'"


def test_errors_are_per_thread(program):
    failures = []

    def worker(i):
        with program.load_method() as m:
            for _ in range(50):
                try:
                    m(floats(i + 1))
                except rt.InvalidArgument as exc:
                    if f"({i + 1},)" not in str(exc):
                        failures.append(str(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


# ---- lifecycle -------------------------------------------------------------------------


def test_close_is_idempotent_and_closed_objects_refuse(program):
    method = program.load_method()
    with method as m:
        assert m is method and not m.closed
    assert method.closed
    method.close()
    for call in (method.execute, method.get_outputs, lambda: method(floats(6)),
                 lambda: method.set_inputs(floats(6)), lambda: method.get_attribute("a"),
                 method.profile_events):
        with pytest.raises(rt.ClosedError, match="operation on closed method 'forward'"):
            call()
    with pytest.raises(rt.ClosedError):
        with method:
            pass
    assert "closed" in repr(method)
    program.close()
    program.close()
    assert program.closed
    with pytest.raises(rt.ClosedError, match="closed program"):
        program.load_method()
    with pytest.raises(ValueError):
        program.method_names
    assert repr(program) == "Program(closed)"


def test_method_outlives_its_program():
    p = rt.Program.load(double_program())
    method = p.load_method()
    p.close()
    assert method(floats(6))[0].tolist() == [[0, 2, 4], [6, 8, 10]]
    assert method.program is p


def test_garbage_collection_releases_handles():
    p = rt.Program.load(double_program())
    m = p.load_method()
    out = m(floats(6))[0]
    refs = [weakref.ref(p), weakref.ref(m)]
    del p, m
    gc.collect()
    assert all(r() is None for r in refs)
    assert out.tolist() == [[0, 2, 4], [6, 8, 10]]  # a clone owns its bytes


def test_view_keeps_method_alive_and_dies_with_close():
    p = rt.Program.load(double_program())
    m = p.load_method(clone_outputs=False)
    view = m(floats(6))[0]
    ref = weakref.ref(m)
    del m, p
    gc.collect()
    assert ref() is not None and view.tolist() == [[0, 2, 4], [6, 8, 10]]
    ref().close()
    with pytest.raises(rt.ClosedError):
        view.tolist()
    assert repr(view) == "Tensor(shape=(2, 3), dtype='float32', device='cpu')"


def test_bound_inputs_stay_referenced(forward):
    data = floats(6)
    forward.set_inputs(data)
    ref = weakref.ref(data)
    del data
    gc.collect()
    # C may read it until the input is set again (PyPy binds an array.array as a copy, which
    # is what stays referenced there).
    from runtime_py import _inputs
    assert ref() is not None or _inputs._COPY_RESIZABLE
    forward.execute()
    assert forward.get_outputs()[0].tolist() == [[0, 2, 4], [6, 8, 10]]
    forward.set_inputs(floats(6, 1.0))
    gc.collect()
    assert ref() is None  # released once rebound


# ---- inputs without numpy --------------------------------------------------------------

EXPECTED = [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


@pytest.mark.parametrize("make", [
    lambda: floats(6),                                              # flat array.array
    lambda: bytearray(floats(6).tobytes()),                         # raw bytes, reshaped
    lambda: floats(6).tobytes(),                                    # read-only bytes
    lambda: memoryview(floats(6)),                                  # 1-d memoryview
    lambda: memoryview(floats(6).tobytes()).cast("f", (2, 3)),      # 2-d memoryview
    lambda: memoryview(array.array("f", [0, 9, 1, 9, 2, 9, 3, 9, 4, 9, 5, 9]))[::2],  # strided
    lambda: [[0, 1, 2], [3, 4, 5]],                                 # nested lists
    lambda: ((0.0, 1.0, 2.0), (3.0, 4.0, 5.0)),                     # nested tuples
])
def test_numpy_free_inputs(forward, make):
    (y,) = forward(make())
    assert y.tolist() == EXPECTED


def test_raw_pointer_tuple(forward):
    data = floats(6)
    pointer = int(ffi.cast("uintptr_t", ffi.from_buffer(data)))
    assert forward((pointer, "float32", (2, 3), None))[0].tolist() == EXPECTED
    transposed = array.array("f", [0, 3, 1, 4, 2, 5])  # column-major storage
    pointer = int(ffi.cast("uintptr_t", ffi.from_buffer(transposed)))
    assert forward((pointer, "float32", (2, 3), (1, 2), "cpu"))[0].tolist() == EXPECTED


def test_tensor_output_feeds_input(forward):
    (y,) = forward(floats(6))
    (z,) = forward(y)
    assert z.tolist() == [[0, 4, 8], [12, 16, 20]]


def test_python_scalar_for_tensor_input():
    with rt.Program.load(double_program(shape=())) as p, p.load_method() as m:
        assert m(1.5)[0].tolist() == 3.0
    with rt.Program.load(double_program(shape=(1,), dtype="int32")) as p, p.load_method() as m:
        assert m(7)[0].tolist() == [14]


def test_no_numpy_import():
    code = (
        "import sys, array, runtime_py as rt\n"
        "from runtime_py.compiler import ProgramBuilder\n"
        "b = ProgramBuilder(); m = b.method('forward'); x = m.input('x', 'float32', (2, 3))\n"
        "m.output(m.add(x, x))\n"
        "with rt.Program.load(b.to_bytes()) as p, p.load_method() as f:\n"
        "    (y,) = f(array.array('f', range(6)))\n"
        "    assert y.tolist() == [[0, 2, 4], [6, 8, 10]], y\n"
        "    repr(y), y.memoryview(), rt.registered_ops()\n"
        "assert 'numpy' not in sys.modules\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


# ---- Tensor --------------------------------------------------------------------------


def test_tensor_properties(forward):
    (y,) = forward(floats(6))
    assert y.shape == (2, 3) and y.dtype == "float32" and y.strides == (3, 1)
    assert y.device == "cpu" and y.nbytes == 24 and y.ndim == 2 and len(y) == 2
    assert y.size == 6 and y.itemsize == 4 and not y.is_view and y.is_contiguous
    iface = y.__array_interface__
    assert iface["version"] == 3 and iface["typestr"] == "<f4" and iface["shape"] == (2, 3)
    assert iface["strides"] is None and iface["data"][1] is False
    mv = y.memoryview()
    assert mv.format == "f" and mv.shape == (2, 3) and mv.tolist() == EXPECTED
    assert y.tobytes() == struct.pack("6f", *[0, 2, 4, 6, 8, 10])
    assert repr(y) == ("Tensor(shape=(2, 3), dtype='float32', device='cpu', "
                       "data=[[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]])")


def test_tensor_repr_truncates():
    with rt.Program.load(double_program(shape=(4, 5), dtype="int64")) as p, p.load_method() as m:
        (y,) = m(array.array("q", range(20)))
        assert repr(y).endswith("data=[0, 2, 4, 6, 8, 10, 12, 14, ...])")
        assert y.memoryview().format == "q" and y.tolist()[3] == [30, 32, 34, 36, 38]


def test_zero_d_and_empty_tensors():
    with rt.Program.load(double_program(shape=())) as p, p.load_method() as m:
        (y,) = m(array.array("f", [2.0]))
        assert y.shape == () and y.tolist() == 4.0 and y.item() == 4.0
        if platform.python_implementation() == "PyPy":  # PyPy aborts on a 0-d tolist()
            assert y.memoryview().shape == (1,) and y.memoryview().tolist() == [4.0]
        else:
            assert y.memoryview().shape == () and y.memoryview().tolist() == 4.0
        with pytest.raises(TypeError):
            len(y)
    with rt.Program.load(double_program(shape=(2, 0))) as p, p.load_method() as m:
        (y,) = m(bytearray())
        assert y.shape == (2, 0) and y.nbytes == 0 and y.tolist() == [[], []]
        assert len(y.memoryview()) == 0


@pytest.mark.parametrize("dtype,values", [
    ("float16", [0.5, -1.0, 2.0]), ("float64", [0.25, 1e300, -3.0]), ("int8", [-3, 1, 50]),
    ("uint16", [0, 1000, 30000]), ("int32", [-7, 0, 2**20]), ("bool", [True, False, True]),
])
def test_dtypes_round_trip(dtype, values):
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.copy(m.input("x", dtype, (3,))))
    with rt.Program.load(b.to_bytes()) as p, p.load_method() as m:
        m.set_inputs(values)
        m.execute()
        (y,) = m.get_outputs()
        assert y.dtype == dtype and y.tolist() == values
        assert y.__array_interface__["typestr"] == dtypes.typestr(dtype)


def test_views_change_after_execute_clones_do_not(program):
    with program.load_method(clone_outputs=False) as m:
        view = m(floats(6))[0]
        clone = m.get_outputs(clone=True)[0]
        assert view.is_view and view.readonly and not clone.is_view
        assert view.tolist() == clone.tolist() == EXPECTED
        m(floats(6, 1.0))
        assert view.tolist() == [[2, 4, 6], [8, 10, 12]]
        assert clone.tolist() == EXPECTED
        assert view.copy().tolist() == view.tolist()


def test_attribute_view_is_writable_state():
    with rt.Program.load(state_program()) as p, p.load_method() as m:
        counter = m.get_attribute("counter")
        assert not counter.readonly and counter.tolist() == [0, 0, 0]
        assert m(floats(3))[0].tolist() == [0, 1, 2]
        assert counter.tolist() == [1, 1, 1]
        counter.memoryview()[1] = 10.0
        assert m(floats(3))[0].tolist() == [1, 11, 3]
        with pytest.raises(rt.NotFound, match="nope"):
            m.get_attribute("nope")


def test_profile_events():
    with rt.Program.load(double_program()) as p:
        with p.load_method(profile=True) as m:
            m(floats(6))
            (event,) = m.profile_events()
            assert event.op_name == "add" and event.instruction == 0
            assert event.end_ns >= event.start_ns
            op_name, instruction, start, end = event
        with p.load_method() as m, pytest.raises(rt.InvalidState, match="profile=True"):
            m.profile_events()


def test_numpy_interop():
    np = pytest.importorskip("numpy")
    with rt.Program.load(double_program()) as p, p.load_method() as m:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        (y,) = m(x)
        arr = np.asarray(y)
        assert arr.dtype == np.float32 and arr.tolist() == EXPECTED and arr.base is y
        assert np.array(y, dtype=np.float64).dtype == np.float64
        assert y.numpy().tolist() == EXPECTED
        assert m(x.T.copy().T)[0].tolist() == EXPECTED          # column-major
        assert m(np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2])[0].tolist() == \
            [[0, 4, 8], [12, 16, 20]]                              # strided


# ---- Module and globals ----------------------------------------------------------------


def test_module(tmp_path):
    path = tmp_path / "double.rtp"
    path.write_bytes(double_program())
    with rt.load(str(path), clone_outputs=False) as module:
        assert module.method_names == ("forward",)
        assert module.method_meta("forward").num_inputs == 1
        (y,) = module.forward(floats(6))
        assert y.is_view and y.tolist() == EXPECTED
        assert module.run_method("forward", [floats(6)])[0].tolist() == EXPECTED
        assert module.load_method() is module.load_method()
    assert module.closed
    with pytest.raises(rt.ClosedError):
        module.forward(floats(6))
    with pytest.raises(TypeError, match="unknown method option"):
        rt.load(str(path), colne_outputs=True)


def test_globals():
    ops = rt.registered_ops()
    assert "add" in ops and all(isinstance(name, str) for name in ops)
    assert rt.__version__.count(".") == 2
    before = rt.get_num_threads()
    rt.set_num_threads(2)
    assert rt.get_num_threads() == 2
    rt.set_num_threads(0)
    assert rt.get_num_threads() >= 1 and before >= 1
    assert rt.backend_available("cpu")
    assert rt.ProgramBuilder is ProgramBuilder
    assert set(rt.__all__) <= set(dir(rt)) | {"ProgramBuilder", "__version__"}


def test_dtype_spellings():
    assert dtypes.normalize("<f4") == "float32" and dtypes.normalize(float) == "float64"
    assert dtypes.normalize(bool) == "bool" and dtypes.normalize("|b1") == "bool"
    assert dtypes.from_format("l") == "int64" and dtypes.from_format("<e") == "float16"
    assert dtypes.from_dlpack(4, 16) == "bfloat16" and dtypes.typestr("bfloat16") == "<V2"
    assert dtypes.itemsize("uint64") == 8
    with pytest.raises(rt.InvalidArgument):
        dtypes.normalize("complex64")


# ---- loading the library, logging, threads ---------------------------------------------


def test_library_override_and_failures_are_gathered(monkeypatch, tmp_path):
    from runtime_py import _ffi

    monkeypatch.setattr(_ffi, "_lib", None)
    monkeypatch.setenv("RUNTIME_PY_LIBRARY", str(tmp_path / "nope.so"))
    with pytest.raises(OSError, match="RUNTIME_PY_LIBRARY") as info:
        _ffi.get_lib()
    assert "nope.so" in str(info.value)


def test_wrong_abi_version_is_refused(monkeypatch):
    from runtime_py import _ffi

    _ffi.get_lib()
    path = _ffi.library_path()
    monkeypatch.setattr(_ffi, "ABI_VERSION", 999)
    actual = int(_ffi.get_lib().rt_abi_version())
    with pytest.raises(OSError, match=f"ABI version is {actual}, but this runtime_py knows ABI "
                                      f"version 999"):
        _ffi._open(path)


def test_log_messages_reach_logging(caplog):
    from runtime_py import _ffi

    logger = "runtime_py"
    with caplog.at_level("DEBUG", logger=logger):
        _ffi.install_log_callback()
        with rt.Program.load(double_program()) as p, p.load_method():
            pass
    _ffi.install_log_callback()  # back to the restored level
    assert any(r.name == logger and "forward" in r.getMessage() for r in caplog.records)


def test_second_thread_gets_invalid_state(forward):
    forward._busy.acquire()  # as if another thread were inside execute()
    try:
        with pytest.raises(rt.InvalidState, match="in use by another thread"):
            forward(floats(6))
        with pytest.raises(rt.InvalidState):
            forward.close()
    finally:
        forward._busy.release()
    assert forward(floats(6))[0].tolist() == EXPECTED


def test_methods_run_concurrently_in_threads(program):
    results = []

    def worker(start):
        with program.load_method() as m:
            for _ in range(100):
                (y,) = m(floats(6, start))
            results.append(y.tolist()[0][0] == 2 * start)

    threads = [threading.Thread(target=worker, args=(float(i),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


def test_numpy_bytes_are_not_reinterpreted(forward):
    np = pytest.importorskip("numpy")
    with pytest.raises(rt.InvalidArgument, match="input 0"):
        forward(np.zeros(24, np.uint8))  # same byte count as float32 (2, 3), but typed
    assert forward(np.zeros(6, np.float32))[0].tolist() == [[0, 0, 0], [0, 0, 0]]


def test_binding_like_arrays_in_a_loop_reads_each_one():
    """The repeated-array fast path of set_input: each new array's contents are used, and a
    change of layout, dtype or writability goes through the full checks again."""
    np = pytest.importorskip("numpy")
    from tests.programs import add_program

    with rt.Program.load(add_program((3,))) as program, program.load_method("forward") as m:
        b = np.ones(3, np.float32)
        for i in range(4):
            a = np.arange(3, dtype=np.float32) * (i + 1)
            assert np.asarray(m(a, b)[0]).tolist() == (a + b).tolist()
        strided = np.arange(6, dtype=np.float32)[::2]
        assert np.asarray(m(strided, b)[0]).tolist() == (strided + b).tolist()
        m.set_input(0, a, allow_mutate=True)
        frozen = a.copy()
        frozen.flags.writeable = False
        with pytest.raises(rt.InvalidArgument, match="read-only"):
            m.set_input(0, frozen, allow_mutate=True)
        with pytest.raises(rt.InvalidArgument, match="float32"):
            m(np.ones(3), b)
        assert np.asarray(m(a, b)[0]).tolist() == (a + b).tolist()


LIFETIME_PROBE = """
import gc, sys, numpy as np, runtime_py as rt
from runtime_py.compiler import ProgramBuilder
n = 1 << 20  # 4 MiB: freed with munmap, so a read after free faults
b = ProgramBuilder()
m = b.method("forward")
x = m.input("x", "float32", (n,))
m.output(m.relu(x))
m.output(m.attribute("state", "float32", (n,)))
p = rt.Program.load(b.to_bytes())
f = p.load_method(clone_outputs=False)
y, state = f(np.full(n, 2.0, np.float32))
kind = sys.argv[1]
if kind == "numpy":
    kept = np.asarray(y)
elif kind == "attribute":
    kept = np.asarray(f.get_attribute("state"))
elif kind == "memoryview":
    kept = y.memoryview()
f.close()
p.close()
del y, state
gc.collect()
for _ in range(3):  # allocate and touch memory where the method's used to be
    junk = np.ones(4 * n, np.float32)
assert float(np.asarray(kept).astype(np.float64).sum()) in (2.0 * n, 0.0)
if kind != "attribute":
    assert np.asarray(kept)[7] == 2.0
del kept
gc.collect()
print("ok")
"""


@pytest.mark.parametrize("kind", ["numpy", "attribute", "memoryview"])
def test_an_export_of_a_view_outlives_its_method(kind):
    """A numpy array of an output view or of get_attribute(), or a Tensor.memoryview(), keeps
    the method's memory until it goes, like a DLPack export: used after Method.close() it
    reads the last results, where it used to read freed memory (a SIGSEGV for 1 MiB and up)."""
    pytest.importorskip("numpy")
    result = subprocess.run([sys.executable, "-c", LIFETIME_PROBE, kind], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, (result.returncode,
                                                              result.stderr[-2000:])


LOG_PROBE = """
import logging, sys, threading, runtime_py as rt
from runtime_py import _ffi
from runtime_py.compiler import ProgramBuilder

b = ProgramBuilder()
m = b.method("forward")
m.output(m.relu(m.input("x", "float32", (2,))))
data = b.to_bytes()
seen = []

class Reentrant(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
        if len(seen) < 20:
            with rt.Program.load(data) as p, p.load_method():  # logs again, from the callback
                pass
            _ffi.install_log_callback()  # and replaces the hook from inside it

log = logging.getLogger("runtime_py")
log.setLevel(logging.DEBUG)
log.addHandler(Reentrant())
_ffi.install_log_callback()
threads = [threading.Thread(target=lambda: rt.Program.load(data).load_method().close())
           for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("messages:", len(seen))
"""


def test_a_log_handler_may_use_the_runtime():
    """The log callback runs without the library's log lock: a logging handler that loads a
    program, or replaces the hook, from inside the callback, in several threads, used to
    deadlock."""
    result = subprocess.run([sys.executable, "-c", LOG_PROBE], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.split("messages:")[1]) >= 20
