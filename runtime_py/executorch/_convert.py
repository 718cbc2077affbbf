""".pte -> runtime program.

Each execution plan becomes a method. Its values map onto builder values: constant tensors
(constant segment or constant_buffer) become constants, the plan's inputs become method
inputs, mutable buffers (planned tensors read before anything writes them, such as the
targets of `aten::copy_`) become attributes whose contents persist across executions, and
every kernel call is lowered by the function registered for its operator in _aten.py, which
emits runtime ops and binds the call's out tensors. ExecuTorch's memory plan is discarded: our
planner plans the method again. Tensors keep their logical (sizes-order) layout throughout; a
dim order other than the default only says how ExecuTorch laid the bytes out in memory, so
constants stored in another dim order are permuted into logical order, and inputs and outputs
are logical arrays (any strides are accepted when binding).
"""
from __future__ import annotations

import math
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from .. import dtypes as _dtypes
from ..compiler.writer import ARENA, STATE
from ..compiler import MethodBuilder, ProgramBuilder, Value
from . import _program as P
from ._errors import ConversionError, MalformedPte

# Registered lowerings: operator name -> (number of schema arguments, function).
Lowering = Callable[["MethodConverter", List[int], List[int]], None]
LOWERINGS: Dict[str, Tuple[int, Lowering]] = {}

_PACK = {"float32": "f", "float64": "d", "float16": "e", "int8": "b", "int16": "h",
         "int32": "i", "int64": "q", "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
         "bool": "?"}
FLOATS = ("float32", "float64", "float16", "bfloat16")
# Constants built at conversion time (full, arange, ...) above this size are refused.
MAX_GENERATED_BYTES = 1 << 28


def lowers(*names: str, args: int) -> Callable[[Lowering], Lowering]:
    """Register a lowering for ExecuTorch operators ("aten::add.out") that take `args` schema
    arguments before their out tensors."""

    def register(fn: Lowering) -> Lowering:
        for name in names:
            LOWERINGS[name] = (args, fn)
        return fn

    return register


def supported_ops() -> List[str]:
    from . import _aten  # noqa: F401  (registers the lowerings)

    return sorted(LOWERINGS)


def pack_scalar(value: Any, dtype: str) -> bytes:
    """One element of dtype holding value (Python int, float or bool)."""
    if dtype == "bfloat16":  # through float32, whose packing saturates to infinity
        (as_float32,) = struct.unpack("<f", pack_scalar(value, "float32"))
        return struct.pack("<H", _dtypes.bfloat16_bits(as_float32))
    code = _PACK[dtype]
    if code in "fde":
        try:
            return struct.pack("<" + code, float(value))
        except OverflowError:  # beyond the dtype's range: infinity, as a C conversion gives
            return struct.pack("<" + code, math.inf if value > 0 else -math.inf)
    if code == "?":
        return struct.pack("<?", bool(value))
    bits = _dtypes.itemsize(dtype) * 8
    v = int(value)
    if code.isupper():
        v &= (1 << bits) - 1  # wrap, as a C conversion does
    else:
        v = (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return struct.pack("<" + code, v)


def _permute_bytes(raw: bytes, sizes: Sequence[int], dim_order: Sequence[int],
                   itemsize: int) -> bytes:
    """Bytes of a tensor stored dense in `dim_order`, rewritten in logical (row-major) order."""
    rank = len(sizes)
    # Element strides of the stored layout, by logical dimension.
    strides = [0] * rank
    step = 1
    for d in reversed(dim_order):
        strides[d] = step
        step *= sizes[d]
    out = bytearray(len(raw))
    index = [0] * rank
    n = len(raw) // itemsize
    for i in range(n):
        src = sum(index[d] * strides[d] for d in range(rank)) * itemsize
        out[i * itemsize:(i + 1) * itemsize] = raw[src:src + itemsize]
        for d in range(rank - 1, -1, -1):
            index[d] += 1
            if index[d] < sizes[d]:
                break
            index[d] = 0
    return bytes(out)


class MethodConverter:
    """State of one plan's conversion: the method builder and ET value -> builder value."""

    def __init__(self, pte: P.PteProgram, plan: P.Plan, builder: ProgramBuilder) -> None:
        self.pte, self.plan = pte, plan
        self.m: MethodBuilder = builder.method(plan.name)
        self.env: Dict[int, Value] = {}
        self.pc = -1
        self.op = ""
        self.state: Set[int] = set()  # ET values that are attributes (mutable buffers)
        # Results emitted only when something reads them: value -> function emitting it.
        self.lazy: Dict[int, Callable[[], Value]] = {}
        # value -> constant value it is the 2-D transpose of (addmm then uses linear).
        self.transposes: Dict[int, int] = {}
        self.alias_sources: Set[int] = set()  # values that planned views read
        self._last_read: Optional[Dict[int, int]] = None
        # Int values computed at run time from dynamic sizes (sym_size and arithmetic on it):
        # value -> a function emitting the int64 [1] tensor that holds it (called once, on
        # first use: most sizes only feed a reshape's one inferred -1).
        self.symbolic: Dict[int, Callable[[], Value]] = {}
        self._size_values: Dict[Any, Value] = {}
        # builder value index -> (raw bytes, dtype, shape) of the constants made here
        self.constant_raw: Dict[int, Tuple[bytes, str, Tuple[int, ...]]] = {}

    # ---- messages ---------------------------------------------------------------------

    def where(self) -> str:
        if self.pc < 0:
            return f"method '{self.plan.name}'"
        return f"method '{self.plan.name}': instruction {self.pc} ({self.op})"

    def fail(self, message: str) -> ConversionError:
        return ConversionError(f"{self.where()}: {message}")

    # ---- reading values ---------------------------------------------------------------

    def evalue(self, i: int) -> P.EValue:
        if not 0 <= i < len(self.plan.values):
            raise MalformedPte(f"{self.where()}: value index {i} is out of range "
                               f"({len(self.plan.values)} values)")
        return self.plan.values[i]

    def spec(self, i: int) -> P.TensorSpec:
        v = self.evalue(i)
        if v.kind != P.K_TENSOR:
            raise self.fail(f"value {i} must be a tensor, not {_KIND_NAMES.get(v.kind, v.kind)}")
        return v.payload

    def is_none(self, i: int) -> bool:
        return self.evalue(i).kind == P.K_NULL

    def tensor(self, i: int) -> Value:
        """The builder value of tensor value i: produced earlier, an input, state, or a
        constant (materialized on first use)."""
        if i in self.env:
            return self.env[i]
        if i in self.lazy:
            self.env[i] = self.lazy.pop(i)()
            return self.env[i]
        spec = self.spec(i)
        if spec.external:
            raise self.fail(f"value {i} ('{spec.name}') keeps its data in an external file; "
                            f"external ExecuTorch data (.ptd) is not supported")
        if spec.data_buffer_idx == 0 or spec.memory_id is not None:
            raise self.fail(f"value {i} is read before any instruction writes it")
        nbytes = spec.numel * _dtypes.itemsize(spec.dtype)
        raw = self.pte.constant_bytes(spec, nbytes, f"{self.where()}: constant value {i}")
        if list(spec.dim_order) != list(range(len(spec.sizes))):
            raw = _permute_bytes(raw, spec.sizes, spec.dim_order, _dtypes.itemsize(spec.dtype))
        value = self.m.constant(raw, spec.dtype, spec.sizes)
        self.constant_raw[value.index] = (raw, spec.dtype, tuple(spec.sizes))
        self.env[i] = value
        return value

    def is_constant(self, i: int) -> bool:
        v = self.evalue(i)
        return v.kind == P.K_TENSOR and i not in self.env and i not in self.lazy and \
            v.payload.data_buffer_idx != 0 and v.payload.memory_id is None and \
            not v.payload.external

    def constant_floats(self, i: int) -> Optional[List[float]]:
        """The values of a float32/float64 constant tensor, or None when i is no constant."""
        if not self.is_constant(i):
            return None
        spec = self.spec(i)
        if spec.dtype not in ("float32", "float64"):
            return None
        code = "f" if spec.dtype == "float32" else "d"
        raw = self.pte.constant_bytes(spec, spec.numel * _dtypes.itemsize(spec.dtype),
                                      f"{self.where()}: constant value {i}")
        return list(struct.unpack(f"<{spec.numel}{code}", raw))

    def transposed_constant(self, i: int) -> Optional[Value]:
        """W when value i is permute_copy(W, [1, 0]) of a 2-D constant W."""
        source = self.transposes.get(i)
        return None if source is None else self.tensor(source)

    def reads_later(self, i: int) -> bool:
        """Whether an instruction after the current one, or the method's outputs, read i."""
        if self._last_read is None:
            self._last_read = self._last_reads()
        return self._last_read.get(i, -1) > self.pc

    def _last_reads(self) -> Dict[int, int]:
        """Value -> index of the last instruction reading it (outputs: past the end)."""
        last: Dict[int, int] = {}
        for pc, ins in enumerate(self.plan.instructions):
            if ins.kind == P.I_MOVE:
                last[ins.a] = pc
            if ins.kind != P.I_KERNEL or not 0 <= ins.a < len(self.plan.operators):
                continue
            entry = LOWERINGS.get(self.plan.operators[ins.a])
            for i in self._tensor_indices(ins.args[:entry[0]] if entry else ins.args):
                last[i] = pc
        for i in self.plan.outputs:
            last[i] = len(self.plan.instructions)
        return last

    def opt_tensor(self, i: int) -> Optional[Value]:
        return None if self.is_none(i) else self.tensor(i)

    def scalar(self, i: int) -> Any:
        """An Int, Double or Bool value as a Python number."""
        v = self.evalue(i)
        if v.kind not in (P.K_INT, P.K_DOUBLE, P.K_BOOL):
            raise self.fail(f"value {i} must be a scalar, not {_KIND_NAMES.get(v.kind, v.kind)}")
        if i in self.symbolic:  # its payload is the exporter's placeholder, not the size
            raise self.fail(f"value {i} is a size known only at run time (a dynamic dimension);"
                            f" this argument of {self.op} must be known at conversion time")
        return v.payload

    def int(self, i: int) -> int:
        v = self.evalue(i)
        if v.kind not in (P.K_INT, P.K_BOOL):
            raise self.fail(f"value {i} must be an int, not {_KIND_NAMES.get(v.kind, v.kind)}")
        if i in self.symbolic:
            raise self.fail(f"value {i} is a size known only at run time (a dynamic dimension);"
                            f" this argument of {self.op} must be known at conversion time")
        return int(v.payload)

    def opt_int(self, i: int) -> Optional[int]:
        return None if self.is_none(i) else self.int(i)

    def string(self, i: int) -> Optional[str]:
        v = self.evalue(i)
        if v.kind == P.K_NULL:
            return None
        if v.kind != P.K_STRING:
            raise self.fail(f"value {i} must be a string")
        return v.payload

    def ints(self, i: int) -> List[int]:
        """An IntList (its items are indices of Int values) or a single Int."""
        v = self.evalue(i)
        if v.kind == P.K_INT:
            return [int(v.payload)]
        if v.kind != P.K_INT_LIST:
            raise self.fail(f"value {i} must be an int list, not "
                            f"{_KIND_NAMES.get(v.kind, v.kind)}")
        return [self.int(j) for j in v.payload]

    def sizes(self, i: int) -> Union[List[int], Value]:
        """A size list (view / reshape) whose items may be run-time sizes of dynamic
        dimensions: one such item becomes -1, inferred by the reshape at every execute; with
        more, the list is a shape tensor computed at run time."""
        v = self.evalue(i)
        if v.kind != P.K_INT_LIST:
            return self.ints(i)
        unknown = [j for j in v.payload if j in self.symbolic or self.int(j) == -1]
        if len(unknown) <= 1:
            return [-1 if j in self.symbolic else self.int(j) for j in v.payload]
        return self.shape_tensor([self.size_value(j) if j in self.symbolic else self.int(j)
                                  for j in v.payload])

    # ---- run-time sizes ----------------------------------------------------------------

    def size_value(self, i: int) -> Value:
        """The int64 [1] tensor holding Int value i (a run-time size, or a known int)."""
        key = ("value", i)
        if key not in self._size_values:
            thunk = self.symbolic.get(i)
            self._size_values[key] = thunk() if thunk is not None else self.size_constant(
                self.int(i))
        return self._size_values[key]

    def size_constant(self, n: int) -> Value:
        key = ("constant", int(n))
        if key not in self._size_values:
            self._size_values[key] = self.m.constant(pack_scalar(int(n), "int64"), "int64",
                                                     (1,))
        return self._size_values[key]

    def shape_of(self, x: Value, start: int, end: int) -> Value:
        """x's sizes start..end-1 at run time (int64 [end - start])."""
        key = ("shape", x.index, start, end)
        if key not in self._size_values:
            self._size_values[key] = self.new("shape", x, start, end, dtype="int64",
                                              shape=[end - start])
        return self._size_values[key]

    def shape_tensor(self, items: Sequence[Union[int, Value]]) -> Value:
        """An int64 vector of sizes: known ints and run-time int64 tensors, in order."""
        parts = [self.size_constant(v) if isinstance(v, int) else v for v in items]
        if len(parts) == 1:
            return parts[0]
        total = sum(p.shape[0] for p in parts)
        return self.new("concat", parts, 0, dtype="int64", shape=[total])

    def reshape_like(self, x: Value, shape: Sequence[Union[int, Value]], bounds: Sequence[int],
                     out: Optional[int] = None) -> Value:
        """Reshape a dynamic x to sizes given as ints and run-time size tensors (vectors
        from shape_of, one-element sizes); the result is planned at `bounds`."""
        target = self.shape_tensor(shape)
        if out is not None:
            return self.emit("reshape", x, target, out=out)
        return self.new("reshape", x, target, dtype=x.dtype, shape=bounds, dynamic=True)

    def insert_axis(self, x: Value, axis: int, out: Optional[int] = None) -> Value:
        """x with a new axis of size 1 at `axis` (unsqueeze), for static or dynamic x."""
        bounds = list(x.shape[:axis]) + [1] + list(x.shape[axis:])
        if not x.dynamic:
            return self.emit("reshape", x, bounds, out=out) if out is not None else \
                self.reshape(x, bounds)
        rank = len(x.shape)
        parts = ([self.shape_of(x, 0, axis)] if axis else []) + [1] + \
            ([self.shape_of(x, axis, rank)] if axis < rank else [])
        return self.reshape_like(x, parts, bounds, out)

    def drop_axes(self, x: Value, axes: Sequence[int], out: Optional[int] = None) -> Value:
        """x without the given axes (each of size 1 at run time: squeeze)."""
        keep = [d for d in range(len(x.shape)) if d not in set(axes)]
        bounds = [x.shape[d] for d in keep]
        if not x.dynamic:
            return self.emit("reshape", x, bounds, out=out) if out is not None else \
                self.reshape(x, bounds)
        parts: List[Union[int, Value]] = []
        for d in keep:  # contiguous runs of kept axes become one shape slice
            if parts and isinstance(parts[-1], tuple) and parts[-1][1] == d:
                parts[-1] = (parts[-1][0], d + 1)
            else:
                parts.append((d, d + 1))
        return self.reshape_like(x, [self.shape_of(x, s, e) for s, e in parts], bounds, out)

    def opt_ints(self, i: int) -> Optional[List[int]]:
        return None if self.is_none(i) else self.ints(i)

    def tensor_items(self, i: int) -> List[int]:
        """Value indices of a TensorList (-1 marks an absent item of an OptionalTensorList)."""
        v = self.evalue(i)
        if v.kind not in (P.K_TENSOR_LIST, P.K_OPTIONAL_TENSOR_LIST):
            raise self.fail(f"value {i} must be a tensor list")
        for j in v.payload:
            if j != -1 or v.kind != P.K_OPTIONAL_TENSOR_LIST:
                self.spec(j)
        return list(v.payload)

    # ---- emitting ---------------------------------------------------------------------

    def out_spec(self, i: int) -> Tuple[str, List[int], bool]:
        spec = self.spec(i)
        if spec.dynamism == 2:
            raise self.fail(f"value {i} has an unbounded dynamic shape; only static and "
                            f"bounded shapes are supported")
        return spec.dtype, list(spec.sizes), spec.dynamism == 1

    def bind(self, i: int, value: Value) -> Value:
        """Make value i (an out tensor of the current call) hold `value`."""
        dtype, sizes, _ = self.out_spec(i)
        if value.dtype != dtype or list(value.shape) != sizes:
            raise self.fail(f"value {i}: the lowering produced {value.dtype}{list(value.shape)}"
                            f", but the program declares {dtype}{sizes}")
        if i in self.state:
            self.m.call("copy", value, out=self.env[i])
            return self.env[i]
        if value.storage == STATE:
            value = self.m.copy(value)  # a later update of the state must not change it
        self.env[i] = value
        return value

    def emit(self, op: str, *args: Any, out: int) -> Value:
        """Call runtime op `op`; its one output takes out-tensor i's dtype and shape."""
        value = self.m.call(op, *args, outputs=[self.out_spec(out)])[0]
        return self.bind(out, value)

    def new(self, op: str, *args: Any, dtype: str, shape: Sequence[int],
            dynamic: bool = False) -> Value:
        """Call op for an intermediate result."""
        return self.m.call(op, *args, outputs=[(dtype, list(shape), dynamic)])[0]

    def const(self, value: Any, dtype: str) -> Value:
        """A 0-d constant."""
        return self.m.constant(pack_scalar(value, dtype), dtype, ())

    def filled(self, value: Any, dtype: str, shape: Sequence[int]) -> Value:
        n = 1
        for s in shape:
            n *= s
        if n * _dtypes.itemsize(dtype) > MAX_GENERATED_BYTES:
            raise self.fail(f"a generated constant of {dtype}{list(shape)} is too large")
        return self.m.constant(pack_scalar(value, dtype) * n, dtype, shape)

    def cast(self, x: Value, dtype: str) -> Value:
        if x.dtype == dtype:
            return x
        return self.new("cast", x, dtype=dtype, shape=x.shape, dynamic=x.dynamic)

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        if list(x.shape) == list(shape):
            return x
        if x.dynamic:  # which sizes vary is not known here: never guess a -1
            raise self.fail(f"reshaping a dynamic tensor (bounds {list(x.shape)}) to "
                            f"{list(shape)} is not supported")
        return self.new("reshape", x, [int(s) for s in shape], dtype=x.dtype, shape=shape)

    # ---- the plan ---------------------------------------------------------------------

    def convert(self) -> None:
        from . import _aten  # noqa: F401  (registers the lowerings)

        plan = self.plan
        for pc, ins in enumerate(plan.instructions):  # refuse delegates before anything else
            if ins.kind == P.I_DELEGATE:
                self.pc = pc
                self._instruction(ins)
        self._inputs()
        self.state = self._find_state()
        for pc, ins in enumerate(plan.instructions):
            self.pc = pc
            self._instruction(ins)
        self.pc, self.op = -1, ""
        self._outputs()
        self.m.fuse_silu()  # once every reader of each result is known
        self.m.fuse_rms_norm()
        self.m.fuse_conv_max_pool()

    def _inputs(self) -> None:
        for n, i in enumerate(self.plan.inputs):
            v = self.evalue(i)
            name = f"input_{n}"
            if v.kind == P.K_TENSOR:
                dtype, sizes, dynamic = self.out_spec(i)
                if dynamic:
                    self.env[i] = self.m.input(name, dtype, sizes, max_shape=sizes)
                else:
                    self.env[i] = self.m.input(name, dtype, sizes)
            elif v.kind in (P.K_INT, P.K_DOUBLE, P.K_BOOL):
                raise self.fail(f"input {n} is a scalar ({_KIND_NAMES[v.kind]}); scalar inputs "
                                f"of .pte programs are not supported")
            else:
                raise self.fail(f"input {n} has kind {_KIND_NAMES.get(v.kind, v.kind)}; only "
                                f"tensor inputs are supported")

    def _find_state(self) -> Set[int]:
        """Planned tensors that an instruction reads (or copy_ writes) before any instruction
        produces them. One that shares its memory (id and offset) and byte size with a tensor
        written before is a view ExecuTorch made by planning both into the same bytes (its
        view_copy removed): it becomes a reshape of that tensor. The others are mutable
        buffers: they become attributes."""
        written: Set[int] = set(self.env)
        located: Dict[Tuple[int, int], int] = {}
        for i in self.env:
            self._locate(i, located)
        state: Set[int] = set()
        for pc, ins in enumerate(self.plan.instructions):
            if ins.kind != P.I_KERNEL or not 0 <= ins.a < len(self.plan.operators):
                continue
            op = self.plan.operators[ins.a]
            entry = LOWERINGS.get(op)
            if entry is None:
                continue
            n_args = entry[0]
            reads = ins.args[:n_args]
            if op == "aten::copy_":
                reads = ins.args[1:2]
                self._maybe_state(ins.args[0] if ins.args else -1, written, state, located)
            for i in self._tensor_indices(reads):
                self._maybe_state(i, written, state, located)
            for i in self._tensor_indices(ins.args[n_args:]):
                written.add(i)
                self._locate(i, located)
        for i in sorted(state):
            spec = self.plan.values[i].payload
            name = spec.name if spec.name and "\0" not in spec.name else f"buffer_{i}"
            nbytes = spec.numel * _dtypes.itemsize(spec.dtype)
            init = self.pte.mutable_initial_bytes(spec, nbytes, f"{self.where()}: mutable "
                                                  f"buffer value {i}")
            if init is not None and list(spec.dim_order) != list(range(len(spec.sizes))):
                init = _permute_bytes(init, spec.sizes, spec.dim_order,
                                      _dtypes.itemsize(spec.dtype))
            if spec.dynamism:
                raise self.fail(f"mutable buffer value {i} has a dynamic shape")
            if any(a == name for a, _ in self.m._attributes):
                name = f"{name}_{i}"
            self.env[i] = self.m.attribute(name, spec.dtype, spec.sizes, init)
        return state

    def _locate(self, i: int, located: Dict[Tuple[int, int], int]) -> None:
        v = self.plan.values[i]
        if v.kind == P.K_TENSOR and v.payload.memory_id is not None:
            located[(v.payload.memory_id, v.payload.offset)] = i

    def _maybe_state(self, i: int, written: Set[int], state: Set[int],
                     located: Dict[Tuple[int, int], int]) -> None:
        if i in written or not 0 <= i < len(self.plan.values):
            return
        v = self.plan.values[i]
        if v.kind != P.K_TENSOR or v.payload.memory_id is None:
            return
        spec = v.payload
        source = located.get((spec.memory_id, spec.offset))
        if source is not None:
            src = self.plan.values[source].payload
            if src.dtype == spec.dtype and src.numel == spec.numel and not src.dynamism \
                    and not spec.dynamism:
                self.lazy[i] = lambda: self.reshape(self.tensor(source), spec.sizes)
                self.alias_sources.add(source)
                written.add(i)
                return
        state.add(i)
        written.add(i)

    def _tensor_indices(self, indices: Sequence[int]) -> List[int]:
        found = []
        for i in indices:
            if not 0 <= i < len(self.plan.values):
                continue
            v = self.plan.values[i]
            if v.kind == P.K_TENSOR:
                found.append(i)
            elif v.kind in (P.K_TENSOR_LIST, P.K_OPTIONAL_TENSOR_LIST):
                found.extend(j for j in v.payload if 0 <= j < len(self.plan.values))
        return found

    def _instruction(self, ins: P.Instruction) -> None:
        plan = self.plan
        if ins.kind == P.I_DELEGATE:
            self.op = "DelegateCall"
            backend = plan.delegates[ins.a] if 0 <= ins.a < len(plan.delegates) else \
                f"#{ins.a}"
            raise self.fail(f"calls backend delegate '{backend}', which cannot run here (its "
                            f"compiled blob is that backend's own format): export the model "
                            f"without a partitioner")
        if ins.kind == P.I_JUMP_FALSE:
            self.op = "JumpFalseCall"
            raise self.fail("control flow (JumpFalseCall) is not supported")
        if ins.kind == P.I_FREE:
            return  # our planner decides lifetimes
        if ins.kind == P.I_MOVE:
            self.op = "MoveCall"
            src, dst = ins.a, ins.args[0]
            if self.evalue(src).kind == P.K_TENSOR:
                self.bind(dst, self.tensor(src))
            elif self.evalue(dst).kind != self.evalue(src).kind:
                raise self.fail(f"moves value {src} into value {dst} of another kind")
            else:
                self.plan.values[dst] = self.plan.values[src]
            return
        if not 0 <= ins.a < len(plan.operators):
            raise MalformedPte(f"{self.where()}: operator index {ins.a} is out of range "
                               f"({len(plan.operators)} operators)")
        self.op = plan.operators[ins.a]
        entry = LOWERINGS.get(self.op)
        if entry is None:
            raise self.fail("this operator is not supported by the runtime")
        n_args, lowering = entry
        if len(ins.args) <= n_args:
            raise self.fail(f"has {len(ins.args)} arguments; the operator takes {n_args} and "
                            f"its out tensors")
        try:
            lowering(self, ins.args[:n_args], ins.args[n_args:])
        except (ConversionError, MalformedPte):
            raise
        except ValueError as e:  # shape rules of the builder
            raise self.fail(str(e)) from None
        except (IndexError, TypeError, OverflowError) as e:
            # Last line of defence for argument combinations no check above foresaw
            # (hostile files): still an error naming the instruction, never a crash.
            raise self.fail(f"unexpected arguments ({type(e).__name__}: {e})") from None

    def _outputs(self) -> None:
        seen: Set[int] = set()
        inputs = set(self.plan.inputs)
        for n, i in enumerate(self.plan.outputs):
            v = self.evalue(i)
            if v.kind != P.K_TENSOR:
                raise self.fail(f"output {n} is a {_KIND_NAMES.get(v.kind, v.kind)}; only "
                                f"tensor outputs are supported")
            value = self.tensor(i)
            if value.storage != ARENA or i in seen or i in inputs or i in self.state:
                value = self.m.copy(value)  # outputs get memory of their own
            seen.add(i)
            self.m.output(value, f"output_{n}")


_KIND_NAMES = {P.K_NULL: "None", P.K_INT: "int", P.K_BOOL: "bool", P.K_DOUBLE: "double",
               P.K_TENSOR: "tensor", P.K_STRING: "string", P.K_INT_LIST: "int list",
               P.K_DOUBLE_LIST: "double list", P.K_BOOL_LIST: "bool list",
               P.K_TENSOR_LIST: "tensor list", P.K_OPTIONAL_TENSOR_LIST: "optional tensor list"}


def build(source: Any) -> ProgramBuilder:
    """The ProgramBuilder holding a .pte program (a path or its bytes), not yet serialized:
    callers may add to it before ProgramBuilder.to_bytes()."""
    data = read_source(source)
    pte = P.parse(data)
    builder = ProgramBuilder()
    for plan in pte.plans:
        MethodConverter(pte, plan, builder).convert()
    return builder


def read_source(source: Any) -> bytes:
    import os

    if isinstance(source, (str, os.PathLike)):
        with open(os.fspath(source), "rb") as f:
            return f.read()
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    from ..errors import InvalidArgument

    raise InvalidArgument(f"cannot read an ExecuTorch program from {type(source).__name__}; "
                          f"pass a path or bytes")
