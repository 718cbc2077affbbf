"""A decoder exported with its KV cache as inputs and outputs, converted into a program that
keeps the cache itself (convert(..., kv_cache={"max_length": M})).

Exporters write each layer's cache as a graph input `past` and a graph output `present` =
Concat(past, new, axis=-2) over the sequence, so that the caller copies the whole cache in and
out at every token. Here each such pair becomes an attribute of [batch, heads, M, head size]
(state that persists across executes) and one int64 attribute, `kv_cache_length`, holds how many
positions are filled. At every execute the new keys and values are written in place at that
length (copy_into), the attention reads the attribute with the filled length as its kv_lengths
(so the positions past it never count), and the length grows by the new tokens' count. Each
generated token thus costs one execute with no copy of the cache; `past` leaves the inputs and
`present` the outputs. The past length the graph's own shape code reads (Shape(past)[2])
is the attribute's value. Write 0 into `kv_cache_length` to start a new sequence.

Pairs are found by structure: a Concat whose first input is a graph input (directly or
through a one-input Concat) and whose output is a graph output. The cache may only be read
by that Concat, by Shape, and (the present) by an attention the importer fuses; anything else
is refused by name.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..compiler import Value
from ..errors import InvalidArgument
from ._registry import ConversionError

LENGTH = "kv_cache_length"


class PastCache:
    """A cache input as the graph sees it: [B, H, P, D], P the filled length."""

    def __init__(self, name: str, state: Value, dims: Sequence[Any]) -> None:
        self.name, self.state, self.dims = name, state, tuple(dims)
        self.shape = state.shape
        self.dtype = state.dtype


class PresentCache:
    """A present output as the graph sees it: the attribute's first P + S positions, which
    `lengths` (int64 [1], computed at run) counts."""

    def __init__(self, past: PastCache, dims: Sequence[Any], lengths: Value) -> None:
        self.name, self.state, self.dims, self.lengths = past.name, past.state, tuple(dims), lengths
        self.shape = past.state.shape
        self.dtype = past.state.dtype


class CacheSizes:
    """What the graph computes from a present cache only for its sizes (Llama's repeat_kv,
    Unsqueeze / Expand / Reshape, read by Shape): the sizes, no data."""

    def __init__(self, name: str, dims: Sequence[Any], dtype: str) -> None:
        self.name, self.dims, self.dtype = name, tuple(dims), dtype
        self.shape = tuple(0 for _ in dims)


def _through_identity_concats(name: str, producer: Mapping[str, Any]) -> str:
    node = producer.get(name)
    while node is not None and node.op_type == "Concat" and len(node.input) == 1:
        name = node.input[0]
        node = producer.get(name)
    return name


def find_pairs(graph: Any) -> Dict[str, str]:
    """{past input: present output} of the cache Concats (see the module docstring)."""
    inputs = {i.name for i in graph.input} - {i.name for i in graph.initializer}
    outputs = {o.name for o in graph.output}
    producer = {out: n for n in graph.node for out in n.output}
    pairs = {}
    for node in graph.node:
        if node.op_type == "Concat" and len(node.input) == 2 and node.output[0] in outputs:
            past = _through_identity_concats(node.input[0], producer)
            if past in inputs:
                pairs[past] = node.output[0]
    return pairs


class KVCache:
    """The stateful conversion's part of a Converter."""

    def __init__(self, cv: Any, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - {"max_length", "batch"})
        if unknown:
            raise InvalidArgument(f"kv_cache: unknown option(s) {', '.join(unknown)} (it takes "
                                  f"max_length and batch)")
        try:
            self.max_length = int(options["max_length"])
            self.batch = int(options.get("batch", 1))
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument("kv_cache needs max_length (an int > 0), and takes batch "
                                  "(an int > 0, default 1)") from None
        if self.max_length <= 0 or self.batch <= 0:
            raise InvalidArgument(f"kv_cache: max_length {self.max_length} and batch "
                                  f"{self.batch} must be > 0")
        self.cv = cv
        self.pairs = find_pairs(cv.model.graph)
        if not self.pairs:
            raise InvalidArgument("kv_cache: the model has no KV cache to keep: no graph output "
                                  "is a Concat of a graph input (past) and new values")
        self.length: Optional[Value] = None
        self.past_length = None  # the Dim P
        self.new_tokens: Optional[Value] = None  # int64 [1]: S, the first cache write's
        self.total: Optional[Value] = None  # int64 [1]: P + S

    def is_cache(self, name: str) -> bool:
        return name in self.pairs

    def is_present(self, name: str) -> bool:
        return name in self.pairs.values()

    def past_input(self, inp: Any) -> PastCache:
        """The attribute standing for the cache input `inp`, [batch, heads, max_length, D]."""
        cv = self.cv
        dims = list(inp.type.tensor_type.shape.dim)
        if len(dims) != 4 or not all(d.HasField("dim_value") for d in (dims[1], dims[3])):
            raise ConversionError(f"kv_cache: input '{inp.name}' must be [batch, heads, past "
                                  f"length, head size] with heads and head size known")
        from ._convert import onnx_dtype_name
        dtype = onnx_dtype_name(inp.type.tensor_type.elem_type)
        shape = [self.batch, dims[1].dim_value, self.max_length, dims[3].dim_value]
        state = cv.m.attribute(f"kv_cache.{inp.name}", dtype, shape)
        return PastCache(inp.name, state, [self.batch, shape[1], self._past(), shape[3]])

    def _past(self) -> Any:
        """P: a size measured at run on range(0, kv_cache_length)."""
        if self.past_length is None:
            cv = self.cv
            self.length = cv.m.attribute(LENGTH, "int64", [1])
            zero, one = (cv.m.constant(np.array([v], np.int64)) for v in (0, 1))
            filled = cv.m.call("range", zero, self.length, one,
                               outputs=[("int64", [self.max_length], True)])[0]
            self.past_length = cv.space.atom(LENGTH, 0, self.max_length, (filled, 0))
        return self.past_length

    def lower(self, node: Any, inputs: Sequence[Any]) -> Optional[List[Any]]:
        """The node's outputs where it reads the cache; None where it does not."""
        caches = [x for x in inputs if isinstance(x, (PastCache, PresentCache, CacheSizes))]
        if not caches:
            return None
        if node.op_type == "Concat" and len(inputs) == 1:
            return [inputs[0]]
        if node.op_type == "Concat" and isinstance(inputs[0], PastCache) and len(inputs) == 2 \
                and not isinstance(inputs[1], (PastCache, PresentCache)):
            return [self._write(node, inputs[0], inputs[1])]
        if node.op_type in ("Shape", "Size") or (node.domain == "runtime_py"):
            return None  # Shape reads dims only; the fused attention takes the cache
        if node.op_type in ("Unsqueeze", "Expand", "Reshape") and caches[0] is inputs[0]:
            return [self._sizes_only(node, inputs)]
        raise self.cv.fail(f"kv_cache: reads the cache '{caches[0].name}', which only its "
                           f"Concat, Shape and a fused attention may read")

    def _sizes_only(self, node: Any, inputs: Sequence[Any]) -> CacheSizes:
        """The sizes of Unsqueeze / Expand / Reshape of the cache, as their lowerings would
        record them (only Shape may read the result)."""
        from ._lowerings.movement import _shape_dims
        from ._shape_tensor import as_items
        from ._symbolic import broadcast_dims
        cv, x = self.cv, inputs[0]
        dims = list(x.dims)
        if node.op_type == "Unsqueeze":
            axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
            if axes is None:
                axes = [int(a) for a in as_items(inputs[1]).reshape(-1)]
            for a in sorted(a % (len(dims) + len(axes)) for a in axes):
                dims.insert(a, 1)
        elif node.op_type == "Expand":
            dims = list(broadcast_dims(cv.space, [dims, _shape_dims(cv, inputs[1])]))
        else:
            target = list(as_items(inputs[1]).reshape(-1))
            dims = [dims[i] if isinstance(t, (int, np.integer)) and t == 0 else t
                    for i, t in enumerate(target)]
            if any(isinstance(t, (int, np.integer)) and t == -1 for t in dims):
                raise cv.fail("kv_cache: a reshape of the cache with -1 is not supported")
        return CacheSizes(x.name, dims, x.dtype)

    def _write(self, node: Any, past: PastCache, new: Any) -> PresentCache:
        cv = self.cv
        axis = next((a.i for a in node.attribute if a.name == "axis"), None)
        if axis not in (2, -2):
            raise cv.fail(f"kv_cache: concatenates the cache '{past.name}' along axis {axis}, "
                          f"not the sequence (2)")
        nd = list(cv.dims_of(new))
        if len(nd) != 4:
            raise cv.fail(f"kv_cache: the new values for '{past.name}' are not 4-D")
        if self.new_tokens is None:
            from ._shape_tensor import shape_tensor
            self.new_tokens = cv.tensor(shape_tensor(cv.space, [nd[2]], "int64"))
            self.total = cv.m.add(self.length, self.new_tokens)
        new_value = cv.tensor(new)
        if new_value.dtype != past.dtype:
            raise cv.fail(f"kv_cache: new values of dtype {new_value.dtype} for the "
                          f"{past.dtype} cache '{past.name}'")
        cv.m.call("copy_into", new_value, self.length, 2, out=past.state)
        return PresentCache(past, [past.dims[0], past.dims[1], past.dims[2] + nd[2],
                                   past.dims[3]], self.total)

    def finish(self) -> None:
        """After every node: the filled length grows by the new tokens."""
        if self.new_tokens is None:
            raise ConversionError("kv_cache: no cache Concat was lowered")
        self.cv.m.add(self.length, self.new_tokens, out=self.length)
