"""Detection ONNX ops: NonMaxSuppression."""
from __future__ import annotations

import numpy as np

from .._registry import lowers
from .common import check_attrs, optional, require_dtype


@lowers("NonMaxSuppression")
def non_max_suppression(cv, node, inputs, attrs):
    """The selected boxes as rows (batch, class, box): a data-dependent count, planned for
    every box of every class and sized at each run. The three scalar inputs may be constants
    or run-time tensors; a missing one means 0 boxes, a 0 threshold and no score threshold."""
    check_attrs(cv, attrs, ("center_point_box",))
    boxes, scores = inputs[0], inputs[1]
    for x, what in ((boxes, "boxes"), (scores, "scores")):
        require_dtype(cv, x, ("float32",), what)
    bshape, sshape = list(cv.shape_of(boxes)), list(cv.shape_of(scores))
    if len(bshape) != 3 or bshape[2] != 4 or len(sshape) != 3 or sshape[0] != bshape[0] \
            or sshape[2] != bshape[1]:
        raise cv.fail(f"boxes {bshape} and scores {sshape} must be [B, N, 4] and [B, C, N]")
    params = []
    for index, dtypes, what in ((2, ("int64", "int32"), "max_output_boxes_per_class"),
                                (3, ("float32",), "iou_threshold"),
                                (4, ("float32",), "score_threshold")):
        x = optional(inputs, index)
        if x is None:
            params.append(None)
            continue
        require_dtype(cv, x, dtypes, what)
        if int(np.prod(cv.shape_of(x))) != 1:
            raise cv.fail(f"{what} must hold one element, not shape {list(cv.shape_of(x))}")
        params.append(cv.tensor(x))
    center = int(attrs.get("center_point_box", 0))
    if center not in (0, 1):
        raise cv.fail(f"center_point_box must be 0 or 1, not {center}")
    rows = sshape[0] * sshape[1] * sshape[2]
    out = cv.m.call("non_max_suppression", cv.tensor(boxes), cv.tensor(scores), *params, center,
                    outputs=[("int64", [rows, 3], True)])[0]
    return [out]
