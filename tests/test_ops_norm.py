"""layer_norm, rms_norm, instance_norm, group_norm, lp_norm and conv_transpose2d against numpy
references, through the builder: several shapes (zero-size ones included), float32 and float64,
both conv_transpose2d paths (direct and GEMM + col2im), and a few load-time errors."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

RNG = np.random.default_rng(7)


def run(build: Callable[..., Any], *arrays: np.ndarray, num_threads: int = 0):
    """forward(x0, ...) = build(m, *inputs); returns the outputs as numpy arrays."""
    b = ProgramBuilder()
    m = b.method("forward")
    xs = [m.input(f"x{i}", str(a.dtype), a.shape) for i, a in enumerate(arrays)]
    ys = build(m, *xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    for i, y in enumerate(ys):
        m.output(y, f"y{i}")
    program = rt.Program.load(b.to_bytes())
    method = program.load_method("forward", num_threads=num_threads)
    try:
        return [np.array(y) for y in method(*arrays)]
    finally:
        method.close()
        program.close()


def rand(shape: Sequence[int], dtype: Any = np.float32, offset: float = 0.0) -> np.ndarray:
    return (RNG.standard_normal(shape) + offset).astype(dtype)


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    tol = 1e-4 if got.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


# ---- layer_norm ------------------------------------------------------------------------------

def layer_norm_ref(x, scale, bias, axis, eps):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # an empty row has a NaN mean, as in the op
        mean = x64.mean(axis=axes, keepdims=True)
        inv = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    y = (x64 - mean) * inv
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype), mean.astype(x.dtype), inv.astype(x.dtype)


@pytest.mark.parametrize("shape,axis,scale_shape,bias_shape,dtype", [
    ((2, 3, 4, 5), -1, (5,), (5,), np.float32),
    ((2, 3, 4, 5), 1, (3, 4, 5), (4, 5), np.float32),
    ((2, 3, 4, 5), 0, None, None, np.float64),
    ((6, 7), 1, (1, 7), None, np.float64),
    ((3, 300), -1, (300,), (300,), np.float32),
    ((0, 5), -1, (5,), (5,), np.float32),
    ((4, 0), 1, None, None, np.float32),
])
def test_layer_norm(shape, axis, scale_shape, bias_shape, dtype):
    x = rand(shape, dtype, offset=1000.0)  # a large common offset must not cancel
    scale = rand(scale_shape, dtype) if scale_shape else None
    bias = rand(bias_shape, dtype) if bias_shape else None
    arrays = [a for a in (x, scale, bias) if a is not None]

    def build(m, x_v, *rest):
        it = iter(rest)
        s = next(it) if scale is not None else None
        b = next(it) if bias is not None else None
        return m.layer_norm(x_v, s, b, axis=axis, epsilon=1e-3, stats=True)

    y, mean, inv = run(build, *arrays)
    ry, rmean, rinv = layer_norm_ref(x, scale, bias, axis, 1e-3)
    close(y, ry)
    close(mean, rmean)
    close(inv, rinv)


def test_layer_norm_without_stats_threads():
    x = rand((64, 1000))
    (y,) = run(lambda m, v: m.layer_norm(v, axis=-1, epsilon=1e-5), x, num_threads=4)
    close(y, layer_norm_ref(x, None, None, -1, 1e-5)[0])


def test_layer_norm_bad_scale():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 3))
    s = m.input("s", "float32", (2,))
    with pytest.raises(ValueError, match="scale shape"):
        m.layer_norm(x, s)
    # The C op checks the same at load.
    (y,) = m.call("layer_norm", x, s, None, -1, 1e-5, outputs=[("float32", (2, 3), False)])
    m.output(y)
    with pytest.raises(rt.InvalidProgram, match=r"layer_norm\): scale \[2\] must match"):
        rt.Program.load(b.to_bytes()).load_method("forward")


# ---- rms_norm --------------------------------------------------------------------------------

def rms_norm_ref(x, scale, axis, eps):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    y = x64 / np.sqrt((x64 ** 2).mean(axis=axes, keepdims=True) + eps)
    return (y if scale is None else y * scale).astype(x.dtype)


def rms_norm(m, x, scale, axis, eps, dtype="float32"):
    return m.call("rms_norm", x, scale, axis, eps, outputs=[(dtype, x.shape, x.dynamic)])[0]


@pytest.mark.parametrize("shape,axis,scale_shape,dtype", [
    ((2, 3, 64), -1, (64,), np.float32),
    ((2, 3, 4, 5), 1, (4, 5), np.float32),
    ((2, 3, 4, 5), 0, None, np.float64),
    ((6, 7), 1, (1, 7), np.float64),
    ((3, 1000), -1, (1000,), np.float32),
    ((0, 5), -1, (5,), np.float32),
])
def test_rms_norm(shape, axis, scale_shape, dtype):
    """Llama's and T5's RMSNorm: x / sqrt(mean(x^2) + eps) * scale over the dims from axis."""
    x = rand(shape, dtype, offset=0.5)
    scale = rand(scale_shape, dtype) if scale_shape else None
    arrays = [a for a in (x, scale) if a is not None]
    name = np.dtype(dtype).name
    (y,) = run(lambda m, x_v, *s: rms_norm(m, x_v, s[0] if s else None, axis, 1e-6, name),
               *arrays, num_threads=3)
    close(y, rms_norm_ref(x, scale, axis, 1e-6))


def test_rms_norm_in_place_and_errors():
    x = rand((4, 16))
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    t = m.copy(xv)
    m.call("rms_norm", t, None, -1, 1e-5, out=t)
    m.output(t, "y")
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as method:
        close(np.array(method(x)[0]), rms_norm_ref(x, None, -1, 1e-5))
    for scale_shape, eps, text in (((8,), 1e-5, r"scale \[8\] must match the trailing sizes"),
                                   ((16,), -1.0, "epsilon must be finite and >= 0")):
        b = ProgramBuilder()
        m = b.method("forward")
        xv, sv = m.input("x", "float32", x.shape), m.input("s", "float32", scale_shape)
        m.output(rms_norm(m, xv, sv, -1, eps), "y")
        with pytest.raises(rt.InvalidProgram, match=r"rms_norm\): " + text):
            rt.Program.load(b.to_bytes()).load_method("forward")


# ---- instance_norm and group_norm ------------------------------------------------------------

def group_norm_ref(x, scale, bias, groups, eps):
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, groups, c // groups * int(np.prod(x.shape[2:])))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # empty groups
        mean = xg.mean(axis=2, keepdims=True)
        var = xg.var(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if scale is not None:
        s = scale if scale.shape[0] == c else np.repeat(scale, c // groups)
        y = y * s.reshape(shape)
    if bias is not None:
        b = bias if bias.shape[0] == c else np.repeat(bias, c // groups)
        y = y + b.reshape(shape)
    return y.astype(x.dtype)


@pytest.mark.parametrize("shape,dtype", [((2, 3, 4, 5), np.float32), ((1, 4, 7), np.float64),
                                         ((3, 2), np.float32), ((0, 3, 4), np.float32),
                                         ((2, 3, 0, 4), np.float32)])
def test_instance_norm(shape, dtype):
    x = rand(shape, dtype, offset=50.0)
    scale, bias = rand((shape[1],), dtype), rand((shape[1],), dtype)
    (y,) = run(lambda m, a, s, b: m.instance_norm(a, s, b, epsilon=1e-4), x, scale, bias)
    close(y, group_norm_ref(x, scale, bias, shape[1], 1e-4))


@pytest.mark.parametrize("shape,groups,param", [((3, 4, 2, 2), 2, 4), ((3, 4, 2, 2), 2, 2),
                                                ((2, 6, 5), 3, None), ((2, 6, 5), 6, 6),
                                                ((1, 0, 3), 2, 0)])
def test_group_norm(shape, groups, param):
    x = rand(shape, np.float32)
    if param is None:
        (y,) = run(lambda m, a: m.group_norm(a, None, None, groups), x)
        close(y, group_norm_ref(x, None, None, groups, 1e-5))
        return
    scale, bias = rand((param,)), rand((param,))
    (y,) = run(lambda m, a, s, b: m.group_norm(a, s, b, groups), x, scale, bias)
    close(y, group_norm_ref(x, scale, bias, groups, 1e-5))


def test_group_norm_errors():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 6, 5))
    with pytest.raises(ValueError, match="num_groups 4"):
        m.group_norm(x, None, None, 4)
    s = m.input("s", "float32", (5,))
    (y,) = m.call("group_norm", x, s, None, 3, 1e-5, outputs=[("float32", (2, 6, 5), False)])
    m.output(y)
    with pytest.raises(rt.InvalidProgram, match=r"scale has 5 elements; it needs one per "
                                                r"channel \(6\) or one per group \(3\)"):
        rt.Program.load(b.to_bytes()).load_method("forward")


# ---- lp_norm ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,p", [((2, 3, 4), 1, 2), ((2, 3, 4), -1, 1), ((5,), 0, 2),
                                          ((3, 130), 0, 1), ((2, 0, 3), 2, 2)])
def test_lp_norm(shape, axis, p):
    x = rand(shape)
    if x.size:
        x[(0,) * (x.ndim - 1)] = 0  # some zero norms give 0, not NaN
    (y,) = run(lambda m, a: m.lp_norm(a, axis, p), x)
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=axis, keepdims=True) if x.size \
        else np.ones_like(x)
    want = np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)).astype(x.dtype)
    close(y, want)


# ---- conv_transpose2d ------------------------------------------------------------------------

def conv_transpose_ref(x, w, bias, stride, pads, out_pad, dilation, groups):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    top, left, bottom, right = pads
    ho = (h - 1) * stride[0] - top - bottom + dilation[0] * (kh - 1) + out_pad[0] + 1
    wo = (wd - 1) * stride[1] - left - right + dilation[1] * (kw - 1) + out_pad[1] + 1
    cg = c // groups
    out = np.zeros((n, og * groups, ho, wo))
    for i in range(h):
        for j in range(wd):
            for p in range(kh):
                for q in range(kw):
                    oh = i * stride[0] - top + p * dilation[0]
                    ow = j * stride[1] - left + q * dilation[1]
                    if not (0 <= oh < ho and 0 <= ow < wo):
                        continue
                    for g in range(groups):
                        xs = x[:, g * cg:(g + 1) * cg, i, j].astype(np.float64)  # [n, cg]
                        ws = w[g * cg:(g + 1) * cg, :, p, q].astype(np.float64)  # [cg, og]
                        out[:, g * og:(g + 1) * og, oh, ow] += xs @ ws
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


@pytest.mark.parametrize("x_shape,w_shape,stride,pads,out_pad,dilation,groups,dtype", [
    ((1, 1, 3, 3), (1, 2, 3, 3), (1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1, np.float32),
    ((2, 2, 3, 4), (2, 3, 3, 2), (3, 2), (1, 2, 1, 0), (1, 1), (1, 1), 1, np.float64),
    ((1, 4, 5, 5), (4, 1, 2, 2), (2, 2), (0, 0, 0, 0), (0, 0), (2, 1), 2, np.float32),
    ((1, 1, 3, 3), (1, 1, 1, 1), (2, 2), (-1, -1, 0, 0), (0, 0), (1, 1), 1, np.float32),
    ((2, 16, 6, 5), (16, 5, 3, 3), (2, 1), (1, 1, 0, 2), (1, 0), (1, 2), 1, np.float32),  # GEMM
    ((1, 32, 4, 4), (32, 3, 4, 4), (2, 2), (1, 1, 1, 1), (0, 0), (1, 1), 2, np.float32),  # GEMM
    ((1, 3, 0, 4), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1, np.float32),
    ((0, 3, 2, 2), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1, np.float32),
])
def test_conv_transpose2d(x_shape, w_shape, stride, pads, out_pad, dilation, groups, dtype):
    x, w = rand(x_shape, dtype), rand(w_shape, dtype)
    bias = rand((w_shape[1] * groups,), dtype)
    (y,) = run(lambda m, a, b, c: m.conv_transpose2d(a, b, c, stride, list(pads), out_pad,
                                                     dilation, groups), x, w, bias, num_threads=3)
    close(y, conv_transpose_ref(x, w, bias, stride, pads, out_pad, dilation, groups))


def test_dynamic_sizes():
    """Sizes are recomputed at every execute from the current input sizes."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4, 16, 6, 6), max_shape=(4, 16, 6, 6))
    w = m.constant(rand((16, 2, 3, 3)))
    y = m.conv_transpose2d(x, w, None, stride=2, padding=1, output_padding=1)  # GEMM path
    z = m.group_norm(x, None, None, 4)
    u = m.layer_norm(x, axis=2, stats=True)
    m.output(y, "y")
    m.output(z, "z")
    m.output(u[1], "mean")
    program = rt.Program.load(b.to_bytes())
    method = program.load_method("forward", num_threads=2)
    try:
        for shape in ((4, 16, 6, 6), (1, 16, 3, 5), (2, 16, 0, 4)):
            a = rand(shape)
            got_y, got_z, got_mean = [np.array(v) for v in method(a)]
            assert got_y.shape == (shape[0], 2, max(0, 2 * shape[2]), 2 * shape[3])
            close(got_z, group_norm_ref(a, None, None, 4, 1e-5))
            close(got_mean, layer_norm_ref(a, None, None, 2, 1e-5)[1])
    finally:
        method.close()
        program.close()


def test_conv_transpose2d_without_bias():
    x, w = rand((1, 2, 4, 4)), rand((2, 2, 2, 2))
    (y,) = run(lambda m, a, b: m.conv_transpose2d(a, b, None, 2), x, w)
    close(y, conv_transpose_ref(x, w, None, (2, 2), (0, 0, 0, 0), (0, 0), (1, 1), 1))


def test_conv_transpose2d_errors():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, 4, 3, 3))
    w = m.input("w", "float32", (3, 2, 3, 3))
    with pytest.raises(ValueError, match="weight has 3 input channels, x has 4"):
        m.conv_transpose2d(x, w)
    (y,) = m.call("conv_transpose2d", x, w, None, [1, 1], [0, 0], [0, 0], [1, 1], 1,
                  outputs=[("float32", (1, 2, 5, 5), False)])
    m.output(y)
    with pytest.raises(rt.InvalidProgram, match=r"w \[3, 2, 3, 3\] must have one row per input "
                                                r"channel of x \[1, 4, 3, 3\]"):
        rt.Program.load(b.to_bytes()).load_method("forward")


def test_norms_in_place():
    """The output may be x itself: each row is read before it is written."""
    x = rand((3, 70), offset=5.0)
    scale = rand((70,))

    def build(m, a, s):
        t = m.copy(a)
        m.layer_norm(t, s, None, axis=-1, out=t)
        u = m.copy(a)
        m.lp_norm(u, 0, 2, out=u)
        return t, u

    y, z = run(build, x, scale)
    close(y, layer_norm_ref(x, scale, None, -1, 1e-5)[0])
    close(z, (x / np.linalg.norm(x.astype(np.float64), axis=0, keepdims=True)).astype(np.float32))


# ---- ONNX lowerings ----------------------------------------------------------------------------

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from runtime_py.onnx import ConversionError  # noqa: E402
from runtime_py.onnx.backend import RuntimeBackend  # noqa: E402


def onnx_run(op: str, arrays: Sequence[np.ndarray], opset: int = 18, n_out: int = 1, **attrs):
    names = [f"i{k}" for k in range(len(arrays))]
    node = helper.make_node(op, names, [f"o{k}" for k in range(n_out)], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, arrays)],
        [helper.make_empty_tensor_value_info(f"o{k}") for k in range(n_out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return RuntimeBackend.prepare(model).run(list(arrays)), model


@pytest.mark.parametrize("equation,shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
    ("ij->ji", [(3, 4)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]), ("ij->i", [(3, 4)]), ("ii->i", [(3, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bij,bj->bi", [(2, 3, 0), (2, 0)]),
])
def test_onnx_einsum(equation, shapes):
    arrays = [rand(s) for s in shapes]
    (y,), _ = onnx_run("Einsum", arrays, opset=12, equation=equation)
    close(y, np.einsum(equation, *[a.astype(np.float64) for a in arrays]).astype(np.float32))


def test_onnx_einsum_refusals_name_the_equation():
    with pytest.raises(ConversionError, match=r"equation 'i,i' names 2 operands, the node has 1"):
        onnx_run("Einsum", [rand((3,))], opset=12, equation="i,i")
    with pytest.raises(ConversionError, match=r"equation 'i\$,i': cannot parse"):
        onnx_run("Einsum", [rand((3,)), rand((3,))], opset=12, equation="i$,i")


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], output_shape=[10, 9]), dict(strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(strides=[3, 3], auto_pad="SAME_LOWER"), dict(strides=[2, 1], pads=[1, 0, 0, 2],
                                                      output_padding=[1, 0], dilations=[1, 2]),
])
def test_onnx_conv_transpose(attrs):
    from onnx.reference import ReferenceEvaluator

    arrays = [rand((1, 2, 4, 4)), rand((2, 3, 3, 3)), rand((3,))]
    (y,), model = onnx_run("ConvTranspose", arrays, **attrs)
    (want,) = ReferenceEvaluator(model).run(None, {f"i{k}": a for k, a in enumerate(arrays)})
    close(y, want)


def test_onnx_conv_transpose_3d_refused():
    with pytest.raises(ConversionError, match="1-D and 2-D only"):
        onnx_run("ConvTranspose", [rand((1, 1, 2, 2, 2)), rand((1, 1, 2, 2, 2))])


@pytest.mark.parametrize("axes", [[0, 2, 3], [1], [2, 3]])
def test_onnx_mean_variance_normalization(axes):
    x = rand((2, 3, 4, 5))
    (y,), _ = onnx_run("MeanVarianceNormalization", [x], opset=13, axes=axes)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=tuple(axes), keepdims=True)
    want = (x64 - mean) / (np.sqrt((x64 ** 2).mean(axis=tuple(axes), keepdims=True) - mean ** 2)
                           + 1e-9)
    close(y, want.astype(np.float32))


def test_onnx_layer_norm_scale_applied_after_and_stash_cast():
    x, scale, bias = rand((2, 3, 4)), rand((3, 1)), rand((4,))
    (y, mean, inv), _ = onnx_run("LayerNormalization", [x, scale, bias], opset=17, n_out=3,
                                 axis=1, stash_type=11)
    ref_y, ref_mean, ref_inv = layer_norm_ref(x.astype(np.float64), scale, bias, 1, 1e-5)
    close(y, ref_y.astype(np.float32))
    close(mean, ref_mean)
    close(inv, ref_inv)
