"""The table of ONNX op lowerings and the error every unsupported construct raises.

A lowering turns one ONNX node into builder calls:

    @lowers("Relu")
    def relu(cv, node, inputs, attrs):
        return [cv.m.relu(cv.tensor(inputs[0]))]

`inputs` holds one Operand per node input (None for an omitted optional input): a numpy array
when the value is known at conversion time, else a builder Value. A lowering returns one Operand
per node output; returning numpy arrays keeps constants foldable downstream.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from ..errors import Unsupported

Lowering = Callable[..., List[Any]]

LOWERINGS: Dict[str, Lowering] = {}


class ConversionError(Unsupported):
    """The model uses an op, attribute or dtype the importer or runtime cannot handle; the
    message names the node, its op type and what is missing."""


def lowers(*op_types: str) -> Callable[[Lowering], Lowering]:
    """Register a lowering for one or more ONNX op types (default domain)."""

    def register(fn: Lowering) -> Lowering:
        for op in op_types:
            LOWERINGS[op] = fn
        return fn

    return register


def supported_ops() -> List[str]:
    """ONNX op types the importer can lower (constant folding handles more)."""
    from . import _lowerings  # noqa: F401  (registers everything)

    return sorted(LOWERINGS)
