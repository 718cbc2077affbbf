"""The unary math, activation and cast ops (docs/ops.md, abs ... cast) through the builder,
against numpy: a few shapes (0-d, zero-size, odd sizes), special values, broadcasting, in place,
dynamic sizes, and the load-time errors."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

SHAPES = [(), (0,), (7,), (3, 5), (2, 0, 3), (2, 3, 33)]
SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30, 30.0, -30.0, 100.0, -100.0,
           np.inf, -np.inf, np.nan]


def run(op: str, xs: Sequence[np.ndarray], params: Sequence[Any] = (),
        out_dtype: Optional[str] = None, in_place: bool = False,
        max_shape: Optional[Sequence[int]] = None) -> np.ndarray:
    """forward(x, ...) = op(x, ..., *params) as a one-op program."""
    b = ProgramBuilder()
    m = b.method("forward")
    values = []
    for i, x in enumerate(xs):
        bound = max_shape if i == 0 else None
        dtype = "bfloat16" if x.dtype.name == "bfloat16" else str(x.dtype)
        values.append(m.input(f"x{i}", dtype, x.shape, max_shape=bound))
    x0 = values[0]
    if in_place:
        y = m.copy(x0)
        m.call(op, y, *values[1:], *params, out=y)
    else:
        (y,) = m.call(op, *values, *params,
                      outputs=[(out_dtype or x0.dtype, x0.shape, max_shape is not None)])
    m.output(y, "y")
    program = rt.Program.load(b.to_bytes())
    method = program.load_method("forward")
    try:
        (result,) = method(*xs)
        return np.array(result.numpy() if hasattr(result, "numpy") else result)
    finally:
        method.close()
        program.close()


def floats(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if x.size >= len(SPECIAL):
        x.reshape(-1)[:len(SPECIAL)] = SPECIAL
    return x


def erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


def softplus(x):
    return np.logaddexp(x, 0).astype(x.dtype)


REFERENCES = {
    "abs": np.abs, "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "reciprocal": lambda x: (1 / x).astype(x.dtype), "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "sign": np.sign, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "erf": erf, "sigmoid": lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype),
    "softplus": softplus, "softsign": lambda x: x / (1 + np.abs(x)),
    "hard_swish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "mish": lambda x: x * np.tanh(softplus(x)),
    "silu": lambda x: x / (1 + np.exp(-x.astype(np.float64))),
}


@pytest.mark.parametrize("op", sorted(REFERENCES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_unary(op, dtype):
    with np.errstate(all="ignore"):
        for shape in SHAPES:
            x = floats(shape, dtype)
            got, want = run(op, [x]), REFERENCES[op](x).astype(dtype)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-12,
                                       atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("op,params,reference", [
    ("hard_sigmoid", (0.2, 0.5), lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("leaky_relu", (0.1,), lambda x: np.where(x < 0, 0.1 * x, x)),
    ("elu", (0.7,), lambda x: np.where(x < 0, 0.7 * np.expm1(x), x)),
    ("selu", (1.6732632423543772, 1.0507009873554805),
     lambda x: 1.0507009873554805 * np.where(x <= 0, 1.6732632423543772 * np.expm1(x), x)),
    ("gelu", (False,), lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
    ("gelu", (True,),
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
])
def test_parametrized_activations(op, params, reference):
    with np.errstate(all="ignore"):
        for dtype in ("float32", "float64"):
            x = floats((4, 9), dtype)
            want = reference(x.astype(np.float64)).astype(dtype)
            np.testing.assert_allclose(run(op, [x], params), want, rtol=1e-5, atol=1e-6,
                                       equal_nan=True)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
def test_integer_abs_neg_sign(dtype):
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, -1, 0, 1, info.max] if info.min < 0 else \
        [0, 1, 2, info.max - 1, info.max]
    x = np.array(values, dtype=dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run("abs", [x]), np.abs(x))
        np.testing.assert_array_equal(run("sign", [x]), np.sign(x))
        if info.min < 0:  # the most negative value wraps to itself
            np.testing.assert_array_equal(run("neg", [x]), np.negative(x))


def test_in_place_and_dynamic():
    x = floats((3, 5), "float32") / 10
    np.testing.assert_allclose(run("exp", [x], in_place=True), np.exp(x), rtol=2e-6)
    small = x[:2]
    np.testing.assert_allclose(run("tanh", [small], max_shape=(3, 5)), np.tanh(small), rtol=2e-6)


# ---- clip, prelu, predicates -------------------------------------------------------------

def test_clip_bounds():
    x = floats((4, 6), "float32")
    lo, hi = np.array(-1.0, np.float32), np.array([[2.0]], np.float32)
    np.testing.assert_array_equal(run("clip", [x, lo, hi]), np.clip(x, -1, 2))
    np.testing.assert_array_equal(run("clip", [x], (-0.5, None)), np.clip(x, -0.5, None))
    np.testing.assert_array_equal(run("clip", [x], (None, 1)), np.clip(x, None, 1))
    np.testing.assert_array_equal(run("clip", [x], (2.0, 1.0)), np.clip(x, 2, 1))  # min > max
    xi = np.array([-128, -5, 0, 5, 127], np.int8)
    np.testing.assert_array_equal(run("clip", [xi], (-1000, 3)), np.clip(xi, -128, 3))
    xu = np.array([0, 1, 2**64 - 1], np.uint64)
    np.testing.assert_array_equal(run("clip", [xu], (-5, None)), xu)
    np.testing.assert_array_equal(run("clip", [np.zeros((0, 3), np.float64)], (0.0, 1.0)),
                                  np.zeros((0, 3)))


@pytest.mark.parametrize("x_shape,slope_shape", [((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)),
                                                 ((2, 3, 4), ()), ((2, 3, 4), (2, 3, 4)),
                                                 ((3, 0, 2), (1, 2)), ((5,), (1,))])
def test_prelu_broadcasting(x_shape, slope_shape):
    x = floats(x_shape, "float32")
    slope = floats(slope_shape, "float32", seed=1)
    np.testing.assert_array_equal(run("prelu", [x, slope]), np.where(x < 0, x * slope, x))
    xi = np.arange(-12, 12, dtype=np.int32).reshape(2, 3, 4)
    si = np.array([[2], [3], [-1]], np.int32)
    np.testing.assert_array_equal(run("prelu", [xi, si]), np.where(xi < 0, xi * si, xi))


def test_isnan_isinf_not():
    x = np.array([0.0, np.nan, np.inf, -np.inf, -1.0], np.float64)
    np.testing.assert_array_equal(run("isnan", [x], out_dtype="bool"), np.isnan(x))
    for pos in (False, True):
        for neg in (False, True):
            want = (pos & (x == np.inf)) | (neg & (x == -np.inf))
            np.testing.assert_array_equal(run("isinf", [x], (pos, neg), out_dtype="bool"), want)
    b = np.array([[True, False], [False, True]])
    np.testing.assert_array_equal(run("not", [b]), ~b)


# ---- along an axis -------------------------------------------------------------------------

@np.errstate(invalid="ignore")
def test_log_softmax_and_hardmax():
    x = floats((3, 4, 5), "float64", seed=2)  # with NaN and ±inf in some slices
    for axis in (0, 1, 2, -1):
        shifted = x - x.max(axis=axis, keepdims=True)
        want = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        np.testing.assert_allclose(run("log_softmax", [x], (axis,)), want, rtol=1e-12)
        onehot = np.zeros_like(x)
        np.put_along_axis(onehot, np.expand_dims(x.argmax(axis=axis), axis), 1, axis)
        np.testing.assert_array_equal(run("hardmax", [x], (axis,)), onehot)
    large = np.array([[10000.0, 10001.0, 10002.0, 10003.0]], np.float32)
    np.testing.assert_allclose(run("log_softmax", [large], (1,)),
                               [[-3.4401896, -2.4401896, -1.4401897, -0.44018966]], rtol=1e-6)
    ties = np.array([[1.0, 3.0, 3.0, np.nan, 3.0], [2.0, 2.0, 1.0, 0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(run("hardmax", [ties], (-1,)),
                                  [[0, 0, 0, 1, 0], [1, 0, 0, 0, 0]])
    assert run("hardmax", [np.float32(5.0).reshape(())], (0,)) == 1


# ---- cast ----------------------------------------------------------------------------------

NUMPY_DTYPES = ["float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
                "uint16", "uint32", "uint64", "bool"]


@pytest.mark.parametrize("source", NUMPY_DTYPES)
def test_cast_matches_numpy(source):
    """Values every target can hold exactly or by rounding, so numpy is the reference."""
    values = np.array([0, 1, 2, 3, 5, 7, 100, 127], np.float64)
    if source not in ("bool",) and not source.startswith("uint"):
        values = np.concatenate([values, -values])
    if source.startswith("float"):
        values = np.concatenate([values, [0.5, 1.5, 2.7, -2.7, 126.9]])
    x = values.astype(source).reshape(1, -1)
    for target in NUMPY_DTYPES:
        fits = x if not target.startswith("uint") else np.abs(x)
        want = fits.astype(target)
        got = run("cast", [fits], out_dtype=target)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"{source} -> {target}")


def test_cast_float16_rounding_and_limits():
    bits = np.arange(0, 65536, 7, dtype=np.uint16).view(np.float16)
    np.testing.assert_array_equal(run("cast", [bits], out_dtype="float32"),
                                  bits.astype(np.float32))
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, np.float32([65504, 65519.99, 65520, 2.9802322e-08, -0.0])])
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    got = run("cast", [x], out_dtype="float16")
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert same.all()
    big = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.7, -300.7, -0.9], np.float64)
    np.testing.assert_array_equal(run("cast", [big], out_dtype="int8"),
                                  [0, 127, -128, 127, -128, 127, -128, 0])
    np.testing.assert_array_equal(run("cast", [big], out_dtype="uint64"),
                                  [0, 2**64 - 1, 0, 2**64 - 1, 0, 300, 0, 0])
    assert run("cast", [np.zeros((2, 0), np.float32)], out_dtype="int64").shape == (2, 0)


def test_cast_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = floats((5, 7), "float32")
    got = run("cast", [x], out_dtype="bfloat16")
    want = x.astype(ml_dtypes.bfloat16)
    assert got.dtype == want.dtype
    assert ((got.view(np.uint16) == want.view(np.uint16)) | np.isnan(x)).all()
    back = run("cast", [want], out_dtype="float64")
    np.testing.assert_array_equal(back, want.astype(np.float64))


# ---- load-time errors ----------------------------------------------------------------------

def test_load_errors():
    with pytest.raises(rt.Unsupported, match=r"\(exp\): x has dtype int32"):
        run("exp", [np.zeros(3, np.int32)])
    with pytest.raises(rt.InvalidProgram, match=r"\(clip\): min is a double"):
        run("clip", [np.zeros(3, np.int32)], (0.5, None))
    with pytest.raises(rt.InvalidProgram, match=r"\(clip\): min must hold exactly one element"):
        run("clip", [np.zeros(3, np.float32), np.zeros(2, np.float32)], (None,))
    with pytest.raises(rt.InvalidProgram, match=r"\(prelu\): slope \[3\] must broadcast"):
        run("prelu", [np.zeros((2, 1), np.float32), np.zeros(3, np.float32)])
    with pytest.raises(rt.InvalidProgram, match=r"\(hardmax\): axis 2 is out of range"):
        run("hardmax", [np.zeros((2, 3), np.float32)], (2,))
    with pytest.raises(rt.InvalidProgram, match=r"\(isinf\): out has dtype float32"):
        run("isinf", [np.zeros(3, np.float32)], (True, True))


# ---- the converter: float16/bfloat16 through float32 kernels -------------------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_onnx_half_ops_run_in_float32(dtype):
    """Ops of FLOAT32_COMPUTED on half inputs: cast up, computed, cast back to the half dtype."""
    pytest.importorskip("onnx")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from onnx import TensorProto, helper, numpy_helper

    from runtime_py.onnx.backend import RuntimeBackend

    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    elem = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.BFLOAT16
    bias = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32).astype(np_dtype), "b")
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Add", ["t", "b"], ["s"]),
             helper.make_node("IsNaN", ["s"], ["n"]),
             helper.make_node("Clip", ["s", "lo"], ["y"])]
    lo = numpy_helper.from_array(np.array(0.0, np.float32).astype(np_dtype), "lo")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, [2, 3])],
                              [helper.make_tensor_value_info("y", elem, [2, 3]),
                               helper.make_tensor_value_info("n", TensorProto.BOOL, [2, 3])],
                              [bias, lo])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([[0.1, -2.0, 3.0], [np.nan, 0.7, -0.2]], np.float32).astype(np_dtype)
    rep = RuntimeBackend.prepare(model)
    try:
        y, n = rep.run([x])
    finally:
        rep.method.close()
    t = np.tanh(x.astype(np.float32)).astype(np_dtype)
    s = (t.astype(np.float32) + np.array([0.5, -1.0, 2.0], np.float32)).astype(np_dtype)
    want = np.maximum(s.astype(np.float32), 0).astype(np_dtype)  # NaN stays NaN
    assert y.dtype == np.dtype(np_dtype) and n.dtype == np.bool_
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(n, np.isnan(s.astype(np.float32)))
