"""Resize and Upsample, lowered to the runtime's resize op (docs/ops.md, resize).

Scales, sizes and roi known at conversion time are passed as lists. Sizes computed from other
tensors' sizes, and scales, sizes or roi that are graph inputs given value_bounds, are read at
every execute, the output planned at their bounds. The op
takes full-rank lists (axes and keep_aspect_ratio_policy are resolved here, as onnx's
reference does) and reproduces the reference's arithmetic for every coordinate transform,
nearest rounding mode, linear and cubic filter, antialiasing and exclude_outside.
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ...compiler import Value
from .._registry import lowers
from .._shape_tensor import ShapeTensor, shape_tensor, upper_bounds
from .common import FLOATS, check_attrs, optional

_MODES = {"nearest": 0, "linear": 1, "bilinear": 1, "cubic": 2}
_COORDS = {"half_pixel": 0, "half_pixel_symmetric": 1, "pytorch_half_pixel": 2,
           "align_corners": 3, "asymmetric": 4, "tf_crop_and_resize": 5}
_NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _known(x: Any) -> Optional[np.ndarray]:
    """A known 1-D parameter, or None when absent or empty (run-time ones go to
    _emit_at_run)."""
    if x is None:
        return None
    arr = np.asarray(x).reshape(-1)
    return arr if arr.size else None


def _emit(cv, x: Value, sizes: List[int], scales: List[float], roi: List[float], mode: str,
          coord: str, nearest: str, cubic_a: float, exclude_outside: bool, antialias: bool,
          extrapolation: float) -> Value:
    rank = len(x.shape)
    if mode != "nearest" and x.dtype not in FLOATS:
        raise cv.fail(f"{mode} mode on {x.dtype} is not supported (float32, float64 only)")
    shape = []
    for d in range(rank):
        if sizes:
            shape.append(x.shape[d] if sizes[d] == -1 else sizes[d])
        else:
            shape.append(int(float(scales[d]) * x.shape[d]))  # the kernel's floor rule
    if any(s > 0 and x.shape[d] == 0 for d, s in enumerate(shape)):
        raise cv.fail("cannot resize an empty dimension")
    return cv.m.call("resize", x, [int(s) for s in sizes], [float(s) for s in scales],
                     [float(r) for r in roi], _MODES[mode], _COORDS[coord], _NEAREST[nearest],
                     float(cubic_a), bool(exclude_outside), bool(antialias), float(extrapolation),
                     outputs=[(x.dtype, shape, x.dynamic)])[0]


@lowers("Resize")
def resize(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("mode", "coordinate_transformation_mode", "nearest_mode",
                            "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                            "antialias", "axes", "keep_aspect_ratio_policy"))
    x = cv.tensor(inputs[0])
    rank = len(x.shape)
    mode = _text(attrs.get("mode", "nearest"))
    if mode not in ("nearest", "linear", "cubic"):
        raise cv.fail(f"mode {mode!r} is not supported")
    if cv.opset < 11:
        return [_legacy(cv, x, optional(inputs, 1), mode)]
    params = [cv.tensor(p) if isinstance(p, ShapeTensor) and k < 3 else p
              for k, p in enumerate(inputs)]
    if any(isinstance(optional(params, k), Value) for k in (1, 2, 3)):
        return [_emit_at_run(cv, x, params, mode, attrs)]
    roi = _known(optional(params, 1))
    scales = _known(optional(params, 2))
    run_time_sizes = optional(params, 3) if isinstance(optional(params, 3), ShapeTensor) else None
    sizes = None if run_time_sizes is not None else _known(optional(params, 3))
    coord = _text(attrs.get("coordinate_transformation_mode", "half_pixel"))
    nearest = _text(attrs.get("nearest_mode", "round_prefer_floor"))
    policy = _text(attrs.get("keep_aspect_ratio_policy", "stretch"))
    if coord not in _COORDS or nearest not in _NEAREST:
        raise cv.fail(f"coordinate_transformation_mode {coord!r} / nearest_mode {nearest!r} "
                      f"is not supported")
    antialias = bool(attrs.get("antialias", 0)) and mode != "nearest"
    axes = [int(a) for a in attrs.get("axes", range(rank))]
    axes = [a + rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise cv.fail(f"axes {axes} are invalid for rank {rank}")
    if run_time_sizes is not None:
        if scales is not None or policy != "stretch" or coord == "tf_crop_and_resize":
            raise cv.fail("sizes computed at run time take neither scales, "
                          "keep_aspect_ratio_policy nor tf_crop_and_resize")
        return [_emit_run_time_sizes(cv, x, run_time_sizes, axes, mode, coord, nearest,
                                     antialias, attrs)]
    if (scales is None) == (sizes is None):
        raise cv.fail("exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        raise cv.fail(f"{'scales' if scales is not None else 'sizes'} has {len(given)} items "
                      f"for {len(axes)} axes")
    full_roi: List[float] = []
    if coord == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * len(axes):
            raise cv.fail("tf_crop_and_resize needs a roi with 2 items per axis")
        full_roi = [0.0] * rank + [1.0] * rank
        for i, a in enumerate(axes):
            full_roi[a], full_roi[a + rank] = float(roi[i]), float(roi[i + len(axes)])
    full_scales: List[float] = []
    full_sizes: List[int] = []
    if scales is not None:
        full_scales = [1.0] * rank
        for i, a in enumerate(axes):
            full_scales[a] = float(scales[i])
        if any(not s > 0 for s in full_scales):
            raise cv.fail(f"scales {list(scales)} must be > 0")
    else:
        full_sizes = [-1 if x.dynamic else x.shape[d] for d in range(rank)]
        for i, a in enumerate(axes):
            full_sizes[a] = int(sizes[i])
        if any(s < -1 for s in full_sizes):
            raise cv.fail(f"sizes {list(sizes)} must be >= 0")
        if policy != "stretch":
            full_sizes, full_scales = _keep_aspect(cv, x, axes, full_sizes, policy)
    return [_emit(cv, x, full_sizes, full_scales, full_roi, mode, coord, nearest,
                  float(attrs.get("cubic_coeff_a", -0.75)), bool(attrs.get("exclude_outside", 0)),
                  antialias, float(attrs.get("extrapolation_value", 0.0)))]


def _emit_at_run(cv, x: Value, params: List[Any], mode: str, attrs) -> Value:
    """Resize whose roi, scales or sizes are graph inputs read at every execute; the output is
    planned from their value_bounds (the largest scale or size)."""
    rank = len(x.shape)
    axes = [int(a) + (rank if int(a) < 0 else 0) for a in attrs.get("axes", range(rank))]
    coord = _text(attrs.get("coordinate_transformation_mode", "half_pixel"))
    nearest = _text(attrs.get("nearest_mode", "round_prefer_floor"))
    if coord not in _COORDS or nearest not in _NEAREST:
        raise cv.fail(f"coordinate_transformation_mode {coord!r} / nearest_mode {nearest!r} "
                      f"is not supported")
    policy = _text(attrs.get("keep_aspect_ratio_policy", "stretch"))
    antialias = bool(attrs.get("antialias", 0)) and mode != "nearest"
    if mode != "nearest" and x.dtype not in FLOATS:
        raise cv.fail(f"{mode} mode on {x.dtype} is not supported (float32, float64 only)")
    roi, scales, sizes = (_present(optional(params, k)) for k in (1, 2, 3))
    if (scales is None) == (sizes is None):
        raise cv.fail("exactly one of scales and sizes must be given")
    bounds = list(x.shape)
    if scales is not None:
        hi = _highest(cv, scales, "scales", FLOATS)
        for a in axes:
            bounds[a] = int(x.shape[a] * hi)
        scales = _full(cv, scales, axes, rank, np.ones(rank, np.float32), "scales")
    else:
        hi = _highest(cv, sizes, "sizes", ("int64",))
        copies = cv.value_range(sizes)[0] <= -1  # -1: x's size
        for a in axes:
            bounds[a] = max(int(hi), x.shape[a] if copies else 0)
        if policy != "stretch":
            sizes, scales, bounds = _keep_aspect_at_run(cv, x, axes, sizes, hi, policy)
        else:
            sizes = _full(cv, sizes, axes, rank, np.full(rank, -1, np.int64), "sizes")
    full_roi: Any = []
    if coord == "tf_crop_and_resize":
        if roi is None:
            raise cv.fail("tf_crop_and_resize needs a roi")
        if not isinstance(roi, Value):
            roi = np.asarray(roi, np.float64).reshape(-1)
        starts_ends = np.concatenate([np.zeros(rank), np.ones(rank)]).astype(
            roi.dtype if isinstance(roi, Value) else np.float64)
        full_roi = _full(cv, roi, axes + [a + rank for a in axes], 2 * rank, starts_ends, "roi")
        if not isinstance(full_roi, Value):
            full_roi = [float(r) for r in np.asarray(full_roi).reshape(-1)]
    return cv.m.call("resize", x, [] if sizes is None else sizes,
                     [] if scales is None else scales, full_roi, _MODES[mode], _COORDS[coord],
                     _NEAREST[nearest], float(attrs.get("cubic_coeff_a", -0.75)),
                     bool(attrs.get("exclude_outside", 0)), antialias,
                     float(attrs.get("extrapolation_value", 0.0)),
                     outputs=[(x.dtype, bounds, True)])[0]


def _keep_aspect_at_run(cv, x: Value, axes: List[int], sizes: Value, highest: float,
                        policy: str):
    """_keep_aspect on sizes read at run, computed by the program in float64 as onnx's
    reference does: full sizes, full scales and the output's bounds."""
    if policy not in ("not_larger", "not_smaller"):
        raise cv.fail(f"keep_aspect_ratio_policy {policy!r} is not supported")
    if x.dynamic:
        raise cv.fail("keep_aspect_ratio_policy needs a static input shape")
    m, rank, count = cv.m, len(x.shape), len(axes)
    extents = np.asarray([x.shape[a] for a in axes], np.float64)
    if count != int(np.prod(cv.shape_of(sizes))) or not extents.all():
        raise cv.fail(f"sizes need {count} items and x nonzero sizes on axes {axes}")
    ratios = m.div(m.cast(m.reshape(sizes, [count]), "float64"), cv.tensor(extents))
    pick = "reduce_min" if policy == "not_larger" else "reduce_max"
    (scale,) = m.call(pick, ratios, [0], True, outputs=[("float64", [1], False)])
    scaled = m.mul(scale, cv.tensor(extents))
    rounded = m.call("floor", m.add(scaled, cv.tensor(np.full(count, 0.5))),
                     outputs=[("float64", [count], False)])[0]
    full_sizes = _full(cv, m.cast(rounded, "int64"), axes, rank, np.asarray(x.shape, np.int64),
                       "sizes")
    scales = m.mul(scale, cv.tensor(np.ones(count)))
    full_scales = _full(cv, scales, axes, rank, np.ones(rank, np.float64), "scales")
    # not_larger keeps every size within the sizes given; not_smaller scales the smallest
    # extent up to at most `highest`.
    bounds = list(x.shape)
    for a in axes:
        bounds[a] = (int(highest) if policy == "not_larger"
                     else int(highest / extents.min() * x.shape[a]) + 1)
    return full_sizes, full_scales, bounds


def _present(p: Any) -> Any:
    """p, or None for an absent or empty parameter."""
    if p is None or (not isinstance(p, Value) and np.asarray(p).size == 0):
        return None
    return p


def _highest(cv, p: Any, what: str, dtypes) -> float:
    """The largest value a run-time parameter can hold (its value_bounds)."""
    if isinstance(p, Value) and p.dtype not in dtypes:
        raise cv.fail(f"{what} has dtype {p.dtype}; supported: {', '.join(dtypes)}")
    given = cv.value_range(p)
    if given is None:
        raise cv.fail(f"run-time {what} need an upper bound: give the graph input they come "
                      f"from value_bounds")
    return given[1]


def _full(cv, p: Any, positions: List[int], length: int, defaults: np.ndarray, what: str):
    """A parameter given for some positions spread over all of them (defaults elsewhere): a
    known list, or a tensor scattered at run."""
    count = int(np.prod(cv.shape_of(p)))
    if count != len(positions):
        raise cv.fail(f"{what} has {count} items for {len(positions)} positions")
    if not isinstance(p, Value):
        full = defaults.astype(np.float64 if defaults.dtype.kind == "f" else np.int64)
        full[positions] = np.asarray(p).reshape(-1)
        return full.tolist()
    flat = cv.m.reshape(p, [count])
    if positions == list(range(length)):
        return flat
    return cv.m.call("scatter_elements", cv.tensor(defaults.astype(p.dtype)),
                     cv.tensor(np.asarray(positions, np.int64)), flat, 0, 0,
                     outputs=[(p.dtype, [length], False)])[0]


def _emit_run_time_sizes(cv, x: Value, sizes: ShapeTensor, axes: List[int], mode: str,
                         coord: str, nearest: str, antialias: bool, attrs) -> Value:
    """Sizes computed from other tensors' sizes (an FPN's `interpolate(x, size=y.shape[2:])`):
    the op reads them at every execute; the output is planned at their upper bounds."""
    items = list(sizes.items.reshape(-1))
    if len(items) != len(axes):
        raise cv.fail(f"sizes has {len(items)} items for {len(axes)} axes")
    if mode != "nearest" and x.dtype not in FLOATS:
        raise cv.fail(f"{mode} mode on {x.dtype} is not supported (float32, float64 only)")
    dims = list(cv.dims_of(x))
    for i, a in enumerate(axes):
        dims[a] = items[i]
    bounds = upper_bounds(cv.space, dims, f"{cv.where()}: output")
    full = cv.tensor(shape_tensor(cv.space, dims, "int64"))
    y = cv.m.call("resize", x, full, [], [], _MODES[mode], _COORDS[coord], _NEAREST[nearest],
                  float(attrs.get("cubic_coeff_a", -0.75)), bool(attrs.get("exclude_outside", 0)),
                  antialias, float(attrs.get("extrapolation_value", 0.0)),
                  outputs=[(x.dtype, bounds, True)])[0]
    cv.set_dims(y, dims)
    return y


def _keep_aspect(cv, x: Value, axes: List[int], sizes: List[int], policy: str):
    """onnx's rule: one scale for all axes (the smallest or largest ratio), sizes rounded
    half up from it."""
    if policy not in ("not_larger", "not_smaller"):
        raise cv.fail(f"keep_aspect_ratio_policy {policy!r} is not supported")
    if x.dynamic:
        raise cv.fail("keep_aspect_ratio_policy needs a static input shape")
    ratios = [sizes[a] / x.shape[a] for a in axes]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    new_sizes = [int(scale * x.shape[d] + 0.5) if d in axes else x.shape[d]
                 for d in range(len(x.shape))]
    scales = [scale if d in axes else 1.0 for d in range(len(x.shape))]
    return new_sizes, scales


def _legacy(cv, x: Value, scales: Any, mode: str) -> Value:
    """Upsample and Resize-10: asymmetric coordinates; nearest takes the floor."""
    if isinstance(scales, Value):
        given = cv.value_range(scales)
        if mode == "nearest" and given is not None and given[0] < 1:
            raise cv.fail("nearest downsampling before opset 11 is not supported (implementations "
                          "round differently): the scales' value_bounds must start at 1")
        return _emit_at_run(cv, x, [x, None, scales], mode,
                            {"coordinate_transformation_mode": "asymmetric",
                             "nearest_mode": "floor"})
    scales = _known(scales)
    if scales is None or len(scales) != len(x.shape):
        raise cv.fail("scales must give one factor per dimension")
    if mode == "nearest" and any(float(s) < 1 for s in scales):
        raise cv.fail("nearest downsampling before opset 11 is not supported (implementations "
                      "round differently)")
    return _emit(cv, x, [], [float(s) for s in scales], [], mode, "asymmetric", "floor", -0.75,
                 False, False, 0.0)


@lowers("Upsample")
def upsample(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("mode", "scales", "height_scale", "width_scale"))
    x = cv.tensor(inputs[0])
    mode = _text(attrs.get("mode", "nearest"))
    if mode not in _MODES or mode == "cubic":
        raise cv.fail(f"mode {mode!r} is not supported")
    mode = "linear" if mode == "bilinear" else mode
    if "scales" in attrs:
        scales = np.asarray(attrs["scales"], dtype=np.float64)
    elif "height_scale" in attrs:
        if len(x.shape) != 4:
            raise cv.fail("height_scale/width_scale need a rank-4 input")
        scales = np.array([1.0, 1.0, attrs["height_scale"], attrs.get("width_scale", 1.0)])
    else:
        scales = optional(inputs, 1)
        if isinstance(scales, Value):
            return [_legacy(cv, x, scales, mode)]
        scales = _known(scales)
    if scales is not None and any(float(s) < 1 for s in scales):
        raise cv.fail(f"Upsample scales {list(scales)} must be >= 1")
    return [_legacy(cv, x, scales, mode)]
