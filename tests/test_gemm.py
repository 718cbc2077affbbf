"""The packed GEMM under matmul, linear and conv2d: every edge of its blocking, and each
micro-kernel this CPU can run (AVX-512 8x32, AVX2 4x24, portable 4x24; chosen per process,
forced by RT_GEMM_KERNEL) against the portable one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

ROOT = Path(__file__).resolve().parents[1]
# Sizes straddling the micro-tiles (4 x 24, 8 x 32), the blocks (MC 192, KC 192, NC 528 or
# 512) and zero. Past 192 rows B is packed once for every row tile: in column strips of at
# most 4M floats (200 x 2100 x 2050 takes a strip of three 528-column blocks, then a narrower
# one), and tile by tile when one block's depth alone exceeds that (200 x 530 x 8000). A last
# block of columns 16 wide or less is computed half as wide (16 x 50 x 200 ends in 18 columns,
# 8 x 12 x 400 in 12). With more than one thread, too few tiles are cut into narrower column
# tiles (128 x 128 into 24-column tiles, 256 x 264 into two 6- and 5-panel tiles per row tile).
SIZES = [(1, 1, 1), (5, 15, 3), (4, 24, 256), (5, 25, 257), (193, 33, 300), (192, 530, 40),
         (73, 30, 193), (3, 1100, 9), (0, 4, 4), (4, 0, 4), (4, 4, 0), (200, 70, 513),
         (6, 16, 256), (7, 23, 257), (8, 32, 192), (9, 33, 385), (16, 515, 64),
         (200, 2100, 2050), (200, 530, 8000), (16, 50, 200), (8, 12, 400), (128, 128, 128),
         (256, 264, 64)]


def run_matmul(a, b, threads):
    bld = ProgramBuilder()
    m = bld.method("forward")
    m.output(m.matmul(m.input("a", "float32", a.shape), m.input("b", "float32", b.shape)))
    with rt.Program.load(bld.to_bytes()).load_method("forward", num_threads=threads) as f:
        return np.asarray(f(a, b)[0])


@pytest.mark.parametrize("m,n,k", SIZES)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gemm_blocking_edges(m, n, k, threads):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(run_matmul(a, b, threads), want, rtol=1e-4, atol=1e-4 * np.sqrt(max(k, 1)))


def test_linear_with_bias_through_gemm():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((50, 300)).astype(np.float32)
    w = rng.standard_normal((90, 300)).astype(np.float32)
    bias = rng.standard_normal(90).astype(np.float32)
    bld = ProgramBuilder()
    m = bld.method("forward")
    m.output(m.linear(m.input("x", "float32", x.shape), m.constant(w), m.constant(bias)))
    with rt.Program.load(bld.to_bytes()).load_method("forward") as f:
        got = np.asarray(f(x)[0])
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64) + bias, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows", [1, 3, 7])
@pytest.mark.parametrize("kind,lo,hi", [(0, 0.0, 0.0), (1, 0.0, 0.0), (2, -0.5, 0.75)])
def test_linear_with_fewer_rows_than_the_kernel(rows, kind, lo, hi):
    """A batch of under 8 rows (a batch-1 classifier) runs one row at a time against the packed
    weights instead of as an 8-row tile: bias, activation, several depth slices (k = 450) and
    a partial last block of columns (n = 1000 = 31 x 32 + 8)."""
    rng = np.random.default_rng(rows * 10 + kind)
    x = rng.standard_normal((rows, 450)).astype(np.float32)
    w = (rng.standard_normal((1000, 450)) * 0.05).astype(np.float32)
    bias = rng.standard_normal(1000).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    y = m.linear(m.input("x", "float32", x.shape), m.constant(w), m.constant(bias))
    if kind:
        assert m.fuse_activation(y, kind, lo, hi)
    m.output(y)
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as f:
        got = np.asarray(f(x)[0])
    plain = (x.astype(np.float64) @ w.T.astype(np.float64) + bias).astype(np.float32)
    want = {0: plain, 1: np.maximum(plain, 0), 2: clip_scalar(plain, lo, hi)}[kind]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# A matmul (40 columns: a whole block and a 16-column one; 75 rows: 4-row A panels and a
# partial one), a convolution with constant weights (the direct kernel reading B's rows in
# place: the kernels' gathered form, 60 outputs a row) and 3x3 depthwise convolutions with
# strides 1 and 2 (AVX-512 and AVX2 kernels of their own, which follow the GEMM's choice),
# saved side by side.
PORTABLE_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from tests.test_gemm import run_matmul
from tests.test_ops import run_conv_constant_weights
rng = np.random.default_rng(9)
a = rng.standard_normal((75, 300)).astype(np.float32)
b = rng.standard_normal((300, 40)).astype(np.float32)
x = rng.standard_normal((1, 7, 9, 60)).astype(np.float32)
w = rng.standard_normal((13, 7, 3, 3)).astype(np.float32)
conv = run_conv_constant_weights(x, w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1, 0, 2)
xd = rng.standard_normal((1, 4, 23, 70)).astype(np.float32)
wd = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
depthwise = [run_conv_constant_weights(xd, wd, None, [s, s], [1, 0, 2, 1], [1, 1], 4, 2, 2)
             for s in (1, 2)]
np.save(sys.argv[2], np.concatenate([run_matmul(a, b, 2).ravel(), conv.ravel()] +
                                    [d.ravel() for d in depthwise]))
"""


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []


def saved_under(script, env_var, value, tmp_path):
    """The array `script` saves (argv: the repository, an .npy path), run in a process with
    env_var=value."""
    path = tmp_path / f"{env_var}-{value}.npy"
    subprocess.run([sys.executable, "-c", script, str(ROOT), str(path)],
                   env=dict(os.environ, **{env_var: value}), check=True, cwd=ROOT, timeout=120)
    return np.load(path)


@pytest.mark.parametrize("kernel,flags", [("avx2_fma", ["avx2", "fma"]), ("avx512", ["avx512f"]),
                                          ("avx512_pairs", ["avx512f"])])
def test_vector_kernel_matches_portable_kernel(tmp_path, kernel, flags):
    if not all(flag in cpu_flags() for flag in flags):
        pytest.skip(f"this CPU lacks {flags}")
    outs = [saved_under(PORTABLE_SCRIPT, "RT_GEMM_KERNEL", forced, tmp_path)
            for forced in (kernel, "portable")]
    # The same summation order over k; FMA versus multiply-then-add rounds differently.
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-4)


PAIRS_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from tests.test_gemm import run_matmul
from tests.test_ops import run_conv_constant_weights
rng = np.random.default_rng(11)
outs = []
for m, k, n in ((75, 300, 40), (8, 200, 64), (13, 17, 100)):  # partial rows and columns
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    outs.append(run_matmul(a, b, 2))
for shape, out, kernel, act in (((1, 7, 9, 60), 13, 3, 2),     # 3x3: gathered B, Clip
                                ((1, 64, 20, 20), 24, 1, 1),    # pointwise, direct path
                                ((1, 200, 5, 40), 41, 3, 1),    # 10 slices deep, 40 = 32 + 8 columns
                                ((1, 300, 9, 9), 21, 1, 2),     # 81 = 2 x 32 + 17 columns
                                ((1, 512, 7, 7), 300, 1, 2)):   # pointwise, pixel rows
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out, shape[1], kernel, kernel)).astype(np.float32)
    bias = rng.standard_normal(out).astype(np.float32)
    pad = [kernel // 2] * 4
    outs.append(run_conv_constant_weights(x, w, bias, [1, 1], pad, [1, 1], 1, act, 2))
np.save(sys.argv[2], np.concatenate([o.ravel() for o in outs]))
"""


def test_avx512_forms_agree_bit_for_bit(tmp_path):
    """The AVX-512 kernel's two forms (rows one at a time, or in pairs against duplicated even
    and odd columns) sum the same products in the same order: products with partial blocks,
    gathered and packed B, biases, Relu and Clip, sums over many depth slices, come out
    identical."""
    if "avx512f" not in cpu_flags():
        pytest.skip("this CPU lacks avx512f")
    outs = [saved_under(PAIRS_SCRIPT, "RT_GEMM_KERNEL", forced, tmp_path)
            for forced in ("avx512", "avx512_pairs")]
    assert np.isfinite(outs[0]).all() and outs[0].size > 10000
    np.testing.assert_array_equal(outs[0], outs[1])


def test_portable_kernels_env_forces_portable(tmp_path):
    # RT_PORTABLE_KERNELS=1 and RT_GEMM_KERNEL=portable give bit-identical results.
    outs = [saved_under(PORTABLE_SCRIPT, env_var, value, tmp_path)
            for env_var, value in (("RT_PORTABLE_KERNELS", "1"), ("RT_GEMM_KERNEL", "portable"))]
    np.testing.assert_array_equal(outs[0], outs[1])


def clip_scalar(v, lo, hi):
    """The library's Clip: v < lo ? lo : v > hi ? hi : v (NaN kept)."""
    out = np.where(v > hi, np.float32(hi), v)
    return np.where(v < lo, np.float32(lo), out)


@pytest.mark.parametrize("kind,lo,hi", [(1, 0.0, 0.0), (2, -0.5, 0.75), (2, 0.25, 0.25),
                                        (2, -1.0, 0.0)])
@pytest.mark.parametrize("path", ["linear", "conv", "depthwise", "depthwise_stride2"])
def test_relu_and_clip_in_the_kernels_epilogue(kind, lo, hi, path):
    """Relu and Clip (whose bounds the loader requires in order) are applied by the GEMM
    kernels as they store the last slice, and by the depthwise blocks before their store: the
    scalar form, NaN kept, across tile edges and several depth slices (k = 400, and 450 for
    the convolution), and a depthwise row's partial last block (70 = 2 x 32 + 6 columns)."""
    from tests.test_ops import ref_conv2d
    rng = np.random.default_rng(kind * 7 + int(lo * 100 + 100))
    b = ProgramBuilder()
    m = b.method("forward")
    if path == "linear":
        x = rng.standard_normal((37, 400)).astype(np.float32)
        w = (rng.standard_normal((70, 400)) * 0.05).astype(np.float32)
        bias = rng.standard_normal(70).astype(np.float32)
        y = m.linear(m.input("x", "float32", x.shape), m.constant(w), m.constant(bias))
    elif path == "conv":
        x = rng.standard_normal((1, 50, 6, 32)).astype(np.float32)  # the direct path
        w = (rng.standard_normal((13, 50, 3, 3)) * 0.05).astype(np.float32)
        bias = rng.standard_normal(13).astype(np.float32)
        y = m.conv2d(m.input("x", "float32", x.shape), m.constant(w), m.constant(bias),
                     padding=1)
    else:
        stride = 2 if path == "depthwise_stride2" else 1
        x = rng.standard_normal((1, 6, 9, 70 * stride)).astype(np.float32)
        w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
        bias = rng.standard_normal(6).astype(np.float32)
        y = m.conv2d(m.input("x", "float32", x.shape), m.constant(w), m.constant(bias),
                     stride=stride, padding=1, groups=6)
    x.flat[rng.integers(0, x.size, 5)] = np.nan
    if path == "linear":
        plain = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    else:
        stride, groups = (2 if path == "depthwise_stride2" else 1), (6 if "depth" in path else 1)
        plain = ref_conv2d(x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64),
                           [stride, stride], [1, 1, 1, 1], [1, 1], groups)
    assert m.fuse_activation(y, kind, lo, hi)
    m.output(y)
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as f:
        got = np.asarray(f(x)[0])
    plain = plain.astype(np.float32)
    want = np.where(plain < 0, np.float32(0), plain) if kind == 1 else clip_scalar(plain, lo, hi)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
