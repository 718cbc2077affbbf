"""rt_method_run against the same bindings made one call at a time (rt_method_set_input /
rt_method_set_input_scalar, then rt_method_execute): hypothesis draws each input's descriptor,
mostly well-formed, else of another dtype, rank, size, device or with NULL data; the status,
the message, the bindings left behind and the outputs must be the same."""
from __future__ import annotations

import array

from hypothesis import event, given, settings, strategies as st

from runtime_py._ffi import ffi
from runtime_py.compiler import ProgramBuilder
from tests.test_method_run import INVALID_ARGUMENT, Loaded, f32, fill, last_error, lib


def mixed_program() -> bytes:
    """forward(a float32[3], n int, c float32[<=4]) -> (a + a, n, c + c)."""
    b = ProgramBuilder()
    m = b.method("forward")
    a = m.input("a", "float32", (3,))
    n = m.input_scalar("n", "int")
    c = m.input("c", "float32", (4,), max_shape=(4,))
    m.output(m.add(a, a), "a2")
    m.output(n, "n")
    m.output(m.add(c, c), "c2")
    return b.to_bytes()


# (typecode, dtype code, bits) of the descriptors drawn, matching and mismatching ones.
FORMS = [("f", 2, 32), ("d", 2, 64), ("q", 0, 64), ("B", 6, 8), ("i", 0, 32)]

descriptors = st.tuples(
    st.sampled_from(FORMS),
    st.lists(st.integers(0, 5), max_size=2).map(tuple),  # sizes
    st.sampled_from([(1, 0)] * 6 + [(2, 0), (1, 1)]),     # device
    st.integers(0, 9).map(lambda k: k == 0),             # NULL data
)


def make_descriptor(t, form, sizes, device, null, keep) -> None:
    typecode, code, bits = form
    count = 1
    for s in sizes:
        count *= s
    data = None if null else array.array(typecode, [1] * max(count, 1))
    fill(t, data, code, bits, sizes, device, keep)


def as_scalar(t):
    """The rt_scalar a valid 0-d descriptor stands for (docs/abi.md), else None."""
    if t.rank != 0 or t.data == ffi.NULL or (t.device.type, t.device.index) != (1, 0):
        return None
    code, bits = t.dtype.code, t.dtype.bits
    if (code, bits) == (0, 64):
        return ffi.new("rt_scalar *", {"kind": 1, "i": ffi.cast("int64_t *", t.data)[0]})
    if (code, bits) == (2, 64):
        return ffi.new("rt_scalar *", {"kind": 2, "d": ffi.cast("double *", t.data)[0]})
    if (code, bits) == (6, 8):
        return ffi.new("rt_scalar *", {"kind": 3, "i": ffi.cast("uint8_t *", t.data)[0]})
    return None


def outputs_of(m) -> list:
    t, s = ffi.new("rt_tensor *"), ffi.new("rt_scalar *")
    assert lib.rt_method_output(t, m, 0) == 0 and lib.rt_method_output_scalar(s, m, 1) == 0
    first = list(ffi.unpack(ffi.cast("float *", t.data), 3))
    assert lib.rt_method_output(t, m, 2) == 0
    return [first, s.i, list(ffi.unpack(ffi.cast("float *", t.data), t.sizes[0]))]


GOOD = [(FORMS[0], (3,), (1, 0), False), (FORMS[2], (), (1, 0), False),
        (FORMS[0], (2,), (1, 0), False)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), descriptors), min_size=3, max_size=3))
def test_run_binds_exactly_as_set_input_calls(choices):
    drawn = [GOOD[i] if pick < 6 else descriptor for i, (pick, descriptor) in enumerate(choices)]
    data = mixed_program()
    with Loaded(data) as x, Loaded(data) as y:
        # Both start from the same good bindings, so "kept as they were" is visible.
        good = [(f32(1, 2, 3), 2, 32, (3,)), (array.array("q", [9]), 0, 64, ()),
                (f32(4, 5), 2, 32, (2,))]
        for i, args in enumerate(good):
            x.describe(i, *args)
        assert x.run() == 0
        assert lib.rt_method_run(y.m, x.io()) == 0
        for i, (form, sizes, device, null) in enumerate(drawn):
            make_descriptor(x.inputs[i], form, sizes, device, null, x.keep)
        got = (x.run(), last_error())
        want, malformed_scalar = (0, ""), False
        for i in range(3):
            t = x.inputs[i]
            if i == 1:
                scalar = as_scalar(t)
                malformed_scalar = scalar is None
                status = lib.rt_method_set_input_scalar(y.m, 1, scalar or ffi.NULL)
            else:
                status = lib.rt_method_set_input(y.m, i, ffi.addressof(t), 0)
            if status:
                want = (status, last_error())
                break
        if want[0] == 0:  # every input bound: the execute decides
            status = lib.rt_method_execute(y.m)
            want = (status, last_error() if status else "")
            got = (got[0], got[1] if got[0] else "")
        event(f"run status {got[0]}")
        if malformed_scalar and want[0]:
            assert got[0] == INVALID_ARGUMENT
            assert "input 1 ('n'): is a int scalar: rt_method_run takes it" in got[1]
        else:
            assert got == want
        # The same bindings on both sides now: execute agrees, and so do the outputs.
        status_x, status_y = lib.rt_method_execute(x.m), lib.rt_method_execute(y.m)
        assert status_x == status_y
        if status_x == 0:
            assert outputs_of(x.m) == outputs_of(y.m)
        else:
            assert "is not set" in last_error()
