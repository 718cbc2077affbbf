"""The Winograd F(4x4, 3x3) convolution (libruntime/ops/conv/kernels/winograd_f32.c).

Float32 3x3 stride-1 convolutions with constant weights and enough channels take it when it
saves work. Each case is checked against numpy in float64 with a bound on the error scaled by
sum |w| |x| over each output's window (the transforms round by about 3e-6 of that), and run
again with RT_CONV_WINOGRAD=0, the direct path, to show the fast path was the one taken."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from tests.test_gemm import cpu_flags
from tests.test_ops import ACTIVATIONS, out_len, ref_conv2d

ROOT = Path(__file__).resolve().parent.parent
LO, HI = -0.5, 1.25  # the clip activation's bounds
TOLERANCE = 1e-5     # of sum |w| |x| over the window


def program(x_shape, w, bias, padding, act=0, max_shape=None, out_shape=None):
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x_shape, max_shape=max_shape)
    bv = None if bias is None else m.constant(bias)
    (y,) = m.call("conv2d_act", xv, m.constant(w), bv, [1, 1], list(padding), [1, 1], 1, act,
                  LO, HI, outputs=[("float32", out_shape, max_shape is not None)])
    m.output(y)
    return b.to_bytes()


def out_shape_of(x_shape, out_channels, padding):
    top, left, bottom, right = padding
    return (x_shape[0], out_channels, out_len(x_shape[2], 3, 1, top, bottom, 1),
            out_len(x_shape[3], 3, 1, left, right, 1))


def run(x, w, bias, padding, act=0, threads=1, winograd=True, monkeypatch=None):
    out_shape = out_shape_of(x.shape, w.shape[0], padding)
    monkeypatch.setenv("RT_CONV_WINOGRAD", "1" if winograd else "0")
    with rt.Program.load(program(x.shape, w, bias, padding, act, out_shape=out_shape)) as p, \
            p.load_method("forward", num_threads=threads) as f:
        return np.array(f(x)[0])


def check(got, x, w, bias, padding, act=0):
    """Within TOLERANCE of the float64 reference, scaled per output."""
    want = ref_conv2d(x.astype(np.float64), w.astype(np.float64),
                      None if bias is None else bias.astype(np.float64), [1, 1], padding,
                      [1, 1], 1)
    scale = ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                       None if bias is None else np.abs(bias).astype(np.float64), [1, 1],
                       padding, [1, 1], 1)
    want = ACTIVATIONS[act](want, LO, HI)
    assert got.shape == want.shape
    np.testing.assert_array_less(np.abs(got - want), TOLERANCE * scale + 1e-30)


# name: x shape, out channels, padding (top, left, bottom, right). Each is large enough for
# Winograd to pay, so the RT_CONV_WINOGRAD=0 run differs.
CASES = {
    "small CNN's second layer": ((1, 16, 32, 32), 32, (1, 1, 1, 1)),
    "strips across tile rows, batch 2": ((2, 32, 30, 22), 32, (1, 1, 1, 1)),
    "partial tiles, no padding": ((1, 24, 27, 41), 20, (0, 0, 0, 0)),
    "one-sided padding": ((1, 32, 21, 38), 32, (0, 2, 1, 0)),
    "wide rows (several gather steps)": ((1, 16, 12, 150), 32, (1, 1, 1, 1)),
    "more channels than a depth slice": ((1, 200, 24, 24), 32, (1, 1, 1, 1)),
    "rows too narrow for the direct kernel": ((1, 64, 14, 14), 64, (1, 1, 1, 1)),
    "three strips": ((3, 16, 16, 32), 24, (1, 1, 1, 1)),
    "odd output channels": ((1, 16, 36, 36), 33, (1, 1, 1, 1)),
}


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_winograd_matches_numpy(name, threads, monkeypatch):
    shape, out_channels, padding = CASES[name]
    rng = np.random.default_rng(len(name) * 10 + threads)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1], 3, 3)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    got = run(x, w, bias, padding, threads=threads, monkeypatch=monkeypatch)
    check(got, x, w, bias, padding)
    direct = run(x, w, bias, padding, threads=threads, winograd=False, monkeypatch=monkeypatch)
    check(direct, x, w, bias, padding)
    assert not np.array_equal(got, direct), "the Winograd path was not taken"


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_winograd_fused_activations_and_no_bias(act, monkeypatch):
    rng = np.random.default_rng(act)
    x = rng.standard_normal((1, 16, 28, 28)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) / 6).astype(np.float32)
    got = run(x, w, None, (1, 1, 1, 1), act=act, threads=2, monkeypatch=monkeypatch)
    check(got, x, w, None, (1, 1, 1, 1), act)


def test_winograd_keeps_nan_and_infinity_to_their_windows(monkeypatch):
    """A tile holding a NaN, an infinity, or values whose transform overflows is recomputed
    directly: outputs whose window misses them stay finite and exact to the bound, as the
    direct convolution leaves them."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    x[0, 3, 5, 6] = np.nan
    x[0, 7, 20, 30] = np.inf
    x[0, 1, 12, 2] = 3e38  # finite, but B^T d overflows float32
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    got = run(x, w, bias, (1, 1, 1, 1), monkeypatch=monkeypatch)
    with np.errstate(invalid="ignore", over="ignore"):
        direct = run(x, w, bias, (1, 1, 1, 1), winograd=False, monkeypatch=monkeypatch)
        bad = ~np.isfinite(direct)
        assert bad.any()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(direct))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(direct))
    clean = x.copy()
    clean[~np.isfinite(clean)] = 0
    clean[clean > 1e30] = 0
    want = ref_conv2d(clean.astype(np.float64), w.astype(np.float64), bias.astype(np.float64),
                      [1, 1], (1, 1, 1, 1), [1, 1], 1)
    scale = ref_conv2d(np.abs(clean).astype(np.float64), np.abs(w).astype(np.float64),
                       np.abs(bias).astype(np.float64), [1, 1], (1, 1, 1, 1), [1, 1], 1)
    # Outputs whose window holds none of the three values.
    touched = ref_conv2d((clean != x).astype(np.float64), np.ones_like(w, np.float64), None,
                         [1, 1], (1, 1, 1, 1), [1, 1], 1) > 0
    ok = ~touched
    assert ok.sum() > 0.9 * ok.size
    np.testing.assert_array_less(np.abs(got[ok] - want[ok]), TOLERANCE * scale[ok] + 1e-30)


def test_winograd_dynamic_sizes_below_the_bounds(monkeypatch):
    """The weights are transformed for the planned bounds; a smaller input at run takes the
    same path, tiles and strips recomputed for its sizes."""
    rng = np.random.default_rng(9)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    monkeypatch.setenv("RT_CONV_WINOGRAD", "1")
    data = program((1, 16, 40, 40), w, bias, (1, 1, 1, 1), max_shape=(2, 16, 40, 40),
                   out_shape=(2, 24, 40, 40))
    with rt.Program.load(data) as p, p.load_method("forward", num_threads=2) as f:
        for shape in [(2, 16, 40, 40), (1, 16, 13, 29), (1, 16, 1, 1), (2, 16, 4, 40)]:
            x = rng.standard_normal(shape).astype(np.float32)
            check(np.array(f(x)[0]), x, w, bias, (1, 1, 1, 1))


@pytest.mark.parametrize("shape,w_shape,stride,groups", [
    ((1, 4, 32, 32), (16, 4, 3, 3), 1, 1),    # too few input channels
    ((1, 16, 32, 32), (16, 16, 3, 3), 2, 1),  # stride 2
    ((1, 16, 32, 32), (16, 8, 3, 3), 1, 2),   # groups
    ((1, 16, 32, 32), (16, 16, 5, 5), 1, 1),  # 5x5
    ((1, 64, 4, 4), (64, 64, 3, 3), 1, 1),    # one 4x4 tile: a strip of NR lanes would waste
])
def test_other_convolutions_do_not_take_winograd(shape, w_shape, stride, groups, monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    want = ref_conv2d(x, w, None, [stride, stride], (1, 1, 1, 1), [1, 1], groups)
    outs = []
    for setting in ("1", "0"):
        monkeypatch.setenv("RT_CONV_WINOGRAD", setting)
        b = ProgramBuilder()
        m = b.method("forward")
        (y,) = m.call("conv2d", m.input("x", "float32", shape), m.constant(w), None,
                      [stride, stride], [1, 1, 1, 1], [1, 1], groups,
                      outputs=[("float32", want.shape, False)])
        m.output(y)
        with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as f:
            outs.append(np.array(f(x)[0]))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)


def test_weights_as_an_input_take_the_direct_path(monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    (y,) = m.call("conv2d", m.input("x", "float32", x.shape), m.input("w", "float32", w.shape),
                  None, [1, 1], [1, 1, 1, 1], [1, 1], 1, outputs=[("float32", (1, 32, 32, 32),
                                                                  False)])
    m.output(y)
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as f:
        got = np.array(f(x, w)[0])
    direct = run(x, w, None, (1, 1, 1, 1), winograd=False, monkeypatch=monkeypatch)
    np.testing.assert_array_equal(got, direct)


VARIANT_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import runtime_py as rt
from tests.test_conv_winograd import program
rng = np.random.default_rng(3)
x = rng.standard_normal((2, 16, 30, 22)).astype(np.float32)
w = rng.standard_normal((20, 16, 3, 3)).astype(np.float32)
bias = rng.standard_normal(20).astype(np.float32)
with rt.Program.load(program(x.shape, w, bias, (1, 1, 1, 1), act=2,
                             out_shape=(2, 20, 30, 22))) as p, \\
        p.load_method("forward", num_threads=2) as f:
    np.save(sys.argv[2], np.array(f(x)[0]))
np.save(sys.argv[3], np.concatenate([x.ravel(), w.ravel(), bias.ravel()]))
"""


@pytest.mark.parametrize("kernel,flags", [("portable", []), ("avx2_fma", ["avx2", "fma"]),
                                          ("avx512", ["avx512f"]),
                                          ("avx512_pairs", ["avx512f"])])
def test_winograd_on_each_gemm_kernel(kernel, flags, tmp_path):
    """The GEMM kernel sets the strip width (NR 24 or 32) and the gather and scatter (AVX-512
    or AVX2 vectors, or scalar); each variant this CPU runs matches numpy."""
    if not all(flag in cpu_flags() for flag in flags):
        pytest.skip(f"this CPU lacks {flags}")
    env = dict(os.environ, RT_GEMM_KERNEL=kernel, RT_CONV_WINOGRAD="1")
    out, inputs = tmp_path / "out.npy", tmp_path / "in.npy"
    subprocess.run([sys.executable, "-c", VARIANT_SCRIPT, str(ROOT), str(out), str(inputs)],
                   env=env, check=True, cwd=ROOT, timeout=120)
    flat = np.load(inputs)
    x = flat[:2 * 16 * 30 * 22].reshape(2, 16, 30, 22)
    w = flat[x.size:x.size + 20 * 16 * 9].reshape(20, 16, 3, 3)
    bias = flat[x.size + w.size:]
    check(np.load(out), x, w, bias, (1, 1, 1, 1), act=2)


@pytest.mark.parametrize("threads", [1, 2])
def test_winograd_under_a_max_pool(threads, monkeypatch):
    """conv2d_act_max_pool2d with a convolution Winograd takes: the result goes through
    scratch and is pooled from there."""
    from tests.test_conv_pool import reference, run_fused
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 16, 30, 34)).astype(np.float32)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    conv = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    pool = ([2, 2], [2, 2], [0, 0], [1, 1], True)
    outs = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("RT_CONV_WINOGRAD", setting)
        outs[setting] = run_fused(x, w, bias, conv, 1, pool, threads)
    want = reference(x, w, bias, conv, 1, pool)
    # Max and Relu pass each output's error through unchanged: bound it as check() does, by
    # the largest sum |w| |x| of the pooled windows.
    scale = ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                       np.abs(bias).astype(np.float64), [1, 1], (1, 1, 1, 1), [1, 1], 1).max()
    np.testing.assert_array_less(np.abs(outs["1"] - want), TOLERANCE * scale)
    np.testing.assert_allclose(outs["0"], want, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(outs["1"], outs["0"]), "the Winograd path was not taken"
