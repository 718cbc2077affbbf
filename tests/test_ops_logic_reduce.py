"""pow, mod, min, max, less_equal, and, or, xor, where, the reductions, argmax, argmin, cumsum
and topk against numpy, through the builder: broadcasting, zero-size and 0-d shapes, several
dtypes, NaN, parameters given as tensors read at run time, and a few error paths."""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Optional, Sequence, Tuple

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

RNG = np.random.default_rng(11)
Spec = Tuple[str, Sequence[int], bool]


def build(op: str, arrays: Sequence[np.ndarray], params: Sequence[Any], outs: Sequence[Spec],
          tensor_params: Sequence[int] = (), bounds: Optional[dict] = None) -> bytes:
    """forward(x0, ..., xn) = op(x0, ..., xn, *params); inputs listed in tensor_params are
    passed in the place of params[i] (a run-time parameter), `bounds` makes inputs dynamic."""
    b = ProgramBuilder()
    m = b.method("forward")
    xs = []
    for i, a in enumerate(arrays):
        if bounds and i in bounds:
            xs.append(m.input(f"x{i}", str(a.dtype), a.shape, max_shape=bounds[i]))
        else:
            xs.append(m.input(f"x{i}", str(a.dtype), a.shape))
    n_data = len(arrays) - len(tensor_params)
    args = list(xs[:n_data]) + list(params)
    for slot, x in zip(tensor_params, xs[n_data:]):
        args.insert(n_data + slot, x)
    ys = m.call(op, *args, outputs=outs)
    for i, y in enumerate(ys):
        m.output(y, f"y{i}")
    return b.to_bytes()


class Loaded:
    def __init__(self, data: bytes, num_threads: int = 0) -> None:
        self.program = rt.Program.load(data)
        self.method = self.program.load_method("forward", num_threads=num_threads)

    def __call__(self, *arrays):
        return [np.array(y) for y in self.method(*arrays)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.method.close()
        self.program.close()


def run(op, arrays, params=(), outs=(), **kw):
    with Loaded(build(op, arrays, params, outs, **kw)) as f:
        return f(*arrays)


def run1(op, arrays, params, dtype, shape):
    return run(op, arrays, params, [(dtype, shape, False)])[0]


def same(got, want, tol=None):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    if want.dtype.kind == "f":
        tol = tol if tol is not None else (1e-5 if want.dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def data(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    lo = 0 if dtype.kind == "u" else -50
    return RNG.integers(lo, 50, shape).astype(dtype)


SHAPES = [((3, 4, 5), (4, 1)), ((2, 0, 3), (3,)), ((), (2, 3)), ((1,), ()), ((5, 1), (1, 6))]


# ---- binary ops ------------------------------------------------------------------------------

BINARY = {
    "min": (np.minimum, ("float32", "float64", "int8", "uint16", "int64")),
    "max": (np.maximum, ("float32", "float64", "int32", "uint8", "uint64")),
    "less_equal": (lambda a, b: a <= b, ("float32", "float64", "int16", "uint32")),
    "and": (np.logical_and, ("bool",)),
    "or": (np.logical_or, ("bool",)),
    "xor": (np.logical_xor, ("bool",)),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary(op, shapes):
    ref, dtypes = BINARY[op]
    for dtype in dtypes:
        a, b = data(shapes[0], dtype), data(shapes[1], dtype)
        if dtype.startswith("float") and a.size:
            a.ravel()[0] = np.nan
        want = ref(a, b)
        same(run1(op, [a, b], [], str(want.dtype), want.shape), want)


def test_min_max_nan_propagates():
    a = np.array([np.nan, 1.0, np.nan, -0.5], np.float32)
    b = np.array([2.0, np.nan, np.nan, 0.5], np.float32)
    same(run1("min", [a, b], [], "float32", (4,)), np.minimum(a, b))
    same(run1("max", [a, b], [], "float32", (4,)), np.maximum(a, b))


@pytest.mark.parametrize("shapes", SHAPES)
def test_where_three_way_broadcast(shapes):
    sa, sb = shapes
    for sc, s1, s2 in ((sb, sa, ()), (sa, sb, sb), ((), sa, sb)):
        cond = data(sc, "bool")
        for dtype in ("float32", "int64", "bool", "uint8", "int16"):
            a, b = data(s1, dtype), data(s2, dtype)
            want = np.where(cond, a, b)
            same(run1("where", [cond, a, b], [], dtype, want.shape), want)


def test_pow_dtypes():
    base = np.abs(data((3, 4), "float32")) + 0.5
    for edtype in ("float32", "float64", "int32", "uint8", "int64"):
        e = np.array([[0, 1, 2, 3]], edtype)
        same(run1("pow", [base, e], [], "float32", (3, 4)),
             np.power(base.astype(np.float64), e.astype(np.float64)).astype(np.float32), 1e-6)
    ints = np.array([2, -3, 7, 0, 1, -1, 5], np.int64)
    e = np.array([10, 3, 0, 5, -4, -3, 40], np.int64)
    wrapped = 5 ** 40 % 2 ** 64 - (2 ** 64 if 5 ** 40 % 2 ** 64 >= 2 ** 63 else 0)
    want = np.array([1024, -27, 1, 0, 1, -1, wrapped], np.int64)
    same(run1("pow", [ints, e], [], "int64", (7,)), want)
    e = np.array([-1, -2, 0, -5, -1, -3, -9], np.int32)  # negative: the integer part of 1 / x^-e
    same(run1("pow", [ints.astype(np.int32), e], [], "int32", (7,)),
         np.array([0, 0, 1, 0, 1, -1, 0], np.int32))
    f = np.array([0.5, 2.0, 1e30, -0.5, 3.0, 0.0, 1.5], np.float32)
    same(run1("pow", [np.abs(ints).astype(np.int32), f], [], "int32", (7,)),
         np.array([1, 9, 2 ** 31 - 1, 2 ** 31 - 1, 1, 1, 11], np.int32))  # inf saturates


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, 0, 1, 4, -2, 7, 64, -64, 1.7, -2.5])
@pytest.mark.parametrize("edtype", ["float32", "float64", "int64"])
def test_pow_float32_by_one_exponent(exponent, edtype):
    """A one-element exponent (RMSNorm's 2, tanh-GELU's 3, 0.5, -0.5, -1, other integers) takes
    its own loop: within 1 ulp of numpy's power in float64, and its special cases (signed
    zeros, infinities, NaN, negative bases) exactly as numpy's. x^0.5 is sqrt(x), as recent
    numpy and torch compute it (numpy builds without that shortcut give pow's +inf for -inf)."""
    if edtype == "int64" and exponent != int(exponent):
        pytest.skip("a fractional exponent has no int64 form")
    x = np.concatenate([data((500,), "float32") * 4, np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -2.0, -0.5, 1e-40, -1e-40, 3e38, -3e38, 1e-20,
         1e20, 1.0, -1.0], np.float32)])
    e = np.array(exponent, edtype)
    with np.errstate(all="ignore"):
        want = np.sqrt(x.astype(np.float64)) if exponent == 0.5 else \
            np.power(x.astype(np.float64), e.astype(np.float64))
    got = run1("pow", [x, e], [], "float32", x.shape)
    rounded = want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(rounded))
    finite = np.isfinite(rounded)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(got)], rounded[~finite & ~np.isnan(got)])
    ulp = np.spacing(np.abs(rounded[finite])).astype(np.float64)
    assert (np.abs(got[finite].astype(np.float64) - want[finite]) <= ulp).all()
    zeros = rounded == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(rounded[zeros]))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "uint64"])
@pytest.mark.parametrize("fmod", [False, True])
def test_mod_integers(dtype, fmod):
    a = data((4, 6), dtype)
    b = data((6,), dtype)
    b[b == 0] = 3
    want = np.fmod(a, b) if fmod else np.mod(a, b)
    same(run1("mod", [a, b], [fmod], dtype, (4, 6)), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mod_floats(dtype):
    x = np.array([0.0, -0.0, 0.0, -0.0, -3.0, 3.0, -1.0, 1.0, np.inf, -np.inf, 1.0, 1.0, np.nan,
                  1.0, -4.3, 7.2, 5.0, 4.3, -7.2, 8.0], dtype)
    y = np.array([-2.0, 2.0, 2.0, -2.0, np.inf, np.inf, -np.inf, -np.inf, 2.0, 2.0, 0.0, -0.0,
                  2.0, np.nan, 2.1, -3.4, 8.0, -2.1, 3.4, 5.0], dtype)
    with np.errstate(all="ignore"):
        for fmod, ref in ((False, np.mod), (True, np.fmod)):
            got = run1("mod", [x, y], [fmod], dtype, x.shape)
            want = ref(x, y)
            same(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_integer_mod_by_zero_fails_at_run():
    data_ = build("mod", [np.zeros(3, np.int32), np.zeros(3, np.int32)], [False],
                  [("int32", (3,), False)])
    with Loaded(data_) as f:
        with pytest.raises(rt.InvalidArgument, match=r"instruction 0 \(mod\).*modulo by zero"):
            f(np.ones(3, np.int32), np.array([1, 0, 2], np.int32))
        same(f(np.full(3, 7, np.int32), np.array([2, -3, 4], np.int32))[0],
             np.array([1, -2, 3], np.int32))


@pytest.mark.parametrize("op, arrays, params, out, exc, text", [
    ("min", [np.zeros(3, np.float32), np.zeros(3, np.float64)], [], ("float32", (3,)),
     rt.InvalidProgram, "dtype"),
    ("and", [np.zeros(3, np.int8), np.zeros(3, np.int8)], [], ("bool", (3,)), rt.Unsupported,
     "bool"),
    ("where", [np.zeros(3, np.int8), np.zeros(3), np.zeros(3)], [], ("float64", (3,)),
     rt.InvalidProgram, "cond"),
    ("pow", [np.zeros(3, np.int8), np.zeros(3)], [], ("int8", (3,)), rt.Unsupported, "a has"),
    ("max", [np.zeros((2, 3)), np.zeros((4,))], [], ("float64", (2, 4)), rt.InvalidProgram,
     "broadcast"),
    ("reduce_sum", [np.zeros((2, 3))], [[1, -1], True], ("float64", (2, 1)), rt.InvalidProgram,
     "more than once"),
    ("reduce_mean", [np.zeros((2, 3), np.int32)], [[1], True], ("int32", (2, 1)),
     rt.Unsupported, "float32 and float64"),
    ("argmax", [np.zeros((2, 0))], [1, True, False], ("int64", (2, 1)), rt.InvalidProgram,
     "size 0"),
    ("topk", [np.zeros((2, 3))], [4, 1, True, True], None, rt.InvalidProgram, "k is 4"),
    ("cumsum", [np.zeros((2, 3))], [2, False, False], ("float64", (2, 3)), rt.InvalidProgram,
     "axis 2"),
])
def test_load_errors(op, arrays, params, out, exc, text):
    outs = [(out[0], out[1], False)] if out else [("float64", (2, 3), False),
                                                   ("int64", (2, 3), False)]
    with rt.Program.load(build(op, arrays, params, outs)) as program:
        with pytest.raises(exc) as info:
            program.load_method("forward")
    assert f"instruction 0 ({op})" in str(info.value) and text in str(info.value), info.value


# ---- reductions ------------------------------------------------------------------------------

def ref_reduce(op, x, axes, keepdims):
    axes = tuple(axes)
    x64 = x.astype(np.float64) if x.dtype.kind == "f" else x
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if op == "reduce_max":
            r = np.maximum.reduce(x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype))
        elif op == "reduce_min":
            r = np.minimum.reduce(x, axis=axes, keepdims=keepdims, initial=_highest(x.dtype))
        elif op == "reduce_sum":
            r = np.sum(x64, axis=axes, keepdims=keepdims)
        elif op == "reduce_mean":
            r = np.mean(x64, axis=axes, keepdims=keepdims)
        elif op == "reduce_prod":
            r = np.prod(x64, axis=axes, keepdims=keepdims)
        elif op == "reduce_l1":
            r = np.sum(np.abs(x64), axis=axes, keepdims=keepdims)
        elif op == "reduce_l2":
            r = np.sqrt(np.sum(x64 * x64, axis=axes, keepdims=keepdims))
        elif op == "reduce_log_sum":
            r = np.log(np.sum(x64, axis=axes, keepdims=keepdims))
        elif op == "reduce_log_sum_exp":
            r = np.log(np.sum(np.exp(x64), axis=axes, keepdims=keepdims))
        else:
            r = np.sum(x64 * x64, axis=axes, keepdims=keepdims)
    return np.asarray(r).astype(x.dtype)


def _lowest(dtype):
    return False if dtype == np.bool_ else (-np.inf if dtype.kind == "f" else np.iinfo(dtype).min)


def _highest(dtype):
    return True if dtype == np.bool_ else (np.inf if dtype.kind == "f" else np.iinfo(dtype).max)


REDUCE_DTYPES = {
    "reduce_sum": ("float32", "int32", "uint8"), "reduce_mean": ("float32", "float64"),
    "reduce_prod": ("float64", "int64"), "reduce_max": ("float32", "int16", "bool"),
    "reduce_min": ("float64", "uint32", "bool"), "reduce_l1": ("float32", "int8"),
    "reduce_l2": ("float32",), "reduce_log_sum": ("float64",),
    "reduce_log_sum_exp": ("float32", "float64"), "reduce_sum_square": ("float32", "int32"),
}
REDUCE_CASES = [((3, 4, 5), [[0], [1], [2], [0, 2], [-1, 0, 1], []]),
                ((2, 0, 3), [[1], [0, 2], []]), ((), [[]]), ((1, 7, 1, 130), [[3], [0, 1], [1, 3]])]


@pytest.mark.parametrize("op", sorted(REDUCE_DTYPES))
def test_reduce(op):
    for dtype, (shape, axes_list), keepdims in itertools.product(
            REDUCE_DTYPES[op], REDUCE_CASES, (True, False)):
        x = data(shape, dtype)
        if op == "reduce_log_sum":
            x = np.abs(x) + 0.1
        if dtype.startswith("float") and x.size > 3:
            x.ravel()[3] = np.nan
        for axes in axes_list:
            want = ref_reduce(op, x, axes, keepdims)
            got = run1(op, [x], [axes, keepdims], dtype, want.shape)
            same(got, want, 1e-4 if dtype == "float32" else None)


def test_reduce_axes_from_a_tensor():
    x = data((2, 3, 4), "float32")
    outs = [("float32", (2, 3, 4), True)]
    with Loaded(build("reduce_sum", [x, np.zeros(2, np.int64)], [True], outs,
                      tensor_params=[0])) as f:
        for axes in ([0, 2], [-1, 1], [2, 0]):
            same(f(x, np.array(axes, np.int64))[0], x.sum(axis=tuple(axes), keepdims=True))
        with pytest.raises(rt.InvalidArgument, match="more than once"):
            f(x, np.array([1, -2], np.int64))
        with pytest.raises(rt.InvalidArgument, match="out of range"):
            f(x, np.array([0, 3], np.int64))
    outs = [("float32", (4,), True)]  # bounds: the largest remaining dimension
    with Loaded(build("reduce_max", [x, np.zeros(2, np.int32)], [False], outs,
                      tensor_params=[0])) as f:
        for axes in ([0, 2], [0, 1], [1, 2]):
            same(f(x, np.array(axes, np.int32))[0], x.max(axis=tuple(axes)))


def test_reduce_dynamic_input():
    x = data((5, 6), "float64")
    outs = [("float64", (5, 1), True)]
    with Loaded(build("reduce_mean", [x], [[1], True], outs, bounds={0: (5, 6)})) as f:
        for rows, cols in ((5, 6), (2, 3), (0, 4), (3, 0)):
            part = np.ascontiguousarray(x[:rows, :cols])
            same(f(part)[0], ref_reduce("reduce_mean", part, [1], True))


# ---- argmax, argmin --------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce(op):
    ref = np.argmax if op == "argmax" else np.argmin
    x = RNG.integers(0, 3, (4, 5, 70)).astype(np.float32)  # many ties
    x[1, 2, 3] = x[2, 4, 5] = x[2, 1, 5] = np.nan
    for axis, keepdims, last in itertools.product((0, 1, -1), (True, False), (False, True)):
        for dtype in ("float32", "int32", "uint8"):
            xi = x if dtype == "float32" else np.nan_to_num(x).astype(dtype)
            if last:
                flipped = np.flip(xi, axis)
                want = xi.shape[axis] - 1 - ref(flipped, axis=axis, keepdims=keepdims)
            else:
                want = ref(xi, axis=axis, keepdims=keepdims)
            got = run1(op, [xi], [axis, keepdims, last], "int64", want.shape)
            same(got, want.astype(np.int64))


# ---- cumsum ----------------------------------------------------------------------------------

def ref_cumsum(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y.astype(np.float64) if x.dtype.kind == "f" else y, axis=axis)
    if exclusive:
        c = c - (y.astype(np.float64) if x.dtype.kind == "f" else y)
    c = np.flip(c, axis) if reverse else c
    return c.astype(x.dtype)


@pytest.mark.parametrize("shape", [(7,), (3, 70), (2, 0, 3), (4, 1, 5)])
def test_cumsum(shape):
    for dtype, exclusive, reverse in itertools.product(("float32", "int64", "uint8"),
                                                       (False, True), (False, True)):
        x = data(shape, dtype)
        for axis in range(-len(shape), len(shape)):
            want = ref_cumsum(x, axis, exclusive, reverse)
            same(run1("cumsum", [x], [axis, exclusive, reverse], dtype, shape), want, 1e-5)


def test_cumsum_axis_from_a_tensor():
    x = data((3, 4), "float32")
    with Loaded(build("cumsum", [x, np.zeros((), np.int32)], [False, True],
                      [("float32", (3, 4), False)], tensor_params=[0])) as f:
        for axis in (0, 1, -1):
            same(f(x, np.array(axis, np.int32))[0], ref_cumsum(x, axis, False, True), 1e-5)
        with pytest.raises(rt.InvalidArgument, match="axis 2"):
            f(x, np.array(2, np.int32))


# ---- topk ------------------------------------------------------------------------------------

def ref_topk(x, k, axis, largest):
    idx = np.indices(x.shape)[axis]
    order = np.lexsort((-idx if largest else idx, x), axis=axis)
    if largest:
        order = np.flip(order, axis)
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis), order.astype(np.int64)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest):
    x = RNG.integers(0, 5, (3, 9, 4)).astype(np.float32)  # ties broken by the lower index
    x[0, 2, 1] = x[0, 5, 1] = x[2, 0, 3] = np.nan
    for dtype in ("float32", "int16", "uint64"):
        xi = x if dtype == "float32" else np.nan_to_num(x).astype(dtype)
        for axis, k in ((1, 0), (1, 4), (1, 9), (0, 2), (-1, 3)):
            shape = list(xi.shape)
            shape[axis] = k
            values, indices = run("topk", [xi], [k, axis, largest, True],
                                  [(dtype, shape, False), ("int64", shape, False)])
            want_v, want_i = ref_topk(xi, k, axis, largest)
            same(values, want_v)
            same(indices, want_i)


def test_topk_k_from_a_tensor():
    x = data((2, 6), "float64")
    outs = [("float64", (2, 6), True), ("int64", (2, 6), True)]
    with Loaded(build("topk", [x, np.zeros(1, np.int64)], [1, True, True], outs,
                      tensor_params=[0])) as f:
        for k in (0, 1, 6):
            values, indices = f(x, np.array([k], np.int64))
            want_v, want_i = ref_topk(x, k, 1, True)
            same(values, want_v)
            same(indices, want_i)
        with pytest.raises(rt.InvalidArgument, match="k is 7"):
            f(x, np.array([7], np.int64))


# ---- several threads -------------------------------------------------------------------------

def test_large_inputs_on_several_threads():
    """Large enough to split into many parallel chunks; results as on one thread."""
    x = data((300, 700), "float32")
    cases = [("reduce_sum", [[1], False], [("float32", (300,), False)],
              lambda: [ref_reduce("reduce_sum", x, [1], False)]),
             ("reduce_max", [[0], True], [("float32", (1, 700), False)],
              lambda: [x.max(axis=0, keepdims=True)]),
             ("argmin", [0, False, False], [("int64", (700,), False)],
              lambda: [x.argmin(axis=0)]),
             ("cumsum", [0, True, False], [("float32", (300, 700), False)],
              lambda: [ref_cumsum(x, 0, True, False)]),
             ("topk", [5, 1, True, True],
              [("float32", (300, 5), False), ("int64", (300, 5), False)],
              lambda: list(ref_topk(x, 5, 1, True)))]
    for op, params, outs, ref in cases:
        with Loaded(build(op, [x], params, outs), num_threads=4) as f:
            for got, want in zip(f(x), ref()):
                same(got, want, 1e-4)
    a, b = data((300, 700), "int32"), data((700,), "int32")
    b[b == 0] = 1
    with Loaded(build("mod", [a, b], [False], [("int32", (300, 700), False)]), 4) as f:
        same(f(a, b)[0], np.mod(a, b))


@pytest.mark.parametrize("dtype", ["uint8", "uint32", "int8", "int64"])
def test_bit_shifts_match_numpy(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    a = rng.integers(info.min, info.max, size=(4, 5), dtype=dtype, endpoint=True)
    bits = np.dtype(dtype).itemsize * 8
    b = np.array([0, 1, bits - 1, bits, bits + 3], dtype=dtype)  # broadcast along rows
    for op, ref in (("bit_shift_left", np.left_shift), ("bit_shift_right", np.right_shift)):
        data = build(op, [a, b], [], [(dtype, a.shape, False)])
        with rt.Program.load(data) as program, program.load_method("forward") as f:
            got = np.asarray(f(a, b)[0])
        want = np.where(b >= bits, np.where((a < 0) & (op == "bit_shift_right"), -1, 0), ref(a, np.minimum(b, bits - 1)))
        np.testing.assert_array_equal(got, want.astype(dtype))
