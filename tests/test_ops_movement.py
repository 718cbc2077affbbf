"""The data-movement ops (slice, split, gather*, scatter*, pad, tile, expand, depth_to_space,
space_to_depth, trilu, resize, one_hot, eye_like, constant_of_shape, range, shape, size,
non_zero, unique) against numpy, through the builder: a few shapes each, zero-size ones included,
run-time (tensor) parameters with dynamic outputs, and load- and run-time error paths. The
ONNX node cases whose parameters the official suite feeds at run time (so the importer
refuses them) run here with those parameters frozen into initializers."""
from __future__ import annotations

import copy
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from runtime_py.errors import InvalidArgument, InvalidProgram

RNG = np.random.default_rng(11)


def run(build: Callable[..., Any], *arrays: np.ndarray, bounds: Optional[Sequence[Any]] = None,
        num_threads: int = 0):
    """forward(x0, ...) = build(m, *inputs); bounds[i] makes input i dynamic."""
    b = ProgramBuilder()
    m = b.method("forward")
    xs = []
    for i, a in enumerate(arrays):
        bound = bounds[i] if bounds is not None else None
        if bound is not None:
            xs.append(m.input(f"x{i}", str(a.dtype), bound, max_shape=bound))
        else:
            xs.append(m.input(f"x{i}", str(a.dtype), a.shape))
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


def call(m, op, *args, dtype, shape, dynamic=False):
    return m.call(op, *args, outputs=[(dtype, shape, dynamic)])[0]


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


# ---- slice, split -------------------------------------------------------------------------

def onnx_slice(x, starts, ends, axes, steps):
    """Reference with ONNX's clamping (numpy's differs for starts < -dim with negative steps)."""
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        index[a] = slice(s, None if e < 0 else e, st)
    return x[tuple(index)]


SLICES = [
    ((5, 6), [1, 0], [4, 6], [0, 1], [1, 2]),
    ((5, 6), [-1], [-6], [1], [-1]),
    ((5, 6), [-100], [100], [0], [1]),
    ((5, 6), [-100], [-2**63], [1], [-1]),  # ONNX: a start before the beginning clamps to 0
    ((4, 0, 3), [0, 0], [2, 5], [0, 1], [1, 1]),
    ((7,), [2**63 - 1], [-2**63], [0], [-3]),
    ((3, 4, 5), [1], [1], [-1], [1]),
]


@pytest.mark.parametrize("shape,starts,ends,axes,steps", SLICES)
def test_slice_lists_and_tensors(shape, starts, ends, axes, steps):
    x = RNG.standard_normal(shape).astype(np.float32)
    want = onnx_slice(x, starts, ends, axes, steps)
    (got,) = run(lambda m, x: call(m, "slice", x, starts, ends, axes, steps, dtype="float32",
                                   shape=want.shape), x)
    same(got, want)
    params = [np.array(p, dtype=np.int64) for p in (starts, ends, axes, steps)]
    (got,) = run(lambda m, x, s, e, a, st: call(m, "slice", x, s, e, a, st, dtype="float32",
                                                shape=shape, dynamic=True), x, *params)
    same(got, want)


def test_slice_default_axes_and_dynamic_input():
    x = np.arange(24, dtype=np.int16).reshape(4, 6)
    (got,) = run(lambda m, x: call(m, "slice", x, [1], [-1], None, None, dtype="int16",
                                   shape=(8, 6), dynamic=True), x[:3], bounds=[(10, 6)])
    same(got, x[1:2])


def test_split_sizes_equal_and_tensor():
    x = RNG.standard_normal((2, 7, 3))
    outs = lambda sizes: [("float64", (2, s, 3), False) for s in sizes]
    got = run(lambda m, x: m.call("split", x, 1, [2, 0, 5], outputs=outs([2, 0, 5])), x)
    for g, w in zip(got, np.split(x, [2, 2], axis=1)):
        same(g, w)
    got = run(lambda m, x: m.call("split", x, -2, [], outputs=outs([3, 3, 1])), x)
    for g, w in zip(got, np.split(x, [3, 6], axis=1)):
        same(g, w)
    sizes = np.array([4, 3], dtype=np.int32)
    got = run(lambda m, x, s: m.call("split", x, 1, s, outputs=[("float64", (2, 7, 3), True)] * 2),
              x, sizes)
    for g, w in zip(got, np.split(x, [4], axis=1)):
        same(g, w)
    with pytest.raises(InvalidArgument, match="add up to 8, but x has 7"):
        run(lambda m, x, s: m.call("split", x, 1, s, outputs=[("float64", (2, 7, 3), True)] * 2),
            x, np.array([4, 4], dtype=np.int64))


# ---- gather family ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,indices", [
    ((5, 4, 3), 0, [[0, -1], [4, 2]]),
    ((5, 4, 3), -1, [2, -3, 0]),
    ((5, 4), 1, 3),
    ((5, 0), 0, [1, 1]),
    ((5, 4), 0, np.zeros((0, 2), np.int64)),
])
def test_gather(shape, axis, indices):
    x = RNG.standard_normal(shape).astype(np.float32)
    for itype in (np.int64, np.int32):
        idx = np.asarray(indices, dtype=itype)
        want = np.take(x, idx, axis=axis)
        (got,) = run(lambda m, x, i: call(m, "gather", x, i, axis, dtype="float32",
                                          shape=want.shape), x, idx)
        same(got, want)


def test_gather_out_of_range_names_the_index():
    x = np.zeros((3, 4), np.float32)
    idx = np.array([[0, 1], [4, 2]], np.int64)
    with pytest.raises(InvalidArgument, match=r"indices\[1, 0\] is 4, out of range for axis 1"):
        run(lambda m, x, i: call(m, "gather", x, i, 1, dtype="float32", shape=(3, 2, 2)), x, idx)


def test_gather_family_errors_name_the_dimension():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(InvalidArgument, match=r"indices\[0, 1\] is -5, out of range for axis 1 "
                       r"of data of size 4 \(valid: -4 to 3\)"):
        run(lambda m, x, i: call(m, "gather_elements", x, i, 1, dtype="float32", shape=(1, 2)),
            x, np.array([[0, -5]], np.int64))
    with pytest.raises(InvalidArgument, match=r"indices\[1, 1\] is 4, out of range for "
                       r"dimension 1 of data of size 4"):
        run(lambda m, x, i: call(m, "gather_nd", x, i, 0, dtype="float32", shape=(2,)),
            x, np.array([[0, 1], [2, 4]], np.int64))


def test_split_errors_name_the_output():
    x = np.zeros((2, 12, 3))
    outs = [("float64", (2, 1, 3), False)] * 11 + [("float64", (2, 2, 3), False)]
    with pytest.raises(InvalidProgram, match=r"out_11 is planned with shape \[2, 2, 3\]"):
        run(lambda m, x: m.call("split", x, 1, [], outputs=outs), x)


def test_gather_elements_and_nd():
    x = RNG.integers(-50, 50, (4, 5, 3)).astype(np.int32)
    idx = RNG.integers(-5, 5, (4, 2, 3))
    want = np.take_along_axis(x, np.where(idx < 0, idx + 5, idx), axis=1)
    (got,) = run(lambda m, x, i: call(m, "gather_elements", x, i, 1, dtype="int32",
                                      shape=idx.shape), x, idx)
    same(got, want)
    nd = np.array([[[0, 1]], [[3, -1]]], np.int64)  # [2, 1, 2]
    want = np.stack([x[0, 1], x[3, 4]])[:, None]
    (got,) = run(lambda m, x, i: call(m, "gather_nd", x, i, 0, dtype="int32", shape=(2, 1, 3)),
                 x, nd)
    same(got, want)
    nd_b = np.array([[1], [0], [2], [4]], np.int64)  # batch_dims 1: x[b, nd_b[b]]
    want = np.stack([x[b, nd_b[b, 0]] for b in range(4)])
    (got,) = run(lambda m, x, i: call(m, "gather_nd", x, i, 1, dtype="int32", shape=(4, 3)),
                 x, nd_b)
    same(got, want)


# ---- scatter ------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_elements_reductions(reduction, dtype):
    data = RNG.integers(-9, 9, (3, 5)).astype(dtype)
    idx = np.array([[1, 1, -1], [0, 4, 4]], np.int64)
    upd = RNG.integers(-9, 9, (2, 3)).astype(dtype)
    want = data.copy()
    ufunc = [None, np.add, np.multiply, np.maximum, np.minimum][reduction]
    for i in range(2):
        for j in range(3):
            k = idx[i, j] % 5
            want[i, k] = upd[i, j] if ufunc is None else ufunc(want[i, k], upd[i, j])
    (got,) = run(lambda m, d, i, u: call(m, "scatter_elements", d, i, u, 1, reduction,
                                         dtype=data.dtype.name, shape=data.shape), data, idx, upd)
    same(got, want)


def test_scatter_nd_and_errors():
    data = np.arange(24, dtype=np.float64).reshape(4, 3, 2)
    idx = np.array([[1], [-1]], np.int64)
    upd = -np.ones((2, 3, 2))
    want = data.copy()
    want[1] = want[3] = -1
    (got,) = run(lambda m, d, i, u: call(m, "scatter_nd", d, i, u, 0, dtype="float64",
                                         shape=(4, 3, 2)), data, idx, upd)
    same(got, want)
    (got,) = run(lambda m, d, i, u: call(m, "scatter_nd", d, i, u, 1, dtype="float64",
                                         shape=(4, 3, 2)), data, idx, upd)
    same(got, np.where(want == -1, data - 1, data))
    with pytest.raises(InvalidArgument, match=r"indices\[1, 0\] is 4, out of range"):
        run(lambda m, d, i, u: call(m, "scatter_nd", d, i, u, 0, dtype="float64",
                                    shape=(4, 3, 2)), data, np.array([[0], [4]]), upd)
    with pytest.raises(InvalidProgram, match="reduction 7"):
        run(lambda m, d, i, u: call(m, "scatter_nd", d, i, u, 7, dtype="float64",
                                    shape=(4, 3, 2)), data, idx, upd)


# ---- pad, tile, expand --------------------------------------------------------------------

@pytest.mark.parametrize("mode,name", [(0, "constant"), (1, "reflect"), (2, "edge"), (3, "wrap")])
@pytest.mark.parametrize("pads", [[1, 0, 2, 3], [0, 7, 0, 9], [0, 0, 0, 0]])
def test_pad_modes(mode, name, pads):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    width = [(pads[0], pads[2]), (pads[1], pads[3])]
    kw = {"constant_values": 2.5} if name == "constant" else {}
    want = np.pad(x, width, mode=name, **kw)
    (got,) = run(lambda m, x: call(m, "pad", x, pads, mode, m.constant(np.array(2.5, np.float32)),
                                   dtype="float32", shape=want.shape), x)
    same(got, want)


def test_pad_negative_crops_then_pads():
    x = np.arange(20, dtype=np.int64).reshape(4, 5)
    (got,) = run(lambda m, x: call(m, "pad", x, [-1, 2, 1, -3], 2, None, dtype="int64",
                                   shape=(4, 4)), x)
    same(got, np.pad(x[1:, :2], [(0, 1), (2, 0)], mode="edge"))
    with pytest.raises(InvalidProgram, match="crop more than"):
        run(lambda m, x: call(m, "pad", x, [-3, 0, -2, 0], 0, None, dtype="int64",
                              shape=(0, 5)), x)
    with pytest.raises(InvalidProgram, match="mode 9"):
        run(lambda m, x: call(m, "pad", x, [0, 0, 0, 0], 9, None, dtype="int64", shape=(4, 5)),
            x)


def test_tile_and_expand():
    x = RNG.standard_normal((2, 1, 3))
    (got,) = run(lambda m, x: call(m, "tile", x, [2, 3, 0], dtype="float64", shape=(4, 3, 0)),
                 x)
    same(got, np.tile(x, (2, 3, 0)))
    (got,) = run(lambda m, x: call(m, "tile", x, [1, 4, 2], dtype="float64", shape=(2, 4, 6)),
                 x)
    same(got, np.tile(x, (1, 4, 2)))
    (got,) = run(lambda m, x: call(m, "expand", x, [5, 1, 4, 1], dtype="float64",
                                   shape=(5, 2, 4, 3)), x)
    same(got, np.broadcast_to(x, (5, 2, 4, 3)))
    shape = np.array([2, 6, 1], np.int64)
    (got,) = run(lambda m, x, s: call(m, "expand", x, s, dtype="float64", shape=(2, 8, 3),
                                      dynamic=True), x, shape)
    same(got, np.broadcast_to(x, (2, 6, 3)))
    with pytest.raises(InvalidProgram, match="cannot be expanded"):
        run(lambda m, x: call(m, "expand", x, [4, 2], dtype="float64", shape=(2, 4, 3)), x)


# ---- depth_to_space, space_to_depth, trilu ------------------------------------------------

def d2s_ref(x, b, crd):
    n, c, h, w = x.shape
    if crd:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


@pytest.mark.parametrize("mode", [0, 1])
def test_depth_to_space_roundtrip(mode):
    x = RNG.standard_normal((2, 12, 3, 2)).astype(np.float32)
    want = d2s_ref(x, 2, mode == 1)
    (y,) = run(lambda m, x: call(m, "depth_to_space", x, 2, mode, dtype="float32",
                                 shape=want.shape), x)
    same(y, want)
    (back,) = run(lambda m, y: call(m, "space_to_depth", y, 2, mode, dtype="float32",
                                    shape=x.shape), y)
    same(back, x)


@pytest.mark.parametrize("k", [0, 2, -1, -9, 2**62])
@pytest.mark.parametrize("upper", [True, False])
def test_trilu(k, upper):
    x = RNG.integers(1, 9, (2, 3, 4)).astype(np.uint8)
    want = np.triu(x, k) if upper else np.tril(x, k)
    (got,) = run(lambda m, x: call(m, "trilu", x, k, upper, dtype="uint8", shape=x.shape), x)
    same(got, want)
    (got,) = run(lambda m, x, kk: call(m, "trilu", x, kk, upper, dtype="uint8", shape=x.shape),
                 x, np.array(k, np.int64))
    same(got, want)


# ---- resize -------------------------------------------------------------------------------

def test_resize_nearest_and_bilinear():
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    # nearest, asymmetric, floor, integer scales: a repeat (any dtype)
    xi = (x * 10).astype(np.int32)
    (got,) = run(lambda m, x: call(m, "resize", x, [], [1.0, 1.0, 2.0, 3.0], [], 0, 4, 2, -0.75,
                                   False, False, 0.0, dtype="int32", shape=(1, 2, 6, 12)), xi)
    same(got, xi.repeat(2, axis=2).repeat(3, axis=3))
    # bilinear, align_corners, to explicit sizes
    (got,) = run(lambda m, x: call(m, "resize", x, [1, 2, 5, 7], [], [], 1, 3, 0, -0.75, False,
                                   False, 0.0, dtype="float32", shape=(1, 2, 5, 7)), x)
    ys, xs = np.linspace(0, 2, 5), np.linspace(0, 3, 7)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, 2), np.minimum(x0 + 1, 3)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    want = (x[..., y0[:, None], x0] * (1 - fy) * (1 - fx) + x[..., y0[:, None], x1] * (1 - fy) * fx
            + x[..., y1[:, None], x0] * fy * (1 - fx) + x[..., y1[:, None], x1] * fy * fx)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidProgram, match="antialias needs mode linear or cubic"):
        run(lambda m, x: call(m, "resize", x, [], [1.0, 1.0, 2.0, 2.0], [], 0, 0, 0, -0.75,
                              False, True, 0.0, dtype="float32", shape=(1, 2, 6, 8)), x)


# ---- generators and introspection ---------------------------------------------------------

def test_one_hot_eye_like_constant_of_shape():
    idx = np.array([[1.0, -1.0], [2.5, 7.0]], np.float32)
    vals = np.array([3, 9], np.int64)
    (got,) = run(lambda m, i, v: call(m, "one_hot", i, 4, 1, v, dtype="int64", shape=(2, 4, 2)),
                 idx, vals)
    want = np.full((2, 4, 2), 3)
    want[0, 1, 0] = want[0, 3, 1] = 9  # 2.5 is not a whole number, 7 is out of range
    same(got, want)
    x = np.zeros((3, 5), np.float32)
    (got,) = run(lambda m, x: call(m, "eye_like", x, -1, dtype="int32", shape=(3, 5)), x)
    same(got, np.eye(3, 5, -1, dtype=np.int32))
    (got,) = run(lambda m, s: call(m, "constant_of_shape", s, m.constant(np.array([7], np.int8)),
                                   dtype="int8", shape=(4, 4), dynamic=True),
                 np.array([2, 3], np.int64))
    same(got, np.full((2, 3), 7, np.int8))


def test_range_dynamic_output():
    args = [np.array(v, np.int32) for v in (10, -2, -3)]
    (got,) = run(lambda m, *a: call(m, "range", *a, dtype="int32", shape=(16,), dynamic=True),
                 *args)
    same(got, np.arange(10, -2, -3, dtype=np.int32))
    fargs = [np.array(v, np.float32) for v in (0.5, 2.0, 0.25)]
    (got,) = run(lambda m, *a: call(m, "range", *a, dtype="float32", shape=(8,), dynamic=True),
                 *fargs)
    same(got, np.arange(0.5, 2.0, 0.25, dtype=np.float32))
    with pytest.raises(InvalidArgument, match="beyond the bounds"):
        run(lambda m, *a: call(m, "range", *a, dtype="int32", shape=(3,), dynamic=True), *args)


def test_reshape_to_a_shape_read_at_run():
    """reshape's shape as an int tensor (the ONNX importer's run-time shapes): a -1 is inferred
    from the actual size, the result is planned at its bounds, and a shape beyond them or not
    a shape is refused by name, leaving the method usable."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

    def build(m, x, s):
        return call(m, "reshape", x, s, dtype="float32", shape=(8, 8), dynamic=True)

    for shape, want in (([6, -1], (6, 4)), ([-1, 3], (8, 3)), ([4, 6], (4, 6))):
        (got,) = run(build, x, np.array(shape, np.int64))
        same(got, x.reshape(want))
    (got,) = run(build, x[:1], np.array([2, -1], np.int32), bounds=[(2, 3, 4), None])
    same(got, x[:1].reshape(2, 6))
    with pytest.raises(InvalidArgument, match=r"\[24, 1\], beyond the bounds \[8, 8\]"):
        run(build, x, np.array([24, 1], np.int64))
    with pytest.raises(InvalidArgument, match=r"shape \[-2, -12\] may hold sizes >= 0 and a "
                                              r"single -1"):
        run(build, x, np.array([-2, -12], np.int64))
    with pytest.raises(InvalidArgument, match=r"cannot reshape"):
        run(build, x, np.array([5, -1], np.int64))
    with pytest.raises(InvalidProgram, match="out has rank 2, but shape holds 3 sizes"):
        run(build, x, np.array([2, 3, 4], np.int64))

    b = ProgramBuilder()  # one method: a refused call leaves it usable
    m = b.method("forward")
    xv = m.input("x", "float32", (2, 3, 4))
    sv = m.input("s", "int64", (2,))
    m.output(build(m, xv, sv), "y")
    with rt.Program.load(b.to_bytes()) as program:
        method = program.load_method("forward")
        with pytest.raises(InvalidArgument, match="beyond the bounds"):
            method(x, np.array([1, 24], np.int64))
        same(np.array(method(x, np.array([3, 8], np.int64))[0]), x.reshape(3, 8))
        method.close()


def test_resize_to_sizes_read_at_run():
    """resize's sizes as an int tensor: each execute resizes to them (against numpy's nearest
    gather, and antialiased linear against a numpy transcription of the filter), planned at the
    output's bounds; sizes beyond them, or negative, are refused by name."""
    x = np.arange(24, dtype=np.float32).reshape(1, 1, 4, 6)

    def build(m, x, sizes):
        return call(m, "resize", x, sizes, [], [], 0, 4, 2, -0.75, False, False, 0.0,
                    dtype="float32", shape=(1, 1, 8, 12), dynamic=True)

    for h, w in ((8, 12), (2, 3), (5, 7)):
        (got,) = run(build, x, np.array([1, 1, h, w], np.int64))
        rows = np.floor(np.arange(h) * 4 / h).astype(int)
        cols = np.floor(np.arange(w) * 6 / w).astype(int)
        same(got, x[:, :, rows][:, :, :, cols])
    with pytest.raises(InvalidArgument, match=r"\[1, 1, 9, 12\], beyond the bounds"):
        run(build, x, np.array([1, 1, 9, 12], np.int64))
    with pytest.raises(InvalidArgument, match="sizes item 3 is -5"):
        run(build, x, np.array([1, 1, 4, -5], np.int64))

    def antialiased(m, x, sizes):  # linear, half_pixel
        return call(m, "resize", x, sizes, [], [], 1, 0, 0, -0.75, False, True, 0.0,
                    dtype="float32", shape=(1, 1, 8, 12), dynamic=True)

    for h, w in ((1, 2), (2, 5), (8, 12)):
        want = np.einsum("yi,ncij,xj->ncyx", _antialiased_linear_weights(h / 4, 4, h),
                         x.astype(np.float64), _antialiased_linear_weights(w / 6, 6, w))
        (got,) = run(antialiased, x, np.array([1, 1, h, w], np.int64))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _nearest_floor(x, scales):
    """ONNX nearest, asymmetric coordinates, floor rounding: out index o reads floor(o / s)."""
    out = x
    for d, s in enumerate(scales):
        n = x.shape[d]
        size = int(np.floor(s * n))
        src = np.minimum(np.floor(np.arange(size) / s).astype(int), n - 1)
        out = np.take(out, src, axis=d)
    return out


def _linear_weights(positions, n):
    """(n_out, n) interpolation matrix of 1-D linear interpolation at source positions."""
    positions = np.clip(positions, 0, n - 1)
    low = np.floor(positions).astype(int)
    high = np.minimum(low + 1, n - 1)
    frac = positions - low
    w = np.zeros((len(positions), n))
    w[np.arange(len(positions)), low] += 1 - frac
    w[np.arange(len(positions)), high] += frac
    return w


def _resize_method(build, x_shape, param_shape, param_dtype):
    """One loaded method forward(x, p) = build(m, x, p); the caller closes program and method."""
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x_shape)
    pv = m.input("p", param_dtype, param_shape)
    m.output(build(m, xv, pv), "y")
    program = rt.Program.load(b.to_bytes())
    return program, program.load_method("forward")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_resize_by_scales_read_at_run(dtype):
    """resize's scales as a float tensor (an ONNX graph input): one loaded method, new scales at
    each execute, against numpy's nearest (asymmetric, floor) and bilinear (align_corners)."""
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)

    def nearest(m, x, scales):
        return call(m, "resize", x, [], scales, [], 0, 4, 2, -0.75, False, False, 0.0,
                    dtype="float32", shape=(1, 2, 12, 18), dynamic=True)

    def bilinear(m, x, scales):
        return call(m, "resize", x, [], scales, [], 1, 3, 0, -0.75, False, False, 0.0,
                    dtype="float32", shape=(1, 2, 12, 18), dynamic=True)

    program, method = _resize_method(nearest, x.shape, (4,), np.dtype(dtype).name)
    try:
        for scales in ([1.0, 1.0, 2.0, 3.0], [1.0, 1.0, 0.5, 1.5], [1.0, 1.0, 2.5, 0.7]):
            s = np.array(scales, dtype)
            (got,) = method(x, s)
            same(np.array(got), _nearest_floor(x, s.astype(np.float64)))
    finally:
        method.close()
        program.close()

    program, method = _resize_method(bilinear, x.shape, (4,), np.dtype(dtype).name)
    try:
        for scales in ([1.0, 1.0, 1.5, 2.0], [1.0, 1.0, 3.0, 0.5]):
            s = np.array(scales, dtype)
            h, w = int(np.floor(s[2] * 4)), int(np.floor(s[3] * 6))
            # align_corners: output o reads o * (in - 1) / (scale * in - 1)
            wy = _linear_weights(np.arange(h) * 3 / (float(s[2]) * 4 - 1), 4)
            wx = _linear_weights(np.arange(w) * 5 / (float(s[3]) * 6 - 1), 6)
            want = np.einsum("yi,ncij,xj->ncyx", wy, x.astype(np.float64), wx)
            (got,) = method(x, s)
            got = np.array(got)
            assert got.shape == (1, 2, h, w)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    finally:
        method.close()
        program.close()


def test_resize_by_scales_read_at_run_refuses_bad_values_by_name():
    """Scales read at run that are not finite and > 0, or that give an output beyond out's
    bounds, fail that execute by name and leave the method usable; the count, and antialias
    (its filter width follows from the scales), are checked at load."""
    x = RNG.standard_normal((1, 1, 4, 6)).astype(np.float32)

    def build(m, x, scales, antialias=False, shape=(1, 1, 8, 12)):
        return call(m, "resize", x, [], scales, [], 1, 0, 0, -0.75, False, antialias, 0.0,
                    dtype="float32", shape=shape, dynamic=True)

    program, method = _resize_method(build, x.shape, (4,), "float32")
    try:
        for bad, text in (([1.0, 1.0, 0.0, 1.0], "scales item 2 is 0"),
                          ([1.0, 1.0, 1.0, -2.0], "scales item 3 is -2"),
                          ([np.nan, 1.0, 1.0, 1.0], "scales item 0 is nan"),
                          ([1.0, 1.0, 1.0, np.inf], "scales item 3 is inf")):
            with pytest.raises(InvalidArgument, match=text + "; scales must be finite and > 0"):
                method(x, np.array(bad, np.float32))
        with pytest.raises(InvalidArgument, match=r"\[1, 1, 12, 12\], beyond the bounds "
                                                  r"\[1, 1, 8, 12\]"):
            method(x, np.array([1.0, 1.0, 3.0, 2.0], np.float32))
        (got,) = method(x, np.array([1.0, 1.0, 2.0, 2.0], np.float32))
        assert np.array(got).shape == (1, 1, 8, 12)
    finally:
        method.close()
        program.close()
    with pytest.raises(InvalidProgram, match=r"scales \(3 items\) need 4 items each"):
        run(build, x, np.ones(3, np.float32))
    with pytest.raises(InvalidProgram, match="scales is a dynamic tensor"):
        run(build, x, np.ones(4, np.float32), bounds=[None, (4,)])
    with pytest.raises(InvalidProgram, match="scales is a tensor of rank 2"):
        run(build, x, np.ones((2, 2), np.float32))
    with pytest.raises(rt.Unsupported, match="scales has dtype int64"):
        run(build, x, np.ones(4, np.int64))
    with pytest.raises(InvalidProgram, match="out shares memory with the input scales"):
        run(lambda m, x, s: m.call("resize", x, [], s, [], 0, 4, 2, -0.75, False, False, 0.0,
                                   out=s)[0],
            np.ones(1, np.float32), np.ones(1, np.float32))


def _antialiased_linear_weights(scale, n_in, n_out):
    """onnx's antialiased linear filter (half_pixel): a triangle 1/s wide at s = min(scale, 1),
    taps clamped to the edges, weights normalized."""
    s = min(scale, 1.0)
    w = np.zeros((n_out, n_in))
    for o in range(n_out):
        x = (o + 0.5) / scale - 0.5
        for i in range(int(np.floor(x - 1 / s)) - 1, int(np.ceil(x + 1 / s)) + 2):
            w[o, min(max(i, 0), n_in - 1)] += max(0.0, 1 - abs((i - x) * s))
        w[o] /= w[o].sum()
    return w


def test_resize_antialiased_by_scales_read_at_run():
    """Antialiased linear resize with scales read at run: the filter widens as the scale
    shrinks, within scratch planned at load from out's bounds, against a numpy transcription of
    the filter; sizes and scales that disagree (the filter far wider than the sizes imply) fail
    that execute by name and leave the method usable."""
    x = RNG.standard_normal((1, 2, 8, 12)).astype(np.float32)

    def build(m, x, scales):
        return call(m, "resize", x, [], scales, [], 1, 0, 0, -0.75, False, True, 0.0,
                    dtype="float32", shape=(1, 2, 16, 24), dynamic=True)

    program, method = _resize_method(build, x.shape, (4,), "float32")
    try:
        for scales in ([1, 1, 0.25, 0.5], [1, 1, 0.5, 1.5], [1, 1, 2, 0.3], [1, 1, 0.125, 0.1]):
            h, w = int(scales[2] * 8), int(scales[3] * 12)
            want = np.einsum("yi,ncij,xj->ncyx", _antialiased_linear_weights(scales[2], 8, h),
                             x.astype(np.float64), _antialiased_linear_weights(scales[3], 12, w))
            (got,) = method(x, np.array(scales, np.float32))
            np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-6)
    finally:
        method.close()
        program.close()

    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    sizes, scales = m.input("sizes", "int64", (4,)), m.input("scales", "float64", (4,))
    m.output(call(m, "resize", xv, sizes, scales, [], 1, 0, 0, -0.75, False, True, 0.0,
                  dtype="float32", shape=(1, 2, 8, 12), dynamic=True), "y")
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as method:
        agreeing = np.array([1, 1, 4, 3], np.int64), np.array([1, 1, 0.5, 0.25])
        (want,) = method(x, *agreeing)
        with pytest.raises(InvalidArgument, match="resize.*sizes and scales disagree"):
            method(x, np.array([1, 1, 8, 12], np.int64), np.array([1, 1, 0.01, 0.01]))
        (got,) = method(x, *agreeing)
        same(np.array(got), np.array(want))


def test_resize_with_a_roi_read_at_run():
    """tf_crop_and_resize's roi as a float64 tensor, new crops at each execute, against a
    numpy bilinear crop (positions outside the input get the extrapolation value); a roi of
    the wrong length is refused at load, a non-finite one at run; the empty roi ONNX passes
    without tf_crop_and_resize works as a tensor too."""
    x = RNG.standard_normal((1, 1, 5, 6)).astype(np.float32)

    def crop(m, x, roi):
        return call(m, "resize", x, [1, 1, 4, 3], [], roi, 1, 5, 0, -0.75, False, False, -9.0,
                    dtype="float32", shape=(1, 1, 4, 3))

    def axis(start, end, n, size):  # tf_crop_and_resize's source positions
        return start * (n - 1) + np.arange(size) * (end - start) * (n - 1) / (size - 1)

    program, method = _resize_method(crop, x.shape, (8,), "float64")
    try:
        for roi in ([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.9], [0, 0, -0.25, 0.5, 1, 1, 1.0, 1.5]):
            ys, xs = axis(roi[2], roi[6], 5, 4), axis(roi[3], roi[7], 6, 3)
            want = np.einsum("yi,ncij,xj->ncyx", _linear_weights(ys, 5), x.astype(np.float64),
                             _linear_weights(xs, 6))
            outside = (ys < 0) | (ys > 4)
            want[:, :, outside, :] = -9.0
            want[:, :, :, (xs < 0) | (xs > 5)] = -9.0
            (got,) = method(x, np.array(roi, np.float64))
            np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-6)
        with pytest.raises(InvalidArgument, match="roi item 6 is inf; roi must be finite"):
            method(x, np.array([0, 0, 0, 0, 1, 1, np.inf, 1], np.float64))
    finally:
        method.close()
        program.close()
    with pytest.raises(InvalidProgram, match="roi has 4 items; it needs 8"):
        run(crop, x, np.zeros(4, np.float64))

    def empty_roi(m, x, roi):  # ONNX's empty roi input, given as a tensor
        return call(m, "resize", x, [], [1.0, 1.0, 2.0, 2.0], roi, 0, 4, 2, -0.75, False, False,
                    0.0, dtype="float32", shape=(1, 1, 10, 12))

    (got,) = run(empty_roi, x, np.zeros(0, np.float32))
    same(got, x.repeat(2, axis=2).repeat(2, axis=3))
    with pytest.raises(InvalidProgram, match="roi has 8 items; it needs 8 .* none otherwise"):
        run(empty_roi, x, np.zeros(8, np.float32))


def test_onnx_resize_to_another_tensors_size():
    """An FPN's upsampling to a skip connection's size (`interpolate(x, size=skip.shape[2:])`)
    with dynamic sizes on both: one program, several sizes, against onnxruntime."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    import runtime_py.onnx as rto

    nodes = [helper.make_node("Shape", ["skip"], ["ss"], start=2),
             helper.make_node("Shape", ["x"], ["xs"], end=2),
             helper.make_node("Concat", ["xs", "ss"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
             helper.make_node("Add", ["y", "skip"], ["z"])]
    graph = helper.make_graph(nodes, "fpn", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"]),
        helper.make_tensor_value_info("skip", TensorProto.FLOAT, ["n", 3, "H", "W"])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = rto.load(model, dynamic_bounds={"x": {0: 2, 2: 8, 3: 8},
                                             "skip": {0: 2, 2: 16, 3: 16}})
    assert module.method_meta().outputs[0].dynamic_axes == (0, 2, 3)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n, h, w, hh, ww in ((1, 4, 4, 8, 8), (2, 3, 5, 6, 10), (1, 5, 3, 7, 13)):
        x = RNG.standard_normal((n, 3, h, w)).astype(np.float32)
        skip = RNG.standard_normal((n, 3, hh, ww)).astype(np.float32)
        (want,) = session.run(None, {"x": x, "skip": skip})
        (got,) = module(x, skip)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_shape_size_non_zero_on_dynamic_input():
    x = np.array([[0, 1.5, 0], [-0.0, 0, np.nan]], np.float32)
    got = run(lambda m, x: (call(m, "shape", x, 0, 2, dtype="int64", shape=(2,)),
                            call(m, "size", x, dtype="int64", shape=()),
                            call(m, "non_zero", x, dtype="int64", shape=(2, 12), dynamic=True)),
              x, bounds=[(3, 4)])
    same(got[0], np.array([2, 3]))
    same(got[1], np.array(6))
    same(got[2], np.array(np.nonzero(x)))
    (got,) = run(lambda m, x: call(m, "non_zero", x, dtype="int64", shape=(1, 0), dynamic=True),
                 np.zeros(0, np.int8))
    same(got, np.zeros((1, 0), np.int64))


# ---- unique ---------------------------------------------------------------------------------

def unique_reference(x, axis, sorted_):
    """numpy.unique's four results; unsorted, the slices in order of first occurrence."""
    y, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis, equal_nan=True)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(index, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else axis)
        index, counts, inverse = index[order], counts[order], rank[inverse]
    return y, index.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)


def run_unique(x, axis, sorted_, bound=None):
    flat = axis is None

    def build(m, v):
        v = m.reshape(v, [-1]) if flat else v
        n = v.shape[0 if flat else axis]
        return m.call("unique", v, 0 if flat else axis, sorted_,
                      outputs=[(str(x.dtype), list(v.shape), True), ("int64", [n], True),
                               ("int64", [n], True), ("int64", [n], True)])

    return run(build, x, bounds=None if bound is None else [bound])


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint16", "float32", "float64", "bool"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sorted_", [True, False])
def test_unique_matches_numpy(dtype, axis, sorted_):
    x = RNG.integers(0, 3, (4, 5, 2)).astype(dtype)
    x[2] = x[0]  # a repeated slice along axis 0
    got = run_unique(x, axis, sorted_)
    for g, w in zip(got, unique_reference(x, axis, sorted_)):
        same(g, w)


def test_unique_nan_is_one_value_after_every_number():
    x = np.array([2.0, np.nan, -1.0, np.nan, 2.0, 0.5], np.float32)
    y, index, inverse, counts = run_unique(x, None, True)
    np.testing.assert_array_equal(y, [-1.0, 0.5, 2.0, np.nan])
    same(index, np.array([2, 5, 0, 1], np.int64))
    same(inverse, np.array([2, 3, 0, 3, 2, 1], np.int64))
    same(counts, np.array([1, 1, 2, 2], np.int64))


def test_unique_of_a_dynamic_input_at_every_size():
    for n in (0, 1, 5, 8):
        x = RNG.integers(0, 4, (n, 3)).astype(np.int32)
        got = run_unique(x, 0, False, bound=(8, 3))
        for g, w in zip(got, unique_reference(x, 0, False) if n else
                        (x, *(np.zeros(0, np.int64),) * 3)):
            same(g, w)


def test_unique_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(InvalidProgram, match="axis 2 is out of range"):
        run(lambda m, v: m.call("unique", v, 2, True, outputs=[("float32", [2, 3], True)] +
                                [("int64", [3], True)] * 3), x)
    with pytest.raises(InvalidProgram, match="planned smaller than x"):
        run(lambda m, v: m.call("unique", v, 1, True, outputs=[("float32", [2, 3], True)] +
                                [("int64", [2], True)] * 3), x)
    with pytest.raises(InvalidProgram, match="indices has dtype int32"):
        run(lambda m, v: m.call("unique", v, 1, True, outputs=[
            ("float32", [2, 3], True), ("int32", [3], True), ("int64", [3], True),
            ("int64", [3], True)]), x)


# ---- ONNX: run-time shape parameters that Shape bounds; node cases with frozen params -------

def test_onnx_shape_driven_ops_on_dynamic_input():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import runtime_py.onnx as rto

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["zeros"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Range", ["zero", "n", "step"], ["r"]),
        helper.make_node("Expand", ["row", "s"], ["e"]),
        helper.make_node("NonZero", ["x"], ["nz"]),
    ]
    inits = [helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("step", TensorProto.INT64, [], [1]),
             helper.make_tensor("row", TensorProto.FLOAT, [1, 1], [5.0])]
    outs = [helper.make_tensor_value_info(n, t, None)
            for n, t in (("zeros", TensorProto.FLOAT), ("r", TensorProto.INT64),
                         ("e", TensorProto.FLOAT), ("nz", TensorProto.INT64))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["a", "b"])], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = rto.load(model, dynamic_bounds={"x": [4, 6]})
    x = np.array([[1, 0, 2], [0, 0, 3]], np.float32)
    zeros, r, e, nz = (np.array(v) for v in module(x))
    same(zeros, np.full((2, 3), 2.0, np.float32))
    same(r, np.arange(3))
    same(e, np.full((2, 3), 5.0, np.float32))
    same(nz, np.array(np.nonzero(x)))


FROZEN = {"Resize": (1, 2, 3), "Pad": (1, 2, 3), "Expand": (1,), "Tile": (1,), "OneHot": (1,),
          "Upsample": (1,)}


def _frozen_cases():
    """The node cases of FROZEN's op types, generated by importing only their onnx modules."""
    try:
        import importlib

        import onnx.backend.test.case.node as node_cases
    except ImportError:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in ("resize", "pad", "expand", "tile", "onehot", "upsample"):
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
    return [c for c in node_cases._NodeTestCases
            if c.model is not None and len(c.model.graph.node) == 1
            and c.model.graph.node[0].op_type in FROZEN]


@pytest.mark.parametrize("case", _frozen_cases(), ids=lambda c: c.name)
def test_onnx_node_case_with_constant_params(case):
    """Official cases with their shape parameters as initializers, as exported models have
    them (the official suite feeds them at run time, which the importer refuses)."""
    from onnx import numpy_helper

    from runtime_py.onnx.backend import RuntimeBackend
    from runtime_py.onnx.conformance import _compare

    node = case.model.graph.node[0]
    inputs, expected = case.data_sets[0]
    model = copy.deepcopy(case.model)
    frozen = {node.input[k] for k in FROZEN[node.op_type] if k < len(node.input) and node.input[k]}
    feeds, keep = [], []
    for info, arr in zip(list(model.graph.input), inputs):
        if info.name in frozen:
            model.graph.initializer.append(numpy_helper.from_array(np.asarray(arr), info.name))
        else:
            feeds.append(arr)
            keep.append(info)
    del model.graph.input[:]
    model.graph.input.extend(keep)
    rep = RuntimeBackend.prepare(model)
    try:
        got = rep.run(feeds)
    finally:
        rep.method.close()
    for e, g in zip(expected, got):
        assert _compare(e, g) is None, _compare(e, g)


def test_squeeze_and_unsqueeze_with_axes_read_at_run():
    """squeeze / unsqueeze with an axes tensor (ONNX passes axes as graph inputs): the rank
    follows from the count, the sizes from the values at every execute (numpy.squeeze /
    numpy.expand_dims as references); bad axes are refused by name at execute, a wrong out rank
    at load, and the method stays usable."""
    x = RNG.standard_normal((1, 3, 1, 2)).astype(np.float32)

    def squeeze(m, x, axes):
        return call(m, "squeeze", x, axes, dtype="float32", shape=(3, 3), dynamic=True)

    def unsqueeze(m, x, axes):
        return call(m, "unsqueeze", x, axes, dtype="float32", shape=(3, 3, 3, 3, 3, 3),
                    dynamic=True)

    for axes in ([0, 2], [-2, 0], [2, -4]):
        (got,) = run(squeeze, x, np.array(axes, np.int64))
        same(got, np.squeeze(x, tuple(axes)))
    for axes in ([0, 2], [-1, 0], [5, -5]):
        (got,) = run(unsqueeze, x, np.array(axes, np.int32))
        same(got, np.expand_dims(x, tuple(axes)))
    (got,) = run(squeeze, x[:, :2], np.array([0, 2], np.int64), bounds=[(1, 3, 1, 2), None])
    same(got, x[0, :2, 0])
    (got,) = run(lambda m, x: call(m, "unsqueeze", x, [1], dtype="float32", shape=(1, 1, 3, 1, 2)),
                 x)
    same(got, x[:, None])
    with pytest.raises(InvalidArgument, match="cannot squeeze dimension 1 of x: its size is 3"):
        run(squeeze, x, np.array([0, 1], np.int64))
    with pytest.raises(InvalidArgument, match="axes name dimension 0 twice"):
        run(squeeze, x, np.array([0, -4], np.int64))
    with pytest.raises(InvalidArgument, match="axes item 1 is 6, out of range for rank 6"):
        run(unsqueeze, x, np.array([0, 6], np.int64))
    with pytest.raises(InvalidProgram, match="give rank 3, but out has rank 2"):
        run(squeeze, x, np.array([0], np.int64))

    b = ProgramBuilder()  # one method: a refused call leaves it usable
    m = b.method("forward")
    m.output(squeeze(m, m.input("x", "float32", x.shape), m.input("a", "int64", (2,))), "y")
    with rt.Program.load(b.to_bytes()) as program:
        method = program.load_method("forward")
        with pytest.raises(InvalidArgument, match="its size is 2"):
            method(x, np.array([0, 3], np.int64))
        same(np.array(method(x, np.array([2, 0], np.int64))[0]), x.reshape(3, 2))
        method.close()
