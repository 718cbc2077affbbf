"""non_max_suppression (ONNX NonMaxSuppression) through the builder: a hand-worked case, random
problems against an independent numpy transcription of the ONNX definition (and against onnx's
reference implementation where onnx is installed), run-time parameters, a dynamic box count,
and the errors. The official node cases run in test_onnx_node.py."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from runtime_py.errors import InvalidArgument, InvalidProgram

RNG = np.random.default_rng(5)


def nms_numpy(boxes, scores, max_per_class, iou, score_threshold, center):
    """ONNX's definition, written from the spec: per (batch, class), best score first (ties by
    lower index), keep a box unless its IoU with a kept one exceeds iou."""
    def extent(b):
        if center:
            return (b[0] - b[2] / 2, b[0] + b[2] / 2), (b[1] - b[3] / 2, b[1] + b[3] / 2)
        return (min(b[1], b[3]), max(b[1], b[3])), (min(b[0], b[2]), max(b[0], b[2]))

    def iou_of(a, b):
        (ax, ay), (bx, by) = extent(a), extent(b)
        w = np.float32(min(ax[1], bx[1]) - max(ax[0], bx[0]))
        h = np.float32(min(ay[1], by[1]) - max(ay[0], by[0]))
        if w <= 0 or h <= 0:
            return np.float32(0)
        inter = w * h
        area_a = np.float32(ax[1] - ax[0]) * np.float32(ay[1] - ay[0])
        area_b = np.float32(bx[1] - bx[0]) * np.float32(by[1] - by[0])
        union = area_a + area_b - inter
        if area_a <= 0 or area_b <= 0 or union <= 0:
            return np.float32(0)
        return inter / union

    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in sorted(range(len(s)), key=lambda i: (-s[i], i))
                     if score_threshold is None or s[i] > score_threshold]
            kept = []
            for i in order:
                if len(kept) >= max_per_class:
                    break
                if all(not iou_of(boxes[b, i], boxes[b, k]) > iou for k in kept):
                    kept.append(i)
                    rows.append((b, c, i))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def run_nms(boxes, scores, max_per_class: Optional[int] = None, iou: Optional[float] = None,
            score_threshold: Optional[float] = None, center: int = 0, *, as_inputs=False,
            max_boxes: Optional[int] = None, device: Any = "cpu"):
    """The op on these arrays; the three scalars as constants, or as inputs with as_inputs;
    max_boxes makes the box count dynamic up to it."""
    b = ProgramBuilder()
    m = b.method("forward")
    bshape, sshape = boxes.shape, scores.shape
    if max_boxes is not None:
        bshape, sshape = (bshape[0], max_boxes, 4), (sshape[0], sshape[1], max_boxes)
    dyn = max_boxes is not None
    xb = m.input("boxes", "float32", bshape, max_shape=bshape if dyn else None)
    xs = m.input("scores", "float32", sshape, max_shape=sshape if dyn else None)
    feeds = [boxes, scores]
    scalars = []
    for value, dtype, name in ((max_per_class, "int64", "max"), (iou, "float32", "iou"),
                               (score_threshold, "float32", "score")):
        if value is None:
            scalars.append(None)
        elif as_inputs:
            scalars.append(m.input(name, dtype, (1,)))
            feeds.append(np.array([value], dtype=dtype))
        else:
            scalars.append(m.constant(np.array([value], dtype=dtype)))
    rows = sshape[0] * sshape[1] * sshape[2]
    y = m.call("non_max_suppression", xb, xs, *scalars, center,
               outputs=[("int64", [rows, 3], True)])[0]
    m.output(y, "selected")
    with rt.Program.load(b.to_bytes()) as program:
        with program.load_method("forward", device=device) as method:
            (out,) = method(*feeds)
            return np.array(out)


def random_problem(batches, classes, n, center, rng=RNG):
    xy = rng.uniform(0, 10, (batches, n, 2)).astype(np.float32)
    wh = rng.uniform(0.5, 4, (batches, n, 2)).astype(np.float32)
    if center:
        boxes = np.concatenate([xy, wh], axis=2)
    else:  # (y1, x1, y2, x2), some boxes with their corners the other way round
        boxes = np.concatenate([xy[..., ::-1], xy[..., ::-1] + wh[..., ::-1]], axis=2)
        flip = rng.random((batches, n)) < 0.3
        boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    scores = rng.random((batches, classes, n)).astype(np.float32)
    scores[..., rng.random(n) < 0.2] = 0.5  # ties, decided by the box index
    return boxes.astype(np.float32), scores


def test_a_worked_example():
    # Box 1 overlaps box 0 by 0.9 / 1.1 of their union; box 2 is apart.
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6]]], np.float32)
    scores = np.array([[[0.9, 0.95, 0.3]]], np.float32)
    got = run_nms(boxes, scores, max_per_class=3, iou=0.5)
    np.testing.assert_array_equal(got, [[0, 0, 1], [0, 0, 2]])
    got = run_nms(boxes, scores, max_per_class=3, iou=0.95)  # IoU 0.818: nothing suppressed
    np.testing.assert_array_equal(got, [[0, 0, 1], [0, 0, 0], [0, 0, 2]])
    got = run_nms(boxes, scores, max_per_class=3, iou=0.5, score_threshold=0.5)
    np.testing.assert_array_equal(got, [[0, 0, 1]])
    assert run_nms(boxes, scores).shape == (0, 3)  # no max_per_class: nothing selected


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("seed", range(6))
def test_random_problems_match_the_definition(center, seed):
    rng = np.random.default_rng(seed)
    batches, classes, n = 1 + seed % 2, 1 + seed % 3, 5 + 7 * seed
    boxes, scores = random_problem(batches, classes, n, center, rng)
    limit, iou = [1, 3, 100][seed % 3], [0.0, 0.3, 0.7][seed % 3]
    threshold = None if seed % 2 else 0.25
    want = nms_numpy(boxes, scores, limit, iou, threshold, center)
    got = run_nms(boxes, scores, limit, iou, threshold, center, as_inputs=seed % 2 == 0)
    np.testing.assert_array_equal(got, want)
    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator

    node = onnx.helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"],
                                 center_point_box=center)
    tensors = [onnx.helper.make_tensor_value_info(n_, t_, None) for n_, t_ in
               (("b", onnx.TensorProto.FLOAT), ("s", onnx.TensorProto.FLOAT),
                ("m", onnx.TensorProto.INT64), ("i", onnx.TensorProto.FLOAT),
                ("t", onnx.TensorProto.FLOAT))]
    graph = onnx.helper.make_graph([node], "nms", tensors, [onnx.helper.make_tensor_value_info(
        "y", onnx.TensorProto.INT64, None)])
    feeds = {"b": boxes, "s": scores, "m": np.array([limit], np.int64),
             "i": np.array([iou], np.float32),
             "t": np.array([-np.inf if threshold is None else threshold], np.float32)}
    (ref,) = ReferenceEvaluator(onnx.helper.make_model(graph)).run(None, feeds)
    np.testing.assert_array_equal(got, ref)


def test_a_dynamic_box_count_runs_every_count_up_to_its_bound():
    for n in (0, 1, 6, 12):
        boxes, scores = random_problem(1, 2, n, 0)
        got = run_nms(boxes, scores, 4, 0.4, None, 0, max_boxes=12)
        np.testing.assert_array_equal(got, nms_numpy(boxes, scores, 4, 0.4, None, 0))


def test_nan_scores_come_after_every_number():
    boxes, scores = random_problem(1, 1, 6, 1)
    scores[0, 0, [1, 4]] = np.nan
    got = run_nms(boxes, scores, 6, 1.0)  # nothing suppressed: every box, best first
    order = sorted(range(6), key=lambda i: (np.isnan(scores[0, 0, i]), -scores[0, 0, i], i))
    np.testing.assert_array_equal(got[:, 2], order)


def test_errors_name_the_argument():
    boxes, scores = random_problem(1, 1, 4, 0)
    with pytest.raises(InvalidProgram, match="center_point_box must be 0 or 1"):
        run_nms(boxes, scores, 2, 0.5, None, 2)
    with pytest.raises(InvalidProgram, match=r"boxes \[1, 4, 4\] and scores \[1, 1, 5\]"):
        run_nms(boxes, np.zeros((1, 1, 5), np.float32), 2)
    b = ProgramBuilder()
    m = b.method("forward")
    xb, xs = m.input("b", "float32", (1, 4, 4)), m.input("s", "float32", (1, 1, 4))
    two = m.constant(np.array([1, 2], np.int64))
    y = m.call("non_max_suppression", xb, xs, two, None, None, 0,
               outputs=[("int64", [4, 3], True)])[0]
    m.output(y, "y")
    with rt.Program.load(b.to_bytes()) as program:
        with pytest.raises(InvalidProgram, match=r"max_per_class has shape \[2\]; it must hold "
                                                 "one element"):
            program.load_method("forward")
    b = ProgramBuilder()
    m = b.method("forward")
    xb, xs = m.input("b", "float32", (1, 4, 4)), m.input("s", "float32", (1, 1, 4))
    y = m.call("non_max_suppression", xb, xs, None, None, None, 0,
               outputs=[("int64", [3, 3], True)])[0]
    m.output(y, "y")
    with rt.Program.load(b.to_bytes()) as program:
        with pytest.raises(InvalidProgram, match=r"out is planned as \[3, 3\]; it needs \[4, 3\]"):
            program.load_method("forward")


def test_a_box_count_past_the_bound_is_refused_at_run():
    boxes, scores = random_problem(1, 1, 5, 0)
    with pytest.raises(InvalidArgument):
        run_nms(boxes, scores, 2, 0.5, None, 0, max_boxes=4)
