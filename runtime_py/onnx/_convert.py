"""ONNX graph -> runtime program.

The converter walks the graph in order. Every value is either known at conversion time (an
initializer, a Constant, or the result of a node whose inputs are all known: folded with onnx's
reference evaluator) or a tensor of the program (a builder Value with dtype and shape, upper
bounds when dynamic). Each remaining node is lowered to runtime ops by the lowering registered
for its op type; shapes come from the builder's rules, so a program is fully typed and planned
before it is serialized.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np

from .. import dtypes as _dtypes
from ..compiler import MethodBuilder, ProgramBuilder, Value
from ..errors import Error, InvalidArgument
from ._fusion import try_fuse
from ._kv_cache import CacheSizes, KVCache, PastCache, PresentCache
from ._patterns import (FUSED_DOMAIN, fuse_attention, fuse_gelu, fuse_hard_swish,
                        fuse_rms_norm, fuse_rotary, fuse_silu, merge_duplicates)
from ._registry import LOWERINGS, ConversionError
from ._shape_tensor import SHAPE_AWARE, Materializer, ShapeTensor, evaluate, upper_bounds
from ._symbolic import Size, SymbolSpace
from . import _dims

Operand = Union[np.ndarray, Value]

# Ops whose result is not a function of their inputs alone: never folded.
_NOT_FOLDABLE = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                 "Multinomial", "Bernoulli", "If", "Loop", "Scan"}

# Ops computed in float32 for float16 and bfloat16: their half inputs are cast to float32 before
# the lowering runs and its float32 outputs cast back (Converter._lower).
FLOAT32_COMPUTED = frozenset({
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
    "Cos", "Tan", "Tanh", "Erf", "Sigmoid", "HardSigmoid", "LeakyRelu", "Elu", "Selu", "Gelu",
    "Softplus", "Softsign", "HardSwish", "Mish", "PRelu", "Clip", "IsNaN", "IsInf",
    "LogSoftmax", "Hardmax", "Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Conv", "Softmax",
    "Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
    "Pow", "Mod", "Min", "Max", "Mean", "Sum", "LessOrEqual", "GreaterOrEqual", "Less", "Greater",
    "Where", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
    "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum", "ArgMax", "ArgMin",
    "CumSum", "TopK", "BatchNormalization", "LayerNormalization", "InstanceNormalization",
    "GroupNormalization", "LpNormalization", "ConvTranspose", "Einsum", "RMSNormalization"})
FLOAT32_COMPUTED |= {"LSTM", "GRU", "RNN"}  # recurrent layers (_lowerings/rnn.py)
_HALF = ("float16", "bfloat16")


def _read_in_subgraphs(nodes: Sequence[Any]) -> Set[str]:
    """The value names that nodes inside the subgraphs of `nodes` (If branches, Loop and Scan
    bodies, at any depth) read."""
    names: Set[str] = set()
    for node in nodes:
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                names.update(name for n in sub.node for name in n.input)
                names |= _read_in_subgraphs(sub.node)
    return names


def _onnx():
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError("runtime_py.onnx needs the onnx package: pip install onnx") from e
    return onnx


def onnx_dtype_name(elem_type: int) -> str:
    """Our dtype name for an ONNX TensorProto element type."""
    onnx = _onnx()
    try:
        np_dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError):
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "UNDEFINED"
        raise ConversionError(f"ONNX element type {name} is not supported") from None
    if str(np_dtype) == "bfloat16":
        return "bfloat16"
    try:
        return _dtypes.normalize(np_dtype)
    except InvalidArgument:
        name = onnx.TensorProto.DataType.Name(elem_type)
        raise ConversionError(f"ONNX element type {name} is not supported") from None


class Converter:
    """State of one conversion: the builder, the values by name, the opset."""

    def __init__(self, model: Any, input_shapes: Mapping[str, Sequence[int]],
                 dynamic_bounds: Mapping[str, Any], fuse: bool = True,
                 value_bounds: Optional[Mapping[str, Sequence[float]]] = None,
                 kv_cache: Optional[Mapping[str, Any]] = None) -> None:
        onnx = _onnx()
        self.model = model
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.builder = ProgramBuilder()
        self.m: MethodBuilder = self.builder.method("forward")
        self.env: Dict[str, Optional[Operand]] = {"": None}
        self._materialized: Dict[int, Tuple[Any, Value]] = {}  # id -> (array kept alive, Value)
        self._input_shapes = dict(input_shapes)
        self._dynamic_bounds = dict(dynamic_bounds)
        self._value_bounds = dict(value_bounds or {})
        # The (lowest, highest) element of graph inputs given value_bounds, by id.
        self._value_ranges: Dict[int, Tuple[Value, Tuple[Any, Any]]] = {}
        self.node: Any = None  # the node being lowered, for messages
        self.fuse = fuse
        # Symbolic sizes (_symbolic.py): the dims of dynamic values, by id (value kept alive).
        self.space = SymbolSpace()
        self._dims: Dict[int, Tuple[Value, Tuple[Size, ...]]] = {}
        self._named_sizes: Dict[str, Any] = {}  # ONNX dim_param -> its Dim
        self.materializer = Materializer(self)
        # convert(kv_cache=...): the cache inputs and outputs kept as attributes (_kv_cache.py).
        self.kv = KVCache(self, kv_cache) if kv_cache is not None else None
        graph = model.graph
        self.consumers: Dict[str, int] = {}  # value name -> nodes and graph outputs reading it
        self.producers: Dict[str, Any] = {}  # value name -> its node (after rewrite_patterns)
        # A fused node's first output -> the nodes it replaced (_patterns.fuse_attention).
        self.unfused: Dict[str, List[Any]] = {}
        self._count_consumers(graph)
        self._numpy_helper = onnx.numpy_helper

    def _count_consumers(self, graph: Any, nodes: Optional[Sequence[Any]] = None) -> None:
        """Count the readers of every value name: node inputs and graph outputs, inside
        subgraphs (If branches, Loop and Scan bodies) too, so that no fusion rewrites a value
        that a body also reads. `nodes` replaces graph.node (after a rewrite)."""
        for n in graph.node if nodes is None else nodes:
            for name in n.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    self._count_consumers(sub)
        for out in graph.output:
            self.consumers[out.name] = self.consumers.get(out.name, 0) + 1

    def rewrite_patterns(self, nodes: List[Any]) -> List[Any]:
        """The top-level nodes after the graph rewrites of _patterns.py, with the reader
        counts brought up to date."""
        onnx = _onnx()
        graph = self.model.graph
        initializers = {init.name: init for init in graph.initializer}
        constants = {out: node for node in nodes if node.op_type == "Constant"
                     for out in node.output}

        def constant(name: str) -> Optional[np.ndarray]:
            if name in initializers:
                return self._numpy_helper.to_array(initializers[name])
            node = constants.get(name)
            attr = next((a for a in node.attribute if a.name == "value"), None) if node else None
            return self._numpy_helper.to_array(attr.t) if attr is not None else None

        keep = {out.name for out in graph.output} | _read_in_subgraphs(nodes)
        make_node = onnx.helper.make_node
        steps = [lambda ns: merge_duplicates(ns, keep),
                 lambda ns: fuse_gelu(ns, constant, self.consumers, make_node),
                 lambda ns: fuse_silu(ns, constant, self.consumers, make_node),
                 lambda ns: fuse_rms_norm(ns, constant, self.consumers, make_node),
                 lambda ns: fuse_hard_swish(ns, constant, self.consumers, make_node),
                 lambda ns: fuse_attention(ns, constant, self.consumers, make_node,
                                           self.unfused),
                 lambda ns: fuse_rotary(ns, constant, self.consumers, make_node, self.unfused)]
        for step in steps:
            rewritten = step(nodes)
            if len(rewritten) != len(nodes):
                self.consumers = {}
                self._count_consumers(graph, rewritten)
            nodes = rewritten
        self.producers = {out: n for n in nodes for out in n.output if out}
        return nodes

    # ---- values --------------------------------------------------------------------------

    def operand(self, name: str) -> Optional[Operand]:
        if name not in self.env:
            raise ConversionError(f"{self.where()}: input '{name}' is not produced by any "
                                  f"earlier node, initializer or graph input")
        return self.env[name]

    def tensor(self, x: Operand) -> Value:
        """A program tensor for x, turning a known array into a constant (once)."""
        if isinstance(x, Value):
            return x
        if isinstance(x, (PastCache, PresentCache, CacheSizes)):
            raise self.fail(f"kv_cache: reads the cache '{x.name}' as a tensor; only its "
                            f"Concat, Shape and a fused attention may read it")
        key = id(x)
        if isinstance(x, ShapeTensor):
            if key not in self._materialized:
                from ._lowerings.movement import set_int_bounds

                value = self.materializer.tensor(x)
                bounds = upper_bounds(self.space, x.items.reshape(-1), self.where())
                self._materialized[key] = (x, set_int_bounds(self, value, bounds))
            return self._materialized[key][1]
        if key not in self._materialized:
            # np.array(order='C'), not ascontiguousarray: the latter turns a 0-d array into 1-d.
            self._materialized[key] = (x, self.m.constant(np.array(x, order="C")))
        return self._materialized[key][1]

    def constant_array(self, value: Value) -> Optional[np.ndarray]:
        """The array behind a constant this converter materialized, else None."""
        for array, materialized in self._materialized.values():
            if materialized is value:
                return np.asarray(array)
        return None

    @staticmethod
    def shape_of(x: Operand) -> Tuple[int, ...]:
        return tuple(x.shape)

    @staticmethod
    def dtype_of(x: Operand) -> str:
        if isinstance(x, (Value, ShapeTensor, PastCache, PresentCache, CacheSizes)):
            return x.dtype
        return _dtypes.normalize(np.asarray(x).dtype)

    def dims_of(self, x: Any) -> Tuple[Size, ...]:
        """The sizes of x as ints and symbolic Dims. A dynamic value whose dims no rule
        recorded gets fresh sizes measured on it, bounded by its planned shape."""
        if isinstance(x, (PastCache, PresentCache, CacheSizes)):
            return x.dims
        if not isinstance(x, Value):
            return tuple(int(s) for s in np.shape(x.items if isinstance(x, ShapeTensor) else x))
        if not x.dynamic:
            return tuple(x.shape)
        entry = self._dims.get(id(x))
        if entry is not None and entry[0] is x:
            return entry[1]
        dims = tuple(self.space.atom(f"%{x.index}[{a}]", 0, int(s), (x, a))
                     for a, s in enumerate(x.shape))
        self._dims[id(x)] = (x, dims)
        return dims

    def set_dims(self, value: Any, dims: Sequence[Size]) -> None:
        """Record the symbolic sizes of a dynamic value (a lowering or _dims.py knows them)."""
        if isinstance(value, Value) and value.dynamic and len(dims) == len(value.shape):
            self._dims[id(value)] = (value, tuple(self.space.simplest(d) for d in dims))
            for d in dims:
                self.space.assume_size(d)

    @staticmethod
    def is_dynamic(x: Operand) -> bool:
        return isinstance(x, Value) and x.dynamic

    def where(self) -> str:
        if self.node is None:
            return "graph"
        name = self.node.name or (self.node.output[0] if self.node.output else "?")
        return f"node '{name}' ({self.node.op_type})"

    def fail(self, message: str) -> ConversionError:
        return ConversionError(f"{self.where()}: {message}")

    # ---- graph ---------------------------------------------------------------------------

    def initializer(self, init: Any) -> Any:
        """An initializer as numpy, refused by name when its dims or data are malformed."""
        if any(d < 0 for d in init.dims):
            raise ConversionError(f"initializer '{init.name}' has negative dims "
                                  f"{list(init.dims)}")
        try:
            return self._numpy_helper.to_array(init)
        except (ValueError, TypeError, OverflowError, struct.error) as e:
            raise ConversionError(f"initializer '{init.name}' (dims {list(init.dims)}) cannot "
                                  f"be read: {e}") from None

    def add_inputs(self, graph: Any) -> None:
        for init in graph.initializer:
            self.env[init.name] = self.initializer(init)
        for init in graph.sparse_initializer:
            raise ConversionError(f"sparse initializer '{init.values.name}' is not supported")
        inputs = [inp.name for inp in graph.input if inp.name not in self.env]
        for option, given in (("input_shapes", self._input_shapes),
                              ("dynamic_bounds", self._dynamic_bounds),
                              ("value_bounds", self._value_bounds)):
            unknown = sorted(set(given) - set(inputs))
            if unknown:
                raise InvalidArgument(f"{option} names {', '.join(map(repr, unknown))}, not an "
                                      f"input of the model (its inputs: {', '.join(inputs)})")
        for inp in graph.input:
            if inp.name in self.env:
                continue  # an initializer with a default value: a constant here
            if self.kv is not None and self.kv.is_cache(inp.name):
                self.env[inp.name] = self.kv.past_input(inp)
                continue
            self.env[inp.name] = self._graph_input(inp)
            if inp.name in self._value_bounds:
                self._record_value_bounds(self.env[inp.name], inp.name)

    def _record_value_bounds(self, value: Value, name: str) -> None:
        """value_bounds={name: (lowest, highest)}: every element of the input lies there. It
        bounds the outputs whose sizes the input's contents give (a Reshape's shape, Resize's
        scales, a Pad's pads, ...); an execute whose values make an output larger than planned
        fails in that op."""
        given = self._value_bounds[name]
        try:
            lo, hi = (float(v) for v in given)
        except (TypeError, ValueError):
            raise InvalidArgument(f"value_bounds for input '{name}' must be a pair (lowest, "
                                  f"highest), not {given!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            raise InvalidArgument(f"value_bounds for input '{name}': ({lo:g}, {hi:g}) is not a "
                                  f"finite range with lowest <= highest")
        integer = value.dtype.startswith(("int", "uint"))
        if not integer and not value.dtype.startswith(("float", "bfloat")):
            raise InvalidArgument(f"value_bounds for input '{name}': its dtype {value.dtype} "
                                  f"has no numeric range")
        if integer:
            lo, hi = int(np.ceil(lo)), int(np.floor(hi))
        self._value_ranges[id(value)] = (value, (lo, hi))

    def value_range(self, x: Any) -> Optional[Tuple[Any, Any]]:
        """(lowest, highest) element of x: a known array's own, a graph input's from
        value_bounds, else None."""
        if x is None or isinstance(x, ShapeTensor):
            return None
        if not isinstance(x, Value):
            arr = np.asarray(x)
            if arr.size == 0 or arr.dtype.kind not in "iuf":
                return None
            return arr.min().item(), arr.max().item()
        entry = self._value_ranges.get(id(x))
        return None if entry is None or entry[0] is not x else entry[1]

    def _graph_input(self, inp: Any) -> Value:
        ttype = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise ConversionError(f"graph input '{inp.name}' is not a tensor; only tensor inputs "
                                  f"are supported")
        dtype = onnx_dtype_name(ttype.elem_type)
        dims = list(ttype.shape.dim) if ttype.HasField("shape") else None
        given = self._input_shapes.get(inp.name)
        bounds = self._dynamic_bounds.get(inp.name)
        if given is not None:
            shape = [int(s) for s in given]
        elif dims is not None:
            shape = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
        else:
            shape = None
        if bounds is not None:
            rank = len(shape) if shape is not None else len(bounds) if not isinstance(bounds, dict) else None
            if isinstance(bounds, dict):
                if shape is None:
                    raise InvalidArgument(f"input '{inp.name}' has no rank in the model: give "
                                          f"input_shapes or dynamic_bounds as a full shape")
                maxes = list(shape)
                for axis, bound in bounds.items():
                    if not -len(maxes) <= int(axis) < len(maxes) or int(bound) < 0:
                        raise InvalidArgument(f"dynamic_bounds for input '{inp.name}': axis "
                                              f"{axis} with bound {bound} does not fit its "
                                              f"rank {len(maxes)} (bounds are sizes >= 0)")
                    maxes[int(axis)] = int(bound)
            else:
                maxes = [int(b) for b in bounds]
                if rank is not None and len(maxes) != rank:
                    raise InvalidArgument(f"dynamic_bounds for input '{inp.name}' has rank "
                                          f"{len(maxes)}, the model says {rank}")
            self._check_known(inp.name, maxes, dims)
            if isinstance(bounds, dict):
                dynamic_axes = {int(a) % max(len(maxes), 1) for a in bounds}
            else:
                dynamic_axes = {a for a in range(len(maxes))
                                if dims is None or not dims[a].HasField("dim_value")
                                or dims[a].dim_value != maxes[a]}
            value = self.m.input(inp.name, dtype, maxes, max_shape=maxes,
                                 dynamic_axes=sorted(dynamic_axes))
            self._input_dims(value, inp.name, dims, dynamic_axes)
            return value
        if shape is None:
            raise InvalidArgument(f"input '{inp.name}' has no shape in the model: pass "
                                  f"input_shapes={{'{inp.name}': (...)}} or dynamic_bounds")
        self._check_known(inp.name, shape, dims)
        return self.m.input(inp.name, dtype, shape)

    def _input_dims(self, value: Value, name: str, dims: Optional[Sequence[Any]],
                    dynamic_axes: Any) -> None:
        """Symbolic sizes of a dynamic graph input: one per dynamic axis, shared by the axes
        that the model names alike (its dim_param), so that inputs agreeing on `batch` agree
        here; the other axes keep their fixed size."""
        sizes: List[Size] = []
        for axis, bound in enumerate(value.shape):
            if axis not in dynamic_axes:
                sizes.append(int(bound))
                continue
            param = dims[axis].dim_param if dims is not None and axis < len(dims) else ""
            shared = self._named_sizes.get(param) if param else None
            if shared is not None:
                atom = self.space.atoms[next(iter(shared.terms))[0]]
                atom.hi = min(atom.hi, int(bound))  # one size: within both bounds
                sizes.append(shared)
                continue
            # At least 1: a dynamic axis of length 0 would make `size - 1` and the like
            # undecidable everywhere, for a case no exported model is run with.
            size = self.space.atom(param or f"{name}[{axis}]", 1, int(bound), (value, axis))
            if param:
                self._named_sizes[param] = size
            sizes.append(size)
        self.set_dims(value, sizes)

    @staticmethod
    def _check_known(name: str, shape: Sequence[int], dims: Optional[Sequence[Any]]) -> None:
        elements = 1
        for size in shape:
            elements *= max(size, 1)
        if elements >= 1 << 56:  # no tensor's bytes fit an address space
            raise InvalidArgument(f"input '{name}' has shape {list(shape)}, too large for any "
                                  f"tensor")
        for axis, size in enumerate(shape):
            if size < 0:
                label = ""
                if dims is not None and axis < len(dims) and dims[axis].dim_param:
                    label = f" ('{dims[axis].dim_param}')"
                raise InvalidArgument(
                    f"input '{name}' dimension {axis}{label} has no fixed size: pass "
                    f"input_shapes={{'{name}': (...)}} for a static size or "
                    f"dynamic_bounds={{'{name}': {{{axis}: upper_bound}}}} for a dynamic one")

    def run_nodes(self, nodes: Sequence[Any]) -> None:
        from . import _lowerings  # noqa: F401  (registers every lowering)

        for node in nodes:
            self.node = node
            if node.domain not in ("", "ai.onnx") and not self.is_fused(node):
                raise self.fail(f"domain '{node.domain}' is not supported")
            inputs = [self.operand(name) if name else None for name in node.input]
            attrs = {a.name: _onnx().helper.get_attribute_value(a) for a in node.attribute}
            for name in node.output:
                if name and name in self.env:  # ONNX graphs assign each name once
                    raise self.fail(f"output '{name}' is already defined (by an earlier node, an "
                                    f"input or an initializer)")
            try:
                outputs = self._node_outputs(node, inputs, attrs)
            except (ValueError, TypeError, OverflowError, ArithmeticError, IndexError,
                    struct.error) as e:
                if isinstance(e, Error):
                    raise
                # A shape or value the node's own arithmetic cannot take (an absurd Reshape, a
                # size beyond int64): refused like an unsupported form, naming the node.
                raise self.fail(f"cannot be converted: {e}") from None
            if len(outputs) < len([o for o in node.output if o]):
                raise self.fail(f"produces {len(outputs)} outputs, the node names {len(node.output)}")
            for name, value in zip(node.output, outputs):
                if name:
                    self.env[name] = value
        self.node = None

    def _node_outputs(self, node: Any, inputs: List[Optional[Operand]],
                      attrs: Dict[str, Any]) -> List[Operand]:
        """The node folded (every input known), fused with what follows, or lowered."""
        if self.kv is not None:
            outputs = self.kv.lower(node, inputs)
            if outputs is not None:
                return outputs
        if any(isinstance(x, ShapeTensor) for x in inputs):
            outputs = evaluate(self.space, node.op_type, inputs, attrs)
            if outputs is not None:
                return outputs  # shape arithmetic done on the symbols
            if node.op_type not in SHAPE_AWARE:
                inputs = [self.tensor(x) if isinstance(x, ShapeTensor) else x for x in inputs]
        known = all(x is None or not isinstance(x, (Value, ShapeTensor, PastCache,
                                                   PresentCache, CacheSizes)) for x in inputs)
        if known and node.op_type not in _NOT_FOLDABLE:
            return self._fold(node, inputs)
        outputs = self.fuse and try_fuse(self, node, inputs, attrs)
        if not outputs:
            lowering = LOWERINGS.get(f"{FUSED_DOMAIN}.{node.op_type}" if self.is_fused(node)
                                     else node.op_type)
            if lowering is None:
                raise self.fail("this op type is not supported by the runtime")
            outputs = self._lower(lowering, node, inputs, attrs)
        _dims.infer(self, node, inputs, attrs, outputs)
        return outputs

    def is_fused(self, node: Any) -> bool:
        """node is one that the rewrites of _patterns.py wrote (its own domain)."""
        return node.domain == FUSED_DOMAIN and node.output[0] in self.unfused

    def lower_unfused(self, node: Any) -> List[Operand]:
        """The outputs of a fused node computed by the nodes it replaced, where its lowering
        finds shapes the fused op cannot take."""
        saved = self.node
        self.run_nodes(self.unfused[node.output[0]])
        self.node = saved
        return [self.env.pop(name) for name in node.output]

    def lower_subgraph(self, graph: Any, bindings: Mapping[str, Operand],
                       what: str) -> List[Optional[Operand]]:
        """Lower a subgraph (an If branch, a Loop or Scan body) inline at the current
        position: its inputs are `bindings` (name -> operand), its initializers are known, and
        the names of the enclosing scopes stay visible. Returns the operands of its outputs;
        the enclosing scope is restored afterwards, so the body's names do not leak out.
        `what` ("then_branch", "body") prefixes errors raised inside."""
        if len(graph.sparse_initializer):
            raise self.fail(f"{what} has a sparse initializer; not supported")
        outer_env, outer_node = self.env, self.node
        self.env = dict(outer_env)
        try:
            for init in graph.initializer:
                self.env[init.name] = self.initializer(init)
            self.env.update(bindings)
            self.run_nodes(graph.node)
            self.node = outer_node
            return [self.operand(out.name) for out in graph.output]
        except ConversionError as e:
            self.node = outer_node
            raise ConversionError(f"{self.where()}: in {what}: {e}") from None
        finally:
            self.env, self.node = outer_env, outer_node

    def _lower(self, lowering: Any, node: Any, inputs: List[Optional[Operand]],
               attrs: Dict[str, Any]) -> List[Operand]:
        """Run a lowering; an op of FLOAT32_COMPUTED with float16/bfloat16 inputs runs on
        float32 copies of them, and its float32 results are cast back."""
        half = {self.dtype_of(x) for x in inputs if x is not None} & set(_HALF)
        if node.op_type not in FLOAT32_COMPUTED or not half:
            return lowering(self, node, inputs, attrs)
        if len(half) > 1:
            raise self.fail("mixes float16 and bfloat16 inputs")
        (dtype,) = half
        wide = [self._widen(x) if x is not None and self.dtype_of(x) == dtype else x
                for x in inputs]
        return [self._narrow(y, dtype) for y in lowering(self, node, wide, attrs)]

    def _widen(self, x: Operand) -> Operand:
        if isinstance(x, Value):
            return self.m.cast(x, "float32")
        return np.asarray(x).astype(np.float32)

    def _narrow(self, y: Operand, dtype: str) -> Operand:
        if self.dtype_of(y) != "float32":
            return y  # e.g. IsNaN's bool
        if isinstance(y, Value):
            return self.m.cast(y, dtype)
        if dtype == "bfloat16":
            import ml_dtypes  # installed with onnx, which stores bfloat16 through it

            return np.asarray(y).astype(ml_dtypes.bfloat16)
        return np.asarray(y).astype(dtype)

    def _fold(self, node: Any, inputs: List[Optional[Operand]]) -> List[Operand]:
        """Evaluate a node whose inputs are all known, with onnx's reference evaluator."""
        onnx = _onnx()
        from onnx.reference import ReferenceEvaluator

        feeds, graph_inputs = {}, []
        for name, value in zip(node.input, inputs):
            if name and name not in feeds:
                arr = np.asarray(value)
                feeds[name] = arr
                graph_inputs.append(onnx.helper.make_tensor_value_info(
                    name, onnx.helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
        outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = onnx.helper.make_graph([node], "fold", graph_inputs, outputs)
        model = onnx.helper.make_model(graph, opset_imports=self.model.opset_import)
        try:
            results = ReferenceEvaluator(model).run(None, feeds)
        except Exception as e:  # the reference raises many types; all mean "cannot fold"
            raise self.fail(f"constant folding failed: {type(e).__name__}: {e}") from None
        return [np.asarray(r) for r in results]

    def add_outputs(self, graph: Any) -> None:
        for out in graph.output:
            if self.kv is not None and self.kv.is_present(out.name):
                continue  # kept in its attribute
            value = self.operand(out.name)
            if value is None:
                raise ConversionError(f"graph output '{out.name}' is empty")
            if not isinstance(value, Value) or any(v is value for v, _ in self.m._outputs) \
                    or any(v is value for v, _ in self.m._inputs):
                dims = self.dims_of(value)
                value = self.m.copy(self.tensor(value))  # outputs get memory of their own
                self.set_dims(value, dims)
            if isinstance(value, Value) and value.dynamic:
                value.dynamic_axes = tuple(a for a, d in enumerate(self.dims_of(value))
                                           if not isinstance(d, int))
            self.m.output(value, out.name)


def convert(model_or_path: Any, *, input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            dynamic_bounds: Optional[Mapping[str, Any]] = None, fuse: bool = True,
            bundle_inputs: Optional[Sequence[Any]] = None, external_data: Any = None,
            reference: str = "auto",
            value_bounds: Optional[Mapping[str, Sequence[float]]] = None,
            kv_cache: Optional[Mapping[str, Any]] = None) -> bytes:
    """Convert an ONNX model (ModelProto, path, or serialized bytes) into program bytes.

    input_shapes: concrete shapes for inputs whose sizes the model leaves symbolic.
    dynamic_bounds: upper bounds making an input dynamic, as a full shape or {axis: bound}.
    value_bounds: {input: (lowest, highest)} for inputs whose contents give sizes (a Reshape's
    target shape, Resize's scales or sizes, a Pad's pads, a Range's limits, a OneHot depth,
    ...): every element lies in that range, so the outputs they size get upper bounds. The
    program reads the values at every execute; values that would exceed a planned size fail
    that execute, naming the op.
    kv_cache: {"max_length": M, "batch": B (default 1)} for a decoder exported with its KV
    cache as inputs and outputs: the program keeps the cache in attributes instead, updated in
    place at every execute (_kv_cache.py; the cache inputs and outputs disappear).
    fuse: fold Conv+BatchNormalization and MatMul+Add, apply activations in the epilogue of
    the op before them (see _fusion.py) and pool in the Conv a MaxPool alone reads; False
    keeps every op separate.
    bundle_inputs: test cases to store in the program, each a {input name: array} mapping or
    a sequence of arrays in input order; their expected outputs are computed from the ONNX
    model by `reference`: "onnxruntime", "onnx" (onnx.reference.ReferenceEvaluator) or
    "auto" (onnxruntime when installed). Verify them with Method.verify_bundled or
    `python -m runtime_py verify`.
    external_data: a data file path: the weights are written there (or added to it, when it
    holds another program's weights) instead of into the program; load the program with
    data_files=[external_data].
    Unsupported ops, attributes or dtypes raise ConversionError naming the node.
    """
    model = load_model(model_or_path)
    cv = Converter(model, input_shapes or {}, dynamic_bounds or {}, fuse, value_bounds,
                   kv_cache)
    nodes = list(model.graph.node)
    if fuse:
        nodes = cv.rewrite_patterns(nodes)
    cv.add_inputs(model.graph)
    cv.run_nodes(nodes)
    if cv.kv is not None:
        cv.kv.finish()
    cv.add_outputs(model.graph)
    if fuse:
        cv.m.fuse_conv_max_pool()
        cv.m.fuse_attention_layouts()
    for case in bundle_inputs or ():
        feeds = _case_feeds(cv, case)
        expected = reference_outputs(model, feeds, reference)
        cv.builder.add_bundled_case("forward", [feeds[n] for _, n in cv.m._inputs], expected)
    return cv.builder.to_bytes(external_data=external_data)


def _case_feeds(cv: Converter, case: Any) -> Dict[str, np.ndarray]:
    names = [name for _, name in cv.m._inputs]
    if isinstance(case, Mapping):
        missing = [n for n in names if n not in case]
        unknown = [n for n in case if n not in names]
        if missing or unknown:
            raise InvalidArgument(f"bundle input case: missing inputs {missing}, unknown "
                                  f"inputs {unknown} (the model's inputs: {names})")
        return {n: np.asarray(case[n]) for n in names}
    case = list(case)
    if len(case) != len(names):
        raise InvalidArgument(f"bundle input case has {len(case)} arrays; the model has "
                              f"{len(names)} inputs {names}")
    return {n: np.asarray(a) for n, a in zip(names, case)}


def reference_outputs(model: Any, feeds: Mapping[str, np.ndarray],
                      reference: str = "auto") -> List[np.ndarray]:
    """The model's outputs for `feeds`, computed by onnxruntime or onnx's ReferenceEvaluator
    (never by this runtime: they are what bundled cases are checked against)."""
    if reference not in ("auto", "onnxruntime", "onnx"):
        raise InvalidArgument(f"reference must be 'auto', 'onnxruntime' or 'onnx', not "
                              f"{reference!r}")
    if reference in ("auto", "onnxruntime"):
        try:
            import onnxruntime
        except ImportError:
            if reference == "onnxruntime":
                raise
        else:
            session = onnxruntime.InferenceSession(model.SerializeToString(),
                                                   providers=["CPUExecutionProvider"])
            return [np.asarray(r) for r in session.run(None, dict(feeds))]
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, dict(feeds))]


def load_model(model_or_path: Any) -> Any:
    onnx = _onnx()
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    if isinstance(model_or_path, (bytes, bytearray, memoryview)):
        return onnx.load_model_from_string(bytes(model_or_path))
    if isinstance(model_or_path, (str, os.PathLike)):
        return onnx.load(os.fspath(model_or_path))
    raise InvalidArgument(f"cannot read an ONNX model from {type(model_or_path).__name__}")
