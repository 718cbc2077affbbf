"""Parameters given as tensors read at each execute (slice starts, pads, k, axes, shapes,
depth, repeats, sizes, clip bounds) on CUDA: read back to the host after the work queued
before them, then the CPU op's own checks and planning run. One loaded method executes with
several parameter values, each compared with the same program on the CPU."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(11)


def _i64(*v):
    return np.array(v, np.int64)


def _compare_runs(program: bytes, runs):
    """Each input list of `runs` through one CPU and one CUDA method of the program."""
    with rt.Program.load(program) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            for inputs in runs:
                want, got = cpu(*inputs), gpu(*inputs)
                for w, g in zip(want, got):
                    w, g = np.asarray(w), np.asarray(g.to_host())
                    assert w.dtype == g.dtype and w.shape == g.shape
                    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _one_op(op, inputs, params, outputs):
    """A program calling op on inputs (name, dtype, shape) then params; outputs are
    (dtype, bounds) of dynamic results."""
    b = ProgramBuilder()
    m = b.method("forward")
    values = [m.input(n, d, s) if isinstance(n, str) else n for n, d, s in inputs]
    outs = m.call(op, *values, *params, outputs=[(d, s, True) for d, s in outputs])
    for o in outs:
        m.output(o)
    return b.to_bytes()


def test_slice_with_tensor_starts_ends_axes_and_steps():
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", (5, 6))
    args = [m.input(n, "int64", (2,)) for n in ("starts", "ends", "axes", "steps")]
    m.output(m.call("slice", xv, *args,
                    outputs=[("float32", (5, 6), True)])[0])
    _compare_runs(b.to_bytes(), [
        [x, _i64(1, 0), _i64(4, 6), _i64(0, 1), _i64(1, 2)],
        [x, _i64(-1, 5), _i64(-6, 0), _i64(1, 0), _i64(-2, -1)],
        [x, _i64(0, 2), _i64(1, 3), _i64(-1, -2), _i64(1, 1)],
    ])


def test_pad_trilu_tile_and_expand_with_tensor_parameters():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    pad = _one_op("pad", [("x", "float32", (3, 4)), ("pads", "int64", (4,))], [0, None],
                  [("float32", (9, 12))])
    _compare_runs(pad, [[x, _i64(1, 2, 3, 0)], [x, _i64(0, -1, 2, 5)], [x, _i64(0, 0, 0, 0)]])
    trilu = _one_op("trilu", [("x", "float32", (3, 4)), ("k", "int64", (1,))], [True],
                    [("float32", (3, 4))])
    _compare_runs(trilu, [[x, _i64(0)], [x, _i64(2)], [x, _i64(-1)]])
    b = ProgramBuilder()  # a constant k: on the device after the load, read back all the same
    m = b.method("forward")
    m.output(m.call("trilu", m.input("x", "float32", (3, 4)), m.constant(_i64(-1)), False,
                    outputs=[("float32", (3, 4), False)])[0])
    _compare_runs(b.to_bytes(), [[x]])
    tile = _one_op("tile", [("x", "float32", (3, 4)), ("r", "int64", (2,))], [],
                   [("float32", (9, 12))])
    _compare_runs(tile, [[x, _i64(3, 1)], [x, _i64(1, 3)], [x, _i64(2, 2)]])
    col = RNG.standard_normal((3, 1)).astype(np.float32)
    expand = _one_op("expand", [("x", "float32", (3, 1)), ("s", "int64", (2,))], [],
                     [("float32", (3, 5))])
    _compare_runs(expand, [[col, _i64(3, 5)], [col, _i64(1, 2)], [col, _i64(3, 1)]])


def test_split_with_tensor_sizes():
    x = RNG.standard_normal((2, 7)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    outs = m.call("split", m.input("x", "float32", (2, 7)), 1, m.input("sizes", "int64", (2,)),
                  outputs=[("float32", (2, 7), True), ("float32", (2, 7), True)])
    for o in outs:
        m.output(o)
    _compare_runs(b.to_bytes(), [[x, _i64(3, 4)], [x, _i64(0, 7)], [x, _i64(6, 1)]])


def test_constant_of_shape_one_hot_cumsum_and_topk_with_tensor_parameters():
    value = np.array([2.5], np.float32)
    cos = _one_op("constant_of_shape", [("s", "int64", (2,)), ("v", "float32", (1,))], [],
                  [("float32", (4, 4))])
    _compare_runs(cos, [[_i64(2, 3), value], [_i64(4, 4), value], [_i64(0, 2), value]])
    idx = _i64(0, 3, -1, 5)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("one_hot", m.input("i", "int64", (4,)), m.input("d", "int64", (1,)), -1,
                    m.input("v", "float32", (2,)), outputs=[("float32", (4, 8), True)])[0])
    on_off = np.array([0.0, 1.0], np.float32)
    _compare_runs(b.to_bytes(), [[idx, _i64(4), on_off], [idx, _i64(8), on_off],
                                 [idx, _i64(1), on_off]])
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("cumsum", m.input("x", "float32", (3, 5)), m.input("a", "int64", ()),
                    False, True, outputs=[("float32", (3, 5), False)])[0])
    _compare_runs(b.to_bytes(), [[x, np.array(0, np.int64)], [x, np.array(-1, np.int64)]])
    b = ProgramBuilder()
    m = b.method("forward")
    outs = m.call("topk", m.input("x", "float32", (3, 5)), m.input("k", "int64", (1,)), -1,
                  True, True, outputs=[("float32", (3, 5), True), ("int64", (3, 5), True)])
    m.output(outs[0])
    m.output(outs[1])
    _compare_runs(b.to_bytes(), [[x, _i64(2)], [x, _i64(5)], [x, _i64(0)]])


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_log_sum_exp"])
def test_reductions_with_tensor_axes(op):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call(op, m.input("x", "float32", (3, 4, 5)), m.input("axes", "int64", (2,)),
                    True, outputs=[("float32", (3, 4, 5), True)])[0])
    _compare_runs(b.to_bytes(), [[x, _i64(0, 2)], [x, _i64(-1, 1)], [x, _i64(1, 0)]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_with_tensor_bounds(dtype):
    x = RNG.standard_normal((4, 6)).astype(dtype)
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.call("clip", m.input("x", dtype, x.shape), m.input("lo", dtype, ()),
                    m.input("hi", dtype, (1,)), outputs=[(dtype, x.shape, False)])[0])
    _compare_runs(b.to_bytes(), [[x, np.array(-0.5, dtype), np.array([0.25], dtype)],
                                 [x, np.array(0.0, dtype), np.array([2.0], dtype)]])


def test_a_parameter_computed_on_the_device_is_read_after_it_is_written():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 3), max_shape=(4, 6))
    shape = m.call("shape", x, 0, 2, outputs=[("int64", (2,), False)])[0]
    m.output(m.call("constant_of_shape", shape, m.constant(np.array([7.0], np.float32)),
                    outputs=[("float32", (4, 6), True)])[0])
    _compare_runs(b.to_bytes(), [[np.zeros((2, 3), np.float32)], [np.ones((4, 1), np.float32)]])


def test_a_parameter_that_is_also_a_data_argument_is_refused_by_name():
    b = ProgramBuilder()
    m = b.method("forward")
    r = m.input("r", "int64", (1,))
    m.output(m.call("tile", r, r, outputs=[("int64", (9,), True)])[0])
    with rt.Program.load(b.to_bytes()) as p:
        with p.load_method("forward") as cpu:
            assert np.asarray(cpu(_i64(3))[0]).tolist() == [3, 3, 3]
        with p.load_method("forward", device="cuda") as gpu:
            with pytest.raises(rt.Unsupported, match="argument 1 is both a parameter"):
                gpu(_i64(3))


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_reshape_and_resize_with_tensor_sizes(mode):
    """reshape's shape and resize's sizes as tensors (the ONNX importer's run-time shapes)."""
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", (1, 2, 4, 6))
    sizes = m.input("sizes", "int64", (4,))
    shape = m.input("shape", "int64", (2,))
    m.output(m.call("resize", xv, sizes, [], [], mode, 0, 0, -0.75, False, False, 0.0,
                    outputs=[("float32", (1, 2, 9, 13), True)])[0])
    m.output(m.call("reshape", xv, shape, outputs=[("float32", (48, 48), True)])[0])
    _compare_runs(b.to_bytes(), [[x, _i64(1, 2, 8, 12), _i64(6, 8)],
                                 [x, _i64(1, 2, 3, 13), _i64(-1, 2)],
                                 [x, _i64(1, 2, 9, 5), _i64(48, -1)]])


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_resize_with_tensor_scales_and_roi(mode):
    """resize's scales (float32) and tf_crop_and_resize's roi (float64) as tensors (ONNX graph
    inputs), antialiased too, new values at each execute; a bad scale is refused at run on both
    devices."""
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", (1, 2, 4, 6))
    scales = m.input("scales", "float32", (4,))
    roi = m.input("roi", "float64", (8,))
    m.output(m.call("resize", xv, [], scales, [], mode, 0, 0, -0.75, False, False, 0.0,
                    outputs=[("float32", (1, 2, 12, 18), True)])[0])
    m.output(m.call("resize", xv, [], scales, roi, mode, 5, 0, -0.75, False, False, -2.0,
                    outputs=[("float32", (1, 2, 12, 18), True)])[0])
    if mode:  # antialiased: the filter's width follows from the scales read at run
        m.output(m.call("resize", xv, [], scales, [], mode, 0, 0, -0.75, False, True, 0.0,
                        outputs=[("float32", (1, 2, 12, 18), True)])[0])
    f32, f64 = np.float32, np.float64
    crop = np.array([0, 0, 0.1, -0.2, 1, 1, 0.9, 1.3], f64)
    program = b.to_bytes()
    _compare_runs(program, [[x, np.array([1, 1, 2, 3], f32), crop],
                            [x, np.array([1, 1, 0.5, 1.5], f32), crop[::-1].copy()],
                            [x, np.array([1, 1, 2.5, 0.7], f32), np.array([0, 0, 0, 0, 1, 1, 1, 1],
                                                                           f64)]])
    with rt.Program.load(program) as p:
        with p.load_method("forward", device="cuda") as gpu:
            with pytest.raises(rt.InvalidArgument, match="scales item 2 is 0"):
                gpu(x, np.array([1, 1, 0, 1], f32), crop)


def test_squeeze_and_unsqueeze_with_tensor_axes():
    """squeeze / unsqueeze with axes read at run (ONNX Squeeze / Unsqueeze axes inputs)."""
    x = RNG.standard_normal((1, 3, 1, 2)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", (1, 3, 1, 2))
    axes = m.input("axes", "int64", (2,))
    (sq,) = m.call("squeeze", xv, axes, outputs=[("float32", (3, 3), True)])
    m.output(sq)
    m.output(m.call("unsqueeze", sq, axes, outputs=[("float32", (3, 3, 3, 3), True)])[0])
    _compare_runs(b.to_bytes(), [[x, _i64(0, 2)], [x, _i64(-2, 0)], [x, _i64(2, 0)]])
