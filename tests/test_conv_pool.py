"""conv2d_act_max_pool2d: a convolution whose result only a max pool reads, in one op.

The direct convolution pools each band's rows from a small buffer (non-overlapping windows in
height, weights packed at load); everything else convolves into scratch and pools from there.
Both are checked against numpy, as are the builder's pass that makes the op and the ONNX
importer's use of it."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from runtime_py.errors import InvalidProgram
from tests.test_ops import ACTIVATIONS, assert_close, examples, ref_conv2d, ref_max_pool2d


def reference(x, w, bias, conv, act, pool):
    stride, padding, dilation, groups = conv
    y = ACTIVATIONS[act](ref_conv2d(x, w, bias, stride, padding, dilation, groups),
                         np.float32(0.5), np.float32(1.5)).astype(np.float32)
    return ref_max_pool2d(y, *pool)


def run_fused(x, w, bias, conv, act, pool, threads=1, constant_weights=True):
    """The op through the builder: w and bias constants (packed at load) or inputs."""
    stride, padding, dilation, groups = conv
    want_shape = reference(x, w, bias, conv, act, pool).shape
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    wv = m.constant(w) if constant_weights else m.input("w", "float32", w.shape)
    bv = None if bias is None else m.constant(bias)
    kernel, pstride, ppad, pdil, ceil = pool
    (y,) = m.call("conv2d_act_max_pool2d", xv, wv, bv, list(stride), list(padding),
                  list(dilation), groups, act, 0.5, 1.5, list(kernel), list(pstride), list(ppad),
                  list(pdil), bool(ceil), outputs=[("float32", want_shape, False)])
    m.output(y)
    with rt.Program.load(b.to_bytes()) as program, \
            program.load_method("forward", num_threads=threads) as f:
        return np.array(f(x)[0] if constant_weights else f(x, w)[0])


# name: x shape, w shape, (stride, padding, dilation, groups), pool. The first six give rows
# of 32 to 64 outputs, which the direct convolution takes (and so the banded pooling).
CASES = {
    "small CNN, 2x2": ((1, 3, 64, 64), (16, 3, 3, 3), ([1, 1], [1, 1, 1, 1], [1, 1], 1),
                       ([2, 2], [2, 2], [0, 0], [1, 1], False)),
    "odd size, ceil mode": ((2, 5, 13, 63), (9, 5, 3, 3), ([1, 1], [1, 1, 1, 1], [1, 1], 1),
                            ([2, 2], [2, 2], [0, 0], [1, 1], True)),
    "3x3 stride 3, padded": ((1, 4, 20, 66), (12, 4, 3, 3), ([1, 1], [0, 0, 0, 0], [1, 1], 1),
                             ([3, 3], [3, 3], [1, 1], [1, 1], False)),
    "rows skipped": ((1, 6, 17, 127), (8, 6, 3, 3), ([1, 2], [1, 1, 1, 1], [1, 1], 1),
                     ([1, 2], [3, 2], [0, 1], [1, 1], False)),
    "dilated window": ((1, 4, 22, 64), (10, 4, 2, 3), ([1, 1], [0, 1, 1, 0], [1, 1], 1),
                       ([2, 2], [3, 2], [1, 0], [2, 1], False)),
    "windows in padding only": ((1, 8, 6, 32), (8, 8, 3, 3), ([1, 1], [1, 1, 1, 1], [1, 1], 1),
                                ([2, 2], [3, 3], [2, 2], [1, 1], False)),
    "overlapping 3x3 stride 2": ((1, 3, 30, 66), (16, 3, 3, 3), ([2, 2], [1, 1, 1, 1], [1, 1], 1),
                                 ([3, 3], [2, 2], [1, 1], [1, 1], False)),
    "depthwise": ((1, 8, 20, 20), (8, 1, 3, 3), ([1, 1], [1, 1, 1, 1], [1, 1], 8),
                  ([2, 2], [2, 2], [0, 0], [1, 1], False)),
    "pointwise": ((1, 16, 12, 40), (24, 16, 1, 1), ([1, 1], [0, 0, 0, 0], [1, 1], 1),
                  ([2, 2], [2, 2], [0, 0], [1, 1], False)),
}


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_pool_matches_numpy(name, act, threads):
    x_shape, w_shape, conv, pool = CASES[name]
    rng = np.random.default_rng(len(name) + act)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[0]).astype(np.float32)
    want = reference(x, w, bias, conv, act, pool)
    got = run_fused(x, w, bias, conv, act, pool, threads)
    assert_close(got, want, rtol=1e-5, atol=1e-5 * w[0].size * 4)
    if name == "windows in padding only":
        assert np.isneginf(got).any()


def test_conv_pool_weights_as_input_take_the_unfused_path():
    x_shape, w_shape, conv, pool = CASES["small CNN, 2x2"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    got = run_fused(x, w, None, conv, 1, pool, constant_weights=False)
    assert_close(got, reference(x, w, None, conv, 1, pool), rtol=1e-5, atol=1e-4)


@examples(40)
@given(channels=st.integers(1, 6), out_channels=st.integers(1, 20), height=st.integers(3, 24),
       width=st.integers(3, 80), kernel=st.integers(1, 3), pool_kernel=st.integers(1, 3),
       pool_extra=st.integers(0, 2), pool_pad=st.integers(0, 1), ceil=st.booleans(),
       act=st.sampled_from([0, 1, 2]), threads=st.integers(1, 3), seed=st.integers(0, 99))
def test_conv_pool_random_shapes(channels, out_channels, height, width, kernel, pool_kernel,
                                 pool_extra, pool_pad, ceil, act, threads, seed):
    """Pool strides at least the window's height (the banded path when the convolution suits
    it) or below it (the path through scratch), any padding the pool allows."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, channels, height, width)).astype(np.float32)
    w = rng.standard_normal((out_channels, channels, kernel, kernel)).astype(np.float32)
    pad = kernel // 2
    conv = ([1, 1], [pad] * 4, [1, 1], 1)
    stride = max(1, pool_kernel + pool_extra - 1)
    pool = ([pool_kernel] * 2, [stride] * 2, [min(pool_pad, pool_kernel // 2)] * 2, [1, 1], ceil)
    want = reference(x, w, None, conv, act, pool)
    if min(want.shape) == 0:
        return
    got = run_fused(x, w, None, conv, act, pool, threads)
    assert_close(got, want, rtol=1e-5, atol=1e-5 * w[0].size * 4)


def test_conv_pool_refuses_a_wrong_output_shape():
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, 3, 8, 8))
    w = m.constant(np.ones((4, 3, 3, 3), np.float32))
    m.output(m.call("conv2d_act_max_pool2d", x, w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1, 1,
                    0.0, 0.0, [2, 2], [2, 2], [0, 0], [1, 1], False,
                    outputs=[("float32", (1, 4, 8, 8), False)])[0])
    with pytest.raises(InvalidProgram, match=r"conv2d_act_max_pool2d.*the result has shape "
                       r"\[1, 4, 4, 4\], but out is planned with shape \[1, 4, 8, 8\]"):
        rt.Program.load(b.to_bytes()).load_method("forward")


def _conv_then_pool(also_output: bool):
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, 3, 16, 16))
    rng = np.random.default_rng(2)
    y = m.conv2d(x, m.constant(rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
                 m.constant(rng.standard_normal(8).astype(np.float32)), 1, 1)
    assert m.fuse_activation(y, 1)
    p = m.max_pool2d(y, 2)
    m.output(p)
    if also_output:
        m.output(y)
    return b, m


def test_builder_pass_merges_only_a_result_nothing_else_reads():
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    plain, _ = _conv_then_pool(False)
    with rt.Program.load(plain.to_bytes()) as program:
        assert [op for op in program.instruction_ops("forward") if op] == \
            ["conv2d_act", "max_pool2d"]
        want = np.array(program.load_method("forward")(x)[0])
    fused, m = _conv_then_pool(False)
    assert m.fuse_conv_max_pool() == 1
    with rt.Program.load(fused.to_bytes()) as program:
        assert [op for op in program.instruction_ops("forward") if op] == \
            ["conv2d_act_max_pool2d"]
        np.testing.assert_allclose(np.array(program.load_method("forward")(x)[0]), want,
                                   rtol=1e-6, atol=1e-6)
    kept, m = _conv_then_pool(True)
    assert m.fuse_conv_max_pool() == 0
