"""Helpers shared by the lowerings."""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence

import numpy as np

from ...compiler import Value

FLOATS = ("float32", "float64")
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
NUMERIC = FLOATS + INTEGERS


def require_dtype(cv: Any, x: Any, allowed: Iterable[str], what: str = "input") -> str:
    """The dtype of x, or a ConversionError naming it when the runtime has no kernel for it."""
    dtype = cv.dtype_of(x)
    allowed = tuple(allowed)
    if dtype not in allowed:
        raise cv.fail(f"{what} has dtype {dtype}; supported: {', '.join(allowed)}")
    return dtype


def const_ints(cv: Any, x: Any, what: str) -> List[int]:
    """A known integer tensor (e.g. a shape or axes input) as a list."""
    if x is None:
        raise cv.fail(f"{what} is missing")
    if isinstance(x, Value):
        raise cv.fail(f"{what} must be known at conversion time (a constant or computable from "
                      f"constants); a run-time {what} is not supported")
    return [int(v) for v in np.asarray(x).reshape(-1)]


def check_attrs(cv: Any, attrs: dict, allowed: Sequence[str]) -> None:
    unknown = sorted(set(attrs) - set(allowed))
    if unknown:
        raise cv.fail(f"attribute(s) {', '.join(unknown)} not supported")


def reshape(cv: Any, x: Any, shape: Sequence[int]) -> Any:
    """Reshape a known array in numpy, a program tensor with the reshape op."""
    if not isinstance(x, Value):
        return np.asarray(x).reshape(tuple(shape))
    if tuple(shape) == tuple(x.shape) and not x.dynamic:
        return x
    if x.dynamic and -1 not in shape:  # its bounds are not its sizes: reshape_to_dims
        raise cv.fail(f"internal: a literal reshape of the dynamic tensor {x} to {list(shape)}")
    return cv.m.reshape(x, list(shape))


def optional(inputs: Sequence[Any], index: int) -> Optional[Any]:
    return inputs[index] if index < len(inputs) else None


def legacy_broadcast(cv: Any, a: Any, b: Any, attrs: dict) -> Any:
    """Opset < 7 binary ops with broadcast=1 and an axis: B's dimensions align with A's starting
    at `axis` (not from the right), so B is reshaped with 1s around them."""
    if not attrs.get("broadcast") or "axis" not in attrs:
        return b
    rank_a, shape_b = len(cv.shape_of(a)), list(cv.shape_of(b))
    axis = int(attrs["axis"])
    axis = axis + rank_a if axis < 0 else axis
    if not 0 <= axis <= rank_a - len(shape_b):
        raise cv.fail(f"broadcast axis {attrs['axis']} does not fit B {shape_b} into rank {rank_a}")
    target = [1] * axis + shape_b + [1] * (rank_a - axis - len(shape_b))
    if isinstance(b, Value) and b.dynamic:
        raise cv.fail("legacy broadcast of a dynamic B is not supported")
    return reshape(cv, b, target)


# The refusal for a size taken from run-time values that nothing bounds.
UNBOUNDED_SHAPE = ("a run-time shape needs upper bounds for its values: compute it from sizes "
                   "of tensors, or give the graph input it comes from value_bounds")


def int64_tensor(cv: Any, x: Any) -> Value:
    """x as an int64 program tensor (int32 run-time parameters cast)."""
    v = cv.tensor(x)
    return v if v.dtype == "int64" else cv.m.cast(v, "int64")


def trailing_sizes_of(sizes, shape, axis: int) -> bool:
    """sizes, leading 1s aside, are the last sizes of shape from axis on (rms_norm's and
    layer_norm's rule for a scale)."""
    kept = list(sizes)
    while kept and kept[0] == 1:
        kept.pop(0)
    return len(kept) <= len(shape) - axis and list(shape[len(shape) - len(kept):]) == kept
