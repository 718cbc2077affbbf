"""Graph rewrites applied before lowering, where one kernel can replace a chain of nodes.

First, duplicates merge: exporters often compute one value twice (the classic exporter
reshapes a linear layer's output once per reader, and rebuilds the same shape vector for
each), and a chain can only be recognised where its input is one value. Then:

- the exact (erf) GELU that exporters write out as five nodes,

      Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt 2)), 1))     or
      Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)     (Div may be Mul by 1 / sqrt 2),

  and the tanh GELU (GPT-2's), the same with Tanh(Mul(Add(x, Mul(Pow(x, 3), 0.044715)),
  sqrt(2 / pi))) in place of the Erf, become one Gelu node (approximate "tanh" for the second);
- SiLU, Mul(x, Sigmoid(x)), becomes one Swish node (alpha 1);
- RMS normalisation over the last axis (Pow, ReduceMean, Add, Sqrt, Reciprocal or Div, Mul)
  becomes one RMSNormalization node;
- hardswish written x * relu6(x + 3) / 6 (Paddle's exports) becomes one HardSwish node;

which the activation fusion can then move into the epilogue of the layer before them. A chain
is rewritten only when each intermediate value has no reader outside it, so nothing else can
observe what disappears. Operands of Mul and Add match in either order.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

import numpy as np

_SQRT2 = math.sqrt(2.0)
# Ops whose result is not a function of their inputs and attributes: never merged.
_NOT_PURE = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
             "Multinomial", "Bernoulli"}


def merge_duplicates(nodes: Sequence[Any], keep: Set[str]) -> List[Any]:
    """`nodes` with every node that repeats an earlier one (same op, inputs and attributes)
    dropped and its readers reading the earlier one's outputs. Nodes with subgraphs stay, and so
    do nodes with an output in `keep` (graph outputs, values read inside subgraphs). Nodes
    whose inputs change are copies; the caller's nodes are not modified."""
    rename: Dict[str, str] = {}
    seen: Dict[Any, Any] = {}
    merged = []
    for node in nodes:
        inputs = [rename.get(name, name) for name in node.input]
        if inputs != list(node.input):
            copy = type(node)()
            copy.CopyFrom(node)
            del copy.input[:]
            copy.input.extend(inputs)
            node = copy
        pure = node.op_type not in _NOT_PURE and not any(
            a.HasField("g") or len(a.graphs) for a in node.attribute)
        key = (node.domain, node.op_type, tuple(inputs),
               tuple(a.SerializeToString() for a in node.attribute)) if pure else None
        first = seen.get(key) if key is not None else None
        if first is not None and len(first.output) == len(node.output) and \
                not any(out in keep for out in node.output):
            for out, earlier in zip(node.output, first.output):
                if out:
                    rename[out] = earlier
            continue
        if key is not None:
            seen[key] = node
        merged.append(node)
    return merged


class _Graph:
    """Producers, readers and constants of a node list, for the matchers below."""

    def __init__(self, nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
                 consumers: Dict[str, int]):
        self.constant = constant
        self.consumers = consumers
        self.producer = {out: n for n in nodes for out in n.output if out}
        self.readers: Dict[str, List[Any]] = {}
        for n in nodes:
            for name in n.input:
                self.readers.setdefault(name, []).append(n)

    def near(self, name: str, target: float) -> bool:
        """name is a one-element numeric constant within 1e-6 (relative) of target."""
        value = self.constant(name)
        if value is None or value.size != 1 or value.dtype.kind not in "fiu":
            return False
        return abs(float(value.reshape(())) - target) <= 1e-6 * abs(target)

    def only_reader(self, name: str) -> Optional[Any]:
        found = self.readers.get(name, [])
        return found[0] if self.consumers.get(name, 0) == 1 and len(found) == 1 else None

    def sole_producer(self, name: str, op_type: str) -> Optional[Any]:
        """The op_type node producing name, when name has no other reader."""
        node = self.producer.get(name)
        if node is None or node.op_type != op_type or self.consumers.get(name, 0) != 1:
            return None
        return node

    @staticmethod
    def other_input(node: Any, name: str) -> Optional[str]:
        """The other operand of a two-input Mul or Add reading name."""
        if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
            return None
        if node.input[0] == name:
            return node.input[1]
        return node.input[0] if node.input[1] == name else None

    def scaled(self, node: Any, factor: float) -> Optional[str]:
        """x of Mul(x, factor) (either order), else None."""
        if node is None or node.op_type != "Mul" or len(node.input) != 2:
            return None
        a, b = node.input
        return a if self.near(b, factor) else b if self.near(a, factor) else None


def _erf_head(g: _Graph, erf: Any):
    """(x, the head's nodes) of Erf(Div(x, sqrt 2)) or Erf(Mul(x, 1 / sqrt 2))."""
    scale = g.sole_producer(erf.input[0], "Div") or g.sole_producer(erf.input[0], "Mul")
    if scale is None or len(scale.input) != 2:
        return None
    if scale.op_type == "Div":
        x = scale.input[0] if g.near(scale.input[1], _SQRT2) else None
    else:
        x = g.scaled(scale, 1 / _SQRT2)
    return (x, [scale]) if x is not None else None


def _tanh_head(g: _Graph, tanh: Any):
    """(x, the head's nodes) of Tanh(Mul(Add(x, Mul(Pow(x, 3), 0.044715)), sqrt(2 / pi)))."""
    outer = g.sole_producer(tanh.input[0], "Mul")
    inner = g.scaled(outer, math.sqrt(2 / math.pi))
    add = g.sole_producer(inner, "Add") if inner else None
    if add is None or len(add.input) != 2:
        return None
    for x, cubic_name in (add.input, add.input[::-1]):
        cubic = g.sole_producer(cubic_name, "Mul")
        cube = g.sole_producer(g.scaled(cubic, 0.044715) or "", "Pow")
        if cube is not None and list(cube.input[:1]) == [x] and g.near(cube.input[1], 3.0):
            return x, [outer, add, cubic, cube]
    return None


def fuse_gelu(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
              consumers: Dict[str, int], make_node: Callable[..., Any]) -> List[Any]:
    """`nodes` with every erf or tanh GELU chain replaced by a Gelu node at the chain's last
    node. constant(name) gives the value of an initializer or Constant output (None
    otherwise); consumers counts the readers of each value name (graph outputs included)."""
    g = _Graph(nodes, constant, consumers)
    removed, replaced = set(), {}
    for core in nodes:
        if core.op_type not in ("Erf", "Tanh") or len(core.input) != 1:
            continue
        head = (_erf_head if core.op_type == "Erf" else _tanh_head)(g, core)
        if head is None or constant(head[0]) is not None:  # a constant is folded anyway
            continue
        x, head_nodes = head
        add = g.only_reader(core.output[0])
        if add is None or not g.near(g.other_input(add, core.output[0]) or "", 1.0):
            continue
        outer = g.only_reader(add.output[0])
        partner = g.other_input(outer, add.output[0]) if outer is not None else None
        if outer is None or outer.op_type != "Mul" or partner is None:
            continue
        half = g.producer.get(partner)
        if half is not None and half.op_type == "Mul" and \
                g.near(g.other_input(half, x) or "", 0.5) and g.only_reader(partner) is outer:
            chain, last = head_nodes + [core, add, half], outer  # (0.5 * x) * (1 + erf)
        elif partner == x:
            last = g.only_reader(outer.output[0])                # (x * (1 + erf)) * 0.5
            if last is None or not g.near(g.other_input(last, outer.output[0]) or "", 0.5):
                continue
            chain = head_nodes + [core, add, outer]
        else:
            continue
        if any(id(n) in removed for n in chain + [last]):
            continue
        removed.update(id(n) for n in chain)
        approximate = "tanh" if core.op_type == "Tanh" else "none"
        replaced[id(last)] = make_node("Gelu", [x], [last.output[0]], name=last.name or "gelu",
                                       approximate=approximate)
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]


def fuse_rms_norm(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
                  consumers: Dict[str, int], make_node: Callable[..., Any]) -> List[Any]:
    """`nodes` with every RMS normalisation over the last axis, as Llama and T5 export it,

        Mul(x, Reciprocal(Sqrt(Add(ReduceMean(Pow(x, 2), [-1], keepdims), eps))))
        (or Div(1, Sqrt(...)) for the Reciprocal),

    replaced by an RMSNormalization node without a scale (the Mul by the weight that follows
    folds into it while lowering, _fusion.py)."""
    g = _Graph(nodes, constant, consumers)
    removed, replaced = set(), {}
    for mean in nodes:
        if mean.op_type != "ReduceMean" or not _over_last_axis(g, mean):
            continue
        square = g.sole_producer(mean.input[0], "Pow")
        if square is None or not g.near(square.input[1], 2.0):
            continue
        x = square.input[0]
        add = g.only_reader(mean.output[0])
        eps = g.other_input(add, mean.output[0]) if add is not None else None
        value = constant(eps) if eps else None
        if add is None or add.op_type != "Add" or value is None or value.size != 1:
            continue
        sqrt = g.only_reader(add.output[0])
        inverse = g.only_reader(sqrt.output[0]) if sqrt and sqrt.op_type == "Sqrt" else None
        if inverse is None or not (inverse.op_type == "Reciprocal" or (
                inverse.op_type == "Div" and g.near(inverse.input[0], 1.0) and
                list(inverse.input[1:]) == [sqrt.output[0]])):
            continue
        mul = g.only_reader(inverse.output[0])
        if mul is None or mul.op_type != "Mul" or g.other_input(mul, inverse.output[0]) != x:
            continue
        chain = [square, mean, add, sqrt, inverse]
        if any(id(n) in removed for n in chain + [mul]) or constant(x) is not None:
            continue
        removed.update(id(n) for n in chain)
        replaced[id(mul)] = make_node("RMSNormalization", [x], [mul.output[0]],
                                      name=mul.name or "rms_norm", axis=-1,
                                      epsilon=float(value.reshape(())))
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]


def _over_last_axis(g: _Graph, mean: Any) -> bool:
    """A ReduceMean over axis -1 alone (as an attribute or, from opset 18, an input), keeping
    the dimension."""
    attrs = {a.name: a for a in mean.attribute}
    if "keepdims" in attrs and attrs["keepdims"].i != 1:
        return False
    if "axes" in attrs:
        axes = list(attrs["axes"].ints)
    elif len(mean.input) > 1 and mean.input[1]:
        value = g.constant(mean.input[1])
        axes = [] if value is None else [int(a) for a in value.reshape(-1)]
    else:
        return False
    return axes == [-1]


def fuse_hard_swish(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
                    consumers: Dict[str, int], make_node: Callable[..., Any]) -> List[Any]:
    """`nodes` with every x * relu6(x + 3) / 6 written out, Div(Mul(x, Clip(Add(x, 3), 0, 6)),
    6) (or the Mul by 1 / 6), as Paddle exports MobileNetV3 and PP-LCNet, replaced by one
    HardSwish node."""
    g = _Graph(nodes, constant, consumers)
    removed, replaced = set(), {}
    for clip in nodes:
        if clip.op_type != "Clip" or not _clips_to(g, clip, 0.0, 6.0):
            continue
        add = g.sole_producer(clip.input[0], "Add")
        if add is None:
            continue
        x = g.other_input(add, next((i for i in add.input if g.near(i, 3.0)), ""))
        mul = g.only_reader(clip.output[0])
        if x is None or mul is None or mul.op_type != "Mul" or \
                g.other_input(mul, clip.output[0]) != x:
            continue
        last = g.only_reader(mul.output[0])
        if last is None or not (
                (last.op_type == "Div" and list(last.input[:1]) == [mul.output[0]] and
                 g.near(last.input[1], 6.0)) or
                g.near(g.other_input(last, mul.output[0]) or "", 1 / 6) and last.op_type == "Mul"):
            continue
        chain = [add, clip, mul]
        if any(id(n) in removed for n in chain + [last]) or constant(x) is not None:
            continue
        removed.update(id(n) for n in chain)
        replaced[id(last)] = make_node("HardSwish", [x], [last.output[0]],
                                       name=last.name or "hard_swish")
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]


def _clips_to(g: _Graph, clip: Any, lo: float, hi: float) -> bool:
    """A Clip to [lo, hi]: bounds as inputs (opset 11 on) or attributes."""
    if len(clip.input) >= 3 and clip.input[1] and clip.input[2]:
        return g.near(clip.input[1], lo) and g.near(clip.input[2], hi)  # near(0): exactly 0
    attrs = {a.name: a.f for a in clip.attribute}
    return attrs.get("min") == lo and attrs.get("max") == hi


def fuse_silu(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
              consumers: Dict[str, int], make_node: Callable[..., Any]) -> List[Any]:
    """`nodes` with every Mul(x, Sigmoid(x)) replaced by Swish(x) (alpha 1) at the Mul."""
    g = _Graph(nodes, constant, consumers)
    removed, replaced = set(), {}
    for sigmoid in nodes:
        if sigmoid.op_type != "Sigmoid" or len(sigmoid.input) != 1:
            continue
        x = sigmoid.input[0]
        mul = g.only_reader(sigmoid.output[0])
        if mul is None or g.other_input(mul, sigmoid.output[0]) != x or mul.op_type != "Mul" \
                or constant(x) is not None or id(mul) in removed:
            continue
        removed.add(id(sigmoid))
        replaced[id(mul)] = make_node("Swish", [x], [mul.output[0]], name=mul.name or "silu")
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]


# The op type and domain of the node fuse_attention writes: the importer's own, lowered by
# _lowerings/attention.py, which falls back to the replaced nodes where the runtime op cannot
# take the shapes it finds.
FUSED_DOMAIN = "runtime_py"
FUSED_ATTENTION = "FusedAttention"


def fuse_attention(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
                   consumers: Dict[str, int], make_node: Callable[..., Any],
                   originals: Dict[str, List[Any]]) -> List[Any]:
    """`nodes` with every scaled dot-product attention as the exporters write it out,

        MatMul(Softmax(Add(scaled(MatMul(scaled(Q), scaled(K^T))), mask), axis), V)

    (scaled(x): x, Mul(x, c) or Div(x, c) with c a one-element constant; the Add optional;
    after the Softmax optionally Where(IsNaN(p), 0, p), which zeroes rows that see no key)
    replaced by one FusedAttention node with inputs Q, K^T, V and the mask (or ""), and the
    product of the constants as its `scale` and the Softmax's axis (the lowering falls back
    unless it is the last); where K^T is Transpose(K, perm 0, 1, 3, 2), K
    itself, with key_transposed 0 (so that a KV cache reaches the node untouched); and where K
    and V then come from Llama's repeat_kv (Reshape(Expand(Unsqueeze(x, 2)))), which repeats
    each kv head for its group of query heads, x itself, with kv_repeated 1: the attention op
    reads grouped heads as they are. originals[its output] gets the nodes it replaces,
    in graph order."""
    g = _Graph(nodes, constant, consumers)
    removed: Set[int] = set()
    replaced: Dict[int, Any] = {}
    order = {id(n): i for i, n in enumerate(nodes)}
    for softmax in nodes:
        if softmax.op_type != "Softmax" or _softmax_axis(softmax) is None:
            continue
        tail = _attention_tail(g, softmax)
        head = _attention_head(g, softmax.input[0])
        if tail is None or head is None:
            continue
        q, key, transposed, scale, head_nodes, mask = head
        (v, pv), tail_nodes = tail
        repeated, kv_repeated = [], False
        if not transposed:  # Llama's repeat_kv: K and V went through it, or neither did
            k_source, k_nodes = _repeated_kv(g, key)
            v_source, v_nodes = _repeated_kv(g, v)
            if k_nodes and v_nodes:
                key, v = k_source, v_source
                repeated = [n for n in k_nodes + v_nodes if n is not None]
                kv_repeated = True
        chain = head_nodes + [softmax] + tail_nodes + repeated
        if any(id(n) in removed for n in chain + [pv]) or constant(q) is not None:
            continue
        removed.update(id(n) for n in chain)
        fused = make_node(FUSED_ATTENTION, [q, key, v, mask or ""], [pv.output[0]],
                          name=pv.name or "attention", domain=FUSED_DOMAIN, scale=float(scale),
                          key_transposed=transposed, kv_repeated=int(kv_repeated),
                          softmax_axis=_softmax_axis(softmax))
        replaced[id(pv)] = fused
        originals[pv.output[0]] = sorted(chain + [pv], key=lambda n: order[id(n)])
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]


def _softmax_axis(softmax: Any) -> Optional[int]:
    """The Softmax's axis as written (the default is -1 only from opset 13; exports write it
    out), which the lowering checks is the last; None when absent."""
    return next((a.i for a in softmax.attribute if a.name == "axis"), None)


def _scaled(g: _Graph, name: str):
    """(x, factor, node) for name = Mul(x, c) or Div(x, c) with c a one-element constant read
    by nothing else; else (name, 1.0, None)."""
    node = g.sole_producer(name, "Mul") or g.sole_producer(name, "Div")
    if node is not None and len(node.input) == 2:
        for x, c in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
            value = g.constant(c)
            if value is not None and value.size == 1 and value.dtype.kind == "f" and \
                    g.constant(x) is None and (node.op_type == "Mul" or c == node.input[1]):
                factor = float(value.reshape(()))
                if node.op_type == "Div":
                    factor = 1.0 / factor if factor != 0 else float("nan")
                if math.isfinite(factor):
                    return x, factor, node
    return name, 1.0, None


def _attention_head(g: _Graph, scores: str):
    """(Q, K^T or K, whether K^T, scale, nodes, mask) of the scores: scaled(MatMul(scaled Q, scaled K^T)), with
    a mask added to them or not."""
    mask = None
    nodes: List[Any] = []
    add = g.sole_producer(scores, "Add")
    if add is not None and len(add.input) == 2:
        for s, m in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
            inner, _, _ = _scaled(g, s)
            if g.sole_producer(inner, "MatMul") is not None:
                scores, mask = s, m
                nodes.append(add)
                break
    scores, factor, node = _scaled(g, scores)
    nodes += [node] if node is not None else []
    qk = g.sole_producer(scores, "MatMul")
    if qk is None:
        return None
    q, q_factor, q_node = _scaled(g, qk.input[0])
    kt, k_factor, k_node = _scaled(g, qk.input[1])
    nodes += [n for n in (qk, q_node, k_node) if n is not None]
    key, transposed = kt, 1
    swap = g.sole_producer(kt, "Transpose")
    if swap is not None and [list(a.ints) for a in swap.attribute if a.name == "perm"] == \
            [[0, 1, 3, 2]]:
        key, transposed = swap.input[0], 0
        nodes.append(swap)
    return q, key, transposed, factor * q_factor * k_factor, nodes, mask


def _repeated_kv(g: _Graph, name: str):
    """(x, nodes) for name = Reshape(Expand(Unsqueeze(x, axes=[2]), shape), shape'), each
    read by nothing else; else (name, []). Where Shape nodes also read the result (for its
    sizes), the chain stays for them and nodes is [None] (nothing to remove)."""
    readers = g.readers.get(name, [])
    sized = [n for n in readers if n.op_type == "Shape"]
    reshape = g.producer.get(name)
    if reshape is None or reshape.op_type != "Reshape" or \
            g.consumers.get(name, 0) != len(readers) or len(readers) - len(sized) != 1:
        return name, []
    expand = g.sole_producer(reshape.input[0], "Expand")
    unsqueeze = g.sole_producer(expand.input[0], "Unsqueeze") if expand is not None else None
    if unsqueeze is None:
        return name, []
    axes = next((list(a.ints) for a in unsqueeze.attribute if a.name == "axes"), None)
    if axes is None and len(unsqueeze.input) > 1:
        value = g.constant(unsqueeze.input[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    if axes != [2]:
        return name, []
    return unsqueeze.input[0], [None] if sized else [unsqueeze, expand, reshape]


def _attention_tail(g: _Graph, softmax: Any):
    """((V, the final MatMul), nodes between) after the softmax: MatMul(p, V), or
    MatMul(Where(IsNaN(p), 0, p), V)."""
    p = softmax.output[0]
    readers = g.readers.get(p, [])
    if g.consumers.get(p, 0) == 1 and len(readers) == 1 and readers[0].op_type == "MatMul" and \
            readers[0].input[0] == p:
        return (readers[0].input[1], readers[0]), []
    isnan = next((n for n in readers if n.op_type == "IsNaN"), None)
    where = g.only_reader(isnan.output[0]) if isnan is not None else None
    if where is None or where.op_type != "Where" or list(where.input) != \
            [isnan.output[0], where.input[1], p] or not g.near(where.input[1], 0.0) or \
            g.consumers.get(p, 0) != 2 or len(readers) != 2:
        return None
    pv = g.only_reader(where.output[0])
    if pv is None or pv.op_type != "MatMul" or pv.input[0] != where.output[0]:
        return None
    return (pv.input[1], pv), [isnan, where]


FUSED_ROTARY = "FusedRotary"


def fuse_rotary(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
                consumers: Dict[str, int], make_node: Callable[..., Any],
                originals: Dict[str, List[Any]]) -> List[Any]:
    """`nodes` with every rotary embedding as Llama's export writes it,

        Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, h:)), Slice(x, :h), axis=-1), sin))

    (operands of Mul and Add in either order) replaced by one FusedRotary node with inputs x,
    cos, sin and the two Slices' starts, ends and axes (their bounds are often computed from
    x's shape, so the lowering checks them: h must be half of x's last size). originals[its
    output] gets the nodes it replaces."""
    g = _Graph(nodes, constant, consumers)
    removed: Set[int] = set()
    replaced: Dict[int, Any] = {}
    order = {id(n): i for i, n in enumerate(nodes)}
    for concat in nodes:
        if concat.op_type != "Concat" or len(concat.input) != 2 or \
                next((a.i for a in concat.attribute if a.name == "axis"), None) not in (-1, 3):
            continue
        neg = g.sole_producer(concat.input[0], "Neg")
        upper = g.sole_producer(neg.input[0], "Slice") if neg is not None else None
        lower = g.sole_producer(concat.input[1], "Slice")
        if upper is None or lower is None or upper.input[0] != lower.input[0] or \
                len(upper.input) < 4 or len(lower.input) < 4 or \
                any(len(s.input) > 4 and s.input[4] and not g.near(s.input[4], 1.0)
                    for s in (upper, lower)):
            continue
        x = upper.input[0]
        rotated_mul = g.only_reader(concat.output[0])
        sin = g.other_input(rotated_mul, concat.output[0]) if rotated_mul is not None else None
        add = g.only_reader(rotated_mul.output[0]) if sin is not None else None
        if add is None or add.op_type != "Add" or rotated_mul.op_type != "Mul":
            continue
        plain_mul = g.producer.get(g.other_input(add, rotated_mul.output[0]) or "")
        cos = g.other_input(plain_mul, x) if plain_mul is not None else None
        if cos is None or plain_mul.op_type != "Mul" or \
                g.consumers.get(plain_mul.output[0], 0) != 1 or constant(x) is not None:
            continue
        chain = [upper, lower, neg, concat, rotated_mul, plain_mul]
        if any(id(n) in removed for n in chain + [add]):
            continue
        removed.update(id(n) for n in chain)
        bounds = list(upper.input[1:4]) + list(lower.input[1:4])
        replaced[id(add)] = make_node(FUSED_ROTARY, [x, cos, sin] + bounds, [add.output[0]],
                                      name=add.name or "rotary", domain=FUSED_DOMAIN)
        originals[add.output[0]] = sorted(chain + [add], key=lambda n: order[id(n)])
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]
