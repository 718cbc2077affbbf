"""Every op the CUDA backend covers, run on the GPU and compared with the same program on the
CPU (the reference the CPU tests check against numpy), plus the device-specific behaviour:
zero-copy device inputs, strided host inputs, dynamic shapes, jumps on device conditions,
attributes, output clones, and the ops and dtypes a CUDA method refuses by name."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py import cuda
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")
from tests.programs import counted_loop, rich_program  # noqa: E402 (needs numpy)

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(7)


def _run_both(program: bytes, *inputs, method: str = "forward"):
    """Outputs of the program on the CPU and on cuda:0, as numpy arrays."""
    with rt.Program.load(program) as p:
        with p.load_method(method) as cpu, p.load_method(method, device="cuda") as gpu:
            want = cpu(*inputs)
            got = gpu(*inputs)
            assert all(t.device == "cuda:0" for t in got if isinstance(t, rt.Tensor))
            return ([np.asarray(t) for t in want],
                    [np.asarray(t.to_host()) for t in got])


def _assert_same(program: bytes, *inputs, rtol=1e-5, atol=1e-6):
    want, got = _run_both(program, *inputs)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def _unary_program(op, dtype, shape, *params, out_dtype=None) -> bytes:
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", dtype, shape)
    m.output(m.call(op, x, *params, outputs=[(out_dtype or dtype, shape, False)])[0])
    return b.to_bytes()


# ---- elementwise ---------------------------------------------------------------------------

UNARY = [
    ("abs", ()), ("neg", ()), ("exp", ()), ("log", ()), ("sqrt", ()), ("reciprocal", ()),
    ("floor", ()), ("ceil", ()), ("round", ()), ("sign", ()), ("sin", ()), ("cos", ()),
    ("tan", ()), ("tanh", ()), ("erf", ()), ("sigmoid", ()), ("hard_sigmoid", (0.2, 0.5)),
    ("leaky_relu", (0.1,)), ("elu", (1.0,)), ("selu", (1.6733, 1.0507)), ("gelu", (False,)),
    ("gelu", (True,)), ("softplus", ()), ("softsign", ()), ("hard_swish", ()), ("mish", ()),
    ("silu", ()), ("relu", ()), ("clip", (-0.5, 0.75)), ("clip", (None, 0.25)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,params", UNARY, ids=[f"{o}{i}" for i, (o, _) in enumerate(UNARY)])
def test_unary(op, params, dtype):
    x = (RNG.standard_normal((3, 37)) * 3).astype(dtype)
    if op in ("log", "sqrt"):
        x = np.abs(x) + 0.1
    x[0, :4] = [0.0, -0.0, 2.5, -2.5]  # rounding halves and signed zeros
    _assert_same(_unary_program(op, dtype, x.shape, *params), x, rtol=2e-6 if dtype ==
                 "float32" else 1e-12, atol=1e-6 if dtype == "float32" else 1e-12)


INT_UNARY = [("abs", ()), ("neg", ()), ("sign", ()), ("relu", ()), ("clip", (-5, 7)),
             ("clip", (None, 3)), ("clip", (-1000, 100000)), ("clip", (9, 2))]
SIGNED_ONLY = ("neg", "relu")


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64"])
@pytest.mark.parametrize("op,params", INT_UNARY, ids=[f"{o}{i}" for i, (o, _) in
                                                      enumerate(INT_UNARY)])
def test_integer_unary(op, params, dtype):
    if op in SIGNED_ONLY and dtype.startswith("u"):
        pytest.skip(f"{op} takes signed integers only (as on the CPU)")
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (3, 37), dtype=dtype, endpoint=True)
    x.flat[:4] = [info.min, info.max, 0, 1]  # the most negative value wraps under abs / neg
    _assert_same(_unary_program(op, dtype, x.shape, *params), x)


@pytest.mark.parametrize("dtype", ["int16", "uint32", "float32"])
def test_clip_with_tensor_bounds_of_integer_and_float_x(dtype):
    x = (RNG.standard_normal((4, 9)) * 50).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("clip", m.input("x", dtype, x.shape), m.input("lo", dtype, ()),
                    m.input("hi", dtype, (1,)), outputs=[(dtype, x.shape, False)])[0])
    _assert_same(b.to_bytes(), x, np.array(3, dtype), np.array([40], dtype))


@pytest.mark.parametrize("op,params", [("isnan", ()), ("isinf", (True, False)),
                                       ("isinf", (False, True)), ("isinf", (True, True))])
def test_float_tests_write_bool(op, params):
    x = np.array([1.0, np.nan, np.inf, -np.inf, -0.0, 3e38], np.float32)
    _assert_same(_unary_program(op, "float32", x.shape, *params, out_dtype="bool"), x)


BINARY = ["add", "sub", "mul", "div", "less", "equal", "less_equal", "min", "max", "pow"]
BOOL_RESULT = ("less", "equal", "less_equal")
SHAPES = [((4, 5), (4, 5)), ((2, 3, 4), (3, 1)), ((1,), (6, 1, 2)), ((), (3,))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_broadcasting(op, dtype, shapes):
    # Small integers make the comparisons meet every case; div gets no zero divisor.
    a = RNG.integers(-3, 4, shapes[0]).astype(dtype)
    c = RNG.integers(-3, 4, shapes[1]).astype(dtype)
    if op == "div":
        c[c == 0] = 2
    if op in ("min", "max") and dtype.startswith("float") and a.size > 1:
        a.flat[1] = np.nan  # propagates
    if op == "pow" and dtype.startswith("float"):
        a = np.abs(a) + 0.5
    b = ProgramBuilder()
    m = b.method("forward")
    x, y = m.input("a", dtype, shapes[0]), m.input("b", dtype, shapes[1])
    shape = np.broadcast_shapes(shapes[0], shapes[1])
    m.output(m.call(op, x, y, outputs=[("bool" if op in BOOL_RESULT else dtype, shape,
                                        False)])[0])
    _assert_same(b.to_bytes(), a, c, rtol=1e-6 if dtype == "float32" else 1e-14)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (2, 3, 4, 5)], ids=str)
def test_prelu(slope_shape, dtype):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(dtype)
    slope = RNG.standard_normal(slope_shape).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("prelu", m.input("x", dtype, x.shape), m.input("s", dtype, slope.shape),
                    outputs=[(dtype, x.shape, False)])[0])
    _assert_same(b.to_bytes(), x, slope)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fmod", [False, True])
def test_mod(fmod, dtype):
    a = (RNG.standard_normal((3, 40)) * 10).astype(dtype)
    c = (RNG.standard_normal((40,)) * 3).astype(dtype)
    c[:3] = [0.0, -2.0, 2.0]
    a[0, :4] = [4.0, -4.0, -0.0, 7.0]
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("mod", m.input("a", dtype, a.shape), m.input("b", dtype, c.shape), fmod,
                    outputs=[(dtype, a.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), a, c)
    np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want[0]))
    np.testing.assert_array_equal(got[0], want[0])  # exact, NaN where both are


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["div", "mod", "mod_fmod", "pow", "prelu"])
def test_integer_division_remainder_power_and_prelu(op, dtype):
    """Truncating division, both remainders, exact wrapping powers (negative exponents too),
    wrapping prelu products; the most negative value with -1."""
    info = np.iinfo(dtype)
    a = RNG.integers(-50, 50, (3, 8)).astype(dtype)
    c = RNG.integers(-7, 8, (8,)).astype(dtype)
    a[0, :4] = [info.min, info.min, info.max, -7]
    c[:4] = [-1, 3, -1, 2]
    if op == "pow":
        a[1, :6] = [1, -1, -1, 0, 3, 2]
        c[4:8] = [-3, 0, 31, 63]
    elif op != "prelu":
        c[c == 0] = 5
    name = "mod" if op.startswith("mod") else op
    extra = (op == "mod_fmod",) if name == "mod" else ()
    shape = a.shape
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(name, m.input("a", dtype, shape), m.input("b", dtype, c.shape), *extra,
                    outputs=[(dtype, shape, False)])[0])
    _assert_same(b.to_bytes(), a, c)


SMALL_INTS = ["int8", "int16", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", SMALL_INTS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "mod", "mod_fmod", "min", "max",
                                "less", "less_equal", "equal", "prelu"])
def test_binary_ops_on_every_integer_type(op, dtype):
    """Wrapping sums and products, truncating division, both remainders, comparisons."""
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (3, 8), endpoint=True, dtype=dtype)
    c = RNG.integers(info.min, info.max, (8,), endpoint=True, dtype=dtype)
    a[0, :4] = [info.min, info.max, info.max, 7]
    c[:4] = [info.max if info.min == 0 else -1, 3, info.max, 2]
    if op in ("div", "mod", "mod_fmod"):
        c[c == 0] = 5
    name = "mod" if op.startswith("mod") else op
    extra = (op == "mod_fmod",) if name == "mod" else ()
    out = "bool" if op in BOOL_RESULT else dtype
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(name, m.input("a", dtype, a.shape), m.input("b", dtype, c.shape), *extra,
                    outputs=[(out, a.shape, False)])[0])
    _assert_same(b.to_bytes(), a, c)


@pytest.mark.parametrize("base", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("exponent", ["float32", "float64", "int8", "int64", "uint8", "uint64"])
def test_pow_with_an_exponent_of_another_dtype(base, exponent):
    if base == exponent:
        pytest.skip("the same dtype: test_binary_broadcasting")
    a = RNG.integers(-4, 5, (3, 6)).astype(base)
    a[0, :3] = [1, -1, 0]
    c = RNG.integers(0 if exponent.startswith("u") else -3, 5, (6,)).astype(exponent)
    if exponent.startswith("float"):
        c = c + np.array(0.5, exponent)  # fractional powers of negatives: NaN (int: 0)
    if exponent == "uint64":
        c[0] = np.uint64(2**63 + 1)  # an odd exponent above the int64 range
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("pow", m.input("a", base, a.shape), m.input("b", exponent, c.shape),
                    outputs=[(base, a.shape, False)])[0])
    _assert_same(b.to_bytes(), a, c, rtol=1e-6 if base == "float32" else 1e-14)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint64", "int64"])
def test_max_pool_on_integers(dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (2, 3, 7, 8), endpoint=True, dtype=dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    m.output(m.max_pool2d(xv, 3, 2, 1, dilation=1, ceil_mode=True))
    m.output(m.max_pool2d(xv, 2, 1, 3, dilation=2, ceil_mode=False))  # padding-only windows
    _assert_same(b.to_bytes(), x)


def test_equal_on_bool():
    a, c = RNG.random((4, 5)) < 0.5, RNG.random((5,)) < 0.5
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("equal", m.input("a", "bool", a.shape), m.input("b", "bool", c.shape),
                    outputs=[("bool", a.shape, False)])[0])
    _assert_same(b.to_bytes(), a, c)


@pytest.mark.parametrize("op", ["div", "mod"])
def test_an_integer_zero_divisor_fails_the_execute_before_writing(op):
    b = ProgramBuilder()
    m = b.method("forward")
    extra = (False,) if op == "mod" else ()
    m.output(m.call(op, m.input("a", "int64", (4,)), m.input("b", "int64", (4,)), *extra,
                    outputs=[("int64", (4,), False)])[0])
    a = np.array([7, 8, 9, 10], np.int64)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as gpu:
        word = "division" if op == "div" else "modulo"
        with pytest.raises(rt.InvalidArgument, match=f"integer {word} by zero"):
            gpu(a, np.array([1, 2, 0, 3], np.int64))
        (y,) = gpu(a, np.array([2, 2, 2, 2], np.int64))  # still usable
        assert np.asarray(y.to_host()).tolist() == ([3, 4, 4, 5] if op == "div" else [1, 0, 1, 0])


def test_not():
    x = RNG.integers(0, 2, (3, 70)).astype(bool)
    _assert_same(_unary_program("not", "bool", x.shape), x)


@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64"])
@pytest.mark.parametrize("shape,repeats", [((2, 3), [3, 2]), ((4,), [1]), ((2, 1, 3), [1, 4, 2]),
                                           ((3, 2), [0, 2])], ids=str)
def test_tile(shape, repeats, dtype):
    x = (RNG.standard_normal(shape) * 9).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("tile", m.input("x", dtype, shape), list(repeats),
                    outputs=[(dtype, tuple(s * r for s, r in zip(shape, repeats)), False)])[0])
    _assert_same(b.to_bytes(), x)


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_logic(op):
    a = RNG.integers(0, 2, (4, 1, 5)).astype(bool)
    c = RNG.integers(0, 2, (3, 1)).astype(bool)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(op, m.input("a", "bool", a.shape), m.input("b", "bool", c.shape),
                    outputs=[("bool", (4, 3, 5), False)])[0])
    _assert_same(b.to_bytes(), a, c)


INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", INT_TYPES)
@pytest.mark.parametrize("op", ["bit_shift_left", "bit_shift_right"])
def test_bit_shifts(op, dtype):
    info = np.iinfo(dtype)
    a = np.array([[0, 1, 5, info.max, info.min, info.max // 3]], dtype).T  # (6, 1)
    if info.min < 0:
        a[1, 0] = -7
    amounts = [0, 1, 3, info.bits - 1, info.bits, info.bits + 5]
    if info.min < 0:
        amounts.append(-2)  # refused nowhere: a negative amount shifts everything out
    c = np.array(amounts, dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(op, m.input("a", dtype, a.shape), m.input("b", dtype, c.shape),
                    outputs=[(dtype, (a.shape[0], c.size), False)])[0])
    want, got = _run_both(b.to_bytes(), a, c)
    np.testing.assert_array_equal(got[0], want[0])
    in_range = c[(c >= 0) & (c < info.bits)]
    shifted = (np.left_shift if op == "bit_shift_left" else np.right_shift)(a, in_range)
    np.testing.assert_array_equal(want[0][:, :in_range.size], shifted)


def test_shape_and_size_of_dynamic_inputs():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, 1, 1), max_shape=(4, 5, 6))
    for start, end in [(0, 3), (1, 100), (-2, -1), (2, 1)]:
        count = max(0, min(end if end >= 0 else end + 3, 3) - (start if start >= 0 else
                                                                start + 3))
        m.output(m.call("shape", x, start, end, outputs=[("int64", (count,), False)])[0])
    m.output(m.call("size", x, outputs=[("int64", (), False)])[0])
    for shape in [(4, 5, 6), (2, 1, 3), (1, 0, 2)]:
        _assert_same(b.to_bytes(), np.zeros(shape, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "int16", "int64", "bool"])
def test_where(dtype):
    cond = RNG.integers(0, 2, (4, 1, 5)).astype(bool)
    a = RNG.integers(-9, 9, (3, 5)).astype(dtype)
    c = RNG.integers(-9, 9, (4, 3, 1)).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    ins = [m.input("cond", "bool", cond.shape), m.input("a", dtype, a.shape),
           m.input("b", dtype, c.shape)]
    m.output(m.call("where", *ins, outputs=[(dtype, (4, 3, 5), False)])[0])
    _assert_same(b.to_bytes(), cond, a, c)


CAST_TYPES = ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("to", CAST_TYPES + ["bfloat16"])
@pytest.mark.parametrize("frm", CAST_TYPES)
def test_cast_matches_the_cpu_bit_for_bit(frm, to):
    if frm.startswith("float"):
        values = [0.0, -0.0, 1.5, -2.5, 2.5, 1e10, -1e10, np.inf, -np.inf, np.nan, -np.nan,
                  300.7, -129.9, 65519.0, 1e-8]
        with np.errstate(over="ignore"):
            x = np.array(values, dtype=frm)
    elif frm == "bool":
        x = np.array([True, False, True], dtype=bool)
    else:
        info = np.iinfo(frm)
        x = np.array([0, 1, -1 if info.min < 0 else 2, info.min, info.max, 100], dtype=frm)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.cast(m.input("x", frm, x.shape), to))
    with rt.Program.load(b.to_bytes()) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            (want,) = cpu(x)
            (got,) = gpu(x)
            assert got.to_host().tobytes() == want.tobytes()


# ---- axis ops, normalisation ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax(op, axis, dtype):
    # A last axis longer than one block of threads; few columns for the other axes.
    shape = (3, 2, 300) if axis == -1 else (3, 7, 5)
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    x[0, 0, 0] = -np.inf
    _assert_same(_unary_program(op, dtype, x.shape, axis), x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("params", ["both", "none", "scale"])
def test_layer_norm(axis, params, dtype):
    x = (RNG.standard_normal((4, 6, 70)) + 100).astype(dtype)  # a large common offset
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    tail = x.shape[axis:] if axis > 0 else x.shape[axis:]
    scale = m.constant(RNG.standard_normal(tail).astype(dtype)) if params != "none" else None
    bias = m.constant(RNG.standard_normal(tail).astype(dtype)) if params == "both" else None
    y, mean, inv = m.layer_norm(xv, scale, bias, axis=axis, stats=True)
    for v in (y, mean, inv):
        m.output(v)
    _assert_same(b.to_bytes(), x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis,scaled", [(-1, True), (1, False), (1, True)])
def test_rms_norm(axis, scaled, dtype):
    x = RNG.standard_normal((4, 6, 70)).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    scale = m.constant(RNG.standard_normal(x.shape[axis:]).astype(dtype)) if scaled else None
    m.output(m.call("rms_norm", xv, scale, axis, 1e-6, outputs=[(dtype, x.shape, False)])[0])
    _assert_same(b.to_bytes(), x, rtol=1e-5, atol=1e-6)


REDUCTIONS = ["reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min",
              "reduce_l1", "reduce_l2", "reduce_log_sum", "reduce_log_sum_exp",
              "reduce_sum_square"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes,keepdims", [([1], False), ([0, 2], True), ([-1], True), ([], False),
                                           ([0, 1, 2], False)], ids=str)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions(op, axes, keepdims, dtype):
    # Reductions longer than a block of threads, with few outputs (one block each).
    shape_of_x = {"[1]": (3, 300, 2), "[0, 2]": (300, 3, 2)}.get(str(axes), (2, 5, 3))
    x = RNG.uniform(0.5, 1.5, shape_of_x).astype(dtype)
    if op in ("reduce_max", "reduce_min"):
        x[1, 2, 1] = np.nan  # propagates
    reduced = [a % 3 for a in axes]
    if keepdims:
        shape = [1 if d in reduced else n for d, n in enumerate(x.shape)]
    else:
        shape = [n for d, n in enumerate(x.shape) if d not in reduced]
    b = ProgramBuilder()
    m = b.method("forward")
    y = m.call(op, m.input("x", dtype, x.shape), list(axes), keepdims,
               outputs=[(dtype, tuple(shape), False)])[0]
    m.output(y)
    _assert_same(b.to_bytes(), x, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-12)


INT_REDUCTIONS = ["reduce_sum", "reduce_prod", "reduce_l1", "reduce_sum_square", "reduce_max",
                  "reduce_min"]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "bool"])
@pytest.mark.parametrize("axes,keepdims", [([1], False), ([0, 2], True), ([], False),
                                           ([0, 1, 2], False)], ids=str)
@pytest.mark.parametrize("op", INT_REDUCTIONS)
def test_integer_and_bool_reductions(op, axes, keepdims, dtype):
    """Wrapping 64-bit accumulation (exact in any order), the integer extremes, any / all."""
    if dtype == "bool" and op not in ("reduce_max", "reduce_min"):
        pytest.skip("bool has max and min only (as on the CPU)")
    shape_of_x = {"[1]": (3, 300, 2), "[]": (2, 3, 2)}.get(str(axes), (4, 3, 5))
    if dtype == "bool":
        x = RNG.random(shape_of_x) < 0.97  # mostly true: all() varies
    else:
        info = np.iinfo(dtype)
        x = RNG.integers(info.min, info.max, shape_of_x, dtype=dtype, endpoint=True)
    shape = [1 if d in axes else n for d, n in enumerate(x.shape)] if keepdims else \
        [n for d, n in enumerate(x.shape) if d not in axes]
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(op, m.input("x", dtype, x.shape), list(axes), keepdims,
                    outputs=[(dtype, tuple(shape), False)])[0])
    _assert_same(b.to_bytes(), x)


def test_empty_integer_reductions_give_the_identities():
    b = ProgramBuilder()
    m = b.method("forward")
    xi, xb = m.input("x", "int16", (3, 0)), m.input("y", "bool", (2, 0))
    for op in INT_REDUCTIONS:
        m.output(m.call(op, xi, [1], False, outputs=[("int16", (3,), False)])[0])
    for op in ("reduce_max", "reduce_min"):
        m.output(m.call(op, xb, [1], False, outputs=[("bool", (2,), False)])[0])
    _assert_same(b.to_bytes(), np.zeros((3, 0), np.int16), np.zeros((2, 0), bool))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8", "uint8",
                                   "uint64"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("axis,keepdims", [(1, False), (0, True), (-1, False)])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(op, axis, keepdims, last, dtype):
    # Few distinct values: ties everywhere; a long axis 1 spans several threads' stretches.
    x = RNG.integers(-2, 3, (3, 600, 2) if axis == 1 else (3, 5, 4)).astype(dtype)
    if dtype == "int64":  # values a double cannot tell apart
        x = x + np.int64(2**62)
    if dtype == "uint64":  # above the int64 range
        x = x.astype(np.int64).astype(np.uint64) + np.uint64(2**63)
    if dtype == "uint8":
        x = (x.astype(np.int64) + 2).astype(np.uint8)
    if dtype.startswith("float"):
        x[1, 1, 1] = x[1, 4, 1] = x[2, 3, 0] = np.nan
        if axis == 1:
            x[0, 300, 0] = x[0, 555, 0] = np.nan
    shape = list(x.shape)
    if keepdims:
        shape[axis] = 1
    else:
        del shape[axis]
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(op, m.input("x", dtype, x.shape), axis, keepdims, last,
                    outputs=[("int64", tuple(shape), False)])[0])
    _assert_same(b.to_bytes(), x)


def test_empty_reductions_give_the_identities():
    x = np.zeros((2, 0, 3), np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    for op in REDUCTIONS:
        m.output(m.call(op, xv, [1], False, outputs=[("float32", (2, 3), False)])[0])
    _assert_same(b.to_bytes(), x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("groups,params", [(None, "channel"), (None, "none"), (2, "channel"),
                                           (2, "group"), (6, "none")])
def test_instance_and_group_norm(groups, params, dtype):
    x = (RNG.standard_normal((2, 6, 9, 40)) * 3 + 50).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    n = {"channel": 6, "group": groups, "none": None}[params]
    scale = m.constant(RNG.standard_normal(n).astype(dtype)) if n else None
    bias = m.constant(RNG.standard_normal(n).astype(dtype)) if n else None
    if groups is None:
        m.output(m.instance_norm(xv, scale, bias, epsilon=1e-5))
    else:
        m.output(m.group_norm(xv, scale, bias, groups, epsilon=1e-5))
    _assert_same(b.to_bytes(), x, rtol=1e-4, atol=1e-5)


# ---- products, convolutions, pooling -------------------------------------------------------

MATMUL_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 5)),
                 ((4,), (4, 5)), ((3, 4), (4,)), ((5, 70, 33), (5, 33, 65)), ((2, 3), (3, 0))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, dtype):
    """Integer products wrap (the built-in kernel, cuBLAS having no integer GEMM)."""
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        a = RNG.integers(info.min, info.max, shapes[0], endpoint=True, dtype=dtype)
        c = RNG.integers(info.min, info.max, shapes[1], endpoint=True, dtype=dtype)
    else:
        a = RNG.standard_normal(shapes[0]).astype(dtype)
        c = RNG.standard_normal(shapes[1]).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.matmul(m.input("a", dtype, a.shape), m.input("b", dtype, c.shape)))
    _assert_same(b.to_bytes(), a, c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", [None, (1, 0, 0), (2, -0.5, 0.5), (3, 0, 0), (4, 0, 0),
                                 (5, 0, 0)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(act, with_bias):
    x = RNG.standard_normal((3, 7, 40)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    w = m.constant(RNG.standard_normal((66, 40)).astype(np.float32))
    bias = m.constant(RNG.standard_normal(66).astype(np.float32)) if with_bias else None
    y = m.linear(m.input("x", "float32", x.shape), w, bias)
    if act is not None:
        assert m.fuse_activation(y, *act)
    m.output(y)
    _assert_same(b.to_bytes(), x, rtol=1e-5, atol=1e-5)


CONVS = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 9, 11), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 10, 10), (6, 2, 3, 2), 2, (1, 0, 2, 1), 1, 2),
    ((2, 8, 7, 7), (8, 1, 3, 3), 1, 1, 2, 8),   # depthwise, dilated
    ((2, 16, 5, 6), (12, 16, 1, 1), 1, 0, 1, 1),  # pointwise: the GEMM path
    ((2, 5, 8, 9), (16, 5, 3, 3), 1, (0, 2, 1, 0), (1, 2), 1),  # 8 channels a thread
    ((1, 6, 7, 8), (8, 3, 3, 3), 2, 1, 1, 2),    # 4 channels a thread, per group
]


@pytest.mark.parametrize("act", [None, (1, 0, 0), (2, 0.0, 6.0)])
@pytest.mark.parametrize("conv", CONVS, ids=str)
def test_conv2d(conv, act):
    xs, ws, stride, padding, dilation, groups = conv
    x = RNG.standard_normal(xs).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    w = m.constant(RNG.standard_normal(ws).astype(np.float32))
    bias = m.constant(RNG.standard_normal(ws[0]).astype(np.float32))
    y = m.conv2d(m.input("x", "float32", xs), w, bias, stride, padding, dilation, groups)
    if act is not None:
        assert m.fuse_activation(y, *act)
    m.output(y)
    _assert_same(b.to_bytes(), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("conv", CONVS[:3], ids=str)
def test_conv2d_float64(conv):
    xs, ws, stride, padding, dilation, groups = conv
    x = RNG.standard_normal(xs)
    b = ProgramBuilder()
    m = b.method("forward")
    w = m.constant(RNG.standard_normal(ws))
    y = m.conv2d(m.input("x", "float64", xs), w, None, stride, padding, dilation, groups)
    m.output(y)
    _assert_same(b.to_bytes(), x, rtol=1e-12, atol=1e-12)


CONV_TRANSPOSES = [  # (x shape, w shape, stride, padding, output_padding, dilation, groups)
    ((2, 3, 5, 6), (3, 4, 3, 3), 1, 1, 0, 1, 1),
    ((1, 4, 4, 5), (4, 3, 3, 2), 2, (1, 0, 2, 1), (1, 0), 1, 2),
    ((2, 6, 3, 4), (6, 1, 3, 3), (2, 3), 0, (1, 2), 2, 6),   # depthwise, dilated
    ((1, 16, 4, 4), (16, 5, 2, 2), 2, (-1, 0, 0, -2), 0, 1, 1),  # negative padding
    ((1, 2, 0, 3), (2, 2, 3, 3), 1, 0, 0, 1, 1),             # empty input: only the bias
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("conv", CONV_TRANSPOSES, ids=str)
def test_conv_transpose2d(conv, with_bias, dtype):
    xs, ws, stride, padding, output_padding, dilation, groups = conv
    x = RNG.standard_normal(xs).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    w = m.constant(RNG.standard_normal(ws).astype(dtype))
    bias = m.constant(RNG.standard_normal(ws[1] * groups).astype(dtype)) if with_bias else None
    m.output(m.conv_transpose2d(m.input("x", dtype, xs), w, bias, stride, padding,
                                output_padding, dilation, groups))
    _assert_same(b.to_bytes(), x, rtol=1e-5 if dtype == "float32" else 1e-12,
                 atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("padding", [0, 1])
def test_pooling(padding, ceil_mode, dtype):
    x = RNG.standard_normal((2, 3, 9, 10)).astype(dtype)
    x[0, 0, 0, 0] = np.nan
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    m.output(m.max_pool2d(xv, 3, 2, padding, dilation=1, ceil_mode=ceil_mode))
    m.output(m.max_pool2d(xv, 2, 1, padding, dilation=2, ceil_mode=ceil_mode))
    m.output(m.avg_pool2d(xv, 3, 2, padding, ceil_mode=ceil_mode, count_include_pad=True))
    m.output(m.avg_pool2d(xv, 3, 2, padding, ceil_mode=ceil_mode, count_include_pad=False))
    _assert_same(b.to_bytes(), x, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel,stride,padding", [(9, 3, 1), (8, 2, 0), ((12, 13), 1, 0)],
                         ids=str)
def test_average_pooling_over_large_windows(kernel, stride, padding, dtype):
    # 64 elements or more a window: one block per output element; (12, 13) is global pooling.
    x = RNG.standard_normal((2, 3, 12, 13)).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    m.output(m.avg_pool2d(xv, kernel, stride, padding, ceil_mode=True, count_include_pad=True))
    m.output(m.avg_pool2d(xv, kernel, stride, padding, ceil_mode=True, count_include_pad=False))
    _assert_same(b.to_bytes(), x, rtol=1e-6, atol=1e-6)


# ---- resize --------------------------------------------------------------------------------

def _resize_program(dtype, shape, sizes, scales, roi, mode, coord, nearest, exclude=False,
                    antialias=False, extrapolation=0.0, cubic_a=-0.75) -> bytes:
    out_shape = tuple(int(s) if s != -1 else n for s, n in zip(sizes, shape)) if sizes else \
        tuple(int(np.floor(c * n)) for c, n in zip(scales, shape))
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", dtype, shape)
    m.output(m.call("resize", x, list(sizes), [float(c) for c in scales],
                    [float(r) for r in roi], mode, coord, nearest, cubic_a, exclude, antialias,
                    extrapolation, outputs=[(dtype, out_shape, False)])[0])
    return b.to_bytes()


RESIZES = [  # (sizes, scales, roi) over x of shape (2, 3, 5, 6)
    ([], [1.0, 1.0, 2.0, 1.5], []),
    ([2, 3, 3, 4], [], []),                     # downscale to sizes
    ([2, -1, 7, 13], [], []),                   # -1 keeps x's size
    ([], [1.0, 1.0, 0.6, 0.7], []),
    ([], [1.0, 1.5, 1.0, 2.0], []),             # a channel dimension too
]
CROP_ROI = [0.0, 0.0, 0.2, -0.3, 1.0, 1.0, 0.9, 1.4]  # starts, then ends; partly outside


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("coord", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("case", RESIZES, ids=str)
def test_resize_linear_and_cubic(case, coord, mode, dtype):
    sizes, scales, roi = case
    x = RNG.standard_normal((2, 3, 5, 6)).astype(dtype)
    program = _resize_program(dtype, x.shape, sizes, scales, CROP_ROI if coord == 5 else roi,
                              mode, coord, 0, extrapolation=-7.5)
    _assert_same(program, x, rtol=1e-5 if dtype == "float32" else 1e-12,
                 atol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("exclude,antialias", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("case", [RESIZES[1], RESIZES[3], RESIZES[0]], ids=str)
def test_resize_exclude_outside_and_antialias(case, exclude, antialias, mode):
    sizes, scales, roi = case
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    program = _resize_program("float32", x.shape, sizes, scales, roi, mode, 0, 0,
                              exclude=exclude, antialias=antialias, cubic_a=-0.5)
    _assert_same(program, x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64", "float16", "bool"])
@pytest.mark.parametrize("nearest", [0, 1, 2, 3])
@pytest.mark.parametrize("coord", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("case", RESIZES, ids=str)
def test_resize_nearest_is_exact(case, coord, nearest, dtype):
    sizes, scales, roi = case
    x = RNG.integers(0, 100, (2, 3, 5, 6)).astype(dtype)
    program = _resize_program(dtype, x.shape, sizes, scales, CROP_ROI if coord == 5 else roi, 0,
                              coord, nearest, extrapolation=9.0)
    _assert_same(program, x)


def test_resize_of_a_dynamic_input_rebuilds_its_tables():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, 2, 6, 8), max_shape=(1, 2, 6, 8))
    m.output(m.call("resize", x, [], [1.0, 1.0, 2.0, 0.5], [], 1, 0, 0, -0.75, False, True,
                    0.0, outputs=[("float32", (1, 2, 12, 4), True)])[0])
    with rt.Program.load(b.to_bytes()) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            for shape in [(1, 2, 6, 8), (1, 1, 3, 5), (1, 2, 4, 2)]:
                x = RNG.standard_normal(shape).astype(np.float32)
                (want,), (got,) = cpu(x), gpu(x)
                assert got.shape == want.shape
                np.testing.assert_allclose(np.asarray(got.to_host()), np.asarray(want),
                                           rtol=1e-5, atol=1e-6)


# ---- non_zero ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int8", "int64",
                                   "uint16", "bool"])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (40, 30)], ids=str)
def test_non_zero(shape, dtype):
    """Dynamic [rank, count] results; -0.0 is zero and NaN is not; more elements than threads
    (a chunk per thread) and fewer."""
    b = ProgramBuilder()
    m = b.method("forward")
    n = int(np.prod(shape))
    src = "float32" if dtype == "bfloat16" else dtype
    x = m.input("x", src, shape)
    if dtype == "bfloat16":
        x = m.cast(x, "bfloat16")
    m.output(m.call("non_zero", x, outputs=[("int64", (len(shape), n), True)])[0])
    with rt.Program.load(b.to_bytes()) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            for density in (0.3, 0.0, 1.0):
                v = (RNG.random(shape) < density) * RNG.integers(1, 5, shape)
                v = v.astype(src)
                if src.startswith("float") and n > 3:
                    v.flat[0], v.flat[1], v.flat[2] = -0.0, np.nan, 0.0
                (want,), (got,) = cpu(v), gpu(v)
                got = np.asarray(got.to_host())
                np.testing.assert_array_equal(got, np.asarray(want))
                np.testing.assert_array_equal(got, np.stack(np.nonzero(
                    np.where(np.isnan(v), 1, v) if src.startswith("float") else v)))


# ---- movement ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_movement(dtype):
    x = (RNG.standard_normal((2, 3, 4, 5)) * 50).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", dtype, x.shape)
    t = m.transpose(xv, [0, 3, 1, 2])
    m.output(t)
    m.output(m.reshape(t, [2, -1]))
    m.output(m.concat([xv, m.copy(xv), xv], axis=1))
    m.output(m.concat([m.reshape(xv, [6, 20]), m.reshape(t, [6, 20])], axis=0))
    _assert_same(b.to_bytes(), x)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis, dtype, index_dtype):
    data = (RNG.standard_normal((5, 6, 7)) * 20).astype(dtype)
    dim = data.shape[axis]
    idx = np.array([[0, dim - 1, -1], [-dim, 2, 1]], dtype=index_dtype)
    out_shape = list(data.shape)
    out_shape[axis:axis + 1 if axis != -1 else None] = idx.shape
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("gather", m.input("data", dtype, data.shape),
                    m.input("indices", index_dtype, idx.shape), axis,
                    outputs=[(dtype, tuple(out_shape), False)])[0])
    _assert_same(b.to_bytes(), data, idx)


@pytest.mark.parametrize("dtype", ["float32", "bool", "int16"])
@pytest.mark.parametrize("shapes", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 1, 3), (2, 4, 3)),
                                    ((4,), (1, 4))], ids=str)
def test_expand(shapes, dtype):
    x = (RNG.standard_normal(shapes[0]) * 9).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("expand", m.input("x", dtype, x.shape), list(shapes[1]),
                    outputs=[(dtype, np.broadcast_shapes(*shapes), False)])[0])
    _assert_same(b.to_bytes(), x)


SLICES = [  # starts, ends, axes, steps
    ([1, 0], [3, 100], None, None),
    ([-1], [-100], [1], [-2]),
    ([5, 2], [0, 6], [2, 0], [-1, 3]),
    ([0, 0, 0], [1, 1, 1], [0, 1, 2], [1, 1, 1]),
    ([4], [2], [-1], [1]),  # empty
]


@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64"])
@pytest.mark.parametrize("params", SLICES, ids=str)
def test_slice(params, dtype):
    starts, ends, axes, steps = params
    x = (RNG.standard_normal((4, 7, 6)) * 9).astype(dtype)
    index = [slice(None)] * 3
    for k, axis in enumerate(axes if axes is not None else range(len(starts))):
        index[axis] = slice(starts[k], ends[k], steps[k] if steps is not None else 1)
    shape = x[tuple(index)].shape
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("slice", m.input("x", dtype, x.shape), starts, ends, axes, steps,
                    outputs=[(dtype, shape, False)])[0])
    _assert_same(b.to_bytes(), x)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("axis,sizes,parts", [(1, [2, 0, 5], 3), (-1, [], 2), (0, [], 3)],
                         ids=str)
def test_split(axis, sizes, parts, dtype):
    x = (RNG.standard_normal((4, 7, 6)) * 9).astype(dtype)
    dim = x.shape[axis]
    if sizes:
        lengths = sizes
    else:  # ONNX num_outputs: ceil(dim / parts) each, the last takes the rest
        each = -(-dim // parts)
        lengths = [max(0, min(each, dim - each * i)) for i in range(parts)]
    b = ProgramBuilder()
    m = b.method("forward")
    shapes = []
    for n in lengths:
        shape = list(x.shape)
        shape[axis] = n
        shapes.append(("int8" if dtype == "int8" else dtype, tuple(shape), False))
    outs = m.call("split", m.input("x", dtype, x.shape), axis, list(sizes), outputs=shapes)
    for o in outs:
        m.output(o)
    _assert_same(b.to_bytes(), x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "float16"])
@pytest.mark.parametrize("mode", [0, 1])
def test_depth_to_space_and_space_to_depth(mode, dtype):
    x = (RNG.standard_normal((2, 8, 3, 5)) * 20).astype(dtype)
    y = (RNG.standard_normal((2, 3, 4, 6)) * 20).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    xv, yv = m.input("x", dtype, x.shape), m.input("y", dtype, y.shape)
    m.output(m.call("depth_to_space", xv, 2, mode, outputs=[(dtype, (2, 2, 6, 10), False)])[0])
    m.output(m.call("space_to_depth", yv, 2, mode, outputs=[(dtype, (2, 12, 2, 3), False)])[0])
    _assert_same(b.to_bytes(), x, y)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool", "int16"])
@pytest.mark.parametrize("k", [0, 2, -1, -9, 40])
@pytest.mark.parametrize("upper", [True, False])
def test_trilu(upper, k, dtype):
    x = (RNG.standard_normal((2, 4, 6)) * 20 + 1).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("trilu", m.input("x", dtype, x.shape), k, upper,
                    outputs=[(dtype, x.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(want[0], np.triu(x, k) if upper else np.tril(x, k))


PADS = [[1, 2, 3, 0], [0, 7, 2, 9], [-1, 2, 1, -3], [0, 0, 0, 0]]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "float16"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("pads", PADS, ids=str)
def test_pad(pads, mode, dtype):
    x = (RNG.standard_normal((4, 5)) * 20).astype(dtype)
    kept = [x.shape[d] + min(pads[d], 0) + min(pads[d + 2], 0) for d in range(2)]
    shape = tuple(kept[d] + max(pads[d], 0) + max(pads[d + 2], 0) for d in range(2))
    b = ProgramBuilder()
    m = b.method("forward")
    xv, fill = m.input("x", dtype, x.shape), m.input("fill", dtype, ())
    m.output(m.call("pad", xv, pads, mode, fill, outputs=[(dtype, shape, False)])[0])
    m.output(m.call("pad", xv, pads, mode, None, outputs=[(dtype, shape, False)])[0])
    want, got = _run_both(b.to_bytes(), x, np.array(3, dtype))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    cropped = x[max(-pads[0], 0):x.shape[0] - max(-pads[2], 0),
                max(-pads[1], 0):x.shape[1] - max(-pads[3], 0)]
    width = [(max(pads[0], 0), max(pads[2], 0)), (max(pads[1], 0), max(pads[3], 0))]
    name = ["constant", "reflect", "edge", "wrap"][mode]
    kw = {"constant_values": 3} if mode == 0 else {}
    np.testing.assert_array_equal(want[0], np.pad(cropped, width, mode=name, **kw))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool", "float16", "uint8"])
def test_eye_like_and_constant_of_shape(dtype):
    x = np.zeros((3, 5), np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv, v = m.input("x", "float32", x.shape), m.input("v", dtype, (1,))
    for k in (0, 2, -1, 5, -3, -100):
        m.output(m.call("eye_like", xv, k, outputs=[(dtype, (3, 5), False)])[0])
    for shape in ([2, 3, 4], [], [0, 3]):
        m.output(m.call("constant_of_shape", shape, v, outputs=[(dtype, tuple(shape), False)])[0])
    value = np.array([7], dtype) if dtype != "bool" else np.array([True])
    want, got = _run_both(b.to_bytes(), x, value)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_array_equal(g, w)
    for i, k in enumerate((0, 2, -1, 5, -3, -100)):
        np.testing.assert_array_equal(want[i], np.eye(3, 5, k, dtype=dtype))
    np.testing.assert_array_equal(want[6], np.full((2, 3, 4), value[0]))


@pytest.mark.parametrize("index_dtype", ["int64", "int32", "uint8", "float32", "float64"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "float16"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis, dtype, index_dtype):
    raw = [[0, 3, -1, 5], [-4, 2, -5, 1]] if index_dtype[0] != "u" else [[0, 3, 9, 5],
                                                                         [4, 2, 1, 1]]
    idx = np.array(raw, index_dtype)
    if index_dtype.startswith("float"):
        idx[1, 3] = 1.5  # fractional: matches nothing
        idx[1, 2] = np.nan
    shape = [2, 4]
    shape.insert(axis if axis >= 0 else 2, 4)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("one_hot", m.input("i", index_dtype, idx.shape), 4, axis,
                    m.input("v", dtype, (2,)), outputs=[(dtype, tuple(shape), False)])[0])
    want, got = _run_both(b.to_bytes(), idx, np.array([2, 9], dtype))
    assert want[0].shape == got[0].shape
    np.testing.assert_array_equal(got[0], want[0])
    hits = [-4 <= float(v) < 4 and float(v) == np.floor(float(v)) for v in idx.ravel()]
    assert (want[0] == 9).sum() == sum(hits)  # whole numbers in [-depth, depth) match once


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "int16"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_cumsum(exclusive, reverse, axis, dtype):
    x = (RNG.standard_normal((3, 70, 4)) * 60).astype(dtype)  # uint8 / int16 sums wrap
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("cumsum", m.input("x", dtype, x.shape), axis, exclusive, reverse,
                    outputs=[(dtype, x.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), x)
    if dtype.startswith("float"):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-4)
    else:
        np.testing.assert_array_equal(got[0], want[0])
    if not exclusive and not reverse:
        np.testing.assert_allclose(want[0], np.cumsum(x, axis=axis, dtype=x.dtype), rtol=1e-5,
                                   atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_hardmax(axis, dtype):
    x = RNG.integers(-3, 4, (4, 6, 5)).astype(dtype)  # ties: the first maximum wins
    x[0, 0, 0] = np.nan
    x[1, 2, 3] = np.nan
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("hardmax", m.input("x", dtype, x.shape), axis,
                    outputs=[(dtype, x.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), x)
    np.testing.assert_array_equal(got[0], want[0])
    first = np.argmax(x, axis=axis)  # numpy: the first maximum, NaN counted as the maximum
    np.testing.assert_array_equal(np.argmax(want[0], axis=axis), first)
    assert (want[0].sum(axis=axis) == 1).all()


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "float16"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis, dtype, index_dtype):
    data = (RNG.standard_normal((4, 5, 6)) * 20).astype(dtype)
    shape = [3, 4, 5]
    shape[axis] = 7  # only the axis may exceed data's size
    dim = data.shape[axis]
    idx = RNG.integers(-dim, dim, shape).astype(index_dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("gather_elements", m.input("data", dtype, data.shape),
                    m.input("indices", index_dtype, idx.shape), axis,
                    outputs=[(dtype, tuple(shape), False)])[0])
    want, got = _run_both(b.to_bytes(), data, idx)
    np.testing.assert_array_equal(got[0], want[0])
    sub = data[tuple(slice(0, s) if d != axis % 3 else slice(None) for d, s in enumerate(shape))]
    np.testing.assert_array_equal(want[0], np.take_along_axis(sub, idx.astype(np.int64) % dim,
                                                              axis=axis))


def test_gather_elements_refuses_an_index_out_of_range_by_position():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("gather_elements", m.input("data", "float32", (2, 3)),
                    m.input("indices", "int32", (2, 2)), 1,
                    outputs=[("float32", (2, 2), False)])[0])
    data = np.zeros((2, 3), np.float32)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match=r"indices\[1, 0\] is -4, out of range"):
            f(data, np.array([[0, 2], [-4, 1]], np.int32))


# The reductions (1-4) take float32, float64 and the integer types; replacing (0) any dtype.
SCATTER_CASES = [(r, t) for r in range(5) for t in ["float32", "float64", "int32", "uint8",
                                                    "int64"]] + [(0, "float16"), (0, "bool")]


@pytest.mark.parametrize("reduction,dtype", SCATTER_CASES, ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(axis, reduction, dtype):
    data = (RNG.standard_normal((4, 5, 6)) * 9).astype(dtype)
    shape = [3, 4, 5]
    shape[axis] = 9  # many updates per line: duplicates combine in index order
    dim = data.shape[axis]
    idx = RNG.integers(-dim, dim, shape).astype("int64")
    updates = (RNG.standard_normal(shape) * 9).astype(dtype)
    if dtype.startswith("float"):
        updates.flat[5] = np.nan  # wins max and min
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("scatter_elements", m.input("data", dtype, data.shape),
                    m.input("indices", "int64", idx.shape), m.input("u", dtype, updates.shape),
                    axis, reduction, outputs=[(dtype, data.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), data, idx, updates)
    np.testing.assert_array_equal(got[0], want[0])  # same order: bit for bit, NaN where both
    if reduction == 0:  # numpy: the last duplicate wins
        ref = data.copy()
        for pos in np.ndindex(*shape):
            target = list(pos)
            target[axis] = idx[pos] % dim
            ref[tuple(target)] = updates[pos]
        np.testing.assert_array_equal(want[0], ref)


def test_scatter_elements_in_place_and_index_errors():
    b = ProgramBuilder()
    m = b.method("forward")
    data = m.input("data", "float32", (2, 3))
    m.output(m.call("scatter_elements", data, m.input("indices", "int32", (2, 1)),
                    m.input("u", "float32", (2, 1)), 1, 1,
                    outputs=[("float32", (2, 3), False)])[0])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    good = np.array([[2], [-3]], np.int32)
    u = np.array([[10], [20]], np.float32)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        np.testing.assert_array_equal(np.asarray(f(x, good, u)[0].to_host()),
                                      [[0, 1, 12], [23, 4, 5]])
        with pytest.raises(rt.InvalidArgument, match=r"indices\[1, 0\] is 3, out of range "
                           r"for dimension 1 of data, of size 3"):
            f(x, np.array([[0], [3]], np.int32), u)


@pytest.mark.parametrize("dtype", ["float32", "int16", "float64"])
@pytest.mark.parametrize("axis,index", [(0, 1), (1, -1), (2, 0), (2, 3)])
@pytest.mark.parametrize("literal", [True, False])
def test_copy_into(literal, axis, index, dtype):
    base = np.arange(24).reshape(2, 3, 4).astype(dtype)
    x = -(np.arange(24 // base.shape[axis]) + 1).reshape(np.delete(base.shape, axis))
    x = x.astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    b0, x0, i0 = m.input("b", dtype, base.shape), m.input("x", dtype, x.shape), \
        m.input("i", "int32", ())
    out = m.tensor(dtype, base.shape)
    m.copy(b0, out=out)
    m.call("copy_into", x0, index if literal else i0, axis, out=out)
    m.output(out)
    want, got = _run_both(b.to_bytes(), base, x, np.array(index, np.int32))
    np.testing.assert_array_equal(got[0], want[0])
    ref = base.copy()
    np.moveaxis(ref, axis, 0)[index] = x
    np.testing.assert_array_equal(want[0], ref)


@pytest.mark.parametrize("axis,index,count", [(2, 1, 3), (1, -2, 2), (0, 0, 2)])
def test_copy_into_a_block(axis, index, count):
    base = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    shape = list(base.shape)
    shape[axis] = count
    x = -np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    b = ProgramBuilder()
    m = b.method("forward")
    b0, x0, i0 = m.input("b", "float32", base.shape), m.input("x", "float32", x.shape), \
        m.input("i", "int64", ())
    out = m.tensor("float32", base.shape)
    m.copy(b0, out=out)
    m.call("copy_into", x0, i0, axis, out=out)
    m.output(out)
    want, got = _run_both(b.to_bytes(), base, x, np.array(index))
    np.testing.assert_array_equal(got[0], want[0])
    ref = base.copy()
    start = index % base.shape[axis]
    np.moveaxis(ref, axis, 0)[start:start + count] = np.moveaxis(x, axis, 0)
    np.testing.assert_array_equal(want[0], ref)


def test_copy_into_refuses_an_index_out_of_range():
    b = ProgramBuilder()
    m = b.method("forward")
    b0, x0 = m.input("b", "float32", (2, 3)), m.input("x", "float32", (3,))
    out = m.tensor("float32", (2, 3))
    m.copy(b0, out=out)
    m.call("copy_into", x0, m.input("i", "int64", ()), 0, out=out)
    m.output(out)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match="index -3 is out of range for axis 0"):
            f(np.zeros((2, 3), np.float32), np.ones(3, np.float32), np.array(-3))


def test_assign_checks_the_shape_at_run():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2,), max_shape=(4,))
    out = m.tensor("float32", (2,))
    m.call("assign", x, out=out)
    m.output(m.add(out, out))
    _assert_same(b.to_bytes(), np.array([1.5, -2.0], np.float32))
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.Error, match="out"):
            f(np.zeros(3, np.float32))


RANGES = [(0, 10, 3), (5, -3, -2), (2, 2, 1), (7, 3, 1), (-4, 9, 4)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int16", "uint8"])
def test_range(dtype):
    b = ProgramBuilder()
    m = b.method("forward")
    s, lim, d = (m.input(n, dtype, ()) for n in ("start", "limit", "delta"))
    m.output(m.call("range", s, lim, d, outputs=[(dtype, (16,), True)])[0])
    prog = b.to_bytes()
    for start, limit, delta in RANGES:
        if dtype == "uint8" and min(start, limit, delta) < 0:
            continue
        if dtype.startswith("float"):
            start, limit, delta = start + 0.25, limit, delta * 0.5
        args = [np.array(v, dtype) for v in (start, limit, delta)]
        want, got = _run_both(prog, *args)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(want[0], np.arange(start, limit, delta).astype(dtype))
    with rt.Program.load(prog) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match="delta is 0"):
            f(*[np.array(v, dtype) for v in (0, 4, 0)])
        with pytest.raises(rt.Error, match="out"):  # 20 elements do not fit the bound of 16
            f(*[np.array(v, dtype) for v in (0, 20, 1)])
        np.testing.assert_array_equal(np.asarray(f(*[np.array(v, dtype) for v in (1, 4, 1)])[0]
                                                 .to_host()), np.arange(1, 4, dtype=dtype))


# (data shape, indices shape, batch_dims)
GATHER_ND = [((4, 5, 6), (3, 2), 0), ((4, 5, 6), (2, 3, 3), 0), ((4, 5), (7, 1), 0),
             ((3, 5, 6), (3, 4, 1), 1), ((3, 4, 5, 2), (3, 4, 2, 1), 2)]


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "float16"])
@pytest.mark.parametrize("shapes", GATHER_ND, ids=str)
def test_gather_nd(shapes, dtype, index_dtype):
    data_shape, idx_shape, batch = shapes
    data = (RNG.standard_normal(data_shape) * 20).astype(dtype)
    k = idx_shape[-1]
    dims = np.array(data_shape[batch:batch + k])
    idx = (RNG.integers(-1000, 1000, idx_shape) % (2 * dims) - dims).astype(index_dtype)
    out_shape = idx_shape[:-1] + data_shape[batch + k:]
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("gather_nd", m.input("data", dtype, data.shape),
                    m.input("indices", index_dtype, idx.shape), batch,
                    outputs=[(dtype, out_shape, False)])[0])
    want, got = _run_both(b.to_bytes(), data, idx)
    np.testing.assert_array_equal(got[0], want[0])
    flat_idx = idx.reshape(-1, *idx.shape[batch:])  # one block per batch entry
    flat_data = data.reshape(-1, *data.shape[batch:])
    ref = np.stack([np.stack([d[tuple(t)] for t in ix.reshape(-1, k)]).reshape(
        ix.shape[:-1] + d.shape[k:]) for d, ix in zip(flat_data, flat_idx)])
    np.testing.assert_array_equal(want[0], ref.reshape(out_shape))


def test_gather_nd_refuses_an_index_out_of_range_by_position():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("gather_nd", m.input("data", "float32", (2, 3)),
                    m.input("indices", "int64", (2, 2)), 0,
                    outputs=[("float32", (2,), False)])[0])
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match=r"indices\[1, 1\] is 3, out of range "
                           r"for dimension 1 of data of size 3"):
            f(np.zeros((2, 3), np.float32), np.array([[1, 2], [0, 3]]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_norm(p, axis, dtype):
    x = RNG.standard_normal((3, 40, 5)).astype(dtype)
    x[1, :, 2] = 0 if axis == 1 else x[1, :, 2]  # a zero line gives zeros
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("lp_norm", m.input("x", dtype, x.shape), axis, p,
                    outputs=[(dtype, x.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), x)
    # The same sums in the same order; a GPU may fuse v * v into the sum (one rounding less).
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6 if dtype == "float32" else 1e-14)
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=axis, keepdims=True)
    np.testing.assert_allclose(want[0], x / np.where(norm == 0, 1, norm),
                               rtol=1e-6 if dtype == "float32" else 1e-13)


# (data shape, indices shape): k = indices.shape[-1] indexes data's first k dimensions
SCATTER_ND = [((4, 5, 6), (9, 1)), ((4, 5, 6), (3, 4, 2)), ((4, 5), (12, 2)), ((3, 4), (2, 0))]


@pytest.mark.parametrize("reduction,dtype", SCATTER_CASES, ids=str)
@pytest.mark.parametrize("shapes", SCATTER_ND, ids=str)
def test_scatter_nd(shapes, reduction, dtype):
    data_shape, idx_shape = shapes
    k = idx_shape[-1]
    data = (RNG.standard_normal(data_shape) * 9).astype(dtype)
    dims = np.array(data_shape[:k], np.int64)
    # few distinct tuples: duplicates combine in order
    idx = (RNG.integers(0, 1000, idx_shape) % np.maximum(dims, 1) - (dims if k else 0)
           * RNG.integers(0, 2, idx_shape)).astype("int64")
    upd_shape = idx_shape[:-1] + data_shape[k:]
    updates = (RNG.standard_normal(upd_shape) * 9).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("scatter_nd", m.input("data", dtype, data.shape),
                    m.input("indices", "int64", idx.shape), m.input("u", dtype, upd_shape),
                    reduction, outputs=[(dtype, data.shape, False)])[0])
    want, got = _run_both(b.to_bytes(), data, idx, updates)
    np.testing.assert_array_equal(got[0], want[0])
    if reduction == 0:  # the last duplicate wins
        ref = data.copy()
        for pos in np.ndindex(*idx_shape[:-1]):
            ref[tuple(idx[pos] % np.maximum(dims, 1))] = updates[pos]
        np.testing.assert_array_equal(want[0], ref)


def test_scatter_nd_refuses_an_index_out_of_range_by_position():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("scatter_nd", m.input("data", "float32", (2, 3)),
                    m.input("indices", "int32", (2, 2)), m.input("u", "float32", (2,)), 0,
                    outputs=[("float32", (2, 3), False)])[0])
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match=r"indices\[0, 0\] is -3, out of range "
                           r"for dimension 0 of data, of size 2"):
            f(np.zeros((2, 3), np.float32), np.array([[-3, 0], [1, 2]], np.int32),
              np.ones(2, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int64", "int8"])
@pytest.mark.parametrize("axis,k", [(-1, 3), (0, 4), (1, 1), (-1, 0), (1, 9)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest, axis, k, dtype):
    x = RNG.integers(-5, 6, (4, 9, 7)).astype(dtype)  # many ties: the lower index first
    if dtype.startswith("float"):
        x[0, 0, :3] = np.nan  # first when largest, last when smallest
        x[2, 4, 1] = np.nan
    shape = list(x.shape)
    shape[axis] = k
    b = ProgramBuilder()
    m = b.method("forward")
    outs = m.call("topk", m.input("x", dtype, x.shape), k, axis, largest, True,
                  outputs=[(dtype, tuple(shape), False), ("int64", tuple(shape), False)])
    m.output(outs[0])
    m.output(outs[1])
    want, got = _run_both(b.to_bytes(), x)
    for w, g in zip(want, got):
        assert w.shape == g.shape
        np.testing.assert_array_equal(g, w)
    key = -x.astype(np.float64) if largest else x.astype(np.float64)
    if dtype.startswith("float"):
        key = np.where(np.isnan(x), -np.inf if largest else np.inf, key)
    order = np.argsort(key, axis=axis, kind="stable")  # stable: ties by the lower index
    first = np.take(order, range(k), axis=axis)
    np.testing.assert_array_equal(want[1], first)


def test_gather_refuses_an_index_out_of_range_by_position():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("gather", m.input("data", "float32", (4, 2)),
                    m.input("indices", "int64", (3,)), 0,
                    outputs=[("float32", (3, 2), False)])[0])
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match=r"indices\[2\] is 4, out of range"):
            f(data, np.array([0, 1, 4], np.int64))
        (y,) = f(data, np.array([3, -4, 1], np.int64))  # still usable
        np.testing.assert_array_equal(np.asarray(y.to_host()), data[[3, 0, 1]])


# ---- binding, state, control flow ----------------------------------------------------------

def test_device_inputs_are_bound_without_copies_and_host_inputs_may_be_strided():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.input("a", "float32", (4, 3)), m.input("b", "float32", (4, 3))))
    big = RNG.standard_normal((8, 6)).astype(np.float32)
    strided = big[::2, ::2]  # a host view with element strides (12, 2)
    dev = rt.Tensor.from_host(np.ones((4, 3), np.float32))
    assert dev.device == "cuda:0"
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        (y,) = f(strided, dev)
        np.testing.assert_array_equal(np.asarray(y.to_host()), strided + 1)
        (again,) = f(dev, dev)
        np.testing.assert_array_equal(np.asarray(again.to_host()), np.full((4, 3), 2.0))
        # clone_outputs: the first result is a copy, unchanged by the second execute
        np.testing.assert_array_equal(np.asarray(y.to_host()), strided + 1)


def test_dynamic_shapes_on_the_device():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, 8), max_shape=(16, 8))
    w = m.constant(RNG.standard_normal((5, 8)).astype(np.float32))
    m.output(m.softmax(m.linear(x, w)))
    for rows in (1, 16, 7):
        _assert_same(b.to_bytes(), RNG.standard_normal((rows, 8)).astype(np.float32))


def test_jumps_read_conditions_from_the_device():
    program = counted_loop(size=3).to_bytes()
    want, got = _run_both(program, np.array([1, 2, 3], np.float32), np.array([4], np.int64))
    np.testing.assert_array_equal(got[0], np.array([16, 32, 48], np.float32))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_attributes_live_on_the_device_and_persist():
    data, (w, bias) = rich_program()
    x = RNG.standard_normal((8, 3)).astype(np.float32)
    with rt.Program.load(data) as p, p.load_method("forward", device="cuda") as f:
        for _ in range(3):
            (y,) = f(x)
        np.testing.assert_allclose(np.asarray(y.to_host()), np.maximum(x @ w.T + bias, 0),
                                   rtol=1e-5, atol=1e-6)
        calls = f.get_attribute("calls")
        assert calls.device == "cuda:0"
        assert calls.to_host().tolist() == [3]


def test_profiling_records_every_instruction():
    data, _ = rich_program()
    with rt.Program.load(data) as p:
        with p.load_method("forward", device="cuda", profile=True) as f:
            f(np.zeros((8, 3), np.float32))
            ops = [e.op_name for e in f.profile_events()]
            assert ops == [o for o in p.instruction_ops("forward") if o]


def test_methods_run_concurrently_from_threads():
    import threading

    b = ProgramBuilder()
    m = b.method("forward")
    w = m.constant(RNG.standard_normal((16, 32)).astype(np.float32))
    m.output(m.softmax(m.linear(m.input("x", "float32", (8, 32)), w)))
    xs = [RNG.standard_normal((8, 32)).astype(np.float32) for _ in range(4)]
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as cpu:
        want = [np.asarray(cpu(x)[0]) for x in xs]
        results = {}

        def work(k):
            with p.load_method("forward", device="cuda") as f:
                results[k] = [np.asarray(f(xs[(k + i) % 4])[0].to_host()) for i in range(12)]

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for k in range(4):
        for i, got in enumerate(results[k]):
            np.testing.assert_allclose(got, want[(k + i) % 4], rtol=1e-5, atol=1e-6)


def test_no_context_or_memory_is_left_behind():
    """Under the fake driver (which counts them): every call pops the contexts it pushed, and
    closing methods and dropping tensors frees their device memory."""
    import ctypes
    import gc
    import os

    path = os.environ.get("RT_CUDA_DRIVER", "")
    if "fake" not in os.path.basename(path):
        pytest.skip("needs the fake driver's counters (tests/cuda_emu)")
    fake = ctypes.CDLL(path)
    gc.collect()
    live = fake.fake_cuda_live_allocations()
    data, _ = rich_program()
    with rt.Program.load(data) as p:
        with p.load_method("forward", device="cuda") as f:
            (y,) = f(rt.Tensor.from_host(np.ones((8, 3), np.float32)))
            y.to_host()
            assert fake.fake_cuda_pushed_contexts() == 0
            del y
        with pytest.raises(rt.Unsupported):
            p.load_method("forward", device="cuda:5")
        assert fake.fake_cuda_pushed_contexts() == 0
    gc.collect()
    assert fake.fake_cuda_live_allocations() == live


# ---- what a CUDA method refuses --------------------------------------------------------------

def test_inputs_on_another_device_are_refused():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (2,))))
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        dev = rt.Tensor.from_host(np.ones(2, np.float32))
        with pytest.raises(rt.InvalidArgument, match="cuda:1"):
            f((dev._address(), "float32", (2,), None, "cuda:1"))
        with pytest.raises(rt.InvalidArgument, match="not CUDA memory"):
            f((np.ones(2, np.float32).ctypes.data, "float32", (2,), None, "cuda:0"))
        (y,) = f(np.array([-1.0, 2.0], np.float32))  # still usable
        assert y.to_host().tolist() == [0.0, 2.0]


def test_device_allocation_failure_is_out_of_memory():
    from runtime_py._ffi import ffi, get_lib, to_str

    lib = get_lib()
    out = ffi.new("void **")
    assert lib.rt_device_alloc(out, {"type": 2, "index": 0}, 1 << 44) == 6  # RT_OUT_OF_MEMORY
    assert out[0] == ffi.NULL
    assert "rt_device_alloc" in to_str(lib.rt_last_error())
    with pytest.raises(MemoryError):
        rt.Tensor.from_host(np.zeros(1, np.float32)).to_host()  # fine
        cuda._DeviceMemory((2, 0), 1 << 44)


def test_device_count_and_missing_devices():
    assert cuda.device_count() >= 1
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.relu(m.input("x", "float32", (2,))))
    with rt.Program.load(b.to_bytes()) as p:
        with pytest.raises(rt.Unsupported, match=f"no CUDA device {cuda.device_count()}"):
            p.load_method("forward", device=f"cuda:{cuda.device_count()}")


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "int16"])
@pytest.mark.parametrize("axis,sorted_", [(0, True), (1, False), (2, True), (None, False)])
def test_unique_matches_the_cpu(dtype, axis, sorted_):
    x = RNG.integers(0, 3, (4, 6, 2)).astype(dtype)
    x[:, 3] = x[:, 0]
    if dtype == "float32":
        x[1, 2, 0] = np.nan
    b = ProgramBuilder()
    m = b.method("forward")
    v = m.input("x", dtype, x.shape, max_shape=x.shape)
    if axis is None:
        v, axis = m.reshape(v, [-1]), 0
    n = v.shape[axis]
    outs = m.call("unique", v, axis, sorted_, outputs=[(dtype, list(v.shape), True)] +
                  [("int64", [n], True)] * 3)
    for i, o in enumerate(outs):
        m.output(o, f"y{i}")
    want, got = _run_both(b.to_bytes(), x)
    for w, g in zip(want, got):
        assert w.shape == g.shape
        np.testing.assert_array_equal(g, w)
