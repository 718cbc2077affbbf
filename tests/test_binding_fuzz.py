"""Fuzzing input binding through the Python API: random dtypes (every supported one, and
mismatching ones), ranks 0 to 8, zero-size and huge dimensions, non-contiguous, reversed and
broadcast (zero-stride) layouts, read-only and misaligned buffers, raw pointers, wrong input
counts, and scalars and tensors swapped.

Every call either runs and gives back exactly the bytes it was given (the method copies its
input), or raises the documented exception naming the input; either way a correct call right
after it works.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Tuple

import numpy as np
from hypothesis import HealthCheck, event, given, settings, strategies as st

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool"]
HUGE = 1 << 40  # a dimension no buffer could hold, allowed beside a 0


def np_dtype(name: str) -> np.dtype:
    return np.dtype("uint16") if name == "bfloat16" else np.dtype(name)


@functools.lru_cache(maxsize=None)
def program(dtype: str, shape: Tuple[int, ...], dynamic: bool) -> rt.Program:
    """forward(x, k) = (copy(x), k): x of dtype and shape (upper bounds when dynamic)."""
    b = ProgramBuilder()
    m = b.method("forward")
    if dynamic:
        x = m.input("x", dtype, shape, max_shape=shape)
    else:
        x = m.input("x", dtype, shape)
    k = m.input_scalar("k", "int")
    m.output(m.copy(x), "y")
    m.output(k, "k")
    return rt.Program.load(b.to_bytes())


@functools.lru_cache(maxsize=None)
def method(dtype: str, shape: Tuple[int, ...], dynamic: bool) -> rt.Method:
    return program(dtype, shape, dynamic).load_method(max_steps=100)


# ---- values ------------------------------------------------------------------------------

small_dims = st.lists(st.integers(0, 3), min_size=0, max_size=8).map(tuple)


@st.composite
def expected_shapes(draw) -> Tuple[int, ...]:
    shape = draw(small_dims)
    if shape and draw(st.integers(0, 9)) == 0:  # a huge dimension beside an empty one
        i, j = draw(st.sampled_from([(a, b) for a in range(len(shape))
                                     for b in range(len(shape)) if a != b] or [(0, 0)]))
        if i != j:
            shape = tuple(0 if d == i else HUGE if d == j else s for d, s in enumerate(shape))
    return shape


def random_array(rng: np.random.Generator, dtype: str, shape: Tuple[int, ...]) -> np.ndarray:
    """Random bytes of the dtype (any bit pattern: NaNs, bools other than 0 and 1)."""
    dt = np_dtype(dtype)
    n = int(np.prod(shape, dtype=object)) if shape else 1
    if n == 0:
        return np.empty(shape, dt)
    return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt).reshape(shape)


def lay_out(rng: np.random.Generator, base: np.ndarray, layout: str) -> np.ndarray:
    """The same values as `base`, stored with a different layout."""
    if layout == "fortran":
        return np.asfortranarray(base)
    if layout == "readonly":
        out = base.copy()
        out.setflags(write=False)
        return out
    if layout == "misaligned":
        raw = bytearray(base.nbytes + 1)
        out = np.frombuffer(raw, base.dtype, count=base.size, offset=1).reshape(base.shape)
        out[...] = base
        return out
    if base.ndim == 0 or base.size == 0:
        return base
    axis = int(rng.integers(0, base.ndim))
    if layout == "strided":  # every other element of a doubled array
        wide = np.repeat(base, 2, axis=axis)
        return wide[tuple(slice(None, None, 2) if d == axis else slice(None)
                          for d in range(base.ndim))]
    if layout == "reversed":  # negative stride
        flipped = np.flip(base, axis=axis).copy()
        return np.flip(flipped, axis=axis)
    if layout == "broadcast":  # zero stride: every row the same
        row = np.take(base, [0], axis=axis)
        return np.broadcast_to(row, base.shape)
    return base


LAYOUTS = ["contiguous", "fortran", "strided", "reversed", "broadcast", "readonly", "misaligned"]
CONTAINERS = ["numpy", "memoryview", "pointer", "bytes", "list"]


def wrap(arr: np.ndarray, dtype: str, container: str):
    """(object to pass, its dtype and shape as runtime_py sees them, whether it reaches the
    library without strides, whether it is raw bytes)."""
    if dtype == "bfloat16" or container == "pointer":
        strides = None if arr.flags.c_contiguous else \
            tuple(s // arr.itemsize for s in arr.strides)
        return (arr.ctypes.data, dtype, arr.shape, strides), dtype, arr.shape, \
            strides is None, False
    if container == "memoryview" and arr.flags.c_contiguous:
        # A memoryview of format 'B' is raw bytes, whatever exported it.
        return memoryview(arr), dtype, arr.shape, True, dtype == "uint8"
    if container == "bytes" and arr.flags.c_contiguous:
        raw = arr.tobytes()  # bytes is read-only, bytearray writable: both are raw bytes
        return (raw if arr.size % 2 else bytearray(raw)), "uint8", (arr.nbytes,), True, True
    return arr, dtype, arr.shape, arr.flags.c_contiguous, False


def fits(shape: Tuple[int, ...], want: Tuple[int, ...], dynamic: bool) -> bool:
    if len(shape) != len(want):
        return False
    return all(s <= w for s, w in zip(shape, want)) if dynamic else shape == want


def nbytes(dtype: str, shape: Tuple[int, ...]) -> int:
    n = np_dtype(dtype).itemsize
    for s in shape:
        n *= s
    return n


def should_bind(want: str, want_shape, dynamic, given_dtype, shape, dense, raw) -> bool:
    """The binding rules of docs/python.md: exact dtype and a fitting shape, or a dense
    buffer of the expected dtype (or raw bytes) whose byte count equals a static input's."""
    if given_dtype == want and fits(shape, want_shape, dynamic):
        return True
    reinterpret = len(shape) != len(want_shape) or given_dtype != want
    return (not dynamic and dense and reinterpret and (given_dtype == want or raw)
            and nbytes(given_dtype, shape) == nbytes(want, want_shape))


def same_bytes(out: Any, arr: np.ndarray, want: str, shape: Tuple[int, ...]) -> None:
    got = np.asarray(out)
    assert got.shape == shape, (got.shape, shape)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(arr).tobytes()


def check_usable(m: rt.Method, want: str, want_shape: Tuple[int, ...]) -> None:
    """A correct call after whatever happened before."""
    rng = np.random.default_rng(1)
    shape = tuple(min(s, 2) for s in want_shape) if m.method_meta.inputs[0].dynamic \
        else want_shape
    x = random_array(rng, want, shape)
    arg = (x.ctypes.data, want, shape, None) if want == "bfloat16" else x
    y, k = m(arg, 7)
    same_bytes(y, x, want, shape)
    assert k == 7


fuzz_settings = settings(max_examples=400, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.data_too_large])


@fuzz_settings
@given(st.data())
def test_tensor_binding(data):
    want = data.draw(st.sampled_from(DTYPES), label="want")
    want_shape = data.draw(expected_shapes(), label="want_shape")
    dynamic = data.draw(st.booleans(), label="dynamic") and HUGE not in want_shape
    m = method(want, want_shape, dynamic)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))

    given_dtype = data.draw(st.sampled_from([want] * 4 + DTYPES), label="dtype")
    shape = want_shape
    mutation = data.draw(st.sampled_from(["none"] * 4 + ["dim", "rank", "smaller", "flat"]))
    if mutation == "dim" and shape:
        i = data.draw(st.integers(0, len(shape) - 1))
        shape = shape[:i] + (data.draw(st.integers(0, 4)),) + shape[i + 1:]
    elif mutation == "rank":
        shape = data.draw(small_dims)
    elif mutation == "smaller":
        shape = tuple(data.draw(st.integers(0, s)) if s != HUGE else 0 for s in shape)
    elif mutation == "flat" and HUGE not in shape:
        shape = (int(np.prod(shape)),)
    if HUGE in shape and 0 not in shape:
        shape = want_shape
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    container = data.draw(st.sampled_from(CONTAINERS), label="container")
    arr = lay_out(rng, random_array(rng, given_dtype, shape), layout)
    if container == "list" and given_dtype == want and want.startswith(("int", "uint", "bool")) \
            and arr.ndim >= 1 and 0 < arr.size <= 64:
        # Nested lists are packed into the expected dtype (bools become 0 and 1).
        arr = np.array(arr.tolist(), dtype=np_dtype(want))
        value, dense, raw = arr.tolist(), True, False
    else:
        value, given_dtype, shape, dense, raw = wrap(arr, given_dtype, container)

    expect_ok = should_bind(want, want_shape, dynamic, given_dtype, shape, dense, raw)
    try:
        y, k = m(value, 3)
    except rt.InvalidArgument as exc:
        event("refused")
        assert not expect_ok, f"refused a valid input: {exc}"
        assert "method 'forward': input 0 ('x')" in str(exc), str(exc)
    else:
        event(f"bound ({layout}, {container})")
        assert expect_ok, f"accepted {given_dtype}{list(shape)} for {want}{list(want_shape)}"
        same_bytes(y, arr, want, want_shape if given_dtype != want or
                   len(shape) != len(want_shape) else shape)
        assert k == 3
    check_usable(m, want, want_shape)


@fuzz_settings
@given(st.data())
def test_scalars_and_tensors_swapped(data):
    want = data.draw(st.sampled_from(DTYPES))
    want_shape = data.draw(st.sampled_from([(), (1,), (1, 1), (2,), (2, 3)]))
    m = method(want, want_shape, False)
    # A Python number for the tensor input: a 0-d tensor, or the static shape when that holds
    # one element.
    number = data.draw(st.sampled_from([0, 1, True, False]))
    try:
        y, _ = m(number, 0)
    except rt.InvalidArgument as exc:
        assert int(np.prod(want_shape)) != 1 and want_shape != ()
        assert "input 0 ('x')" in str(exc)
    else:
        assert int(np.prod(want_shape)) == 1
        assert any(np.asarray(y).tobytes()) == bool(number)
    check_usable(m, want, want_shape)
    # A tensor for the int input.
    arr = data.draw(st.sampled_from([np.array([1, 2]), np.zeros((2, 2), np.float32),
                                     np.array(2.5), np.array([True]), [1, 2], 2.5, "3", None,
                                     1 << 70, np.array(5), np.int32(6)]))
    x = np.zeros(want_shape, np_dtype(want))
    xarg = (x.ctypes.data, want, want_shape, None) if want == "bfloat16" else x
    try:
        _, k = m(xarg, arr)
    except rt.InvalidArgument as exc:
        assert "input 1 ('k')" in str(exc), str(exc)
        assert not (isinstance(arr, np.ndarray) and arr.ndim == 0 and arr.dtype.kind == "i")
    else:
        assert k == int(arr)  # 0-d integer arrays and numpy integers are ints
    check_usable(m, want, want_shape)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 5), st.sampled_from(DTYPES))
def test_wrong_input_counts(count, want):
    m = method(want, (2,), False)
    x = np.zeros(2, np_dtype(want))
    xarg = (x.ctypes.data, want, (2,), None) if want == "bfloat16" else x
    args = [xarg, 1, xarg, 1, xarg][:count]
    if count == 2:
        m(*args)
    else:
        try:
            m(*args) if count else m.set_inputs()
        except rt.InvalidArgument as exc:
            assert "takes 2 inputs" in str(exc) and f"got {count}" in str(exc)
        else:
            raise AssertionError(f"{count} inputs were accepted")
    check_usable(m, want, (2,))


def test_unset_input_after_failure_refuses_execute_naming_it():
    m = method("float32", (2, 3), False)
    m.set_inputs(np.zeros((2, 3), np.float32), 1)
    try:
        m.set_input(0, np.zeros((3, 2), np.float32))
    except rt.InvalidArgument as exc:
        assert "input 0 ('x')" in str(exc)
    try:
        m.execute()
    except rt.InvalidState as exc:
        assert "input 0 ('x')" in str(exc) and "not set" in str(exc)
    else:
        raise AssertionError("execute ran with an unset input")
    check_usable(m, "float32", (2, 3))


def test_out_of_range_sizes_and_strides_are_invalid_argument():
    """Sizes or strides that do not fit int64, or a stride tuple of the wrong length, given
    through the raw pointer form: InvalidArgument naming the input, and the next call works."""
    m = method("float32", (2, 3), False)
    x = np.zeros((2, 3), np.float32)
    for bad in [(x.ctypes.data, "float32", (1 << 63, 3), None),
                (x.ctypes.data, "float32", (5, 1 << 64), None),
                (x.ctypes.data, "float32", (2, 3), (1 << 63, 1)),
                (x.ctypes.data, "float32", (2, 3), (-(1 << 63) - 1, 1)),
                (x.ctypes.data, "float32", (2, 3), (3,)),
                (x.ctypes.data, "float32", (2, 3.5), None),
                (x.ctypes.data, "float32", (1 << 62, 1 << 62), None),
                (x.ctypes.data, "float32", (2, -3), None)]:
        try:
            m(bad, 0)
        except rt.InvalidArgument as exc:
            assert "input 0 ('x')" in str(exc), str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")
        check_usable(m, "float32", (2, 3))
