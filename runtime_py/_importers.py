"""The importers the loader knows, and which one a file or buffer needs, from its first bytes.

The runtime layer never imports an importer: each one registers here how to recognise its
files and the module that converts them, which is imported only when a model needs it
(runtime_py/__init__.py registers ONNX and ExecuTorch). Our own programs start with the magic
b"\x89RTP" and need no importer.
"""
from __future__ import annotations

import importlib
import os
import stat
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

_MAGIC = b"\x89RTP"


class Importer(NamedTuple):
    name: str  # "ONNX": names the format in messages
    what: str  # "an ONNX model": names a file of the format in messages
    module: str  # "runtime_py.onnx": its convert(source, **options) returns program bytes
    matches: Callable[[bytes, Optional[str]], bool]  # (the first 16 bytes, the path or None)
    options: Tuple[str, ...] = ()  # the load() options it takes ("input_shapes", ...)

    def convert(self, source: Any, **options: Any) -> bytes:
        if isinstance(source, memoryview):
            source = source.tobytes()
        return importlib.import_module(self.module).convert(source, **options)


_REGISTERED: List[Importer] = []


def register(importer: Importer) -> None:
    """Let runtime_py.load, the CLI and Module convert this importer's files; a later
    registration of the same name replaces the earlier one."""
    _REGISTERED[:] = [i for i in _REGISTERED if i.name != importer.name] + [importer]


def registered() -> Tuple[Importer, ...]:
    return tuple(_REGISTERED)


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


def importer_for(source: Any) -> Optional[Importer]:
    """The importer a path or buffer needs; None for a program of ours, or for something no
    importer recognises (the program loader then says what is wrong with it)."""
    if not isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview)):
        return None
    head = _head(source)
    if head[:4] == _MAGIC:
        return None
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    return next((i for i in _REGISTERED if i.matches(head, path)), None)


def program_source(source: Any, **options: Any) -> Any:
    """`source` itself when it holds one of our programs, else its conversion (bytes); options
    go to the importer."""
    importer = importer_for(source)
    return source if importer is None else importer.convert(source, **options)
