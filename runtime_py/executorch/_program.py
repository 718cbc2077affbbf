"""ExecuTorch's program format (schema/program.fbs, file identifier "ET12") read into plain
Python objects, with every index and size checked.

File layout: a FlatBuffer whose first 8 bytes are the root offset and "ET12"; an optional
extended header at byte 8 ("eh00", header length, program size, segment base offset, segment
data size); data segments (constant weights, delegate blobs, mutable buffer initial values)
after the FlatBuffer at segment_base_offset + DataSegment.offset.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple

from ._errors import MalformedPte
from ._flatbuffer import Buffer, Table

FILE_IDENTIFIER = b"ET12"
EXTENDED_MAGIC = b"eh00"

# ScalarType (schema/scalar_type.fbs) -> our dtype name; absent ones are refused by name.
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 11: "bool", 15: "bfloat16", 27: "uint16",
                28: "uint32", 29: "uint64"}
SCALAR_TYPE_NAMES = {8: "COMPLEX32", 9: "COMPLEX64", 10: "COMPLEX128", 12: "QINT8",
                     13: "QUINT8", 14: "QINT32", 16: "QUINT4X2", 17: "QUINT2X4", 22: "BITS16",
                     23: "FLOAT8E5M2", 24: "FLOAT8E4M3FN", 25: "FLOAT8E5M2FNUZ",
                     26: "FLOAT8E4M3FNUZ"}

# KernelTypes union member ids (0 is NONE in FlatBuffers unions).
K_NULL, K_INT, K_BOOL, K_DOUBLE, K_TENSOR, K_STRING, K_INT_LIST, K_DOUBLE_LIST, K_BOOL_LIST, \
    K_TENSOR_LIST, K_OPTIONAL_TENSOR_LIST = range(1, 12)
# InstructionArguments union member ids.
I_KERNEL, I_DELEGATE, I_MOVE, I_JUMP_FALSE, I_FREE = range(1, 6)

MAX_RANK = 16


class TensorSpec:
    """An EValue of kind Tensor."""

    __slots__ = ("dtype", "sizes", "dim_order", "data_buffer_idx", "memory_id", "offset",
                 "dynamism", "external", "name", "mutable_segment")

    def __init__(self) -> None:
        self.dtype = "float32"
        self.sizes: Tuple[int, ...] = ()
        self.dim_order: Tuple[int, ...] = ()
        self.data_buffer_idx = 0
        self.memory_id: Optional[int] = None  # planned (memory-planned) when not None
        self.offset = 0
        self.dynamism = 0
        self.external = False
        self.name = ""
        self.mutable_segment = 0

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


class EValue:
    """kind: one of the K_* ids; payload: int, float, bool, str, list, TensorSpec or None."""

    __slots__ = ("kind", "payload")

    def __init__(self, kind: int, payload: Any) -> None:
        self.kind, self.payload = kind, payload


class Instruction:
    __slots__ = ("kind", "a", "args")

    def __init__(self, kind: int, a: int, args: List[int]) -> None:
        self.kind, self.a, self.args = kind, a, args  # a: op, delegate, source or cond index


class Plan:
    """One ExecutionPlan: becomes one method."""

    def __init__(self) -> None:
        self.name = ""
        self.values: List[EValue] = []
        self.inputs: List[int] = []
        self.outputs: List[int] = []
        self.instructions: List[Instruction] = []
        self.operators: List[str] = []  # "aten::add.out"
        self.delegates: List[str] = []
        self.buffer_sizes: List[int] = []


class PteProgram:
    """A parsed .pte: its plans and a way to fetch constant bytes."""

    def __init__(self, data: Any) -> None:
        self.buf = Buffer(data)
        self.plans: List[Plan] = []
        self.segment_base = 0
        self._constant_buffers: List[Optional[Tuple[int, int]]] = []
        self._segments: List[Tuple[int, int]] = []
        self._constant_segment: Optional[Tuple[int, List[int]]] = None
        self._mutable_segments: List[Tuple[int, List[int]]] = []

    # ---- constants ----------------------------------------------------------------------

    def constant_bytes(self, spec: TensorSpec, nbytes: int, where: str) -> bytes:
        """The bytes of a constant tensor: from the constant segment when the program has one,
        else from the inline constant_buffer (index 0 is reserved for "no data")."""
        idx = spec.data_buffer_idx
        if self._constant_segment is not None and self._constant_segment[1]:
            seg_index, offsets = self._constant_segment
            if idx >= len(offsets):
                raise MalformedPte(f"{where}: data_buffer_idx {idx} is past the "
                                   f"{len(offsets)} constant segment offsets")
            start, size = self._segment(seg_index, f"{where}: constant segment")
            return self._slice(start + offsets[idx], nbytes, size - offsets[idx], where)
        if idx >= len(self._constant_buffers):
            raise MalformedPte(f"{where}: data_buffer_idx {idx} is past the "
                               f"{len(self._constant_buffers)} constant buffers")
        ref = self._constant_buffers[idx]
        if ref is None:
            raise MalformedPte(f"{where}: constant buffer {idx} has no storage")
        start, size = ref
        return self._slice(start, nbytes, size, where)

    def mutable_initial_bytes(self, spec: TensorSpec, nbytes: int, where: str) -> Optional[bytes]:
        """The initial contents of a mutable buffer, when the program stores them."""
        idx = spec.mutable_segment
        if not self._mutable_segments or idx >= len(self._mutable_segments[0][1]) or \
                spec.data_buffer_idx == 0:
            return None
        seg_index, offsets = self._mutable_segments[0]
        start, size = self._segment(seg_index, f"{where}: mutable data segment")
        off = offsets[spec.data_buffer_idx] if spec.data_buffer_idx < len(offsets) else None
        if off is None:
            raise MalformedPte(f"{where}: data_buffer_idx {spec.data_buffer_idx} is past the "
                               f"{len(offsets)} mutable data offsets")
        return self._slice(start + off, nbytes, size - off, where)

    def _segment(self, index: int, where: str) -> Tuple[int, int]:
        if index >= len(self._segments):
            raise MalformedPte(f"{where}: segment {index} does not exist ({len(self._segments)} "
                               f"segments)")
        offset, size = self._segments[index]
        return self.segment_base + offset, size

    def _slice(self, start: int, nbytes: int, available: int, where: str) -> bytes:
        if nbytes > available or start < 0 or start + nbytes > self.buf.size:
            raise MalformedPte(f"byte offset {start}: {where} needs {nbytes} bytes of data, "
                               f"but its buffer or the file ends first")
        return bytes(self.buf.data[start:start + nbytes])


def is_pte(head: bytes) -> bool:
    """Whether the first bytes of a file are an ExecuTorch program's."""
    return len(head) >= 8 and bytes(head[4:8]) == FILE_IDENTIFIER


def parse(data: Any) -> PteProgram:
    prog = PteProgram(data)
    buf = prog.buf
    if buf.size < 8 or bytes(buf.data[4:8]) != FILE_IDENTIFIER:
        got = bytes(buf.data[4:8]) if buf.size >= 8 else b""
        raise MalformedPte(f"byte offset 4: not an ExecuTorch program (file identifier "
                           f"{got!r}, expected {FILE_IDENTIFIER!r})")
    _read_extended_header(prog)
    root = buf.root("Program")
    for i, t in enumerate(root.tables(2, "constant_buffer") or []):
        prog._constant_buffers.append(t.byte_range(0, "storage"))
    for t in root.tables(4, "segments") or []:
        offset = t.scalar(0, "offset", "u64")
        size = t.scalar(1, "size", "u64")
        if prog.segment_base + offset + size > buf.size:
            raise MalformedPte(f"byte offset {t.pos}: {t.name} spans bytes "
                               f"{prog.segment_base + offset}..{prog.segment_base + offset + size}"
                               f", past the end of the file ({buf.size} bytes)")
        prog._segments.append((offset, size))
    cs = root.table(5, "constant_segment")
    if cs is not None:
        prog._constant_segment = (cs.scalar(0, "segment_index", "u32"),
                                  cs.scalars(1, "offsets", "u64") or [])
    for t in root.tables(6, "mutable_data_segments") or []:
        prog._mutable_segments.append((t.scalar(0, "segment_index", "u32"),
                                       t.scalars(1, "offsets", "u64") or []))
    plans = root.tables(1, "execution_plan")
    if not plans:
        raise MalformedPte(f"byte offset {root.pos}: Program has no execution_plan")
    for t in plans:
        prog.plans.append(_read_plan(t))
    names = [p.name for p in prog.plans]
    if len(set(names)) != len(names):
        raise MalformedPte("two execution plans have the same name")
    return prog


def _read_extended_header(prog: PteProgram) -> None:
    buf = prog.buf
    if buf.size < 32 or bytes(buf.data[8:12]) != EXTENDED_MAGIC:
        return
    length, program_size, base = struct.unpack_from("<IQQ", buf.data, 12)
    if length < 24:
        raise MalformedPte(f"byte offset 12: extended header length {length} is below 24")
    if program_size > buf.size or base > buf.size or (base and base < program_size):
        raise MalformedPte(f"byte offset 16: extended header says program size {program_size}"
                           f" and segment base {base}, but the file has {buf.size} bytes")
    prog.segment_base = base


def _read_plan(t: Table) -> Plan:
    plan = Plan()
    plan.name = t.string(0, "name") or ""
    where = f"execution plan '{plan.name}'"
    if not plan.name or "\0" in plan.name:
        raise MalformedPte(f"byte offset {t.pos}: {t.name} has no name, or a NUL in it")
    plan.values = [_read_evalue(v, i, where) for i, v in enumerate(t.tables(2, "values") or [])]
    n = len(plan.values)
    plan.inputs = _indices(t.scalars(3, "inputs", "i32") or [], n, f"{where}: inputs")
    plan.outputs = _indices(t.scalars(4, "outputs", "i32") or [], n, f"{where}: outputs")
    chains = t.tables(5, "chains") or []
    if len(chains) > 1:
        raise MalformedPte(f"{where}: has {len(chains)} chains; ExecuTorch runs only the first")
    for chain in chains:
        for i, ins in enumerate(chain.tables(2, "instructions") or []):
            plan.instructions.append(_read_instruction(ins, i, n, where))
    for op in t.tables(6, "operators") or []:
        name = op.string(0, "name") or ""
        overload = op.string(1, "overload") or ""
        plan.operators.append(f"{name}.{overload}" if overload else name)
    for d in t.tables(7, "delegates") or []:
        plan.delegates.append(d.string(0, "id") or "?")
    plan.buffer_sizes = t.scalars(8, "non_const_buffer_sizes", "i64") or []
    return plan


def _indices(items: List[int], n: int, where: str) -> List[int]:
    for i in items:
        if not 0 <= i < n:
            raise MalformedPte(f"{where}: value index {i} is out of range ({n} values)")
    return items


def _read_instruction(t: Table, i: int, n_values: int, where: str) -> Instruction:
    kind = t.scalar(0, "instr_args_type", "u8")
    args = t.table(1, "instr_args")
    if args is None or not I_KERNEL <= kind <= I_FREE:
        raise MalformedPte(f"byte offset {t.pos}: {where}: instruction {i} has no arguments or "
                           f"an unknown kind {kind}")
    here = f"{where}: instruction {i}"
    if kind in (I_KERNEL, I_DELEGATE):
        index = args.scalar(0, "op_index", "i32")
        return Instruction(kind, index, _indices(args.scalars(1, "args", "i32") or [], n_values,
                                                 here))
    if kind == I_MOVE:
        src, dst = args.scalar(0, "move_from", "i32"), args.scalar(1, "move_to", "i32")
        return Instruction(kind, src, _indices([src, dst], n_values, here)[1:])
    if kind == I_JUMP_FALSE:
        cond = args.scalar(0, "cond_value_index", "i32")
        return Instruction(kind, cond, [args.scalar(1, "destination_instruction", "i32")])
    return Instruction(kind, args.scalar(0, "value_index", "i32"), [])


def _read_evalue(t: Table, index: int, where: str) -> EValue:
    kind = t.scalar(0, "val_type", "u8")
    v = t.table(1, "val")
    here = f"{where}: value {index}"
    if kind == 0 or (v is None and kind != K_NULL):
        return EValue(K_NULL, None)
    if kind == K_NULL:
        return EValue(K_NULL, None)
    if kind == K_INT:
        return EValue(kind, v.scalar(0, "int_val", "i64"))
    if kind == K_BOOL:
        return EValue(kind, bool(v.scalar(0, "bool_val", "u8")))
    if kind == K_DOUBLE:
        return EValue(kind, v.scalar(0, "double_val", "f64", 0.0))
    if kind == K_STRING:
        return EValue(kind, v.string(0, "string_val") or "")
    if kind == K_INT_LIST:
        return EValue(kind, v.scalars(0, "items", "i64") or [])
    if kind == K_DOUBLE_LIST:
        return EValue(kind, v.scalars(0, "items", "f64") or [])
    if kind == K_BOOL_LIST:
        return EValue(kind, [bool(b) for b in v.scalars(0, "items", "u8") or []])
    if kind in (K_TENSOR_LIST, K_OPTIONAL_TENSOR_LIST):
        return EValue(kind, v.scalars(0, "items", "i32") or [])  # checked where used
    if kind == K_TENSOR:
        return EValue(kind, _read_tensor(v, here))
    raise MalformedPte(f"byte offset {t.pos}: {here} has unknown kind {kind}")


def _read_tensor(t: Table, where: str) -> TensorSpec:
    spec = TensorSpec()
    code = t.scalar(0, "scalar_type", "i8")
    if code not in SCALAR_TYPES:
        name = SCALAR_TYPE_NAMES.get(code, f"code {code}")
        from ._errors import ConversionError

        raise ConversionError(f"{where}: tensor dtype {name} is not supported")
    spec.dtype = SCALAR_TYPES[code]
    sizes = t.scalars(2, "sizes", "i32") or []
    if len(sizes) > MAX_RANK or any(s < 0 for s in sizes):
        raise MalformedPte(f"byte offset {t.pos}: {where}: tensor sizes {sizes} are negative "
                           f"or of rank above {MAX_RANK}")
    spec.sizes = tuple(sizes)
    order = t.scalars(3, "dim_order", "u8")
    if order is None or (not order and sizes):
        order = list(range(len(sizes)))
    if sorted(order) != list(range(len(sizes))):
        raise MalformedPte(f"byte offset {t.pos}: {where}: dim_order {order} is not a "
                           f"permutation of 0..{len(sizes) - 1}")
    spec.dim_order = tuple(order)
    spec.data_buffer_idx = t.scalar(5, "data_buffer_idx", "u32")
    alloc = t.table(6, "allocation_info")
    if alloc is not None:
        spec.memory_id = alloc.scalar(0, "memory_id", "u32")
        spec.offset = alloc.scalar(1, "memory_offset_low", "u32") | \
            (alloc.scalar(2, "memory_offset_high", "u32") << 32)
    spec.dynamism = t.scalar(8, "shape_dynamism", "i8")
    extra = t.table(9, "extra_tensor_info")
    if extra is not None:
        spec.mutable_segment = extra.scalar(0, "mutable_data_segments_idx", "u64")
        spec.name = extra.string(1, "fully_qualified_name") or ""
        spec.external = extra.scalar(2, "location", "i8") == 1
    return spec


def describe(prog: PteProgram) -> Dict[str, Any]:
    """A summary for debugging and the CLI: per plan, its operators and value count."""
    return {p.name: {"operators": list(p.operators), "values": len(p.values),
                     "instructions": len(p.instructions), "delegates": list(p.delegates)}
            for p in prog.plans}
