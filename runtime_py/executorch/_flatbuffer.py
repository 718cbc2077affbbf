"""A bounds-checked FlatBuffer reader (pure Python, struct-based).

Reads the binary layout FlatBuffers defines: a table starts with a signed 32-bit offset back to
its vtable; the vtable lists, per field, the field's offset inside the table (0: absent, take
the default); strings, vectors and sub-tables are reached through unsigned 32-bit offsets
relative to where the offset itself is stored. Every position is checked against the buffer
before it is read, so a truncated or hostile file raises MalformedPte naming the byte offset and
the table and field being read, and never reads out of bounds or loops.
"""
from __future__ import annotations

import struct
from typing import Any, List, Optional

from ._errors import MalformedPte

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")

# Vector element formats: struct code and size.
SCALAR_FORMATS = {"bool": ("?", 1), "u8": ("B", 1), "i8": ("b", 1), "u16": ("H", 2),
                  "i32": ("i", 4), "u32": ("I", 4), "i64": ("q", 8), "u64": ("Q", 8),
                  "f64": ("d", 8)}


class Buffer:
    """The bytes of one FlatBuffer and checked reads from them."""

    def __init__(self, data: Any) -> None:
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.size = len(self.data)

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.size:
            raise MalformedPte(f"byte offset {pos}: {what} needs {size} bytes, but the file has "
                               f"{self.size} bytes")

    def unpack(self, fmt: struct.Struct, pos: int, what: str) -> Any:
        self.need(pos, fmt.size, what)
        return fmt.unpack_from(self.data, pos)[0]

    def root(self, name: str) -> "Table":
        return Table(self, self.unpack(_U32, 0, "the root table offset"), name)


class Table:
    """One table at a known position; fields are read by their index in the schema."""

    __slots__ = ("buf", "pos", "name", "_vtable", "_vsize", "_tsize")

    def __init__(self, buf: Buffer, pos: int, name: str) -> None:
        self.buf, self.pos, self.name = buf, pos, name
        back = buf.unpack(_I32, pos, f"table {name}")
        self._vtable = pos - back
        if not 0 <= self._vtable <= buf.size - 4:
            raise MalformedPte(f"byte offset {pos}: table {name} places its vtable at byte "
                               f"{self._vtable}, outside the file ({buf.size} bytes)")
        self._vsize = buf.unpack(_U16, self._vtable, f"vtable of {name}")
        self._tsize = buf.unpack(_U16, self._vtable + 2, f"vtable of {name}")
        if self._vsize < 4 or self._vsize % 2:
            raise MalformedPte(f"byte offset {self._vtable}: vtable of {name} has a bad size "
                               f"{self._vsize}")
        buf.need(self._vtable, self._vsize, f"vtable of {name}")
        buf.need(pos, max(self._tsize, 4), f"table {name}")

    def _field(self, index: int, field: str, size: int) -> Optional[int]:
        """Position of field `index`, or None when absent."""
        slot = 4 + 2 * index
        if slot + 2 > self._vsize:
            return None
        rel = _U16.unpack_from(self.buf.data, self._vtable + slot)[0]
        if rel == 0:
            return None
        if rel + size > self._tsize:
            raise MalformedPte(f"byte offset {self._vtable + slot}: {self.name}.{field} lies "
                               f"outside its table ({rel} + {size} > {self._tsize} bytes)")
        return self.pos + rel

    def has(self, index: int) -> bool:
        slot = 4 + 2 * index
        return slot + 2 <= self._vsize and \
            _U16.unpack_from(self.buf.data, self._vtable + slot)[0] != 0

    def scalar(self, index: int, field: str, kind: str, default: Any = 0) -> Any:
        code, size = SCALAR_FORMATS[kind]
        pos = self._field(index, field, size)
        if pos is None:
            return default
        return struct.unpack_from("<" + code, self.buf.data, pos)[0]

    def _target(self, index: int, field: str) -> Optional[int]:
        """The position an offset field points at (None when absent)."""
        pos = self._field(index, field, 4)
        if pos is None:
            return None
        target = pos + _U32.unpack_from(self.buf.data, pos)[0]
        if target >= self.buf.size:
            raise MalformedPte(f"byte offset {pos}: {self.name}.{field} points to byte "
                               f"{target}, past the end of the file ({self.buf.size} bytes)")
        return target

    def table(self, index: int, field: str) -> Optional["Table"]:
        target = self._target(index, field)
        return None if target is None else Table(self.buf, target, f"{self.name}.{field}")

    def _vector(self, index: int, field: str, item_size: int) -> Optional[tuple]:
        """(position of the first item, count) of a vector field."""
        target = self._target(index, field)
        if target is None:
            return None
        count = self.buf.unpack(_U32, target, f"length of {self.name}.{field}")
        start = target + 4
        if count * item_size > self.buf.size - start:
            raise MalformedPte(f"byte offset {target}: {self.name}.{field} claims {count} items "
                               f"of {item_size} bytes, past the end of the file "
                               f"({self.buf.size} bytes)")
        return start, count

    def scalars(self, index: int, field: str, kind: str) -> Optional[List[Any]]:
        """A vector of scalars as a list (None when the field is absent)."""
        code, size = SCALAR_FORMATS[kind]
        vec = self._vector(index, field, size)
        if vec is None:
            return None
        start, count = vec
        return list(struct.unpack_from(f"<{count}{code}", self.buf.data, start))

    def byte_range(self, index: int, field: str) -> Optional[tuple]:
        """(start, length) of a [ubyte] vector, without copying it."""
        return self._vector(index, field, 1)

    def tables(self, index: int, field: str) -> Optional[List["Table"]]:
        """A vector of tables (None when absent)."""
        vec = self._vector(index, field, 4)
        if vec is None:
            return None
        start, count = vec
        result = []
        for i in range(count):
            at = start + 4 * i
            target = at + _U32.unpack_from(self.buf.data, at)[0]
            if target >= self.buf.size:
                raise MalformedPte(f"byte offset {at}: {self.name}.{field}[{i}] points to byte "
                                   f"{target}, past the end of the file ({self.buf.size} bytes)")
            result.append(Table(self.buf, target, f"{self.name}.{field}[{i}]"))
        return result

    def string(self, index: int, field: str) -> Optional[str]:
        vec = self._vector(index, field, 1)
        if vec is None:
            return None
        start, count = vec
        raw = bytes(self.buf.data[start:start + count])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedPte(f"byte offset {start}: {self.name}.{field} is not UTF-8 "
                               f"text") from None
