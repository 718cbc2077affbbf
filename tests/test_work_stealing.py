"""Convolutions whose threads take work from each other's runs (rt_parallel_runs): the direct
convolution's output rows (and pooled rows), and the Winograd convolution's blocks of output
channels when each thread holds one strip.

Which thread computes an item changes neither its arithmetic nor its order, so every call,
whoever took what, must give the bits one thread gives, and those match numpy. Busy processes
on both cores make threads fall behind so that others take from them in some of the calls
(how many depends on the scheduler; one case below forces it); the pool's own check of the
taking, item by item and with a thread held back on purpose, is tests/c/threadpool_stress.c."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from tests.test_conv_pool import reference
from tests.test_conv_winograd import TOLERANCE, check, out_shape_of, program
from tests.test_ops import ref_conv2d

CALLS = 150


@pytest.fixture
def busy_cores():
    """Two processes spinning for the test's length."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def repeated(prog_bytes, x, threads):
    with rt.Program.load(prog_bytes) as p, p.load_method("forward", num_threads=threads) as f:
        return [np.array(f(x)[0]) for _ in range(CALLS)]


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_winograd_strip_runs_give_one_threads_bits(threads, busy_cores, monkeypatch):
    """A strip per thread that runs: ops with a scratch slot per thread run on at most as
    many threads as the CPU has, so the images (16x32: one strip of 32 tiles each) number
    the threads asked for, capped there."""
    monkeypatch.setenv("RT_CONV_WINOGRAD", "1")
    rng = np.random.default_rng(threads)
    slots = min(threads, os.cpu_count() or 1)
    x = rng.standard_normal((slots, 16, 16, 32)).astype(np.float32)
    w = rng.standard_normal((40, 16, 3, 3)).astype(np.float32)  # blocks of 24 and 16
    bias = rng.standard_normal(40).astype(np.float32)
    prog_bytes = program(x.shape, w, bias, (1, 1, 1, 1), act=1,
                         out_shape=out_shape_of(x.shape, 40, (1, 1, 1, 1)))
    (one,) = repeated(prog_bytes, x, 1)[:1]
    check(one, x, w, bias, (1, 1, 1, 1), act=1)
    for i, got in enumerate(repeated(prog_bytes, x, threads)):
        np.testing.assert_array_equal(got, one, err_msg=f"call {i}")


def test_winograd_block_taken_from_a_slow_strip(monkeypatch):
    """A NaN under every tile of the second strip makes its thread recompute each tile
    directly, many times slower, so the thread with the first strip takes the second strip's
    other block in most calls: its outputs, NaN where numpy's are, must be one thread's."""
    monkeypatch.setenv("RT_CONV_WINOGRAD", "1")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    x[0, 0, 17::4, 1::4] = np.nan  # inside every tile of output rows 16-31: the second strip
    w = rng.standard_normal((40, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    prog_bytes = program(x.shape, w, bias, (1, 1, 1, 1),
                         out_shape=out_shape_of(x.shape, 40, (1, 1, 1, 1)))
    (one,) = repeated(prog_bytes, x, 1)[:1]
    want = ref_conv2d(x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64),
                      [1, 1], (1, 1, 1, 1), [1, 1], 1)
    np.testing.assert_array_equal(np.isnan(one), np.isnan(want))
    finite = ~np.isnan(want)
    scale = ref_conv2d(np.abs(np.nan_to_num(x)).astype(np.float64), np.abs(w).astype(np.float64),
                       np.abs(bias).astype(np.float64), [1, 1], (1, 1, 1, 1), [1, 1], 1)
    np.testing.assert_array_less(np.abs(one - want)[finite], TOLERANCE * scale[finite])
    for i, got in enumerate(repeated(prog_bytes, x, 2)):
        np.testing.assert_array_equal(got, one, err_msg=f"call {i}")


def pooled_program(x_shape, w, bias, conv, pool, out_shape):
    stride, padding, dilation, groups = conv
    kernel, pool_stride, pool_padding, pool_dilation, ceil = pool
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x_shape)
    (y,) = m.call("conv2d_act_max_pool2d", xv, m.constant(w), m.constant(bias), stride, padding,
                  dilation, groups, 1, 0.0, 0.0, kernel, pool_stride, pool_padding,
                  pool_dilation, ceil, outputs=[("float32", out_shape, False)])
    m.output(y)
    return b.to_bytes()


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("pooled", [False, True])
def test_direct_row_runs_give_one_threads_bits(pooled, threads, busy_cores, monkeypatch):
    """61 output rows (or 31 pooled ones), a run of them per thread."""
    monkeypatch.setenv("RT_CONV_WINOGRAD", "0")
    rng = np.random.default_rng(7 + threads)
    x = rng.standard_normal((1, 5, 61, 64)).astype(np.float32)
    w = rng.standard_normal((16, 5, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    conv = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    if pooled:
        pool = ([2, 2], [2, 2], [0, 0], [1, 1], True)
        want = reference(x, w, bias, conv, 1, pool)
        prog_bytes = pooled_program(x.shape, w, bias, conv, pool, want.shape)
    else:
        want = np.maximum(ref_conv2d(x, w, bias, *conv), 0)
        prog_bytes = program(x.shape, w, bias, (1, 1, 1, 1), act=1,
                             out_shape=out_shape_of(x.shape, 16, (1, 1, 1, 1)))
    (one,) = repeated(prog_bytes, x, 1)[:1]
    np.testing.assert_allclose(one, want, rtol=1e-5, atol=1e-5)
    for i, got in enumerate(repeated(prog_bytes, x, threads)):
        np.testing.assert_array_equal(got, one, err_msg=f"call {i}")
