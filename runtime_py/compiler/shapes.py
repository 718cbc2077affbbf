"""Output shapes of the runtime's ops, for the builder.

Each rule takes input shapes (upper bounds for dynamic tensors) and op parameters and returns
the output shape, raising ValueError with the op's name when the arguments cannot work. The C
library checks the same conditions again when it prepares a method; these rules let the builder
fail early, at the line that made the mistake.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"{op}: {message}")


def broadcast(op: str, a: Shape, b: Shape) -> Shape:
    """numpy broadcasting of two shapes."""
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise _fail(op, f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def normalize_axis(op: str, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise _fail(op, f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def matmul(op: str, a: Shape, b: Shape) -> Shape:
    """numpy.matmul, 1-D operands included."""
    if len(a) == 0 or len(b) == 0:
        raise _fail(op, "operands must have rank >= 1")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise _fail(op, f"inner dimensions differ: {tuple(a)} @ {tuple(b)}")
    batch = broadcast(op, a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def linear(op: str, x: Shape, w: Shape, bias: Optional[Shape]) -> Shape:
    if len(x) < 1 or len(w) != 2:
        raise _fail(op, f"expects x [..., K] and weight [N, K], got {tuple(x)} and {tuple(w)}")
    if x[-1] != w[1]:
        raise _fail(op, f"x has {x[-1]} features but the weight expects {w[1]}")
    if bias is not None and tuple(bias) != (w[0],):
        raise _fail(op, f"bias shape {tuple(bias)} should be ({w[0]},)")
    return tuple(x[:-1]) + (w[0],)


def pads4(op: str, padding: Sequence[int]) -> Tuple[int, int, int, int]:
    """(top, left, bottom, right) from 2 symmetric or 4 explicit paddings."""
    p = [int(v) for v in padding]
    if len(p) == 2:
        p = [p[0], p[1], p[0], p[1]]
    if len(p) != 4 or min(p) < 0:
        raise _fail(op, f"padding must be 2 or 4 non-negative ints, got {list(padding)}")
    return p[0], p[1], p[2], p[3]


def _pair(op: str, name: str, value: Sequence[int], minimum: int) -> Tuple[int, int]:
    v = [int(x) for x in value]
    if len(v) != 2 or min(v) < minimum:
        raise _fail(op, f"{name} must be 2 ints >= {minimum}, got {list(value)}")
    return v[0], v[1]


def conv2d(op: str, x: Shape, w: Shape, bias: Optional[Shape], stride: Sequence[int],
           padding: Sequence[int], dilation: Sequence[int], groups: int) -> Shape:
    if len(x) != 4 or len(w) != 4:
        raise _fail(op, f"expects x [N, C, H, W] and weight [O, C/groups, kH, kW], got "
                        f"{tuple(x)} and {tuple(w)}")
    n, c, h, wd = x
    o, cg, kh, kw = w
    if groups < 1 or c % groups or o % groups:
        raise _fail(op, f"groups={groups} must divide input channels {c} and output channels {o}")
    if cg != c // groups:
        raise _fail(op, f"weight has {cg} input channels per group, expected {c // groups}")
    if bias is not None and tuple(bias) != (o,):
        raise _fail(op, f"bias shape {tuple(bias)} should be ({o},)")
    sh, sw = _pair(op, "stride", stride, 1)
    dh, dw = _pair(op, "dilation", dilation, 1)
    top, left, bottom, right = pads4(op, padding)
    ho = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + left + right - dw * (kw - 1) - 1) // sw + 1
    if ho < 0 or wo < 0:
        raise _fail(op, f"kernel {kh}x{kw} (dilation {dh}x{dw}) is larger than the padded input")
    return (n, o, ho, wo)


def _pool_extent(size: int, k: int, s: int, pad_begin: int, pad_end: int, d: int,
                 ceil_mode: bool) -> int:
    # Floor division, as the C kernels do: a window that never fits gives 0 or a negative size.
    span = size + pad_begin + pad_end - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    # PyTorch: with ceil_mode the last window must start inside the input or left padding.
    if ceil_mode and out > 0 and (out - 1) * s >= size + pad_begin:
        out -= 1
    return out


def pool2d(op: str, x: Shape, kernel: Sequence[int], stride: Sequence[int],
           padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool) -> Shape:
    if len(x) != 4:
        raise _fail(op, f"expects x [N, C, H, W], got {tuple(x)}")
    kh, kw = _pair(op, "kernel", kernel, 1)
    sh, sw = _pair(op, "stride", stride, 1)
    dh, dw = _pair(op, "dilation", dilation, 1)
    top, left, bottom, right = pads4(op, padding)
    ho = _pool_extent(x[2], kh, sh, top, bottom, dh, ceil_mode)
    wo = _pool_extent(x[3], kw, sw, left, right, dw, ceil_mode)
    if ho < 0 or wo < 0:
        raise _fail(op, f"window {kh}x{kw} is larger than the padded input {x[2]}x{x[3]}")
    return (x[0], x[1], ho, wo)


def reshape(op: str, x: Shape, shape: Sequence[int]) -> Shape:
    numel = 1
    for s in x:
        numel *= s
    out: List[int] = [int(s) for s in shape]
    if out.count(-1) > 1 or any(s < -1 for s in out):
        raise _fail(op, f"shape {list(shape)} may hold one -1 and otherwise sizes >= 0")
    if -1 in out:
        known = 1
        for s in out:
            if s != -1:
                known *= s
        if known == 0 or numel % known:
            raise _fail(op, f"cannot infer -1 in {list(shape)} for {numel} elements")
        out[out.index(-1)] = numel // known
    total = 1
    for s in out:
        total *= s
    if total != numel:
        raise _fail(op, f"cannot reshape {tuple(x)} ({numel} elements) to {list(shape)}")
    return tuple(out)


def transpose(op: str, x: Shape, perm: Sequence[int]) -> Shape:
    if sorted(int(p) for p in perm) != list(range(len(x))):
        raise _fail(op, f"perm {list(perm)} is not a permutation of 0..{len(x) - 1}")
    return tuple(x[int(p)] for p in perm)


def concat(op: str, shapes: Sequence[Shape], axis: int) -> Shape:
    if not shapes:
        raise _fail(op, "needs at least one tensor")
    rank = len(shapes[0])
    ax = normalize_axis(op, axis, rank)
    total = 0
    for s in shapes:
        if len(s) != rank or any(s[d] != shapes[0][d] for d in range(rank) if d != ax):
            raise _fail(op, f"shapes {[tuple(s) for s in shapes]} differ off axis {axis}")
        total += s[ax]
    out = list(shapes[0])
    out[ax] = total
    return tuple(out)


# ---- normalisation and transposed convolution ------------------------------------------------

def layer_norm(op: str, x: Shape, scale: Optional[Shape], bias: Optional[Shape],
               axis: int) -> int:
    """The normalised axis; scale and bias (leading 1s aside) must be trailing sizes of x from
    axis on."""
    if not x:
        raise _fail(op, "x must have rank >= 1")
    ax = normalize_axis(op, axis, len(x))
    for name, p in (("scale", scale), ("bias", bias)):
        if p is None:
            continue
        kept = list(p)
        while kept and kept[0] == 1:
            kept.pop(0)
        if len(kept) > len(x) - ax or (kept and tuple(kept) != tuple(x[len(x) - len(kept):])):
            raise _fail(op, f"{name} shape {tuple(p)} must match the trailing sizes of x "
                            f"{tuple(x)} from axis {axis}")
    return ax


def channel_norm(op: str, x: Shape, scale: Optional[Shape], bias: Optional[Shape],
                 groups: Optional[int]) -> None:
    """instance_norm (groups None) and group_norm: x [N, C, ...]; scale and bias [C] (or, for
    group_norm, [groups])."""
    if len(x) < 2:
        raise _fail(op, f"x must be [N, C, ...], got {tuple(x)}")
    c = x[1]
    if groups is not None and (groups < 1 or c % groups):
        raise _fail(op, f"num_groups {groups} must be >= 1 and divide the {c} channels")
    allowed = (c,) if groups is None else (c, groups)
    for name, p in (("scale", scale), ("bias", bias)):
        if p is not None and (len(p) != 1 or p[0] not in allowed):
            raise _fail(op, f"{name} shape {tuple(p)} should be ({c},)"
                            + (f" or ({groups},)" if groups is not None else ""))


def conv_transpose2d(op: str, x: Shape, w: Shape, bias: Optional[Shape], stride: Sequence[int],
                     padding: Sequence[int], output_padding: Sequence[int],
                     dilation: Sequence[int], groups: int) -> Shape:
    if len(x) != 4 or len(w) != 4:
        raise _fail(op, f"expects x [N, C, H, W] and weight [C, O/groups, kH, kW], got "
                        f"{tuple(x)} and {tuple(w)}")
    n, c, h, wd = x
    ci, og, kh, kw = w
    if ci != c:
        raise _fail(op, f"weight has {ci} input channels, x has {c}")
    if groups < 1 or c % groups:
        raise _fail(op, f"groups={groups} must divide input channels {c}")
    if kh < 1 or kw < 1:
        raise _fail(op, f"weight {tuple(w)} has an empty kernel")
    o = og * groups
    if bias is not None and tuple(bias) != (o,):
        raise _fail(op, f"bias shape {tuple(bias)} should be ({o},)")
    sh, sw = _pair(op, "stride", stride, 1)
    dh, dw = _pair(op, "dilation", dilation, 1)
    oph, opw = _pair(op, "output_padding", output_padding, 0)
    p = [int(v) for v in padding]
    if len(p) == 2:
        p = [p[0], p[1], p[0], p[1]]
    if len(p) != 4:
        raise _fail(op, f"padding must be 2 or 4 ints, got {list(padding)}")
    top, left, bottom, right = p
    ho = (h - 1) * sh - top - bottom + dh * (kh - 1) + oph + 1
    wo = (wd - 1) * sw - left - right + dw * (kw - 1) + opw + 1
    if ho < 0 or wo < 0:
        raise _fail(op, f"the output size {ho}x{wo} is negative")
    return (n, o, ho, wo)
