"""An onnx.backend.base.Backend for the runtime, as onnxruntime.backend provides one, so the
ONNX ecosystem's own test suites (onnx.backend.test.BackendTest) run against it:

    import runtime_py.onnx.backend as backend
    rep = backend.prepare(model)          # convert + load
    outputs = rep.run([x])                # numpy arrays
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx.backend.base as base

from ..program import Program
from ._convert import convert, load_model


class RuntimeBackendRep(base.BackendRep):
    """A converted, loaded model: run(inputs) returns its outputs as numpy arrays."""

    def __init__(self, program: Program, input_names: Sequence[str], output_names: Sequence[str],
                 **method_options: Any) -> None:
        self.program = program
        self.method = program.load_method("forward", **method_options)
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def run(self, inputs: Union[Sequence[Any], Dict[str, Any], Any], **kwargs: Any) -> Tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            args = [inputs[name] for name in self.input_names]
        elif isinstance(inputs, (list, tuple)):
            args = list(inputs)
        else:
            args = [inputs]
        outputs = self.method(*[np.asarray(a) for a in args])
        # Tensor.numpy(), not np.asarray: it gives bfloat16 as ml_dtypes' bfloat16, not void.
        return tuple(o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outputs)


class RuntimeBackend(base.Backend):
    """Backend entry points; options (input_shapes, dynamic_bounds, value_bounds, num_threads,
    ...) pass through prepare's keyword arguments."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> RuntimeBackendRep:
        if not cls.supports_device(device):
            raise RuntimeError(f"device {device!r} is not supported by this backend")
        model = load_model(model)
        convert_options = {k: kwargs.pop(k) for k in ("input_shapes", "dynamic_bounds",
                                                      "value_bounds") if k in kwargs}
        data = convert(model, **convert_options)
        initializers = {i.name for i in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in initializers]
        outputs = [o.name for o in model.graph.output]
        return RuntimeBackendRep(Program.load(data), inputs, outputs, **kwargs)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> Tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Sequence[Any]] = None, **kwargs: Any) -> Tuple[np.ndarray, ...]:
        raise NotImplementedError("run_node: build a one-node model and use run_model")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().split(":")[0] == "CPU"


prepare = RuntimeBackend.prepare
run_model = RuntimeBackend.run_model
run_node = RuntimeBackend.run_node
supports_device = RuntimeBackend.supports_device
is_compatible = RuntimeBackend.is_compatible
