"""runtime_py: Python bindings of libruntime (cffi ABI mode; numpy optional).

    with runtime_py.Program.load("mlp.rtp") as program:
        with program.load_method("forward") as forward:
            (y,) = forward(x)
"""
from __future__ import annotations

from typing import Any

from .errors import (
    ClosedError,
    Error,
    Internal,
    InvalidArgument,
    InvalidProgram,
    InvalidState,
    NotFound,
    OutOfMemory,
    RuntimeIOError,
    Unsupported,
    VerificationError,
)
from .bundled import BundledResult, BundledTest
from .method import Method, MethodMeta, ProfileEvent, TensorInfo
from .module import Module, load
from .program import Program
from .tensor import Tensor
from .library import (backend_available, get_num_threads, registered_ops, set_num_threads,
                      set_worker_wait)
from . import _importers

__all__ = [
    "Program",
    "Method",
    "MethodMeta",
    "TensorInfo",
    "ProfileEvent",
    "Tensor",
    "Module",
    "load",
    "ProgramBuilder",
    "Error",
    "InvalidArgument",
    "InvalidState",
    "InvalidProgram",
    "NotFound",
    "Unsupported",
    "OutOfMemory",
    "RuntimeIOError",
    "Internal",
    "ClosedError",
    "VerificationError",
    "BundledTest",
    "BundledResult",
    "registered_ops",
    "set_num_threads",
    "get_num_threads",
    "set_worker_wait",
    "backend_available",
    "__version__",
]

_FALLBACK_VERSION = "0.1.0"


def _is_onnx(head: bytes, path: Any) -> bool:
    # A protobuf has no magic: the ".onnx" suffix, or the tag of ModelProto's ir_version (0x08).
    return (path is not None and path.lower().endswith(".onnx")) or head[:1] == b"\x08"


# The importers sit above the runtime, which finds them here; each is imported on first use.
_importers.register(_importers.Importer(
    "ExecuTorch", "an ExecuTorch program", "runtime_py.executorch",
    lambda head, path: head[4:8] == b"ET12"))  # the FlatBuffer file identifier
_importers.register(_importers.Importer(
    "ONNX", "an ONNX model", "runtime_py.onnx", _is_onnx,
    ("input_shapes", "dynamic_bounds", "value_bounds")))


def __getattr__(name: str) -> Any:
    # Lazy: importing runtime_py must neither dlopen the library nor import the compiler.
    if name == "__version__":
        from ._ffi import get_lib, to_str

        try:
            version = to_str(get_lib().rt_version_string()) or _FALLBACK_VERSION
        except OSError:
            return _FALLBACK_VERSION  # not cached: the library may load later
        globals()["__version__"] = version
        return version
    if name == "ProgramBuilder":
        from .compiler import ProgramBuilder

        globals()["ProgramBuilder"] = ProgramBuilder
        return ProgramBuilder
    raise AttributeError(f"module 'runtime_py' has no attribute {name!r}")
