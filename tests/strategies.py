"""Shared hypothesis strategies for the op tests: shapes (zero-size dims included), broadcastable
shape pairs, dtypes per op family, bounded arrays, and views of an array in other memory layouts
(strided, reversed, transposed, zero-stride) that hold the same values.

Array values come from a seeded numpy generator rather than element by element: the arrays are
dense and cheap to draw, and hypothesis still reports (and replays) the seed of a failure.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "FLOAT", "SIGNED", "UNSIGNED", "INTEGER", "NUMERIC", "ANY", "FAMILIES",
    "LAYOUTS", "dtypes", "shapes", "broadcastable_pairs", "grown", "arrays", "views", "inputs",
]

Shape = Tuple[int, ...]

# ---- dtypes ----------------------------------------------------------------------------------

FLOAT = ("float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTEGER = SIGNED + UNSIGNED
NUMERIC = FLOAT + INTEGER
ANY = NUMERIC + ("bool", "float16")

# The dtypes each op accepts (docs/ops.md).
FAMILIES: Dict[str, Tuple[str, ...]] = {
    "arithmetic": NUMERIC,          # add, sub, mul, div
    "compare": NUMERIC,             # less
    "equal": NUMERIC + ("bool",),   # equal
    "relu": FLOAT + SIGNED,
    "float": FLOAT,                 # softmax, linear, conv2d, avg_pool2d
    "matmul": ("float32", "float64", "int32", "int64"),
    "max_pool": NUMERIC,
    "any": ANY,                     # copy, reshape, transpose, concat
}


def dtypes(family: str) -> st.SearchStrategy[str]:
    """A dtype name accepted by the ops of `family` (a key of FAMILIES)."""
    return st.sampled_from(FAMILIES[family])


# ---- shapes ----------------------------------------------------------------------------------

def shapes(min_rank: int = 0, max_rank: int = 4, min_side: int = 0,
           max_side: int = 6) -> st.SearchStrategy[Shape]:
    """Shapes of rank min_rank..max_rank with sizes min_side..max_side (0 by default)."""
    return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min_side,
                            max_side=max_side)


def broadcastable_pairs(min_rank: int = 0, max_rank: int = 4, min_side: int = 0,
                        max_side: int = 6) -> st.SearchStrategy[Tuple[Shape, Shape, Shape]]:
    """(a_shape, b_shape, result_shape) that broadcast with numpy's rules."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=min_rank, max_dims=max_rank, min_side=min_side,
        max_side=max_side,
    ).map(lambda b: (tuple(b.input_shapes[0]), tuple(b.input_shapes[1]), tuple(b.result_shape)))


@st.composite
def grown(draw, shape: Sequence[int], axes: Optional[Sequence[int]] = None,
          max_extra: int = 3) -> Shape:
    """Upper bounds for a dynamic input that runs with `shape`: each dimension in `axes` (all
    by default) grows by 0..max_extra."""
    axes = range(len(shape)) if axes is None else axes
    out = list(shape)
    for d in axes:
        out[d] += draw(st.integers(0, max_extra))
    return tuple(out)


# ---- values ----------------------------------------------------------------------------------

def _int_specials(info: np.iinfo) -> List[int]:
    vals = {info.min, info.max, info.min + 1, info.max - 1, 0, 1}
    if info.min < 0:
        vals.add(-1)
    return sorted(vals)


@st.composite
def arrays(draw, dtype: str, shape: Sequence[int], *, bound: float = 8.0,
           constant_axes: bool = True) -> np.ndarray:
    """A C-contiguous array of `dtype` and `shape`.

    Floats lie in [-bound, bound] (no NaN or inf), sometimes as small integers so that ties and
    exact equality happen. Integers span the dtype's whole range with its extremes (min, max,
    0, +-1) mixed in, or a few small values. With `constant_axes` the values may be constant
    along some axes, so that `views` can give those axes a zero stride."""
    shape = tuple(int(s) for s in shape)
    dt = np.dtype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    gen_shape = list(shape)
    if constant_axes and shape:
        for d in draw(st.sets(st.integers(0, len(shape) - 1), max_size=len(shape))):
            gen_shape[d] = min(gen_shape[d], 1)
    gen_shape = tuple(gen_shape)
    count = int(np.prod(gen_shape))
    flavor = draw(st.sampled_from(["wide", "small", "specials"]))
    if dt.kind == "b":
        vals = rng.integers(0, 2, count).astype(bool)
    elif dt.kind == "f":
        if flavor == "small":
            vals = rng.integers(-3, 4, count).astype(dt)
        else:
            vals = rng.uniform(-bound, bound, count).astype(dt)
            if flavor == "specials" and vals.size:
                pick = rng.random(count) < 0.3
                vals[pick] = rng.choice(np.array([0.0, -0.0, bound, -bound, 0.5], dt),
                                        int(pick.sum()))
    else:
        info = np.iinfo(dt)
        if flavor == "small":
            vals = rng.integers(max(info.min, -3), 4, count).astype(dt)
        else:
            vals = rng.integers(info.min, info.max, count, dtype=dt, endpoint=True)
            if flavor == "specials" and vals.size:
                pick = rng.random(count) < 0.4
                vals[pick] = rng.choice(np.array(_int_specials(info), dt), int(pick.sum()))
    return np.array(np.broadcast_to(vals.reshape(gen_shape), shape), order="C")


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _constant_along(arr: np.ndarray, axis: int) -> bool:
    first = np.take(arr, [0], axis=axis)
    return _same(np.array(np.broadcast_to(first, arr.shape), order="C"), arr)


LAYOUTS = ("contiguous", "strided", "reversed", "transposed", "broadcast", "mixed")


@st.composite
def views(draw, arr: np.ndarray, layouts: Sequence[str] = LAYOUTS) -> np.ndarray:
    """An array with exactly the values, dtype and shape of `arr`, in another memory layout:
    a stepped slice of a bigger buffer (non-contiguous), reversed axes (negative strides), a
    transposed buffer (.T-like), zero strides (np.broadcast_to) along axes where `arr` is
    constant, or all of them at once. The buffer around a strided view holds garbage (NaN for
    floats), so a kernel that reads outside the view shows up."""
    arr = np.array(arr, order="C")
    rank = arr.ndim
    kind = draw(st.sampled_from(tuple(layouts)))
    if kind == "contiguous" or rank == 0:
        return arr.copy()
    axes = st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)
    flips = draw(axes) if kind in ("reversed", "mixed") else set()
    perm: Sequence[int] = range(rank)
    if kind in ("transposed", "mixed") and rank >= 2:
        perm = draw(st.permutations(range(rank)).filter(
            lambda p: kind == "mixed" or list(p) != sorted(p)))
    steps = [1] * rank
    offsets = [0] * rank
    if kind in ("strided", "mixed"):
        steps = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
        offsets = draw(st.lists(st.integers(0, 2), min_size=rank, max_size=rank))
        if kind == "strided" and steps == [1] * rank:
            steps[draw(st.integers(0, rank - 1))] = 2
    zero = []
    if kind in ("broadcast", "mixed"):
        candidates = [d for d in range(rank) if arr.shape[d] > 1 and _constant_along(arr, d)]
        if candidates:
            zero = sorted(draw(st.sets(st.sampled_from(candidates), min_size=1)))

    # Lay the values out so that undoing the flips and the permutation gives `arr` back.
    flipped = np.flip(arr, axis=tuple(sorted(flips))) if flips else arr
    inner = np.transpose(flipped, perm)
    big_shape = [n * step + off + step - 1 for n, step, off in zip(inner.shape, steps, offsets)]
    big = np.empty(big_shape, arr.dtype)
    if arr.dtype.kind == "f":
        big.fill(np.nan)
    else:
        big.view(np.uint8).fill(0xA5)
    window = tuple(slice(off, off + n * step, step)
                   for n, step, off in zip(inner.shape, steps, offsets))
    big[window] = inner
    out = np.transpose(big[window], np.argsort(perm))
    if flips:
        out = np.flip(out, axis=tuple(sorted(flips)))
    if zero:
        head = out[tuple(slice(0, 1) if d in zero else slice(None) for d in range(rank))]
        out = np.broadcast_to(head, arr.shape)
    assert _same(np.array(out, order="C"), arr)
    return out


@st.composite
def inputs(draw, dtype: str, shape: Sequence[int], *, bound: float = 8.0,
           layouts: Sequence[str] = LAYOUTS) -> np.ndarray:
    """arrays(...) in a layout drawn by views(...)."""
    return draw(views(draw(arrays(dtype, shape, bound=bound)), layouts))
