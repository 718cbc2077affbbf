"""non_max_suppression on CUDA against the same program on the CPU (whose results
tests/test_ops_detection.py checks against the ONNX definition): corner and centre boxes,
thresholds as constants and as inputs read back at each execute, NaN scores, a dynamic box
count, and a program loaded once and run on several problems."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu

from tests.test_ops_detection import random_problem  # noqa: E402


def _program(batches, classes, n, center, scalars_as_inputs, dynamic):
    b = ProgramBuilder()
    m = b.method("forward")
    bshape, sshape = (batches, n, 4), (batches, classes, n)
    boxes = m.input("boxes", "float32", bshape, max_shape=bshape if dynamic else None)
    scores = m.input("scores", "float32", sshape, max_shape=sshape if dynamic else None)
    if scalars_as_inputs:
        scalars = [m.input("max", "int64", (1,)), m.input("iou", "float32", (1,)),
                   m.input("score", "float32", (1,))]
    else:
        scalars = [m.constant(np.array([3], np.int64)), m.constant(np.array([0.4], np.float32)),
                   None]
    y = m.call("non_max_suppression", boxes, scores, *scalars, center,
               outputs=[("int64", [batches * classes * n, 3], True)])[0]
    m.output(y, "selected")
    return b.to_bytes()


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("scalars_as_inputs", [False, True])
def test_matches_the_cpu(center, scalars_as_inputs):
    rng = np.random.default_rng(center * 2 + scalars_as_inputs)
    batches, classes, n = 2, 3, 40
    program = _program(batches, classes, n, center, scalars_as_inputs, dynamic=False)
    with rt.Program.load(program) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            for limit, iou, threshold in ((3, 0.4, 0.2), (100, 0.0, -1.0), (0, 0.5, 0.0),
                                          (5, 0.9, 0.8)):
                boxes, scores = random_problem(batches, classes, n, center, rng)
                scores[0, 1, :3] = np.nan
                feeds = [boxes, scores]
                if scalars_as_inputs:
                    feeds += [np.array([limit], np.int64), np.array([iou], np.float32),
                              np.array([threshold], np.float32)]
                (want,), (got,) = cpu(*feeds), gpu(*feeds)
                want, got = np.asarray(want), np.asarray(got.to_host())
                assert got.shape == want.shape
                np.testing.assert_array_equal(got, want)


def test_a_dynamic_box_count():
    program = _program(1, 2, 16, 0, False, dynamic=True)
    with rt.Program.load(program) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            for n in (0, 1, 9, 16):
                boxes, scores = random_problem(1, 2, n, 0)
                (want,), (got,) = cpu(boxes, scores), gpu(boxes, scores)
                np.testing.assert_array_equal(np.asarray(got.to_host()), np.asarray(want))
