"""ONNX Attention (opsets 23 and 24) on the runtime's attention op, the attention chains the
importer fuses (_patterns.fuse_attention), and ONNX RotaryEmbedding on the rotary op.

Q, K, V come as [B, H, S, D], or as [B, S, H * D] with q_num_heads / kv_num_heads: those are
reshaped (a view) to [B, S, H, D] and read in that layout, so no transpose is made. A past
key / value is concatenated in front of the new one (the present outputs); is_causal is then
aligned at the bottom right (the new queries are the last positions), as it is with
nonpad_kv_seqlen, which becomes the op's kv_lengths. Without either, it is top-left. The
softmax of a row that sees no key is all zeros, as the spec has it. The fourth output
(qk_matmul_output) is not supported.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

from ...compiler import Value
from .._kv_cache import PresentCache
from .._patterns import FUSED_ATTENTION, FUSED_DOMAIN, FUSED_ROTARY
from .._registry import lowers
from .._shape_tensor import upper_bounds
from .._symbolic import as_int
from .common import FLOATS, check_attrs, int64_tensor, optional, require_dtype
from .shape import reshape_to_dims

Q_SEQ, K_SEQ, V_SEQ, OUT_SEQ = 1, 2, 4, 8
NOT_CAUSAL, TOP_LEFT, BOTTOM_RIGHT = 0, 1, 2


def _heads_apart(cv: Any, x: Any, heads: Optional[int], what: str) -> Any:
    """A 3-D [B, S, H * D] input as [B, S, H, D] (a reshape, no copy)."""
    if heads is None or heads <= 0:
        raise cv.fail(f"{what} is 3-D: q_num_heads and kv_num_heads must be given (> 0)")
    b, s, hidden = cv.dims_of(x)
    if as_int(hidden) is None or as_int(hidden) % heads:
        raise cv.fail(f"{what}'s hidden size {hidden} is not a multiple of its {heads} heads")
    return reshape_to_dims(cv, x, [b, s, heads, as_int(hidden) // heads])


def _bhsd(cv: Any, x: Any, seq_major: bool) -> Any:
    """x as [B, H, S, D]."""
    if not seq_major:
        return cv.tensor(x)
    b, s, h, d = cv.dims_of(x)
    y = cv.m.transpose(cv.tensor(x), [0, 2, 1, 3])
    cv.set_dims(y, [b, h, s, d])
    return y


def _with_past(cv: Any, past: Any, x: Any, seq_major: bool, what: str) -> Any:
    """present = Concat(past, x) over the sequence, both [B, H, S, D]."""
    x = _bhsd(cv, x, seq_major)
    pd, xd = cv.dims_of(past), cv.dims_of(x)
    if len(pd) != 4:
        raise cv.fail(f"past_{what} must be 4-D [batch, heads, past length, head size]")
    y = cv.m.concat([cv.tensor(past), x], 2)
    cv.set_dims(y, [xd[0], xd[1], pd[2] + xd[2], xd[3]])
    return y


def _window_unset(attrs: dict) -> bool:
    return all(int(attrs.get(name, -1)) == -1 for name in ("left_window_size",
                                                           "right_window_size"))


@lowers("Attention")
def attention(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                            "scale", "softcap", "softmax_precision", "left_window_size",
                            "right_window_size"))
    if len(node.output) > 3 and node.output[3]:
        raise cv.fail("the qk_matmul_output output is not supported")
    if not _window_unset(attrs):
        raise cv.fail("left_window_size / right_window_size (sliding windows) are not supported")
    q, k, v = inputs[:3]
    mask, past_k, past_v, nonpad = (optional(inputs, i) for i in (3, 4, 5, 6))
    dtype = require_dtype(cv, q, FLOATS, "Q")
    for x, what in ((k, "K"), (v, "V")):
        if cv.dtype_of(x) != dtype:
            raise cv.fail(f"{what} has dtype {cv.dtype_of(x)}, Q {dtype}")
    if (past_k is None) != (past_v is None):
        raise cv.fail("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise cv.fail("nonpad_kv_seqlen cannot be combined with past_key / past_value")

    rank = len(cv.shape_of(q))
    if rank not in (3, 4) or any(len(cv.shape_of(x)) != rank for x in (k, v)):
        raise cv.fail("Q, K and V must all be 3-D or all 4-D")
    layout = 0
    if rank == 3:
        q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        q = _heads_apart(cv, q, q_heads and int(q_heads), "Q")
        k = _heads_apart(cv, k, kv_heads and int(kv_heads), "K")
        v = _heads_apart(cv, v, kv_heads and int(kv_heads), "V")
        layout = Q_SEQ | K_SEQ | V_SEQ | OUT_SEQ
    present: List[Any] = []
    if past_k is not None:
        k = _with_past(cv, past_k, k, bool(layout & K_SEQ), "key")
        v = _with_past(cv, past_v, v, bool(layout & V_SEQ), "value")
        layout &= ~(K_SEQ | V_SEQ)
        present = [k, v]
    elif len(node.output) > 1:
        present = [_bhsd(cv, k, bool(layout & K_SEQ)), _bhsd(cv, v, bool(layout & V_SEQ))]
        k, v = present
        layout &= ~(K_SEQ | V_SEQ)

    qd = cv.dims_of(q)
    b, sq, hq, d = (qd[0], qd[1], qd[2], qd[3]) if layout & Q_SEQ else \
        (qd[0], qd[2], qd[1], qd[3])
    dv = cv.dims_of(v)[3]
    if as_int(d) is None:
        raise cv.fail(f"the head size {d} must be known at conversion time")
    scale = attrs.get("scale")
    scale = 1 / math.sqrt(as_int(d)) if scale is None else float(scale)
    softcap = float(attrs.get("softcap", 0.0))
    if softcap < 0:
        raise cv.fail(f"softcap {softcap} is negative")
    causal = NOT_CAUSAL
    if int(attrs.get("is_causal", 0)):
        causal = BOTTOM_RIGHT if past_k is not None or nonpad is not None else TOP_LEFT
    mask_v = None
    if mask is not None:
        mask_dtype = cv.dtype_of(mask)
        if mask_dtype not in ("bool", dtype):
            raise cv.fail(f"attn_mask has dtype {mask_dtype}; it must be bool or Q's {dtype}")
        mask_v = cv.tensor(mask)
    lengths = int64_tensor(cv, nonpad) if nonpad is not None else None

    dims = [b, sq, hq, dv] if layout & OUT_SEQ else [b, hq, sq, dv]
    y = _call_attention(cv, [q, k, v], mask_v, lengths, scale, causal, softcap, layout, dims,
                        dtype)
    if rank == 3:
        y = reshape_to_dims(cv, y, [b, sq, hq * dv])
    return [y] + present[:len(node.output) - 1]


def _call_attention(cv: Any, qkv: Sequence[Any], mask: Optional[Value],
                    lengths: Optional[Value], scale: float, causal: int, softcap: float,
                    layout: int, dims: Sequence[Any], dtype: str) -> Value:
    """One attention op whose output has the (possibly symbolic) sizes `dims`."""
    dims = [cv.space.simplest(x) for x in dims]
    dynamic = not all(isinstance(x, int) for x in dims)
    shape = upper_bounds(cv.space, dims, f"{cv.where()}: output") if dynamic else dims
    y = cv.m.call("attention", *(cv.tensor(x) for x in qkv), mask, lengths, float(scale),
                  causal, float(softcap), layout, outputs=[(dtype, shape, dynamic)])[0]
    cv.set_dims(y, dims)
    return y


@lowers(f"{FUSED_DOMAIN}.{FUSED_ATTENTION}")
def fused_attention(cv, node, inputs, attrs):
    """The attention chain _patterns.fuse_attention found: Q, K^T (or K, key_transposed 0),
    V and the mask as the MatMuls and the Add saw them (numpy broadcasting; with kv_repeated,
    K and V before repeat_kv). One attention op where Q, K and V have rank 2 to 4 with equal
    batch sizes, K and V one head, Q's count, or (repeated) a divisor of it,
    and the mask broadcasts into the scores without growing them and covers every key;
    otherwise the replaced nodes. A KV cache the program keeps (_kv_cache.py) is read in its
    attribute, up to its filled length."""
    q, key, v, mask = inputs[0], inputs[1], inputs[2], optional(inputs, 3)
    transposed = bool(attrs.get("key_transposed", 1))
    if isinstance(key, PresentCache) or isinstance(v, PresentCache):
        return _cached_attention(cv, node, q, key, v, mask, transposed, attrs)
    dtype = cv.dtype_of(q)
    if dtype not in FLOATS or any(cv.dtype_of(x) != dtype for x in (key, v)):
        return cv.lower_unfused(node)
    dims = [list(cv.dims_of(x)) for x in (q, key, v)]
    rank = len(dims[0])
    if not 2 <= rank <= 4 or any(len(d) != rank for d in dims) or \
            int(attrs.get("softmax_axis", -1)) not in (-1, rank - 1):
        return cv.lower_unfused(node)
    lead = [1] * (4 - rank)
    (b, hq, sq, d), (bk, hk, kd2, kd3), (bv, hv, skv2, dv) = (lead + x for x in dims)
    d2, skv = (kd2, kd3) if transposed else (kd3, kd2)

    def same(x, y):
        return _same(cv, x, y)
    grouped = as_int(hk) == 1 or (bool(attrs.get("kv_repeated", 0)) and
                                  as_int(hk) is not None and as_int(hq) is not None and
                                  as_int(hk) > 0 and as_int(hq) % as_int(hk) == 0)
    if not (same(b, bk) and same(b, bv) and same(d, d2) and same(skv, skv2) and same(hk, hv)
            and (same(hk, hq) or grouped)):
        return cv.lower_unfused(node)
    mask_v = _fitted_mask(cv, mask, [b, hq, sq, skv], dtype) if mask is not None else None
    if mask is not None and mask_v is None:
        return cv.lower_unfused(node)
    q4, key4, v4 = (_rank4(cv, x, lead + dd) for x, dd in zip((q, key, v), dims))
    k4 = key4
    if transposed:
        k4 = cv.m.transpose(key4, [0, 1, 3, 2])
        cv.set_dims(k4, [b, hk, skv, d])
    y = _call_attention(cv, [q4, k4, v4], mask_v, None, float(attrs.get("scale", 1.0)),
                        NOT_CAUSAL, 0.0, 0, [b, hq, sq, dv], dtype)
    return [_rank4(cv, y, dims[0][:-1] + [dv]) if rank < 4 else y]


def _cached_attention(cv, node, q, key, v, mask, transposed, attrs):
    """Attention over a KV cache held in attributes: k and v are the attributes (their
    max_length positions), kv_lengths the filled length, the mask (covering the filled
    positions, which is what the graph computed it for) padded by the op."""
    if not (isinstance(key, PresentCache) and isinstance(v, PresentCache)) or transposed or \
            key.lengths is not v.lengths:
        raise cv.fail("kv_cache: the cached keys and values must reach the attention as they "
                      "are (no transpose or other op between)")
    dtype = cv.dtype_of(q)
    qd = list(cv.dims_of(q))
    if len(qd) != 4 or dtype not in FLOATS or key.dtype != dtype or \
            int(attrs.get("softmax_axis", -1)) not in (-1, 3):
        raise cv.fail(f"kv_cache: the attention over the cache needs 4-D float32 / float64 "
                      f"queries, not {len(qd)}-D {dtype}")
    b, hq, sq, _ = qd
    hk, dv = key.dims[1], v.dims[3]
    grouped = attrs.get("kv_repeated", 0) and as_int(hq) is not None and as_int(hq) % hk == 0
    if not (_same(cv, hq, hk) or grouped):
        raise cv.fail(f"kv_cache: {hq} query heads for {hk} cached heads")
    mask_v = None
    if mask is not None:
        mask_v = _fitted_mask(cv, mask, [b, hq, sq, key.dims[2]], dtype, short_ok=True)
        if mask_v is None:
            raise cv.fail("kv_cache: the attention mask does not fit the cached keys")
    y = _call_attention(cv, [q, key.state, v.state], mask_v, key.lengths,
                        float(attrs.get("scale", 1.0)), NOT_CAUSAL, 0.0, 0, [b, hq, sq, dv],
                        dtype)
    return [y]


def _rank4(cv: Any, x: Any, dims: Sequence[Any]) -> Any:
    """x reshaped to `dims` (leading 1s added or removed), a view."""
    return cv.tensor(x) if len(cv.shape_of(x)) == len(dims) else reshape_to_dims(cv, x, dims)


def _fitted_mask(cv: Any, mask: Any, full: Sequence[Any], dtype: str,
                 short_ok: bool = False) -> Optional[Value]:
    """The additive mask as the attention op takes it, or None where adding it would grow the
    scores (a size where theirs is 1), where it has one key column for many keys (the op reads
    a short mask as padded), or where its dtype differs."""
    dims = list(cv.dims_of(mask))
    if cv.dtype_of(mask) != dtype or len(dims) > 4 or not dims:
        return None
    for m, f in zip(dims[:-1], full[4 - len(dims):3]):
        if not (as_int(m) == 1 and as_int(f) != 0 or _same(cv, m, f)):
            return None
    if not (short_ok or _same(cv, dims[-1], full[3])):  # short_ok: the op pads it as masked
        return None
    return cv.tensor(mask)


def _same(cv: Any, a: Any, b: Any) -> bool:
    return cv.space.equal(a, b) is True


@lowers("RotaryEmbedding")
def rotary_embedding(cv, node, inputs, attrs):
    """ONNX RotaryEmbedding (opset 23): X [B, H, S, D], or [B, S, H * D] with num_heads;
    cos_cache / sin_cache [max position, R / 2] read at position_ids [B, S], or [B, S, R / 2]
    without them; the first R = rotary_embedding_dim (0: D) elements of each head rotated,
    as pairs (i, i + R / 2), or (2k, 2k + 1) when interleaved. The rotary op takes tables
    holding each angle twice, in the rotation's order; they are built here from the caches
    (a concat, small next to X)."""
    check_attrs(cv, attrs, ("interleaved", "num_heads", "rotary_embedding_dim"))
    x, cos, sin, positions = inputs[0], inputs[1], inputs[2], optional(inputs, 3)
    dtype = require_dtype(cv, x, FLOATS, "X")
    for t, what in ((cos, "cos_cache"), (sin, "sin_cache")):
        if cv.dtype_of(t) != dtype:
            raise cv.fail(f"{what} has dtype {cv.dtype_of(t)}, X {dtype}")
    rank = len(cv.shape_of(x))
    if rank not in (3, 4):
        raise cv.fail(f"X must be 3-D or 4-D, not {rank}-D")
    layout, x4 = 0, x
    if rank == 3:
        heads = int(attrs.get("num_heads", 0))
        x4 = _heads_apart(cv, x, heads if heads > 0 else None, "X")
        layout = 1
    xd = cv.dims_of(x4)
    head = as_int(xd[3])
    rotated = int(attrs.get("rotary_embedding_dim", 0)) or head
    if head is None or rotated % 2 or rotated > head:
        raise cv.fail(f"rotary_embedding_dim {rotated} must be even and at most the head size "
                      f"{xd[3]}")
    interleaved = bool(attrs.get("interleaved", 0))
    tables = [_rotary_table(cv, node, t, positions, rotated, interleaved) for t in (cos, sin)]
    y = cv.m.call("rotary", cv.tensor(x4), *tables, interleaved, layout,
                  outputs=[(dtype, cv.tensor(x4).shape, cv.is_dynamic(x4))])[0]
    cv.set_dims(y, xd)
    return [reshape_to_dims(cv, y, cv.dims_of(x)) if rank == 3 else y]


def _rotary_table(cv: Any, node: Any, cache: Any, positions: Any, rotated: int,
                  interleaved: bool) -> Value:
    """[B or 1, S, R]: the cache's R / 2 angles per position (at position_ids when given),
    each twice: [a, b, ..., a, b, ...], or [a, a, b, b, ...] interleaved."""
    from .movement import gather
    if positions is not None:
        if len(cv.shape_of(cache)) != 2:
            raise cv.fail("with position_ids, the caches must be 2-D [positions, R / 2]")
        gathered = gather(cv, node, [cache, positions], {"axis": 0})[0]
        cv.set_dims(gathered, list(cv.dims_of(positions)) + [cv.dims_of(cache)[1]])
        cache = gathered
    dims = list(cv.dims_of(cache))
    if len(dims) != 3 or as_int(dims[2]) != rotated // 2:
        raise cv.fail(f"the caches must end in R / 2 = {rotated // 2} values (rotary "
                      f"embedding dim {rotated}), not {dims[-1] if dims else 'nothing'}")
    t = cv.tensor(cache)
    if not interleaved:
        y = cv.m.concat([t, t], -1)
        cv.set_dims(y, dims[:2] + [rotated])
        return y
    pairs = reshape_to_dims(cv, t, dims + [1])
    both = cv.m.concat([pairs, pairs], -1)
    cv.set_dims(both, dims + [2])
    return reshape_to_dims(cv, both, dims[:2] + [rotated])


@lowers(f"{FUSED_DOMAIN}.{FUSED_ROTARY}")
def fused_rotary(cv, node, inputs, attrs):
    """The rotary chain _patterns.fuse_rotary found: one rotary op where x is [B, H, S, D]
    with D even, the slices split its last axis at D / 2, and cos / sin are [1 or B, 1, S, D]
    (or [S, D]) of x's dtype; otherwise the replaced nodes."""
    x, cos, sin = inputs[:3]
    dtype = cv.dtype_of(x)
    xd = list(cv.dims_of(x))
    if dtype not in FLOATS or len(xd) != 4 or as_int(xd[3]) is None or as_int(xd[3]) % 2 or \
            any(cv.dtype_of(t) != dtype for t in (cos, sin)):
        return cv.lower_unfused(node)
    d = as_int(xd[3])
    upper, lower = inputs[3:6], inputs[6:9]
    if not (_ints(upper[0]) == [d // 2] and (_ints(upper[1]) or [0])[0] >= d and
            _ints(lower[0]) == [0] and _ints(lower[1]) == [d // 2] and
            _ints(upper[2]) in ([-1], [3]) and _ints(lower[2]) in ([-1], [3])):
        return cv.lower_unfused(node)
    tables = [_rotary_operand(cv, t, xd) for t in (cos, sin)]
    if None in tables:
        return cv.lower_unfused(node)
    y = cv.m.call("rotary", cv.tensor(x), *tables, False, 0,
                  outputs=[(dtype, cv.tensor(x).shape, cv.is_dynamic(x))])[0]
    cv.set_dims(y, xd)
    return [y]


def _ints(x: Any) -> Optional[List[int]]:
    """A known small integer operand (constant or folded shape arithmetic) as ints."""
    if x is None or isinstance(x, Value):
        return None
    from .._shape_tensor import as_items
    items = [as_int(v) for v in as_items(x).reshape(-1)]
    return None if any(v is None for v in items) else items


def _rotary_operand(cv: Any, table: Any, xd: Sequence[Any]) -> Optional[Value]:
    """cos / sin as the rotary op's [1 or B, S, D] table (a reshape), or None where its sizes
    are not [1 or B, 1, S, D] or [S, D]."""
    dims = list(cv.dims_of(table))
    if len(dims) == 2:
        dims = [1, 1] + dims
    if len(dims) != 4 or as_int(dims[1]) != 1 or not (as_int(dims[0]) == 1 or
                                                       _same(cv, dims[0], xd[0])) or \
            not _same(cv, dims[2], xd[2]) or not _same(cv, dims[3], xd[3]):
        return None
    return reshape_to_dims(cv, cv.tensor(table), [dims[0], dims[2], dims[3]])
