"""Data files (`.rtd`): named constants kept apart from programs (spec: docs/format.md).

A program built with `ProgramBuilder.save(path, external_data="weights.rtd")` names its
weights by key and leaves their bytes here; `Program.load(path, data_files=["weights.rtd"])`
maps this file read-only and uses each entry in place. Several programs may share one data
file: writing into an existing file keeps its entries and adds the missing ones.

    entries = read_data_file("weights.rtd")     # {key: DataEntry(dtype, shape, data)}
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import Any, Dict, NamedTuple, Tuple

from .. import dtypes as _dtypes
from .._files import write_atomically
from ..errors import InvalidProgram

__all__ = ["DataEntry", "encode_data_file", "decode_data_file", "read_data_file",
           "write_data_file"]

MAGIC = b"\x89RTD\r\n\x1a\n"
MAJOR, MINOR = 1, 0
HEADER_SIZE = 64
ALIGN = 64
HEADER = struct.Struct("<8sHHIQIIQQQII")   # 64 bytes
ENTRY = struct.Struct("<QQIIBBHIII")       # 40 bytes


class DataEntry(NamedTuple):
    """One named tensor of a data file: dtype name, shape, dense row-major bytes."""

    dtype: str
    shape: Tuple[int, ...]
    data: bytes


def _pad(buf: bytearray, alignment: int) -> None:
    buf.extend(b"\0" * (-len(buf) % alignment))


def encode_data_file(entries: Dict[str, DataEntry]) -> bytes:
    """A data file holding `entries`, keys in sorted order (the same entries always give the
    same bytes)."""
    keys = sorted(entries)
    table = bytearray(ENTRY.size * len(keys))
    segment = bytearray()
    records = []
    for key in keys:
        dtype, shape, data = entries[key]
        if not key or "\0" in key:
            raise ValueError(f"data file key {key!r} is empty or contains a NUL character")
        d = _dtypes.get(_dtypes.normalize(dtype))
        expected = d.itemsize
        for s in shape:
            expected *= int(s)
        if expected != len(data):
            raise ValueError(f"data file entry '{key}': {len(data)} bytes do not hold "
                             f"{d.name}{list(shape)}")
        shape_at = len(table)
        table += struct.pack(f"<{len(shape)}q", *shape)
        key_bytes = key.encode("utf-8")
        key_at = len(table)
        table += key_bytes + b"\0"
        _pad(table, 8)
        _pad(segment, ALIGN)
        records.append(ENTRY.pack(len(segment), len(data), key_at, len(key_bytes), d.code,
                                  d.bits, 1, len(shape), shape_at, 0))
        segment += data
    table[0:ENTRY.size * len(keys)] = b"".join(records)
    data_offset = HEADER_SIZE + len(table)
    data_offset += -data_offset % ALIGN
    file_size = data_offset + len(segment)
    head = HEADER.pack(MAGIC, MAJOR, MINOR, HEADER_SIZE, file_size, len(keys), 0, HEADER_SIZE,
                       len(table), data_offset, 0, 0)
    meta_crc = zlib.crc32(bytes(table), zlib.crc32(head[:56]))
    data_crc = zlib.crc32(bytes(segment))
    head = head[:56] + struct.pack("<II", meta_crc, data_crc)
    out = bytearray(head) + table
    _pad(out, ALIGN)
    return bytes(out + segment)


def decode_data_file(data: bytes) -> Dict[str, DataEntry]:
    """The entries of a data file, for merging and inspection. Checks what it reads; the C
    reader (used by Program.load) is the complete verifier."""
    if len(data) < HEADER_SIZE:
        raise InvalidProgram(f"data file is {len(data)} bytes, shorter than its header")
    (magic, major, _, _, size, count, _, table_at, table_size, data_at, meta_crc,
     _) = HEADER.unpack_from(data)
    if magic != MAGIC or major != MAJOR:
        raise InvalidProgram("not a libruntime data file (bad magic or version)")
    if size != len(data) or table_at + table_size > len(data) or data_at > len(data):
        raise InvalidProgram("data file is truncated or its table lies outside it")
    if zlib.crc32(data[table_at:table_at + table_size], zlib.crc32(data[:56])) != meta_crc:
        raise InvalidProgram("data file metadata checksum mismatch: the file is corrupted")
    try:
        return _entries(data, count, table_at, data_at)
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise InvalidProgram(f"data file is malformed: {e}") from None


def _entries(data: bytes, count: int, table_at: int, data_at: int) -> Dict[str, DataEntry]:
    out = {}
    for i in range(count):
        offset, nbytes, key_at, key_len, code, bits, _, rank, shape_at, _ = ENTRY.unpack_from(
            data, table_at + ENTRY.size * i)
        key = data[table_at + key_at:table_at + key_at + key_len].decode("utf-8")
        shape = struct.unpack_from(f"<{rank}q", data, table_at + shape_at)
        start = data_at + offset
        out[key] = DataEntry(_dtypes.from_dlpack(code, bits), tuple(shape),
                             bytes(data[start:start + nbytes]))
    return out


def read_data_file(path: Any) -> Dict[str, DataEntry]:
    with open(os.fspath(path), "rb") as f:
        return decode_data_file(f.read())


def write_data_file(path: Any, entries: Dict[str, DataEntry], merge: bool = True) -> None:
    """Write `entries` to `path` atomically (a process that has the old file mapped keeps
    reading the old bytes). With merge, the entries of an existing file are kept; a key present
    in both must hold the same dtype, shape and bytes."""
    path = os.fspath(path)
    combined: Dict[str, DataEntry] = {}
    if merge and os.path.exists(path):
        combined.update(read_data_file(path))
    for key, entry in entries.items():
        old = combined.get(key)
        if old is not None and old != entry:
            raise ValueError(f"data file '{path}' already holds key '{key}' with other "
                             f"contents ({old.dtype}{list(old.shape)})")
        combined[key] = entry
    write_atomically(path, encode_data_file(combined))

