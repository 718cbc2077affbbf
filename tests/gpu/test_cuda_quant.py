"""The quantized ops on CUDA against the same programs on the CPU (which tests/test_ops_quant.py
checks against the ONNX reference arithmetic), bit for bit: per-tensor, per-axis and blocked
parameters, every integer type, rounding halves, saturation, NaN and infinities, empty
tensors."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(5)


def _same_on_both(build, *arrays):
    """forward(x0, ...) = build(m, *inputs) on the CPU and on cuda:0: identical outputs."""
    b = ProgramBuilder()
    m = b.method("forward")
    xs = [m.input(f"x{i}", str(a.dtype), a.shape) for i, a in enumerate(arrays)]
    ys = build(m, *xs)
    for y in ys if isinstance(ys, (tuple, list)) else (ys,):
        m.output(y)
    with rt.Program.load(b.to_bytes()) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            want, got = cpu(*arrays), gpu(*arrays)
            for w, g in zip(want, got):
                w, g = np.asarray(w), np.asarray(g.to_host())
                assert w.dtype == g.dtype and w.shape == g.shape
                np.testing.assert_array_equal(g, w)


def _ints(shape, dtype, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, info.max if hi is None else hi, shape,
                        endpoint=True).astype(dtype)


LAYOUTS = [  # x shape, parameter shape, axis, block_size
    ((6,), (), 0, 0),
    ((2, 3, 4), (1,), 1, 0),
    ((2, 3, 4), (3,), 1, 0),
    ((2, 3, 4), (4,), -1, 0),
    ((3, 5, 2), (3, 2, 2), 1, 3),
    ((4, 6), (4, 3), 1, 2),
    ((0, 4), (4,), 1, 0),
]


@pytest.mark.parametrize("otype", ["int8", "uint8", "int16", "uint16", "int32"])
@pytest.mark.parametrize("ftype", ["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_quantize_linear(layout, ftype, otype):
    shape, pshape, axis, block = layout
    x = (RNG.standard_normal(shape) * 300).astype(ftype)
    if x.size >= 6:
        x.flat[:6] = [0.5, 1.5, -2.5, np.nan, np.inf, -1e30]
    scale = RNG.uniform(0.5, 3, pshape).astype(ftype)
    if scale.size:
        scale.flat[0] = 1.0  # the halves stay halves
    signed = not otype.startswith("u")
    zp = _ints(pshape, otype, -5 if signed else 0, 5 if signed else 9)
    _same_on_both(lambda m, xv, sv, zv: m.call("quantize_linear", xv, sv, zv, axis, block,
                                               outputs=[(otype, shape, False)])[0], x, scale, zp)
    _same_on_both(lambda m, xv, sv: m.call("quantize_linear", xv, sv, None, axis, block,
                                           outputs=[(otype, shape, False)])[0], x, scale)


@pytest.mark.parametrize("itype", ["int8", "uint8", "int16", "uint16", "int32"])
@pytest.mark.parametrize("ftype", ["float32", "float64"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_dequantize_linear(layout, ftype, itype):
    shape, pshape, axis, block = layout
    x = _ints(shape, itype)
    scale = RNG.uniform(0.01, 2, pshape).astype(ftype)
    zp = _ints(pshape, itype)
    _same_on_both(lambda m, xv, sv, zv: m.call("dequantize_linear", xv, sv, zv, axis, block,
                                               outputs=[(ftype, shape, False)])[0], x, scale, zp)
    _same_on_both(lambda m, xv, sv: m.call("dequantize_linear", xv, sv, None, axis, block,
                                           outputs=[(ftype, shape, False)])[0], x, scale)


@pytest.mark.parametrize("x", [
    np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
    np.array([[-1.0, -2.1, -1.3, -2.5], [-3.34, -4.0, -1, 0]], np.float32),
    np.array([1, 2.1, np.nan, 2.5, 3.34, 4.0, 1.5], np.float32),
    np.zeros((3, 2), np.float32),
    np.zeros((0, 5), np.float32),
    (RNG.standard_normal((30, 100)) * 5).astype(np.float32),
], ids=["small", "negative", "nan", "zeros", "empty", "large"])
def test_dynamic_quantize_linear(x):
    _same_on_both(lambda m, xv: tuple(m.call(
        "dynamic_quantize_linear", xv, outputs=[("uint8", xv.shape, False),
                                                ("float32", [], False),
                                                ("uint8", [], False)])), x)


MM_CASES = [  # a shape, b shape, a_zero_point shape, b_zero_point shape (None: absent)
    ((4, 3), (3, 2), (), ()),
    ((4, 3), (3, 2), (4,), (2,)),
    ((2, 5, 7), (7, 3), (1,), (3,)),
    ((2, 1, 5, 7), (3, 7, 4), (2, 1, 5, 1), (3, 1, 4)),
    ((7,), (7, 3), None, (3,)),
    ((5, 7), (7,), (5,), None),
    ((3, 0), (0, 4), (), ()),
    ((20, 70), (70, 30), (), (30,)),
]


def _mm_shape(a_shape, b_shape):
    return np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape


@pytest.mark.parametrize("case", MM_CASES, ids=str)
@pytest.mark.parametrize("a_type,b_type", [("uint8", "int8"), ("int8", "uint8"),
                                           ("uint8", "uint8"), ("int8", "int8")])
def test_matmul_integer(case, a_type, b_type):
    a_shape, b_shape, za_shape, zb_shape = case
    a, b = _ints(a_shape, a_type), _ints(b_shape, b_type)
    za = _ints(za_shape, a_type) if za_shape is not None else None
    zb = _ints(zb_shape, b_type) if zb_shape is not None else None
    arrays = [t for t in (a, b, za, zb) if t is not None]
    shape = _mm_shape(a_shape, b_shape)

    def build(m, av, bv, *zs):
        it = iter(zs)
        zav = next(it) if za is not None else None
        zbv = next(it) if zb is not None else None
        return m.call("matmul_integer", av, bv, zav, zbv, outputs=[("int32", shape, False)])[0]

    _same_on_both(build, *arrays)


@pytest.mark.parametrize("a_shape,b_shape,sa_shape,sb_shape,ftype", [
    ((2, 4), (4, 3), (1,), (1,), "float32"),
    ((2, 2, 4), (2, 4, 3), (), (3,), "float32"),
    ((5, 6), (6, 3), (5,), (3,), "float64"),
    ((0, 6), (6, 3), (), (), "float32"),
    ((16, 40), (40, 50), (), (50,), "float32"),
])
@pytest.mark.parametrize("out_type", ["uint8", "int8"])
def test_qlinear_matmul(a_shape, b_shape, sa_shape, sb_shape, ftype, out_type):
    a, b = _ints(a_shape, "uint8"), _ints(b_shape, "int8")
    za, zb = _ints(sa_shape, "uint8"), _ints(sb_shape, "int8")
    sa = RNG.uniform(0.001, 0.05, sa_shape).astype(ftype)
    sb = RNG.uniform(0.001, 0.05, sb_shape).astype(ftype)
    sy, zy = np.array([0.05], ftype), np.array([3], out_type)
    shape = _mm_shape(a_shape, b_shape)
    _same_on_both(lambda m, *vs: m.call("qlinear_matmul", *vs,
                                        outputs=[(out_type, shape, False)])[0],
                  a, sa, za, b, sb, zb, sy, zy)


CONV_CASES = [  # x shape, w shape, stride, pads, dilation, groups
    ((1, 1, 3, 3), (1, 1, 2, 2), [1, 1], [0, 0, 0, 0], [1, 1], 1),
    ((1, 1, 3, 3), (2, 1, 2, 2), [1, 1], [1, 1, 1, 1], [1, 1], 1),
    ((2, 4, 9, 11), (6, 2, 3, 3), [2, 1], [1, 2, 0, 1], [1, 2], 2),
    ((1, 3, 5, 30), (4, 3, 1, 3), [1, 1], [0, 1, 0, 1], [1, 1], 1),
    ((0, 2, 4, 4), (3, 2, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1], 1),
]


def _conv_shape(x_shape, w_shape, stride, pads, dilation):
    n, _, h, w = x_shape
    o, _, kh, kw = w_shape
    ho = (h + pads[0] + pads[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + pads[1] + pads[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return (n, o, ho, wo)


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("x_type,w_type", [("uint8", "int8"), ("int8", "uint8")])
@pytest.mark.parametrize("w_zero", ["per_channel", "per_tensor", "absent"])
def test_conv_integer(case, x_type, w_type, w_zero):
    x_shape, w_shape, stride, pads, dilation, groups = case
    x, w = _ints(x_shape, x_type), _ints(w_shape, w_type)
    zx = _ints((), x_type)
    zw = _ints((w_shape[0],) if w_zero == "per_channel" else (), w_type)
    shape = _conv_shape(x_shape, w_shape, stride, pads, dilation)
    if w_zero == "absent":
        _same_on_both(lambda m, xv, wv, zxv: m.call(
            "conv_integer", xv, wv, zxv, None, stride, pads, dilation, groups,
            outputs=[("int32", shape, False)])[0], x, w, zx)
    else:
        _same_on_both(lambda m, xv, wv, zxv, zwv: m.call(
            "conv_integer", xv, wv, zxv, zwv, stride, pads, dilation, groups,
            outputs=[("int32", shape, False)])[0], x, w, zx, zw)


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("ftype", ["float32", "float64"])
def test_qlinear_conv(case, ftype):
    x_shape, w_shape, stride, pads, dilation, groups = case
    x, w = _ints(x_shape, "uint8"), _ints(w_shape, "int8")
    o = w_shape[0]
    zx, zw = np.array(7, np.uint8), _ints((o,), "int8", -3, 3)
    sx = np.array(0.02, ftype)
    sw = RNG.uniform(0.001, 0.01, (o,)).astype(ftype)
    sy, zy = np.array(0.1, ftype), np.array(-3, np.int8)
    bias = _ints((o,), "int32", -2000, 2000)
    shape = _conv_shape(x_shape, w_shape, stride, pads, dilation)
    _same_on_both(lambda m, *vs: m.call("qlinear_conv", *vs, stride, pads, dilation, groups,
                                        outputs=[("int8", shape, False)])[0],
                  x, sx, zx, w, sw, zw, sy, zy, bias)


def test_sums_wrap_around_in_32_bits():
    """K large enough that (-128 - 127)^2 * K passes 2^31: the int32 sums wrap as on the CPU."""
    a = np.full((2, 40000), -128, np.int8)
    b = np.full((40000, 2), -128, np.int8)
    za, zb = np.array(127, np.int8), np.array(127, np.int8)
    _same_on_both(lambda m, av, bv, zav, zbv: m.call("matmul_integer", av, bv, zav, zbv,
                                                     outputs=[("int32", (2, 2), False)])[0],
                  a, b, za, zb)


def test_a_zero_point_shared_by_x_and_w_is_read_on_the_host_and_the_device():
    """One tensor as x_zero_point (read on the host) and w_zero_point (read by the kernel)."""
    x, w = _ints((1, 2, 5, 5), "uint8"), _ints((3, 2, 3, 3), "uint8")
    z = np.array(9, np.uint8)
    shape = _conv_shape(x.shape, w.shape, [1, 1], [1, 1, 1, 1], [1, 1])
    _same_on_both(lambda m, xv, wv, zv: m.call("conv_integer", xv, wv, zv, zv, [1, 1],
                                               [1, 1, 1, 1], [1, 1], 1,
                                               outputs=[("int32", shape, False)])[0], x, w, z)
