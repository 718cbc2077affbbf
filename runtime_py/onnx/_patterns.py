"""Graph rewrites applied before lowering, where one kernel can replace a chain of nodes.

The exact (erf) GELU that exporters write out as five nodes,

    Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt 2)), 1))     or
    Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)     (Div may be Mul by 1 / sqrt 2),

becomes one Gelu node, which the activation fusion can then move into the epilogue of the
linear layer before it. A chain is rewritten only when each intermediate value has no reader
outside it, so nothing else can observe what disappears.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

_SQRT2 = math.sqrt(2.0)


def fuse_erf_gelu(nodes: Sequence[Any], constant: Callable[[str], Optional[np.ndarray]],
                  consumers: Dict[str, int], make_node: Callable[..., Any]) -> List[Any]:
    """`nodes` with every erf-GELU chain replaced by a Gelu node at the chain's last node.

    constant(name) gives the value of an initializer or Constant output (None otherwise);
    consumers counts the readers of each value name (graph outputs included)."""
    producer = {out: n for n in nodes for out in n.output if out}
    readers: Dict[str, List[Any]] = {}
    for n in nodes:
        for name in n.input:
            readers.setdefault(name, []).append(n)

    def scalar(name: str) -> Optional[float]:
        value = constant(name)
        if value is None or value.size != 1 or value.dtype.kind != "f":
            return None
        return float(value.reshape(()))

    def near(name: str, target: float) -> bool:
        value = scalar(name)
        return value is not None and abs(value - target) <= 1e-6 * abs(target)

    def only_reader(name: str) -> Optional[Any]:
        found = readers.get(name, [])
        return found[0] if consumers.get(name, 0) == 1 and len(found) == 1 else None

    def other_input(node: Any, name: str) -> Optional[str]:
        if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
            return None
        if node.input[0] == name:
            return node.input[1]
        return node.input[0] if node.input[1] == name else None

    removed, replaced = set(), {}
    for erf in nodes:
        if erf.op_type != "Erf" or len(erf.input) != 1:
            continue
        scale = producer.get(erf.input[0])
        if scale is None or only_reader(erf.input[0]) is not erf:
            continue
        x = _scaled_input(scale, near)
        if x is None:
            continue
        if constant(x) is not None:
            continue  # folded anyway
        add = only_reader(erf.output[0])
        if add is None or not near(other_input(add, erf.output[0]) or "", 1.0):
            continue
        outer = only_reader(add.output[0])
        partner = other_input(outer, add.output[0]) if outer is not None else None
        if outer is None or outer.op_type != "Mul" or partner is None:
            continue
        half = producer.get(partner)
        if half is not None and half.op_type == "Mul" and near(other_input(half, x) or "", 0.5) \
                and only_reader(partner) is outer:
            chain, last = [scale, erf, add, half], outer  # (0.5 * x) * (1 + erf)
        elif partner == x:
            last = only_reader(outer.output[0])            # (x * (1 + erf)) * 0.5
            if last is None or not near(other_input(last, outer.output[0]) or "", 0.5):
                continue
            chain = [scale, erf, add, outer]
        else:
            continue
        if any(id(n) in removed for n in chain + [last]):
            continue
        removed.update(id(n) for n in chain)
        replaced[id(last)] = make_node("Gelu", [x], [last.output[0]], name=last.name or "gelu")
    return [replaced.get(id(n), n) for n in nodes if id(n) not in removed]


def _scaled_input(scale: Any, near: Callable[[str, float], bool]) -> Optional[str]:
    """x of Div(x, sqrt 2) or Mul(x, 1 / sqrt 2) (either operand order), else None."""
    if len(scale.input) != 2:
        return None
    a, b = scale.input
    if scale.op_type == "Div":
        return a if near(b, _SQRT2) else None
    if scale.op_type == "Mul":
        return a if near(b, 1 / _SQRT2) else b if near(a, 1 / _SQRT2) else None
    return None
