"""Which importer a file or buffer needs, from its first bytes.

Our programs start with the magic b"\x89RTP"; ExecuTorch programs carry the FlatBuffer file
identifier "ET12" at bytes 4..8; an ONNX model (a protobuf, with no magic) is recognised by its
".onnx" suffix or by its first byte, the tag of ModelProto's ir_version field (0x08).
"""
from __future__ import annotations

import os
import stat
from typing import Any

RUNTIME, EXECUTORCH, ONNX = "runtime", "executorch", "onnx"
_MAGIC = b"\x89RTP"


def _head(source: Any) -> bytes:
    if isinstance(source, (str, os.PathLike)):
        try:
            if not stat.S_ISREG(os.stat(source).st_mode):
                return b""  # a FIFO would block the read: the loader refuses it by name
            with open(os.fspath(source), "rb") as f:
                return f.read(16)
        except OSError:
            return b""  # the loader reports the missing file
    try:
        with memoryview(source) as view:
            if view.c_contiguous:
                return bytes(view.cast("B")[:16])
            return view.tobytes()[:16]
    except (TypeError, ValueError):
        return b""  # not a buffer: the program loader says what it accepts


def kind_of(source: Any) -> str:
    """RUNTIME, EXECUTORCH or ONNX for a path or a buffer."""
    head = _head(source)
    if head[:4] == _MAGIC:
        return RUNTIME
    if head[4:8] == b"ET12":
        return EXECUTORCH
    is_path = isinstance(source, (str, os.PathLike))
    if (is_path and os.fspath(source).lower().endswith(".onnx")) or head[:1] == b"\x08":
        return ONNX
    return RUNTIME  # let the program loader say what is wrong with it


def program_source(source: Any, **onnx_options: Any) -> Any:
    """`source` itself when it holds one of our programs, else its conversion (bytes);
    onnx_options (input_shapes, dynamic_bounds) go to the ONNX importer."""
    kind = kind_of(source)
    if kind == EXECUTORCH:
        from . import executorch

        return executorch.convert(source)
    if kind == ONNX:
        from . import onnx

        return onnx.convert(source if not isinstance(source, memoryview) else source.tobytes(),
                            **onnx_options)
    return source
