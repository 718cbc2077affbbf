"""Serializer for program format v1.x (spec: docs/format.md).

Layout written: header, section table, STRINGS, OPS, CONSTANTS, WORDS, VALUES, INSTRUCTIONS,
METHODS, BUNDLE (when there are bundled cases), then the constant SEGMENT last, 64-byte
aligned, so an mmap'd file hands each weight to kernels in place. A file that uses nothing of
version 1.1 (external constants, bundled cases) is written as 1.0, byte for byte as before.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, Dict, List, Sequence, Tuple

MAGIC = b"\x89RTP\r\n\x1a\n"
MAJOR, MINOR = 1, 0
MINOR_EXTENSIONS = 1  # external constants and the BUNDLE section
MINOR_AXES = 2  # dynamic tensors naming the axes that vary
HEADER_SIZE = 64
CONSTANT_ALIGN = 64
NO_INDEX = 0xFFFFFFFF

STRINGS, OPS, CONSTANTS, SEGMENT, WORDS, VALUES, INSTRUCTIONS, METHODS, BUNDLE = range(1, 10)
SECTION_OPTIONAL = 1
CONSTANT_EXTERNAL = 1

from .._values import (  # noqa: F401  (rt_value_kind, used through this module too)
    BOOL, DOUBLE, DOUBLE_LIST, INT, INT_LIST, NONE, STRING, TENSOR, TENSOR_LIST)

# storage kinds
ARENA, CONSTANT, STATE = 1, 2, 3
FLAG_DYNAMIC = 1
FLAG_AXES = 2  # v1.2: the record's reserved word lists the axes that vary
# instruction kinds
KERNEL, JUMP, JUMP_IF_TRUE, JUMP_IF_FALSE = 1, 2, 3, 4

VALUE_RECORD = struct.Struct("<BBBBBBHIIIIq")  # 32 bytes
METHOD_RECORD = struct.Struct("<16I")           # 64 bytes
INSTRUCTION_RECORD = struct.Struct("<4I")       # 16 bytes
SECTION_RECORD = struct.Struct("<IIQQ")         # 24 bytes
CONSTANT_RECORD = struct.Struct("<QQII")        # 24 bytes
HEADER = struct.Struct("<8sHHIQIIQII16s")       # 64 bytes
BUNDLE_CASE_RECORD = struct.Struct("<4I")       # 16 bytes
BUNDLE_VALUE_RECORD = struct.Struct("<BBHBBHIIQq")  # 32 bytes


def _pad(buf: bytearray, alignment: int) -> None:
    buf.extend(b"\0" * (-len(buf) % alignment))


class StringTable:
    """Interned strings; index order is insertion order."""

    def __init__(self) -> None:
        self._index: Dict[str, int] = {}
        self.items: List[str] = []

    def add(self, text: str) -> int:
        if text not in self._index:
            if "\0" in text:
                raise ValueError(f"string {text!r} contains a NUL character")
            self._index[text] = len(self.items)
            self.items.append(text)
        return self._index[text]

    def encode(self) -> bytes:
        encoded = [s.encode("utf-8") for s in self.items]
        table = bytearray(struct.pack("<II", len(encoded), 0))
        offset = 8 + 8 * len(encoded)
        blob = bytearray()
        for data in encoded:
            table += struct.pack("<II", offset + len(blob), len(data))
            blob += data + b"\0"
        return bytes(table + blob)


def encode_program(strings: StringTable, ops: Sequence[int],
                   constants: Sequence[Tuple[Any, ...]], words: Sequence[int],
                   values: Sequence[bytes], instructions: Sequence[bytes],
                   methods: Sequence[bytes], bundle: bytes = b"") -> bytes:
    """Assemble the sections into a file. `constants` holds (data, name string or NO_INDEX),
    or (nbytes, key string, CONSTANT_EXTERNAL) for a constant kept in a data file; `bundle`
    is the BUNDLE section's body (empty: no section)."""
    segment = bytearray()
    constant_table = bytearray(struct.pack("<II", len(constants), 0))
    extended = bool(bundle)
    for entry in constants:
        if len(entry) == 3 and entry[2] & CONSTANT_EXTERNAL:
            nbytes, key, _ = entry
            constant_table += CONSTANT_RECORD.pack(0, nbytes, key, CONSTANT_EXTERNAL)
            extended = True
            continue
        data, name = entry[0], entry[1]
        _pad(segment, CONSTANT_ALIGN)
        constant_table += CONSTANT_RECORD.pack(len(segment), len(data), name, 0)
        segment += data
    bodies = [
        (STRINGS, strings.encode()),
        (OPS, struct.pack("<II", len(ops), 0) + struct.pack(f"<{len(ops)}I", *ops)),
        (CONSTANTS, bytes(constant_table)),
        (WORDS, struct.pack(f"<{len(words)}q", *words)),
        (VALUES, b"".join(values)),
        (INSTRUCTIONS, b"".join(instructions)),
        (METHODS, b"".join(methods)),
    ]
    if bundle:
        bodies.append((BUNDLE, bundle))
    bodies.append((SEGMENT, bytes(segment)))
    minor = MINOR_EXTENSIONS if extended else MINOR
    if any(v[0] == TENSOR and v[1] & FLAG_AXES for v in values):
        minor = MINOR_AXES
    table_offset = HEADER_SIZE
    out = bytearray(HEADER_SIZE + SECTION_RECORD.size * len(bodies))
    entries = []
    for kind, body in bodies:
        _pad(out, CONSTANT_ALIGN if kind == SEGMENT else 8)
        flags = SECTION_OPTIONAL if kind == BUNDLE else 0  # a program runs without its cases
        entries.append(SECTION_RECORD.pack(kind, flags, len(out), len(body)))
        out += body
    out[table_offset:table_offset + len(b"".join(entries))] = b"".join(entries)
    seg_offset = struct.unpack_from("<IIQQ", entries[-1])[2]
    seg_end = seg_offset + len(segment)
    header_head = HEADER.pack(MAGIC, MAJOR, minor, HEADER_SIZE, len(out), len(bodies), 0,
                              table_offset, 0, 0, b"\0" * 16)[:40]
    meta_crc = zlib.crc32(header_head)
    meta_crc = zlib.crc32(bytes(out[HEADER_SIZE:seg_offset]), meta_crc)
    meta_crc = zlib.crc32(bytes(out[seg_end:]), meta_crc)
    data_crc = zlib.crc32(bytes(segment))
    out[0:HEADER_SIZE] = HEADER.pack(MAGIC, MAJOR, minor, HEADER_SIZE, len(out), len(bodies), 0,
                                     table_offset, meta_crc, data_crc, b"\0" * 16)
    return bytes(out)


def fix_checksums(data: bytearray) -> None:
    """Recompute both checksums in place, for tests that edit program bytes on purpose. Works on
    damaged files too: a section table that cannot be read means no segment."""
    header = HEADER.unpack_from(data, 0)
    count, table_offset = header[5], header[7]
    seg_offset, seg_end = len(data), len(data)
    for i in range(min(count, 64)):
        at = table_offset + i * SECTION_RECORD.size
        if at + SECTION_RECORD.size > len(data):
            break
        kind, _, offset, size = SECTION_RECORD.unpack_from(data, at)
        if kind == SEGMENT and HEADER_SIZE <= offset <= offset + size <= len(data):
            seg_offset, seg_end = offset, offset + size
            break
    crc = zlib.crc32(bytes(data[0:40]))
    crc = zlib.crc32(bytes(data[HEADER_SIZE:seg_offset]), crc)
    crc = zlib.crc32(bytes(data[seg_end:]), crc)
    struct.pack_into("<II", data, 40, crc, zlib.crc32(bytes(data[seg_offset:seg_end])))
