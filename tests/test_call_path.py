"""Method.__call__'s short paths (one rt_method_run per call, inputs like the last call's
rebound by address, the very same array reused, outputs copied out by remembered layout)
behave exactly as binding input by input: the same results when arrays change in place, the
same errors, the same bindings after a failure."""
from __future__ import annotations

import array
import gc
import platform
import warnings
import weakref

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")


def add3_program(shape=(3,)) -> bytes:
    b = ProgramBuilder()
    m = b.method("forward")
    x, y, z = (m.input(n, "float32", shape) for n in "abc")
    m.output(m.add(m.add(x, y), z), "sum")
    return b.to_bytes()


def echo_program() -> bytes:
    """forward(a float32[3], n int, d double, f bool) -> (a, a + a, n, d, f)."""
    b = ProgramBuilder()
    m = b.method("forward")
    a = m.input("a", "float32", (3,))
    n, d, f = m.input_scalar("n", "int"), m.input_scalar("d", "double"), m.input_scalar("f", "bool")
    m.output(a, "a")
    m.output(m.add(a, a), "twice")
    for value, name in ((n, "n"), (d, "d"), (f, "f")):
        m.output(value, name)
    return b.to_bytes()


@pytest.fixture
def add3():
    with rt.Program.load(add3_program()) as p, p.load_method("forward") as m:
        yield m


def test_same_arrays_changed_in_place_between_calls(add3):
    a, b, c = (np.full(3, v, np.float32) for v in (1, 2, 3))
    for step in range(4):
        a[0] = step
        c[2] = 10 * step
        assert np.asarray(add3(a, b, c)[0]).tolist() == (a + b + c).tolist()
    x, y, z = (array.array("f", [v] * 3) for v in (1, 2, 3))
    for step in range(4):
        x[1] = step
        assert add3(x, y, z)[0].tolist() == [1 + 2 + 3, step + 5, 6]


def test_same_array_given_a_new_shape_dtype_or_strides_in_place(add3):
    a, b, c = (np.ones(3, np.float32) for _ in range(3))
    assert add3(a, b, c)[0].tolist() == [3, 3, 3]
    a[:] = [1, 2, 3]
    a.shape = (1, 3)  # a static input reads a dense array of its byte count as its shape
    assert add3(a, b, c)[0].tolist() == [3, 4, 5]
    a.shape = (3,)
    a[:] = 1
    assert add3(a, b, c)[0].tolist() == [3, 3, 3]
    a.dtype = np.int32  # the same bytes, read as int32
    with pytest.raises(rt.InvalidArgument, match="input 0 .* has dtype int32, but the method "
                                                 "expects float32"):
        add3(a, b, c)
    a.dtype = np.float32
    assert add3(a, b, c)[0].tolist() == [3, 3, 3]
    a[:] = [1, 2, 3]
    assert add3(a, b, c)[0].tolist() == [3, 4, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy 2.4 deprecates this
        a.strides = (0,)  # every element is a[0] now
    assert a.tolist() == [1, 1, 1]
    assert add3(a, b, c)[0].tolist() == [3, 3, 3]


def test_same_array_given_a_new_shape_for_a_dynamic_input():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4,), max_shape=(4,))
    m.output(m.add(x, x), "y")
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as f:
        a = np.arange(4, dtype=np.float32)
        assert f(a)[0].tolist() == [0, 2, 4, 6]
        a.shape = (2, 2)
        with pytest.raises(rt.InvalidArgument, match=r"input 0 \('x'\) expects a float32 "
                                                     r"tensor of rank 1 .*got shape \(2, 2\)"):
            f(a)
        a.shape = (4,)
        assert f(a[:3])[0].tolist() == [0, 2, 4]
        assert f(a)[0].tolist() == [0, 2, 4, 6]


def test_array_that_turned_read_only_is_refused_for_allow_mutate(add3):
    a, b, c = (np.ones(3, np.float32) for _ in range(3))
    add3(a, b, c)
    a.flags.writeable = False
    assert add3(a, b, c)[0].tolist() == [3, 3, 3]
    with pytest.raises(rt.InvalidArgument, match="read-only"):
        add3.set_input(0, a, allow_mutate=True)
    a.flags.writeable = True
    add3.set_input(0, a, allow_mutate=True)
    add3.execute()
    assert add3.get_outputs()[0].tolist() == [3, 3, 3]


def test_method_writing_its_input_never_writes_the_callers_arrays():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (3,))
    m.add(x, x, out=x)  # in place: the library binds a copy
    m.output(x, "y")
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as f:
        writable = np.ones(3, np.float32)
        readonly = np.full(3, 2, np.float32)
        readonly.flags.writeable = False
        for value in (writable, writable, readonly, readonly, writable):
            before = value.copy()
            assert f(value)[0].tolist() == (2 * before).tolist()
            assert value.tolist() == before.tolist()
        with pytest.raises(rt.InvalidArgument, match="read-only"):
            f.set_input(0, readonly, allow_mutate=True)
        f.set_input(0, writable, allow_mutate=True)
        f.execute()
        assert writable.tolist() == [2, 2, 2]  # opted in: written in place


@pytest.mark.skipif(platform.python_implementation() != "CPython",
                    reason="PyPy's array.array resizes even while its buffer is exported")
def test_bound_array_cannot_be_resized_until_rebound_or_closed():
    x, y, z = (array.array("f", [1.0] * 3) for _ in range(3))
    with rt.Program.load(add3_program()) as p:
        m = p.load_method("forward")
        m(x, y, z)
        m(x, y, z)
        with pytest.raises(BufferError):
            x.append(1.0)  # bound by pointer: the method may read it on the next execute
        m(array.array("f", [2.0] * 3), y, z)
        x.append(1.0)  # rebound: free again
        m(y, y, z)
        with pytest.raises(BufferError):
            y.append(1.0)
        m.close()
        y.append(1.0)


def test_array_resized_while_bound_is_read_from_its_new_memory(add3):
    x, y, z = (array.array("f", [1.0] * 3) for _ in range(3))
    add3(x, y, z)
    try:
        x.extend([0.0] * 100000)  # grows: its buffer moves
    except BufferError:
        pytest.skip("this interpreter's array.array refuses to resize while exported")
    del x[3:]
    x[0] = 7.0
    assert add3(x, y, z)[0].tolist() == [9, 3, 3]


def test_python_side_error_leaves_later_inputs_bound_as_before(add3):
    """A value refused before the library sees it (a rank that cannot be read as the input):
    the inputs before it are bound to the new values, it and those after it keep the old."""
    old = [np.full(3, v, np.float32) for v in (1, 2, 3)]
    add3(*old)
    with pytest.raises(rt.InvalidArgument, match=r"input 1 \('b'\)"):
        add3(np.full(3, 10, np.float32), np.ones((2, 2), np.float32), np.full(3, 30, np.float32))
    add3.execute()
    assert add3.get_outputs()[0].tolist() == [15, 15, 15]  # new a, old b, old c


def test_library_side_error_unsets_that_input_only(add3):
    old = [np.full(3, v, np.float32) for v in (1, 2, 3)]
    add3(*old)
    with pytest.raises(rt.InvalidArgument, match=r"input 1 \('b'\): has dtype float64"):
        add3(np.full(3, 10, np.float32), np.ones(3, np.float64), np.full(3, 30, np.float32))
    with pytest.raises(rt.InvalidState, match=r"input 1 \('b'\): is not set"):
        add3.execute()
    add3.set_input(1, np.full(3, 20, np.float32))
    add3.execute()
    assert add3.get_outputs()[0].tolist() == [33, 33, 33]  # new a, new b, old c
    assert add3(*old)[0].tolist() == [6, 6, 6]


def test_failed_calls_hold_no_more_than_the_bindings(add3):
    """A failed call holds what the library has bound and the arrays it last looked at, no
    more: repeated failures with new arrays let the earlier ones go."""
    add3(*(np.ones(3, np.float32) for _ in range(3)))
    refs = []
    for _ in range(20):
        values = [np.ones(3, np.float32), np.ones(3, np.float64), np.ones(3, np.float32)]
        refs.append([weakref.ref(v) for v in values])
        with pytest.raises(rt.InvalidArgument, match=r"input 1 \('b'\): has dtype float64"):
            add3(*values)
        del values
    for _ in range(3):  # PyPy frees numpy's cpyext objects over several collections
        gc.collect()
    alive = sum(ref() is not None for group in refs for ref in group)
    assert alive <= 3, alive
    assert all(ref() is None for group in refs[:-1] for ref in group)


def test_dlpack_capsule_after_a_refused_input_is_not_consumed(add3):
    good = np.ones(3, np.float32)
    capsule = np.full(3, 5, np.float32).__dlpack__()
    with pytest.raises(rt.InvalidArgument, match="input 0"):
        add3(np.ones(3, np.int64), good, capsule)
    assert add3(good, good, capsule)[0].tolist() == [7, 7, 7]  # still unconsumed


def test_mixed_inputs_in_one_call(add3):
    t = add3(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(3, np.float32))[0]
    got = add3(t, [1.0, 2.0, 3.0], np.full(6, 1, np.float32)[::2])[0]
    assert got.tolist() == [5, 6, 7]
    assert add3(array.array("f", [1] * 3), bytearray(12), memoryview(np.ones(3, np.float32)))[0] \
        .tolist() == [2, 2, 2]


def test_outputs_that_are_inputs_follow_each_call():
    with rt.Program.load(echo_program()) as p, p.load_method("forward") as m:
        for step in range(3):
            a = np.arange(3, dtype=np.float32) + step
            out = m(a, step - 1, step / 4, step % 2 == 1)
            assert [type(v) for v in out[2:]] == [int, float, bool]
            assert out[0].tolist() == a.tolist() and out[1].tolist() == (a + a).tolist()
            assert out[2:] == [step - 1, step / 4, step % 2 == 1]
            assert not out[0].is_view  # a copy, though the output is the caller's memory
            a[0] = 100
            assert out[0].tolist()[0] == step
            assert m.get_outputs()[2:] == out[2:]


def test_views_when_clone_outputs_is_false():
    with rt.Program.load(add3_program()) as p, \
            p.load_method("forward", clone_outputs=False) as m:
        ones = np.ones(3, np.float32)
        first = m(ones, ones, ones)[0]
        assert first.is_view and first.tolist() == [3, 3, 3]
        second = m(ones, ones, ones + 1)[0]  # from the second call on, views are made flat
        assert second.tolist() == [4, 4, 4] and first.tolist() == [4, 4, 4]  # the same memory
        assert second.is_view and second.readonly and second.shape == (3,)
        assert second.dtype == "float32" and second.device == "cpu"


def test_wrong_input_count_and_closed_method(add3):
    ones = np.ones(3, np.float32)
    with pytest.raises(rt.InvalidArgument, match="method 'forward' takes 3 inputs, got 2"):
        add3(ones, ones)
    assert add3(ones, ones, ones)[0].tolist() == [3, 3, 3]
    add3.close()
    with pytest.raises(rt.ClosedError):
        add3(ones, ones, ones)


@pytest.mark.parametrize("make", [lambda: array.array("f", [1, 2, 3]),
                                  lambda: memoryview(array.array("f", [1, 2, 3])),
                                  lambda: bytearray(array.array("f", [1, 2, 3]))])
def test_resizing_a_bound_buffer_never_frees_what_the_method_reads(make):
    """CPython refuses to resize an exported array.array or bytearray; PyPy allows it, so there
    they are bound as a copy. Either way a later execute reads the values bound."""
    value = make()
    with rt.Program.load(add3_program()) as program, program.load_method("forward") as f:
        f.set_inputs(value, array.array("f", [10, 20, 30]), array.array("f", [100, 200, 300]))
        owner = value.obj if isinstance(value, memoryview) else value
        try:
            owner.extend(owner[:1] * 100000)  # reallocates where allowed
            del owner[:]
        except BufferError:
            pass
        gc.collect()
        f.execute()
        assert f.get_outputs()[0].tolist() == [111, 222, 333]


@pytest.mark.skipif(platform.python_implementation() == "CPython",
                    reason="CPython binds array.array in place (it refuses to resize it then)")
def test_pypy_refuses_allow_mutate_on_resizable_buffers():
    with rt.Program.load(add3_program()) as program, program.load_method("forward") as f:
        with pytest.raises(rt.InvalidArgument, match="resized while bound"):
            f.set_input(0, array.array("f", [1, 2, 3]), allow_mutate=True)
