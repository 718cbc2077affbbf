"""Import ONNX models (needs the optional `onnx` package).

    program_bytes = runtime_py.onnx.convert("model.onnx")
    module = runtime_py.onnx.load("model.onnx", dynamic_bounds={"x": {0: 64}})
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from ..module import Module
from ._convert import convert
from ._registry import ConversionError, supported_ops

__all__ = ["convert", "load", "ConversionError", "supported_ops"]


def load(model_or_path: Any, *, input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
         dynamic_bounds: Optional[Mapping[str, Any]] = None, external_data: Any = None,
         value_bounds: Optional[Mapping[str, Sequence[float]]] = None,
         kv_cache: Optional[Mapping[str, Any]] = None, **method_options: Any) -> Module:
    """Convert a model and load it as a Module (method "forward"); with external_data the
    weights go to that data file, which the Module maps."""
    data = convert(model_or_path, input_shapes=input_shapes, dynamic_bounds=dynamic_bounds,
                   external_data=external_data, value_bounds=value_bounds, kv_cache=kv_cache)
    files = [external_data] if external_data is not None else []
    return Module(data, data_files=files, **method_options)
