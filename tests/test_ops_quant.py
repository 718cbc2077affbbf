"""quantize_linear, dequantize_linear, dynamic_quantize_linear, matmul_integer, qlinear_matmul,
conv_integer and qlinear_conv against numpy references (the ONNX reference's arithmetic),
through the builder: per-tensor, per-axis and blocked parameters, batch broadcasting, zero-size
shapes, several threads, a few load-time errors; and a few ONNX models through the importer."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from runtime_py.errors import Error

RNG = np.random.default_rng(11)
RANGES = {np.int8: (-128, 127), np.uint8: (0, 255), np.int16: (-32768, 32767),
          np.uint16: (0, 65535), np.int32: (-2**31, 2**31 - 1)}


def run(build: Callable[..., Any], *arrays: np.ndarray, num_threads: int = 0):
    """forward(x0, ...) = build(m, *inputs); returns the outputs as numpy arrays."""
    b = ProgramBuilder()
    m = b.method("forward")
    xs = [m.input(f"x{i}", str(a.dtype), a.shape) for i, a in enumerate(arrays)]
    ys = build(m, *xs)
    ys = ys if isinstance(ys, (tuple, list)) else (ys,)
    for i, y in enumerate(ys):
        m.output(y, f"y{i}")
    program = rt.Program.load(b.to_bytes())
    method = program.load_method("forward", num_threads=num_threads)
    try:
        return [np.array(y) for y in method(*arrays)]
    finally:
        method.close()
        program.close()


def ints(shape: Sequence[int], dtype: Any, lo: Optional[int] = None,
         hi: Optional[int] = None) -> np.ndarray:
    tlo, thi = RANGES[dtype]
    lo, hi = tlo if lo is None else lo, thi if hi is None else hi
    return RNG.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


def expand(p: np.ndarray, shape: Sequence[int], axis: int, block: int) -> np.ndarray:
    """A parameter broadcast to x's shape (per tensor, per axis or blocked)."""
    if p.size == 1:
        return p.reshape(())
    axis %= len(shape)
    if block == 0:
        return p.reshape([-1] + [1] * (len(shape) - 1 - axis))
    return np.repeat(p, block, axis=axis).take(range(shape[axis]), axis=axis)


# ---- quantize_linear / dequantize_linear ----------------------------------------------------

def quantize_ref(x, scale, zp, axis, block, out_dtype):
    lo, hi = RANGES[out_dtype]
    with np.errstate(all="ignore"):
        r = np.rint(x / expand(scale, x.shape, axis, block)).astype(np.float64)
    z = expand(zp, x.shape, axis, block).astype(np.float64) if zp is not None else 0.0
    v = np.where(np.isnan(r), np.clip(z, lo, hi), r + z)
    return np.clip(v, lo, hi).astype(out_dtype)


def quantize(m, x, scale, zp, axis, block, out_dtype):
    return m.call("quantize_linear", x, scale, zp, axis, block,
                  outputs=[(np.dtype(out_dtype).name, x.shape, False)])[0]


@pytest.mark.parametrize("shape,pshape,axis,block,ftype,otype", [
    ((6,), (), 1, 0, np.float32, np.uint8),
    ((2, 3, 4), (1,), 1, 0, np.float64, np.int8),
    ((2, 3, 4), (3,), 1, 0, np.float32, np.int16),
    ((2, 3, 4), (4,), -1, 0, np.float32, np.uint16),
    ((5, 7), (5,), 0, 0, np.float64, np.int32),
    ((3, 5, 2), (3, 2, 2), 1, 3, np.float32, np.int8),
    ((4, 6), (4, 3), 1, 2, np.float32, np.uint8),
    ((0, 4), (4,), 1, 0, np.float32, np.uint8),
    ((3, 0), (3,), 0, 0, np.float32, np.int8),
    ((300, 257), (257,), 1, 0, np.float32, np.uint8),
])
def test_quantize_linear(shape, pshape, axis, block, ftype, otype):
    x = (RNG.standard_normal(shape) * 300).astype(ftype)
    scale = RNG.uniform(0.5, 3, size=pshape).astype(ftype)
    zp = ints(pshape, otype, *((-5, 5) if otype in (np.int8, np.int16, np.int32) else (0, 9)))
    for with_zp in (True, False):
        arrays = (x, scale, zp) if with_zp else (x, scale)

        def build(m, xv, sv, zv=None):
            return quantize(m, xv, sv, zv, axis, block, otype)

        (got,) = run(build, *arrays, num_threads=4)
        same(got, quantize_ref(x, scale, zp if with_zp else None, axis, block, otype))


def test_a_block_size_near_int64_max_is_one_block_per_line():
    """block_size may be as large as int64 allows: one block covers the whole axis (the block
    count's ceil(length / block) used to overflow in length + block - 1)."""
    x = (RNG.standard_normal((2, 3)) * 50).astype(np.float32)
    scale = RNG.uniform(0.5, 3, size=(2, 1)).astype(np.float32)
    (got,) = run(lambda m, xv, sv: quantize(m, xv, sv, None, 1, 2 ** 63 - 1, np.int8), x, scale)
    same(got, quantize_ref(x, scale, None, 1, 3, np.int8))


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e10, -1e10, np.inf, -np.inf, np.nan, 254.5,
                  -128.5, 127.5], np.float32)
    scale = np.array(1.0, np.float32)
    for otype, zp in ((np.uint8, 0), (np.int8, 0), (np.uint8, 3)):
        z = np.array(zp, otype)
        (got,) = run(lambda m, xv, sv, zv: quantize(m, xv, sv, zv, 0, 0, otype), x, scale, z)
        same(got, quantize_ref(x, scale, z, 0, 0, otype))
    (got,) = run(lambda m, xv, sv: quantize(m, xv, sv, None, 0, 0, np.uint8), x, scale)
    assert list(got[:6]) == [0, 2, 2, 0, 0, 0] and got[10] == 0


def dequantize_ref(x, scale, zp, axis, block):
    dx = x.astype(np.float32).astype(np.float64)
    if zp is not None:
        dx = dx - expand(zp, x.shape, axis, block).astype(np.float64)
    return (dx * expand(scale, x.shape, axis, block).astype(np.float64)).astype(scale.dtype)


@pytest.mark.parametrize("shape,pshape,axis,block,itype,ftype", [
    ((4,), (), 1, 0, np.uint8, np.float32),
    ((1, 3, 3, 2), (3,), 1, 0, np.int8, np.float32),
    ((2, 5), (5,), -1, 0, np.int16, np.float64),
    ((7,), (1,), 0, 0, np.uint16, np.float32),
    ((6, 3), (6,), 0, 0, np.int32, np.float32),
    ((1, 4, 3, 2), (1, 2, 3, 2), 1, 2, np.int8, np.float32),
    ((2, 0, 3), (3,), 2, 0, np.uint8, np.float64),
])
def test_dequantize_linear(shape, pshape, axis, block, itype, ftype):
    x = ints(shape, itype)
    scale = RNG.uniform(0.01, 2, size=pshape).astype(ftype)
    zp = ints(pshape, itype)
    for with_zp in (True, False):
        arrays = (x, scale, zp) if with_zp else (x, scale)

        def build(m, xv, sv, zv=None):
            return m.call("dequantize_linear", xv, sv, zv, axis, block,
                          outputs=[(np.dtype(ftype).name, xv.shape, False)])[0]

        (got,) = run(build, *arrays, num_threads=3)
        same(got, dequantize_ref(x, scale, zp if with_zp else None, axis, block))


# ---- dynamic_quantize_linear ----------------------------------------------------------------

def dynamic_ref(x):
    mx = np.float32(max(0, x.max())) if x.size else np.float32(0)
    mn = np.float32(min(0, x.min())) if x.size else np.float32(0)
    scale = np.float32(1.0 if mx == mn else mx - mn) / np.float32(255)
    zp = np.rint(max(0, min(255, np.float32(0) - mn / scale)))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.array(scale, np.float32), np.array(zp, np.uint8)


@pytest.mark.parametrize("x", [
    np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
    np.array([[-1.0, -2.1, -1.3, -2.5], [-3.34, -4.0, -1, 0]], np.float32),
    np.array([1, 2.1, 1.3, 2.5, 3.34, 4.0, 1.5, 2.6, 3.9, 4.0, 3.0, 2.345], np.float32),
    np.zeros((3, 2), np.float32),
    np.zeros((0, 5), np.float32),
    (RNG.standard_normal((100, 1000)) * 5).astype(np.float32),
])
def test_dynamic_quantize_linear(x):
    def build(m, xv):
        return tuple(m.call("dynamic_quantize_linear", xv,
                            outputs=[("uint8", xv.shape, False), ("float32", [], False),
                                     ("uint8", [], False)]))

    got = run(build, x, num_threads=4)
    for g, w in zip(got, dynamic_ref(x)):
        same(g, w)


# ---- matmul_integer / qlinear_matmul ---------------------------------------------------------

def zp_for_a(za, a_shape):
    """A per-row 1-D zero point applies along M."""
    return za.reshape(-1, 1) if za.ndim == 1 and za.size > 1 else za


def matmul_integer_ref(a, b, za, zb):
    a32 = a.astype(np.int64) - (zp_for_a(za, a.shape).astype(np.int64) if za is not None else 0)
    b32 = b.astype(np.int64) - (zb.astype(np.int64) if zb is not None else 0)
    return np.matmul(a32, b32).astype(np.int32)


MM_CASES = [
    # a shape, b shape, a_zero_point shape, b_zero_point shape
    ((4, 3), (3, 2), (), ()),
    ((4, 3), (3, 2), (4,), (2,)),
    ((2, 5, 7), (7, 3), (1,), (3,)),
    ((2, 1, 5, 7), (3, 7, 4), (2, 1, 5, 1), (3, 1, 4)),
    ((7,), (7, 3), None, (3,)),
    ((5, 7), (7,), (5,), None),
    ((3, 0), (0, 4), (), ()),
    ((0, 3), (3, 4), (), (4,)),
    ((20, 300), (300, 200), (), (200,)),
]


@pytest.mark.parametrize("a_shape,b_shape,za_shape,zb_shape", MM_CASES)
@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.int8, np.uint8),
                                           (np.uint8, np.uint8), (np.int8, np.int8)])
def test_matmul_integer(a_shape, b_shape, za_shape, zb_shape, a_type, b_type):
    a, b = ints(a_shape, a_type), ints(b_shape, b_type)
    za = ints(za_shape, a_type) if za_shape is not None else None
    zb = ints(zb_shape, b_type) if zb_shape is not None else None
    arrays = [t for t in (a, b, za, zb) if t is not None]
    want = matmul_integer_ref(a, b, za, zb)

    def build(m, av, bv, *zs):
        it = iter(zs)
        zav = next(it) if za is not None else None
        zbv = next(it) if zb is not None else None
        return m.call("matmul_integer", av, bv, zav, zbv,
                      outputs=[("int32", want.shape, False)])[0]

    (got,) = run(build, *arrays, num_threads=4)
    same(got, want)


def requantize_ref(acc, mult, zy, out_dtype):
    lo, hi = RANGES[out_dtype]
    d = acc.astype(np.float64) * np.asarray(mult).astype(np.float64)
    d = d + (zy.astype(np.float64) if zy is not None else 0.0)
    return np.clip(np.rint(d), lo, hi).astype(out_dtype)


@pytest.mark.parametrize("a_shape,b_shape,sa_shape,sb_shape,ftype", [
    ((2, 4), (4, 3), (1,), (1,), np.float32),
    ((2, 2, 4), (2, 4, 3), (), (3,), np.float32),
    ((5, 6), (6, 3), (5,), (3,), np.float64),
    ((0, 6), (6, 3), (), (), np.float32),
    ((16, 200), (200, 150), (), (150,), np.float32),
])
@pytest.mark.parametrize("out_type", [np.uint8, np.int8])
def test_qlinear_matmul(a_shape, b_shape, sa_shape, sb_shape, ftype, out_type):
    a, b = ints(a_shape, np.uint8), ints(b_shape, np.int8)
    za, zb = ints(sa_shape, np.uint8), ints(sb_shape, np.int8)
    sa = RNG.uniform(0.001, 0.05, sa_shape).astype(ftype)
    sb = RNG.uniform(0.001, 0.05, sb_shape).astype(ftype)
    sy, zy = np.array([0.05], ftype), np.array([3], out_type)
    acc = matmul_integer_ref(a, b, za, zb)
    mult = (zp_for_a(sa, a_shape) * sb) / sy  # in the scales' dtype
    want = requantize_ref(acc, mult.astype(ftype), zy, out_type)

    def build(m, *vs):
        av, sav, zav, bv, sbv, zbv, syv, zyv = vs
        return m.call("qlinear_matmul", av, sav, zav, bv, sbv, zbv, syv, zyv,
                      outputs=[(np.dtype(out_type).name, want.shape, False)])[0]

    (got,) = run(build, a, sa, za, b, sb, zb, sy, zy, num_threads=4)
    same(got, want)


# ---- conv_integer / qlinear_conv -------------------------------------------------------------

def conv_ref(x, w, stride, pads, dilation, groups):
    """int64 cross-correlation (x and w already minus their zero points)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.zeros((n, c, h + top + bottom, wd + left + right), np.int64)
    xp[:, :, top:top + h, left:left + wd] = x
    ho = (h + top + bottom - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + left + right - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo), np.int64)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for p in range(kh):
            for q in range(kw):
                r0, c0 = p * dilation[0], q * dilation[1]
                rows = xp[:, g * cg:(g + 1) * cg, r0:r0 + (ho - 1) * stride[0] + 1:stride[0],
                          c0:c0 + (wo - 1) * stride[1] + 1:stride[1]]
                out[:, oc] += np.einsum("nchw,c->nhw", rows, w[oc, :, p, q].astype(np.int64))
    return out


CONV_CASES = [
    # x shape, w shape, stride, pads, dilation, groups
    ((1, 1, 3, 3), (1, 1, 2, 2), [1, 1], [0, 0, 0, 0], [1, 1], 1),
    ((1, 1, 3, 3), (2, 1, 2, 2), [1, 1], [1, 1, 1, 1], [1, 1], 1),
    ((2, 4, 9, 11), (6, 2, 3, 3), [2, 1], [1, 2, 0, 1], [1, 2], 2),
    ((1, 3, 5, 300), (4, 3, 1, 3), [1, 1], [0, 1, 0, 1], [1, 1], 1),
    ((0, 2, 4, 4), (3, 2, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1], 1),
]


@pytest.mark.parametrize("x_shape,w_shape,stride,pads,dilation,groups", CONV_CASES)
@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.int8, np.uint8)])
def test_conv_integer(x_shape, w_shape, stride, pads, dilation, groups, x_type, w_type):
    x, w = ints(x_shape, x_type), ints(w_shape, w_type)
    zx, zw = ints((), x_type), ints((w_shape[0],), w_type)
    want = conv_ref(x.astype(np.int64) - zx, w.astype(np.int64) - zw.reshape(-1, 1, 1, 1),
                    stride, pads, dilation, groups).astype(np.int32)

    def build(m, xv, wv, zxv, zwv):
        return m.call("conv_integer", xv, wv, zxv, zwv, stride, pads, dilation, groups,
                      outputs=[("int32", want.shape, False)])[0]

    (got,) = run(build, x, w, zx, zw, num_threads=4)
    same(got, want)


@pytest.mark.parametrize("x_shape,w_shape,stride,pads,dilation,groups", CONV_CASES)
def test_qlinear_conv(x_shape, w_shape, stride, pads, dilation, groups):
    x, w = ints(x_shape, np.uint8), ints(w_shape, np.int8)
    o = w_shape[0]
    zx, zw = np.array(7, np.uint8), np.zeros(o, np.int8)
    sx = np.array(0.02, np.float32)
    sw = RNG.uniform(0.001, 0.01, (o,)).astype(np.float32)
    sy, zy = np.array(0.1, np.float32), np.array(-3, np.int8)
    bias = ints((o,), np.int32, -2000, 2000)
    acc = conv_ref(x.astype(np.int64) - zx, w.astype(np.int64), stride, pads, dilation, groups)
    acc = (acc + bias.reshape(-1, 1, 1)).astype(np.int32)
    want = requantize_ref(acc, ((sx * sw) / sy).astype(np.float32).reshape(-1, 1, 1), zy, np.int8)

    def build(m, *vs):
        return m.call("qlinear_conv", *vs, stride, pads, dilation, groups,
                      outputs=[("int8", want.shape, False)])[0]

    (got,) = run(build, x, sx, zx, w, sw, zw, sy, zy, bias, num_threads=4)
    same(got, want)


def test_sums_wrap_around():
    k = 70000  # 255 * 255 * k overflows int32
    a, b = np.full((1, k), 255, np.uint8), np.full((k, 2), 255, np.uint8)
    (got,) = run(lambda m, av, bv: m.call("matmul_integer", av, bv, None, None,
                                          outputs=[("int32", (1, 2), False)])[0], a, b)
    same(got, (np.int64(255 * 255) * k * np.ones((1, 2), np.int64)).astype(np.int32))


def test_dynamic_sizes():
    """Shapes, parameter layouts and tiles are recomputed from the current input sizes."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (5, 3), max_shape=(5, 3))
    a = m.input("a", "uint8", (40, 6), max_shape=(40, 6))
    scale = m.constant(np.array([0.5, 1.0, 2.0], np.float32))
    q = m.call("quantize_linear", x, scale, None, 1, 0, outputs=[("int8", (5, 3), True)])[0]
    w_arr, zb_arr = ints((6, 4), np.int8), ints((4,), np.int8)
    y = m.call("matmul_integer", a, m.constant(w_arr), None, m.constant(zb_arr),
               outputs=[("int32", (40, 4), True)])[0]
    m.output(q, "q")
    m.output(y, "y")
    program = rt.Program.load(b.to_bytes())
    method = program.load_method("forward", num_threads=2)
    try:
        for rows, arows in ((5, 40), (2, 17), (0, 0)):
            xv = (RNG.standard_normal((rows, 3)) * 50).astype(np.float32)
            av = ints((arows, 6), np.uint8)
            got_q, got_y = [np.array(v) for v in method(xv, av)]
            same(got_q, quantize_ref(xv, np.array([0.5, 1.0, 2.0], np.float32), None, 1, 0,
                                     np.int8))
            same(got_y, matmul_integer_ref(av, w_arr, None, zb_arr))
    finally:
        method.close()
        program.close()


# ---- errors ----------------------------------------------------------------------------------

def load_error(build: Callable[..., Any], *arrays: np.ndarray) -> str:
    with pytest.raises(Error) as e:
        run(build, *arrays)
    return str(e.value)


def test_errors():
    x = np.zeros((2, 3), np.float32)
    msg = load_error(lambda m, xv, sv: quantize(m, xv, sv, None, 1, 0, np.uint8), x,
                     np.ones(2, np.float32))
    assert "scale" in msg
    msg = load_error(lambda m, xv, sv: quantize(m, xv, sv, None, 1, -1, np.uint8), x,
                     np.ones(3, np.float32))
    assert "block_size" in msg
    msg = load_error(lambda m, xv, sv: quantize(m, xv, sv, None, 1, 0, np.int64), x,
                     np.ones(3, np.float32))
    assert "out" in msg
    a, b = np.zeros((4, 3), np.uint8), np.zeros((3, 2), np.uint8)
    msg = load_error(lambda m, av, bv, zv: m.call("matmul_integer", av, bv, zv, None,
                                                   outputs=[("int32", (4, 2), False)])[0],
                     a, b, np.zeros(3, np.uint8))
    assert "a_zero_point" in msg
    msg = load_error(lambda m, av, bv: m.call("matmul_integer", av, bv, None, None,
                                              outputs=[("int32", (4, 2), False)])[0],
                     a, b.astype(np.int16))
    assert "b has dtype int16" in msg


# ---- through the ONNX importer ---------------------------------------------------------------

onnx = pytest.importorskip("onnx")


def convert_and_run(node, inputs: dict, initializers: Sequence[Any] = (), opset: int = 21):
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    from runtime_py.onnx import convert

    graph_inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                  v.shape) for k, v in inputs.items()]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output]
    graph = helper.make_graph([node], "g", graph_inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(model).run(None, inputs)
    program = rt.Program.load(convert(model))
    method = program.load_method("forward")
    try:
        got = [np.array(y) for y in method(*inputs.values())]
    finally:
        method.close()
        program.close()
    for g, w in zip(got, want):
        same(g, np.asarray(w))


def test_onnx_quantize_float16_per_axis_and_constant_params():
    from onnx import helper, numpy_helper

    x = (RNG.standard_normal((2, 3, 4)) * 100).astype(np.float16)
    scale = numpy_helper.from_array(np.array([0.5, 1.5, 3.0], np.float16), "s")
    zp = numpy_helper.from_array(np.array([1, -2, 3], np.int8), "z")
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    convert_and_run(node, {"x": x}, [scale, zp])


def test_onnx_dequantize_output_dtype_and_int32():
    from onnx import TensorProto, helper

    x = ints((3, 4), np.int32, -2**30, 2**30)
    s, z = np.array(0.37, np.float32), np.array(12345, np.int32)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])
    convert_and_run(node, {"x": x, "s": s, "z": z})
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"],
                            output_dtype=TensorProto.FLOAT16)
    convert_and_run(node, {"x": ints((5,), np.uint8), "s": s}, opset=23)


def test_onnx_qlinear_matmul_float16_per_column():
    from onnx import helper

    a, b = ints((3, 5), np.uint8), ints((5, 4), np.uint8)
    inputs = {"a": a, "sa": np.array([0.0123], np.float16), "za": np.array([5], np.uint8),
              "b": b, "sb": RNG.uniform(0.01, 0.1, (4,)).astype(np.float16),
              "zb": np.array([1, 2, 3, 4], np.uint8), "sy": np.array([0.7], np.float16),
              "zy": np.array([11], np.uint8)}
    node = helper.make_node("QLinearMatMul", list(inputs), ["y"])
    convert_and_run(node, inputs)


def test_onnx_conv_integer_1d_and_unsupported_type():
    from onnx import TensorProto, helper

    from runtime_py.onnx import ConversionError, convert

    x, w = ints((2, 3, 10), np.uint8), ints((4, 3, 3), np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "zx"], ["y"], pads=[1, 2], strides=[2])
    convert_and_run(node, {"x": x, "w": w, "zx": np.array(9, np.uint8)}, opset=10)
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.INT4)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                      helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(ConversionError, match="QuantizeLinear"):
        convert(model)
