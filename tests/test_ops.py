"""The first ops of docs/ops.md (the elementwise arithmetic and comparisons, copy, relu, softmax,
matmul, linear, the convolutions and pools, reshape, transpose, concat) against independent
numpy references; the other families have their own files (test_ops_*.py, test_conv_*.py).

Every example builds a one-op program (`forward(x0, ..., xn) = op(x0, ..., xn, *params)`), loads
it and runs it on inputs drawn by tests/strategies.py: shapes with zero-size dimensions,
broadcasts, parameters, and inputs in contiguous, strided, reversed, transposed and zero-stride
layouts (the runtime copies non-dense inputs). The planned output shape is the reference's, so
every example also checks the op's shape rule at load. Dynamic inputs, run-time shape errors and
load-time errors (status and message) follow.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from tests import strategies as S
from tests.test_gemm import cpu_flags


def examples(n: int) -> settings:
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- one-op programs ------------------------------------------------------------------------

TensorSpec = Tuple[str, Sequence[int]]


def op_program(op: str, inputs: Sequence[TensorSpec], params: Sequence[Any] = (), *,
               out: Tuple[str, Sequence[int]], max_shapes: Optional[Sequence[Any]] = None,
               dynamic_out: Optional[bool] = None, tensor_list: Optional[Sequence[int]] = None,
               prefix: int = 0) -> bytes:
    """forward(x0, ..., xn) = op(x0, ..., xn, *params), or op([x_i for i in tensor_list],
    *params). inputs: (dtype, shape) per input; max_shapes[i]: bounds that make input i dynamic
    (None: static); out: the planned (dtype, shape), dynamic when any input is (unless
    dynamic_out says otherwise). `prefix` unrelated copies come first, so the op is
    instruction `prefix`."""
    b = ProgramBuilder()
    m = b.method("forward")
    xs = []
    for i, (dtype, shape) in enumerate(inputs):
        bound = max_shapes[i] if max_shapes is not None else None
        if bound is not None:
            xs.append(m.input(f"x{i}", dtype, shape, max_shape=tuple(bound)))
        else:
            xs.append(m.input(f"x{i}", dtype, tuple(shape)))
    for _ in range(prefix):
        m.copy(xs[0])
    if dynamic_out is None:
        dynamic_out = max_shapes is not None and any(s is not None for s in max_shapes)
    args: List[Any] = xs
    if tensor_list is not None:
        args = [m.tensor_list([xs[i] for i in tensor_list])]
    (y,) = m.call(op, *args, *params, outputs=[(out[0], tuple(out[1]), dynamic_out)])
    m.output(y, "y")
    return b.to_bytes()


class OpMethod:
    """A loaded one-op method (see op_program); calling it returns the output as a numpy copy."""

    def __init__(self, op: str, inputs: Sequence[TensorSpec], params: Sequence[Any] = (), *,
                 num_threads: int = 0, **kw: Any) -> None:
        self.program = rt.Program.load(op_program(op, inputs, params, **kw))
        self.method = self.program.load_method("forward", num_threads=num_threads)

    def __call__(self, *arrays: Any) -> np.ndarray:
        (y,) = self.method(*arrays)
        return np.array(y)

    def __enter__(self) -> "OpMethod":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.method.close()
        self.program.close()


def run_op(op: str, arrays: Sequence[np.ndarray], params: Sequence[Any] = (), *,
           out: Tuple[Any, Sequence[int]], num_threads: int = 0, **kw: Any) -> np.ndarray:
    """Build, load and run op on `arrays` (any layout), declared with their dtypes and shapes."""
    specs = [(str(a.dtype), a.shape) for a in arrays]
    with OpMethod(op, specs, params, out=(str(np.dtype(out[0])), out[1]),
                  num_threads=num_threads, **kw) as f:
        return f(*arrays)


# ---- comparisons ----------------------------------------------------------------------------

def tolerance(dtype: Any, terms: int = 1, scale: float = 1.0) -> dict:
    """rtol / atol for a result of `dtype` that sums `terms` products of magnitude `scale`."""
    dtype = np.dtype(dtype)
    base = 1e-5 if dtype == np.float32 else 1e-12
    return {"rtol": base, "atol": base * max(terms, 1) * scale}


def assert_close(got: np.ndarray, want: np.ndarray, **tol: float) -> None:
    """Same dtype and shape; floats within tolerance (NaN where NaN), the rest exact."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, equal_nan=True, **(tol or tolerance(want.dtype)))
    else:
        np.testing.assert_array_equal(got, want)


def assert_equal(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values (NaN where NaN; the sign of a zero is free, as for a max of -0.0 and 0.0)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-identical (data movement ops)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


# ---- reference helpers ----------------------------------------------------------------------

def wrap(values: Any, dtype: Any) -> np.ndarray:
    """Python integers (an object array) reduced modulo 2**bits into `dtype`."""
    values = np.asarray(values, dtype=object)
    info = np.iinfo(dtype)
    modulus = 1 << info.bits
    flat = [int(v) % modulus for v in values.ravel()]
    if info.min < 0:
        flat = [v - modulus if v > info.max else v for v in flat]
    return np.array(flat, dtype=dtype).reshape(values.shape)


def trunc_div(p: int, q: int) -> int:
    r = abs(p) // abs(q)
    return r if (p < 0) == (q < 0) else -r


def ref_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a2, b2 = np.broadcast_arrays(a, b)
    if op == "less":
        return np.asarray(a2 < b2, dtype=bool)
    if op == "equal":
        return np.asarray(a2 == b2, dtype=bool)
    if a.dtype.kind == "f":
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
        with np.errstate(all="ignore"):
            return np.asarray(fn(a2, b2), dtype=a.dtype)
    p, q = a2.astype(object), b2.astype(object)
    if op == "add":
        r = p + q
    elif op == "sub":
        r = p - q
    elif op == "mul":
        r = p * q
    else:
        r = np.array([trunc_div(x, y) for x, y in zip(p.ravel(), q.ravel())],
                     dtype=object).reshape(p.shape)
    return wrap(r, a.dtype)


def ref_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:
        return np.ones((), x.dtype)
    if x.size == 0:
        return x.copy()
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def ref_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.asarray(np.matmul(a.astype(np.float64), b.astype(np.float64))).astype(a.dtype)
    return wrap(np.matmul(a.astype(object), b.astype(object)), a.dtype)


def out_len(size: int, kernel: int, stride: int, before: int, after: int, dilation: int,
            ceil_mode: bool = False) -> int:
    """Output length of a 2-D window op along one dimension (docs/ops.md, PyTorch's rule)."""
    span = size + before + after - dilation * (kernel - 1) - 1
    n = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + before:
        n -= 1
    return n


def four(padding: Sequence[int]) -> Tuple[int, int, int, int]:
    """(top, left, bottom, right) of a 2- or 4-item padding."""
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return tuple(padding)  # type: ignore[return-value]


def ref_conv2d(x, w, bias, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = four(padding)
    ho = out_len(h, kh, stride[0], top, bottom, dilation[0])
    wo = out_len(wd, kw, stride[1], left, right, dilation[1])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    og = o // groups
    w64 = w.astype(np.float64).reshape(groups, og, cg, kh, kw)
    out = np.zeros((n, groups, og, ho, wo))
    for p in range(kh):
        rows = p * dilation[0] + stride[0] * np.arange(ho)
        for q in range(kw):
            cols = q * dilation[1] + stride[1] * np.arange(wo)
            taps = xp[:, :, rows[:, None], cols[None, :]].reshape(n, groups, cg, ho, wo)
            out += np.einsum("ngchw,goc->ngohw", taps, w64[:, :, :, p, q])
    out = out.reshape(n, o, ho, wo)
    if bias is not None:
        out += bias.astype(np.float64)[None, :, None, None]
    return out.astype(x.dtype)


def _window_taps(size: int, out: int, kernel: int, stride: int, before: int, dilation: int):
    """Per tap: (input index, inside-the-input mask) for every output position."""
    for t in range(kernel):
        idx = np.arange(out) * stride - before + t * dilation
        yield idx, (idx >= 0) & (idx < size)


def ref_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode):
    n, c, h, w = x.shape
    top, left, bottom, right = four(padding)
    ho = out_len(h, kernel[0], stride[0], top, bottom, dilation[0], ceil_mode)
    wo = out_len(w, kernel[1], stride[1], left, right, dilation[1], ceil_mode)
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    out = np.full((n, c, ho, wo), lowest, x.dtype)
    for ri, rm in _window_taps(h, ho, kernel[0], stride[0], top, dilation[0]):
        for ci, cm in _window_taps(w, wo, kernel[1], stride[1], left, dilation[1]):
            if not (rm.any() and cm.any()):
                continue
            vals = x[:, :, np.clip(ri, 0, h - 1)[:, None], np.clip(ci, 0, w - 1)[None, :]]
            inside = rm[:, None] & cm[None, :]
            out = np.where(inside, np.maximum(out, vals), out)
    return out


def ref_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad):
    n, c, h, w = x.shape
    top, left, bottom, right = four(padding)
    ho = out_len(h, kernel[0], stride[0], top, bottom, 1, ceil_mode)
    wo = out_len(w, kernel[1], stride[1], left, right, 1, ceil_mode)
    x64 = x.astype(np.float64)
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        hs = i * stride[0] - top
        he = min(hs + kernel[0], h + bottom)
        h0, h1 = max(hs, 0), min(he, h)
        for j in range(wo):
            ws = j * stride[1] - left
            we = min(ws + kernel[1], w + right)
            w0, w1 = max(ws, 0), min(we, w)
            inside = max(h1 - h0, 0) * max(w1 - w0, 0)
            divisor = (he - hs) * (we - ws) if count_include_pad else inside
            if divisor > 0 and inside > 0:
                out[:, :, i, j] = x64[:, :, h0:h1, w0:w1].sum(axis=(2, 3)) / divisor
    return out.astype(x.dtype)


# ---- parameter strategies -------------------------------------------------------------------

pairs_1_3 = st.tuples(st.integers(1, 3), st.integers(1, 3))
paddings = st.one_of(st.lists(st.integers(0, 3), min_size=2, max_size=2),
                     st.lists(st.integers(0, 3), min_size=4, max_size=4))


def axis_of(rank: int) -> st.SearchStrategy[int]:
    return st.integers(-rank, rank - 1)


def min_size(kernel: int, stride: int, before: int, after: int, dilation: int) -> int:
    """The smallest input length whose output length (floor rule) is not negative."""
    return max(0, dilation * (kernel - 1) + 1 - before - after - stride)


# ============================================================================================
# add, sub, mul, div, less, equal
# ============================================================================================

BINARY = ["add", "sub", "mul", "div", "less", "equal"]
FAMILY = {"less": "compare", "equal": "equal"}


@examples(800)
@given(op=st.sampled_from(BINARY), data=st.data())
def test_binary_matches_numpy(op, data):
    dtype = data.draw(S.dtypes(FAMILY.get(op, "arithmetic")), label="dtype")
    sa, sb, so = data.draw(S.broadcastable_pairs(), label="shapes")
    a = data.draw(S.arrays(dtype, sa), label="a")
    b = data.draw(S.arrays(dtype, sb), label="b")
    if op == "div" and dtype in S.INTEGER:
        b = np.where(b == 0, np.ones_like(b), b)  # division by zero: its own test
    want = ref_binary(op, a, b)
    assert want.shape == so
    got = run_op(op, [data.draw(S.views(a)), data.draw(S.views(b))],
                 out=(want.dtype, so))
    assert_close(got, want)


@examples(150)
@given(dtype=st.sampled_from(S.INTEGER), data=st.data())
def test_integer_division_by_zero_fails_unless_result_is_empty(dtype, data):
    sa, sb, so = data.draw(S.broadcastable_pairs(max_side=4))
    a = data.draw(S.arrays(dtype, sa))
    b = data.draw(S.arrays(dtype, sb))
    b = np.where(b == 0, np.ones_like(b), b)
    if b.size:
        b.ravel()[data.draw(st.integers(0, b.size - 1))] = 0
    with OpMethod("div", [(dtype, sa), (dtype, sb)], out=(dtype, so)) as div:
        if b.size and math.prod(so):
            with pytest.raises(rt.InvalidArgument) as info:
                div(data.draw(S.views(a)), data.draw(S.views(b)))
            assert "method 'forward': instruction 0 (div)" in str(info.value)
            assert "division by zero" in str(info.value)
        else:
            assert_close(div(a, b), ref_binary("div", a, b))
        ones = np.ones(sb, dtype)                    # the method stays usable
        assert_close(div(a, ones), ref_binary("div", a, ones))


def test_integer_division_truncates_and_wraps():
    a = np.array([7, -7, 7, -7, -128, -128, 127, 0], np.int8)
    b = np.array([2, 2, -2, -2, -1, 1, -1, -5], np.int8)
    got = run_op("div", [a, b], out=("int8", (8,)))
    np.testing.assert_array_equal(got, [3, -3, -3, 3, -128, -128, -127, 0])
    big = np.iinfo(np.int64).min
    got = run_op("div", [np.array([big, big], np.int64), np.array([-1, 3], np.int64)],
                 out=("int64", (2,)))
    np.testing.assert_array_equal(got, [big, -(2**63 // 3)])


def test_float_division_by_zero_and_nan_comparisons():
    a = np.array([1.0, -1.0, 0.0, np.nan, 2.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 1.0, np.nan], np.float32)
    got = run_op("div", [a, b], out=("float32", (5,)))
    np.testing.assert_array_equal(got, [np.inf, -np.inf, np.nan, np.nan, np.nan])
    c = np.array([np.nan, 1.0, np.nan, -np.inf], np.float64)
    d = np.array([np.nan, np.nan, 1.0, -np.inf], np.float64)
    np.testing.assert_array_equal(run_op("less", [c, d], out=("bool", (4,))), [0, 0, 0, 0])
    np.testing.assert_array_equal(run_op("equal", [c, d], out=("bool", (4,))), [0, 0, 0, 1])


def test_equal_reads_any_nonzero_byte_as_true():
    a = np.array([0, 1, 2, 255, 0, 7], np.uint8).view(np.bool_)
    b = np.array([1, 1, 1, 1, 0, 0], np.uint8).view(np.bool_)
    got = run_op("equal", [a, b], out=("bool", (6,)))
    assert got.tolist() == [False, True, True, True, True, False]


@examples(150)
@given(op=st.sampled_from(["add", "sub", "mul", "div"]), data=st.data())
def test_binary_in_place(op, data):
    """out may be the first input itself when it already has the result's shape."""
    dtype = data.draw(S.dtypes("arithmetic"))
    shape = data.draw(S.shapes())
    sb = shape[data.draw(st.integers(0, len(shape))):]
    a, b = data.draw(S.arrays(dtype, shape)), data.draw(S.arrays(dtype, sb))
    if op == "div" and dtype in S.INTEGER:
        b = np.where(b == 0, np.ones_like(b), b)
    pb = ProgramBuilder()
    m = pb.method("forward")
    x, y = m.input("a", dtype, shape), m.input("b", dtype, sb)
    m.call(op, x, y, out=x)
    m.output(x)
    with rt.Program.load(pb.to_bytes()) as program, program.load_method("forward") as f:
        (got,) = f(a.copy(), b)
        assert_close(np.array(got), ref_binary(op, a, b))


# ============================================================================================
# copy, relu, softmax
# ============================================================================================

@examples(250)
@given(dtype=S.dtypes("any"), data=st.data())
def test_copy_any_dtype_and_layout(dtype, data):
    x = data.draw(S.arrays(dtype, data.draw(S.shapes())))
    assert_same(run_op("copy", [data.draw(S.views(x))], out=(dtype, x.shape)), x)


@examples(250)
@given(dtype=S.dtypes("relu"), data=st.data())
def test_relu(dtype, data):
    x = data.draw(S.arrays(dtype, data.draw(S.shapes())))
    want = np.maximum(x, np.zeros((), dtype))
    assert_equal(run_op("relu", [data.draw(S.views(x))], out=(dtype, x.shape)), want)


def test_relu_keeps_nan_and_signed_zero_is_zero():
    x = np.array([np.nan, -1.0, -0.0, 2.0, -np.inf, np.inf], np.float64)
    got = run_op("relu", [x], out=("float64", (6,)))
    assert np.isnan(got[0]) and got[1:].tolist() == [0.0, 0.0, 2.0, 0.0, np.inf]


@examples(400)
@given(dtype=S.dtypes("float"), data=st.data())
def test_softmax_every_axis(dtype, data):
    shape = data.draw(S.shapes())
    axis = data.draw(axis_of(len(shape)) if shape else st.sampled_from([0, -1]), label="axis")
    x = data.draw(S.arrays(dtype, shape, bound=60.0))
    got = run_op("softmax", [data.draw(S.views(x))], [axis], out=(dtype, shape))
    assert_close(got, ref_softmax(x, axis))


def test_softmax_infinities_and_nan():
    x = np.array([[-np.inf, 0.0, 1.0],        # -inf weighs nothing
                  [-np.inf, -np.inf, -np.inf],  # only -inf: NaN
                  [np.inf, 0.0, 1.0],           # +inf: NaN
                  [np.nan, 0.0, 1.0],           # NaN: NaN
                  [1000.0, 1000.0, -1000.0]], np.float32)
    got = run_op("softmax", [x], [-1], out=("float32", x.shape))
    e = np.exp(np.array([-np.inf, 0.0, 1.0]) - 1.0)
    np.testing.assert_allclose(got[0], e / e.sum(), rtol=1e-6)
    assert np.isnan(got[1:4]).all()
    np.testing.assert_allclose(got[4], [0.5, 0.5, 0.0], rtol=1e-6)


@examples(100)
@given(op=st.sampled_from(["relu", "softmax", "copy"]), dtype=S.dtypes("float"), data=st.data())
def test_unary_in_place(op, dtype, data):
    shape = data.draw(S.shapes(min_rank=1))
    axis = data.draw(axis_of(len(shape)))
    x = data.draw(S.arrays(dtype, shape))
    pb = ProgramBuilder()
    m = pb.method("forward")
    v = m.input("x", dtype, shape)
    m.call(op, v, *([axis] if op == "softmax" else []), out=v)
    m.output(v)
    want = {"relu": lambda: np.maximum(x, 0), "copy": x.copy,
            "softmax": lambda: ref_softmax(x, axis)}[op]()
    with rt.Program.load(pb.to_bytes()) as program, program.load_method("forward") as f:
        (got,) = f(x.copy())
        assert_close(np.array(got), want)


# ============================================================================================
# matmul, linear
# ============================================================================================

@st.composite
def matmul_case(draw, dtype: str, bound: float = 2.0):
    m, k, n = (draw(st.integers(0, 6), label=c) for c in "MKN")
    batch_a, batch_b, _ = draw(S.broadcastable_pairs(max_rank=2, max_side=4), label="batch")
    a_vec, b_vec = draw(st.booleans(), label="a 1-D"), draw(st.booleans(), label="b 1-D")
    sa = (k,) if a_vec else batch_a + (m, k)
    sb = (k,) if b_vec else batch_b + (k, n)
    return draw(S.arrays(dtype, sa, bound=bound)), draw(S.arrays(dtype, sb, bound=bound)), k


@examples(500)
@given(dtype=S.dtypes("matmul"), data=st.data())
def test_matmul(dtype, data):
    a, b, k = data.draw(matmul_case(dtype))
    want = ref_matmul(a, b)
    got = run_op("matmul", [data.draw(S.views(a)), data.draw(S.views(b))], out=(dtype, want.shape))
    assert_close(got, want, **tolerance(dtype, k, 4.0))


def test_matmul_integers_wrap():
    a = np.array([[2**30, 2**30, 3]], np.int32)
    b = np.array([[4], [4], [-5]], np.int32)
    assert run_op("matmul", [a, b], out=("int32", (1, 1))).tolist() == [[-15]]
    a64 = np.array([2**62, 2**62, 2**62, 2**62, 7], np.int64)
    assert run_op("matmul", [a64, np.ones(5, np.int64)], out=("int64", ())).tolist() == 7


@examples(300)
@given(dtype=S.dtypes("float"), data=st.data())
def test_linear(dtype, data):
    lead = data.draw(S.shapes(max_rank=3, max_side=4), label="leading dims")
    k, n = data.draw(st.integers(0, 6), label="K"), data.draw(st.integers(0, 6), label="N")
    x = data.draw(S.arrays(dtype, lead + (k,), bound=2.0))
    w = data.draw(S.arrays(dtype, (n, k), bound=2.0))
    bias = data.draw(st.none() | S.arrays(dtype, (n,), bound=2.0), label="bias")
    want = x.astype(np.float64) @ w.astype(np.float64).T
    if bias is not None:
        want = want + bias
    tensors = [data.draw(S.views(t)) for t in ([x, w] if bias is None else [x, w, bias])]
    got = run_op("linear", tensors, [None] if bias is None else [], out=(dtype, want.shape))
    assert_close(got, want.astype(dtype), **tolerance(dtype, k + 1, 4.0))


@examples(15)
@given(dtype=S.dtypes("float"), threads=st.integers(1, 3), data=st.data())
def test_matmul_and_linear_large_tiles_and_threads(dtype, threads, data):
    """Sizes beyond the kernels' tiles (8 x 256 x 128 and 8 x 64), on several threads."""
    m = data.draw(st.integers(1, 20))
    k = data.draw(st.integers(100, 300))
    n = data.draw(st.integers(60, 300))
    batch = data.draw(st.integers(1, 2))
    a = data.draw(S.arrays(dtype, (batch, m, k), bound=1.0, constant_axes=False))
    b = data.draw(S.arrays(dtype, (k, n), bound=1.0, constant_axes=False))
    got = run_op("matmul", [a, data.draw(S.views(b))], out=(dtype, (batch, m, n)),
                 num_threads=threads)
    assert_close(got, ref_matmul(a, b), **tolerance(dtype, k))
    bt = np.array(b.T, order="C")
    got = run_op("linear", [a, bt], [None], out=(dtype, (batch, m, n)), num_threads=threads)
    assert_close(got, ref_matmul(a, b), **tolerance(dtype, k))


# ============================================================================================
# conv2d
# ============================================================================================

@st.composite
def conv_case(draw, dtype: str, min_side: int = 0, max_side: int = 5, min_channels: int = 0,
              max_channels: int = 3):
    groups = draw(st.integers(1, 3), label="groups")
    depthwise = draw(st.booleans(), label="depthwise")
    cg = 1 if depthwise else draw(st.integers(min_channels, max_channels), label="C/groups")
    og = draw(st.integers(min_channels, max_channels), label="O/groups")
    kernel = draw(pairs_1_3, label="kernel")
    stride = draw(pairs_1_3, label="stride")
    dilation = draw(pairs_1_3, label="dilation")
    padding = draw(paddings, label="padding")
    top, left, bottom, right = four(padding)
    h = min_size(kernel[0], stride[0], top, bottom, dilation[0]) + draw(
        st.integers(min_side, max_side), label="H")
    w = min_size(kernel[1], stride[1], left, right, dilation[1]) + draw(
        st.integers(min_side, max_side), label="W")
    n = draw(st.integers(min(min_channels, 1), 2), label="N")
    x = draw(S.arrays(dtype, (n, groups * cg, h, w), bound=2.0), label="x")
    wt = draw(S.arrays(dtype, (groups * og, cg, kernel[0], kernel[1]), bound=2.0), label="w")
    bias = draw(st.none() | S.arrays(dtype, (groups * og,), bound=2.0), label="bias")
    return x, wt, bias, list(stride), list(padding), list(dilation), groups


def conv_args(x, w, bias):
    """(tensors, leading params) of a conv2d call: a none bias is a parameter."""
    return ([x, w], [None]) if bias is None else ([x, w, bias], [])


@examples(500)
@given(dtype=S.dtypes("float"), data=st.data())
def test_conv2d(dtype, data):
    x, w, bias, stride, padding, dilation, groups = data.draw(conv_case(dtype))
    want = ref_conv2d(x, w, bias, stride, padding, dilation, groups)
    tensors, lead = conv_args(*(data.draw(S.views(t)) if t is not None else None
                                for t in (x, w, bias)))
    got = run_op("conv2d", tensors, lead + [stride, padding, dilation, groups],
                 out=(dtype, want.shape))
    taps = w.shape[1] * w.shape[2] * w.shape[3]
    assert_close(got, want, **tolerance(dtype, taps + 1, 4.0))


@examples(12)
@given(dtype=S.dtypes("float"), threads=st.integers(1, 3), data=st.data())
def test_conv2d_larger_on_threads(dtype, threads, data):
    x, w, bias, stride, padding, dilation, groups = data.draw(
        conv_case(dtype, min_side=16, max_side=40, min_channels=2, max_channels=6))
    want = ref_conv2d(x, w, bias, stride, padding, dilation, groups)
    tensors, lead = conv_args(x, w, bias)
    got = run_op("conv2d", tensors, lead + [stride, padding, dilation, groups],
                 out=(dtype, want.shape), num_threads=threads)
    taps = w.shape[1] * w.shape[2] * w.shape[3]
    assert_close(got, want, **tolerance(dtype, taps + 1, 4.0))


_erf = np.vectorize(math.erf, otypes=[float])

ACTIVATIONS = {  # conv2d_act's (kind, lo, hi) and a numpy reference
    0: lambda v, lo, hi: v,
    1: lambda v, lo, hi: np.maximum(v, 0),
    2: lambda v, lo, hi: np.clip(v, lo, hi),
    3: lambda v, lo, hi: 1 / (1 + np.exp(-v)),
    4: lambda v, lo, hi: 0.5 * v * (1 + _erf(v / math.sqrt(2))),
    5: lambda v, lo, hi: v * np.clip(v / 6 + 0.5, 0, 1),
}


@examples(25)
@given(stride=pairs_1_3, step=st.integers(1, 5), dilation=st.integers(1, 3),
       kernel=st.integers(1, 5), rows=st.integers(1, 5), multiplier=st.integers(1, 2),
       width=st.integers(1, 300),
       padding=paddings, act=st.sampled_from(sorted(ACTIVATIONS)), threads=st.integers(1, 2),
       data=st.data())
def test_depthwise_conv2d_act_wide_rows(stride, step, dilation, kernel, rows, multiplier,
                                        width, padding, act, threads, data):
    """One input channel per output channel, rows wider than the kernel's column chunks,
    horizontal strides 1 to 5 (5 takes the general kernel), the activation fused."""
    channels, height = 3, 4
    top, left, bottom, right = four(padding)
    width += min_size(kernel, step, left, right, dilation)
    height += min_size(rows, stride[0], top, bottom, 1)
    x = data.draw(S.arrays("float32", (1, channels, height, width), bound=2.0), label="x")
    w = data.draw(S.arrays("float32", (channels * multiplier, 1, rows, kernel), bound=2.0),
                  label="w")
    bias = data.draw(S.arrays("float32", (channels * multiplier,), bound=2.0), label="bias")
    strides, dilations = [stride[0], step], [1, dilation]
    want = ACTIVATIONS[act](ref_conv2d(x, w, bias, strides, list(padding), dilations, channels),
                            np.float32(0.5), np.float32(1.5)).astype(np.float32)
    got = run_op("conv2d_act", [x, w, bias],
                 [strides, list(padding), dilations, channels, act, 0.5, 1.5],
                 out=("float32", want.shape), num_threads=threads)
    assert_close(got, want, **tolerance("float32", rows * kernel + 1, 4.0))


@examples(60)
@given(stride=st.integers(1, 2), pads=st.tuples(*[st.integers(0, 2)] * 4),
       out_h=st.integers(1, 13), out_w=st.integers(1, 100), multiplier=st.integers(1, 2),
       batch=st.integers(1, 2), act=st.sampled_from([0, 1, 2, 5]), threads=st.integers(1, 2),
       data=st.data())
def test_depthwise_3x3(stride, pads, out_h, out_w, multiplier, batch, act, threads, data):
    """3x3 depthwise with stride 1 or 2 both ways, MobileNet's layers: with AVX-512 these
    read x in place, 4 output rows x 32 columns at a time, with masked loads for the padding.
    Rows past a multiple of 4, rows under 16 or 32 columns, any padding up to 2 a side."""
    top, left, bottom, right = pads
    height = max((out_h - 1) * stride + 3 - top - bottom, 1)
    width = max((out_w - 1) * stride + 3 - left - right, 1)
    channels = 3
    x = data.draw(S.arrays("float32", (batch, channels, height, width), bound=2.0), label="x")
    w = data.draw(S.arrays("float32", (channels * multiplier, 1, 3, 3), bound=2.0), label="w")
    bias = data.draw(S.arrays("float32", (channels * multiplier,), bound=2.0), label="bias")
    strides, padding = [stride, stride], list(pads)
    want = ACTIVATIONS[act](ref_conv2d(x, w, bias, strides, padding, [1, 1], channels),
                            np.float32(0.5), np.float32(1.5)).astype(np.float32)
    got = run_op("conv2d_act", [x, w, bias], [strides, padding, [1, 1], channels, act, 0.5, 1.5],
                 out=("float32", want.shape), num_threads=threads)
    assert_close(got, want, **tolerance("float32", 10, 4.0))


@examples(60)
@given(stride=st.integers(1, 2), pads=st.tuples(*[st.integers(0, 2)] * 4),
       out_h=st.integers(1, 12), out_w=st.integers(1, 9), multiplier=st.integers(1, 2),
       batch=st.integers(1, 2), act=st.sampled_from(sorted(ACTIVATIONS)),
       threads=st.integers(1, 2), nan_at=st.none() | st.integers(0, 10**6), data=st.data())
def test_depthwise_3x3_narrow_planes(stride, pads, out_h, out_w, multiplier, batch, act, threads,
                                     nan_at, data):
    """3x3 depthwise on planes at most 7 outputs wide (MobileNet's 7x7 layers; with AVX-512
    two output rows share a vector, 8 lanes each): stride 1 with one column of padding each
    side, and stride 2 with any; odd row counts, padding rows, a NaN anywhere in x. Widths
    8 and 9 and other paddings take the other kernels, and must agree."""
    top, left, bottom, right = pads
    if stride == 1 and data.draw(st.booleans(), label="same padding"):
        left = right = 1
    height = max((out_h - 1) * stride + 3 - top - bottom, 1)
    width = max((out_w - 1) * stride + 3 - left - right, 1)
    padding = [top, left, bottom, right]
    channels = 5
    x = data.draw(S.arrays("float32", (batch, channels, height, width), bound=2.0), label="x")
    if nan_at is not None:
        x.reshape(-1)[nan_at % x.size] = np.nan
    w = data.draw(S.arrays("float32", (channels * multiplier, 1, 3, 3), bound=2.0), label="w")
    bias = data.draw(S.arrays("float32", (channels * multiplier,), bound=2.0), label="bias")
    strides = [stride, stride]
    with np.errstate(invalid="ignore", over="ignore"):
        want = ACTIVATIONS[act](ref_conv2d(x, w, bias, strides, padding, [1, 1], channels),
                                np.float32(0.5), np.float32(1.5)).astype(np.float32)
    got = run_op("conv2d_act", [x, w, bias], [strides, padding, [1, 1], channels, act, 0.5, 1.5],
                 out=("float32", want.shape), num_threads=threads)
    assert_close(got, want, **tolerance("float32", 10, 4.0))


@pytest.mark.parametrize("stride,size", [(1, 7), (2, 14), (1, 4), (2, 7), (1, 1), (2, 2)])
def test_depthwise_3x3_small_planes_model_shapes(stride, size):
    """MobileNet's last depthwise layers (512 channels of 14x14 with stride 2, 1024 of 7x7)
    and smaller planes, with Relu6, against a float64 reference."""
    rng = np.random.default_rng(size * 10 + stride)
    channels = 64
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    w = rng.standard_normal((channels, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    want = np.clip(ref_conv2d(x, w, bias, [stride, stride], [1, 1, 1, 1], [1, 1], channels),
                   0, 6).astype(np.float32)
    got = run_op("conv2d_act", [x, w, bias],
                 [[stride, stride], [1, 1, 1, 1], [1, 1], channels, 2, 0.0, 6.0],
                 out=("float32", want.shape), num_threads=2)
    assert_close(got, want, **tolerance("float32", 10, 4.0))


DEPTHWISE_VARIANT_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from tests.test_ops import run_op
rng = np.random.default_rng(7)
outs = []
for stride, pads, size, act in ((1, [1, 1, 1, 1], (14, 14), 2), (2, [1, 1, 1, 1], (14, 14), 2),
                                (1, [0, 2, 1, 0], (9, 37), 3), (2, [2, 0, 0, 1], (11, 40), 1),
                                (1, [1, 1, 1, 1], (7, 7), 0), (2, [0, 1, 1, 1], (5, 18), 5),
                                (2, [1, 1, 1, 1], (6, 56), 2), (1, [1, 1, 1, 1], (5, 40), 0),
                                (2, [1, 1, 1, 1], (5, 16), 1)):
    x = rng.standard_normal((2, 3) + size).astype(np.float32)
    x[1, 2, size[0] // 2, size[1] - 1] = np.nan
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    oh = (size[0] + pads[0] + pads[2] - 3) // stride + 1
    ow = (size[1] + pads[1] + pads[3] - 3) // stride + 1
    got = run_op("conv2d_act", [x, w, bias], [[stride, stride], pads, [1, 1], 3, act, 0.5, 1.5],
                 out=("float32", (2, 3, oh, ow)), num_threads=2)
    outs += [x, w, bias, got]
np.savez(sys.argv[2], *outs)
"""


@pytest.mark.parametrize("kernel,flags", [("portable", []), ("avx2_fma", ["avx2", "fma"]),
                                          ("avx512", ["avx512f"]),
                                          ("avx512_pairs", ["avx512f"])])
def test_depthwise_3x3_on_each_kernel_set(kernel, flags, tmp_path):
    """3x3 depthwise with stride 1 and 2 on each kernel set this CPU runs (the GEMM kernel's
    choice, which the depthwise convolution follows): AVX-512 and AVX2 read x in place with
    masked loads at the plane's edges (AVX2's stride 2 shuffles even and odd lanes and puts
    the sums' columns back in order, and a plane's last block overlaps the one before rather
    than run past the edge), the portable path reads a padded copy. Left, right and uneven
    padding, output planes of 7 to 40 columns (a block and a half, whole blocks, a last lone
    vector), a NaN at a row's last column."""
    arrays = arrays_under_kernel(DEPTHWISE_VARIANT_SCRIPT, kernel, flags, tmp_path)
    cases = ((1, [1, 1, 1, 1], 2), (2, [1, 1, 1, 1], 2), (1, [0, 2, 1, 0], 3),
             (2, [2, 0, 0, 1], 1), (1, [1, 1, 1, 1], 0), (2, [0, 1, 1, 1], 5),
             (2, [1, 1, 1, 1], 2), (1, [1, 1, 1, 1], 0), (2, [1, 1, 1, 1], 1))
    for i, (stride, pads, act) in enumerate(cases):
        x, w, bias, got = arrays[4 * i:4 * i + 4]
        with np.errstate(invalid="ignore", over="ignore"):
            want = ACTIVATIONS[act](ref_conv2d(x, w, bias, [stride, stride], pads, [1, 1], 3),
                                    np.float32(0.5), np.float32(1.5)).astype(np.float32)
        assert np.isnan(got).any() and np.array_equal(np.isnan(got), np.isnan(want))
        assert_close(got, want, **tolerance("float32", 10, 4.0))


def conv_constant_weights_program(x_shape, w, bias, strides, padding, dilations, groups, act):
    """A program of conv2d_act with w and bias as constants, which the loader packs once: the
    path real models take (direct on the GEMM kernels, or im2col + GEMM with packed weights)."""
    b = ProgramBuilder()
    m = b.method("forward")
    y = m.conv2d(m.input("x", "float32", x_shape), m.constant(w),
                 m.constant(bias) if bias is not None else None, strides, list(padding),
                 dilations, groups)
    assert m.fuse_activation(y, act, 0.5, 1.5)
    m.output(y, "y")
    return b.to_bytes()


def run_conv_constant_weights(x, w, bias, strides, padding, dilations, groups, act, threads):
    """conv2d_act with constant weights (conv_constant_weights_program), run once."""
    program_bytes = conv_constant_weights_program(x.shape, w, bias, strides, padding,
                                                  dilations, groups, act)
    with rt.Program.load(program_bytes) as program, \
            program.load_method("forward", num_threads=threads) as f:
        return np.array(f(x)[0])


@examples(40)
@given(stride=pairs_1_3, step=st.integers(1, 5), dilation=pairs_1_3, kernel=pairs_1_3,
       channels=st.integers(1, 12), out_channels=st.integers(1, 44),
       width=st.integers(1, 110) | st.sampled_from([23, 24, 31, 32, 33, 63, 64, 72, 96, 100]),
       height=st.integers(1, 6), batch=st.integers(1, 2), padding=paddings,
       act=st.sampled_from(sorted(ACTIVATIONS)), with_bias=st.booleans(),
       threads=st.integers(1, 2), data=st.data())
def test_conv2d_constant_weights(stride, step, dilation, kernel, channels, out_channels, width,
                                 height, batch, padding, act, with_bias, threads, data):
    """Dense convolutions with packed constant weights: output rows from 1 to over 100 wide
    (the direct kernel's 32-column blocks, whole and partial), horizontal strides 1 to 5
    (5 goes through im2col), output channel counts across several of the kernels' panels,
    whole and partial."""
    top, left, bottom, right = four(padding)
    w_in = width + min_size(kernel[1], step, left, right, dilation[1])
    h_in = height + min_size(kernel[0], stride[0], top, bottom, dilation[0])
    x = data.draw(S.arrays("float32", (batch, channels, h_in, w_in), bound=2.0), label="x")
    w = data.draw(S.arrays("float32", (out_channels, channels) + kernel, bound=2.0), label="w")
    bias = (data.draw(S.arrays("float32", (out_channels,), bound=2.0), label="bias")
            if with_bias else None)
    strides, dilations = [stride[0], step], list(dilation)
    want = ACTIVATIONS[act](ref_conv2d(x, w, bias, strides, list(padding), dilations, 1),
                            np.float32(0.5), np.float32(1.5)).astype(np.float32)
    got = run_conv_constant_weights(x, w, bias, strides, padding, dilations, 1, act, threads)
    taps = channels * kernel[0] * kernel[1]
    assert_close(got, want, **tolerance("float32", taps + 1, 4.0))


@pytest.mark.parametrize("x_shape,w_shape,strides,padding,dilations", [
    ((1, 3, 10, 64), (16, 3, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),    # small CNN, first conv
    ((2, 16, 6, 32), (32, 16, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),   # small CNN, second
    ((1, 3, 9, 224), (32, 3, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1]),    # MobileNet's first
    ((1, 5, 7, 75), (17, 5, 3, 3), [2, 3], [0, 2, 1, 0], [1, 1]),     # partial blocks, stride 3
    ((1, 12, 9, 100), (9, 12, 2, 3), [1, 4], [1, 0, 0, 2], [2, 1]),   # stride 4, dilated rows
    ((1, 2, 6, 90), (8, 2, 3, 5), [1, 1], [2, 2, 2, 2], [1, 2]),      # dilated columns
    ((1, 32, 20, 30), (24, 32, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),  # pointwise, partial tail
    ((2, 16, 8, 8), (40, 16, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),    # pointwise, whole blocks
    ((1, 20, 7, 7), (9, 20, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),     # pointwise, 49 outputs
    ((1, 512, 7, 7), (1024, 512, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),  # pixels as rows
    ((1, 512, 14, 14), (512, 512, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),  # (AVX-512 only)
    # Pointwise layers take the direct path with the AVX-512 kernel, the GEMM driver with the
    # AVX2 one. Direct: where each thread's output passes 1 MB, blocks go panel by panel in
    # sweeps whose inputs take about 256 KB: here 8 blocks (256 columns) for 256 channels, so
    # the plane of 851 takes three whole sweeps, a sweep of two blocks and a partial tail;
    # with two threads the sweeps start mid-plane.
    ((1, 256, 23, 37), (640, 256, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    # A shallow pointwise layer (MobileNet's second): sweeps of 64 blocks (2,048 columns)
    # with the 8-row kernel.
    ((1, 32, 40, 150), (96, 32, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1]),
    # Tall images: the bands of output rows each thread pads for itself are cut short where
    # a band of every channel would pass 256 KB (one row each for the first; a few rows,
    # strided and dilated, for the second), and end at the image's last row. The first's
    # output, past 1 MB a thread, also goes in sweeps: 96, 96, 96 and 12 columns (576 taps).
    ((1, 64, 41, 300), (48, 64, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 24, 150, 70), (10, 24, 3, 2), [2, 1], [2, 0, 1, 1], [2, 1]),
    # Windows that do not overlap (stride = kernel): every image's patches in one GEMM
    # (conv/kernels/patches_f32.c). ViT's 8x8 patch embedding; sizes the windows do not divide
    # (the rest of the image unread); Swin-like 2x2 patches; a 1x4 strip.
    ((3, 3, 32, 32), (32, 3, 8, 8), [8, 8], [0, 0, 0, 0], [1, 1]),
    ((2, 4, 13, 17), (6, 4, 4, 3), [4, 3], [0, 0, 0, 0], [1, 1]),
    ((1, 3, 16, 16), (24, 3, 2, 2), [2, 2], [0, 0, 0, 0], [1, 1]),
    ((2, 5, 3, 12), (7, 5, 1, 4), [1, 4], [0, 0, 0, 0], [1, 1]),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv2d_constant_weights_model_shapes(x_shape, w_shape, strides, padding, dilations,
                                              threads):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[0]).astype(np.float32)
    for act in (0, 2):
        want = ACTIVATIONS[act](ref_conv2d(x, w, bias, strides, padding, dilations, 1),
                                np.float32(0.5), np.float32(1.5)).astype(np.float32)
        got = run_conv_constant_weights(x, w, bias, strides, padding, dilations, 1, act, threads)
        assert_close(got, want, **tolerance("float32", w[0].size + 1, 4.0))


@examples(30)
@given(extra_channels=st.integers(0, 40), out_channels=st.integers(64, 140),
       height=st.integers(1, 16), width=st.integers(1, 16), batch=st.integers(1, 2),
       act=st.sampled_from(sorted(ACTIVATIONS)), with_bias=st.booleans(),
       threads=st.integers(1, 3), nans=st.integers(0, 3), data=st.data())
def test_conv2d_pointwise_small_planes(extra_channels, out_channels, height, width, batch,
                                       act, with_bias, threads, nans, data):
    """Pointwise convolutions on planes of up to 256 pixels (72 with the AVX2 kernel) with 64
    or more output channels and 1 MB of weights take the pixels as the GEMM's rows
    (conv/kernels/pixels_f32.c), larger planes the other paths: blocks of 8
    pixels, whole and partial, panels of output channels, whole and partial, sums over
    several depth slices, each tile stored transposed with its bias and activation. A NaN
    in x makes its pixel's outputs NaN, as in numpy."""
    channels = -(-(1 << 18) // out_channels) + extra_channels
    x = data.draw(S.arrays("float32", (batch, channels, height, width), bound=2.0), label="x")
    x = x.copy()
    for _ in range(nans):
        x[tuple(data.draw(st.integers(0, n - 1)) for n in x.shape)] = np.nan
    w = data.draw(S.arrays("float32", (out_channels, channels, 1, 1), bound=2.0), label="w")
    bias = (data.draw(S.arrays("float32", (out_channels,), bound=2.0), label="bias")
            if with_bias else None)
    with np.errstate(invalid="ignore", over="ignore"):
        want = ACTIVATIONS[act](ref_conv2d(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1),
                                np.float32(0.5), np.float32(1.5)).astype(np.float32)
    got = run_conv_constant_weights(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1, act, threads)
    assert_close(got, want, **tolerance("float32", channels + 1, 4.0))


@pytest.mark.parametrize("x_shape,out_channels", [
    ((1, 512, 14, 14), 512),  # 1 MB of weights, x^T 0.4 MB: threads split the pixels
    ((1, 1024, 8, 9), 256),   # the same on a plane the AVX2 kernel's pixel rows take too
    ((1, 256, 13, 11), 520),  # the same, with a partial last block and panel
    ((1, 512, 7, 7), 1024),   # 2 MB, x^T 0.1 MB: threads pack x^T together, split panels
    ((2, 300, 5, 9), 1000),   # the same, two images, 300 deep (two KC slices)
])
def test_conv2d_pointwise_small_planes_split_over_threads(x_shape, out_channels):
    """With several threads the pixel-row path splits either the pixels (each thread packs
    and computes its share, and takes panels of another's share once done with its own) or
    the panels (after the threads pack x^T slice by slice together); with the AVX2 kernel
    the larger planes take the GEMM driver. Every output sums the same products in the same
    order each way, so 2, 3 or 4 threads (more than this
    machine's CPUs, so some shares are taken over) give the 1-thread result bit for bit, on
    every call."""
    rng = np.random.default_rng(x_shape[1] + out_channels)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((out_channels, x_shape[1], 1, 1)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    want = ACTIVATIONS[2](ref_conv2d(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1),
                          np.float32(0.5), np.float32(1.5)).astype(np.float32)
    with rt.Program.load(conv_constant_weights_program(
            x.shape, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1, 2)) as program:
        with program.load_method("forward", num_threads=1) as f:
            one = np.array(f(x)[0])
        assert_close(one, want, **tolerance("float32", x_shape[1] + 1, 4.0))
        for threads in (2, 3, 4):
            with program.load_method("forward", num_threads=threads) as f:
                for _ in range(3):
                    np.testing.assert_array_equal(np.array(f(x)[0]), one)


def arrays_under_kernel(script, kernel, flags, tmp_path):
    """The arrays `script` saves (argv: the repository, an .npz path) when run in a process
    with RT_GEMM_KERNEL=kernel; skips where the CPU lacks `flags`."""
    if not all(flag in cpu_flags() for flag in flags):
        pytest.skip(f"this CPU lacks {flags}")
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out.npz"
    subprocess.run([sys.executable, "-c", script, str(root), str(out)],
                   env=dict(os.environ, RT_GEMM_KERNEL=kernel), check=True, cwd=root,
                   timeout=120)
    saved = np.load(out)
    return [saved[f"arr_{i}"] for i in range(len(saved.files))]


PIXELS_VARIANT_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from tests.test_ops import run_conv_constant_weights
rng = np.random.default_rng(5)
outs = []
for shape, out_channels, act in (((2, 4000, 3, 5), 70, 2), ((1, 2048, 9, 5), 128, 3)):
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    w = rng.standard_normal((out_channels, shape[1], 1, 1)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    got = run_conv_constant_weights(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1, act, 2)
    outs += [x, w, bias, got]
np.savez(sys.argv[2], *outs)
"""


@pytest.mark.parametrize("kernel,flags", [("portable", []), ("avx2_fma", ["avx2", "fma"]),
                                          ("avx512", ["avx512f"]),
                                          ("avx512_pairs", ["avx512f"])])
def test_conv2d_pointwise_small_planes_on_each_gemm_kernel(kernel, flags, tmp_path):
    """The pixel-row path on each GEMM kernel this CPU runs: its tile (4 x 24 or 8 x 32) sets
    the blocks of pixels and panels of channels, and only the AVX-512 one stores tiles
    transposed with vector shuffles."""
    arrays = arrays_under_kernel(PIXELS_VARIANT_SCRIPT, kernel, flags, tmp_path)
    for (x, w, bias, got), act in zip([arrays[:4], arrays[4:]], (2, 3)):
        with np.errstate(invalid="ignore", over="ignore"):
            want = ACTIVATIONS[act](ref_conv2d(x, w, bias, [1, 1], [0, 0, 0, 0], [1, 1], 1),
                                    np.float32(0.5), np.float32(1.5)).astype(np.float32)
        assert np.isnan(got).sum() == w.shape[0]  # the NaN pixel, in every channel
        assert_close(got, want, **tolerance("float32", x.shape[1] + 1, 4.0))


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_conv2d_direct_pads_over_stale_scratch(stride):
    """Instructions share one scratch area, so a convolution's band buffers start out holding
    what the one before left there (here an im2col column matrix, no zeros in it): every zero
    it reads (the right padding column of an odd width, read by stride 2's last window) must
    be written by its own fill."""
    rng = np.random.default_rng(stride)
    xa = rng.uniform(1, 2, (1, 16, 11, 101)).astype(np.float32)
    wa = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    xb = rng.standard_normal((1, 16, 11, 63)).astype(np.float32)
    wb = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.conv2d(m.input("xa", "float32", xa.shape), m.constant(wa), None, [1, 5],
                      [0, 0, 0, 0], [1, 1], 1))  # stride 5 goes through im2col
    m.output(m.conv2d(m.input("xb", "float32", xb.shape), m.constant(wb), None,
                      [stride, stride], [1, 1, 1, 1], [1, 1], 1))
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as f:
        got = np.array(f(xa, xb)[1])
    want = ref_conv2d(xb, wb, None, [stride, stride], [1, 1, 1, 1], [1, 1], 1)
    assert_close(got, want.astype(np.float32), **tolerance("float32", 16 * 9 + 1, 4.0))


# ============================================================================================
# max_pool2d, avg_pool2d
# ============================================================================================

@st.composite
def pool_case(draw, dtype: str, dilated: bool, min_side: int = 0, max_side: int = 6,
              bound: float = 8.0):
    kernel = draw(pairs_1_3, label="kernel")
    stride = draw(pairs_1_3, label="stride")
    dilation = draw(pairs_1_3, label="dilation") if dilated else (1, 1)
    padding = draw(paddings, label="padding")
    ceil_mode = draw(st.booleans(), label="ceil_mode")
    top, left, bottom, right = four(padding)
    h = min_size(kernel[0], stride[0], top, bottom, dilation[0]) + draw(
        st.integers(min_side, max_side), label="H")
    w = min_size(kernel[1], stride[1], left, right, dilation[1]) + draw(
        st.integers(min_side, max_side), label="W")
    shape = (draw(st.integers(0, 2), label="N"), draw(st.integers(0, 3), label="C"), h, w)
    x = draw(S.arrays(dtype, shape, bound=bound), label="x")
    return x, list(kernel), list(stride), list(padding), list(dilation), ceil_mode


@examples(500)
@given(dtype=S.dtypes("max_pool"), data=st.data())
def test_max_pool2d(dtype, data):
    x, kernel, stride, padding, dilation, ceil_mode = data.draw(pool_case(dtype, True))
    want = ref_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    got = run_op("max_pool2d", [data.draw(S.views(x))],
                 [kernel, stride, padding, dilation, ceil_mode], out=(dtype, want.shape))
    assert_equal(got, want)


@examples(60)
@given(h=st.integers(2, 40), w=st.integers(2, 80), ceil_mode=st.booleans(),
       nans=st.integers(0, 5), data=st.data())
def test_max_pool2d_2x2_stride_2(h, w, ceil_mode, nans, data):
    """The 2x2, stride-2 window of most CNNs (its own float32 loop where every window lies
    inside), odd sizes with ceil_mode going back to the general one, NaNs in any position."""
    x = data.draw(S.arrays("float32", (2, 3, h, w), bound=8.0), label="x").copy()
    rng = np.random.default_rng(h * 100 + w)
    x.flat[rng.integers(0, x.size, nans)] = np.nan
    want = ref_max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], ceil_mode)
    got = run_op("max_pool2d", [data.draw(S.views(x))], [[2, 2], [2, 2], [0, 0], [1, 1], ceil_mode],
                 out=("float32", want.shape))
    assert_equal(got, want)


@pytest.mark.parametrize("threads", [2, 3])
def test_max_pool2d_2x2_stride_2_split_mid_plane(threads):
    """On several threads the 2x2 loop gets runs of output rows that start and end inside a
    plane, and steps from plane to plane within a run."""
    x = np.random.default_rng(threads).standard_normal((2, 5, 26, 400)).astype(np.float32)
    want = ref_max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    got = run_op("max_pool2d", [x], [[2, 2], [2, 2], [0, 0], [1, 1], False],
                 out=("float32", want.shape), num_threads=threads)
    assert_equal(got, want)


def test_max_pool2d_nan_propagates_and_empty_window_is_lowest():
    x = np.array([[[[1.0, np.nan, 5.0], [3.0, 4.0, 2.0]]]], np.float32)
    got = run_op("max_pool2d", [x], [[2, 2], [2, 2], [0, 0], [1, 1], False],
                 out=("float32", (1, 1, 1, 1)))
    assert np.isnan(got).all()
    # padding 3 >= kernel 2: the first window of each row lies in the padding only
    xi = np.arange(4, dtype=np.int16).reshape(1, 1, 2, 2)
    got = run_op("max_pool2d", [xi], [[2, 2], [3, 3], [3, 3], [1, 1], False],
                 out=("int16", (1, 1, 3, 3)))
    assert_same(got, ref_max_pool2d(xi, [2, 2], [3, 3], [3, 3], [1, 1], False))
    assert got[0, 0, 0, 0] == np.iinfo(np.int16).min


@examples(500)
@given(dtype=S.dtypes("float"), count_include_pad=st.booleans(), data=st.data())
def test_avg_pool2d(dtype, count_include_pad, data):
    x, kernel, stride, padding, _, ceil_mode = data.draw(pool_case(dtype, False))
    want = ref_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad)
    got = run_op("avg_pool2d", [data.draw(S.views(x))],
                 [kernel, stride, padding, ceil_mode, count_include_pad], out=(dtype, want.shape))
    assert_close(got, want)


@examples(40)
@given(dtype=S.dtypes("float"), h=st.integers(1, 20), w=st.integers(1, 40),
       pad_rows=st.integers(0, 1), count_include_pad=st.booleans(), data=st.data())
def test_avg_pool2d_whole_rows(dtype, h, w, pad_rows, count_include_pad, data):
    """Windows spanning whole rows (global average pooling and its padded-row variants), which
    sum their rows as one run."""
    x = data.draw(S.arrays(dtype, (2, 3, h, w), bound=8.0), label="x")
    kernel, padding = [h, w], [pad_rows, 0, pad_rows, 0]
    stride = [max(1, h // 2), 1]
    want = ref_avg_pool2d(x, kernel, stride, padding, False, count_include_pad)
    got = run_op("avg_pool2d", [data.draw(S.views(x))],
                 [kernel, stride, padding, False, count_include_pad], out=(dtype, want.shape))
    assert_close(got, want)
    if pad_rows == 0:
        np.testing.assert_allclose(got[:, :, 0, 0], x.astype(np.float64).mean(axis=(2, 3)),
                                   rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)


@examples(12)
@given(dtype=S.dtypes("float"), threads=st.integers(1, 3), data=st.data())
def test_pools_larger_on_threads(dtype, threads, data):
    x, kernel, stride, padding, dilation, ceil_mode = data.draw(
        pool_case(dtype, True, min_side=30, max_side=60))
    x = data.draw(S.arrays(dtype, (2, 8) + x.shape[2:], constant_axes=False))
    want = ref_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    got = run_op("max_pool2d", [x], [kernel, stride, padding, dilation, ceil_mode],
                 out=(dtype, want.shape), num_threads=threads)
    assert_equal(got, want)
    want = ref_avg_pool2d(x, kernel, stride, padding, ceil_mode, True)
    got = run_op("avg_pool2d", [x], [kernel, stride, padding, ceil_mode, True],
                 out=(dtype, want.shape), num_threads=threads)
    assert_close(got, want)


# ============================================================================================
# reshape, transpose, concat
# ============================================================================================

@st.composite
def reshape_target(draw, count: int, max_rank: int = 4, infer: bool = True) -> List[int]:
    """A shape with `count` elements; with `infer` maybe one -1 (never beside sizes multiplying
    to 0)."""
    rank = draw(st.integers(0 if count == 1 else 1, max_rank))
    sizes: List[int] = []
    left = count
    for i in range(rank - 1):
        if left == 0:
            sizes.append(draw(st.integers(0, 4)))
        else:
            divisors = [d for d in range(1, min(left, 12) + 1) if left % d == 0]
            d = draw(st.sampled_from(divisors))
            sizes.append(d)
            left //= d
    if rank:
        sizes.append(left)
        draw(st.randoms()).shuffle(sizes)
        pos = draw(st.none() | st.integers(0, rank - 1), label="-1 at") if infer else None
        if pos is not None and math.prod(sizes[:pos] + sizes[pos + 1:]) != 0:
            sizes[pos] = -1
    return sizes


@examples(300)
@given(dtype=S.dtypes("any"), data=st.data())
def test_reshape(dtype, data):
    x = data.draw(S.arrays(dtype, data.draw(S.shapes())))
    target = data.draw(reshape_target(x.size))
    want = x.reshape(target)
    assert_same(run_op("reshape", [data.draw(S.views(x))], [target], out=(dtype, want.shape)),
                want)


@examples(300)
@given(dtype=S.dtypes("any"), data=st.data())
def test_transpose(dtype, data):
    shape = data.draw(S.shapes())
    perm = list(data.draw(st.permutations(range(len(shape)))))
    perm = [p - len(shape) if data.draw(st.booleans()) else p for p in perm]
    x = data.draw(S.arrays(dtype, shape))
    want = np.array(np.transpose(x, perm), order="C")
    assert_same(run_op("transpose", [data.draw(S.views(x))], [perm], out=(dtype, want.shape)),
                want)


@examples(300)
@given(dtype=S.dtypes("any"), data=st.data())
def test_concat(dtype, data):
    shape = data.draw(S.shapes(min_rank=1, max_side=4))
    axis = data.draw(axis_of(len(shape)))
    count = data.draw(st.integers(1, 4))
    pieces = []
    for _ in range(count):
        piece = list(shape)
        piece[axis] = data.draw(st.integers(0, 4))
        pieces.append(data.draw(S.arrays(dtype, piece)))
    # Items of the tensor list: each input once, in some order, and maybe some twice.
    order = data.draw(st.permutations(range(count)))
    order = list(order) + data.draw(st.lists(st.integers(0, count - 1), max_size=2))
    want = np.concatenate([pieces[i] for i in order], axis=axis)
    got = run_op("concat", [data.draw(S.views(p)) for p in pieces], [axis],
                 out=(dtype, want.shape), tensor_list=order)
    assert_same(got, want)


@examples(5)
@given(threads=st.integers(1, 3), data=st.data())
def test_data_movement_larger_on_threads(threads, data):
    x = data.draw(S.arrays("float32", (37, 65, 48), constant_axes=False))
    perm = list(data.draw(st.permutations(range(3))))
    want = np.array(np.transpose(x, perm), order="C")
    assert_same(run_op("transpose", [x], [perm], out=("float32", want.shape),
                       num_threads=threads), want)
    want = np.concatenate([x, x[:, :3]], axis=1)
    assert_same(run_op("concat", [x, np.array(x[:, :3], order="C")], [1],
                       out=("float32", want.shape), tensor_list=[0, 1], num_threads=threads),
                want)
    y = x[:, :, ::-1]
    for op in ("add", "less"):
        want = ref_binary(op, x, y[0])
        assert_close(run_op(op, [x, y[0]], out=(want.dtype, want.shape), num_threads=threads),
                     want)
    want = ref_softmax(x, 1)
    assert_close(run_op("softmax", [x], [1], out=("float32", x.shape), num_threads=threads),
                 want)


def test_float32_sums_accumulate_in_float64():
    """softmax and avg_pool2d sum a million float32 terms; a float32 running sum would be off by
    about 1e-4 of the total, the float64 one by a rounding."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (2, 1_000_000)).astype(np.float32)
    got = run_op("softmax", [x], [-1], out=("float32", x.shape))
    np.testing.assert_allclose(got, ref_softmax(x, -1), rtol=2e-6, atol=0)
    x = rng.uniform(0, 1, (1, 1, 1000, 1000)).astype(np.float32)
    got = run_op("avg_pool2d", [x], [[1000, 1000], [1, 1], [0, 0], False, True],
                 out=("float32", (1, 1, 1, 1)))
    np.testing.assert_allclose(got.ravel(), [x.astype(np.float64).mean()], rtol=1e-6)


# ============================================================================================
# dynamic inputs: declared with max_shape, run with smaller sizes, then at the bounds
# ============================================================================================

def broadcast_bounds(draw, sa, sb):
    """Bounds for two dynamic inputs that keep broadcasting at every size up to them: a
    dimension grows unless it is 1 against a size other than 1."""
    r = max(len(sa), len(sb))
    pa, pb = (1,) * (r - len(sa)) + tuple(sa), (1,) * (r - len(sb)) + tuple(sb)
    ga, gb = list(sa), list(sb)
    for d in range(r):
        e = draw(st.integers(0, 3))
        if not (pa[d] == 1 and pb[d] != 1) and d >= r - len(sa):
            ga[d - (r - len(sa))] += e
        if not (pb[d] == 1 and pa[d] != 1) and d >= r - len(sb):
            gb[d - (r - len(sb))] += e
    return tuple(ga), tuple(gb)


@examples(150)
@given(op=st.sampled_from(BINARY), data=st.data())
def test_dynamic_binary(op, data):
    dtype = data.draw(S.dtypes(FAMILY.get(op, "arithmetic")))
    sa, sb, _ = data.draw(S.broadcastable_pairs())
    ga, gb = broadcast_bounds(data.draw, sa, sb)
    runs = []
    for shapes in ((sa, sb), (ga, gb)):
        a, b = (data.draw(S.arrays(dtype, s)) for s in shapes)
        if op == "div" and dtype in S.INTEGER:
            b = np.where(b == 0, np.ones_like(b), b)
        runs.append(((a, b), ref_binary(op, a, b)))
    out_dtype = runs[0][1].dtype
    out = (str(out_dtype), np.broadcast_shapes(ga, gb))
    with OpMethod(op, [(dtype, ga), (dtype, gb)], out=out, max_shapes=[ga, gb]) as f:
        for (a, b), want in runs:
            assert_close(f(data.draw(S.views(a)), data.draw(S.views(b))), want)


@examples(100)
@given(op=st.sampled_from(["copy", "relu", "softmax"]), dtype=S.dtypes("float"), data=st.data())
def test_dynamic_unary(op, dtype, data):
    shape = data.draw(S.shapes(min_rank=1))
    bound = data.draw(S.grown(shape))
    axis = data.draw(axis_of(len(shape)))
    params = [axis] if op == "softmax" else []
    ref = {"copy": lambda x: x.copy(), "relu": lambda x: np.maximum(x, 0),
           "softmax": lambda x: ref_softmax(x, axis)}[op]
    with OpMethod(op, [(dtype, bound)], params, out=(dtype, bound), max_shapes=[bound]) as f:
        for s in (shape, bound, shape):
            x = data.draw(S.arrays(dtype, s))
            assert_close(f(data.draw(S.views(x))), ref(x))


@examples(150)
@given(dtype=S.dtypes("matmul"), data=st.data())
def test_dynamic_matmul(dtype, data):
    m, k, n = (data.draw(st.integers(0, 5)) for _ in range(3))
    em, ek, en = (data.draw(st.integers(0, 3)) for _ in range(3))
    batch_a, batch_b, _ = data.draw(S.broadcastable_pairs(max_rank=2, max_side=3))
    gba, gbb = broadcast_bounds(data.draw, batch_a, batch_b)
    bounds = [gba + (m + em, k + ek), gbb + (k + ek, n + en)]
    out_bounds = np.broadcast_shapes(gba, gbb) + (m + em, n + en)
    with OpMethod("matmul", [(dtype, s) for s in bounds], out=(dtype, out_bounds),
                  max_shapes=bounds) as f:
        for sa, sb, kk in ((batch_a + (m, k), batch_b + (k, n), k),
                           (bounds[0], bounds[1], k + ek)):
            a = data.draw(S.arrays(dtype, sa, bound=2.0))
            b = data.draw(S.arrays(dtype, sb, bound=2.0))
            assert_close(f(data.draw(S.views(a)), data.draw(S.views(b))), ref_matmul(a, b),
                         **tolerance(dtype, kk, 4.0))


@examples(80)
@given(dtype=S.dtypes("float"), data=st.data())
def test_dynamic_linear(dtype, data):
    lead = data.draw(S.shapes(min_rank=1, max_rank=3, max_side=4))
    k, n = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 5))
    bound = data.draw(S.grown(lead)) + (k,)
    w = data.draw(S.arrays(dtype, (n, k), bound=2.0))
    with OpMethod("linear", [(dtype, bound), (dtype, (n, k))], [None],
                  out=(dtype, bound[:-1] + (n,)), max_shapes=[bound, None]) as f:
        for s in (lead + (k,), bound):
            x = data.draw(S.arrays(dtype, s, bound=2.0))
            want = (x.astype(np.float64) @ w.astype(np.float64).T).astype(dtype)
            assert_close(f(data.draw(S.views(x)), w), want, **tolerance(dtype, k, 4.0))


@examples(150)
@given(op=st.sampled_from(["conv2d", "max_pool2d", "avg_pool2d"]), dtype=S.dtypes("float"),
       data=st.data())
def test_dynamic_windows(op, dtype, data):
    """conv2d and pooling: N, H and W run below their bounds; C stays."""
    if op == "conv2d":
        x, w, _, stride, padding, dilation, groups = data.draw(conv_case(dtype))
        params = [None, stride, padding, dilation, groups]

        def ref(v):
            return ref_conv2d(v, w, None, stride, padding, dilation, groups)
    else:
        x, kernel, stride, padding, dilation, ceil_mode = data.draw(
            pool_case(dtype, op == "max_pool2d"))
        cip = data.draw(st.booleans())
        params = ([kernel, stride, padding, dilation, ceil_mode] if op == "max_pool2d"
                  else [kernel, stride, padding, ceil_mode, cip])

        def ref(v):
            if op == "max_pool2d":
                return ref_max_pool2d(v, kernel, stride, padding, dilation, ceil_mode)
            return ref_avg_pool2d(v, kernel, stride, padding, ceil_mode, cip)
    bound = data.draw(S.grown(x.shape, axes=(0, 2, 3)))
    specs = [(dtype, bound)] + ([(dtype, w.shape)] if op == "conv2d" else [])
    out_bounds = ref(np.zeros(bound, dtype)).shape
    with OpMethod(op, specs, params, out=(dtype, out_bounds),
                  max_shapes=[bound] + [None] * (len(specs) - 1)) as f:
        for v in (x, data.draw(S.arrays(dtype, bound, bound=2.0))):
            extra = [w] if op == "conv2d" else []
            assert_close(f(data.draw(S.views(v)), *extra), ref(v), **tolerance(dtype, 30, 4.0))


@examples(150)
@given(op=st.sampled_from(["reshape", "transpose", "concat"]), dtype=S.dtypes("any"),
       data=st.data())
def test_dynamic_shape_ops(op, dtype, data):
    if op == "reshape":
        # dynamic leading dimension, inferred by the -1 at every execute
        rest = data.draw(S.shapes(max_rank=3, min_side=1, max_side=4))
        shape = (data.draw(st.integers(0, 5)),) + rest
        bound = data.draw(S.grown(shape, axes=(0,)))
        target = data.draw(reshape_target(math.prod(rest), max_rank=3, infer=False))
        target.insert(data.draw(st.integers(0, len(target))), -1)
        specs, params = [(dtype, bound)], [target]
        out_bounds = np.zeros(bound, np.uint8).reshape(target).shape
        sizes = [shape, bound]
        ref = lambda xs: xs[0].reshape(target)  # noqa: E731
    elif op == "transpose":
        shape = data.draw(S.shapes())
        bound = data.draw(S.grown(shape))
        perm = list(data.draw(st.permutations(range(len(shape)))))
        specs, params = [(dtype, bound)], [perm]
        out_bounds = tuple(bound[p] for p in perm)
        sizes = [shape, bound]
        ref = lambda xs: np.array(np.transpose(xs[0], perm), order="C")  # noqa: E731
    else:
        shape = data.draw(S.shapes(min_rank=1, max_side=4))
        axis = data.draw(axis_of(len(shape)))
        count = data.draw(st.integers(1, 3))
        grow = data.draw(S.grown(shape))                  # off-axis bounds, alike for all
        pieces = [list(shape) for _ in range(count)]
        bounds = [list(grow) for _ in range(count)]
        for p, b in zip(pieces, bounds):
            p[axis] = data.draw(st.integers(0, 3))
            b[axis] = p[axis] + data.draw(st.integers(0, 3))
        specs, params = [(dtype, b) for b in bounds], [axis]
        out_bounds = list(grow)
        out_bounds[axis] = sum(b[axis] for b in bounds)
        sizes = [pieces, bounds]
        ref = lambda xs: np.concatenate(xs, axis=axis)  # noqa: E731
    multi = op == "concat"
    with OpMethod(op, specs, params, out=(dtype, out_bounds),
                  max_shapes=[s for _, s in specs],
                  tensor_list=list(range(len(specs))) if multi else None) as f:
        for run in sizes:
            xs = [data.draw(S.arrays(dtype, s)) for s in (run if multi else [run])]
            assert_same(f(*[data.draw(S.views(v)) for v in xs]), ref(xs))


# ---- sizes that only fail at execute ---------------------------------------------------------

RUN_ERRORS = [
    # (id, op, inputs [(dtype, bound)], params, out, feed shapes, text)
    ("add-no-broadcast", "add", [("float32", (4, 5)), ("float32", (5,))], [],
     ("float32", (4, 5)), [(4, 3), (5,)], "a [4, 3] and b [5] cannot be broadcast"),
    ("matmul-inner", "matmul", [("float64", (3, 4)), ("float64", (4, 2))], [],
     ("float64", (3, 2)), [(3, 4), (3, 2)], "b [3, 2]"),
    ("reshape-count", "reshape", [("float32", (4, 6))], [[4, 6]], ("float32", (4, 6)),
     [(3, 6)], "x [3, 6]"),
    ("concat-off-axis", "concat", [("int32", (2, 5)), ("int32", (2, 5))], [0],
     ("int32", (4, 5)), [(2, 5), (2, 4)], "xs[1] [2, 4]"),
    ("conv-too-small", "conv2d", [("float32", (1, 2, 6, 6)), ("float32", (3, 2, 3, 3))],
     [None, [1, 1], [0, 0], [1, 1], 1], ("float32", (1, 3, 4, 4)), [(1, 2, 1, 6), (3, 2, 3, 3)],
     "too small"),
    ("pool-too-small", "max_pool2d", [("float32", (1, 1, 6, 6))],
     [[3, 3], [1, 1], [0, 0], [2, 2], False], ("float32", (1, 1, 2, 2)), [(1, 1, 6, 3)],
     "too small"),
]


@pytest.mark.parametrize("case", RUN_ERRORS, ids=[c[0] for c in RUN_ERRORS])
def test_dynamic_sizes_that_do_not_fit_fail_at_execute(case):
    _, op, inputs, params, out, feed, text = case
    rng = np.random.default_rng(0)
    with OpMethod(op, inputs, params, out=out, max_shapes=[s for _, s in inputs],
                  tensor_list=[0, 1] if op == "concat" else None) as f:
        with pytest.raises(rt.InvalidArgument) as info:
            f(*[rng.standard_normal(s).astype(d) for (d, _), s in zip(inputs, feed)])
        assert f"method 'forward': instruction 0 ({op}): " in str(info.value)
        assert text in str(info.value)
        # the method stays usable with sizes that fit
        f(*[np.ones(s, d) for d, s in inputs])


def test_dynamic_output_beyond_its_plan_fails_at_execute():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4,), max_shape=(4,))
    y = m.tensor("float32", (6,), dynamic=True)
    m.call("concat", m.tensor_list([x, x]), 0, out=y)     # up to 8 > 6: caught at load
    m.output(y)
    with pytest.raises(rt.InvalidProgram, match=r"instruction 0 \(concat\)"):
        rt.Program.load(b.to_bytes()).load_method("forward")


def test_static_output_of_dynamic_input_must_get_its_planned_shape():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4,), max_shape=(4,))
    y = m.tensor("float32", (4,))
    m.call("relu", x, out=y)
    m.output(y)
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as f:
        with pytest.raises(rt.InvalidArgument, match=r"instruction 0 \(relu\)"):
            f(np.ones(2, np.float32))
        assert np.array(f(-np.ones(4, np.float32))[0]).tolist() == [0.0] * 4


# ============================================================================================
# errors at load: status and message
# ============================================================================================

F32, F64, I32 = "float32", "float64", "int32"
P2 = [[1, 1], [0, 0], [1, 1]]      # stride, padding, dilation of a plain conv2d

# (id, op, inputs [(dtype, shape)], params, out (dtype, shape), error class, text in message)
LOAD_ERRORS = [
    ("add-dtypes", "add", [(F32, (3,)), (F64, (3,))], [], (F32, (3,)), rt.InvalidProgram,
     "float64"),
    ("add-bool", "add", [("bool", (3,)), ("bool", (3,))], [], ("bool", (3,)), rt.Unsupported,
     "bool"),
    ("add-float16", "add", [("float16", (3,)), ("float16", (3,))], [], ("float16", (3,)),
     rt.Unsupported, "float16"),
    ("sub-no-broadcast", "sub", [(F32, (3,)), (F32, (4,))], [], (F32, (4,)), rt.InvalidProgram,
     "broadcast"),
    ("mul-out-shape", "mul", [(I32, (2, 3)), (I32, (3,))], [], (I32, (3, 2)), rt.InvalidProgram,
     "[3, 2]"),
    ("div-out-dtype", "div", [(F64, (2,)), (F64, (2,))], [], (F32, (2,)), rt.InvalidProgram,
     "out has dtype float32"),
    ("add-arity", "add", [(F32, (3,))], [], (F32, (3,)), rt.InvalidProgram, "argument"),
    ("add-kind", "add", [(F32, (3,))], [3], (F32, (3,)), rt.InvalidProgram, "must be a tensor"),
    ("less-out-float", "less", [(F32, (3,)), (F32, (3,))], [], (F32, (3,)), rt.InvalidProgram,
     "bool"),
    ("less-bool", "less", [("bool", (3,)), ("bool", (3,))], [], ("bool", (3,)), rt.Unsupported,
     "bool"),
    ("equal-dtypes", "equal", [(I32, (3,)), ("int64", (3,))], [], ("bool", (3,)),
     rt.InvalidProgram, "int64"),
    ("copy-dtype", "copy", [(F32, (3,))], [], (F64, (3,)), rt.InvalidProgram,
     "out has dtype float64"),
    ("copy-shape", "copy", [(F32, (3,))], [], (F32, (4,)), rt.InvalidProgram, "[4]"),
    ("relu-unsigned", "relu", [("uint8", (3,))], [], ("uint8", (3,)), rt.Unsupported, "uint8"),
    ("relu-out-dtype", "relu", [(F32, (3,))], [], (F64, (3,)), rt.InvalidProgram,
     "out has dtype float64"),
    ("softmax-axis", "softmax", [(F32, (2, 3))], [2], (F32, (2, 3)), rt.InvalidProgram, "axis 2"),
    ("softmax-negative-axis", "softmax", [(F32, (2, 3))], [-3], (F32, (2, 3)), rt.InvalidProgram,
     "axis -3"),
    ("softmax-int", "softmax", [(I32, (2, 3))], [1], (I32, (2, 3)), rt.Unsupported, "int32"),
    ("softmax-axis-kind", "softmax", [(F32, (2, 3))], [[1]], (F32, (2, 3)), rt.InvalidProgram,
     "axis"),
    ("matmul-rank0", "matmul", [(F32, ()), (F32, (3,))], [], (F32, (3,)), rt.InvalidProgram,
     "rank 0"),
    ("matmul-inner", "matmul", [(F32, (3, 4)), (F32, (5, 6))], [], (F32, (3, 6)),
     rt.InvalidProgram, "[5, 6]"),
    ("matmul-batch", "matmul", [(F32, (2, 3, 4)), (F32, (3, 4, 5))], [], (F32, (3, 3, 5)),
     rt.InvalidProgram, "batch"),
    ("matmul-int8", "matmul", [("int8", (2, 2)), ("int8", (2, 2))], [], ("int8", (2, 2)),
     rt.Unsupported, "int8"),
    ("matmul-dtypes", "matmul", [(F32, (2, 2)), (F64, (2, 2))], [], (F32, (2, 2)),
     rt.InvalidProgram, "float64"),
    ("matmul-out-shape", "matmul", [(F32, (2, 3)), (F32, (3, 4))], [], (F32, (2, 3)),
     rt.InvalidProgram, "[2, 3]"),
    ("linear-w-rank", "linear", [(F32, (2, 3)), (F32, (4, 3, 1))], [None], (F32, (2, 4)),
     rt.InvalidProgram, "w has rank 3"),
    ("linear-k", "linear", [(F32, (2, 3)), (F32, (4, 5))], [None], (F32, (2, 4)),
     rt.InvalidProgram, "w [4, 5]"),
    ("linear-bias", "linear", [(F32, (2, 3)), (F32, (4, 3)), (F32, (3,))], [], (F32, (2, 4)),
     rt.InvalidProgram, "bias"),
    ("linear-x-rank0", "linear", [(F32, ()), (F32, (4, 1))], [None], (F32, (4,)),
     rt.InvalidProgram, "x has rank 0"),
    ("linear-int", "linear", [(I32, (2, 3)), (I32, (4, 3))], [None], (I32, (2, 4)),
     rt.Unsupported, "int32"),
    ("conv-x-rank", "conv2d", [(F32, (2, 5, 5)), (F32, (4, 2, 3, 3))], [None] + P2 + [1],
     (F32, (4, 3, 3)), rt.InvalidProgram, "x has rank 3"),
    ("conv-groups-c", "conv2d", [(F32, (1, 3, 5, 5)), (F32, (4, 1, 3, 3))], [None] + P2 + [2],
     (F32, (1, 4, 3, 3)), rt.InvalidProgram, "groups"),
    ("conv-groups-o", "conv2d", [(F32, (1, 4, 5, 5)), (F32, (3, 2, 3, 3))], [None] + P2 + [2],
     (F32, (1, 3, 3, 3)), rt.InvalidProgram, "groups"),
    ("conv-channels", "conv2d", [(F32, (1, 4, 5, 5)), (F32, (2, 3, 3, 3))], [None] + P2 + [1],
     (F32, (1, 2, 3, 3)), rt.InvalidProgram, "w [2, 3, 3, 3]"),
    ("conv-groups-zero", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3))], [None] + P2 + [0],
     (F32, (1, 2, 3, 3)), rt.InvalidProgram, "groups"),
    ("conv-stride-zero", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3))],
     [None, [0, 1], [0, 0], [1, 1], 1], (F32, (1, 2, 3, 3)), rt.InvalidProgram, "stride"),
    ("conv-dilation-zero", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3))],
     [None, [1, 1], [0, 0], [1, 0], 1], (F32, (1, 2, 3, 3)), rt.InvalidProgram, "dilation"),
    ("conv-padding-3", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3))],
     [None, [1, 1], [0, 0, 0], [1, 1], 1], (F32, (1, 2, 3, 3)), rt.InvalidProgram, "padding"),
    ("conv-padding-negative", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3))],
     [None, [1, 1], [-1, 0], [1, 1], 1], (F32, (1, 2, 3, 3)), rt.InvalidProgram, "padding"),
    ("conv-no-taps", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 0, 3))], [None] + P2 + [1],
     (F32, (1, 2, 6, 3)), rt.InvalidProgram, "empty kernel"),
    ("conv-negative-out", "conv2d", [(F32, (1, 2, 1, 5)), (F32, (2, 2, 3, 3))], [None] + P2 + [1],
     (F32, (1, 2, 0, 3)), rt.InvalidProgram, "too small"),
    ("conv-bias", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3)), (F32, (3,))], P2 + [1],
     (F32, (1, 2, 3, 3)), rt.InvalidProgram, "bias"),
    ("conv-out-shape", "conv2d", [(F32, (1, 2, 5, 5)), (F32, (2, 2, 3, 3))], [None] + P2 + [1],
     (F32, (1, 2, 3, 4)), rt.InvalidProgram, "[1, 2, 3, 4]"),
    ("conv-int", "conv2d", [(I32, (1, 2, 5, 5)), (I32, (2, 2, 3, 3))], [None] + P2 + [1],
     (I32, (1, 2, 3, 3)), rt.Unsupported, "int32"),
    ("maxpool-rank", "max_pool2d", [(F32, (1, 4, 4))], [[2, 2], [2, 2], [0, 0], [1, 1], False],
     (F32, (1, 2, 2)), rt.InvalidProgram, "x has rank 3"),
    ("maxpool-kernel-zero", "max_pool2d", [(F32, (1, 1, 4, 4))],
     [[0, 2], [2, 2], [0, 0], [1, 1], False], (F32, (1, 1, 2, 2)), rt.InvalidProgram, "kernel"),
    ("maxpool-ceil-kind", "max_pool2d", [(F32, (1, 1, 4, 4))],
     [[2, 2], [2, 2], [0, 0], [1, 1], 3], (F32, (1, 1, 2, 2)), rt.InvalidProgram, "ceil_mode"),
    ("maxpool-negative-out", "max_pool2d", [(F32, (1, 1, 1, 4))],
     [[3, 2], [1, 2], [0, 0], [1, 1], False], (F32, (1, 1, 0, 2)), rt.InvalidProgram,
     "too small"),
    ("maxpool-out-shape", "max_pool2d", [(F32, (1, 1, 4, 4))],
     [[2, 2], [2, 2], [0, 0], [1, 1], False], (F32, (1, 1, 3, 2)), rt.InvalidProgram,
     "[1, 1, 3, 2]"),
    ("maxpool-bool", "max_pool2d", [("bool", (1, 1, 4, 4))],
     [[2, 2], [2, 2], [0, 0], [1, 1], False], ("bool", (1, 1, 2, 2)), rt.Unsupported, "bool"),
    ("avgpool-int", "avg_pool2d", [(I32, (1, 1, 4, 4))], [[2, 2], [2, 2], [0, 0], False, True],
     (I32, (1, 1, 2, 2)), rt.Unsupported, "int32"),
    ("avgpool-stride-list", "avg_pool2d", [(F32, (1, 1, 4, 4))],
     [[2, 2], [2, 2, 2], [0, 0], False, True], (F32, (1, 1, 2, 2)), rt.InvalidProgram, "stride"),
    ("avgpool-arity", "avg_pool2d", [(F32, (1, 1, 4, 4))], [[2, 2], [2, 2], [0, 0], False],
     (F32, (1, 1, 2, 2)), rt.InvalidProgram, "argument"),
    ("reshape-two-inferred", "reshape", [(F32, (2, 3))], [[-1, -1]], (F32, (6, 1)),
     rt.InvalidProgram, "-1"),
    ("reshape-count", "reshape", [(F32, (2, 3))], [[4, 2]], (F32, (4, 2)), rt.InvalidProgram,
     "[4, 2]"),
    ("reshape-below-minus-one", "reshape", [(F32, (2, 3))], [[-2, 3]], (F32, (2, 3)),
     rt.InvalidProgram, "-2"),
    ("reshape-infer-beside-zero", "reshape", [(F32, (0, 3))], [[0, -1]], (F32, (0, 1)),
     rt.InvalidProgram, "-1"),
    ("reshape-17-sizes", "reshape", [(F32, (2, 3))], [[1] * 15 + [2, 3]], (F32, (6,)),
     rt.InvalidProgram, "16"),
    ("reshape-out-shape", "reshape", [(F32, (2, 3))], [[3, 2]], (F32, (2, 3)), rt.InvalidProgram,
     "[2, 3]"),
    ("transpose-repeat", "transpose", [(F32, (2, 3))], [[0, 0]], (F32, (2, 2)),
     rt.InvalidProgram, "perm"),
    ("transpose-length", "transpose", [(F32, (2, 3))], [[0]], (F32, (2,)), rt.InvalidProgram,
     "perm"),
    ("transpose-range", "transpose", [(F32, (2, 3))], [[0, 2]], (F32, (2, 3)), rt.InvalidProgram,
     "perm"),
    ("transpose-out-shape", "transpose", [(F32, (2, 3))], [[1, 0]], (F32, (2, 3)),
     rt.InvalidProgram, "[2, 3]"),
]

# concat takes a tensor list: (id, inputs, list items, axis, out, error class, text)
CONCAT_ERRORS = [
    ("concat-dtypes", [(F32, (2, 3)), (I32, (2, 3))], [0, 1], 1, (F32, (2, 6)), rt.InvalidProgram,
     "dtype"),
    ("concat-ranks", [(F32, (2, 3)), (F32, (2, 3, 1))], [0, 1], 1, (F32, (2, 6)),
     rt.InvalidProgram, "rank 3"),
    ("concat-off-axis", [(F32, (2, 3)), (F32, (3, 3))], [0, 1], 1, (F32, (2, 6)),
     rt.InvalidProgram, "xs[1]"),
    ("concat-axis", [(F32, (2, 3)), (F32, (2, 3))], [0, 1], 2, (F32, (2, 6)), rt.InvalidProgram,
     "axis"),
    ("concat-negative-axis", [(F32, (2, 3)), (F32, (2, 3))], [0, 1], -3, (F32, (2, 6)),
     rt.InvalidProgram, "axis"),
    ("concat-rank0", [(F32, ()), (F32, ())], [0, 1], 0, (F32, (2,)), rt.InvalidProgram, "rank 0"),
    ("concat-empty", [(F32, (2, 3))], [], 0, (F32, (0, 3)), rt.InvalidProgram, "empty"),
    ("concat-out-shape", [(F32, (2, 3)), (F32, (2, 3))], [0, 1, 0], 0, (F32, (4, 3)),
     rt.InvalidProgram, "[4, 3]"),
]


def assert_load_error(data: bytes, exc: type, op: str, instruction: int, text: str) -> None:
    with rt.Program.load(data) as program:
        with pytest.raises(exc) as info:
            program.load_method("forward")
    message = str(info.value)
    assert isinstance(info.value, rt.Error)
    assert f"method 'forward': instruction {instruction} ({op}): " in message, message
    assert text in message, message


@pytest.mark.parametrize("index", range(len(LOAD_ERRORS)), ids=[c[0] for c in LOAD_ERRORS])
def test_load_errors(index):
    _, op, inputs, params, out, exc, text = LOAD_ERRORS[index]
    prefix = index % 3
    assert_load_error(op_program(op, inputs, params, out=out, prefix=prefix), exc, op, prefix,
                      text)


@pytest.mark.parametrize("index", range(len(CONCAT_ERRORS)), ids=[c[0] for c in CONCAT_ERRORS])
def test_concat_load_errors(index):
    _, inputs, items, axis, out, exc, text = CONCAT_ERRORS[index]
    prefix = index % 2
    data = op_program("concat", inputs, [axis], out=out, tensor_list=items, prefix=prefix)
    assert_load_error(data, exc, "concat", prefix, text)


@pytest.mark.parametrize("op", ["matmul", "linear", "conv2d", "max_pool2d", "avg_pool2d",
                                "transpose", "concat"])
def test_output_sharing_an_input_is_refused(op):
    """Only the elementwise ops, reshape and copy may write over an input."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", F32, (1, 1, 2, 2))
    w = m.input("w", F32, (1, 1, 2, 2))
    args = {
        "matmul": lambda: [x, w],
        "linear": lambda: [x, m.reshape(w, [2, 2]), None],
        "conv2d": lambda: [x, m.input("k", F32, (1, 1, 1, 1)), None, [1, 1], [0, 0], [1, 1], 1],
        "max_pool2d": lambda: [x, [1, 1], [1, 1], [0, 0], [1, 1], False],
        "avg_pool2d": lambda: [x, [1, 1], [1, 1], [0, 0], False, True],
        "transpose": lambda: [x, [0, 1, 3, 2]],
        "concat": lambda: [m.tensor_list([x]), 0],
    }[op]()
    m.call(op, *args, out=x)
    m.output(x)
    assert_load_error(b.to_bytes(), rt.InvalidProgram, op,
                      1 if op == "linear" else 0, "memory")


def test_constant_output_is_refused():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", F32, (4,))
    c = m.constant(np.zeros(4, np.float32))
    m.call("relu", x, out=c)
    m.output(c)
    assert_load_error(b.to_bytes(), rt.InvalidProgram, "relu", 0, "out")
