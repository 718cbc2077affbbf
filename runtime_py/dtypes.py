"""Element types: names <-> DLPack (code, bits) <-> numpy typestr <-> struct format chars.

Pure Python (no numpy import). Names are numpy's ("float32", "bool", ...) plus "bfloat16".
"""
from __future__ import annotations

import struct
import sys
from typing import Any, Dict, NamedTuple, Tuple

from .errors import InvalidArgument

__all__ = [
    "DType",
    "DTYPES",
    "normalize",
    "from_dlpack",
    "from_typestr",
    "from_format",
    "itemsize",
]

INT, UINT, FLOAT, BFLOAT, BOOL = 0, 1, 2, 4, 6  # rt_dtype_code (DLPack)

_ORDER = "<" if sys.byteorder == "little" else ">"


class DType(NamedTuple):
    """One element type and its spellings."""

    name: str
    code: int  # DLPack type code
    bits: int
    typestr: str  # numpy __array_interface__ typestr (native byte order)
    format: str  # struct / memoryview format char ("H" for bfloat16: its raw bits)

    @property
    def itemsize(self) -> int:
        return self.bits // 8


def _make(name: str, code: int, bits: int, kind: str, fmt: str) -> DType:
    order = "|" if bits == 8 else _ORDER
    return DType(name, code, bits, f"{order}{kind}{bits // 8}", fmt)


DTYPES: Dict[str, DType] = {
    d.name: d
    for d in (
        _make("float32", FLOAT, 32, "f", "f"),
        _make("float64", FLOAT, 64, "f", "d"),
        _make("float16", FLOAT, 16, "f", "e"),
        _make("bfloat16", BFLOAT, 16, "V", "H"),  # numpy (ml_dtypes) spells it "<V2"
        _make("int8", INT, 8, "i", "b"),
        _make("int16", INT, 16, "i", "h"),
        _make("int32", INT, 32, "i", "i"),
        _make("int64", INT, 64, "i", "q"),
        _make("uint8", UINT, 8, "u", "B"),
        _make("uint16", UINT, 16, "u", "H"),
        _make("uint32", UINT, 32, "u", "I"),
        _make("uint64", UINT, 64, "u", "Q"),
        _make("bool", BOOL, 8, "b", "?"),
    )
}

_BY_DLPACK: Dict[Tuple[int, int], str] = {(d.code, d.bits): d.name for d in DTYPES.values()}

# typestr without byte order ("f4", "b1", ...) -> name; "V2" means bfloat16 (ml_dtypes).
_BY_KIND: Dict[str, str] = {d.typestr[1:]: d.name for d in DTYPES.values()}

_ALIASES: Dict[str, str] = {
    "bool_": "bool",
    "half": "float16",
    "single": "float32",
    "double": "float64",
    "float": "float64",  # numpy and Python: float is double precision
    "int": "int64",
    "byte": "int8",
    "ubyte": "uint8",
    "short": "int16",
    "ushort": "uint16",
    "intc": "int32",
    "uintc": "uint32",
    "longlong": "int64",
    "ulonglong": "uint64",
    "bf16": "bfloat16",
}

_PY_TYPES: Dict[type, str] = {float: "float64", int: "int64", bool: "bool"}

# struct format char -> (code, signed/kind); sizes come from struct.calcsize.
_FORMAT_KIND: Dict[str, int] = {
    **{c: INT for c in "bhilqn"},
    **{c: UINT for c in "BHILQNc"},
    **{c: FLOAT for c in "efd"},
    "?": BOOL,
}


def from_dlpack(code: int, bits: int) -> str:
    """Name of a DLPack (code, bits) pair; InvalidArgument when it has none."""
    name = _BY_DLPACK.get((int(code), int(bits)))
    if name is None:
        raise InvalidArgument(f"unsupported dtype (code {code}, bits {bits})")
    return name


def from_typestr(typestr: str) -> str:
    """Name of a numpy typestr ("<f4", "|b1", "<V2" for bfloat16)."""
    if len(typestr) >= 2 and typestr[0] in "<>|=":
        order, kind = typestr[0], typestr[1:]
    else:
        order, kind = "=", typestr
    name = _BY_KIND.get(kind)
    if name is None:
        raise InvalidArgument(f"unsupported dtype {typestr!r}")
    if order not in ("|", "=", _ORDER) and DTYPES[name].bits > 8:
        raise InvalidArgument(
            f"dtype {typestr!r} is not in native byte order; byte-swap it first"
        )
    return name


def from_format(fmt: str) -> str:
    """Name of a struct / memoryview format ("f", "<d", "@l", "?")."""
    order, char = "@", fmt
    if len(fmt) == 2 and fmt[0] in "@=<>!":
        order, char = fmt[0], fmt[1]
    kind = _FORMAT_KIND.get(char) if len(char) == 1 else None
    if kind is None:
        raise InvalidArgument(f"unsupported buffer format {fmt!r}")
    if order in "<>!" and order != {"little": "<", "big": ">"}[sys.byteorder]:
        if char not in "bBc?":
            raise InvalidArgument(f"buffer format {fmt!r} is not in native byte order")
    size = struct.calcsize(("@" if order == "@" else "=") + char)
    return _BY_DLPACK[(kind, size * 8)]


def normalize(dtype: Any) -> str:
    """Canonical name of a dtype: a name, numpy dtype or scalar type, typestr or Python type."""
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return dtype
        alias = _ALIASES.get(dtype)
        if alias is not None:
            return alias
        try:
            return from_typestr(dtype)
        except InvalidArgument:
            pass
        raise InvalidArgument(f"unknown dtype {dtype!r}") from None
    if isinstance(dtype, type):
        if dtype in _PY_TYPES:
            return _PY_TYPES[dtype]
        name = getattr(dtype, "__name__", None)  # numpy scalar types: np.float32, np.bool_
        if isinstance(name, str) and (name in DTYPES or name in _ALIASES):
            return normalize(name)
    name = getattr(dtype, "name", None)  # numpy dtype objects (ml_dtypes bfloat16 too)
    if isinstance(name, str) and name in DTYPES:
        return name
    typestr = getattr(dtype, "str", None)
    if isinstance(typestr, str):
        return from_typestr(typestr)
    raise InvalidArgument(f"unknown dtype {dtype!r}")


def get(dtype: Any) -> DType:
    """The DType record of anything normalize() accepts."""
    return DTYPES[normalize(dtype)]


def itemsize(dtype: Any) -> int:
    """Bytes per element."""
    return DTYPES[normalize(dtype)].bits // 8


def typestr(dtype: Any) -> str:
    """numpy typestr of a dtype."""
    return DTYPES[normalize(dtype)].typestr


def bfloat16_bits(value: float) -> int:
    """The bits of float `value` as bfloat16: through float32, rounded to nearest even, as the
    library's cast does; a NaN stays a NaN (quiet, with its sign), where rounding its mantissa
    alone could carry into the sign or exponent."""
    (bits,) = struct.unpack("=I", struct.pack("=f", value))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x0040
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
